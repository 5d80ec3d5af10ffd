"""The generic two-sided Gaussian zeroth-order gradient estimator (paper §ZO, §2.3 of the notes)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["zo_gradient"]


def zo_gradient(
    f: Callable[[Tensor], Tensor],
    x: Tensor,
    delta: float = 0.5,
    n_samples: int = 5,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``(1/(2δb)) Σ_i [f(x + δ z_i) − f(x − δ z_i)] z_i`` with ``z_i ~ N(0, I)``.

    An unbiased estimate of the gradient of the Gaussian smoothing ``E f(x + δz)`` (equal to
    ``∇f`` for quadratics). The spiking layers use its per-element form as the backward of the
    Heaviside (:class:`~iclr26.safa_snn.neurons.LocalZOSpike`); this version is for any scalar
    function, e.g. weight-level ZO training.

    Args:
        f: maps a tensor shaped like ``x`` to a scalar tensor.
        x: the point (floating point, finite).
        delta: smoothing radius δ > 0.
        n_samples: number b of Gaussian directions (>= 1).
        generator: torch.Generator for the directions.
    """
    if not callable(f):
        raise TypeError("f must be callable")
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point torch.Tensor")
    if not torch.isfinite(x).all():
        raise ValueError("x must be finite (found NaN or inf)")
    if not (isinstance(delta, int | float) and delta > 0):
        raise ValueError(f"delta must be > 0, got {delta!r}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    grad = torch.zeros_like(x)
    with torch.no_grad():
        for _ in range(n_samples):
            z = torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
            diff = f(x + delta * z) - f(x - delta * z)
            if diff.numel() != 1:
                raise ValueError(f"f must return a scalar, got shape {tuple(diff.shape)}")
            grad += diff.reshape(()) * z
    return grad / (2.0 * delta * n_samples)
