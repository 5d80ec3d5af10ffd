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
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr26.shared import check_int, check_range

__all__ = [
    "OFFICIAL_ALPHAS",
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
    arr = arr.astype(np.float64, copy=False)
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


def _hsic_terms(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Feature-space pieces of the unbiased HSIC for the linear kernel ``K = XXᵀ``."""
    diag = np.einsum("ij,ij->i", X, X)  # K_ii
    row = X @ X.sum(0) - diag  # (K̃ 1)_i with the diagonal zeroed
    return diag, row, float(row.sum())


def _unbiased_hsic(
    XtY_fro2: float,
    dx: np.ndarray,
    dy: np.ndarray,
    rx: np.ndarray,
    ry: np.ndarray,
    sx: float,
    sy: float,
    n: int,
) -> float:
    # tr(K̃L̃) = tr(KL) - Σ K_ii L_ii, and tr(KL) = ||XᵀY||_F² for linear kernels.
    tr = XtY_fro2 - float(dx @ dy)
    return (tr + sx * sy / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * float(rx @ ry)) / (n * (n - 3))


def cka(X: Any, Y: Any, *, debiased: bool = True) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019), debiased by default.

    ``CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` with ``K = XXᵀ``, ``L = YYᵀ``. The debiased
    form uses the unbiased HSIC estimator, whose expectation is 0 for independent representations
    at any ``n`` (the biased one is inflated at small ``n``). Computed from ``d × d`` products.

    Returns:
        CKA, or NaN with a warning when it is undefined: ``n < 4`` (debiased) or a representation
        is constant (zero self-HSIC). The debiased value can be slightly negative.
    """
    Xa, Ya = _pair(X, Y, min_rows=2)
    n = Xa.shape[0]
    Xc, Yc = Xa - Xa.mean(0), Ya - Ya.mean(0)
    if not debiased:
        xy = np.linalg.norm(Xc.T @ Yc) ** 2
        xx = np.linalg.norm(Xc.T @ Xc) ** 2
        yy = np.linalg.norm(Yc.T @ Yc) ** 2
        if xx <= 0 or yy <= 0:
            warnings.warn("CKA is undefined for a constant representation", stacklevel=2)
            return float("nan")
        return float(xy / math.sqrt(xx * yy))
    if n < 4:
        warnings.warn(f"debiased CKA needs n >= 4 inputs, got {n}", stacklevel=2)
        return float("nan")
    dx, rx, sx = _hsic_terms(Xc)
    dy, ry, sy = _hsic_terms(Yc)
    hxy = _unbiased_hsic(np.linalg.norm(Xc.T @ Yc) ** 2, dx, dy, rx, ry, sx, sy, n)
    hxx = _unbiased_hsic(np.linalg.norm(Xc.T @ Xc) ** 2, dx, dx, rx, rx, sx, sx, n)
    hyy = _unbiased_hsic(np.linalg.norm(Yc.T @ Yc) ** 2, dy, dy, ry, ry, sy, sy, n)
    if hxx <= 0 or hyy <= 0:
        warnings.warn("debiased CKA is undefined: a representation has no variance", stacklevel=2)
        return float("nan")
    return float(hxy / math.sqrt(hxx * hyy))


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
    ``HSIC(L, L)``, the Gram diagonals' sums and ``Σ K̃`` unchanged; only ``||XᵀYπ||_F²`` and two
    dot products are recomputed, in float32 batches of ``batch`` permutations (torch matmuls).

    Returns:
        ``(cka, p_value, null)`` with ``p = (1 + #{null >= cka}) / (1 + n_perm)``.
    """
    import torch

    check_int(n_perm, "n_perm", low=1)
    check_int(seed, "seed", low=0)
    check_int(batch, "batch", low=1)
    Xa, Ya = _pair(X, Y, min_rows=4)
    n = Xa.shape[0]
    Xc, Yc = Xa - Xa.mean(0), Ya - Ya.mean(0)
    dx, rx, sx = _hsic_terms(Xc)
    dy, ry, sy = _hsic_terms(Yc)
    hxx = _unbiased_hsic(np.linalg.norm(Xc.T @ Xc) ** 2, dx, dx, rx, rx, sx, sx, n)
    hyy = _unbiased_hsic(np.linalg.norm(Yc.T @ Yc) ** 2, dy, dy, ry, ry, sy, sy, n)
    if hxx <= 0 or hyy <= 0:
        raise ValueError("cka_permutation_test: X or Y has no variance")
    denom = math.sqrt(hxx * hyy)
    observed = _unbiased_hsic(np.linalg.norm(Xc.T @ Yc) ** 2, dx, dy, rx, ry, sx, sy, n) / denom
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.from_numpy(Xc.T.astype(np.float32))
    Yt = torch.from_numpy(Yc.astype(np.float32))
    dx_t, rx_t = torch.from_numpy(dx), torch.from_numpy(rx)
    dy_t, ry_t = torch.from_numpy(dy), torch.from_numpy(ry)
    null = np.empty(n_perm)
    const = sx * sy / ((n - 1) * (n - 2))
    for start in range(0, n_perm, batch):
        b = min(batch, n_perm - start)
        perms = torch.stack([torch.randperm(n, generator=gen) for _ in range(b)])
        cross = torch.matmul(Xt, Yt[perms])  # (b, d1, d2)
        fro2 = cross.double().pow(2).sum((1, 2))
        tr = fro2 - (dy_t[perms] * dx_t).sum(1)
        rr = (ry_t[perms] * rx_t).sum(1)
        h = (tr + const - 2.0 / (n - 2) * rr) / (n * (n - 3))
        null[start : start + b] = (h / denom).numpy()
    p = (1 + int((null >= observed).sum())) / (1 + n_perm)
    return float(observed), float(p), null
