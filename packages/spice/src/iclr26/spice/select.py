"""Greedy selectors over a gradient pool: plain log-det greedy, SPICE, and the official top-k.

All return a :class:`Selection` with the picks in order and the per-step diagnostics the paper
plots: the gain ``Δ_t``, the singleton gain ``base``, ``ε_t = Δ_t − base`` (spec §2.3), the
conflict penalty and the cosine to the reference direction at pick time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.shared import check_choice, check_int, check_range
from iclr26.spice.objectives import FisherState, as_indices, as_matrix, check_alpha, logdet_utility

__all__ = ["Selection", "describe", "greedy_logdet", "spice", "topk"]


@dataclass(frozen=True)
class Selection:
    """The result of a selector.

    Attributes:
        indices: ``(k,)`` picks in the order they were made (rows of ``G``).
        gains: ``(k,)`` marginal gain ``Δ(i_t | S_{t−1})`` of each pick under the selector's mode.
        base: ``(k,)`` singleton gain ``log(1 + α‖g‖²)`` of each pick.
        penalties: ``(k,)`` conflict penalty paid by each pick (0 for non-SPICE selectors).
        cos_to_ref: ``(k,)`` cosine of each pick to the reference direction at pick time
            (NaN when there was none).
        stopped_early: whether the half-life rule ended the selection before ``k``.
        logdet: exact ``F(S)`` of the final selection.
        config: every setting of the selector (for the record).
    """

    indices: NDArray[np.int64]
    gains: NDArray[np.float64]
    base: NDArray[np.float64]
    penalties: NDArray[np.float64]
    cos_to_ref: NDArray[np.float64]
    stopped_early: bool
    logdet: float
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def eps(self) -> NDArray[np.float64]:
        """``ε_t = Δ_t − Δ(i_t | ∅)``: deviation from modular gains (≤ 0 in exact mode)."""
        return self.gains - self.base

    def __len__(self) -> int:
        return int(self.indices.size)


def _check_k(k: int, n: int) -> int:
    check_int(k, "k", low=1)
    if k > n:
        raise ValueError(f"k = {k} is larger than the pool ({n} candidates)")
    return k


def _halflife(halflife: float | None) -> float | None:
    return None if halflife is None else check_range(halflife, "halflife", low=0.0, high=1.0)


def _cosines(G: NDArray, norms: NDArray, ref: NDArray) -> NDArray:
    ref_norm = float(np.linalg.norm(ref))
    if ref_norm == 0.0:
        return np.full(G.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norms > 0, (G @ ref) / (norms * ref_norm), 0.0)


def _run_greedy(
    G: NDArray,
    k: int,
    *,
    alpha: float,
    mode: str,
    space: str,
    halflife: float | None,
    conflict_penalty: float,
    reference: str | NDArray,
    penalty_scale: str,
    config: dict[str, Any],
) -> Selection:
    state = FisherState(G, alpha, mode=mode, space=space, k_hint=k)
    norms = np.sqrt(state.sq_norms)
    base_all = state.base
    fixed_ref = None
    if isinstance(reference, np.ndarray):
        fixed_ref = reference
    elif reference == "pool_mean":
        fixed_ref = G.mean(axis=0)
    selected_sum = np.zeros(G.shape[1])
    picks, gains, pens, cosines = [], [], [], []
    stopped = False
    for t in range(k):
        gain_all = state.gains_
        ref = fixed_ref if fixed_ref is not None else (selected_sum if t > 0 else None)
        cos = _cosines(G, norms, ref) if ref is not None else np.full(G.shape[0], np.nan)
        penalty = np.zeros(G.shape[0])
        if conflict_penalty > 0.0 and ref is not None:
            penalty = conflict_penalty * np.maximum(0.0, -np.nan_to_num(cos))
            if penalty_scale == "relative":
                penalty *= float(np.median(gain_all[np.isfinite(gain_all)]))
        i = int(np.argmax(gain_all - penalty))  # ties: lowest index
        if halflife is not None and t > 0 and gain_all[i] <= halflife * gains[0]:
            stopped = True
            break
        gains.append(state.add(i))
        picks.append(i)
        pens.append(float(penalty[i]))
        cosines.append(float(cos[i]))
        selected_sum += G[i]
    idx = np.asarray(picks, dtype=np.int64)
    return Selection(
        indices=idx,
        gains=np.asarray(gains),
        base=base_all[idx],
        penalties=np.asarray(pens),
        cos_to_ref=np.asarray(cosines),
        stopped_early=stopped,
        logdet=logdet_utility(G[idx], alpha),
        config=config,
    )


def greedy_logdet(
    G: Any,
    k: int,
    *,
    alpha: float = 1.0,
    mode: str = "exact",
    space: str = "auto",
    halflife: float | None = None,
) -> Selection:
    """Plain greedy maximisation of ``F(S) = log det(I + α Σ g gᵀ)`` under ``|S| ≤ k``.

    ``F`` is monotone submodular, so in ``mode="exact"`` this is a ``(1 − 1/e)`` approximation
    (Nemhauser et al.); this is the FisherSFT-style selector SPICE is compared with.

    Args:
        G: ``(n, d)`` per-sample gradients (NumPy or torch).
        k: budget, ``1 ≤ k ≤ n``.
        alpha: ``α > 0`` (paper default 1.0).
        mode: ``"exact"`` (default), ``"diag"`` or ``"diag_official"``.
        space: ``"auto"``, ``"primal"`` or ``"kernel"`` (exact mode only; same picks).
        halflife: stop when the pick's gain falls to ``halflife · Δ_1`` or below (off by default).
    """
    G = as_matrix(G)
    k = _check_k(k, G.shape[0])
    config = {"selector": "greedy", "alpha": alpha, "mode": mode, "halflife": halflife, "k": k}
    return _run_greedy(
        G, k, alpha=alpha, mode=mode, space=space, halflife=_halflife(halflife),
        conflict_penalty=0.0, reference="selected_mean", penalty_scale="raw", config=config,
    )  # fmt: skip


def spice(
    G: Any,
    k: int,
    *,
    alpha: float = 1.0,
    conflict_penalty: float = 0.1,
    reference: str | ArrayLike = "selected_mean",
    penalty_scale: str = "raw",
    mode: str = "exact",
    space: str = "auto",
    halflife: float | None = None,
) -> Selection:
    """SPICE: greedy on ``Δ(i | S) − λ·max(0, −cos(g_i, ḡ))`` (spec §2.4, official ``select.py``).

    Only misalignment (negative cosine) with the reference direction is penalised. The official
    reference is the mean of the gradients selected so far (no penalty on the first pick).

    Args:
        G: ``(n, d)`` per-sample gradients.
        k: budget, ``1 ≤ k ≤ n``.
        alpha: ``α > 0`` (default 1.0).
        conflict_penalty: ``λ ≥ 0`` (official default 0.1); ``λ = 0`` is :func:`greedy_logdet`.
        reference: ``"selected_mean"`` (official), ``"pool_mean"``, or a ``(d,)`` direction (e.g. a
            validation gradient).
        penalty_scale: ``"raw"`` (official: the penalty is in nats, so it bites only when gains
            are small) or ``"relative"`` (penalty times the median current gain, scale-free).
        mode: Fisher mode, ``"exact"`` by default; the official code uses ``"diag_official"``.
        space: exact-mode implementation, see :class:`~iclr26.spice.objectives.FisherState`.
        halflife: early stop at ``Δ_t ≤ halflife · Δ_1``.
    """
    G = as_matrix(G)
    k = _check_k(k, G.shape[0])
    lam = check_range(conflict_penalty, "conflict_penalty", low=0.0)
    if not np.isfinite(lam):
        raise ValueError(f"conflict_penalty must be finite, got {conflict_penalty!r}")
    check_choice(penalty_scale, "penalty_scale", ("raw", "relative"))
    if isinstance(reference, str):
        check_choice(reference, "reference", ("selected_mean", "pool_mean"))
        ref: str | NDArray = reference
        ref_name = reference
    else:
        ref = np.asarray(reference, dtype=np.float64)
        if ref.shape != (G.shape[1],) or not np.isfinite(ref).all():
            raise ValueError(
                f"reference must be a finite vector of length {G.shape[1]}, got shape {ref.shape}"
            )
        ref_name = "given"
    config = {
        "selector": "spice", "alpha": alpha, "conflict_penalty": lam, "reference": ref_name,
        "penalty_scale": penalty_scale, "mode": mode, "halflife": halflife, "k": k,
    }  # fmt: skip
    return _run_greedy(
        G, k, alpha=alpha, mode=mode, space=space, halflife=_halflife(halflife),
        conflict_penalty=lam, reference=ref, penalty_scale=penalty_scale, config=config,
    )  # fmt: skip


def topk(G: Any, k: int, *, alpha: float = 1.0, halflife: float | None = None) -> Selection:
    """The official default (``selection_method="top_k"``): rank once by ``log(1 + α‖g‖²)``.

    With ``halflife``, the sorted list is cut where the score falls to ``halflife`` times the
    best score.
    """
    G = as_matrix(G)
    k = _check_k(k, G.shape[0])
    tau = _halflife(halflife)
    base = np.log1p(check_alpha(alpha) * np.einsum("ij,ij->i", G, G))
    order = np.argsort(-base, kind="stable")[:k]
    stopped = False
    if tau is not None:
        keep = base[order] > tau * base[order[0]]
        keep[0] = True
        stopped = not keep.all()
        order = order[: int(np.argmin(keep)) if stopped else k]
    return Selection(
        indices=order.astype(np.int64),
        gains=base[order],
        base=base[order],
        penalties=np.zeros(order.size),
        cos_to_ref=np.full(order.size, np.nan),
        stopped_early=stopped,
        logdet=logdet_utility(G[order], alpha),
        config={"selector": "topk", "alpha": alpha, "halflife": halflife, "k": k},
    )


def describe(G: Any, indices: ArrayLike, *, alpha: float = 1.0, name: str = "given") -> Selection:
    """A :class:`Selection` for any index sequence (a baseline's picks): exact gains in pick order."""
    G = as_matrix(G)
    idx = as_indices(indices, G.shape[0])
    state = FisherState(G, alpha, mode="exact", k_hint=idx.size)
    gains = np.array([state.add(int(i)) for i in idx])
    return Selection(
        indices=idx,
        gains=gains,
        base=state.base[idx],
        penalties=np.zeros(idx.size),
        cos_to_ref=np.full(idx.size, np.nan),
        stopped_early=False,
        logdet=float(gains.sum()),
        config={"selector": name, "alpha": alpha, "k": int(idx.size)},
    )
