"""The gradient-informed (GI) subspace: estimator, eigen-decomposition and candidate sampler.

GIT-BO builds ``H = (1/M) Σ_j w_j g_j g_jᵀ`` from the surrogate's predictive-mean gradients
``g_j = ∇_x μ(x_j)`` at ``M`` points (the average Fisher information of the inputs with σ held
constant, also the active-subspace matrix ``E[∇f ∇fᵀ]`` with ∇f replaced by ∇μ), keeps its top-r
eigenvectors ``U_r`` and draws candidates ``x = x₀ + U_r α``, ``α ~ U[-s, s]^r``, clipped to the
box. Pure torch; every function follows the device and dtype of its inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from iclr26.shared import check_choice, check_int, check_range

__all__ = [
    "Subspace",
    "active_subspace",
    "captured_fraction",
    "gradient_outer_product",
    "random_subspace",
    "sample_subspace",
]


def _tensor(x, name: str, ndim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(x, dtype=dtype or torch.float64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name} must be a tensor or array, got {type(x).__name__}") from err
    if not (x.is_floating_point()):
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite, but contains NaN or inf")
    return x


def gradient_outer_product(
    grads: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """The GI matrix ``H = (1/M) Σ_j w_j g_j g_jᵀ`` (paper: average Fisher information).

    Args:
        grads: ``(M, D)`` float tensor, row ``j`` is ``∇_x μ(x_j)``.
        weights: optional ``(M,)`` non-negative weights (e.g. ``1/σ²_j`` for the Fisher-weighted
            variant); still normalised by ``M``, the number of points, not by ``Σ w``.

    Returns:
        ``(D, D)`` symmetric positive semi-definite tensor, same dtype and device as ``grads``.
    """
    g = _tensor(grads, "grads", 2)
    if weights is not None:
        w = _tensor(weights, "weights", 1, dtype=g.dtype).to(g)
        if w.shape[0] != g.shape[0]:
            raise ValueError(f"weights must have shape ({g.shape[0]},), got {tuple(w.shape)}")
        if bool((w < 0).any()):
            raise ValueError("weights must be non-negative")
        g = g * w.sqrt().unsqueeze(1)
    H = g.T @ g / g.shape[0]
    return 0.5 * (H + H.T)


@dataclass(frozen=True)
class Subspace:
    """Top eigenvectors of ``H``.

    Attributes:
        basis: ``(D, r)`` orthonormal columns ``U_r`` (eigenvectors of the r largest eigenvalues).
        eigenvalues: ``(D,)`` all eigenvalues of ``H``, descending (clamped at 0).
        rank: ``r``.
        eigengap: ``λ_r / max(λ_{r+1}, ε λ_1)`` (``inf`` when ``r = D``).
    """

    basis: torch.Tensor
    eigenvalues: torch.Tensor
    rank: int
    eigengap: float


def active_subspace(
    H: torch.Tensor, rank: int | None = 15, energy: float | None = None
) -> Subspace:
    """Eigen-decompose ``H`` and keep the top-r eigenvectors (paper default ``r = 15``).

    Args:
        H: ``(D, D)`` symmetric PSD matrix (from :func:`gradient_outer_product`).
        rank: fixed ``r >= 1``, capped at ``D``; ignored when ``energy`` is given.
        energy: if given, the smallest ``r`` whose eigenvalues reach this fraction (0, 1] of the
            trace (capped at ``rank`` when both are given).

    Returns:
        :class:`Subspace`.
    """
    H = _tensor(H, "H", 2)
    D = H.shape[0]
    if H.shape[1] != D:
        raise ValueError(f"H must be square, got shape {tuple(H.shape)}")
    if rank is None and energy is None:
        raise ValueError("give rank or energy")
    if rank is not None:
        check_int(rank, "rank", low=1)
    if energy is not None:
        check_range(energy, "energy", low=0.0, high=1.0, low_inclusive=False)
    evals, evecs = torch.linalg.eigh(0.5 * (H + H.T))  # ascending
    evals, evecs = evals.flip(0).clamp_min(0.0), evecs.flip(1)
    r = D if rank is None else min(int(rank), D)
    if energy is not None:
        total = float(evals.sum())
        if total <= 0:
            r_energy = 1
        else:
            frac = torch.cumsum(evals, 0) / total
            r_energy = int((frac < energy - 1e-12).sum()) + 1
        r = min(r_energy, r)
    eps = torch.finfo(evals.dtype).eps
    if r < D:
        lam1 = float(evals[0])
        gap = float(evals[r - 1]) / max(float(evals[r]), eps * lam1, torch.finfo(evals.dtype).tiny)
    else:
        gap = math.inf
    return Subspace(basis=evecs[:, :r].contiguous(), eigenvalues=evals, rank=r, eigengap=gap)


def random_subspace(
    dim: int, rank: int, *, seed: int = 0, dtype: torch.dtype = torch.float64, device=None
) -> torch.Tensor:
    """A uniformly random ``(dim, rank)`` orthonormal basis (the random-U control)."""
    check_int(dim, "dim", low=1)
    check_int(rank, "rank", low=1, high=dim)
    g = torch.Generator(device="cpu").manual_seed(int(seed))
    Q, R = torch.linalg.qr(torch.randn(dim, rank, generator=g, dtype=torch.float64))
    Q = Q * torch.sign(torch.diagonal(R)).unsqueeze(0)
    return Q.to(dtype=dtype, device=device)


def sample_subspace(
    origin: torch.Tensor,
    basis: torch.Tensor,
    n: int,
    *,
    scale: float = 0.2,
    lower: float | torch.Tensor = 0.0,
    upper: float | torch.Tensor = 1.0,
    method: str = "uniform",
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> torch.Tensor:
    """Candidates ``x = clip(x₀ + U α)``, ``α ~ U[-s, s]^r`` (paper default ``s = 0.2``).

    Args:
        origin: ``(D,)`` point ``x₀`` (mean of the evaluated inputs in the official code, or the
            incumbent).
        basis: ``(D, r)`` orthonormal columns.
        n: number of candidates.
        scale: half-width ``s`` of the box for α.
        lower, upper: box bounds (scalars or ``(D,)``); candidates are clipped into it.
        method: ``"uniform"`` (i.i.d., as the official code) or ``"sobol"`` (scrambled Sobol α).
        generator: torch generator for ``"uniform"`` (``seed`` is used when it is ``None``).
        seed: seed of the Sobol scramble, or of a fresh generator.

    Returns:
        ``(n, D)`` tensor, dtype/device of ``origin``.
    """
    x0 = _tensor(origin, "origin", 1)
    U = _tensor(basis, "basis", 2, dtype=x0.dtype).to(x0)
    D = x0.shape[0]
    if U.shape[0] != D:
        raise ValueError(f"basis must have shape ({D}, r), got {tuple(U.shape)}")
    check_int(n, "n", low=1)
    check_range(scale, "scale", low=0.0, low_inclusive=False)
    check_choice(method, "method", ("uniform", "sobol"))
    lo = torch.as_tensor(lower, dtype=x0.dtype, device=x0.device).expand(D)
    hi = torch.as_tensor(upper, dtype=x0.dtype, device=x0.device).expand(D)
    if not bool((lo < hi).all()):
        raise ValueError("lower must be below upper in every coordinate")
    r = U.shape[1]
    if method == "sobol":
        if r > 21201:
            raise ValueError(f"sobol sampling supports r <= 21201, got {r}")
        eng = torch.quasirandom.SobolEngine(r, scramble=True, seed=0 if seed is None else seed)
        u = eng.draw(n, dtype=torch.float64).to(x0)
    else:
        if generator is None:
            generator = torch.Generator(device="cpu").manual_seed(0 if seed is None else int(seed))
        u = torch.rand(n, r, generator=generator, dtype=torch.float64).to(x0)
    alpha = (2.0 * u - 1.0) * float(scale)
    X = x0.unsqueeze(0) + alpha @ U.T
    return torch.maximum(torch.minimum(X, hi), lo)


def captured_fraction(true_basis: torch.Tensor, basis: torch.Tensor) -> float:
    """``‖Aᵀ U‖²_F / d_e``: share of the true ``d_e``-dim subspace that ``U`` spans (1 = all).

    Args:
        true_basis: ``(D, d_e)`` columns spanning the true subspace (orthonormalised here).
        basis: ``(D, r)`` orthonormal columns.

    A random r-dim basis in D dimensions captures ``r / D`` on average.
    """
    A = _tensor(true_basis, "true_basis", 2)
    U = _tensor(basis, "basis", 2, dtype=A.dtype).to(A)
    if A.shape[0] != U.shape[0]:
        raise ValueError(
            f"true_basis and basis must have the same number of rows, got {A.shape[0]} and "
            f"{U.shape[0]}"
        )
    Q, _ = torch.linalg.qr(A)
    return float((Q.T @ U).pow(2).sum() / Q.shape[1])
