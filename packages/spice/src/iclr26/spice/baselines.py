"""Selectors a user would pick instead of SPICE, on the same gradient (or feature) matrix.

All return ``(k,)`` index arrays in pick order; :func:`~iclr26.spice.select.describe` turns any of
them into a full :class:`~iclr26.spice.select.Selection` for comparison.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.shared import check_int
from iclr26.spice.objectives import FisherState, as_matrix

__all__ = [
    "dpp_greedy",
    "facility_location",
    "kcenter_greedy",
    "less_cosine",
    "random_subset",
    "topk_norm",
    "tracin_dot",
]


def _k(k: int, n: int) -> int:
    check_int(k, "k", low=1)
    if k > n:
        raise ValueError(f"k = {k} is larger than the pool ({n} candidates)")
    return k


def random_subset(n: int, k: int, *, seed: int = 0) -> NDArray[np.int64]:
    """``k`` of ``n`` items uniformly without replacement (seeded)."""
    check_int(n, "n", low=1)
    return np.random.default_rng(seed).choice(n, size=_k(k, n), replace=False).astype(np.int64)


def topk_norm(G: Any, k: int) -> NDArray[np.int64]:
    """The ``k`` largest gradient norms (the official top-k rule is a monotone function of it)."""
    G = as_matrix(G)
    return np.argsort(-np.einsum("ij,ij->i", G, G), kind="stable")[: _k(k, G.shape[0])].astype(
        np.int64
    )


def _targets(G: NDArray, G_target: ArrayLike) -> NDArray:
    T = np.atleast_2d(as_matrix(np.atleast_2d(G_target), "G_target"))
    if T.shape[1] != G.shape[1]:
        raise ValueError(f"G_target must have {G.shape[1]} columns, got shape {T.shape}")
    if T.shape[0] == 0:
        raise ValueError("G_target must hold at least one row")
    return T


def less_cosine(G: Any, G_target: ArrayLike, k: int) -> NDArray[np.int64]:
    """LESS-style (Xia et al. 2024): score each candidate by its largest cosine to the target
    (validation) gradients and keep the top ``k``."""
    G = as_matrix(G)
    T = _targets(G, G_target)
    Gn = G / np.maximum(np.linalg.norm(G, axis=1, keepdims=True), 1e-300)
    Tn = T / np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-300)
    return np.argsort(-(Gn @ Tn.T).max(axis=1), kind="stable")[: _k(k, G.shape[0])].astype(np.int64)


def tracin_dot(G: Any, G_target: ArrayLike, k: int) -> NDArray[np.int64]:
    """TracIn-style (one checkpoint): score by the dot product with the mean target gradient."""
    G = as_matrix(G)
    T = _targets(G, G_target)
    return np.argsort(-(G @ T.mean(axis=0)), kind="stable")[: _k(k, G.shape[0])].astype(np.int64)


def kcenter_greedy(X: Any, k: int, *, seed: int = 0) -> NDArray[np.int64]:
    """Farthest-first traversal (Sener & Savarese's core-set), from a seeded random first centre."""
    X = as_matrix(X, "X")
    k = _k(k, X.shape[0])
    first = int(np.random.default_rng(seed).integers(X.shape[0]))
    picks = [first]
    dist = np.linalg.norm(X - X[first], axis=1)
    for _ in range(k - 1):
        i = int(np.argmax(dist))
        picks.append(i)
        dist = np.minimum(dist, np.linalg.norm(X - X[i], axis=1))
    return np.asarray(picks, dtype=np.int64)


def facility_location(X: Any, k: int) -> NDArray[np.int64]:
    """Greedy facility location ``f(S) = Σ_v max_{s∈S} sim(v, s)`` with ``sim`` the cosine
    similarity clipped at 0 (the representativeness objective of apricot/submodlib)."""
    X = as_matrix(X, "X")
    k = _k(k, X.shape[0])
    Xn = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-300)
    sim = np.maximum(Xn @ Xn.T, 0.0)
    best = np.zeros(X.shape[0])
    picks: list[int] = []
    taken = np.zeros(X.shape[0], dtype=bool)
    for _ in range(k):
        gains = np.maximum(sim - best[:, None], 0.0).sum(axis=0)
        gains[taken] = -np.inf
        i = int(np.argmax(gains))
        picks.append(i)
        taken[i] = True
        best = np.maximum(best, sim[:, i])
    return np.asarray(picks, dtype=np.int64)


def dpp_greedy(G: Any, k: int, *, alpha: float = 1.0) -> NDArray[np.int64]:
    """Greedy MAP of a DPP with L-ensemble ``I + αGGᵀ`` (Chen et al. 2018): the same picks as
    exact log-det greedy, computed in kernel space by incremental Cholesky."""
    G = as_matrix(G)
    k = _k(k, G.shape[0])
    state = FisherState(G, alpha, mode="exact", space="kernel", k_hint=k)
    for _ in range(k):
        state.add(int(np.argmax(state.gains_)))
    return np.asarray(state.selected, dtype=np.int64)
