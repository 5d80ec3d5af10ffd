"""The information objective of SPICE and its incremental state.

``F(S) = log det(I_d + α Σ_{j∈S} g_j g_jᵀ) = log det(I_|S| + α G_S G_Sᵀ)`` (Sylvester), monotone
submodular with ``F(∅) = 0``. Its marginal gain is, by the matrix determinant lemma,
``Δ(i | S) = log(1 + α g_iᵀ M_S⁻¹ g_i)`` with ``M_S = I + α Σ_{j∈S} g_j g_jᵀ``.

:class:`FisherState` keeps every candidate's gain up to date after each pick, exactly (primal
Sherman–Morrison or kernel-space incremental Cholesky, whichever is cheaper for the shape) or
with the diagonal approximations of the official code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.shared import check_array, check_choice, check_int, check_range

__all__ = ["MODES", "FisherState", "as_matrix", "logdet_utility"]

#: ``exact``: the paper's objective. ``diag``: diagonal Fisher, ``den += α g²`` (the diagonal of
#: ``M_S``). ``diag_official``: the official code's update ``den += α (|g|⊙g)² = α g⁴``.
MODES = ("exact", "diag", "diag_official")


def as_matrix(G: Any, name: str = "G") -> NDArray[np.float64]:
    """Validate a gradient matrix (NumPy or torch, ``(n, d)``) and return it as float64 NumPy."""
    if type(G).__module__.startswith("torch"):
        G = G.detach().cpu().numpy()
    arr = np.asarray(G, dtype=np.float64)
    check_array(arr, name, ndim=2)
    return arr


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """``α`` must be a finite real number ``> 0``."""
    value = check_range(alpha, name, low=0.0, low_inclusive=False)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {alpha!r}")
    return value


def as_indices(indices: ArrayLike, n: int, name: str = "indices") -> NDArray[np.int64]:
    """A non-empty 1-D sequence of distinct integer row indices in ``[0, n)`` (refused, never
    truncated: ``0.5`` or ``True`` is a TypeError)."""
    idx = np.asarray(indices)
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {idx.shape}")
    if idx.dtype == bool or not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"{name} must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64)
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"{name} must lie in [0, {n}), got values in [{idx.min()}, {idx.max()}]")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"{name} must be distinct, got repeated values")
    return idx


def logdet_utility(G: ArrayLike, alpha: float = 1.0) -> float:
    """``F(S) = log det(I + α G Gᵀ)`` for the rows of ``G`` (``(|S|, d)``), on the smaller side.

    An empty ``G`` (zero rows) gives 0.
    """
    if type(G).__module__.startswith("torch"):
        G = G.detach().cpu().numpy()
    G = np.asarray(G, dtype=np.float64)
    if G.ndim != 2:
        raise ValueError(f"G must be 2-dimensional, got shape {G.shape}")
    check_alpha(alpha)
    if G.shape[0] == 0:
        return 0.0
    if not np.isfinite(G).all():
        raise ValueError("G contains NaN or inf")
    gram = G @ G.T if G.shape[0] <= G.shape[1] else G.T @ G
    sign, value = np.linalg.slogdet(np.eye(gram.shape[0]) + alpha * gram)
    if sign <= 0:
        raise FloatingPointError("log det of I + αGGᵀ is not positive: G holds non-finite values?")
    return float(value)


class FisherState:
    """Incremental Fisher log-det state over a candidate pool (spec §2.2, §2.5).

    Args:
        G: ``(n, d)`` per-sample gradients (NumPy or torch), converted to float64.
        alpha: ``α > 0``, the Fisher information regularisation (paper default 1.0).
        mode: ``"exact"``, ``"diag"`` or ``"diag_official"`` (see :data:`MODES`).
        space: for ``mode="exact"``, ``"primal"`` (Sherman–Morrison on ``M_S⁻¹``, O(nd + d²) per
            pick), ``"kernel"`` (incremental Cholesky of ``I + αGGᵀ``, O(nd + n·|S|) per pick, no
            ``d × d`` matrix) or ``"auto"`` (primal when ``d² < n·k_hint``).
        k_hint: expected number of picks, for ``space="auto"``.

    Attributes:
        gains_: ``(n,)`` current ``Δ(i | S)`` (``-inf`` for selected items).
        selected: picks so far, in order.
    """

    def __init__(
        self,
        G: Any,
        alpha: float = 1.0,
        *,
        mode: str = "exact",
        space: str = "auto",
        k_hint: int | None = None,
    ) -> None:
        self.G = as_matrix(G)
        self.alpha = check_alpha(alpha)
        self.mode = check_choice(mode, "mode", MODES)
        check_choice(space, "space", ("auto", "primal", "kernel"))
        n, d = self.G.shape
        k = n if k_hint is None else check_int(k_hint, "k_hint", low=1)
        if space == "auto":
            space = "primal" if d * d < n * k else "kernel"
        self.space = space
        self.sq_norms = np.einsum("ij,ij->i", self.G, self.G)
        self.selected: list[int] = []
        self._taken = np.zeros(n, dtype=bool)
        if mode == "exact":
            # q_i = g_iᵀ M_S⁻¹ g_i, tracked in both spaces; Δ_i = log(1 + α q_i)
            self._q = self.sq_norms.copy()
            if space == "primal":
                self._minv = np.eye(d)
            else:
                # rows c_i of the incremental Cholesky factor, grown by doubling
                self._chol = np.zeros((n, max(1, min(n, k_hint or 64))))
                self._ncol = 0
        else:
            self._den = np.ones(d)
            self._q = self.sq_norms.copy()

    @property
    def n(self) -> int:
        return self.G.shape[0]

    @property
    def base(self) -> NDArray[np.float64]:
        """Singleton gains ``Δ(i | ∅) = log(1 + α‖g_i‖²)``."""
        return np.log1p(self.alpha * self.sq_norms)

    @property
    def gains_(self) -> NDArray[np.float64]:
        gains = np.log1p(self.alpha * np.maximum(self._q, 0.0))
        gains[self._taken] = -np.inf
        return gains

    def add(self, i: int) -> float:
        """Select candidate ``i``; returns its realised gain and updates every other gain."""
        i = int(i)
        if not 0 <= i < self.n:
            raise ValueError(f"index {i} is outside the pool of {self.n}")
        if self._taken[i]:
            raise ValueError(f"candidate {i} is already selected")
        gain = float(np.log1p(self.alpha * max(self._q[i], 0.0)))
        g = self.G[i]
        if self.mode == "exact" and self.space == "primal":
            u = self._minv @ g
            c = 1.0 + self.alpha * float(g @ u)
            self._minv -= self.alpha * np.outer(u, u) / c
            self._q -= self.alpha * (self.G @ u) ** 2 / c
        elif self.mode == "exact":
            # Cholesky of L = I + αGGᵀ one column at a time (Chen et al.'s fast greedy MAP):
            # e_j = (L_{j,i} − ⟨c_j, c_i⟩) / d_i, d_j² ← d_j² − e_j², with d_j² = 1 + α q_j.
            d_i = np.sqrt(1.0 + self.alpha * max(self._q[i], 0.0))
            column = self.alpha * (self.G @ g)
            column[i] += 1.0
            c = self._chol[:, : self._ncol]
            e = (column - c @ c[i]) / d_i
            if self._ncol == self._chol.shape[1]:
                self._chol = np.concatenate([self._chol, np.zeros_like(self._chol)], axis=1)
            self._chol[:, self._ncol] = e
            self._ncol += 1
            self._q -= e * e / self.alpha
        else:
            power = g * g if self.mode == "diag" else (np.abs(g) * g) ** 2
            self._den += self.alpha * power
            self._q = (self.G * self.G) @ (1.0 / self._den)
        # residual guard: round-off can push q below 0 for near-duplicates (fast-map-dpp #1)
        np.maximum(self._q, 0.0, out=self._q)
        self._taken[i] = True
        self.selected.append(i)
        return gain

    def logdet(self) -> float:
        """Exact ``F(S)`` of the current selection (whatever the mode)."""
        return logdet_utility(self.G[self.selected], self.alpha)
