"""Loss, ratio, clipping, credit and advantages from the math (spec §5.5)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.maskgrpo import (
    MaskGRPOConfig,
    clipped_surrogate,
    gmpo_surrogate,
    group_advantages,
    k3_kl,
    masked_token_logps,
    rank_rewards,
)
from iclr26.maskgrpo.trainer import build_estimator_inputs


class FixedLogits(torch.nn.Module):
    """A 'policy' whose logits are a leaf parameter, so d loss / d logits is inspectable."""

    def __init__(self, b, t, v, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.logits = torch.nn.Parameter(torch.randn(b, t, v, generator=g, dtype=torch.float64))

    def forward(self, ids):
        return self.logits + 0.0 * ids[..., None]


def _batch(b=6, p=4, n=6, v=13, seed=0):
    g = torch.Generator().manual_seed(seed)
    seqs = torch.randint(0, 10, (b, p + n), generator=g)
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    return seqs, adv, p, v


def test_ratio_is_one_and_gradient_is_the_policy_gradient():
    seqs, adv, p, v = _batch()
    pol = FixedLogits(*seqs.shape, v)
    cfg = MaskGRPOConfig(num_iterations=4)
    noised, mask = build_estimator_inputs(seqs, p, 12, cfg, 0, 1)
    logps = masked_token_logps(pol, noised, seqs, p)
    old = logps.detach().clone()
    loss, stats = clipped_surrogate(logps, old, adv, mask, epsilon=0.2)
    assert stats["ratio_mean"] == 1.0
    assert stats["clip_frac"] == 0.0
    (g_loss,) = torch.autograd.grad(loss, pol.logits)
    # at θ = θ_old the gradient is −(1/Σ|K|) Σ_i Σ_{k∈K_i} A_i ∇l_θ(k)
    logps2 = masked_token_logps(pol, noised, seqs, p)
    pg = -(adv[:, None] * logps2 * mask).sum() / mask.sum()
    (g_pg,) = torch.autograd.grad(pg, pol.logits)
    torch.testing.assert_close(g_loss, g_pg, rtol=1e-12, atol=1e-14)
    assert g_loss.abs().sum() > 0


@pytest.mark.parametrize("estimator", ["maskgrpo", "uniform"])
def test_masked_only_credit(estimator):
    seqs, adv, p, v = _batch(b=8, n=8)
    pol = FixedLogits(*seqs.shape, v)
    cfg = MaskGRPOConfig(estimator=estimator, num_iterations=4)
    noised, mask = build_estimator_inputs(seqs, p, 12, cfg, 0, 0)
    assert mask.any()
    assert (~mask).any()
    logps = masked_token_logps(pol, noised, seqs, p)
    old = logps.detach() + 0.05 * torch.randn(
        logps.shape, dtype=logps.dtype, generator=torch.Generator().manual_seed(1)
    )
    ref = logps.detach() - 0.1
    loss, _ = clipped_surrogate(logps, old, adv, mask, ref_logps=ref, beta=0.04)
    (g,) = torch.autograd.grad(loss, pol.logits, retain_graph=True)
    gn = g.abs().sum(-1)
    assert (gn[:, :p] == 0).all()  # prompt positions: exactly zero
    assert (gn[:, p:][~mask] == 0).all()  # visible completion positions: exactly zero
    assert (gn[:, p:][mask] > 0).all()
    # the released "stacked" credit (and a d1-style all-token loss) does touch visible tokens
    loss_all, _ = clipped_surrogate(
        logps, old, adv, torch.ones_like(mask), ref_logps=ref, beta=0.04
    )
    (g_all,) = torch.autograd.grad(loss_all, pol.logits)
    assert (g_all.abs().sum(-1)[:, p:][~mask] > 0).all()


def test_clipping_kills_gradient_outside_the_trust_region():
    b, n = 4, 5
    logps = torch.zeros(b, n, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    # rows 0,1: ratio outside the region on the side that binds → zero gradient
    # rows 2,3: ratio outside on the side that does not bind → gradient A·ρ
    old = torch.tensor([-0.5, 0.5, 0.5, -0.5], dtype=torch.float64)[:, None].expand(b, n)
    mask = torch.ones(b, n, dtype=torch.bool)
    loss, stats = clipped_surrogate(logps, old, adv, mask, epsilon=0.2)
    (g,) = torch.autograd.grad(loss, logps)
    assert (g[:2] == 0).all()
    ratio = torch.exp(-old[2:])
    torch.testing.assert_close(g[2:], -(adv[2:, None] * ratio) / (b * n))
    assert stats["clip_frac"] == pytest.approx(0.5)


def test_asymmetric_clip_epsilon_high():
    logps = torch.zeros(1, 1, dtype=torch.float64, requires_grad=True)
    old = torch.full((1, 1), -0.25, dtype=torch.float64)  # ratio e^0.25 ≈ 1.28
    adv, mask = torch.ones(1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool)
    (g1,) = torch.autograd.grad(clipped_surrogate(logps, old, adv, mask, epsilon=0.2)[0], logps)
    (g2,) = torch.autograd.grad(
        clipped_surrogate(logps, old, adv, mask, epsilon=0.2, epsilon_high=0.3)[0], logps
    )
    assert g1.item() == 0
    assert g2.item() < 0


def test_gmpo_sign_aware_clip():
    logps = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    old = torch.tensor([[-0.5], [0.5]], dtype=torch.float64).expand(2, 3)  # s·Δ = 0.5 > ε
    loss, stats = gmpo_surrogate(logps, old, adv, torch.ones(2, 3, dtype=torch.bool), epsilon=0.2)
    (g,) = torch.autograd.grad(loss, logps)
    assert (g == 0).all()
    assert stats["clip_frac"] == 1.0
    old2 = torch.tensor([[0.5], [-0.5]], dtype=torch.float64).expand(2, 3)  # s·Δ = −0.5: unclipped
    loss2, _ = gmpo_surrogate(logps, old2, adv, torch.ones(2, 3, dtype=torch.bool), epsilon=0.2)
    (g2,) = torch.autograd.grad(loss2, logps)
    # d/dl of −mean_i A_i exp(mean_k Δ_ik) = −A_i exp(mean Δ_i)/(n·B)
    want = -(adv * torch.exp(torch.tensor([-0.5, 0.5], dtype=torch.float64)))[:, None] / 6
    torch.testing.assert_close(g2, want.expand(2, 3))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-20, 0, allow_nan=False), min_size=1, max_size=12),
    st.lists(st.floats(-20, 0, allow_nan=False), min_size=1, max_size=12),
)
def test_k3_kl_nonnegative_zero_iff_equal(a, b):
    n = min(len(a), len(b))
    x = torch.tensor(a[:n], dtype=torch.float64)
    y = torch.tensor(b[:n], dtype=torch.float64)
    kl = k3_kl(x, y)
    assert (kl >= 0).all()
    assert (kl[x == y] == 0).all()
    assert (kl[(x - y).abs() > 1e-6] > 0).all()
    assert (k3_kl(x, x) == 0).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(1, 5), st.data())
def test_group_advantages_properties(g, p, data):
    vals = data.draw(
        st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.5]), min_size=g * p, max_size=g * p)
    )
    r = torch.tensor(vals, dtype=torch.float64)
    for scale in ("group", "none", "rank"):
        a = group_advantages(r, g, scale).view(p, g)
        assert torch.isfinite(a).all()
        assert a.sum(1).abs().max() < 1e-9  # zero mean per group
        const = (r.view(p, g) == r.view(p, g)[:, :1]).all(1)
        assert (a[const] == 0).all()  # zero-std groups: exactly 0
    a = group_advantages(r, g, "group").view(p, g)
    rv = r.view(p, g)
    want = (rv - rv.mean(1, keepdim=True)) / (rv.std(1, keepdim=True) + 1e-5)
    torch.testing.assert_close(a[~const], want[~const])


def test_rank_rewards_best_one_worst_zero_and_ties():
    r = torch.tensor([0.3, 0.9, 0.1, 0.5, 2.0, 2.0, 2.0, 2.0])
    rr = rank_rewards(r, 4)
    torch.testing.assert_close(rr[:4], torch.tensor([1 / 3, 1.0, 0.0, 2 / 3]))
    assert (rr[4:] == rr[4]).all()  # ties share the mean rank
    assert (group_advantages(r, 4, "rank")[4:] == 0).all()
    torch.testing.assert_close(
        rank_rewards(torch.tensor([1.0, 1.0, 0.0]), 3), torch.tensor([0.75, 0.75, 0.0])
    )
