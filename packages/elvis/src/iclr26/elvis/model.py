"""The ELViS model (§1.2): remap, gains, dustbin OT, best-match vote; plus the official-key loader.

Everything after the cosine matrix sees scalars only (similarities and one gain per descriptor):
that is what "similarity space" means operationally. Capacity sits in the remap (D→128 + LayerNorm)
and the gain MLP; the vote is a 1→16→1 function of each descriptor's best transport mass.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import Tensor, nn

from iclr26.elvis.features import LocalFeatures, score_pairs
from iclr26.elvis.ot import DOMAINS, dustbin_transport_unchecked
from iclr26.shared import check_choice, check_int

__all__ = [
    "OFFICIAL_KEY_MAP",
    "ELViS",
    "ELViSExplanation",
    "check_pair_inputs",
    "load_official_checkpoint",
]

HEAD_INPUTS = ("normalized", "raw")


def check_pair_inputs(
    q: Tensor, d: Tensor, q_mask: Tensor | None, d_mask: Tensor | None, in_dim: int | None = None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate a batch of pairs at the public boundary; returns (q, d, q_mask, d_mask).

    q: (B, m, D), d: (B, n, D) float; masks (B, m) / (B, n) bool with True = padding (None = no
    padding). Raises ``ValueError``/``TypeError`` naming the argument.
    """
    for name, x in (("q", q), ("d", d)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 3:
            raise ValueError(f"{name} must have shape (B, L, D), got {tuple(x.shape)}")
        if x.shape[1] == 0:
            raise ValueError(f"{name} holds an empty descriptor set (shape {tuple(x.shape)})")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor, got {x.dtype}")
        if not torch.isfinite(x).all():
            raise ValueError(f"{name} contains NaN or inf")
    if q.shape[0] != d.shape[0]:
        raise ValueError(
            f"q and d must hold the same number of pairs, got {q.shape[0]}, {d.shape[0]}"
        )
    if q.shape[2] != d.shape[2]:
        raise ValueError(f"descriptor dims differ: q has D={q.shape[2]}, d has D={d.shape[2]}")
    if in_dim is not None and q.shape[2] != in_dim:
        raise ValueError(f"descriptors must have D={in_dim} (model in_dim), got {q.shape[2]}")
    masks = []
    for name, x, mask in (("q_mask", q, q_mask), ("d_mask", d, d_mask)):
        if mask is None:
            mask = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
        if not isinstance(mask, Tensor):
            raise TypeError(f"{name} must be a bool torch.Tensor, got {type(mask).__name__}")
        if tuple(mask.shape) != tuple(x.shape[:2]):
            raise ValueError(
                f"{name} must have shape {tuple(x.shape[:2])}, got {tuple(mask.shape)}"
            )
        mask = mask.bool()
        if mask.all(dim=1).any():
            raise ValueError(f"{name} masks every descriptor of some pair (empty descriptor set)")
        masks.append(mask)
    return q, d, masks[0], masks[1]


@dataclass(frozen=True)
class ELViSExplanation:
    """What ELViS computed for one pair (:meth:`ELViS.explain`); numpy arrays, real rows only.

    similarity: (m, n) cosines S; plan: (m, n) rescaled plan P̃; row_best/col_best: (m,)/(n,)
    best masses r_i, c_j; row_match/col_match: argmax indices; row_votes/col_votes: σ(f(·));
    row_gain/col_gain: z_i, z'_j; score: s = Σ votes.
    """

    similarity: NDArray[np.float32]
    plan: NDArray[np.float32]
    row_best: NDArray[np.float32]
    col_best: NDArray[np.float32]
    row_match: NDArray[np.int64]
    col_match: NDArray[np.int64]
    row_votes: NDArray[np.float32]
    col_votes: NDArray[np.float32]
    row_gain: NDArray[np.float32]
    col_gain: NDArray[np.float32]
    score: float


class ELViS(nn.Module):
    """ELViS similarity (§1.2): ``s(X, Y) = Σ_i σ(f(r_i)) + Σ_j σ(f(c_j))``.

    Steps: x̂ = φ(x)/‖φ(x)‖ with φ = LayerNorm(W x + b) (W: model_dim × in_dim); S = x̂ ŷᵀ;
    gains z = tanh(h(x̂)) with h: model_dim → gain_hidden → GELU → 1; augmented S̄ with corner α;
    T Sinkhorn iterations on τ·S̄ (:func:`~iclr26.elvis.ot.dustbin_transport`); best mass per
    descriptor; vote f: 1 → vote_hidden → LayerNorm → GELU → 1, then a sigmoid, summed over real
    descriptors. ``forward`` returns the raw vote count s (official behaviour); the training head
    g: 1 → head_hidden → GELU → 1 is used only by :meth:`logits`.

    Args:
        in_dim: descriptor dimension D (768 for the paper's DINOv2 tokens, 128 for SIFT).
        model_dim: remap width (paper 128).
        gain_hidden: hidden width of the gain MLP h (paper 128).
        vote_hidden: hidden width of the vote f (paper 16).
        head_hidden: hidden width of the training head g (paper 64).
        temperature: τ = 1/ε (paper 10, fixed). Hand-crafted descriptors need larger values; see
            :func:`~iclr26.elvis.calibrate_temperature`.
        n_iters: Sinkhorn iterations T (paper 10).
        dustbin_init: initial corner α (paper 1.0).
        learn_temperature: learn log τ (the paper keeps it fixed).
        domain: ``"log"`` (paper) or ``"exp"`` Sinkhorn; same result.
        head_input: ``"normalized"`` feeds g with s/(m+n) (our stabilising choice, [reconstructed])
            or ``"raw"`` with s (official code).
    """

    def __init__(
        self,
        in_dim: int,
        model_dim: int = 128,
        gain_hidden: int = 128,
        vote_hidden: int = 16,
        head_hidden: int = 64,
        temperature: float = 10.0,
        n_iters: int = 10,
        dustbin_init: float = 1.0,
        *,
        learn_temperature: bool = False,
        domain: str = "log",
        head_input: str = "normalized",
    ) -> None:
        super().__init__()
        for name, val in (
            ("in_dim", in_dim), ("model_dim", model_dim), ("gain_hidden", gain_hidden),
            ("vote_hidden", vote_hidden), ("head_hidden", head_hidden),
        ):  # fmt: skip
            check_int(val, name, low=1)
        check_int(n_iters, "n_iters", low=0)
        if not (isinstance(temperature, int | float) and temperature > 0):
            raise ValueError(f"temperature must be a positive number, got {temperature!r}")
        check_choice(domain, "domain", DOMAINS)
        check_choice(head_input, "head_input", HEAD_INPUTS)
        self.in_dim, self.model_dim = in_dim, model_dim
        self.n_iters, self.domain, self.head_input = n_iters, domain, head_input
        self.remap = nn.Sequential(nn.Linear(in_dim, model_dim), nn.LayerNorm(model_dim))
        self.gain_mlp = nn.Sequential(
            nn.Linear(model_dim, gain_hidden), nn.GELU(), nn.Linear(gain_hidden, 1)
        )
        self.corner = nn.Parameter(torch.tensor(float(dustbin_init)))
        log_t = torch.tensor(math.log(temperature))
        if learn_temperature:
            self.log_temperature = nn.Parameter(log_t)
        else:
            self.register_buffer("log_temperature", log_t)
        self.vote_mlp = nn.Sequential(
            nn.Linear(1, vote_hidden),
            nn.LayerNorm(vote_hidden),
            nn.GELU(),
            nn.Linear(vote_hidden, 1),
        )
        self.head = nn.Sequential(nn.Linear(1, head_hidden), nn.GELU(), nn.Linear(head_hidden, 1))

    # ------------------------------------------------------------------ initialisation
    @torch.no_grad()
    def init_untrained_(
        self,
        *,
        gain: float = 0.7,
        vote_threshold: float = 0.3,
        vote_slope: float = 10.0,
        seed: int = 0,
    ) -> ELViS:
        """Stabilising initialisation (design notes §6.3; not in the official code).

        Remap = identity when ``in_dim == model_dim``; constant gains ``z = gain``; the vote is
        fitted to ``σ(slope·(x − threshold))`` on x ∈ [0, 1.2]. The result is the "untrained OT +
        vote" scorer, and the starting point from which :func:`~iclr26.elvis.fit` does not
        collapse. Returns ``self``.
        """
        if not -1.0 < gain < 1.0:
            raise ValueError(f"gain must lie in (-1, 1), got {gain}")
        gen = torch.Generator().manual_seed(seed)
        lin = self.remap[0]
        if self.in_dim == self.model_dim:
            lin.weight.copy_(torch.eye(self.model_dim))
        else:
            lin.weight.normal_(0.0, 1.0 / math.sqrt(self.in_dim), generator=gen)
        lin.bias.zero_()
        last = self.gain_mlp[2]
        last.weight.zero_()
        last.bias.fill_(math.atanh(gain))
        for p in self.vote_mlp.parameters():
            if p.ndim > 1:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        with torch.enable_grad():
            xs = torch.linspace(0.0, 1.2, 121).unsqueeze(1)
            target = torch.sigmoid(vote_slope * (xs - vote_threshold))
            opt = torch.optim.Adam(self.vote_mlp.parameters(), lr=0.05)
            for _ in range(400):
                opt.zero_grad()
                loss = F.mse_loss(torch.sigmoid(self.vote_mlp(xs)), target)
                loss.backward()
                opt.step()
        return self

    def warm_start_head_(
        self,
        pairs: Sequence[tuple[LocalFeatures, LocalFeatures, int]],
        *,
        steps: int = 300,
        lr: float = 0.05,
        batch_pairs: int = 64,
    ) -> ELViS:
        """Fit only the training head g on the current (frozen) scores of labelled pairs.

        Part of our stabilising initialisation ([reconstructed], not in the official code):
        with g at its random init the BCE gradient reaching the vote is tiny and training sits at
        ln 2; fitting g first (a 1-D logistic problem on precomputed scalars, milliseconds) gives
        the rest of the model a useful signal from the first step. Returns ``self``.
        """
        if not len(pairs):
            raise ValueError("pairs must not be empty")
        with torch.no_grad():
            qs = [p[0] for p in pairs]
            ds = [p[1] for p in pairs]
            s = torch.from_numpy(self.score(qs, ds, batch_pairs=batch_pairs)).float()
            if self.head_input == "normalized":
                s = s / torch.tensor([len(q) + len(d) for q, d in zip(qs, ds, strict=True)]).float()
        y = torch.tensor([float(p[2]) for p in pairs])
        # standardise through the first layer so g starts in a well-conditioned regime
        mu, sd = float(s.mean()), float(s.std().clamp_min(1e-6))
        with torch.no_grad():
            first = self.head[0]
            first.weight.mul_(1.0 / sd)
            first.bias.sub_(first.weight.squeeze(1) * mu)
        opt = torch.optim.Adam(self.head.parameters(), lr=lr)
        with torch.enable_grad():
            for _ in range(steps):
                opt.zero_grad()
                loss = F.binary_cross_entropy_with_logits(self.head(s[:, None]).squeeze(1), y)
                loss.backward()
                opt.step()
        return self

    # ------------------------------------------------------------------ forward pieces
    @property
    def temperature(self) -> Tensor:
        """τ (a scalar tensor)."""
        return self.log_temperature.exp()

    def embed(self, x: Tensor) -> Tensor:
        """x̂ = φ(x)/‖φ(x)‖ for (B, L, D) descriptors → (B, L, model_dim)."""
        return F.normalize(self.remap(x), dim=-1)

    def gains(self, xh: Tensor) -> Tensor:
        """z = tanh(h(x̂)) ∈ (−1, 1), shape (B, L)."""
        return torch.tanh(self.gain_mlp(xh)).squeeze(-1)

    def vote(self, best: Tensor) -> Tensor:
        """σ(f(x)) elementwise for best-match masses of any shape."""
        return torch.sigmoid(self.vote_mlp(best.unsqueeze(-1))).squeeze(-1)

    def _parts(self, q, d, q_mask, d_mask, domain):
        xq, xd = self.embed(q), self.embed(d)
        sim = xq @ xd.transpose(1, 2)
        zq, zd = self.gains(xq), self.gains(xd)
        plan = dustbin_transport_unchecked(  # inputs validated by check_pair_inputs at the boundary
            sim, zq, zd, self.corner, temperature=self.temperature, n_iters=self.n_iters,
            row_mask=q_mask, col_mask=d_mask, domain=domain or self.domain,
        )  # fmt: skip
        row_best, row_match = plan.max(dim=2)
        col_best, col_match = plan.max(dim=1)
        row_votes = self.vote(row_best) * (~q_mask)
        col_votes = self.vote(col_best) * (~d_mask)
        score = row_votes.sum(1) + col_votes.sum(1)
        return (
            sim,
            zq,
            zd,
            plan,
            row_best,
            row_match,
            col_best,
            col_match,
            row_votes,
            col_votes,
            score,
        )

    def forward(
        self,
        q: Tensor,
        d: Tensor,
        q_mask: Tensor | None = None,
        d_mask: Tensor | None = None,
        *,
        domain: str | None = None,
    ) -> Tensor:
        """Raw similarity s for a batch of pairs (§1.2 step 6).

        Args:
            q: (B, m, D) query descriptors; d: (B, n, D) database descriptors (float).
            q_mask, d_mask: (B, m) / (B, n) bool, True = padding; None = no padding.
            domain: override the Sinkhorn domain for this call.

        Returns:
            (B,) soft count of confident one-to-one correspondences, in [0, m + n].
        """
        q, d, q_mask, d_mask = check_pair_inputs(q, d, q_mask, d_mask, self.in_dim)
        return self._parts(q, d, q_mask, d_mask, domain)[-1]

    def logits(
        self, q: Tensor, d: Tensor, q_mask: Tensor | None = None, d_mask: Tensor | None = None
    ) -> Tensor:
        """Training logits g(s) (or g(s/(m+n)) with ``head_input="normalized"``), shape (B,)."""
        q, d, q_mask, d_mask = check_pair_inputs(q, d, q_mask, d_mask, self.in_dim)
        s = self._parts(q, d, q_mask, d_mask, None)[-1]
        if self.head_input == "normalized":
            s = s / ((~q_mask).sum(1) + (~d_mask).sum(1)).to(s.dtype)
        return self.head(s.unsqueeze(-1)).squeeze(-1)

    @torch.no_grad()
    def explain(self, q: LocalFeatures | Tensor, d: LocalFeatures | Tensor) -> ELViSExplanation:
        """Transport plan, best matches, votes and gains for one pair (real descriptors only).

        Args:
            q, d: :class:`LocalFeatures` or (m, D) / (n, D) float tensors.
        """
        qt = torch.as_tensor(q.desc if isinstance(q, LocalFeatures) else q).float()
        dt = torch.as_tensor(d.desc if isinstance(d, LocalFeatures) else d).float()
        if qt.ndim != 2 or dt.ndim != 2:
            raise ValueError("explain takes one pair: (m, D) and (n, D) descriptors")
        qb, db, qm, dm = check_pair_inputs(qt[None], dt[None], None, None, self.in_dim)
        parts = self._parts(qb, db, qm, dm, None)
        sim, zq, zd, plan, rb, rm, cb, cm, rv, cv, score = (p[0] for p in parts)
        to = lambda t: t.detach().cpu().numpy()  # noqa: E731
        return ELViSExplanation(
            to(sim), to(plan), to(rb), to(cb), to(rm), to(cm), to(rv), to(cv), to(zq), to(zd),
            float(score),
        )  # fmt: skip

    @torch.no_grad()
    def score(
        self,
        queries: Sequence[LocalFeatures],
        database: Sequence[LocalFeatures],
        *,
        batch_pairs: int = 64,
        max_len: int | None = None,
    ) -> NDArray[np.float64]:
        """Scores s for the pairs (queries[i], database[i]), batched; returns a (P,) array.

        This is the ``scorer`` interface of :func:`~iclr26.elvis.rerank`.
        """
        return score_pairs(self, queries, database, batch_pairs=batch_pairs, max_len=max_len)

    def num_parameters(self, *, inference_only: bool = True) -> int:
        """Parameter count (without the training head g by default, as the paper counts)."""
        params = [
            p for n, p in self.named_parameters() if not (inference_only and n.startswith("head."))
        ]
        return int(sum(p.numel() for p in params))


# The official state-dict names (wrapped under ["state"]) → ours.
OFFICIAL_KEY_MAP: dict[str, str] = {
    "remap_local.0.weight": "remap.0.weight",
    "remap_local.0.bias": "remap.0.bias",
    "remap_local.1.weight": "remap.1.weight",
    "remap_local.1.bias": "remap.1.bias",
    "dust_bin": "corner",
    "dust_bin_mlp.0.weight": "gain_mlp.0.weight",
    "dust_bin_mlp.0.bias": "gain_mlp.0.bias",
    "dust_bin_mlp.2.weight": "gain_mlp.2.weight",
    "dust_bin_mlp.2.bias": "gain_mlp.2.bias",
    "f.0.weight": "vote_mlp.0.weight",
    "f.0.bias": "vote_mlp.0.bias",
    "f.1.weight": "vote_mlp.1.weight",
    "f.1.bias": "vote_mlp.1.bias",
    "f.3.weight": "vote_mlp.3.weight",
    "f.3.bias": "vote_mlp.3.bias",
    "g.0.weight": "head.0.weight",
    "g.0.bias": "head.0.bias",
    "g.2.weight": "head.2.weight",
    "g.2.bias": "head.2.bias",
}


def load_official_checkpoint(
    source: str | os.PathLike[str] | Mapping[str, Tensor],
    *,
    temperature: float = 10.0,
    n_iters: int = 10,
) -> ELViS:
    """Build an :class:`ELViS` from an official checkpoint (a ``.pt`` path or its loaded dict).

    Maps ``remap_local.{0,1}``, ``dust_bin``, ``dust_bin_mlp.{0,2}``, ``f.{0,1,3}`` and
    ``g.{0,2}`` (optionally wrapped under ``["state"]``, optionally prefixed ``module.``) to this
    package's names; ``in_dim`` and the widths are read from the weights. Binarized (ITQ)
    checkpoints are not supported. Nothing is downloaded; the file is read with
    ``weights_only=True`` (no arbitrary unpickling).

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: the file is not a PyTorch checkpoint, or not an official ELViS one (keys or
            shapes); the message names the file.
    """
    where = "checkpoint"
    if isinstance(source, Mapping):
        state = source
    elif isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        where = f"checkpoint {path}"
        if not os.path.exists(path):
            raise FileNotFoundError(f"{where} does not exist")
        if os.path.isdir(path):
            raise ValueError(f"{where} is a folder, expected a .pt file")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # pickle, zip and torch errors all mean "not a checkpoint"
            # torch's own message suggests weights_only=False, i.e. unpickling an untrusted file
            raise ValueError(
                f"{where} is not a readable PyTorch checkpoint (not a torch.save file of "
                f"tensors: {type(err).__name__})"
            ) from None
    else:
        raise TypeError(f"source must be a path or a state dict, got {type(source).__name__}")
    if not isinstance(state, Mapping):
        raise ValueError(f"{where} holds a {type(state).__name__}, expected a state dict")
    if "state" in state and isinstance(state["state"], Mapping):
        state = state["state"]
    state = {str(k).removeprefix("module."): v for k, v in state.items()}
    missing = [k for k in OFFICIAL_KEY_MAP if k not in state]
    if missing:
        raise ValueError(f"{where} lacks official ELViS keys {missing[:4]}")
    bad = [k for k in OFFICIAL_KEY_MAP if not isinstance(state[k], Tensor)]
    if bad:
        raise ValueError(f"{where}: {bad[:4]} are not tensors")
    if any(k.startswith(("binarization", "itq")) for k in state):
        raise ValueError("binarized (ITQ) ELViS checkpoints are not supported")
    w = state["remap_local.0.weight"]
    model = ELViS(
        in_dim=int(w.shape[1]),
        model_dim=int(w.shape[0]),
        gain_hidden=int(state["dust_bin_mlp.0.weight"].shape[0]),
        vote_hidden=int(state["f.0.weight"].shape[0]),
        head_hidden=int(state["g.0.weight"].shape[0]),
        temperature=temperature,
        n_iters=n_iters,
    )
    want = model.state_dict()
    mapped = {}
    for k, ours in OFFICIAL_KEY_MAP.items():
        tensor = state[k]
        if tensor.numel() != want[ours].numel() or not tensor.is_floating_point():
            raise ValueError(
                f"{where}: {k} has shape {tuple(tensor.shape)} and dtype {tensor.dtype}, "
                f"expected {tuple(want[ours].shape)} floats"
            )
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{where}: {k} contains NaN or inf")
        mapped[ours] = tensor.reshape(want[ours].shape)
    mapped["log_temperature"] = model.log_temperature.detach().clone()
    model.load_state_dict(mapped)
    return model.eval()
