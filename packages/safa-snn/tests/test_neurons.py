import math

import numpy as np
import pytest
import torch

from iclr26.safa_snn import LIF, SparsityAwareLIF, lif_reference, set_phase, spike_fn
from iclr26.safa_snn.models import SpikingMLP
from iclr26.safa_snn.neurons import (
    compiled_lif_steps,
    lif_backward_steps,
    lif_forward_steps,
    surrogate_grad,
)


def _train(x_value, T=12, tau=0.5, theta=1.0):
    lif = LIF(1, tau=tau, v_threshold=theta)
    return lif(torch.full((1, T, 1), x_value))[0, :, 0].tolist()


def test_lif_closed_form_spike_trains():
    # Spec test 1: strict inequality, hard reset, no input scaling.
    assert _train(1.0) == [0, 1] * 6
    assert _train(0.6) == [0, 0, 1] * 4
    assert _train(0.5) == [0] * 12


def test_lif_first_spike_time_matches_analytic():
    rng = np.random.default_rng(0)
    for _ in range(50):
        tau = float(rng.uniform(0.2, 0.9))
        x = float(rng.uniform(0.05, 2.0))
        s = _train(x, T=30, tau=tau)
        # analytic t* = min{t : x (1 − τ^t)/(1 − τ) > θ}
        t_star = next((t for t in range(1, 31) if x * (1 - tau**t) / (1 - tau) > 1.0 + 1e-5), None)
        if t_star is None or abs(x * (1 - tau**t_star) / (1 - tau) - 1.0) < 1e-4:
            continue  # avoid float ties at the threshold
        assert s.index(1.0) + 1 == t_star
        assert s[: t_star - 1] == [0.0] * (t_star - 1)


@pytest.mark.parametrize("spike", ["atan", "triangle"])
@pytest.mark.parametrize("detach_reset", [False, True])
def test_fused_lif_matches_autograd_loop(spike, detach_reset):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(5, 7, 4, 3, generator=g) + 0.5).requires_grad_(True)
    lif = LIF(4, spike=spike, detach_reset=detach_reset)
    with torch.no_grad():
        lif.threshold.copy_(torch.tensor([0.4, 0.8, 1.0, 1.3]))
    w = torch.randn(5, 7, 4, 3, generator=g)
    (lif(x) * w).sum().backward()
    gx, gt = x.grad.clone(), lif.threshold.grad.clone()
    x.grad = None
    th = lif.threshold.detach().clone().reshape(4, 1).requires_grad_(True)
    out = lif_reference(x, th, spike=spike, detach_reset=detach_reset)
    assert torch.equal(out, lif(x).detach())
    (out * w).sum().backward()
    torch.testing.assert_close(gx, x.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gt, th.grad.reshape(4), rtol=1e-5, atol=1e-5)


def test_zo_surrogate_expectation():
    # Spec test 3: E[ĝ(u)] = φ(u/δ)/δ, zero far from the threshold.
    delta, n = 0.5, 20000
    u = torch.linspace(-2, 2, 41)
    g = torch.Generator().manual_seed(1)
    draws = surrogate_grad(
        u.expand(n, -1).contiguous(), "zo", delta=delta, n_samples=1, generator=g
    )
    mean, se = draws.mean(0), draws.std(0) / math.sqrt(n)
    expected = torch.exp(-0.5 * (u / delta) ** 2) / (delta * math.sqrt(2 * math.pi))
    assert torch.all((mean - expected).abs() <= 3 * se + 1e-3)
    assert mean[20] == pytest.approx(0.798, abs=0.02)
    # through autograd, with b = 5 samples per call
    uu = torch.full((n,), 0.3, requires_grad=True)
    spike_fn(uu, "zo", delta, 5, g).sum().backward()
    exp03 = math.exp(-0.5 * (0.3 / delta) ** 2) / (delta * math.sqrt(2 * math.pi))
    assert float(uu.grad.mean()) == pytest.approx(
        exp03, abs=4 * float(uu.grad.std()) / math.sqrt(n)
    )
    far = torch.full((1000,), 10.0, requires_grad=True)
    spike_fn(far, "zo", delta, 5, g).sum().backward()
    assert float(far.grad.abs().max()) == 0.0


def test_zo_backward_uses_generator():
    u = torch.randn(200)
    a = surrogate_grad(u, "zo", generator=torch.Generator().manual_seed(3))
    b = surrogate_grad(u, "zo", generator=torch.Generator().manual_seed(3))
    c = surrogate_grad(u, "zo", generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def _layer(**kw):
    lif = SparsityAwareLIF(6, mask_seed=0, **kw)
    lif.record_base_rate(torch.full((6,), 0.2))
    return lif


def test_threshold_rule_arithmetic():
    # Spec test 5: one adapt forward moves θ by −β Δr (unmasked), −γ Δr (masked).
    x = torch.rand(8, 4, 6) * 2.5
    for homeostatic, sign in ((False, -1.0), (True, 1.0)):
        lif = _layer(homeostatic=homeostatic)
        set_phase(lif, "adapt")
        before = lif.threshold.detach().clone()
        out = lif(x)
        rate = out.mean(dim=(0, 1))
        coef = torch.where(lif.mask, torch.tensor(0.01), torch.tensor(0.1))
        torch.testing.assert_close(lif.threshold.detach() - before, sign * coef * (rate - 0.2))
        assert (rate != 0.2).any()


def test_frozen_and_legacy_phases():
    x = torch.rand(8, 4, 6) * 2.5
    lif = _layer()
    set_phase(lif, "frozen")
    lif.eval()
    before = lif.threshold.detach().clone()
    lif(x)
    assert torch.equal(lif.threshold.detach(), before)
    legacy = _layer(legacy_update_on_eval=True)
    set_phase(legacy, "frozen")
    legacy.eval()
    legacy(x)
    assert not torch.equal(legacy.threshold.detach(), before)
    off = _layer(regulate=False)
    set_phase(off, "adapt")
    off(x)
    assert torch.equal(off.threshold.detach(), before)


def test_record_phase_averages_rates():
    lif = SparsityAwareLIF(3, mask_seed=0)
    set_phase(lif, "record")
    a, b = torch.rand(4, 2, 3) * 3, torch.rand(12, 2, 3) * 3
    ra, rb = lif(a).mean((0, 1)), lif(b).mean((0, 1))
    torch.testing.assert_close(lif.base_rate, (4 * ra + 12 * rb) / 16)
    assert lif.threshold.grad is None


@pytest.mark.parametrize("eta", [0.0, 0.3, 0.5, 1.0])
def test_mask_size_and_determinism(eta):
    a = SparsityAwareLIF(37, eta=eta, mask_seed=5)
    b = SparsityAwareLIF(37, eta=eta, mask_seed=5)
    assert int(a.mask.sum()) == math.floor(eta * 37)
    assert torch.equal(a.mask, b.mask)
    if 0 < eta < 1:
        masks = {tuple(SparsityAwareLIF(37, eta=eta, mask_seed=s).mask.tolist()) for s in range(5)}
        assert len(masks) > 1


def test_gradient_reaches_threshold_only_in_base_phase():
    # Spec test 13
    x = (torch.rand(4, 3, 5) * 2).requires_grad_(True)
    for phase, has_grad in (("base", True), ("adapt", False), ("frozen", False), ("record", False)):
        lif = SparsityAwareLIF(5, spike="atan", mask_seed=0)
        set_phase(lif, phase)
        lif(x).sum().backward()
        assert (lif.threshold.grad is not None) == has_grad, phase
        if has_grad:
            assert lif.threshold.grad.abs().sum() > 0


def test_peer_equivalence_spikingjelly():
    sj = pytest.importorskip("spikingjelly.activation_based.neuron")
    surrogate = pytest.importorskip("spikingjelly.activation_based.surrogate")
    g = torch.Generator().manual_seed(0)
    x = torch.rand(9, 16, 10, generator=g) * 1.3  # [T, B, C]: continuous values, no exact ties
    node = sj.LIFNode(
        tau=2.0, decay_input=False, v_threshold=1.0, v_reset=0.0, step_mode="m",
        surrogate_function=surrogate.ATan(), detach_reset=False,
    )  # fmt: skip
    xs = x.clone().requires_grad_(True)
    ref = node(xs)
    (ref * torch.arange(9.0).reshape(9, 1, 1)).sum().backward()
    xo = x.transpose(0, 1).clone().requires_grad_(True)
    ours = LIF(10, spike="atan")(xo)
    (ours * torch.arange(9.0).reshape(1, 9, 1)).sum().backward()
    assert torch.equal(ours.transpose(0, 1), ref.detach())
    torch.testing.assert_close(xo.grad.transpose(0, 1), xs.grad, rtol=1e-5, atol=1e-6)


def test_peer_equivalence_snntorch():
    snntorch = pytest.importorskip("snntorch")
    from snntorch import surrogate

    g = torch.Generator().manual_seed(0)
    x = torch.rand(16, 9, 10, generator=g) * 1.3  # [B, T, C]
    leaky = snntorch.Leaky(beta=0.5, threshold=1.0, reset_mechanism="zero", reset_delay=False,
                           spike_grad=surrogate.atan())  # fmt: skip
    mem = torch.zeros(16, 10)
    spikes = []
    for t in range(9):
        s, mem = leaky(x[:, t], mem)
        spikes.append(s)
    assert torch.equal(LIF(10, spike="atan")(x).detach(), torch.stack(spikes, 1).detach())


def test_bad_inputs_neurons():
    with pytest.raises(ValueError, match="spike"):
        LIF(3, spike="sigmoid")
    with pytest.raises(ValueError, match="num_channels"):
        LIF(0)
    with pytest.raises(ValueError, match="tau"):
        LIF(3, tau=1.5)
    with pytest.raises(ValueError, match="x must be"):
        LIF(3)(torch.rand(2, 4, 5))
    with pytest.raises(ValueError, match="T >= 1"):
        LIF(3)(torch.rand(2, 0, 3))
    with pytest.raises(TypeError, match="floating-point"):
        LIF(3)(torch.ones(2, 4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="phase"):
        set_phase(SparsityAwareLIF(3), "incremental")
    with pytest.raises(ValueError, match="eta"):
        SparsityAwareLIF(3, eta=1.5)
    with pytest.raises(TypeError, match="u must be"):
        spike_fn(torch.ones(3, dtype=torch.long))


@pytest.mark.parametrize("detach_reset", [False, True])
def test_pure_step_functions_match_fused_loop(detach_reset):
    # the compile-friendly pure loops compute the same spikes and gradients as the in-place ones
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(6, 5, 4, generator=g) + 0.6).requires_grad_(True)
    lif = LIF(4, spike="atan", detach_reset=detach_reset)
    with torch.no_grad():
        lif.threshold.copy_(torch.tensor([0.5, 0.9, 1.0, 1.4]))
    w = torch.randn(6, 5, 4, generator=g)
    (lif(x) * w).sum().backward()
    theta = lif.threshold.detach().reshape(1, 4)
    spikes, pre = lif_forward_steps(x.detach(), theta, 0.5)
    assert torch.equal(spikes, lif(x).detach())
    sg = surrogate_grad(pre - theta.unsqueeze(1), "atan")
    gx, gth = lif_backward_steps(w, sg, spikes, pre, 0.5, detach_reset)
    torch.testing.assert_close(gx, x.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gth.sum(0), lif.threshold.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_compiled_loop_through_dynamo_eager_backend():
    # the compiled path's plumbing (autograd function + kernels), traced by dynamo without inductor
    fwd, bwd = compiled_lif_steps("eager")
    g = torch.Generator().manual_seed(2)
    x = (torch.rand(4, 6, 3, generator=g) * 1.5).requires_grad_(True)
    a, b = LIF(3, spike="atan"), LIF(3, spike="atan", loop="compiled")
    b.threshold.data.copy_(a.threshold.data)
    assert torch.equal(fwd(x.detach(), a.threshold.detach(), 0.5)[0], a(x).detach())
    a(x).square().sum().backward()
    ga = x.grad.clone()
    x.grad = None
    b(x).square().sum().backward()
    torch.testing.assert_close(x.grad, ga, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(b.threshold.grad, a.threshold.grad, rtol=1e-5, atol=1e-5)
    assert bwd is compiled_lif_steps("eager")[1]  # cached


def test_spiking_model_traces_without_graph_breaks():
    # the cause of the earlier compile failure: a Python float spike count (a host sync) and
    # data-dependent checks in the loop; counts are tensors now and the model is one graph
    import torch._dynamo as dynamo

    lif = LIF(5, spike="atan")
    lif(torch.rand(2, 3, 5) * 2)
    assert isinstance(lif.spike_count, torch.Tensor)
    assert lif.spike_count.ndim == 0
    model = SpikingMLP(16, hidden=(32,), feat_dim=8, T=4, num_classes=3, spike="atan")
    explained = dynamo.explain(model)(torch.rand(8, 16))
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


@pytest.mark.slow
def test_inductor_compiled_loop_matches_fused():
    x = (torch.rand(16, 8, 32) * 1.2).requires_grad_(True)
    a, b = LIF(32, spike="atan"), LIF(32, spike="atan", loop="compiled")
    oa, ob = a(x), b(x)
    assert torch.equal(oa, ob)
    (ga,) = torch.autograd.grad(oa.square().sum(), x)
    (gb,) = torch.autograd.grad(ob.square().sum(), x)
    torch.testing.assert_close(ga, gb, rtol=1e-5, atol=1e-6)


def test_fused_localzo_bptt_draws_like_the_autograd_loop():
    # the fused backward draws LocalZO samples step by step from the last step to the first, the
    # order autograd runs the loop's spike backwards in: with equal seeds the gradients agree,
    # so seeded results do not depend on which implementation ran
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(4, 6, 5, generator=g) + 0.8).requires_grad_(True)
    w = torch.randn(4, 6, 5, generator=g)
    lif = LIF(5, spike="zo", generator=torch.Generator().manual_seed(11))
    (lif(x) * w).sum().backward()
    gx, gt = x.grad.clone(), lif.threshold.grad.clone()
    x.grad = None
    th = torch.ones(5, requires_grad=True)
    out = lif_reference(x, th, spike="zo", generator=torch.Generator().manual_seed(11))
    (out * w).sum().backward()
    torch.testing.assert_close(gx, x.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gt, th.grad, rtol=1e-5, atol=1e-5)
    assert gx.abs().sum() > 0


@pytest.mark.parametrize("detach_reset", [False, True])
@pytest.mark.parametrize("tau", [0.3, 0.5, 0.85])
def test_fused_recurrence_matches_reference_on_conv_shapes(tau, detach_reset):
    # the fused loop (addcmul forward, linear-recurrence BPTT) on [B, T, C, H, W] with a leak
    # that is not a power of two: spikes equal the plain loop's, gradients agree to rounding,
    # also for an expanded (stride-0) incoming gradient and a threshold without gradient
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(3, 9, 4, 5, 5, generator=g) * 0.8 + 0.7).requires_grad_(True)
    lif = LIF(4, tau=tau, spike="atan", detach_reset=detach_reset)
    with torch.no_grad():
        lif.threshold.copy_(torch.tensor([0.6, 0.9, 1.0, 1.2]))
    th = lif.threshold.detach().clone().reshape(4, 1, 1).requires_grad_(True)
    ref = lif_reference(x, th, tau=tau, spike="atan", detach_reset=detach_reset)
    out = lif(x)
    assert torch.equal(out, ref)
    assert 0.05 < float(out.detach().mean()) < 0.95
    w = torch.randn(3, 9, 4, 5, 5, generator=g)
    (gx,) = torch.autograd.grad((out * w).sum(), x, retain_graph=True)
    gx_ref, gth_ref = torch.autograd.grad((ref * w).sum(), (x, th))
    torch.testing.assert_close(gx, gx_ref, rtol=1e-5, atol=1e-6)
    (out * w).sum().backward()
    torch.testing.assert_close(lif.threshold.grad, gth_ref.reshape(4), rtol=1e-5, atol=1e-5)
    (g1,) = torch.autograd.grad(lif(x).sum(), x)  # incoming gradient: expanded ones
    (g2,) = torch.autograd.grad(lif_reference(x, th, tau=tau, spike="atan",
                                              detach_reset=detach_reset).sum(), x)  # fmt: skip
    torch.testing.assert_close(g1, g2, rtol=1e-5, atol=1e-6)
    frozen = LIF(4, tau=tau, spike="atan", learn_threshold=False, detach_reset=detach_reset)
    frozen.threshold.data.copy_(lif.threshold.data)
    (g3,) = torch.autograd.grad((frozen(x) * w).sum(), x)
    torch.testing.assert_close(g3, gx_ref, rtol=1e-5, atol=1e-6)
    assert frozen.threshold.grad is None
