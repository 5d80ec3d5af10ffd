"""Decisions and scores (paper §2.2 step 7; official ``Decision``/``Score`` in ``ae.py``).

Option weights are the root ``p_true`` of each option's proposition, normalised. With two options
the first is chosen if its weight exceeds ``threshold`` (0.7 in the official ``default.yaml``),
otherwise the highest weight wins. Binary propositions are scored by accuracy, Brier score, log
loss and the across-run standard deviation of each question's probability (the paper's variance).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.shared import check_array

__all__ = [
    "accuracy",
    "across_run_std",
    "brier",
    "choose",
    "log_loss",
    "normalize_weights",
    "option_scores",
    "score",
]


def _probs(p: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = check_array(p, name, ndim=1, finite=True)
    arr = np.asarray(arr, dtype=float)
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"{name} must lie in [0, 1]")
    return arr


def _outcomes(y: ArrayLike, n: int) -> NDArray[np.float64]:
    arr = np.asarray(y)
    if arr.dtype == bool:
        arr = arr.astype(float)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"outcomes must have shape ({n},), got {arr.shape}")
    if not np.isin(arr, (0, 1)).all():
        raise ValueError("outcomes must be 0/1 (or booleans)")
    return arr.astype(float)


def normalize_weights(weights: ArrayLike) -> NDArray[np.float64]:
    """Option weights (non-negative, not all zero) scaled to sum to 1."""
    w = np.asarray(check_array(weights, "weights", ndim=1, finite=True), dtype=float)
    if w.size == 0:
        raise ValueError("weights must not be empty")
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError("weights must be non-negative with a positive sum")
    return w / w.sum()


def choose(weights: ArrayLike, threshold: float | None = 0.7) -> int:
    """Index of the chosen option (official rule; ``threshold=None`` is plain argmax)."""
    w = normalize_weights(weights)
    if threshold is not None:
        if not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        if w.size == 2 and w[0] > threshold:
            return 0
    return int(np.argmax(w))


def accuracy(p: ArrayLike, y: ArrayLike, threshold: float = 0.5) -> float:
    """Share of binary propositions decided right (``p > threshold`` means "true")."""
    probs = _probs(p, "p")
    return float(np.mean((probs > threshold) == _outcomes(y, probs.size).astype(bool)))


def brier(p: ArrayLike, y: ArrayLike) -> float:
    """Mean squared error of the probabilities against 0/1 outcomes."""
    probs = _probs(p, "p")
    return float(np.mean((probs - _outcomes(y, probs.size)) ** 2))


def log_loss(p: ArrayLike, y: ArrayLike, eps: float = 1e-3) -> float:
    """Cross-entropy with probabilities clipped to ``[eps, 1 − eps]`` (an LLM's 0 or 1 would
    otherwise give an infinite loss)."""
    probs = np.clip(_probs(p, "p"), eps, 1 - eps)
    y = _outcomes(y, probs.size)
    return float(-np.mean(y * np.log(probs) + (1 - y) * np.log(1 - probs)))


def across_run_std(runs: ArrayLike) -> float:
    """Mean over questions of the standard deviation across runs; ``runs`` is (n_runs, n_questions)."""
    arr = np.asarray(check_array(runs, "runs", ndim=2, finite=True), dtype=float)
    if arr.shape[0] < 2:
        raise ValueError(f"need at least 2 runs, got {arr.shape[0]}")
    return float(arr.std(axis=0, ddof=1).mean())


def score(runs: ArrayLike, y: ArrayLike) -> dict[str, float]:
    """Accuracy, Brier and log loss averaged over runs, and the across-run std.

    ``runs`` is (n_runs, n_questions) or (n_questions,) for a single run.
    """
    arr = np.asarray(runs, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    arr = np.asarray(check_array(arr, "runs", ndim=2, finite=True), dtype=float)
    out = {
        "accuracy": float(np.mean([accuracy(r, y) for r in arr])),
        "brier": float(np.mean([brier(r, y) for r in arr])),
        "log_loss": float(np.mean([log_loss(r, y) for r in arr])),
        "std_across_runs": across_run_std(arr) if arr.shape[0] > 1 else 0.0,
    }
    return out


def option_scores(
    weights: Sequence[ArrayLike], values: Sequence[ArrayLike], *, threshold: float | None = 0.7
) -> dict[str, float]:
    """Multi-option tasks: accuracy (chosen option is the ex-post best), soft and hard value
    normalised between the worst and best option, Brier and cross-entropy over option weights.

    Args:
        weights: per task, the options' root ``p_true`` (normalised here).
        values: per task, the options' realised value (e.g. NPV); the best is the argmax.
    """
    if len(weights) != len(values) or not weights:
        raise ValueError("weights and values must be non-empty and of equal length")
    acc, soft, hard, bs, ce = [], [], [], [], []
    for w_raw, v_raw in zip(weights, values, strict=True):
        w = normalize_weights(w_raw)
        v = np.asarray(check_array(v_raw, "values", ndim=1, finite=True), dtype=float)
        if v.shape != w.shape:
            raise ValueError(f"a task has {w.size} weights but {v.size} values")
        best = int(np.argmax(v))
        pick = choose(w, threshold)
        span = v.max() - v.min()
        norm = (v - v.min()) / span if span > 0 else np.ones_like(v)
        onehot = np.eye(w.size)[best]
        acc.append(pick == best)
        soft.append(float(w @ norm))
        hard.append(float(norm[pick]))
        bs.append(float(np.sum((w - onehot) ** 2)))
        ce.append(float(-np.log(max(w[best], 1e-3))))
    return {
        "accuracy": float(np.mean(acc)),
        "soft_value_norm": float(np.mean(soft)),
        "hard_value_norm": float(np.mean(hard)),
        "brier": float(np.mean(bs)),
        "cross_entropy": float(np.mean(ce)),
    }
