"""The experiment helpers behind reproduce/bench, at toy scale."""

import numpy as np
import pytest
import torch

from iclr26.git_bo import Embedded
from iclr26.git_bo.baselines import center_point
from iclr26.git_bo.cli import COMPARE_PROBLEM_NAMES, METHOD_NAMES, REAL_PROBLEM_NAMES
from iclr26.git_bo.experiments import (
    COMPARE_PROBLEMS,
    METHODS,
    REAL_PROBLEMS,
    compare,
    compare_problem,
    iteration_times,
    real_problem,
    run_method,
    surrogate_quality,
)


def test_run_method_regret_curves_are_monotone_and_labelled():
    p = Embedded("levy", dim=15, d_eff=3, seed=0)
    for m in ("random", "center-box", "tpe", "gi-rff-best", "gi-rff-randU"):
        r = run_method(m, p, budget=14, n_init=8, seed=0, n_candidates=200)
        assert r["regret"].shape == (14,)
        assert np.all(np.diff(r["regret"]) <= 0)
        assert np.all(r["regret"] >= -1e-9)
        assert r["cum_seconds"].shape == (14,)
        assert (r["captured"] is not None) == m.startswith("gi-")
    with pytest.raises(ValueError, match="method"):
        run_method("cma-es", p, 10, 5, 0)
    assert all(label for label, _ in METHODS.values())


def test_iteration_times_rows():
    raw = {}
    rows = iteration_times((6, 12), 10, 100, ["gi-rff-best", "gi-pfn-best"], repeats=3, raw=raw)
    assert [(r["D"], r["method"]) for r in rows] == [
        (6, "gi-rff-best"), (6, "gi-pfn-best"), (12, "gi-rff-best"), (12, "gi-pfn-best")
    ]  # fmt: skip
    assert all(0 < r["min s"] <= r["median s"] <= r["max s"] for r in rows)
    # one time per interleaved round, and the summary is of those rounds
    assert sorted(raw) == [(6, "gi-pfn-best"), (6, "gi-rff-best"), (12, "gi-pfn-best"),
                           (12, "gi-rff-best")]  # fmt: skip
    for r in rows:
        secs = raw[(r["D"], r["method"])]
        assert len(secs) == 3
        assert r["median s"] == pytest.approx(float(np.median(secs)))
    with pytest.raises(ValueError, match="repeats"):
        iteration_times((6,), 10, 100, ["gi-rff-best"], repeats=0)


def test_iteration_times_of_the_ask_tell_peers():
    rows = iteration_times((5,), 8, 50, ["tpe", "turbo"], repeats=1)
    assert [r["method"] for r in rows] == ["tpe", "turbo"]
    assert all(r["median s"] > 0 for r in rows)


def test_cli_names_match_the_experiments():
    assert tuple(REAL_PROBLEMS) == REAL_PROBLEM_NAMES
    assert tuple(COMPARE_PROBLEMS) == COMPARE_PROBLEM_NAMES
    assert tuple(METHODS) == METHOD_NAMES


def test_real_problems_on_the_unit_cube():
    p = real_problem("lasso-medium")
    assert p.dim == 100
    assert np.all(p.bounds == np.stack([np.zeros(100), np.ones(100)]))
    # the centre of the cube is the centre of LassoBench's [-1, 1]^d box
    assert p(np.full(100, 0.5)) == pytest.approx(p.problem(np.zeros(100)))
    r = run_method("gi-rff-best", p, budget=8, n_init=6, seed=0, n_candidates=100)
    # no known optimum: the curve is the best value so far
    assert r["regret"][-1] == pytest.approx(r["regret"].min())
    assert r["regret"][-1] > 0


def test_compare_report():
    pytest.importorskip("gymnasium")
    rep = compare(["hopper"], ["random", "gi-rff-best"], budget=6, n_init=4, seeds=1)
    assert rep.config["command"] == "compare"
    (table,) = [t for t in rep.tables if "Real problems" in t.title]
    assert [r["method"] for r in table.rows] == [METHODS[m][0] for m in ("random", "gi-rff-best")]
    assert len(rep.checks) == 1  # GI-RFF vs random search


def test_center_point_is_one_evaluation_of_the_centre():
    calls = []
    r = center_point(lambda x: calls.append(x) or float(np.sum(x)), 4, budget=30)
    assert len(calls) == 1
    assert np.all(calls[0] == 0.5)
    assert r.X.shape == (1, 4)
    assert r.y.tolist() == [2.0]
    p = Embedded("ackley", dim=12, d_eff=3, seed=0)
    rr = run_method("center", p, budget=10, n_init=4, seed=0)
    assert rr["regret"].tolist() == [pytest.approx(p(np.full(12, 0.5)) - p.optimal_value)]


def test_compare_on_the_reproduce_ackley_with_the_centre_controls():
    p = compare_problem("ackley")
    assert p.name == "ackley-D100-d5"
    assert p.dim == 100
    rep = compare(["ackley"], ["random", "center", "gi-rff-best", "gi-rff-mean"], budget=22,
                  n_init=20, seeds=1)  # fmt: skip
    (table,) = rep.tables
    assert table.title.startswith("Embedded Ackley")
    rows = {r["method"]: r["median best"] for r in table.rows}
    # the same seeded runs as run_method (and as reproduce's rows at the same budget)
    rnd = run_method("random", Embedded("ackley", dim=100, d_eff=5, seed=17), 22, 20, 0)
    assert rows[METHODS["random"][0]] == pytest.approx(rnd["regret"][-1])
    assert rows[METHODS["center"][0]] == pytest.approx(p(np.full(100, 0.5)) - p.optimal_value)
    # GI (incumbent) vs random and vs the centre; the official origin vs the incumbent
    assert len(rep.checks) == 3
    assert any("official origin" in c.name for c in rep.checks)


class _Bowl:
    """``‖x − 0.3‖²`` on ``[0, 1]^4``: a surrogate that learns anything ranks it well."""

    dim = 4
    bounds = np.stack([np.zeros(4), np.ones(4)])

    def __call__(self, x):
        return float(np.sum((np.asarray(x) - 0.3) ** 2))


class _Noise:
    """A surrogate whose mean ignores the data: its ranking must be no better than chance."""

    name = "noise"

    def condition(self, X, y):
        self.g = torch.Generator().manual_seed(0)

    def posterior(self, X):
        return torch.randn(X.shape[0], generator=self.g, dtype=X.dtype), torch.ones_like(X[:, 0])


def test_surrogate_quality_separates_a_good_surrogate_from_noise():
    rows = surrogate_quality(_Bowl(), ("gp", _Noise()), n_context=24, n_init=12, n_test=300,
                             seeds=2, rank=2)  # fmt: skip
    by = {(r["surrogate"], r["held-out set"]): r for r in rows}
    assert set(by) == {(s, h) for s in ("gp", "noise") for h in ("subspace", "uniform")}
    gp, noise = by[("gp", "uniform")], by[("noise", "uniform")]
    assert gp["spearman"] > 0.9
    assert abs(noise["spearman"]) < 0.2
    assert gp["nll"] < gp["prior nll"]  # conditioning on the context helps
    assert gp["pick percentile"] < 0.1 < noise["pick percentile"]
    assert by[("gp", "subspace")]["spearman"] > 0.5
    assert all(0.0 <= r["coverage 90"] <= 1.0 for r in rows)
    # the prior's NLL does not depend on the surrogate
    assert gp["prior nll"] == pytest.approx(noise["prior nll"])
