"""The experiment helpers behind reproduce/bench, at toy scale."""

import numpy as np
import pytest

from iclr26.git_bo import Embedded
from iclr26.git_bo.experiments import METHODS, iteration_times, run_method


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
    rows = iteration_times((6, 12), 10, 100, ["gi-rff-best", "gi-pfn-best"], repeats=1)
    assert [(r["D"], r["method"]) for r in rows] == [
        (6, "gi-rff-best"), (6, "gi-pfn-best"), (12, "gi-rff-best"), (12, "gi-pfn-best")
    ]  # fmt: skip
    assert all(r["median s"] > 0 for r in rows)


def test_iteration_times_of_the_ask_tell_peers():
    rows = iteration_times((5,), 8, 50, ["tpe", "turbo"], repeats=1)
    assert [r["method"] for r in rows] == ["tpe", "turbo"]
    assert all(r["median s"] > 0 for r in rows)
