"""Shortlist re-ranking with score fusion (§1.2 step 8, the official ``metrics.py::rerank``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.elvis.features import LocalFeatures
from iclr26.shared import check_array, check_int, check_range

__all__ = ["Scorer", "fuse", "rerank"]

Scorer = Callable[[Sequence[LocalFeatures], Sequence[LocalFeatures]], NDArray]


def fuse(global_score: ArrayLike, local_score: ArrayLike, lam: float = 0.5, t: float = 0.5):
    """``final = λ·s_global + (1−λ)·σ(t·s)`` (paper defaults λ = 0.5, t = 0.5).

    Raises:
        ValueError: scores of different shapes, NaN/inf scores, ``lam`` outside [0, 1] or a
            non-finite ``t``.
    """
    g = np.asarray(check_array(global_score, "global_score"), dtype=np.float64)
    s = np.asarray(check_array(local_score, "local_score"), dtype=np.float64)
    if g.shape != s.shape:
        raise ValueError(f"global_score {g.shape} and local_score {s.shape} must have one shape")
    check_range(lam, "lam", low=0.0, high=1.0)
    if not np.isfinite(check_range(t, "t")):
        raise ValueError(f"t must be finite, got {t!r}")
    return lam * g + (1.0 - lam) / (1.0 + np.exp(-t * s))


def rerank(
    global_sims: ArrayLike,
    scorer: Scorer,
    query_feats: Sequence[LocalFeatures],
    db_feats: Sequence[LocalFeatures],
    *,
    top_k: int = 100,
    lam: float = 0.5,
    t: float | str = 0.5,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Re-rank each query's global top-k with a local scorer; the rest keeps its global order.

    Args:
        global_sims: (Q, N) first-stage similarities.
        scorer: ``scorer(queries, database) -> (P,)`` over aligned lists of pairs, e.g.
            ``model.score`` of :class:`~iclr26.elvis.ELViS` or a function of
            :mod:`iclr26.elvis.baselines`. All Q·top_k pairs go in one call so it can batch.
        query_feats, db_feats: Q and N :class:`LocalFeatures`.
        top_k: shortlist size K (paper 100 or 400); must not exceed N.
        lam: fusion weight λ of the global score (paper 0.5).
        t: slope of σ(t·s) (paper 0.5), or ``"auto"``: 1 / median of the shortlist's local
            scores, a label-free way to put scorers with different scales on one footing
            (our addition).

    Returns:
        (scores (Q, top_k) fused scores of the shortlist in the new order, order (Q, N) database
        indices best first).
    """
    sims = np.asarray(check_array(global_sims, "global_sims", ndim=2), dtype=np.float64)
    n_q, n_db = sims.shape
    check_int(top_k, "top_k", low=1)
    if top_k > n_db:
        raise ValueError(f"top_k={top_k} is larger than the database ({n_db} items)")
    if len(query_feats) != n_q or len(db_feats) != n_db:
        raise ValueError(
            f"global_sims is {sims.shape} but got {len(query_feats)} queries and "
            f"{len(db_feats)} database items"
        )
    check_range(lam, "lam", low=0.0, high=1.0)
    order = np.argsort(-sims, axis=1, kind="stable")
    short = order[:, :top_k]
    qs = [query_feats[i] for i in range(n_q) for _ in range(top_k)]
    ds = [db_feats[j] for j in short.ravel()]
    local = np.asarray(scorer(qs, ds), dtype=np.float64)
    if local.size != n_q * top_k or not np.isfinite(local).all():
        raise ValueError(
            f"scorer must return {n_q * top_k} finite scores, got shape {local.shape}"
            + ("" if local.size != n_q * top_k else " with NaN/inf")
        )
    local = local.reshape(n_q, top_k)
    if isinstance(t, str):
        if t != "auto":
            raise ValueError(f"t must be a number or 'auto', got {t!r}")
        t = 1.0 / max(float(np.median(np.abs(local))), 1e-9)
    fused = fuse(np.take_along_axis(sims, short, 1), local, lam, t)
    new = np.argsort(-fused, axis=1, kind="stable")
    order[:, :top_k] = np.take_along_axis(short, new, 1)
    return np.take_along_axis(fused, new, 1), order
