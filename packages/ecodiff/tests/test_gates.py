import math

import numpy as np
import pytest
import torch

from iclr26.ecodiff.gates import (
    GAMMA,
    TEMPERATURE,
    ZETA,
    deterministic_gate,
    hard_concrete,
    regularizer,
)


def _sig(x):
    return 1 / (1 + math.exp(-x))


@pytest.mark.parametrize("lam", [-2.0, -0.5, 0.0, 0.7, 2.0])
def test_hard_concrete_undamped_matches_closed_form(lam):
    g = torch.Generator().manual_seed(0)
    u = torch.rand(200_000, generator=g, dtype=torch.float64)
    m = hard_concrete(torch.full_like(u, lam), u, eps=0.0)
    b = TEMPERATURE
    p0 = _sig(-lam - b * math.log(11))  # P(m = 0) = sigmoid(-λ - b ln(ζ/-γ)) with ζ/-γ = 11
    p1 = _sig(lam - b * math.log(11))
    se = 4 * math.sqrt(0.25 / len(u))
    assert abs(float((m == 0).double().mean()) - p0) < se
    assert abs(float((m == 1).double().mean()) - p1) < se
    # the L0 penalty is P(m > 0) for undamped noise
    l0 = float(regularizer([torch.tensor([lam], dtype=torch.float64)], "l0"))
    assert abs(float((m > 0).double().mean()) - l0) < se
    assert abs(l0 - _sig(lam + b * math.log(11))) < 1e-12


@pytest.mark.parametrize("eps", [0.1, 0.5])
def test_damped_logistic_noise_cdf(eps):
    u = torch.rand(200_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    noise = (torch.log(u + eps) - torch.log(1 - u + eps)).numpy()
    for x in (-0.8, -0.2, 0.0, 0.5, 1.0):
        cdf = np.clip((math.exp(x) * (1 + eps) - eps) / (1 + math.exp(x)), 0, 1)
        assert abs((noise <= x).mean() - cdf) < 0.005
    bound = math.log((1 + eps) / eps)
    assert noise.max() <= bound + 1e-12
    assert noise.min() >= -bound - 1e-12


def test_errata_gate_saturates_at_init_logit_3_with_eps_half():
    # spec errata: with e = 0.5 every gate is exactly 1 once λ >= ~3.09; at λ = 3, P(m=1) ≈ 0.966
    u = torch.rand(200_000, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert bool((hard_concrete(torch.full_like(u, 3.1), u, eps=0.5) == 1).all())
    p1 = float((hard_concrete(torch.full_like(u, 3.0), u, eps=0.5) == 1).double().mean())
    assert abs(p1 - 0.966) < 0.003


def test_deterministic_gate_dense_limit_and_monotone():
    lam = torch.linspace(-10, 10, 101, dtype=torch.float64)
    m = deterministic_gate(lam)
    assert bool((m[lam >= 2.0] == 1).all())
    assert bool((m[lam <= -2.0] == 0).all())
    assert bool((m.diff() >= 0).all())
    assert ZETA > 1
    assert GAMMA < 0


def test_regularizer_forms():
    a = torch.tensor([1.0, -3.0], dtype=torch.float64)
    b = torch.tensor([2.0, 0.0, -1.0, 5.0], dtype=torch.float64)
    assert float(regularizer([a, b], "l1")) == pytest.approx(((4 / 2) + (8 / 4)) / 2)
    # the official "L2" is the Euclidean norm over the width (lamb.norm(2) / len(lamb)), not the
    # squared norm: sqrt(10) / 2 and sqrt(30) / 4
    assert float(regularizer([a, b], "l2")) == pytest.approx((10**0.5 / 2 + 30**0.5 / 4) / 2)
    s = lambda t: torch.sigmoid(0.4 * t + 1)  # noqa: E731
    expect = (float(s(a).sum()) / 2 + float(s(b).sum()) / 4) / 2
    assert float(regularizer([a, b], "bounded_l1")) == pytest.approx(expect)
    expect2 = (float(s(a).norm()) / 2 + float(s(b).norm()) / 4) / 2
    assert float(regularizer([a, b], "bounded_l2")) == pytest.approx(expect2)
    # L0 sums per module (not divided by n_l)
    l0 = float(regularizer([b], "l0"))
    assert l0 == pytest.approx(float(torch.sigmoid(b + TEMPERATURE * math.log(11)).sum()))
    with pytest.raises(ValueError, match="reg"):
        regularizer([a], "l3")
    with pytest.raises(ValueError, match="logits"):
        regularizer([], "l1")


def test_l2_regularizer_gradient_is_the_norm_gradient():
    # d/dλ (||λ||_2 / n) = λ / (n ||λ||_2): bounded by 1/n whatever the logits' scale (the squared
    # form's 2λ/n grows with λ and was ~50x too strong at the initial logit 3 on a 64-wide module)
    lam = torch.full((64,), 3.0, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(regularizer([lam], "l2"), [lam])
    assert torch.allclose(g, lam.detach() / (64 * lam.detach().norm()))
    assert float(g.abs().max()) <= 1 / 64 + 1e-12
    zero = torch.zeros(8, dtype=torch.float64, requires_grad=True)
    (g0,) = torch.autograd.grad(regularizer([zero], "l2"), [zero])
    assert torch.isfinite(g0).all()
