"""Spec test 6: the headline claim end to end (slow: trains implementations)."""

import numpy as np
import pytest

from iclr26.interp_equiv.experiments import reproduce


def _grid(report, prefix):
    table = next(t for t in report.tables if t.title.startswith(prefix))
    labels = [r["group 1 \\ group 2"] for r in table.rows]
    return np.array([[r[b] for b in labels] for r in table.rows], dtype=float)


@pytest.mark.slow
@pytest.mark.parametrize(
    "quick",
    [True, False],
    ids=["mlp-tier", "transformer-tier"],
)
def test_selectivity_grid_separates_algorithms_where_baselines_cannot(quick):
    report = reproduce(quick=quick, seed=0)
    sym = _grid(report, "Selectivity: symmetric test, predictivity")
    off = ~np.eye(len(sym), dtype=bool)
    assert np.diag(sym).max() <= 0.1
    assert sym[off].min() >= 0.8
    agree = _grid(report, "Baseline: behavioural agreement")
    assert agree.min() >= 0.95  # behaviour cannot separate
    weights = _grid(report, "Baseline: weight correlation")
    assert np.nanmax(np.abs(np.diag(weights))) < 0.2  # nor can weights, even within an algorithm
