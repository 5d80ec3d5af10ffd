"""Retrieval metrics: average precision, mAP, mAP@k (the official ``metrics.py`` protocol, no junk)
and the revisited Oxford/Paris protocol with per-query positive and junk sets
(Radenović et al., CVPR 2018): easy / medium / hard mAP."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.shared import check_int

__all__ = [
    "REVISITED_PROTOCOLS",
    "average_precision",
    "map_at_k",
    "mean_average_precision",
    "revisited_ground_truth",
    "revisited_map",
]

REVISITED_PROTOCOLS = ("easy", "medium", "hard")


def average_precision(relevant: ArrayLike, n_relevant: int | None = None) -> float:
    """AP of one ranked list: mean over relevant items of precision at their rank.

    Args:
        relevant: (N,) bool, relevance in ranked order (best first).
        n_relevant: total relevant items in the database (defaults to ``relevant.sum()``);
            relevant items missing from the list count as precision 0.
    """
    rel = _as_bool(relevant, "relevant")
    if rel.ndim != 1:
        raise ValueError(f"relevant must be 1-D, got shape {rel.shape}")
    total = int(rel.sum()) if n_relevant is None else n_relevant
    if total <= 0:
        raise ValueError("average precision needs at least one relevant item")
    hits = np.cumsum(rel)
    ranks = np.nonzero(rel)[0] + 1
    return float((hits[rel] / ranks).sum() / total)


def _as_bool(x: ArrayLike, name: str) -> NDArray[np.bool_]:
    """Bool, or 0/1 integers (converted); floats and other values are refused."""
    arr = np.asarray(x)
    if arr.dtype == bool:
        return arr
    if arr.size and np.issubdtype(arr.dtype, np.integer) and np.isin(arr, (0, 1)).all():
        return arr.astype(bool)
    if arr.size == 0:
        return arr.astype(bool)
    raise TypeError(f"{name} must be bool (or 0/1 integers), got dtype {arr.dtype}")


def _as_order(x: ArrayLike, name: str = "order") -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer indices, got dtype {arr.dtype}")
    return arr


def _check(order: NDArray, labels: NDArray) -> tuple[NDArray, NDArray]:
    order, labels = _as_order(order), _as_bool(labels, "labels")
    if order.ndim != 2 or labels.ndim != 2 or order.shape != labels.shape:
        raise ValueError(
            f"order and labels must both be (Q, N), got {order.shape} and {labels.shape}"
        )
    if order.size == 0:
        raise ValueError(f"order is empty, shape {order.shape}")
    n = order.shape[1]
    if not np.array_equal(np.sort(order, axis=1), np.broadcast_to(np.arange(n), order.shape)):
        raise ValueError("each row of order must be a permutation of range(N)")
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


def _trapezoid_ap(ranks: NDArray, n_pos: int) -> float:
    # revisited ``compute_ap``: area under the precision-recall curve by trapezoids, where the
    # precision just before the j-th positive (0-based rank r) is j / r (1 at r = 0)
    ap = 0.0
    for j, r in enumerate(ranks):
        p0 = 1.0 if r == 0 else j / r
        p1 = (j + 1) / (r + 1)
        ap += (p0 + p1) / (2 * n_pos)
    return ap


def revisited_map(
    order: ArrayLike,
    positives: ArrayLike,
    junk: ArrayLike | None = None,
    *,
    ap: str = "trapezoid",
) -> float:
    """mAP with per-query positive and junk sets (the revisited ``compute_map`` semantics).

    Junk items are removed from each ranked list before AP is computed, so ranking them high
    neither helps nor hurts; every other non-positive item counts as a negative. Queries with no
    positive are skipped (as in the revisited code); at least one query must have one.

    Args:
        order: (Q, N) database indices, best first (each row a permutation of ``range(N)``).
        positives: (Q, N) bool, relevant items per query.
        junk: (Q, N) bool, items to ignore, disjoint from ``positives``; ``None`` = no junk.
        ap: ``"trapezoid"`` (default): the revisited code's AP, the trapezoidal area under the
            precision-recall curve, precision (j/r + (j+1)/(r+1))/2 at the j-th positive of
            0-based rank r; ``"standard"``: mean precision at the positives' ranks, i.e.
            :func:`average_precision` (which the trapezoid never exceeds).

    Returns:
        mAP in [0, 1].
    """
    if ap not in ("trapezoid", "standard"):
        raise ValueError(f"ap must be 'trapezoid' or 'standard', got {ap!r}")
    order = _as_order(order)
    pos = np.asarray(positives)
    if pos.dtype != bool:
        raise TypeError(f"positives must be a bool array, got dtype {pos.dtype}")
    jnk = np.zeros_like(pos) if junk is None else np.asarray(junk)
    if jnk.dtype != bool:
        raise TypeError(f"junk must be a bool array, got dtype {jnk.dtype}")
    if order.ndim != 2 or pos.shape != order.shape or jnk.shape != order.shape:
        raise ValueError(
            "order, positives and junk must all be (Q, N), got "
            f"{order.shape}, {pos.shape} and {jnk.shape}"
        )
    n = order.shape[1]
    if not np.array_equal(np.sort(order, axis=1), np.broadcast_to(np.arange(n), order.shape)):
        raise ValueError("each row of order must be a permutation of range(N)")
    if (pos & jnk).any():
        raise ValueError("positives and junk must be disjoint")
    aps = []
    for o, p, j in zip(order, pos, jnk, strict=True):
        if not p.any():
            continue
        keep = ~j[o]
        rel = p[o][keep]
        if ap == "standard":
            aps.append(average_precision(rel))
        else:
            aps.append(_trapezoid_ap(np.nonzero(rel)[0], int(rel.sum())))
    if not aps:
        raise ValueError("revisited_map needs at least one query with a positive")
    return float(np.mean(aps))


def revisited_ground_truth(
    relevant: ArrayLike, hard: ArrayLike, protocol: str
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(positives, junk) of the revisited protocols from relevance and per-item difficulty.

    ``easy``: easy positives relevant, hard ones junk; ``medium``: both relevant, no junk;
    ``hard``: hard positives relevant, easy ones junk.

    Args:
        relevant: (Q, N) bool, all positives.
        hard: (N,) or (Q, N) bool, which positives are hard (ignored off the positives).
        protocol: one of :data:`REVISITED_PROTOCOLS`.
    """
    if protocol not in REVISITED_PROTOCOLS:
        raise ValueError(f"protocol must be one of {REVISITED_PROTOCOLS}, got {protocol!r}")
    rel = np.asarray(relevant, dtype=bool)
    hrd = np.asarray(hard, dtype=bool)
    if rel.ndim != 2 or hrd.shape not in (rel.shape, rel.shape[1:]):
        raise ValueError(
            f"relevant must be (Q, N) and hard (N,) or (Q, N), got {rel.shape} and {hrd.shape}"
        )
    hrd = np.broadcast_to(hrd, rel.shape)
    easy_pos, hard_pos = rel & ~hrd, rel & hrd
    if protocol == "easy":
        return easy_pos, hard_pos
    if protocol == "hard":
        return hard_pos, easy_pos
    return rel, np.zeros_like(rel)
