"""Peers in the scorer interface ``scorer(queries, database) -> (P,) scores`` (design notes §3).

Mutual-NN counting, naive sum-of-max similarity (the burstiness foil), ratio test + MAGSAC
homography inliers (OpenCV), and AMES-lite: a small transformer over the concatenated query and
database tokens, i.e. a re-ranker that works in representation space.
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


class AMESLite(nn.Module):
    """A small representation-space re-ranker in the AMES lineage (Suma et al., ECCV 2024).

    Tokens: the same remap as ELViS (Linear + LayerNorm to ``model_dim``) plus a learned
    query/database type embedding; a learned matching token is prepended and a
    ``n_layers``-layer transformer encoder (``n_heads`` heads) attends over both images' tokens
    with padding masks; the matching token's output gives the logit. AMES uses 5 decoder layers
    and asymmetric masks; this "lite" version keeps the width (128) and uses 2 layers by default.
    """

    def __init__(
        self,
        in_dim: int,
        model_dim: int = 128,
        n_layers: int = 2,
        n_heads: int = 2,
        ff_mult: int = 2,
    ) -> None:
        super().__init__()
        check_int(in_dim, "in_dim", low=1)
        self.in_dim = in_dim
        self.remap = nn.Sequential(nn.Linear(in_dim, model_dim), nn.LayerNorm(model_dim))
        self.type_embed = nn.Parameter(torch.zeros(2, model_dim))
        self.match_token = nn.Parameter(torch.zeros(1, 1, model_dim))
        layer = nn.TransformerEncoderLayer(
            model_dim, n_heads, ff_mult * model_dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.out = nn.Sequential(nn.LayerNorm(model_dim), nn.Linear(model_dim, 1))

    def logits(
        self, q: Tensor, d: Tensor, q_mask: Tensor | None = None, d_mask: Tensor | None = None
    ) -> Tensor:
        """(B,) pair logits for (B, m, D) / (B, n, D) descriptors with True-is-padding masks."""
        q, d, q_mask, d_mask = check_pair_inputs(q, d, q_mask, d_mask, self.in_dim)
        tq = self.remap(q) + self.type_embed[0]
        td = self.remap(d) + self.type_embed[1]
        tok = self.match_token.expand(q.shape[0], 1, -1)
        x = torch.cat([tok, tq, td], dim=1)
        pad = torch.cat([torch.zeros_like(q_mask[:, :1]), q_mask, d_mask], dim=1)
        h = self.encoder(x, src_key_padding_mask=pad)
        return self.out(h[:, 0]).squeeze(-1)

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
