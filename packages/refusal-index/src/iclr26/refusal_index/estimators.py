"""The Refusal Index and its estimators.

``RI(M, Q) = Spearman({r_i}, {e_i})``: the rank correlation between a model's per-question
refusal probability and its error probability (the paper's definition). Per-question
probabilities are never observed, so the two-pass estimator (spec §2.3, **our reconstruction**
of the paper's Section 3, which we could not read) assumes a Gaussian copula:

* pass A (forced answer) gives the error rate ``p_e``; pass B (refusal allowed) gives the
  refusal rate ``q`` and the answered-and-wrong rate ``w``;
* assuming an answered question is equally correct in both passes, ``p₁₁ = p_e − w``;
* the tetrachoric ``ρ`` solves ``Φ̄₂(Φ⁻¹(1−q), Φ⁻¹(1−p_e); ρ) = p₁₁`` and
  ``RI = (6/π)·arcsin(ρ/2)``.

The formula is behind an ``estimator=`` switch (:data:`ESTIMATORS`) so a corrected
identification can replace it without an API change.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri
from scipy.stats import norm, spearmanr

from iclr26.refusal_index.metrics import as_flags, as_reals
from iclr26.refusal_index.tetrachoric import bvn_density, pearson_to_spearman, tetrachoric
from iclr26.shared import check_choice, check_int, check_range

__all__ = [
    "ESTIMATORS",
    "RIResult",
    "RefusalIndexWarning",
    "disattenuate",
    "refusal_index_direct",
    "refusal_index_from_rates",
    "refusal_index_ksample",
    "refusal_index_paired",
    "retest_reliability",
]

#: ``estimator(q, p_e, p11) -> RI`` over NumPy arrays (vectorised: bootstrap calls it once).
Estimator = Callable[[NDArray, NDArray, NDArray], NDArray]


def _tetrachoric_ri(q: NDArray, pe: NDArray, p11: NDArray) -> NDArray:
    return pearson_to_spearman(tetrachoric(q, pe, p11))


#: Named estimators of RI from the 2×2 table of (refused, forced-wrong) rates.
ESTIMATORS: dict[str, Estimator] = {"tetrachoric": _tetrachoric_ri}


class RefusalIndexWarning(UserWarning):
    """An RI estimate was computed, but from inputs that needed a correction or look suspect."""


@dataclass(frozen=True)
class RIResult:
    """An RI estimate with what it was computed from.

    Attributes:
        ri: the Refusal Index (Spearman scale), NaN when it is not identified (see ``reason``).
        rho: the latent (tetrachoric) Pearson correlation, NaN for other estimators.
        refusal_rate: ``q``, share of questions refused in pass B.
        error_rate: ``p_e``, share answered wrongly in pass A (forced answer).
        p11: share both refused in pass B and wrong in pass A (after any Fréchet clipping).
        n: number of questions.
        ci: ``(low, high)`` confidence interval on the RI scale, or ``None``.
        ci_level: nominal coverage of ``ci``.
        se: standard error of ``ri`` (delta method), NaN when not computed.
        method: ``"rates"``, ``"paired"``, ``"direct"`` or ``"ksample"``.
        estimator: name of the estimator used.
        reason: why ``ri`` is NaN, else ``None``.
        warnings: corrections applied and diagnostics (also emitted as
            :class:`RefusalIndexWarning`).
    """

    ri: float
    rho: float
    refusal_rate: float
    error_rate: float
    p11: float
    n: int | None
    ci: tuple[float, float] | None = None
    ci_level: float = 0.95
    se: float = math.nan
    method: str = "rates"
    estimator: str = "tetrachoric"
    reason: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Whether an estimate exists (``ri`` is not NaN)."""
        return not math.isnan(self.ri)


def _nan_result(reason: str, method: str, estimator: str, **rates: float) -> RIResult:
    return RIResult(
        ri=math.nan,
        rho=math.nan,
        refusal_rate=rates.get("q", math.nan),
        error_rate=rates.get("pe", math.nan),
        p11=rates.get("p11", math.nan),
        n=rates.get("n"),  # type: ignore[arg-type]
        method=method,
        estimator=estimator,
        reason=reason,
    )


def _resolve(estimator: str | Estimator) -> tuple[str, Estimator]:
    if callable(estimator):
        return getattr(estimator, "__name__", "custom"), estimator
    check_choice(estimator, "estimator", tuple(ESTIMATORS))
    return estimator, ESTIMATORS[estimator]


def _delta_se(q: float, pe: float, p11: float, rho: float, n: int) -> float:
    """Delta-method SE of RI from the 2×2 multinomial (spec §2.5).

    ``ρ(q, p_e, p₁₁)`` is implicit in ``Φ̄₂(a(q), b(p_e); ρ) = p₁₁``; its gradient follows from
    ``∂Φ̄₂/∂ρ = φ₂(a, b; ρ)`` and ``∂Φ̄₂/∂q = Φ̄((b − ρa)/√(1−ρ²))`` (and symmetrically in p_e).
    """
    if not -1.0 < rho < 1.0:
        return math.nan
    a, b = ndtri(1.0 - q), ndtri(1.0 - pe)
    s = math.sqrt(1.0 - rho * rho)
    dens = float(bvn_density(a, b, rho))
    if not dens > 0.0:
        return math.nan
    grad = np.array([-ndtr(-(b - rho * a) / s), -ndtr(-(a - rho * b) / s), 1.0]) / dens
    cov = (
        np.array(
            [
                [q * (1 - q), p11 - q * pe, p11 * (1 - q)],
                [p11 - q * pe, pe * (1 - pe), p11 * (1 - pe)],
                [p11 * (1 - q), p11 * (1 - pe), p11 * (1 - p11)],
            ]
        )
        / n
    )
    se_rho = math.sqrt(max(float(grad @ cov @ grad), 0.0))
    return se_rho * 3.0 / (math.pi * math.sqrt(1.0 - rho * rho / 4.0))


def _estimate(
    q: float,
    pe: float,
    p11: float,
    n: int | None,
    *,
    method: str,
    estimator: str | Estimator,
    on_infeasible: str,
    notes: list[str],
    correction: float = 0.0,
) -> RIResult:
    name, fn = _resolve(estimator)
    check_choice(on_infeasible, "on_infeasible", ("clip", "nan", "raise"))
    check_range(correction, "correction", low=0.0)
    rates = {"q": q, "pe": pe, "p11": p11, "n": n}
    for label, value in (("refusal rate", q), ("forced error rate", pe)):
        if value <= 0.0 or value >= 1.0:
            return _nan_result(
                f"{label} is {value:g}: RI is undefined when every or no question is "
                f"{'refused' if label == 'refusal rate' else 'answered wrongly'}",
                method,
                name,
                **rates,
            )
    lower, upper = max(0.0, q + pe - 1.0), min(q, pe)
    if not lower - 1e-12 <= p11 <= upper + 1e-12:
        msg = (
            f"joint rate p11 = {p11:.6g} is outside the Fréchet bounds [{lower:.6g}, {upper:.6g}] "
            f"for refusal rate {q:.6g} and error rate {pe:.6g} (the passes are inconsistent)"
        )
        if on_infeasible == "raise":
            raise ValueError(msg)
        if on_infeasible == "nan":
            return _nan_result(msg, method, name, **rates)
        p11 = min(max(p11, lower), upper)
        notes.append(msg + f"; clipped to {p11:.6g}")
    q_est, pe_est, p11_est = q, pe, p11
    if n and correction > 0.0:
        corrected = _corrected_cells(np.array([p11, q - p11, pe - p11]) * n, n, correction)
        if corrected is not None:
            p11_est, q_est, pe_est = corrected
            notes.append(
                f"an empty cell of the refusal × error table got a continuity correction of {correction:g}"
            )
    ri = float(fn(np.asarray(q_est), np.asarray(pe_est), np.asarray(p11_est)))
    rho = float(2.0 * math.sin(math.pi * ri / 6.0)) if name == "tetrachoric" else math.nan
    se = _delta_se(q_est, pe_est, p11_est, rho, n) if (n and name == "tetrachoric") else math.nan
    for note in notes:
        warnings.warn(note, RefusalIndexWarning, stacklevel=3)
    return RIResult(
        ri=ri,
        rho=rho,
        refusal_rate=q,
        error_rate=pe,
        p11=p11,
        n=n,
        se=se,
        method=method,
        estimator=name,
        warnings=tuple(notes),
    )


def _corrected_cells(
    counts: NDArray, n: int, correction: float
) -> tuple[float, float, float] | None:
    """Add ``correction`` to empty cells of the 2×2 table (counts of 11, 10, 01; 00 implied) and
    renormalise; ``None`` if no cell is empty. Without it an empty cell puts ``ρ`` at ±1 exactly,
    an estimate with no standard error (the usual tetrachoric practice, e.g. R's psych)."""
    cells = np.append(counts, n - counts.sum())
    empty = cells < 0.5
    if not empty.any():
        return None
    cells = np.where(empty, correction, cells)
    cells = cells / cells.sum()
    return float(cells[0]), float(cells[0] + cells[1]), float(cells[0] + cells[2])


def _with_delta_ci(result: RIResult, level: float) -> RIResult:
    if not result.ok or math.isnan(result.se):
        return result
    z = float(norm.ppf(0.5 + level / 2.0))
    low, high = max(-1.0, result.ri - z * result.se), min(1.0, result.ri + z * result.se)
    return replace(result, ci=(low, high), ci_level=level)


def refusal_index_from_rates(
    refusal_rate: float,
    forced_error_rate: float,
    answered_wrong_rate: float,
    n: int | None = None,
    *,
    estimator: str | Estimator = "tetrachoric",
    ci_level: float = 0.95,
    on_infeasible: str = "clip",
    correction: float = 0.5,
) -> RIResult:
    """RI from the aggregate rates of two standard runs (spec §2.3, reconstructed).

    Args:
        refusal_rate: ``q``, share of questions refused in pass B (refusal allowed).
        forced_error_rate: ``p_e``, share answered wrongly in pass A (forced answer).
        answered_wrong_rate: ``w``, share of *all* questions answered wrongly in pass B.
        n: number of questions; enables the delta-method standard error and CI.
        estimator: a name in :data:`ESTIMATORS` or a vectorised ``f(q, p_e, p11) -> RI``.
        ci_level: coverage of the delta-method CI.
        on_infeasible: what to do when ``p₁₁ = p_e − w`` violates the Fréchet bounds:
            ``"clip"`` (default, as the spec says; recorded in ``warnings``), ``"nan"`` or
            ``"raise"``.
        correction: continuity correction added to an empty cell of the implied 2×2 table
            (needs ``n``); ``0`` disables it. An empty cell (every refused question wrong, say)
            otherwise gives ``ρ = ±1`` exactly.

    Returns:
        :class:`RIResult` with ``method="rates"``; ``ri`` is NaN with a ``reason`` when ``q`` or
        ``p_e`` is 0 or 1.
    """
    q = check_range(refusal_rate, "refusal_rate", low=0.0, high=1.0)
    pe = check_range(forced_error_rate, "forced_error_rate", low=0.0, high=1.0)
    w = check_range(answered_wrong_rate, "answered_wrong_rate", low=0.0, high=1.0)
    check_range(ci_level, "ci_level", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    if n is not None:
        check_int(n, "n", low=1)
    if w > 1.0 - q + 1e-12:
        raise ValueError(
            f"answered_wrong_rate ({w:g}) cannot exceed the answered share 1 - refusal_rate ({1 - q:g})"
        )
    result = _estimate(
        q,
        pe,
        pe - w,
        n,
        method="rates",
        estimator=estimator,
        on_infeasible=on_infeasible,
        notes=[],
        correction=correction,
    )
    return _with_delta_ci(result, ci_level)


def refusal_index_paired(
    refused: ArrayLike,
    forced_correct: ArrayLike,
    *,
    answered_correct: ArrayLike | None = None,
    estimator: str | Estimator = "tetrachoric",
    ci: str | None = "bootstrap",
    ci_level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    on_infeasible: str = "clip",
    correction: float = 0.5,
) -> RIResult:
    """RI from per-question outcomes of the two passes (spec §2.3, paired variant).

    The refusal flag of pass B and the correctness of pass A form a 2×2 table whose tetrachoric
    correlation is the same ``ρ`` as the rates estimator when the passes are consistent, without
    needing pass-B correctness at all.

    Args:
        refused: ``(n,)`` bool, refused in pass B.
        forced_correct: ``(n,)`` bool, correct in pass A.
        answered_correct: optional ``(n,)`` bool, correct in pass B (ignored where refused). When
            given, disagreement with pass A on answered questions is reported as a warning: the
            rates estimator would then differ from this one.
        estimator: a name in :data:`ESTIMATORS` or a vectorised ``f(q, p_e, p11) -> RI``.
        ci: ``"bootstrap"`` (percentile, resampling questions), ``"delta"`` or ``None``.
        ci_level: nominal coverage.
        n_boot: bootstrap resamples (paper-free default 1000). Resampling questions with
            replacement is the same as drawing the 2×2 counts from a multinomial, which is how it is
            done: the cost does not grow with ``n``.
        seed: seed of the bootstrap.
        on_infeasible: see :func:`refusal_index_from_rates` (cannot trigger on paired data).
        correction: continuity correction for empty cells, also applied to bootstrap tables.

    Returns:
        :class:`RIResult` with ``method="paired"``.
    """
    refused_ = as_flags(refused, "refused")
    correct_ = as_flags(forced_correct, "forced_correct")
    if refused_.shape != correct_.shape:
        raise ValueError(
            f"refused and forced_correct must have the same length, got {refused_.size} and {correct_.size}"
        )
    check_choice(ci, "ci", ("bootstrap", "delta", None))
    check_range(ci_level, "ci_level", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    check_int(n_boot, "n_boot", low=10)
    n = refused_.size
    wrong = ~correct_
    notes: list[str] = []
    if answered_correct is not None:
        b_correct = as_flags(answered_correct, "answered_correct")
        if b_correct.shape != refused_.shape:
            raise ValueError(f"answered_correct must have length {n}, got {b_correct.size}")
        answered = ~refused_
        flips = int((b_correct[answered] != correct_[answered]).sum())
        if flips:
            notes.append(
                f"{flips} of {int(answered.sum())} answered questions changed correctness between "
                "passes: the consistency assumption fails and the rates estimator will differ"
            )
    counts = np.array(
        [np.sum(refused_ & wrong), np.sum(refused_ & ~wrong), np.sum(~refused_ & wrong)]
    )
    q = float(counts[0] + counts[1]) / n
    pe = float(counts[0] + counts[2]) / n
    p11 = float(counts[0]) / n
    result = _estimate(
        q,
        pe,
        p11,
        n,
        method="paired",
        estimator=estimator,
        on_infeasible=on_infeasible,
        notes=notes,
        correction=correction,
    )
    if ci == "delta":
        return _with_delta_ci(result, ci_level)
    if ci == "bootstrap" and result.ok:
        return _with_bootstrap_ci(result, counts, n, estimator, ci_level, n_boot, seed, correction)
    return result


def _with_bootstrap_ci(
    result: RIResult,
    counts: NDArray,
    n: int,
    estimator: str | Estimator,
    level: float,
    n_boot: int,
    seed: int,
    correction: float,
) -> RIResult:
    _, fn = _resolve(estimator)
    cells = np.append(counts, n - counts.sum()) / n
    rng = np.random.default_rng(seed)
    tables = rng.multinomial(n, cells, size=n_boot).astype(float)  # (n_boot, 4): 11, 10, 01, 00
    tables = np.where(tables == 0, correction, tables)
    tables /= tables.sum(axis=1, keepdims=True)
    q = tables[:, 0] + tables[:, 1]
    pe = tables[:, 0] + tables[:, 2]
    with np.errstate(invalid="ignore"):
        ri = np.asarray(fn(q, pe, tables[:, 0]), dtype=float)
    finite = ri[np.isfinite(ri)]
    notes = list(result.warnings)
    if finite.size < n_boot:
        notes.append(f"{n_boot - finite.size} of {n_boot} bootstrap resamples were degenerate")
    if finite.size < 10:
        return replace(result, warnings=tuple(notes))
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return replace(result, ci=(float(low), float(high)), ci_level=level, warnings=tuple(notes))


def refusal_index_direct(
    refusal_probs: ArrayLike, error_probs: ArrayLike, *, ci_level: float = 0.95
) -> RIResult:
    """RI by its definition: the empirical Spearman correlation of per-question probabilities.

    Use it when the probabilities are known (simulations) or estimated from ``K`` repeated runs:
    pass ``(K, n)`` arrays of 0/1 outcomes and they are averaged over axis 0 first. Ties get
    average ranks. The CI uses the Fisher z-transform with Fieller's variance
    ``1.06 / (n − 3)``.

    Args:
        refusal_probs: ``(n,)`` refusal probabilities ``r_i`` or ``(K, n)`` refusal outcomes.
        error_probs: ``(n,)`` error probabilities ``e_i`` or ``(K, n)`` error outcomes.
        ci_level: nominal coverage.

    Returns:
        :class:`RIResult` with ``method="direct"``; ``refusal_rate``, ``error_rate`` are the
        means and ``p11`` the mean of ``r_i·e_i``.
    """
    r = np.asarray(refusal_probs)
    e = np.asarray(error_probs)
    for name, arr in (("refusal_probs", r), ("error_probs", e)):
        if arr.ndim not in (1, 2):
            raise ValueError(f"{name} must be (n,) or (K, n), got shape {arr.shape}")
    r = as_reals(r, "refusal_probs", r.ndim)
    e = as_reals(e, "error_probs", e.ndim)
    for name, arr in (("refusal_probs", r), ("error_probs", e)):
        if (arr < 0).any() or (arr > 1).any():
            raise ValueError(f"{name} must be probabilities in [0, 1]")
    r = r.mean(axis=0) if r.ndim == 2 else r
    e = e.mean(axis=0) if e.ndim == 2 else e
    if r.shape != e.shape:
        raise ValueError(
            f"refusal and error probabilities must have the same length, got {r.size} and {e.size}"
        )
    rates = {"q": float(r.mean()), "pe": float(e.mean()), "p11": float((r * e).mean()), "n": r.size}
    if r.size < 4:
        return _nan_result("need at least 4 questions", "direct", "spearman", **rates)
    if np.ptp(r) == 0 or np.ptp(e) == 0:
        return _nan_result("constant refusal or error probabilities", "direct", "spearman", **rates)
    ri = float(spearmanr(r, e).statistic)
    se_z = math.sqrt(1.06 / (r.size - 3))
    z = float(norm.ppf(0.5 + ci_level / 2.0))
    centre = math.atanh(min(max(ri, -0.999999), 0.999999))
    ci = (math.tanh(centre - z * se_z), math.tanh(centre + z * se_z))
    return RIResult(
        ri=ri,
        rho=math.nan,
        refusal_rate=rates["q"],
        error_rate=rates["pe"],
        p11=rates["p11"],
        n=r.size,
        ci=ci,
        ci_level=ci_level,
        method="direct",
        estimator="spearman",
    )


def _outcomes(x: ArrayLike, name: str) -> NDArray[np.bool_]:
    """``(K, n)`` 0/1 outcomes as bool; floats other than 0/1, NaN and 1-D input are refused."""
    arr = np.asarray(x)
    if arr.dtype != np.bool_:
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"{name} must be bool or 0/1 numbers, got dtype {arr.dtype}")
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or inf")
        if not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must hold 0/1 outcomes (one row per run), got other values")
        arr = arr.astype(bool)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be (K, n): one row of outcomes per run, got {arr.shape}")
    if arr.shape[0] < 2:
        raise ValueError(f"{name} needs K >= 2 runs, got {arr.shape[0]}")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} must not be empty")
    return arr


def _count_ranks(counts: NDArray[np.int64], levels: int) -> NDArray[np.float64]:
    """Average ranks (ties share the mean rank) of each row of integer counts in ``[0, levels)``.

    Equal to ``scipy.stats.rankdata(counts, axis=1)`` but O(n) per row instead of a sort: the
    rank of value ``v`` is the number of smaller values plus ``(ties + 1) / 2``.
    """
    rows = counts.shape[0]
    offset = (np.arange(rows) * levels)[:, None]
    hist = np.bincount((counts + offset).ravel(), minlength=rows * levels).reshape(rows, levels)
    below = np.cumsum(hist, axis=1) - hist
    table = below + (hist + 1) / 2.0
    return np.take_along_axis(table, counts, axis=1)


def _rowwise_spearman(rr: NDArray, re_: NDArray) -> NDArray:
    """Pearson correlation of each row pair of ranks (Spearman); NaN for a constant row."""
    rr = rr.astype(float, copy=True)
    re_ = re_.astype(float, copy=True)
    rr -= rr.mean(axis=1, keepdims=True)
    re_ -= re_.mean(axis=1, keepdims=True)
    num = (rr * re_).sum(axis=1)
    den = np.sqrt((rr * rr).sum(axis=1) * (re_ * re_).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def refusal_index_ksample(
    refused: ArrayLike,
    forced_wrong: ArrayLike,
    *,
    ci: str | None = "bootstrap",
    ci_level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
) -> RIResult:
    """RI by its definition from ``K`` sampled answers per question (no copula assumed).

    Each question is asked ``K`` times in each pass at a temperature above 0. The per-question
    refusal probability ``r̂_i`` is the share of the ``K`` refusal-allowed answers that refuse,
    the error probability ``ê_i`` the share of the ``K`` forced answers that are wrong, and
    ``RI = Spearman(r̂, ê)`` with average ranks for ties — the paper's definition applied to
    estimated probabilities. It costs ``2K`` calls per question (the two-pass estimator: 2) and
    is attenuated towards 0 for small ``K`` (``r̂_i`` carries binomial noise of variance
    ``r_i(1 − r_i)/K``); ``bench`` reports its bias, spread and cost against the two-pass
    estimator.

    Args:
        refused: ``(K, n)`` bool (or 0/1), refused in the ``k``-th refusal-allowed run.
        forced_wrong: ``(K', n)`` bool (or 0/1), wrong in the ``k``-th forced run (``K'`` may
            differ from ``K``).
        ci: ``"bootstrap"`` (percentile, resampling questions) or ``None``.
        ci_level: nominal coverage of the CI.
        n_boot: bootstrap resamples.
        seed: seed of the bootstrap.

    Returns:
        :class:`RIResult` with ``method="ksample"``; ``refusal_rate``/``error_rate`` are the mean
        probabilities, ``p11`` the mean of ``r̂_i·ê_i``; ``ri`` is NaN with a ``reason`` when
        every question has the same estimated refusal or error probability.
    """
    r_runs = _outcomes(refused, "refused")
    e_runs = _outcomes(forced_wrong, "forced_wrong")
    if r_runs.shape[1] != e_runs.shape[1]:
        raise ValueError(
            f"refused and forced_wrong must cover the same questions, got {r_runs.shape[1]} "
            f"and {e_runs.shape[1]}"
        )
    check_choice(ci, "ci", ("bootstrap", None))
    check_range(ci_level, "ci_level", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    check_int(n_boot, "n_boot", low=10)
    check_int(seed, "seed", low=0)
    r_count = r_runs.sum(axis=0)
    e_count = e_runs.sum(axis=0)
    levels_r, levels_e = r_runs.shape[0] + 1, e_runs.shape[0] + 1
    r = r_count / r_runs.shape[0]
    e = e_count / e_runs.shape[0]
    n = r.size
    name = f"spearman (K={r_runs.shape[0]}/{e_runs.shape[0]})"
    rates = {"q": float(r.mean()), "pe": float(e.mean()), "p11": float((r * e).mean()), "n": n}
    if n < 4:
        return _nan_result("need at least 4 questions", "ksample", name, **rates)
    if np.ptp(r) == 0 or np.ptp(e) == 0:
        return _nan_result(
            "every question has the same estimated refusal or error probability",
            "ksample",
            name,
            **rates,
        )
    ri = float(
        _rowwise_spearman(
            _count_ranks(r_count[None, :], levels_r), _count_ranks(e_count[None, :], levels_e)
        )[0]
    )
    result = RIResult(
        ri=ri,
        rho=math.nan,
        refusal_rate=rates["q"],
        error_rate=rates["pe"],
        p11=rates["p11"],
        n=n,
        method="ksample",
        estimator=name,
    )
    if ci is None:
        return result
    rng = np.random.default_rng(seed)
    boot = []
    block = max(1, 2_000_000 // n)  # bound memory: ~2M values per block
    for start in range(0, n_boot, block):
        idx = rng.integers(0, n, size=(min(block, n_boot - start), n))
        boot.append(
            _rowwise_spearman(
                _count_ranks(r_count[idx], levels_r), _count_ranks(e_count[idx], levels_e)
            )
        )
    values = np.concatenate(boot)
    finite = values[np.isfinite(values)]
    notes: list[str] = []
    if finite.size < n_boot:
        notes.append(f"{n_boot - finite.size} of {n_boot} bootstrap resamples were degenerate")
    if finite.size < 10:
        return replace(result, warnings=tuple(notes))
    tail = (1.0 - ci_level) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    se = float(finite.std(ddof=1))
    return replace(
        result,
        ci=(float(low), float(high)),
        ci_level=ci_level,
        se=se,
        warnings=tuple(notes),
    )


def retest_reliability(run_1: ArrayLike, run_2: ArrayLike) -> float:
    """Test–retest reliability of a binary behaviour: the tetrachoric correlation between two
    independent runs of the same pass (spec §2.4, extension). NaN if a run is constant."""
    x = as_flags(run_1, "run_1")
    y = as_flags(run_2, "run_2")
    if x.shape != y.shape:
        raise ValueError(f"runs must have the same length, got {x.size} and {y.size}")
    return float(tetrachoric(x.mean(), y.mean(), (x & y).mean()))


def disattenuate(rho: float, rel_refusal: float, rel_error: float) -> float:
    """Correct a tetrachoric ``ρ`` for sampling noise: ``ρ* = ρ / √(ρ_RR · ρ_EE)`` (spec §2.4).

    An extension, off by default: one binary draw per question attenuates ``ρ`` when refusals
    and errors are stochastic; the attenuation does not depend on the refusal threshold.
    The result is clipped to ``[-1, 1]`` with a :class:`RefusalIndexWarning` when the
    reliabilities are too low for the observed ``ρ``.

    Args:
        rho: latent correlation (``RIResult.rho``).
        rel_refusal: test–retest reliability of refusals, in ``(0, 1]``.
        rel_error: test–retest reliability of errors, in ``(0, 1]``.
    """
    rho = check_range(rho, "rho", low=-1.0, high=1.0)
    rr = check_range(rel_refusal, "rel_refusal", low=0.0, high=1.0, low_inclusive=False)
    re = check_range(rel_error, "rel_error", low=0.0, high=1.0, low_inclusive=False)
    out = rho / math.sqrt(rr * re)
    if abs(out) > 1.0:
        warnings.warn(
            f"disattenuated correlation {out:.3f} exceeds 1 in magnitude; clipped",
            RefusalIndexWarning,
            stacklevel=2,
        )
    return float(np.clip(out, -1.0, 1.0))
