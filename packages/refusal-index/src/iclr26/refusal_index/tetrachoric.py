"""The Gaussian-copula machinery behind the two-pass estimator.

Upper bivariate-normal probabilities ``Φ̄₂(a, b; ρ) = P(Z_R > a, Z_E > b)`` computed
deterministically with Genz's (2004) Gauss–Legendre version of the Drezner–Wesolowsky method
(about 1e-15 absolute error; SciPy's ``multivariate_normal.cdf`` is randomised quasi-Monte Carlo
and only serves as a test oracle), the tetrachoric correlation that inverts it, and the
Pearson→Spearman map of a bivariate normal. All functions broadcast over NumPy arrays.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

__all__ = ["bvn_density", "bvn_upper", "pearson_to_spearman", "spearman_to_pearson", "tetrachoric"]

# 20-point Gauss–Legendre rule on [-1, 1], folded to [0, 2] as in Genz's BVNU.
_GL_X = np.array(
    [
        0.9931285991850949, 0.9639719272779138, 0.9122344282513259, 0.8391169718222188,
        0.7463319064601508, 0.6360536807265150, 0.5108670019508271, 0.3737060887154196,
        0.2277858511416451, 0.07652652113349733,
    ]
)  # fmt: skip
_GL_W = np.array(
    [
        0.01761400713915212, 0.04060142980038694, 0.06267204833410906, 0.08327674157670475,
        0.1019301198172404, 0.1181945319615184, 0.1316886384491766, 0.1420961093183821,
        0.1491729864726037, 0.1527533871307259,
    ]
)  # fmt: skip
_X = np.concatenate([1.0 - _GL_X, 1.0 + _GL_X])
_W = np.concatenate([_GL_W, _GL_W])
_TWO_PI = 2.0 * np.pi


def _bvn_moderate(h: NDArray, k: NDArray, r: NDArray) -> NDArray:
    """|r| < 0.925: integrate d/dr of the probability over [0, r] (Plackett's identity)."""
    hk = h * k
    hs = (h * h + k * k) / 2.0
    asr = np.arcsin(r) / 2.0
    sn = np.sin(asr[:, None] * _X[None, :])
    terms = np.exp((sn * hk[:, None] - hs[:, None]) / (1.0 - sn * sn))
    return terms @ _W * asr / _TWO_PI + ndtr(-h) * ndtr(-k)


def _bvn_strong(h: NDArray, k: NDArray, r: NDArray) -> NDArray:
    """|r| >= 0.925: expansion around |r| = 1 (Drezner–Wesolowsky), exact at r = ±1."""
    k = np.where(r < 0, -k, k)
    hk = h * k
    bvn = np.zeros_like(h)
    inner = np.abs(r) < 1.0
    if inner.any():
        hi, ki, hki, ri = h[inner], k[inner], hk[inner], r[inner]
        as_ = (1.0 - ri) * (1.0 + ri)
        a = np.sqrt(as_)
        bs = (hi - ki) ** 2
        c = (4.0 - hki) / 8.0
        d = (12.0 - hki) / 80.0
        asr = -(bs / as_ + hki) / 2.0
        val = np.where(
            asr > -100.0,
            a * np.exp(asr) * (1.0 - c * (bs - as_) * (1.0 - d * bs) / 3.0 + c * d * as_ * as_),
            0.0,
        )
        b = np.sqrt(bs)
        sp = np.sqrt(_TWO_PI) * ndtr(-b / a)
        val = np.where(
            hki > -100.0,
            val - np.exp(-hki / 2.0) * sp * b * (1.0 - c * bs * (1.0 - d * bs) / 3.0),
            val,
        )
        a2 = a / 2.0
        xs = (a2[:, None] * _X[None, :]) ** 2
        asr2 = -(bs[:, None] / xs + hki[:, None]) / 2.0
        sp2 = 1.0 + c[:, None] * xs * (1.0 + 5.0 * d[:, None] * xs)
        rs = np.sqrt(1.0 - xs)
        ep = np.exp(-(hki[:, None] / 2.0) * xs / (1.0 + rs) ** 2) / rs
        integrand = np.where(asr2 > -100.0, np.exp(np.maximum(asr2, -100.0)) * (sp2 - ep), 0.0)
        bvn[inner] = (a2 * (integrand @ _W) - val) / _TWO_PI
    positive = r > 0
    out = np.where(positive, bvn + ndtr(-np.maximum(h, k)), 0.0)
    # r < 0 (k was negated): P(X > h, X < k) = Φ(k) − Φ(h) when h < k, minus the expansion.
    band = np.where(h < 0, ndtr(k) - ndtr(h), ndtr(-h) - ndtr(-k))
    negative = np.where(h >= k, -bvn, band - bvn)
    return np.where(positive, out, negative)


def _floats(**arrays: ArrayLike) -> list[NDArray[np.float64]]:
    """Inputs as float arrays, refusing non-numbers and NaN with errors that name the argument."""
    out = []
    for name, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be real numbers, got dtype {arr.dtype}")
        arr = arr.astype(float)
        if np.isnan(arr).any():
            raise ValueError(f"{name} contains NaN")
        out.append(arr)
    return out


def bvn_upper(a: ArrayLike, b: ArrayLike, rho: ArrayLike) -> NDArray[np.float64] | float:
    """Upper orthant probability ``Φ̄₂(a, b; ρ) = P(X > a, Y > b)`` of a standard bivariate normal.

    This is the left side of the spec's §2.3 equation ``Φ̄₂(a, b; ρ) = p₁₁``. Deterministic
    (Genz 2004, 20-point Gauss–Legendre), accurate to ~1e-15, exact at ``ρ = ±1`` and for
    infinite thresholds. Broadcasts over arrays.

    Args:
        a, b: thresholds (may be ±inf).
        rho: correlation in ``[-1, 1]``.

    Returns:
        Probabilities in ``[0, 1]``; a float when all inputs are scalars.
    """
    a_, b_, r_ = np.broadcast_arrays(*_floats(a=a, b=b, rho=rho))
    if (np.abs(r_) > 1.0).any():
        raise ValueError("rho must be in [-1, 1]")
    shape = a_.shape
    h, k, r = (v.ravel().copy() for v in (a_, b_, r_))
    out = np.empty_like(h)
    finite = np.isfinite(h) & np.isfinite(k)
    # Infinite thresholds reduce to a marginal (or to 0/1).
    out[~finite] = np.where(
        (h[~finite] == np.inf) | (k[~finite] == np.inf),
        0.0,
        np.where(h[~finite] == -np.inf, ndtr(-k[~finite]), ndtr(-h[~finite])),
    )
    moderate = finite & (np.abs(r) < 0.925)
    strong = finite & ~moderate
    if moderate.any():
        out[moderate] = _bvn_moderate(h[moderate], k[moderate], r[moderate])
    if strong.any():
        out[strong] = _bvn_strong(h[strong], k[strong], r[strong])
    out = np.clip(out, 0.0, 1.0).reshape(shape)
    return float(out) if out.ndim == 0 else out


def bvn_density(a: ArrayLike, b: ArrayLike, rho: ArrayLike) -> NDArray[np.float64] | float:
    """Bivariate normal density ``φ₂(a, b; ρ)``, which is ``∂Φ̄₂(a, b; ρ)/∂ρ`` (Plackett).

    Used by the Newton steps of :func:`tetrachoric` and by the delta-method standard errors.
    """
    a, b, rho = _floats(a=a, b=b, rho=rho)
    if (np.abs(rho) > 1.0).any():
        raise ValueError("rho must be in [-1, 1]")
    one_minus = np.maximum(1.0 - rho * rho, 1e-300)
    quad = (a * a - 2.0 * rho * a * b + b * b) / one_minus
    out = np.exp(-quad / 2.0) / (_TWO_PI * np.sqrt(one_minus))
    return float(out) if out.ndim == 0 else out


def tetrachoric(
    p_row: ArrayLike, p_col: ArrayLike, p_11: ArrayLike, *, tol: float = 1e-12, max_iter: int = 100
) -> NDArray[np.float64] | float:
    """Tetrachoric correlation: the ``ρ`` with ``Φ̄₂(Φ⁻¹(1−p_row), Φ⁻¹(1−p_col); ρ) = p_11``.

    Spec §2.3. ``Φ̄₂`` is strictly increasing in ``ρ`` (its derivative is the density
    ``φ₂ > 0``), so the root on ``[-1, 1]`` is unique; it is found by Newton steps safeguarded
    by bisection on a shrinking bracket, vectorised over arrays (bootstrap replicates solve
    together). ``p_11`` at a Fréchet bound gives ``ρ = ±1`` exactly.

    Args:
        p_row: marginal rate of the first event (refusal rate ``q``), in ``(0, 1)``.
        p_col: marginal rate of the second event (forced error rate ``p_e``), in ``(0, 1)``.
        p_11: joint rate of both events, within the Fréchet bounds
            ``max(0, p_row + p_col − 1) ≤ p_11 ≤ min(p_row, p_col)``.
        tol: absolute tolerance on ``ρ``.
        max_iter: iteration cap (bisection alone needs ~45 for 1e-12).

    Returns:
        ``ρ`` (NaN where a marginal is 0 or 1 or ``p_11`` is outside the Fréchet bounds).
    """
    q, pe, p11 = np.broadcast_arrays(*_floats(p_row=p_row, p_col=p_col, p_11=p_11))
    for name, arr in (("p_row", q), ("p_col", pe), ("p_11", p11)):
        if ((arr < 0) | (arr > 1)).any():
            raise ValueError(f"{name} must be rates in [0, 1]")
    shape = q.shape
    q, pe, p11 = q.ravel(), pe.ravel(), p11.ravel()
    lower = np.maximum(0.0, q + pe - 1.0)
    upper = np.minimum(q, pe)
    valid = (
        (q > 0) & (q < 1) & (pe > 0) & (pe < 1) & (p11 >= lower - 1e-15) & (p11 <= upper + 1e-15)
    )
    rho = np.full(q.shape, np.nan)
    if valid.any():
        a = ndtri(1.0 - q[valid])
        b = ndtri(1.0 - pe[valid])
        target = np.clip(p11[valid], lower[valid], upper[valid])
        lo = np.full(a.shape, -1.0)
        hi = np.full(a.shape, 1.0)
        # Start from the zero-correlation crossing direction: ρ = 0 is a good first guess.
        x = np.zeros(a.shape)
        for _ in range(max_iter):
            f = bvn_upper(a, b, x) - target
            lo = np.where(f < 0, x, lo)
            hi = np.where(f > 0, x, hi)
            slope = bvn_density(a, b, x)
            newton = x - f / np.where(slope > 0, slope, np.inf)
            inside = (newton > lo) & (newton < hi) & np.isfinite(newton)
            x_new = np.where(inside, newton, (lo + hi) / 2.0)
            done = (np.abs(x_new - x) < tol) | (f == 0) | (hi - lo < tol)
            x = np.where(f == 0, x, x_new)
            if done.all():
                break
        at_upper = target >= upper[valid] - 1e-15
        at_lower = target <= lower[valid] + 1e-15
        x = np.where(at_upper, 1.0, np.where(at_lower, -1.0, x))
        rho[valid] = np.clip(x, -1.0, 1.0)
    rho = rho.reshape(shape)
    return float(rho) if rho.ndim == 0 else rho


def pearson_to_spearman(rho: ArrayLike) -> NDArray[np.float64] | float:
    """Spearman correlation of a bivariate normal with Pearson ``ρ``: ``(6/π)·arcsin(ρ/2)``."""
    (r,) = _floats(rho=rho)
    if (np.abs(r) > 1.0).any():
        raise ValueError("rho must be in [-1, 1]")
    out = 6.0 / np.pi * np.arcsin(r / 2.0)
    return float(out) if np.ndim(out) == 0 else out


def spearman_to_pearson(ri: ArrayLike) -> NDArray[np.float64] | float:
    """Inverse of :func:`pearson_to_spearman`: ``2·sin(π·ρ_S/6)``."""
    (r,) = _floats(ri=ri)
    if (np.abs(r) > 1.0).any():
        raise ValueError("ri must be in [-1, 1]")
    out = 2.0 * np.sin(np.pi * r / 6.0)
    return float(out) if np.ndim(out) == 0 else out
