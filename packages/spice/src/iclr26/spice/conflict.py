"""Gradient-conflict statistics of a selection (the diagnostics the official code logs)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from iclr26.spice.objectives import as_indices, as_matrix

__all__ = ["conflict_stats"]


def conflict_stats(G: Any, indices: ArrayLike) -> dict[str, float]:
    """Cosine of each selected gradient to the mean of the selection, summarised.

    Returns:
        ``conflict_ratio`` (share of negative cosines), ``conflict_mean`` (mean ``|cos|`` over the
        negative ones, 0 if none), ``avg_cosine`` and ``n_conflicts``.
    """
    G = as_matrix(G)
    idx = as_indices(indices, G.shape[0])
    sel = G[idx]
    mean = sel.mean(axis=0)
    norms = np.linalg.norm(sel, axis=1) * np.linalg.norm(mean)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(norms > 0, sel @ mean / norms, 0.0)
    negative = cos < 0
    return {
        "conflict_ratio": float(negative.mean()),
        "conflict_mean": float(np.abs(cos[negative]).mean()) if negative.any() else 0.0,
        "avg_cosine": float(cos.mean()),
        "n_conflicts": int(negative.sum()),
    }
