"""Representation similarity: the paper's congruity estimate and the symmetric peers.

Every function takes two representations of the *same* probe inputs, ``X`` of shape ``(n, d1)``
and ``Y`` of shape ``(n, d2)`` (NumPy arrays or torch tensors; rows are inputs, columns are
features) and returns a float in ``[0, 1]`` (1 = identical up to the measure's invariances).

* :func:`linear_predictivity` — the official code's statistic: held-out R² of a ridge map
  ``X -> Y`` with the ridge penalty chosen by efficient leave-one-out over a grid (sklearn
  ``RidgeCV``), reported as ``sqrt(max(R², 0))``. It is **directional**: ``X -> Y`` and ``Y -> X``
  differ (a richer representation predicts a poorer one, not the reverse).
* :func:`cka` — linear CKA, debiased (unbiased HSIC, Song et al. 2012; Nguyen et al. 2021) by default.
* :func:`procrustes_similarity` — orthogonal Procrustes: nuclear norm of ``XᵀY`` after centring and
  scaling each to unit Frobenius norm (the angular Procrustes distance is ``arccos`` of it).
* :func:`svcca` — SVCCA (Raghu et al. 2017): SVD to 99 % variance, then mean canonical correlation.

All are computed in feature space (``d × d`` Gram products), never with ``n × n`` kernels, so a
10,000 × 512 pair costs a few GFLOP.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from iclr26.shared import check_int, check_range

__all__ = [
    "OFFICIAL_ALPHAS",
    "CKAStats",
    "RidgeSVD",
    "as_matrix",
    "cka",
    "cka_permutation_test",
    "linear_predictivity",
    "predictivity_matrix",
    "procrustes_similarity",
    "ridge_r2",
    "svcca",
    "train_test_rows",
]

logger = logging.getLogger(__name__)

#: sklearn ``RidgeCV``'s default grid, the one the official ``encoder_fit`` uses.
OFFICIAL_ALPHAS = (0.1, 1.0, 10.0)


def as_matrix(x: Any, name: str, *, min_rows: int = 1) -> np.ndarray:
    """Validate a representation and return it as a float64 ``(n, d)`` array.

    Accepts NumPy arrays, torch tensors (detached, moved to CPU) and nested lists. 1-D inputs are
    refused rather than guessed (is it one feature or one sample?). Integer and bool arrays are
    converted exactly; complex, object and string arrays are refused.
    """
    return _as_real(x, name, min_rows=min_rows).astype(np.float64, copy=False)


def _as_real(x: Any, name: str, *, min_rows: int = 1) -> np.ndarray:
    """:func:`as_matrix` without the float64 cast: float32/float64 arrays are returned as they
    are (no copy), everything else numeric as float64."""
    if type(x).__module__.startswith("torch"):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be a 2-D numeric array, got {type(x).__name__}") from err
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_inputs, n_features), got shape {arr.shape}")
    if arr.shape[0] < min_rows or arr.shape[1] < 1:
        raise ValueError(
            f"{name} needs at least {min_rows} rows and 1 column, got shape {arr.shape}"
        )
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def _pair(X: Any, Y: Any, *, min_rows: int = 1) -> tuple[np.ndarray, np.ndarray]:
    Xa = as_matrix(X, "X", min_rows=min_rows)
    Ya = as_matrix(Y, "Y", min_rows=min_rows)
    if Xa.shape[0] != Ya.shape[0]:
        raise ValueError(
            f"X and Y must describe the same inputs (same number of rows), got {Xa.shape[0]} "
            f"and {Ya.shape[0]}"
        )
    return Xa, Ya


def _check_alphas(alphas: Sequence[float]) -> np.ndarray:
    a = np.asarray(alphas, dtype=np.float64).ravel()
    if a.size == 0 or not np.isfinite(a).all() or (a <= 0).any():
        raise ValueError(f"alphas must be a non-empty sequence of positive numbers, got {alphas!r}")
    return a


def train_test_rows(n: int, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The held-out split used by :func:`linear_predictivity` (a seeded random permutation).

    ``n_test = ceil(test_size * n)`` like sklearn's ``train_test_split``; at least 2 test rows
    (R² needs a variance) and 3 training rows (leave-one-out needs two) are required.
    """
    check_range(
        test_size, "test_size", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    n_test = math.ceil(test_size * n)
    if n_test < 2 or n - n_test < 3:
        raise ValueError(
            f"too few samples for a held-out split: n={n} with test_size={test_size} leaves "
            f"{n - n_test} training and {n_test} test rows (need >= 3 and >= 2)"
        )
    perm = np.random.default_rng(seed).permutation(n)
    return perm[n_test:], perm[:n_test]


def _r2_columns(Y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """sklearn ``r2_score(multioutput='raw_values', force_finite=True)`` per column."""
    ss_res = ((Y - pred) ** 2).sum(0)
    ss_tot = ((Y - Y.mean(0)) ** 2).sum(0)
    out = np.ones(Y.shape[1])
    ok = ss_tot > 0
    out[ok] = 1.0 - ss_res[ok] / ss_tot[ok]
    out[~ok & (ss_res > 0)] = 0.0
    return out


class RidgeSVD:
    """Ridge with intercept for all alphas from one thin SVD of the centred training inputs.

    Leave-one-out residuals for every alpha come from the same decomposition (the hat matrix is
    ``1/n + U diag(s²/(s²+α)) Uᵀ``), exactly the generalised-CV criterion of sklearn's ``RidgeCV``
    with ``fit_intercept=True`` and one alpha shared by all targets.
    """

    def __init__(self, X: np.ndarray) -> None:
        self.x_mean = X.mean(0)
        U, s, Vt = np.linalg.svd(X - self.x_mean, full_matrices=False)
        keep = s > s.max(initial=0.0) * max(X.shape) * np.finfo(np.float64).eps
        self.U, self.s, self.Vt = U[:, keep], s[keep], Vt[keep]
        self.n = X.shape[0]

    def loo_errors(self, Y: np.ndarray, alphas: np.ndarray) -> np.ndarray:
        Yc = Y - Y.mean(0)
        UtY = self.U.T @ Yc
        s2 = self.s**2
        errs = np.empty(alphas.size)
        for i, a in enumerate(alphas):
            shrink = s2 / (s2 + a)
            fitted = self.U @ (shrink[:, None] * UtY)
            h = 1.0 / self.n + (self.U**2) @ shrink
            resid = (Yc - fitted) / (1.0 - h)[:, None]
            errs[i] = np.mean(resid**2)
        return errs

    def coef(self, Y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        y_mean = Y.mean(0)
        W = self.Vt.T @ ((self.s / (self.s**2 + alpha))[:, None] * (self.U.T @ (Y - y_mean)))
        return W, y_mean - self.x_mean @ W

    def predict(self, X: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        return X @ W + b


def ridge_r2(
    X: Any,
    Y: Any,
    *,
    alphas: Sequence[float] = OFFICIAL_ALPHAS,
    test_size: float = 0.1,
    seed: int = 0,
) -> tuple[float, float]:
    """Held-out R² of ``RidgeCV(alphas, fit_intercept=True, alpha_per_target=False)`` from X to Y.

    This is the official ``encoder_fit``: split off ``test_size`` of the rows, pick one alpha by
    leave-one-out on the training rows, refit, and score R² (uniform average over Y's columns,
    sklearn's convention for constant columns) on the held-out rows. Can be negative.

    Returns:
        ``(r2, alpha)``: the held-out R² and the chosen alpha.
    """
    Xa, Ya = _pair(X, Y, min_rows=5)
    a = _check_alphas(alphas)
    check_int(seed, "seed", low=0)
    train, test = train_test_rows(Xa.shape[0], test_size, seed)
    model = RidgeSVD(Xa[train])
    alpha = float(a[int(np.argmin(model.loo_errors(Ya[train], a)))])
    W, b = model.coef(Ya[train], alpha)
    r2 = float(np.mean(_r2_columns(Ya[test], model.predict(Xa[test], W, b))))
    return r2, alpha


def linear_predictivity(
    X: Any,
    Y: Any,
    *,
    alphas: Sequence[float] = OFFICIAL_ALPHAS,
    test_size: float = 0.1,
    seed: int = 0,
) -> float:
    """Directional congruity ρ(X → Y) = sqrt(max(R², 0)) of a held-out ridge map (official code).

    Args:
        X: source representation, ``(n, d1)``.
        Y: target representation, ``(n, d2)``, same rows (inputs) as ``X``.
        alphas: ridge penalties searched by leave-one-out (official default ``(0.1, 1, 10)``).
        test_size: held-out fraction (official 0.1).
        seed: seed of the held-out split.

    Returns:
        ρ in ``[0, 1]``. Not symmetric: use both directions (see :func:`equivalence_test`).
    """
    r2, _ = ridge_r2(X, Y, alphas=alphas, test_size=test_size, seed=seed)
    return math.sqrt(max(r2, 0.0))


def predictivity_matrix(
    reps: Sequence[Any],
    *,
    alphas: Sequence[float] = OFFICIAL_ALPHAS,
    test_size: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """ρ(reps[i] → reps[j]) for every ordered pair, one SVD per source reused for all targets.

    Every pair uses the same held-out split (``seed``), so the entries are comparable.

    Returns:
        ``(m, m)`` array with ``S[i, j] = linear_predictivity(reps[i], reps[j])``.
    """
    mats = [as_matrix(r, f"reps[{i}]", min_rows=5) for i, r in enumerate(reps)]
    if not mats:
        raise ValueError("reps must hold at least one representation")
    n = mats[0].shape[0]
    for i, m in enumerate(mats):
        if m.shape[0] != n:
            raise ValueError(
                f"reps[{i}] has {m.shape[0]} rows, reps[0] has {n}: same inputs needed"
            )
    a = _check_alphas(alphas)
    train, test = train_test_rows(n, test_size, seed)
    S = np.empty((len(mats), len(mats)))
    for i, Xa in enumerate(mats):
        model = RidgeSVD(Xa[train])
        for j, Ya in enumerate(mats):
            alpha = float(a[int(np.argmin(model.loo_errors(Ya[train], a)))])
            W, b = model.coef(Ya[train], alpha)
            r2 = float(np.mean(_r2_columns(Ya[test], model.predict(Xa[test], W, b))))
            S[i, j] = math.sqrt(max(r2, 0.0))
    return S


#: Rows per block when centring inside the CKA products: each block is centred into a float64
#: buffer of ``_BLOCK × d`` (a few MB, cache-resident) and multiplied at once, so no centred or
#: float64 copy of a whole representation is ever made.
_BLOCK = 2048


def _centred_blocks(X: np.ndarray, mean: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
    """``(rows, X[rows] - mean)`` in float64, block by block (see :data:`_BLOCK`)."""
    for start in range(0, X.shape[0], _BLOCK):
        rows = slice(start, start + _BLOCK)
        yield rows, np.subtract(X[rows], mean, dtype=np.float64)


class CKAStats:
    """The pieces of linear CKA that depend on one representation only, computed once.

    For ``X`` (``n × d``) with column means ``x̄`` and centred rows ``x̃_i = x_i − x̄``: the
    diagonal of the centred Gram matrix ``k_i = ‖x̃_i‖²``, its trace ``t = Σ k_i``, and
    ``‖X̃ᵀX̃‖_F²`` (``= tr((X̃X̃ᵀ)²)``). With them, the self-HSIC of both the biased and
    the unbiased estimator is known, and a comparison with another representation costs one
    ``d₁ × d₂`` product (:func:`cka` takes ``CKAStats`` for either argument). The unbiased HSIC
    (Song et al. 2012) is invariant to translating ``X``, so it is computed on ``X̃``, where the
    zero-diagonal Gram's row sums are ``−k`` and its total is ``−t``; the estimator reduces to

    ``HSIC₁(X, Y) = [‖X̃ᵀỸ‖_F² − n/(n−2)·kᵀl + t_x t_y/((n−1)(n−2))] / (n(n−3))``.

    Centring is done block by block in float64 (no copy of ``X`` is made; a float32 input stays
    float32 and each block is promoted), so a large offset does not cost accuracy. The object
    keeps a reference to ``X`` for the cross products: do not modify ``X`` in place afterwards.

    Args:
        X: ``(n, d)`` representation (NumPy array, torch tensor or nested list), finite, n ≥ 2.
    """

    def __init__(self, X: Any) -> None:
        X = _as_real(X, "X", min_rows=2)
        n, d = X.shape
        self.X = X
        self.n = n
        self.mean = X.mean(0, dtype=np.float64)
        self.sq_norms = np.empty(n)
        gram = np.zeros((d, d))
        for rows, block in _centred_blocks(X, self.mean):
            gram += block.T @ block  # symmetric rank-k update (BLAS syrk)
            self.sq_norms[rows] = np.einsum("ij,ij->i", block, block)
        self.trace = float(self.sq_norms.sum())
        self.gram_fro2 = float(np.dot(gram.ravel(), gram.ravel()))
        self.hsic_unbiased = _unbiased_hsic(self.gram_fro2, self, self)

    def cross_fro2(self, other: CKAStats) -> float:
        """``‖X̃ᵀỸ‖_F²`` with ``other`` (same rows): one ``d₁ × d₂`` product, block-centred."""
        if other.n != self.n:
            raise ValueError(
                f"X and Y must describe the same inputs (same number of rows), got {self.n} "
                f"and {other.n}"
            )
        if other is self:
            return self.gram_fro2
        m = np.zeros((self.X.shape[1], other.X.shape[1]))
        for (_, bx), (_, by) in zip(
            _centred_blocks(self.X, self.mean), _centred_blocks(other.X, other.mean), strict=True
        ):
            m += bx.T @ by
        return float(np.dot(m.ravel(), m.ravel()))


def _unbiased_hsic(cross_fro2: float, a: CKAStats, b: CKAStats) -> float:
    """Unbiased HSIC (Song et al. 2012, eq. 5) of two linear kernels from feature-space pieces:
    ``tr(K̃L̃) = ‖X̃ᵀỸ‖² − kᵀl``, ``1ᵀK̃1 = −t``, ``1ᵀK̃L̃1 = kᵀl`` for centred inputs."""
    n = a.n
    if n < 4:
        return float("nan")
    kl = float(a.sq_norms @ b.sq_norms)
    return (cross_fro2 - n / (n - 2) * kl + a.trace * b.trace / ((n - 1) * (n - 2))) / (n * (n - 3))


def cka(X: Any, Y: Any, *, debiased: bool = True) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019), debiased by default.

    ``CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` with ``K = XXᵀ``, ``L = YYᵀ``. The debiased
    form uses the unbiased HSIC estimator, whose expectation is 0 for independent representations
    at any ``n`` (the biased one is inflated at small ``n``). Computed from ``d × d`` products
    (:class:`CKAStats`): one ``d₁ × d₂`` product for the cross term and a symmetric rank-k update
    per side, centred block by block in float64.

    Args:
        X, Y: ``(n, d1)`` and ``(n, d2)`` representations of the same inputs, or their
            :class:`CKAStats` (computed once and reused when one side is compared many times).
        debiased: unbiased HSIC (default) or the biased ``‖X̃ᵀỸ‖²/(‖X̃ᵀX̃‖‖ỸᵀỸ‖)``.

    Returns:
        CKA, or NaN with a warning when it is undefined: ``n < 4`` (debiased) or a representation
        is constant (zero self-HSIC). The debiased value can be slightly negative.
    """
    sx = X if isinstance(X, CKAStats) else CKAStats(_as_real(X, "X", min_rows=2))
    sy = Y if isinstance(Y, CKAStats) else CKAStats(_as_real(Y, "Y", min_rows=2))
    if sx.n != sy.n:
        raise ValueError(
            f"X and Y must describe the same inputs (same number of rows), got {sx.n} and {sy.n}"
        )
    if not debiased:
        if sx.gram_fro2 <= 0 or sy.gram_fro2 <= 0:
            warnings.warn("CKA is undefined for a constant representation", stacklevel=2)
            return float("nan")
        return float(sx.cross_fro2(sy) / math.sqrt(sx.gram_fro2 * sy.gram_fro2))
    if sx.n < 4:
        warnings.warn(f"debiased CKA needs n >= 4 inputs, got {sx.n}", stacklevel=2)
        return float("nan")
    hxx, hyy = sx.hsic_unbiased, sy.hsic_unbiased
    if hxx <= 0 or hyy <= 0:
        warnings.warn("debiased CKA is undefined: a representation has no variance", stacklevel=2)
        return float("nan")
    return float(_unbiased_hsic(sx.cross_fro2(sy), sx, sy) / math.sqrt(hxx * hyy))


def procrustes_similarity(X: Any, Y: Any) -> float:
    """Orthogonal Procrustes similarity ``||X̃ᵀỸ||_* ∈ [0, 1]``.

    ``X̃, Ỹ`` are column-centred and scaled to unit Frobenius norm; the nuclear norm is the best
    alignment ``max_Q tr(X̃ᵀỸQ)`` over orthogonal (partial-isometry, when widths differ) ``Q``.
    The squared Procrustes distance is ``2 - 2s``; the angular shape metric is ``arccos(s)``.
    """
    Xa, Ya = _pair(X, Y, min_rows=2)
    Xc, Yc = Xa - Xa.mean(0), Ya - Ya.mean(0)
    nx, ny = np.linalg.norm(Xc), np.linalg.norm(Yc)
    if nx == 0 or ny == 0:
        raise ValueError("procrustes_similarity: X or Y is constant (no variance to align)")
    return float(min(1.0, np.linalg.svd((Xc / nx).T @ (Yc / ny), compute_uv=False).sum()))


def _svd_reduce(Xc: np.ndarray, keep: float | int) -> np.ndarray:
    U, s, _ = np.linalg.svd(Xc, full_matrices=False)
    s = s[s > s.max(initial=0.0) * max(Xc.shape) * np.finfo(np.float64).eps]
    if s.size == 0:
        raise ValueError("svcca: a representation is constant")
    if isinstance(keep, float):
        frac = np.cumsum(s**2) / np.sum(s**2)
        k = int(np.searchsorted(frac, keep) + 1)
    else:
        k = keep
    k = min(k, s.size)
    return U[:, :k] * s[:k]


def svcca(X: Any, Y: Any, *, keep: float | int = 0.99) -> float:
    """SVCCA: keep the top singular directions of each (``keep`` = variance fraction or count),
    then return the mean canonical correlation between the reduced representations.
    """
    if isinstance(keep, bool) or not isinstance(keep, int | float):
        raise TypeError(f"keep must be a float in (0, 1] or a positive int, got {keep!r}")
    if isinstance(keep, float):
        check_range(keep, "keep", low=0.0, high=1.0, low_inclusive=False)
    else:
        check_int(keep, "keep", low=1)
    Xa, Ya = _pair(X, Y, min_rows=3)
    A = _svd_reduce(Xa - Xa.mean(0), keep)
    B = _svd_reduce(Ya - Ya.mean(0), keep)
    Qa, _ = np.linalg.qr(A)
    Qb, _ = np.linalg.qr(B)
    rho = np.linalg.svd(Qa.T @ Qb, compute_uv=False)
    return float(np.clip(rho, 0.0, 1.0).mean())


def cka_permutation_test(
    X: Any, Y: Any, *, n_perm: int = 1000, seed: int = 0, batch: int = 64
) -> tuple[float, float, np.ndarray]:
    """Debiased CKA with a row-permutation null, reusing every permutation-invariant piece.

    Permuting the rows of ``Y`` breaks the input correspondence and leaves ``HSIC(K, K)``,
    ``HSIC(L, L)`` and the centred Grams' traces unchanged (:class:`CKAStats`); only ``‖X̃ᵀỸπ‖_F²``
    and the dot product of the Gram diagonals ``kᵀl_π`` are recomputed, in float32 batches of
    ``batch`` permutations (torch matmuls, float64 sums).

    Returns:
        ``(cka, p_value, null)`` with ``p = (1 + #{null >= cka}) / (1 + n_perm)``.
    """
    import torch

    check_int(n_perm, "n_perm", low=1)
    check_int(seed, "seed", low=0)
    check_int(batch, "batch", low=1)
    Xa, Ya = _pair(X, Y, min_rows=4)
    n = Xa.shape[0]
    sx, sy = CKAStats(Xa), CKAStats(Ya)
    hxx, hyy = sx.hsic_unbiased, sy.hsic_unbiased
    if hxx <= 0 or hyy <= 0:
        raise ValueError("cka_permutation_test: X or Y has no variance")
    denom = math.sqrt(hxx * hyy)
    observed = _unbiased_hsic(sx.cross_fro2(sy), sx, sy) / denom
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.from_numpy((Xa - sx.mean).T.astype(np.float32))
    Yt = torch.from_numpy((Ya - sy.mean).astype(np.float32))
    dx_t, dy_t = torch.from_numpy(sx.sq_norms), torch.from_numpy(sy.sq_norms)
    null = np.empty(n_perm)
    const = sx.trace * sy.trace / ((n - 1) * (n - 2))
    for start in range(0, n_perm, batch):
        b = min(batch, n_perm - start)
        perms = torch.stack([torch.randperm(n, generator=gen) for _ in range(b)])
        cross = torch.matmul(Xt, Yt[perms])  # (b, d1, d2)
        fro2 = cross.double().pow(2).sum((1, 2))
        kl = (dy_t[perms] * dx_t).sum(1)
        h = (fro2 - n / (n - 2) * kl + const) / (n * (n - 3))
        null[start : start + b] = (h / denom).numpy()
    p = (1 + int((null >= observed).sum())) / (1 + n_perm)
    return float(observed), float(p), null
