"""Noise schedules: the truncated mask-ratio schedule of MaskGRPO and the κ schedules of samplers."""

from __future__ import annotations

import math

from iclr26.shared import check_choice, check_int, check_range

__all__ = ["kappa", "mask_ratio_schedule"]

#: The released trainer caps the mask ratio here so that at least a sliver of context survives.
MAX_MASK_RATIO = 0.999


def mask_ratio_schedule(iteration: int, num_iterations: int, min_mask_rate: float = 0.6) -> float:
    """Mask ratio t_μ of inner iteration ``iteration`` (0-based) of MaskGRPO (spec §2.4, step 1).

    ``t_μ = min(t_min + (1 − t_min)·(μ + 1)/M, 0.999)`` for μ = 0..M−1, as in the official trainer
    (``(iter_idx + 1) / M``): the ratios rise from just above ``t_min`` to 0.999 at the last
    iteration and never go below ``t_min`` ("truncated" schedule).

    Args:
        iteration: μ, 0-based, in ``[0, num_iterations)``.
        num_iterations: M, the number of inner policy updates per rollout batch (>= 1).
        min_mask_rate: t_min in (0, 1); 0.6 in the released training scripts (the default here),
            0.5 in ``configs/rl.yaml``, 0.3 in the config dataclass.
    """
    check_int(num_iterations, "num_iterations", low=1)
    check_int(iteration, "iteration", low=0, high=num_iterations - 1)
    t_min = check_range(
        min_mask_rate, "min_mask_rate", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    return min(t_min + (1.0 - t_min) * (iteration + 1) / num_iterations, MAX_MASK_RATIO)


def kappa(step: int, steps: int, schedule: str = "cosine") -> float:
    """Fraction of generated tokens still masked after ``step`` of ``steps`` sampling steps.

    ``cosine``: κ_s = cos(π/2 · s/T) (MaskGIT and the emerge sampler, spec §2.6);
    ``linear``: κ_s = 1 − s/T. κ_0 = 1 (all masked) and κ_T = 0 (all revealed).
    """
    check_int(steps, "steps", low=1)
    check_int(step, "step", low=0, high=steps)
    check_choice(schedule, "schedule", ("cosine", "linear"))
    if step == steps:
        return 0.0
    if schedule == "cosine":
        return math.cos(math.pi / 2 * step / steps)
    return 1.0 - step / steps
