"""Stateless samplers vs diffusers' own step, and checkpointed gradients vs BPTT."""

import pytest
import torch
from diffusers import DDIMScheduler, EulerDiscreteScheduler, FlowMatchEulerDiscreteScheduler

from iclr26.ecodiff.adjoint import SavedTensorMeter, trajectory_grad
from iclr26.ecodiff.masking import MaskedModel
from iclr26.ecodiff.sampler import diffusers_model_fn, from_scheduler
from iclr26.ecodiff.units import find_prunable_units

SCHEDULERS = {
    "ddim": lambda: DDIMScheduler(clip_sample=False),
    "ddim-clip-v": lambda: DDIMScheduler(prediction_type="v_prediction", clip_sample=True),
    "euler": lambda: EulerDiscreteScheduler(),
    "flow": lambda: FlowMatchEulerDiscreteScheduler(shift=3.0),
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_markov_step_equals_diffusers_scheduler(name):
    sch = SCHEDULERS[name]()
    sampler = from_scheduler(sch, 6)
    sch.set_timesteps(6)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 1, 4, 4, generator=g, dtype=torch.float64)
    zz = z.clone()
    outs = [torch.randn(2, 1, 4, 4, generator=g, dtype=torch.float64) for _ in range(6)]
    for k, t in enumerate(sch.timesteps):
        scale = getattr(sch, "scale_model_input", lambda x, t: x)
        ref_in = scale(zz, t)
        assert torch.allclose(sampler.model_input(zz, k), ref_in, atol=1e-12)
        assert float(t) == pytest.approx(sampler.timesteps[k])
        zz = sch.step(outs[k], t, zz).prev_sample
        z = sampler.update(z, outs[k], k)
        assert torch.allclose(z, zz.to(z.dtype), atol=1e-5), k


def test_stateful_schedulers_are_refused():
    from diffusers import DPMSolverMultistepScheduler

    with pytest.raises(ValueError, match="not a stateless"):
        from_scheduler(DPMSolverMultistepScheduler(), 5)
    with pytest.raises(ValueError, match="stochastic"):
        from_scheduler(FlowMatchEulerDiscreteScheduler(stochastic_sampling=True), 5)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", ["ddim", "euler", "flow"])
@pytest.mark.parametrize("gate", ["hard_concrete", "sigmoid"])
def test_checkpointed_gradient_equals_bptt(dit, name, gate):
    units = find_prunable_units(dit)
    for p in dit.parameters():
        p.requires_grad_(False)
    sampler = from_scheduler(SCHEDULERS[name](), 4)
    fn = diffusers_model_fn(dit)
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2, 1, 8, 8, generator=g, dtype=torch.float64) * sampler.init_noise_sigma
    y = torch.tensor([2, 9])
    target = torch.randn(2, 1, 8, 8, generator=g, dtype=torch.float64)
    masked = MaskedModel(dit, units, gate=gate, init_logit=0.3)
    params = list(masked.parameters())
    with masked:
        masked.resample_noise(torch.Generator().manual_seed(5))
        res = {}
        for ck in (True, False):
            res[ck] = trajectory_grad(lambda zz, k: sampler.step(fn, zz, k, y), z, 4,
                                      lambda zz: (zz - target).pow(2).mean(), params,
                                      checkpoint=ck)  # fmt: skip
    (l1, g1, z1), (l2, g2, z2) = res[True], res[False]
    assert torch.equal(z1, z2)
    assert float(l1) == float(l2)
    assert any(float(g.abs().max()) > 0 for g in g1)
    for a, b in zip(g1, g2, strict=True):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-12)


def test_fresh_noise_per_call_breaks_exactness(dit):
    """Pitfall 1 of the spec: with the official per-call noise the recomputed steps see other
    masks, so the checkpointed gradient is not the BPTT gradient."""
    units = find_prunable_units(dit)
    for p in dit.parameters():
        p.requires_grad_(False)
    sampler = from_scheduler(SCHEDULERS["ddim"](), 3)
    fn = diffusers_model_fn(dit)
    z = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.tensor([1, 2])
    masked = MaskedModel(dit, units, init_logit=0.0, noise="call")
    grads = {}
    with masked:
        for ck in (True, False):
            masked.resample_noise(torch.Generator().manual_seed(5))
            grads[ck] = trajectory_grad(lambda zz, k: sampler.step(fn, zz, k, y), z, 3,
                                        lambda zz: zz.pow(2).mean(), list(masked.parameters()),
                                        checkpoint=ck)[1]  # fmt: skip
    assert not all(torch.allclose(a, b) for a, b in zip(grads[True], grads[False], strict=True))


def test_saved_memory_is_constant_in_steps_with_checkpointing(dit):
    units = find_prunable_units(dit)
    for p in dit.parameters():
        p.requires_grad_(False)
    fn = diffusers_model_fn(dit)
    z = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    y = torch.tensor([1, 2])
    masked = MaskedModel(dit, units)
    peaks = {}
    with masked:
        masked.resample_noise(torch.Generator().manual_seed(0))
        for T in (5, 40):
            sampler = from_scheduler(SCHEDULERS["ddim"](), T)
            for ck in (True, False):
                meter = SavedTensorMeter()
                trajectory_grad(lambda zz, k, s=sampler: s.step(fn, zz, k, y), z, T,
                                lambda zz: zz.sum(), list(masked.parameters()), checkpoint=ck,
                                meter=meter)  # fmt: skip
                peaks[(T, ck)] = meter.peak
    assert peaks[(40, True)] / peaks[(5, True)] < 1.5
    assert peaks[(40, False)] / peaks[(5, False)] > 5


def test_bf16_model_keeps_float32_logits_with_gradients(make_dit):
    model = make_dit(dtype=torch.bfloat16)
    for p in model.parameters():
        p.requires_grad_(False)
    units = find_prunable_units(model)
    masked = MaskedModel(model, units, init_logit=1.0)
    assert all(p.dtype == torch.float32 for p in masked.parameters())
    sampler = from_scheduler(SCHEDULERS["ddim"](), 3)
    fn = diffusers_model_fn(model)
    z = torch.randn(2, 1, 8, 8, dtype=torch.bfloat16)
    with masked:
        _, grads, z0 = trajectory_grad(lambda zz, k: sampler.step(fn, zz, k, torch.tensor([1, 2])),
                                       z, 3, lambda zz: zz.float().pow(2).mean(),
                                       list(masked.parameters()))  # fmt: skip
    assert z0.dtype == torch.bfloat16
    assert all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)
    assert any(float(g.abs().sum()) > 0 for g in grads)
