"""Acquisitions on a finite candidate set from the surrogate's (μ, σ²), for maximisation.

GIT-BO has no continuous acquisition optimiser: every candidate is scored and the argmax is
taken. The ICLR version uses UCB ``a = μ + √β σ``; the earlier official code's default,
"ThompsonSampling", averaged 512 Gaussian draws (≈ the mean); :func:`thompson` here is one real
draw per candidate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from iclr26.shared import check_choice, check_int, check_range

__all__ = [
    "ACQUISITIONS",
    "acquisition_values",
    "expected_improvement",
    "gp_ucb_beta",
    "thompson",
    "ucb",
]

ACQUISITIONS = ("ucb", "ei", "ts")


def _check_mv(mean: torch.Tensor, var: torch.Tensor) -> None:
    if not isinstance(mean, torch.Tensor) or not isinstance(var, torch.Tensor):
        raise TypeError("mean and var must be torch tensors")
    if mean.ndim != 1 or mean.numel() == 0:
        raise ValueError(f"mean must be a non-empty 1-D tensor, got shape {tuple(mean.shape)}")
    if var.shape != mean.shape:
        raise ValueError(f"var must have shape {tuple(mean.shape)}, got {tuple(var.shape)}")
    if not bool(torch.isfinite(mean).all()) or not bool(torch.isfinite(var).all()):
        raise ValueError("mean and var must be finite")
    if bool((var < 0).any()):
        raise ValueError("var must be non-negative")


def ucb(mean: torch.Tensor, var: torch.Tensor, beta: float = 4.0) -> torch.Tensor:
    """Upper confidence bound ``μ + √β σ`` (``β = 4`` gives ``√β = 2``, as the spec's runs)."""
    _check_mv(mean, var)
    check_range(beta, "beta", low=0.0)
    return mean + math.sqrt(beta) * var.clamp_min(0).sqrt()


def expected_improvement(mean: torch.Tensor, var: torch.Tensor, best: float) -> torch.Tensor:
    """Closed-form Gaussian EI over ``best`` (the incumbent), for maximisation."""
    _check_mv(mean, var)
    check_range(best, "best")
    sigma = var.clamp_min(1e-18).sqrt()
    z = (mean - best) / sigma
    normal = torch.distributions.Normal(torch.zeros_like(z), torch.ones_like(z))
    return sigma * (z * normal.cdf(z) + normal.log_prob(z).exp())


def thompson(
    mean: torch.Tensor, var: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One draw ``μ + σ ε``, ``ε ~ N(0, 1)`` per candidate (independent marginals)."""
    _check_mv(mean, var)
    eps = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device="cpu").to(mean)
    return mean + var.clamp_min(0).sqrt() * eps


def gp_ucb_beta(t: int, n_candidates: int, delta: float = 0.1) -> float:
    """GP-UCB schedule ``β_t = 2 log(M t² π² / (6 δ))`` with ``M`` candidates (Srinivas et al.)."""
    check_int(t, "t", low=1)
    check_int(n_candidates, "n_candidates", low=1)
    check_range(delta, "delta", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    return 2.0 * math.log(n_candidates * t * t * math.pi**2 / (6.0 * delta))


def acquisition_values(
    name: str,
    mean: torch.Tensor,
    var: torch.Tensor,
    *,
    best: float | None = None,
    beta: float | Callable[[int, int], float] = 4.0,
    t: int = 1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Score candidates with ``"ucb"``, ``"ei"`` or ``"ts"``.

    Args:
        name: acquisition name.
        mean, var: ``(M,)`` posterior mean and variance (maximisation).
        best: incumbent value (``"ei"`` only).
        beta: UCB β, or a callable ``beta(t, M)`` (e.g. :func:`gp_ucb_beta`).
        t: BO iteration (1-based), passed to a callable β.
        generator: randomness of ``"ts"``.
    """
    check_choice(name, "acquisition", ACQUISITIONS)
    if name == "ucb":
        b = beta(t, int(mean.shape[0])) if callable(beta) else beta
        return ucb(mean, var, b)
    if name == "ei":
        if best is None:
            raise ValueError("acquisition 'ei' needs best (the incumbent value)")
        return expected_improvement(mean, var, best)
    return thompson(mean, var, generator)
