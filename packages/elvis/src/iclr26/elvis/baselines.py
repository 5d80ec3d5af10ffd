"""Peers in the scorer interface ``scorer(queries, database) -> (P,) scores`` (design notes §3).

Mutual-NN counting, naive sum-of-max similarity (the burstiness foil), ratio test + MAGSAC
homography inliers (OpenCV), and AMES-lite: a small AMES-style transformer decoder (self- and
cross-image attention, a matching token), i.e. a re-ranker that works in representation space.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import Tensor, nn

from iclr26.elvis.features import LocalFeatures, score_pairs
from iclr26.elvis.model import check_pair_inputs
from iclr26.shared import check_int, check_range

__all__ = ["AMESLite", "mnn_count", "ratio_magsac_inliers", "sum_max_similarity"]


def _pairs(queries: Sequence[LocalFeatures], database: Sequence[LocalFeatures]) -> None:
    if len(queries) != len(database):
        raise ValueError(f"got {len(queries)} queries and {len(database)} database items")
    for q, d in zip(queries, database, strict=True):
        if q.dim != d.dim:
            raise ValueError(f"descriptor dims differ: {q.dim} vs {d.dim}")


def _cosines(q: LocalFeatures, d: LocalFeatures) -> Tensor:
    return (
        F.normalize(torch.from_numpy(q.desc), dim=1)
        @ F.normalize(torch.from_numpy(d.desc), dim=1).T
    )


def mnn_count(
    queries: Sequence[LocalFeatures], database: Sequence[LocalFeatures], *, threshold: float = 0.8
) -> NDArray[np.float64]:
    """Number of mutual nearest neighbours with cosine above ``threshold``, per pair."""
    _pairs(queries, database)
    check_range(threshold, "threshold", low=-1.0, high=1.0)
    out = np.zeros(len(queries))
    for k, (q, d) in enumerate(zip(queries, database, strict=True)):
        sim = _cosines(q, d)
        best_j = sim.argmax(1)
        best_i = sim.argmax(0)
        rows = torch.arange(sim.shape[0])
        mutual = (best_i[best_j] == rows) & (sim[rows, best_j] > threshold)
        out[k] = float(mutual.sum())
    return out


def sum_max_similarity(
    queries: Sequence[LocalFeatures], database: Sequence[LocalFeatures], *, threshold: float = 0.8
) -> NDArray[np.float64]:
    """Naive counting: database descriptors whose best query cosine exceeds ``threshold``.

    No one-to-one constraint, so duplicated (bursty) descriptors are counted again and again.
    """
    _pairs(queries, database)
    check_range(threshold, "threshold", low=-1.0, high=1.0)
    return np.array(
        [
            float((_cosines(q, d).amax(0) > threshold).sum())
            for q, d in zip(queries, database, strict=True)
        ]
    )


def ratio_magsac_inliers(
    queries: Sequence[LocalFeatures],
    database: Sequence[LocalFeatures],
    *,
    ratio: float = 0.85,
    px: float = 5.0,
    seed: int = 0,
) -> NDArray[np.float64]:
    """Spatial verification: Lowe ratio test, then a MAGSAC homography; score = inlier count.

    Needs keypoint positions (``LocalFeatures.xy``). Pairs with fewer than 4 tentative matches
    score their match count. OpenCV's RANSAC seed is set from ``seed`` for repeatability.
    """
    _pairs(queries, database)
    check_range(ratio, "ratio", low=0.0, high=1.0)
    check_range(px, "px", low=0.0, low_inclusive=False)
    if not np.isfinite(px):
        raise ValueError(f"px must be finite, got {px!r}")
    check_int(seed, "seed", low=0)
    out = np.zeros(len(queries))
    cv2.setRNGSeed(seed)
    for k, (q, d) in enumerate(zip(queries, database, strict=True)):
        if q.xy is None or d.xy is None:
            raise ValueError("ratio_magsac_inliers needs keypoint positions (LocalFeatures.xy)")
        if len(d) < 2:
            continue
        sim = _cosines(q, d)
        top2 = sim.topk(2, dim=1)
        # ratio on Euclidean distances of unit vectors: sqrt(2 − 2 cos)
        dist = torch.sqrt((2 - 2 * top2.values).clamp_min(0))
        keep = (dist[:, 0] < ratio * dist[:, 1]).numpy()
        qi = np.nonzero(keep)[0]
        if len(qi) < 4:
            out[k] = float(len(qi))
            continue
        src = q.xy[qi]
        dst = d.xy[top2.indices[qi, 0].numpy()]
        _, inl = cv2.findHomography(src, dst, cv2.USAC_MAGSAC, px, maxIters=2000, confidence=0.999)
        out[k] = 0.0 if inl is None else float(inl.sum())
    return out


def _no_pad(mask: Tensor) -> Tensor:
    return torch.zeros_like(mask[:, :1])


class _AMESLayer(nn.Module):
    """One AMES decoder layer: within-image self-attention, cross-image attention, feed-forward.

    The matching token attends to every token in both sub-layers; an image's tokens attend to the
    matching token plus their own image (self) or the other image (cross): AMES's ``sa_mask`` /
    ``ca_mask``, computed as separate attention calls so no masked-out score is ever formed.
    Pre-norm residuals.
    """

    def __init__(self, dim: int, n_heads: int, ff_dim: int) -> None:
        super().__init__()
        self.norm_self, self.norm_cross, self.norm_ff = (nn.LayerNorm(dim) for _ in range(3))
        self.self_attn = nn.MultiheadAttention(dim, n_heads, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(dim, n_heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.GELU(), nn.Linear(ff_dim, dim))

    @staticmethod
    def _attend(attn: nn.MultiheadAttention, x: Tensor, ctx: list[Tensor], pads: list[Tensor]):
        keys = torch.cat(ctx, dim=1)
        return attn(x, keys, keys, key_padding_mask=torch.cat(pads, dim=1), need_weights=False)[0]

    def forward(self, t: Tensor, q: Tensor, d: Tensor, q_mask: Tensor, d_mask: Tensor):
        t_pad = _no_pad(q_mask)
        for norm, attn, cross in (
            (self.norm_self, self.self_attn, False),
            (self.norm_cross, self.cross_attn, True),
        ):
            ht, hq, hd = norm(t), norm(q), norm(d)
            q_ctx, q_pad = (hd, d_mask) if cross else (hq, q_mask)
            d_ctx, d_pad = (hq, q_mask) if cross else (hd, d_mask)
            t = t + self._attend(attn, ht, [ht, hq, hd], [t_pad, q_mask, d_mask])
            q, d = (
                q + self._attend(attn, hq, [ht, q_ctx], [t_pad, q_pad]),
                d + self._attend(attn, hd, [ht, d_ctx], [t_pad, d_pad]),
            )
        return (
            t + self.ff(self.norm_ff(t)),
            q + self.ff(self.norm_ff(q)),
            d + self.ff(self.norm_ff(d)),
        )


class AMESLite(nn.Module):
    """A small representation-space re-ranker in the AMES lineage (Suma et al., ECCV 2024).

    As in AMES: descriptors are L2-normalised and remapped (Linear + LayerNorm to
    ``model_dim``, the same remap as ELViS); a learned matching token is prepended; each of the
    ``n_layers`` decoder layers runs within-image self-attention, then cross-image attention
    (AMES's asymmetric ``sa_mask`` / ``ca_mask``: image tokens see their own image, resp. the
    other image, plus the matching token, which sees everything), then a feed-forward block;
    a linear classifier on the matching token gives the pair logit. Weights are truncated-normal
    (std 0.02), like AMES. AMES uses 5 layers at width 128 with 2 heads; "lite" keeps the width
    and heads and uses 2 layers. ``max_tokens`` optionally keeps only the first tokens of each
    image (AMES's memory knob; ``None`` = all).
    """

    def __init__(
        self,
        in_dim: int,
        model_dim: int = 128,
        n_layers: int = 2,
        n_heads: int = 2,
        ff_mult: int = 2,
        *,
        max_tokens: int | None = None,
    ) -> None:
        super().__init__()
        check_int(in_dim, "in_dim", low=1)
        check_int(n_layers, "n_layers", low=1)
        if max_tokens is not None:
            check_int(max_tokens, "max_tokens", low=1)
        self.in_dim, self.max_tokens = in_dim, max_tokens
        self.remap = nn.Sequential(nn.Linear(in_dim, model_dim), nn.LayerNorm(model_dim))
        self.match_token = nn.Parameter(torch.zeros(1, 1, model_dim))
        self.layers = nn.ModuleList(
            _AMESLayer(model_dim, n_heads, ff_mult * model_dim) for _ in range(n_layers)
        )
        self.out = nn.Sequential(nn.LayerNorm(model_dim), nn.Linear(model_dim, 1))
        nn.init.trunc_normal_(self.match_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.MultiheadAttention):
                nn.init.trunc_normal_(m.in_proj_weight, std=0.02)
                nn.init.zeros_(m.in_proj_bias)

    def logits(
        self, q: Tensor, d: Tensor, q_mask: Tensor | None = None, d_mask: Tensor | None = None
    ) -> Tensor:
        """(B,) pair logits for (B, m, D) / (B, n, D) descriptors with True-is-padding masks."""
        q, d, q_mask, d_mask = check_pair_inputs(q, d, q_mask, d_mask, self.in_dim)
        if self.max_tokens is not None:
            k = self.max_tokens
            q, d, q_mask, d_mask = q[:, :k], d[:, :k], q_mask[:, :k], d_mask[:, :k]
        tq = self.remap(F.normalize(q, dim=-1))
        td = self.remap(F.normalize(d, dim=-1))
        t = self.match_token.expand(q.shape[0], 1, -1)
        for layer in self.layers:
            t, tq, td = layer(t, tq, td, q_mask, d_mask)
        return self.out(t[:, 0]).squeeze(-1)

    forward = logits

    @torch.no_grad()
    def score(
        self,
        queries: Sequence[LocalFeatures],
        database: Sequence[LocalFeatures],
        *,
        batch_pairs: int = 64,
        max_len: int | None = None,
    ) -> NDArray[np.float64]:
        """Logits for the pairs (queries[i], database[i]), batched; the scorer interface."""
        _pairs(queries, database)
        return score_pairs(self.logits, queries, database, batch_pairs=batch_pairs, max_len=max_len)

    def num_parameters(self) -> int:
        """Number of parameters."""
        return int(sum(p.numel() for p in self.parameters()))
