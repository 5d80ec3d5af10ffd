"""Every function in the README's API table refuses bad input with a named error."""

import pytest
import torch
from diffusers import DDIMScheduler
from torch import nn

from iclr26.ecodiff import (
    EcoDiffConfig,
    MaskedModel,
    MaskScores,
    diffusers_model_fn,
    find_prunable_units,
    from_scheduler,
    learn_masks,
    linear_pair_unit,
    load_toy,
    magnitude_scores,
    materialize,
    random_scores,
    regularizer,
    select,
    trajectory_grad,
)
from iclr26.ecodiff.experiments import method_check
from iclr26.ecodiff.recover import denoising_loss, lora_recover
from iclr26.ecodiff.toy import save_toy_unet, train_toy_unet


@pytest.fixture(scope="module")
def model():
    from iclr26.ecodiff.toy import tiny_dit

    return tiny_dit().eval()


def _cases(model):
    units = find_prunable_units(model)
    scores = random_scores(units)
    sampler = from_scheduler(DDIMScheduler(), 2)
    good_keep = {u.key: torch.ones(u.size, dtype=torch.bool) for u in units}
    int_keep = {**good_keep, units[0].key: torch.ones(units[0].size, dtype=torch.int64)}
    short_keep = {**good_keep, units[0].key: torch.ones(1, dtype=torch.bool)}
    p = torch.zeros(3, requires_grad=True)
    nan_logits = {**scores.logits, units[0].key: torch.full((units[0].size,), float("nan"))}
    return [
        ("find_prunable_units", lambda: find_prunable_units("model"), TypeError, "model"),
        (
            "find_prunable_units",
            lambda: find_prunable_units(model, kinds=("conv",)),
            ValueError,
            "kinds",
        ),
        (
            "find_prunable_units",
            lambda: find_prunable_units(model, include="("),
            ValueError,
            "include",
        ),
        (
            "find_prunable_units",
            lambda: find_prunable_units(model, include="nothing"),
            ValueError,
            "no prunable",
        ),
        (
            "linear_pair_unit",
            lambda: linear_pair_unit(nn.Sequential(nn.Linear(2, 3), nn.Linear(4, 1)), "0", "1"),
            ValueError,
            "consumer",
        ),
        (
            "linear_pair_unit",
            lambda: linear_pair_unit(nn.Sequential(nn.ReLU(), nn.Linear(4, 1)), "0", "1"),
            TypeError,
            "nn.Linear",
        ),
        ("MaskedModel", lambda: MaskedModel(model, units, gate="relu"), ValueError, "gate"),
        (
            "MaskedModel",
            lambda: MaskedModel(model, units, init_logit=float("nan")),
            ValueError,
            "init_logit",
        ),
        ("MaskedModel", lambda: MaskedModel(model, units, noise_eps=-1.0), ValueError, "noise_eps"),
        ("MaskedModel", lambda: MaskedModel(model, units, noise="step"), ValueError, "noise"),
        ("MaskedModel", lambda: MaskedModel(model, []), ValueError, "units"),
        (
            "MaskedModel.use",
            lambda: MaskedModel(model, units).use("hard").__enter__(),
            ValueError,
            "mode",
        ),
        (
            "MaskedModel.use",
            lambda: MaskedModel(model, units).use("keep", int_keep).__enter__(),
            TypeError,
            "bool",
        ),
        ("from_scheduler", lambda: from_scheduler(DDIMScheduler(), 0), ValueError, "num_steps"),
        ("from_scheduler", lambda: from_scheduler(object(), 5), ValueError, "stateless"),
        (
            "diffusers_model_fn",
            lambda: diffusers_model_fn(model, guidance_scale=2.0),
            ValueError,
            "null_cond",
        ),
        ("diffusers_model_fn", lambda: diffusers_model_fn(lambda x: x), TypeError, "model"),
        (
            "trajectory_grad",
            lambda: trajectory_grad(
                lambda z, k: z, torch.zeros(2, dtype=torch.long), 2, torch.sum, [p]
            ),
            TypeError,
            "z_T",
        ),
        (
            "trajectory_grad",
            lambda: trajectory_grad(
                lambda z, k: z, torch.full((2,), float("inf")), 2, torch.sum, [p]
            ),
            ValueError,
            "z_T",
        ),
        (
            "trajectory_grad",
            lambda: trajectory_grad(lambda z, k: z, torch.zeros(2), 0, torch.sum, [p]),
            ValueError,
            "num_steps",
        ),
        (
            "trajectory_grad",
            lambda: trajectory_grad(lambda z, k: z, torch.zeros(2), 2, torch.sum, [torch.zeros(2)]),
            ValueError,
            "params",
        ),
        ("EcoDiffConfig", lambda: EcoDiffConfig(epochs=1.5), TypeError, "epochs"),
        ("EcoDiffConfig", lambda: EcoDiffConfig(lr_attn=0.0), ValueError, "lr_attn"),
        ("EcoDiffConfig", lambda: EcoDiffConfig(beta=float("inf")), ValueError, "beta"),
        ("EcoDiffConfig", lambda: EcoDiffConfig(reg="l3"), ValueError, "reg"),
        ("EcoDiffConfig", lambda: EcoDiffConfig(objective="global"), ValueError, "objective"),
        (
            "learn_masks",
            lambda: learn_masks(model, "ddim", [(torch.randn(1, 1, 8, 8), None)]),
            TypeError,
            "sampler",
        ),
        (
            "learn_masks",
            lambda: learn_masks(model, sampler, [(torch.randn(1, 1, 8, 8), None)], config={}),
            TypeError,
            "config",
        ),
        (
            "learn_masks",
            lambda: learn_masks(model, sampler, [torch.randn(1, 1, 8, 8)]),
            ValueError,
            "pair",
        ),
        ("MaskScores", lambda: MaskScores({}, units), ValueError, "logits lack"),
        ("MaskScores", lambda: MaskScores(nan_logits, units), ValueError, "NaN"),
        ("select", lambda: select(scores, 1.0), ValueError, "sparsity"),
        ("select", lambda: select(scores, -0.1), ValueError, "sparsity"),
        ("select", lambda: select(scores, float("nan")), ValueError, "sparsity"),
        ("select", lambda: select(scores, 0.2, scope="layer"), ValueError, "scope"),
        ("select", lambda: select(scores, 0.2, budget="flops"), ValueError, "budget"),
        ("select", lambda: select(scores, 0.2, total_params=10), ValueError, "total_params"),
        (
            "select",
            lambda: select(scores, 0.2, total_params=10**9 + 0.5),
            ValueError,
            "total_params",
        ),
        ("materialize", lambda: materialize(model, units, {}), ValueError, "keep lacks"),
        ("materialize", lambda: materialize(model, units, short_keep), ValueError, "shape"),
        ("materialize", lambda: materialize(model, [], good_keep), ValueError, "units"),
        ("random_scores", lambda: random_scores(units, seed=-1), ValueError, "seed"),
        ("random_scores", lambda: random_scores([]), ValueError, "units"),
        ("magnitude_scores", lambda: magnitude_scores(model, []), ValueError, "units"),
        ("regularizer", lambda: regularizer([], "l1"), ValueError, "logits"),
        ("load_toy", lambda: load_toy("gan"), ValueError, "regime"),
        ("method_check", lambda: method_check([]), ValueError, "seeds"),
        ("method_check", lambda: method_check(calibration=1.5), TypeError, "calibration"),
        ("method_check", lambda: method_check(sparsity=1.0), ValueError, "sparsity"),
        ("train_toy_unet", lambda: train_toy_unet(steps=0), ValueError, "steps"),
        (
            "save_toy_unet",
            lambda: save_toy_unet(model, torch.zeros(3, 4, 32)),
            ValueError,
            "prompts",
        ),
        *_recover_cases(model),
    ]


def _recover_cases(model):
    sched = DDIMScheduler()
    x = torch.zeros(4, 1, 8, 8)
    y = torch.arange(4)
    nan_x = x.clone()
    nan_x[0, 0, 0, 0] = float("nan")
    pytest.importorskip("peft")
    return [
        ("lora_recover", lambda: lora_recover("m", sched, x, y), TypeError, "model"),
        ("lora_recover", lambda: lora_recover(model, object(), x, y), ValueError, "scheduler"),
        ("lora_recover", lambda: lora_recover(model, sched, x.long(), y), TypeError, "x"),
        ("lora_recover", lambda: lora_recover(model, sched, nan_x, y), ValueError, "NaN"),
        ("lora_recover", lambda: lora_recover(model, sched, x[:0], y[:0]), ValueError, "x"),
        ("lora_recover", lambda: lora_recover(model, sched, x, y[:3]), ValueError, "cond"),
        ("lora_recover", lambda: lora_recover(model, sched, x, y, steps=2.5), ValueError, "steps"),
        ("lora_recover", lambda: lora_recover(model, sched, x, y, rank=0), ValueError, "rank"),
        (
            "lora_recover",
            lambda: lora_recover(model, sched, x, y, lr=float("inf")),
            ValueError,
            "lr",
        ),
        ("lora_recover", lambda: lora_recover(model, sched, x, y, seed=-1), ValueError, "seed"),
        (
            "lora_recover",
            lambda: lora_recover(model, sched, x, y, target_modules="("),
            ValueError,
            "target_modules",
        ),
        (
            "lora_recover",
            lambda: lora_recover(model, sched, x, y, target_modules=[]),
            ValueError,
            "target_modules",
        ),
        (
            "denoising_loss",
            lambda: denoising_loss(model, sched, x, y, batch_size=0),
            ValueError,
            "batch_size",
        ),
        ("denoising_loss", lambda: denoising_loss(model, sched, [1.0], y), TypeError, "x"),
    ]


def test_bad_inputs(model):
    failures = []
    for name, call, exc, text in _cases(model):
        try:
            call()
        except exc as err:
            if text.lower() not in str(err).lower():
                failures.append(f"{name}: message {err!r} lacks {text!r}")
        except Exception as err:
            failures.append(f"{name}: raised {type(err).__name__}: {err}")
        else:
            failures.append(f"{name}: did not raise")
    assert not failures, "\n".join(failures)
