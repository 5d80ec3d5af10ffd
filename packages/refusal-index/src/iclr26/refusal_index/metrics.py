"""Peer metrics: what people report instead of RI, vectorised with NumPy, O(n) or O(n log n).

Two families, both of which the paper argues against:

* threshold metrics of the (refused × wrong) table — refusal precision, recall, F1, binary
  AUROC, phi — and SimpleQA-style scores of the refusal-allowed run; they move with the refusal
  rate;
* proxy metrics of a confidence signal — confidence AUROC, ECE, Brier, AURC — which score the
  signal, not the refusals.

Conventions: ``refused`` and ``wrong`` are boolean arrays over questions; ``wrong`` is the error
of the forced-answer pass unless stated. Metrics that are undefined (no refusals, no errors)
return NaN rather than an arbitrary 0.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.shared import check_array, check_choice, check_int

__all__ = [
    "accuracy_given_attempted",
    "aurc",
    "auroc",
    "brier",
    "ece",
    "peer_metrics",
    "phi_coefficient",
    "refusal_auroc_binary",
    "refusal_f1",
    "refusal_precision",
    "refusal_recall",
    "reliability",
    "simpleqa_f_score",
]


def as_flags(x: ArrayLike, name: str) -> NDArray[np.bool_]:
    """A 1-D array of booleans or 0/1 values as ``bool``; clear errors otherwise."""
    arr = np.asarray(x)
    check_array(arr, name, ndim=1, finite=arr.dtype.kind in "fc")
    if arr.dtype != bool:
        if arr.dtype.kind not in "biuf" or not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must hold booleans or 0/1 values, got dtype {arr.dtype}")
        arr = arr.astype(bool)
    return arr


def as_reals(x: ArrayLike, name: str, ndim: int = 1) -> NDArray[np.float64]:
    """A finite, non-empty real array as float64; bools and integers convert exactly, anything
    else (strings, objects, NaN, inf) is refused naming ``name``."""
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    check_array(arr, name, ndim=ndim)
    return arr.astype(float)


def _bools(*arrays: tuple[ArrayLike, str]) -> list[NDArray[np.bool_]]:
    out = [as_flags(x, name) for x, name in arrays]
    if len({a.size for a in out}) > 1:
        names = ", ".join(f"{name} ({a.size})" for a, (_, name) in zip(out, arrays, strict=True))
        raise ValueError(f"arrays must have the same length: {names}")
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def refusal_precision(refused: ArrayLike, wrong: ArrayLike) -> float:
    """Share of refused questions that the model would have answered wrongly: P(wrong | refused)."""
    r, w = _bools((refused, "refused"), (wrong, "wrong"))
    return _ratio(float(np.sum(r & w)), float(r.sum()))


def refusal_recall(refused: ArrayLike, wrong: ArrayLike) -> float:
    """Share of would-be-wrong questions that were refused: P(refused | wrong)."""
    r, w = _bools((refused, "refused"), (wrong, "wrong"))
    return _ratio(float(np.sum(r & w)), float(w.sum()))


def refusal_f1(refused: ArrayLike, wrong: ArrayLike) -> float:
    """Harmonic mean of refusal precision and recall (AbstentionBench-style F1)."""
    r, w = _bools((refused, "refused"), (wrong, "wrong"))
    return _ratio(2.0 * float(np.sum(r & w)), float(r.sum() + w.sum()))


def refusal_auroc_binary(refused: ArrayLike, wrong: ArrayLike) -> float:
    """AUROC of the binary refusal decision as a detector of wrong answers: (TPR + TNR) / 2."""
    r, w = _bools((refused, "refused"), (wrong, "wrong"))
    tpr = _ratio(float(np.sum(r & w)), float(w.sum()))
    tnr = _ratio(float(np.sum(~r & ~w)), float((~w).sum()))
    return (tpr + tnr) / 2.0


def phi_coefficient(refused: ArrayLike, wrong: ArrayLike) -> float:
    """Pearson correlation of the two binary variables (= Matthews correlation)."""
    r, w = _bools((refused, "refused"), (wrong, "wrong"))
    n = r.size
    n11 = float(np.sum(r & w))
    n1_, n_1 = float(r.sum()), float(w.sum())
    den = n1_ * (n - n1_) * n_1 * (n - n_1)
    return (n * n11 - n1_ * n_1) / math.sqrt(den) if den > 0 else math.nan


def accuracy_given_attempted(refused: ArrayLike, answered_correct: ArrayLike) -> float:
    """SimpleQA's correct / (correct + incorrect) over the questions the model answered."""
    r, c = _bools((refused, "refused"), (answered_correct, "answered_correct"))
    return _ratio(float(np.sum(~r & c)), float((~r).sum()))


def simpleqa_f_score(refused: ArrayLike, answered_correct: ArrayLike) -> float:
    """SimpleQA F: harmonic mean of overall correct and correct-given-attempted."""
    r, c = _bools((refused, "refused"), (answered_correct, "answered_correct"))
    overall = float(np.sum(~r & c)) / r.size
    given = accuracy_given_attempted(r, c)
    return _ratio(2.0 * overall * given, overall + given) if not math.isnan(given) else math.nan


def reliability(refused: ArrayLike, answered_correct: ArrayLike) -> float:
    """Share of questions answered correctly or refused (no hallucination)."""
    r, c = _bools((refused, "refused"), (answered_correct, "answered_correct"))
    return float(np.mean(r | c))


def _confidence(confidence: ArrayLike, correct: ArrayLike) -> tuple[NDArray, NDArray[np.bool_]]:
    conf = as_reals(confidence, "confidence")
    if (conf < 0).any() or (conf > 1).any():
        raise ValueError("confidence must lie in [0, 1]")
    (c,) = _bools((correct, "correct"))
    if c.size != conf.size:
        raise ValueError(
            f"confidence ({conf.size}) and correct ({c.size}) must have the same length"
        )
    return conf, c


def auroc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (Mann–Whitney U, ties count ½).

    O(n log n). NaN when only one class is present.
    """
    s = as_reals(scores, "scores")
    (y,) = _bools((labels, "labels"))
    if y.size != s.size:
        raise ValueError(f"scores ({s.size}) and labels ({y.size}) must have the same length")
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    # average ranks over ties
    boundaries = np.flatnonzero(np.diff(sorted_s)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [s.size]])
    avg = (starts + ends + 1) / 2.0
    ranks = np.empty(s.size)
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def ece(
    confidence: ArrayLike, correct: ArrayLike, *, n_bins: int = 10, strategy: str = "uniform"
) -> float:
    """Expected calibration error ``Σ_b (n_b/n)·|acc_b − conf_b|``.

    Binning (documented because implementations differ): ``strategy="uniform"`` uses ``n_bins``
    equal-width bins ``((m−1)/M, m/M]`` (Guo et al. 2017), the first one closed at 0, so a
    confidence of exactly 1.0 falls in the top bin (not in a phantom extra bin) and 0.0 in the
    first; a confidence on an inner edge belongs to the lower bin. This is scikit-learn's
    ``calibration_curve`` convention. ``strategy="quantile"`` uses equal-mass bins whose edges
    are the confidence quantiles. Empty bins contribute nothing.
    """
    conf, c = _confidence(confidence, correct)
    check_int(n_bins, "n_bins", low=1)
    check_choice(strategy, "strategy", ("uniform", "quantile"))
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        edges = np.percentile(conf, np.linspace(0.0, 100.0, n_bins + 1))
    ids = np.searchsorted(edges[1:-1], conf, side="left")
    acc = np.bincount(ids, weights=c.astype(float), minlength=n_bins)
    mean_conf = np.bincount(ids, weights=conf, minlength=n_bins)
    return float(np.sum(np.abs(acc - mean_conf)) / conf.size)


def brier(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Brier score ``mean((confidence − correct)²)``."""
    conf, c = _confidence(confidence, correct)
    return float(np.mean((conf - c) ** 2))


def aurc(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the risk–coverage curve: answer the most confident questions first; the risk at
    coverage k/n is the error rate among those k; AURC is the mean over k = 1..n. Questions with
    tied confidence enter together (the risk is constant across a tie block)."""
    conf, c = _confidence(confidence, correct)
    order = np.argsort(-conf, kind="mergesort")
    s, err = conf[order], (~c[order]).astype(float)
    cum_err = np.cumsum(err)
    k = np.arange(1, s.size + 1)
    # at a tie block, every k inside the block sees the block's average position risk
    last = np.concatenate([np.flatnonzero(np.diff(s)), [s.size - 1]])
    block = np.repeat(np.arange(last.size), np.diff(np.concatenate([[-1], last])))
    start = np.concatenate([[0], last[:-1] + 1])[block]
    base = np.where(start > 0, cum_err[np.maximum(start - 1, 0)], 0.0)
    block_err = cum_err[last][block] - base
    block_len = (last - np.concatenate([[-1], last[:-1]]))[block]
    expected_err = base + block_err * (k - start) / block_len
    return float(np.mean(expected_err / k))


def peer_metrics(
    refused: ArrayLike,
    forced_wrong: ArrayLike,
    answered_correct: ArrayLike | None = None,
    confidence: ArrayLike | None = None,
) -> dict[str, float]:
    """All peer metrics of one two-pass run in a dict (the columns of the bench tables).

    Args:
        refused: ``(n,)`` refused in pass B.
        forced_wrong: ``(n,)`` wrong in pass A.
        answered_correct: ``(n,)`` correct in pass B; defaults to pass-A correctness
            (the consistency assumption).
        confidence: optional ``(n,)`` confidence in the forced answer, for the proxy metrics.
    """
    r, w = _bools((refused, "refused"), (forced_wrong, "forced_wrong"))
    c = ~w if answered_correct is None else _bools((answered_correct, "answered_correct"))[0]
    out = {
        "refusal_precision": refusal_precision(r, w),
        "refusal_recall": refusal_recall(r, w),
        "refusal_f1": refusal_f1(r, w),
        "refusal_auroc": refusal_auroc_binary(r, w),
        "phi": phi_coefficient(r, w),
        "simpleqa_f": simpleqa_f_score(r, c),
        "acc_given_attempted": accuracy_given_attempted(r, c),
        "reliability": reliability(r, c),
    }
    if confidence is not None:
        out |= {
            "confidence_auroc": auroc(confidence, ~w),
            "ece": ece(confidence, ~w),
            "brier": brier(confidence, ~w),
            "aurc": aurc(confidence, ~w),
        }
    return out
