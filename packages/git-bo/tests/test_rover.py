"""The Rover trajectory problem, from its definition."""

import math

import numpy as np
import pytest

from iclr26.git_bo import GITBO, Rover


def _encode(points):
    return ((np.asarray(points) + 0.1) / 1.2).reshape(-1)


def test_straight_free_path_costs_its_length():
    t = np.linspace(0, 1, 30)
    line = np.stack([0.05 + 0.9 * t, 0.05 + 0.9 * t], 1)
    r = Rover(n_trees=0)
    # collinear control points: the spline is the segment, start and goal are hit exactly
    assert r(_encode(line)) == pytest.approx(0.05 * 0.9 * math.sqrt(2) - 5.0, abs=1e-6)


def test_obstacles_and_misses_are_charged():
    r = Rover(n_trees=0)
    t = np.linspace(0, 1, 30)
    # the same path shifted by 0.02 in x misses start and goal by 0.02 each in L1 (10 per unit)
    shifted = np.stack([0.07 + 0.9 * t, 0.05 + 0.9 * t], 1)
    assert r(_encode(shifted)) == pytest.approx(0.05 * 0.9 * math.sqrt(2) + 0.4 - 5.0, abs=1e-6)
    # a detour outside the unit square pays 20 per unit length out there
    out = np.stack([0.05 + 0.9 * t, 0.05 + 0.9 * t], 1)
    out[10:20, 0] = 1.05
    assert r(_encode(out)) > r(_encode(shifted)) + 1.0
    # every tree is a square of side 0.05 away from the start and goal corners
    rt = Rover(n_trees=50, seed=3)
    assert rt.tree_low.shape == (50, 2)
    np.testing.assert_allclose(rt.tree_high - rt.tree_low, 0.05)
    centre = rt.tree_low[0] + 0.025
    assert rt.cost_rate(centre[None])[0] == pytest.approx(20.05)
    assert rt.cost_rate(np.array([[0.05, 0.05]]))[0] == pytest.approx(0.05)


def test_rover_is_deterministic_and_drives_gitbo():
    r = Rover(n_points=10, n_trees=20, seed=1)
    x = np.random.default_rng(0).random(20)
    assert r(x) == Rover(n_points=10, n_trees=20, seed=1)(x)
    assert not np.allclose(Rover(n_trees=20, seed=1).tree_low, Rover(n_trees=20, seed=2).tree_low)
    opt = GITBO(r.bounds, "rff", maximize=False, n_init=8, n_candidates=100, origin="best", seed=0)
    res = opt.run(r, 12)
    assert res.n_evals == 12
    with pytest.raises(ValueError, match="20 entries"):
        r(np.zeros(6))
    with pytest.raises(ValueError, match="finite"):
        r(np.full(20, np.nan))
    with pytest.raises(ValueError, match="n_points"):
        Rover(n_points=2)
