"""Temperature calibration for non-learned descriptors (design notes §6.3, our addition).

DINOv2 tokens after the learned remap spread their cosines over [−1, 1], so τ = 10 suffices;
RootSIFT cosines sit in about [0.3, 1] and τ = 10 gives a diffuse plan. This helper picks τ so
that the median best-match mass of descriptors in matching pairs reaches a target.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from iclr26.elvis.features import LocalFeatures
from iclr26.elvis.model import ELViS
from iclr26.shared import check_range

__all__ = ["calibrate_temperature"]


def calibrate_temperature(
    model: ELViS,
    positive_pairs: Sequence[tuple[LocalFeatures, LocalFeatures]],
    *,
    grid: Sequence[float] = (5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 75.0, 100.0),
    target: float = 0.5,
    quantile: float = 0.9,
) -> float:
    """Smallest τ on ``grid`` whose ``quantile`` of best-match masses r_i reaches ``target``.

    Args:
        model: the ELViS model (its temperature is restored afterwards).
        positive_pairs: (query, database) pairs known to match, e.g. an image and a warp of it.
        grid: candidate temperatures, tried in increasing order.
        target: wanted best-match mass P̃ of confident correspondences (0.5: a soft coin flip).
        quantile: which quantile of r_i stands for "the true matches" (most descriptors of a
            cluttered pair have none).

    Returns:
        τ (the largest grid value if none reaches the target).
    """
    if not len(positive_pairs):
        raise ValueError("positive_pairs must not be empty")
    check_range(target, "target", low=0.0, high=1.0)
    check_range(quantile, "quantile", low=0.0, high=1.0)
    saved = model.log_temperature.detach().clone()
    try:
        for tau in sorted(grid):
            model.log_temperature.data.fill_(float(np.log(tau)))
            best = np.concatenate([model.explain(q, d).row_best for q, d in positive_pairs])
            if np.quantile(best, quantile) >= target:
                return float(tau)
        return float(max(grid))
    finally:
        model.log_temperature.data.copy_(saved)
