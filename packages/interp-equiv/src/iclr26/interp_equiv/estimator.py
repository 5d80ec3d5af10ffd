"""Estimators of interpretive equivalence from groups of implementation representations.

A *group* is a list of representations (``(n, d_i)`` arrays of the same ``n`` probe inputs), one
per sampled (or intervened, "co-interpretive") implementation of one interpretation. The question
is whether two groups come from the same interpretation: are implementations of ``H1`` as similar
to implementations of ``H2`` as they are to each other?

* :func:`point_test` — the official ``point_test`` (``left/encoding.py``): ``n`` trials, each
  compares ``sim(G1_i → G1_j)`` (null) with ``sim(G1_i → G2_k)`` (alternative); with ``p`` the
  fraction of trials where the null wins, reject equivalence when
  ``p - crit·sqrt(p(1-p)/n) > 0.5``. One-directional.
* :func:`equivalence_test` — ``n_boot`` bootstrap repetitions of the point test in **both**
  directions (default); equivalent only if neither direction rejects in a majority of repetitions.
  ``symmetric=False`` gives the official one-directional decision.
* :func:`permutation_test` — group-label permutation test of (mean within-group similarity −
  mean between-group similarity), over ordered pairs (both directions).
* :func:`selectivity_matrix` — the ``K × K`` rejection-rate grid over named groups.

Similarities are computed once per ordered pair of models (:func:`similarity_matrix`) and reused
by every trial and bootstrap; predictivity uses one held-out split per matrix (the official code
draws a new split per call, which only adds noise to each entry).
"""

from __future__ import annotations

import itertools
import logging
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iclr26.interp_equiv.similarity import (
    OFFICIAL_ALPHAS,
    CKAStats,
    as_matrix,
    cka,
    predictivity_matrix,
    procrustes_similarity,
    svcca,
)
from iclr26.shared import check_choice, check_int, check_range

__all__ = [
    "MEASURES",
    "EquivalenceResult",
    "PermutationResult",
    "PointTest",
    "Selectivity",
    "equivalence_test",
    "permutation_test",
    "point_test",
    "post_intervention",
    "selectivity_matrix",
    "similarity_matrix",
]

logger = logging.getLogger(__name__)

#: Built-in similarity measures by name; ``predictivity`` is directional, the others symmetric.
MEASURES = ("predictivity", "cka", "cka_biased", "procrustes", "svcca")

Measure = str | Callable[[np.ndarray, np.ndarray], float]


def similarity_matrix(
    reps: Sequence[Any],
    measure: Measure = "predictivity",
    *,
    alphas: Sequence[float] = OFFICIAL_ALPHAS,
    test_size: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """``S[i, j] = sim(reps[i] → reps[j])`` for every ordered pair (diagonal included).

    Args:
        reps: representations of the same ``n`` inputs, ``(n, d_i)`` each.
        measure: one of :data:`MEASURES` or a callable ``sim(X, Y) -> float`` (treated as
            directional: called for both orders).
        alphas, test_size, seed: passed to the ridge of ``"predictivity"``.
    """
    if isinstance(reps, np.ndarray) and reps.ndim == 2:
        raise TypeError("reps must be a sequence of 2-D representations, got one 2-D array")
    reps = list(reps)
    if not reps:
        raise ValueError("reps must hold at least one representation")
    if callable(measure):
        m = len(reps)
        S = np.empty((m, m))
        for i, j in itertools.product(range(m), range(m)):
            S[i, j] = float(measure(reps[i], reps[j]))
        if not np.isfinite(S).all():
            raise ValueError("measure returned NaN or inf for some pair")
        return S
    check_choice(measure, "measure", MEASURES)
    if measure == "predictivity":
        return predictivity_matrix(reps, alphas=alphas, test_size=test_size, seed=seed)
    mats = [as_matrix(r, f"reps[{i}]", min_rows=4) for i, r in enumerate(reps)]
    n = mats[0].shape[0]
    for i, x in enumerate(mats):
        if x.shape[0] != n:
            raise ValueError(
                f"reps[{i}] has {x.shape[0]} rows, reps[0] has {n}: same inputs needed"
            )
    fn: Callable[[np.ndarray, np.ndarray], float] = {
        "cka": cka,
        "cka_biased": lambda x, y: cka(x, y, debiased=False),
        "procrustes": procrustes_similarity,
        "svcca": svcca,
    }[measure]
    m = len(mats)
    if measure in ("cka", "cka_biased"):  # the self terms once per representation, not per pair
        mats = [CKAStats(x) for x in mats]
    S = np.ones((m, m))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, j in itertools.combinations(range(m), 2):
            try:
                S[i, j] = S[j, i] = fn(mats[i], mats[j])
            except RuntimeWarning as err:
                raise ValueError(f"{measure} undefined for reps[{i}], reps[{j}]: {err}") from err
            except UserWarning as err:
                raise ValueError(f"{measure} undefined for reps[{i}], reps[{j}]: {err}") from err
    return S


@dataclass(frozen=True)
class PointTest:
    """Result of one official point test: ``p`` = fraction of trials where the null won."""

    p: float
    reject: bool
    null: np.ndarray
    alternative: np.ndarray


@dataclass(frozen=True)
class EquivalenceResult:
    """Bootstrap rejection rates in both directions and the decision.

    Attributes:
        rate_12: fraction of bootstraps where the point test with group 1 as reference rejected.
        rate_21: the same with the groups swapped (NaN when ``symmetric=False``).
        reject_12, reject_21: ``rate > 0.5``.
        rate: the rate the decision uses: ``max(rate_12, rate_21)`` (symmetric) or ``rate_12``.
        equivalent: no direction rejects (symmetric) / the one direction does not (official).
        within_1, within_2, between: mean similarity inside each group and across (1 → 2).
    """

    rate_12: float
    rate_21: float
    reject_12: bool
    reject_21: bool
    rate: float
    equivalent: bool
    symmetric: bool
    within_1: float
    within_2: float
    between: float


@dataclass(frozen=True)
class PermutationResult:
    """Group-label permutation test: statistic = mean within − mean between similarity."""

    statistic: float
    p_value: float
    reject: bool
    n_perm: int
    exhaustive: bool


@dataclass(frozen=True)
class Selectivity:
    """``rates[a, b]``: how often equivalence of groups ``labels[a]`` and ``labels[b]`` was rejected."""

    labels: tuple[str, ...]
    rates: np.ndarray
    method: str
    measure: str


def _groups_matrix(
    G1: Sequence[Any], G2: Sequence[Any], measure: Measure, seed: int, **kw: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    for name, g in (("G1", G1), ("G2", G2)):
        if isinstance(g, np.ndarray) or not isinstance(g, Sequence):
            raise TypeError(f"{name} must be a list of representations, got {type(g).__name__}")
        if len(g) == 0:
            raise ValueError(f"{name} must hold at least one representation")
    same = G1 is G2
    reps = list(G1) if same else [*G1, *G2]
    S = similarity_matrix(reps, measure, seed=seed, **kw)
    i1 = np.arange(len(G1))
    i2 = i1 if same else np.arange(len(G1), len(G1) + len(G2))
    return S, i1, i2


def _draw(rng: np.random.Generator, g1: np.ndarray, g2: np.ndarray, replace: bool, same: bool):
    """Indices (i, j, k) of one trial: i, j from group 1, k from group 2."""
    if replace:
        return rng.choice(g1), rng.choice(g1), rng.choice(g2)
    if same:
        i, j, k = rng.choice(g1, size=3, replace=False)
        return i, j, k
    i, j = rng.choice(g1, size=2, replace=False)
    return i, j, rng.choice(g2)


def _point(
    S: np.ndarray,
    g1: np.ndarray,
    g2: np.ndarray,
    *,
    n: int,
    crit: float,
    replace: bool,
    rng: np.random.Generator,
    margin: float = 0.0,
) -> PointTest:
    same = np.array_equal(g1, g2)
    null = np.empty(n)
    alt = np.empty(n)
    for t in range(n):
        i, j, k = _draw(rng, g1, g2, replace, same)
        null[t], alt[t] = S[i, j], S[i, k]
    p = float(np.mean(null > alt + margin))
    reject = bool(p - crit * math.sqrt(p * (1 - p)) / math.sqrt(n) > 0.5)
    return PointTest(p, reject, null, alt)


def _check_sizes(g1: np.ndarray, g2: np.ndarray, replace: bool) -> None:
    if replace:
        return
    same = np.array_equal(g1, g2)
    need = 3 if same else 2
    if len(g1) < need:
        raise ValueError(
            f"group 1 needs at least {need} implementations to draw distinct pairs "
            f"({'same group on both sides' if same else 'two from group 1'}), got {len(g1)}"
        )


def _check_common(n: int, crit: float, seed: int) -> None:
    check_int(n, "n", low=1)
    check_range(crit, "crit", low=0.0)
    check_int(seed, "seed", low=0)


def point_test(
    G1: Sequence[Any],
    G2: Sequence[Any],
    *,
    measure: Measure = "predictivity",
    n: int = 20,
    crit: float = 1.96,
    replace: bool = True,
    margin: float = 0.0,
    seed: int = 0,
    **measure_kw: Any,
) -> PointTest:
    """The official one-directional point test (``left/encoding.py::point_test``).

    Each of ``n`` trials draws ``i, j`` from ``G1`` and ``k`` from ``G2`` (with replacement, as in
    the official code, unless ``replace=False``) and compares ``sim(G1_i → G1_j)`` with
    ``sim(G1_i → G2_k)``. Rejects equivalence when ``p - crit·sqrt(p(1-p)/n) > 0.5``.

    Pass the same list object as ``G1`` and ``G2`` to test a group against itself. ``margin``
    (ε, default 0 as in the official code) counts a trial for the null only when
    ``null > alternative + ε``.
    """
    _check_common(n, crit, seed)
    check_range(margin, "margin", low=0.0)
    S, g1, g2 = _groups_matrix(G1, G2, measure, seed, **measure_kw)
    _check_sizes(g1, g2, replace)
    return _point(
        S, g1, g2, n=n, crit=crit, replace=replace, rng=np.random.default_rng(seed), margin=margin
    )


def _mean_offdiag(S: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    block = S[np.ix_(a, b)]
    if np.array_equal(a, b):
        m = len(a)
        return float((block.sum() - np.trace(block)) / max(m * (m - 1), 1))
    return float(block.mean())


def _equivalence(
    S: np.ndarray,
    g1: np.ndarray,
    g2: np.ndarray,
    *,
    n: int,
    n_boot: int,
    crit: float,
    replace: bool,
    symmetric: bool,
    rng: np.random.Generator,
    margin: float = 0.0,
) -> EquivalenceResult:
    kw = {"n": n, "crit": crit, "replace": replace, "rng": rng, "margin": margin}
    r12 = np.mean([_point(S, g1, g2, **kw).reject for _ in range(n_boot)])
    if symmetric:
        r21 = np.mean([_point(S, g2, g1, **kw).reject for _ in range(n_boot)])
    else:
        r21 = float("nan")
    reject_12 = bool(r12 > 0.5)
    reject_21 = bool(symmetric and r21 > 0.5)
    rate = float(max(r12, r21)) if symmetric else float(r12)
    return EquivalenceResult(
        rate_12=float(r12),
        rate_21=float(r21),
        reject_12=reject_12,
        reject_21=reject_21,
        rate=rate,
        equivalent=not (reject_12 or reject_21),
        symmetric=symmetric,
        within_1=_mean_offdiag(S, g1, g1),
        within_2=_mean_offdiag(S, g2, g2),
        between=float(S[np.ix_(g1, g2)].mean()),
    )


def equivalence_test(
    G1: Sequence[Any],
    G2: Sequence[Any],
    *,
    measure: Measure = "predictivity",
    n: int = 20,
    n_boot: int = 40,
    crit: float = 1.96,
    symmetric: bool = True,
    replace: bool = False,
    margin: float = 0.01,
    seed: int = 0,
    **measure_kw: Any,
) -> EquivalenceResult:
    """Are two groups of implementations interpretively equivalent? (bootstrapped point tests)

    Runs the point test ``n_boot`` times (official ``straps = 40``) with ``G1`` as the reference
    group and, when ``symmetric`` (default), ``n_boot`` times with ``G2`` as the reference.
    Because predictivity is a containment relation (a richer representation predicts a poorer
    one), the one-directional test can call two different interpretations equivalent in one
    argument order and not in the other; the symmetric decision does not depend on the order.

    Args:
        G1, G2: lists of ``(n_inputs, d)`` representations (same inputs for all).
        measure: similarity (:data:`MEASURES` or a callable).
        n: trials per point test (official 20).
        n_boot: bootstrap repetitions per direction (official 40).
        crit: normal critical value (official 1.96).
        symmetric: test both directions (default) or only ``G1`` as reference (official).
        replace: draw trial indices with replacement like the official code (a model can then be
            compared with itself, which inflates the null); default distinct.
        margin: ε of "≈_ε": a trial favours the null only if ``null > alternative + ε``. The
            official test uses 0, which makes two groups from the *same* generator look
            different whenever their within-group similarity is higher by any amount (type-I
            error 26 % in our calibration test); 0.01 restores <= 10 %. Use 0 for the official rule.
        seed: seeds the trial draws and the predictivity split.
    """
    _check_common(n, crit, seed)
    check_range(margin, "margin", low=0.0)
    check_int(n_boot, "n_boot", low=1)
    S, g1, g2 = _groups_matrix(G1, G2, measure, seed, **measure_kw)
    _check_sizes(g1, g2, replace)
    if symmetric:
        _check_sizes(g2, g1, replace)
    return _equivalence(
        S, g1, g2, n=n, n_boot=n_boot, crit=crit, replace=replace, symmetric=symmetric,
        rng=np.random.default_rng(seed), margin=margin,
    )  # fmt: skip


def _perm_statistic(S: np.ndarray, labels: np.ndarray) -> float:
    same = labels[:, None] == labels[None, :]
    off = ~np.eye(len(labels), dtype=bool)
    return float(S[same & off].mean() - S[~same].mean())


def _permutation(
    S: np.ndarray, m1: int, *, n_perm: int, alpha: float, rng: np.random.Generator
) -> PermutationResult:
    m = S.shape[0]
    labels = np.r_[np.zeros(m1, int), np.ones(m - m1, int)]
    observed = _perm_statistic(S, labels)
    total = math.comb(m, m1)
    if total <= n_perm:
        stats = []
        for chosen in itertools.combinations(range(m), m1):
            lab = np.ones(m, int)
            lab[list(chosen)] = 0
            stats.append(_perm_statistic(S, lab))
        null = np.asarray(stats)
        p = float(np.mean(null >= observed - 1e-12))
        exhaustive = True
    else:
        null = np.array([_perm_statistic(S, rng.permutation(labels)) for _ in range(n_perm)])
        p = (1 + int((null >= observed - 1e-12).sum())) / (1 + n_perm)
        exhaustive = False
    return PermutationResult(observed, p, bool(p <= alpha), int(null.size), exhaustive)


def permutation_test(
    G1: Sequence[Any],
    G2: Sequence[Any],
    *,
    measure: Measure = "predictivity",
    n_perm: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    **measure_kw: Any,
) -> PermutationResult:
    """Permutation test of group labels on the similarity matrix of ``G1 ∪ G2``.

    Statistic: mean similarity over ordered within-group pairs minus mean over ordered
    between-group pairs (both directions, so directional measures are symmetrised). All
    ``C(m, |G1|)`` relabellings are enumerated when there are at most ``n_perm`` of them; the
    smallest attainable p-value is then ``1 / C(m, |G1|)``, so tiny groups cannot reject.
    """
    check_int(n_perm, "n_perm", low=1)
    check_range(alpha, "alpha", low=0.0, high=1.0)
    check_int(seed, "seed", low=0)
    if G1 is G2:
        raise ValueError("permutation_test needs two disjoint groups (split a group to self-test)")
    S, g1, _ = _groups_matrix(G1, G2, measure, seed, **measure_kw)
    if len(G1) < 2 or len(G2) < 2:
        raise ValueError(f"each group needs >= 2 implementations, got {len(G1)} and {len(G2)}")
    return _permutation(S, len(g1), n_perm=n_perm, alpha=alpha, rng=np.random.default_rng(seed))


def selectivity_matrix(
    groups: Mapping[str, Sequence[Any]],
    *,
    method: str = "symmetric",
    measure: Measure = "predictivity",
    n: int = 20,
    n_boot: int = 40,
    crit: float = 1.96,
    replace: bool | None = None,
    margin: float | None = None,
    n_perm: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    S: np.ndarray | None = None,
    **measure_kw: Any,
) -> Selectivity:
    """Rejection-rate grid over named groups (the paper's selectivity heat map).

    Args:
        groups: ``name -> list of representations``; every representation describes the same inputs.
        method: ``"symmetric"`` (both directions, default), ``"point"`` (official one-directional:
            row = reference group) or ``"permutation"`` (label permutations; the diagonal splits the
            group in two halves at random, ``n_boot`` times).
        measure: similarity measure (ignored when ``S`` is given).
        replace: trial draws with replacement; default ``True`` for ``"point"`` (official) and
            ``False`` otherwise.
        margin: ε of the trials (see :func:`equivalence_test`); default 0 for ``"point"``
            (official) and 0.01 for ``"symmetric"``.
        S: a precomputed similarity matrix over the concatenated groups (in ``groups`` order).

    Returns:
        :class:`Selectivity` with ``rates[a, b]`` in ``[0, 1]``: ideally 0 on the diagonal (same
        interpretation) and 1 elsewhere. A group too small for the method gives a NaN row/column
        and a warning ("not comparable"), never a silent number.
    """
    check_choice(method, "method", ("symmetric", "point", "permutation"))
    _check_common(n, crit, seed)
    check_int(n_boot, "n_boot", low=1)
    if not isinstance(groups, Mapping) or not groups:
        raise ValueError("groups must be a non-empty mapping name -> list of representations")
    labels = tuple(str(k) for k in groups)
    sizes = []
    for k, g in groups.items():
        if isinstance(g, np.ndarray) or not isinstance(g, Sequence):
            raise TypeError(f"groups[{k!r}] must be a list of representations")
        sizes.append(len(g))
    reps = [r for g in groups.values() for r in g]
    if S is None:
        S = similarity_matrix(reps, measure, seed=seed, **measure_kw)
    else:
        S = np.asarray(S, dtype=np.float64)
        if S.shape != (len(reps), len(reps)) or not np.isfinite(S).all():
            raise ValueError(f"S must be a finite ({len(reps)}, {len(reps)}) matrix, got {S.shape}")
    offsets = np.r_[0, np.cumsum(sizes)]
    idx = [np.arange(offsets[a], offsets[a + 1]) for a in range(len(labels))]
    if margin is None:
        margin = 0.0 if method == "point" else 0.01
    check_range(margin, "margin", low=0.0)
    if replace is None:
        replace = method == "point"
    rng = np.random.default_rng(seed)
    K = len(labels)
    rates = np.full((K, K), np.nan)
    for a, b in itertools.product(range(K), range(K)):
        ga, gb = idx[a], idx[b]
        try:
            if method == "permutation":
                rates[a, b] = _perm_rate(
                    S, ga, gb, n_perm=n_perm, alpha=alpha, n_boot=n_boot, rng=rng
                )
            else:
                _check_sizes(ga, gb, replace)
                symmetric = method == "symmetric"
                if symmetric:
                    _check_sizes(gb, ga, replace)
                res = _equivalence(
                    S, ga, gb, n=n, n_boot=n_boot, crit=crit, replace=replace,
                    symmetric=symmetric, rng=rng, margin=margin,
                )  # fmt: skip
                rates[a, b] = res.rate
        except ValueError as err:
            warnings.warn(
                f"groups {labels[a]!r} and {labels[b]!r} are not comparable: {err}", stacklevel=2
            )
    name = measure if isinstance(measure, str) else getattr(measure, "__name__", "callable")
    return Selectivity(labels, rates, method, name)


def _perm_rate(
    S: np.ndarray,
    ga: np.ndarray,
    gb: np.ndarray,
    *,
    n_perm: int,
    alpha: float,
    n_boot: int,
    rng: np.random.Generator,
) -> float:
    if not np.array_equal(ga, gb):
        if len(ga) < 2 or len(gb) < 2:
            raise ValueError("each group needs >= 2 implementations")
        sub = np.r_[ga, gb]
        return float(
            _permutation(S[np.ix_(sub, sub)], len(ga), n_perm=n_perm, alpha=alpha, rng=rng).reject
        )
    if len(ga) < 4:
        raise ValueError("a self-comparison by permutation needs >= 4 implementations")
    hits = []
    for _ in range(n_boot):
        perm = rng.permutation(ga)
        h = len(ga) // 2
        sub = np.r_[perm[:h], perm[h:]]
        hits.append(
            _permutation(S[np.ix_(sub, sub)], h, n_perm=n_perm, alpha=alpha, rng=rng).reject
        )
    return float(np.mean(hits))


def post_intervention(
    G1: Sequence[Any],
    G1_post: Sequence[Any],
    G2: Sequence[Any],
    *,
    measure: Measure = "predictivity",
    n: int = 20,
    seed: int = 0,
    **measure_kw: Any,
) -> float:
    """The official intervention statistic (``left/task_encoding.py::post_intervention``).

    Each of ``n`` trials draws an implementation ``i`` of group 1 and ``k`` of group 2 and checks
    whether ``sim(G1_i → G2_k) > sim(G1_post_i → G2_k)``: does intervening on ``i``'s circuit move
    its representation away from the other group's? ``G1_post[i]`` is ``G1[i]``'s representation
    of the same probe inputs with its circuit patched (:func:`intervened_representations`).

    Returns:
        The fraction of trials where the clean representation was closer.
    """
    check_int(n, "n", low=1)
    check_int(seed, "seed", low=0)
    for name, g in (("G1", G1), ("G1_post", G1_post), ("G2", G2)):
        if isinstance(g, np.ndarray) or not isinstance(g, Sequence) or not g:
            raise TypeError(f"{name} must be a non-empty list of representations")
    if len(G1_post) != len(G1):
        raise ValueError(f"G1_post must pair with G1 ({len(G1)} entries), got {len(G1_post)}")
    m1, m2 = len(G1), len(G2)
    # only source -> target pairs are needed (2·m1·m2 of them, not (2·m1 + m2)²)
    clean, after = np.empty((m1, m2)), np.empty((m1, m2))
    for i in range(m1):
        for k in range(m2):
            clean[i, k] = similarity_matrix([G1[i], G2[k]], measure, seed=seed, **measure_kw)[0, 1]
            after[i, k] = similarity_matrix([G1_post[i], G2[k]], measure, seed=seed, **measure_kw)[
                0, 1
            ]
    rng = np.random.default_rng(seed)
    wins = 0
    for _ in range(n):
        i, k = rng.integers(m1), rng.integers(m2)
        wins += clean[i, k] > after[i, k]
    return wins / n
