"""Offline benchmarks: a synthetic SPR world with known truth, and macro-economic propositions.

* :func:`make_spr_world` — random linear proposition trees (depth, branching) with leaf soft truths
  drawn per question, parents defined by a known linear rule (non-negative weights summing to
  one), and binary outcomes drawn from the root's soft truth.
* :func:`make_macro_benchmark` — resolvable propositions about the US economy built from the
  quarterly ``macrodata`` series bundled with statsmodels (1959Q1–2009Q3): a 3-factor, 9-leaf
  template tree, one pandas rule per leaf evaluated on the rows known at the query date, and the
  realised outcome of every internal node one quarter later.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from iclr26.analytica.ground import DataFrameGrounder
from iclr26.analytica.tree import Proposition, PropositionTree
from iclr26.shared import check_int

__all__ = [
    "MACRO_TEMPLATE",
    "MacroBenchmark",
    "SPRWorld",
    "load_macrodata",
    "make_macro_benchmark",
    "make_spr_world",
    "synthesize_batch",
]


# ------------------------------------------------------------------------------ synthetic
@dataclass
class SPRWorld:
    """A synthetic soft-propositional world.

    Attributes:
        tree: the shared structure (ids ``P0``, ``P1``, ``P1.1``…), with the true linear rule of
            every internal node stored in ``synthesis``; no proofs.
        leaf_truth: (n_questions, n_leaves) soft truths of the leaves, columns in
            ``tree.leaves()`` order.
        truth: (n_questions, n_nodes) soft truths of every node, columns in ``node_ids`` order.
        node_ids: column order of ``truth``.
        outcomes: (n_questions,) realised 0/1 outcome of the root (Bernoulli of its truth).
        questions: question ids (used as the propositions' ``date`` field).
    """

    tree: PropositionTree
    leaf_truth: NDArray[np.float64]
    truth: NDArray[np.float64]
    node_ids: list[str]
    outcomes: NDArray[np.int64]
    questions: list[str]
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._index = {q: i for i, q in enumerate(self.questions)}
        self._col = {pid: j for j, pid in enumerate(self.node_ids)}

    def truth_of(self, prop: Proposition) -> float:
        """Soft truth of ``prop`` (its ``date`` is the question id)."""
        return float(self.truth[self._index[prop.date], self._col[prop.pid]])

    def question_tree(self, q: int) -> PropositionTree:
        """An unproven copy of the tree for question ``q`` (ids as in ``tree``, date = question id)."""
        tree = self.tree.copy()
        for node in tree:
            node.date = self.questions[q]
            node.proof = None
            node.synthesis = None
        return tree

    def root_weights(self) -> dict[str, float]:
        """Path-product weight of every leaf in the root (``∂ root / ∂ leaf`` of the true rule)."""
        out = {}
        for leaf in self.tree.leaves():
            w = 1.0
            child = leaf
            for parent in self.tree.ancestors(leaf):
                w *= self.tree.get(parent).synthesis["weights"][child]
                child = parent
            out[leaf] = w
        return out


def make_spr_world(
    n_questions: int = 200,
    *,
    depth: int = 2,
    branching: int | tuple[int, int] = 3,
    truth_range: tuple[float, float] = (0.0, 1.0),
    concentration: float = 2.0,
    seed: int = 0,
) -> SPRWorld:
    """Random tree + true linear rules + per-question leaf truths and root outcomes.

    Args:
        n_questions: number of questions sharing the structure.
        depth: levels below the root (1 = root with leaf children).
        branching: children per internal node, or ``(low, high)`` drawn per node.
        truth_range: leaf soft truths are uniform on this interval (keep it inside (0, 1) to
            test the variance law away from the clipping bounds).
        concentration: Dirichlet concentration of each node's weights (large = nearly equal).
        seed: structure, weights, truths and outcomes.
    """
    check_int(n_questions, "n_questions", low=1)
    check_int(depth, "depth", low=1, high=8)
    lo_b, hi_b = (branching, branching) if isinstance(branching, int) else branching
    check_int(lo_b, "branching", low=1)
    check_int(hi_b, "branching", low=lo_b)
    lo_t, hi_t = truth_range
    if not 0 <= lo_t <= hi_t <= 1:
        raise ValueError(f"truth_range must satisfy 0 ≤ low ≤ high ≤ 1, got {truth_range}")
    rng = np.random.default_rng(seed)

    def grow(level: int) -> dict[str, Any]:
        if level == depth:
            return {"sentence": "leaf factor", "children": []}
        k = int(rng.integers(lo_b, hi_b + 1))
        return {"sentence": "factor", "children": [grow(level + 1) for _ in range(k)]}

    spec = grow(0)
    tree = PropositionTree.from_spec(spec)
    for node in tree:
        node.sentence = f"Synthetic proposition {node.pid} holds"
        if node.children:
            w = rng.dirichlet(np.full(len(node.children), concentration))
            node.synthesis = {
                "kind": "linear",
                "intercept": 0.0,
                "weights": dict(zip(node.children, w.tolist(), strict=True)),
            }
    leaves = tree.leaves()
    leaf_truth = rng.uniform(lo_t, hi_t, size=(n_questions, len(leaves)))
    truth, ids = synthesize_batch(tree, leaf_truth)
    outcomes = (rng.random(n_questions) < truth[:, ids.index(tree.root_id)]).astype(np.int64)
    questions = [f"q{q:05d}" for q in range(n_questions)]
    return SPRWorld(tree, leaf_truth, truth, ids, outcomes, questions)


def synthesize_batch(
    tree: PropositionTree,
    leaf_values: NDArray[np.float64],
    rules: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[NDArray[np.float64], list[str]]:
    """Vectorised linear synthesis of many questions at once.

    Args:
        tree: structure; each internal node's rule is ``rules[pid]`` or its stored ``synthesis``.
        leaf_values: (n, n_leaves) in ``tree.leaves()`` order.

    Returns:
        ``(values, ids)``: (n, n_nodes) values of every node (linear results clipped to
        [0, 1], as :func:`~iclr26.analytica.synth.apply_rule` does) and the column ids.
    """
    leaves = tree.leaves()
    x = np.asarray(leaf_values, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(leaves):
        raise ValueError(f"leaf_values must be (n, {len(leaves)}), got {x.shape}")
    cols: dict[str, NDArray[np.float64]] = {pid: x[:, j] for j, pid in enumerate(leaves)}
    for pid in tree.internal():
        rule = (rules or {}).get(pid) or tree.get(pid).synthesis
        if rule is None or rule.get("kind", "linear") != "linear":
            raise ValueError(f"{pid} needs a linear rule")
        acc = np.full(x.shape[0], float(rule.get("intercept", 0.0)))
        for c, w in rule["weights"].items():
            acc = acc + w * cols[c]
        cols[pid] = np.clip(acc, 0.0, 1.0)
    ids = [n.pid for n in tree]
    return np.column_stack([cols[p] for p in ids]), ids


# ---------------------------------------------------------------------------------- macro
def load_macrodata() -> pd.DataFrame:
    """statsmodels' bundled US macro series (203 quarters), indexed by quarter-end dates."""
    spec = importlib.util.find_spec("statsmodels")
    raw = None
    if spec is not None and spec.submodule_search_locations:
        path = (
            Path(next(iter(spec.submodule_search_locations)))
            / "datasets"
            / "macrodata"
            / "macrodata.csv"
        )
        if path.exists():
            raw = pd.read_csv(path)
    if raw is None:  # pragma: no cover - layout change in statsmodels
        from statsmodels.datasets import macrodata

        raw = macrodata.load_pandas().data
    index = pd.PeriodIndex.from_fields(
        year=raw["year"].astype(int), quarter=raw["quarter"].astype(int), freq="Q"
    )
    frame = raw.drop(columns=["year", "quarter"]).set_index(
        index.to_timestamp(how="end").normalize()
    )
    frame.index.name = "date"
    return frame


def _features(frame: pd.DataFrame) -> pd.DataFrame:
    f = pd.DataFrame(index=frame.index)
    for col, name in (
        ("realgdp", "gdp_g"),
        ("realcons", "cons_g"),
        ("realinv", "inv_g"),
        ("realdpi", "dpi_g"),
    ):
        f[name] = 100 * np.log(frame[col]).diff()
    f["unemp"] = frame["unemp"]
    f["unemp_d"] = frame["unemp"].diff()
    f["tbill"] = frame["tbilrate"]
    f["tbill_d2"] = frame["tbilrate"].diff(2)
    f["infl"] = frame["infl"]
    f["realint"] = frame["realint"]
    return f


def _soft(x: float, center: float, scale: float) -> float:
    """Soft truth of "x above center": a logistic of the standardised distance."""
    if not np.isfinite(x) or not np.isfinite(center) or not scale > 0:
        return float("nan")
    return float(1.0 / (1.0 + np.exp(-(x - center) / scale)))


def _values(h: pd.DataFrame, col: str) -> np.ndarray:
    v = h[col].to_numpy(dtype=float)
    return v[~np.isnan(v)]


def _above_median(col: str, *, below: bool = False):
    def rule(h: pd.DataFrame, date: pd.Timestamp) -> float:
        s = _values(h, col)
        past = s[:-1]
        v = _soft(s[-1], float(np.median(past)), float(np.std(past, ddof=1)) / 2)
        return 1.0 - v if below else v

    return rule


def _fell(col: str):
    def rule(h: pd.DataFrame, date: pd.Timestamp) -> float:
        s = _values(h, col)
        return _soft(-s[-1], 0.0, float(np.std(s[:-1], ddof=1)) / 2)

    return rule


def _infl_below_4(h: pd.DataFrame, date: pd.Timestamp) -> float:
    return _soft(4.0 - _values(h, "infl")[-1], 0.0, 1.0)


def _unemp_below_avg(h: pd.DataFrame, date: pd.Timestamp) -> float:
    s = _values(h, "unemp")
    return _soft(float(s[-5:-1].mean()) - s[-1], 0.0, float(np.std(np.diff(s), ddof=1)))


MACRO_TEMPLATE: dict[str, Any] = {
    "sentence": "US real GDP growth next quarter is above its historical median",
    "causality": "GDP growth is driven by consumption, investment and the labour market",
    "children": [
        {
            "sentence": "US real consumption growth next quarter is above its historical median",
            "causality": "consumption follows income, recent spending and jobs",
            "children": [
                {
                    "sentence": "Real consumption growth last quarter was above its historical median",
                    "meta": {"rule": "cons_up"},
                },
                {
                    "sentence": "Real disposable income growth last quarter was above its historical median",
                    "meta": {"rule": "dpi_up"},
                },
                {
                    "sentence": "The unemployment rate fell last quarter",
                    "meta": {"rule": "unemp_fell"},
                },
            ],
        },
        {
            "sentence": "US real investment growth next quarter is above its historical median",
            "causality": "investment follows momentum and financing costs",
            "children": [
                {
                    "sentence": "Real investment growth last quarter was above its historical median",
                    "meta": {"rule": "inv_up"},
                },
                {
                    "sentence": "The 3-month T-bill rate fell over the last two quarters",
                    "meta": {"rule": "tbill_fell"},
                },
                {
                    "sentence": "The real interest rate last quarter was below its historical median",
                    "meta": {"rule": "realint_low"},
                },
            ],
        },
        {
            "sentence": "The US unemployment rate falls next quarter",
            "causality": "labour markets follow output with a lag",
            "children": [
                {
                    "sentence": "The unemployment rate is below its average of the previous four quarters",
                    "meta": {"rule": "unemp_below_avg"},
                },
                {
                    "sentence": "Real GDP growth last quarter was above its historical median",
                    "meta": {"rule": "gdp_up"},
                },
                {
                    "sentence": "Inflation last quarter was below 4 % (annualised)",
                    "meta": {"rule": "infl_low"},
                },
            ],
        },
    ],
}

MACRO_RULES = {
    "cons_up": _above_median("cons_g"),
    "dpi_up": _above_median("dpi_g"),
    "unemp_fell": _fell("unemp_d"),
    "inv_up": _above_median("inv_g"),
    "tbill_fell": _fell("tbill_d2"),
    "realint_low": _above_median("realint", below=True),
    "unemp_below_avg": _unemp_below_avg,
    "gdp_up": _above_median("gdp_g"),
    "infl_low": _infl_below_4,
}


def _outcomes(features: pd.DataFrame, t: int) -> dict[str, int]:
    """Realised outcome at quarter t+1 of every internal node, thresholds from data ≤ t."""
    hist, nxt = features.iloc[: t + 1], features.iloc[t + 1]
    return {
        "P0": int(nxt["gdp_g"] > hist["gdp_g"].median()),
        "P1": int(nxt["cons_g"] > hist["cons_g"].median()),
        "P2": int(nxt["inv_g"] > hist["inv_g"].median()),
        "P3": int(nxt["unemp_d"] < 0),
    }


@dataclass
class MacroBenchmark:
    """Resolvable macro propositions with strict dating.

    Attributes:
        features: quarterly derived series (growth rates in %, changes).
        grounder: the :class:`DataFrameGrounder` over ``features`` with :data:`MACRO_RULES`.
        template: the decomposition template (:data:`MACRO_TEMPLATE`).
        train_dates, test_dates: query dates (quarter ends); outcomes resolve one quarter later.
        outcomes: ``date -> {pid: 0/1}`` for the root and the three factor nodes.
    """

    features: pd.DataFrame
    grounder: DataFrameGrounder
    template: dict[str, Any]
    train_dates: list[str]
    test_dates: list[str]
    outcomes: dict[str, dict[str, int]]

    def tree(self, date: str) -> PropositionTree:
        """The unproven template tree for one query date."""
        return PropositionTree.from_spec(
            self.template, date=date, context="United States, quarterly national accounts"
        )

    def leaf_matrix(self, dates: Sequence[str]) -> tuple[NDArray[np.float64], list[str]]:
        """(len(dates), 9) clean leaf values (one data-rule evaluation per leaf and date)."""
        tree = self.tree(dates[0])
        leaves = tree.leaves()
        out = np.empty((len(dates), len(leaves)))
        for i, d in enumerate(dates):
            for j, pid in enumerate(leaves):
                node = tree.get(pid)
                out[i, j] = self.grounder.evaluate(
                    Proposition(pid, node.sentence, date=d, meta=node.meta)
                )
        return out, leaves

    def y(self, dates: Sequence[str], pid: str = "P0") -> NDArray[np.int64]:
        return np.array([self.outcomes[d][pid] for d in dates])


def make_macro_benchmark(*, burn_in: int = 12, n_train: int = 100) -> MacroBenchmark:
    """Build the macro benchmark: query dates from quarter ``burn_in`` on, the first ``n_train``
    for fitting and the rest (to the second-to-last quarter) for testing."""
    frame = load_macrodata()
    features = _features(frame)
    dates = [d.strftime("%Y-%m-%d") for d in features.index]
    check_int(burn_in, "burn_in", low=6)
    usable = list(range(burn_in, len(dates) - 1))
    check_int(n_train, "n_train", low=10, high=len(usable) - 10)
    outcomes = {dates[t]: _outcomes(features, t) for t in usable}
    grounder = DataFrameGrounder(features, MACRO_RULES)
    return MacroBenchmark(
        features,
        grounder,
        MACRO_TEMPLATE,
        [dates[t] for t in usable[:n_train]],
        [dates[t] for t in usable[n_train:]],
        outcomes,
    )
