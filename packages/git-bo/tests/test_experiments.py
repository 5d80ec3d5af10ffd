"""The experiment helpers behind reproduce/bench, at toy scale."""

import numpy as np
import pytest

from iclr26.git_bo import Embedded
from iclr26.git_bo.cli import METHOD_NAMES, REAL_PROBLEM_NAMES
from iclr26.git_bo.experiments import (
    METHODS,
    REAL_PROBLEMS,
    compare,
    iteration_times,
    real_problem,
    run_method,
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
