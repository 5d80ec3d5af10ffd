"""Spec test 5: acquisition limits and a Thompson draw that is a draw."""

import math

import pytest
import torch

from iclr26.git_bo import acquisition_values, expected_improvement, gp_ucb_beta, thompson, ucb


def _mv(seed=0, m=200):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, generator=g, dtype=torch.float64), torch.rand(
        m, generator=g, dtype=torch.float64
    ) + 0.01


def test_ucb_limits():
    mean, var = _mv()
    assert int(ucb(mean, var, 0.0).argmax()) == int(mean.argmax())
    assert int(ucb(mean, var, 1e12).argmax()) == int(var.argmax())
    assert torch.allclose(ucb(mean, var, 4.0), mean + 2.0 * var.sqrt())


def test_ei_closed_form_and_limits():
    mean = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    var = torch.tensor([1.0, 1e-12, 4.0], dtype=torch.float64)
    ei = expected_improvement(mean, var, best=0.0)
    assert math.isclose(float(ei[0]), 1.0 / math.sqrt(2 * math.pi), rel_tol=1e-9)
    assert math.isclose(float(ei[1]), 1.0, rel_tol=1e-6)  # no uncertainty: the plain improvement
    # EI > improvement when there is uncertainty; monotone in the mean at equal variance
    assert float(ei[2]) > 2.0
    m2 = torch.linspace(-1, 1, 5, dtype=torch.float64)
    e2 = expected_improvement(m2, torch.ones(5, dtype=torch.float64), 0.0)
    assert bool((e2.diff() > 0).all())


def test_thompson_is_a_sample_not_the_mean():
    mean = torch.zeros(5000, dtype=torch.float64)
    var = torch.full((5000,), 4.0, dtype=torch.float64)
    s = thompson(mean, var, torch.Generator().manual_seed(0))
    # one draw per candidate has variance σ² = 4; the mean of 512 draws would have 4/512
    assert 3.6 < float(s.var()) < 4.4
    s2 = thompson(mean, var, torch.Generator().manual_seed(0))
    assert torch.equal(s, s2)


def test_gp_ucb_schedule_and_dispatch():
    assert math.isclose(gp_ucb_beta(1, 1000, 0.1), 2 * math.log(1000 * math.pi**2 / 0.6))
    assert gp_ucb_beta(10, 1000) > gp_ucb_beta(2, 1000)
    mean, var = _mv(1)
    a = acquisition_values("ucb", mean, var, beta=gp_ucb_beta, t=3)
    assert torch.allclose(a, ucb(mean, var, gp_ucb_beta(3, 200)))
    with pytest.raises(ValueError, match="best"):
        acquisition_values("ei", mean, var)
    with pytest.raises(ValueError, match="acquisition"):
        acquisition_values("pi", mean, var)
