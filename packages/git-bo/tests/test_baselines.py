"""The peers behind the ask/tell baseline interface: TuRBO-1, SAASBO, Optuna TPE."""

import numpy as np
import pytest
import torch

from iclr26.git_bo.baselines import TPE, TuRBO1, random_search, saasbo, tpe, turbo


class Counting:
    """A shifted sphere on [0, 1]^D that counts its calls."""

    def __init__(self, dim: int) -> None:
        self.dim, self.calls = dim, 0
        self.x_opt = np.linspace(0.2, 0.8, dim)

    def __call__(self, x):
        self.calls += 1
        assert x.shape == (self.dim,)
        return float(np.sum((x - self.x_opt) ** 2))


TINY_SAAS = {"warmup_steps": 8, "num_samples": 8, "thinning": 4, "raw_samples": 16}


@pytest.mark.parametrize(
    ("run", "kw"),
    [(turbo, {"n_candidates": 64, "maxiter": 10}), (tpe, {}), (saasbo, TINY_SAAS)],
    ids=["turbo", "tpe", "saasbo"],
)
def test_budget_bounds_determinism_and_shared_design(run, kw):
    budget = {saasbo: 7, turbo: 9, tpe: 14}[run]
    f = Counting(4)
    a = run(f, 4, budget, n_init=6, seed=3, **kw)
    assert f.calls == budget  # the initial design counts in the budget
    assert a.X.shape == (budget, 4)
    assert a.y.shape == (budget,)
    assert (a.X >= 0).all()
    assert (a.X <= 1).all()
    assert len(a.seconds) == budget
    np.testing.assert_allclose(a.y, [f.__class__(4)(x) for x in a.X])
    # the same scrambled-Sobol initial design as random search (and GITBO(init="sobol"))
    r = random_search(Counting(4), 4, 6, seed=3)
    np.testing.assert_allclose(a.X[:6], r.X, atol=1e-12)
    b = run(Counting(4), 4, budget, n_init=6, seed=3, **kw)
    np.testing.assert_array_equal(a.X, b.X)
    c = run(Counting(4), 4, budget, n_init=6, seed=4, **kw)
    assert not np.allclose(a.X[6:], c.X[6:])
    assert np.all(np.diff(a.best_so_far()) <= 0)


def test_turbo_trust_region_follows_the_tutorial_rules():
    t = TuRBO1(2, n_init=2, seed=0, success_tolerance=3)
    assert t.failure_tolerance == 4  # ceil(max(4, D))
    t.tell([0.5, 0.5], 1.0)
    t.tell([0.1, 0.1], 2.0)
    assert t.best_value == 1.0
    assert t.length == pytest.approx(0.8)
    for _ in range(4):  # four failures halve the side
        t.tell([0.3, 0.3], 5.0)
    assert t.length == pytest.approx(0.4)
    assert t.failure_counter == 0
    for v in (0.5, 0.2, 0.05):  # three successes double it
        t.tell([0.3, 0.3], v)
    assert t.length == pytest.approx(0.8)
    assert t.best_value == pytest.approx(0.05)
    # a success needs a relative improvement above 1e-3
    t.tell([0.3, 0.3], 0.05 * (1 - 1e-4))
    assert t.failure_counter == 1
    # collapse below length_min restarts from a fresh design, which then counts as initial
    t.length = t.length_min * 1.5
    t.failure_counter = t.failure_tolerance - 1
    t.tell([0.3, 0.3], 9.0)
    assert t.restarts == 1
    assert t.length == pytest.approx(0.8)
    x = t.ask()
    assert x.shape == (1, 2)
    assert ((x >= 0) & (x <= 1)).all()


def test_turbo_candidates_stay_in_the_trust_region():
    torch.manual_seed(0)
    f = Counting(6)
    t = TuRBO1(6, n_init=8, seed=1, n_candidates=128, maxiter=10)
    for _ in range(8):
        x = t.ask()[0]
        t.tell(x, f(x))
    t.length = 0.05
    centre = t.X[int(torch.argmin(t.y))].numpy()
    for _ in range(3):
        x = t.propose()[0]
        # side 0.05 stretched by lengthscale weights: every move is bounded by the region
        assert np.abs(x - centre).max() <= 0.05 * 6 / 2 + 1e-9


def test_tpe_is_serial_and_tell_checks_inputs():
    t = TPE(3, n_init=2, seed=0)
    with pytest.raises(ValueError, match="pending"):
        t.tell([0.1, 0.2, 0.3], 1.0)
    x = t.ask()
    with pytest.raises(ValueError, match="tell the previous point"):
        t.ask()
    with pytest.raises(ValueError, match="finite"):
        t.tell(x, float("nan"))
    t.tell(x, 1.0)
    assert t.n_told == 1
