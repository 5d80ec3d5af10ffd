"""Retrieval metrics: average precision, mAP, mAP@k (the official ``metrics.py`` protocol, no junk)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.shared import check_int

__all__ = ["average_precision", "map_at_k", "mean_average_precision"]


def average_precision(relevant: ArrayLike, n_relevant: int | None = None) -> float:
    """AP of one ranked list: mean over relevant items of precision at their rank.

    Args:
        relevant: (N,) bool, relevance in ranked order (best first).
        n_relevant: total relevant items in the database (defaults to ``relevant.sum()``);
            relevant items missing from the list count as precision 0.
    """
    rel = np.asarray(relevant, dtype=bool)
    if rel.ndim != 1:
        raise ValueError(f"relevant must be 1-D, got shape {rel.shape}")
    total = int(rel.sum()) if n_relevant is None else n_relevant
    if total <= 0:
        raise ValueError("average precision needs at least one relevant item")
    hits = np.cumsum(rel)
    ranks = np.nonzero(rel)[0] + 1
    return float((hits[rel] / ranks).sum() / total)


def _check(order: NDArray, labels: NDArray) -> tuple[NDArray, NDArray]:
    order, labels = np.asarray(order), np.asarray(labels, dtype=bool)
    if order.ndim != 2 or labels.ndim != 2 or order.shape != labels.shape:
        raise ValueError(
            f"order and labels must both be (Q, N), got {order.shape} and {labels.shape}"
        )
    return order, labels


def mean_average_precision(order: ArrayLike, labels: ArrayLike) -> float:
    """mAP over queries; ``order`` (Q, N) ranks database indices, ``labels`` (Q, N) relevance."""
    order, labels = _check(order, labels)
    return float(np.mean([average_precision(lab[o]) for o, lab in zip(order, labels, strict=True)]))


def map_at_k(order: ArrayLike, labels: ArrayLike, k: int) -> float:
    """mAP@k: AP truncated at rank k, normalised by min(k, #relevant) (GLDv2 convention)."""
    order, labels = _check(order, labels)
    check_int(k, "k", low=1)
    aps = []
    for o, lab in zip(order, labels, strict=True):
        rel = lab[o][:k]
        aps.append(average_precision(rel, min(k, int(lab.sum()))) if rel.any() else 0.0)
    return float(np.mean(aps))
