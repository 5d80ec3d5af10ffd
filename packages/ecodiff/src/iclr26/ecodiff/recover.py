"""Optional recovery after pruning: LoRA fine-tuning of the physically pruned model.

EcoDiff's headline result needs no retraining; the official code ships LoRA / full fine-tuning
scripts (``scripts/retraining/``) as an optional light recovery for high pruning ratios. This
module does the LoRA variant through Hugging Face ``peft`` (extra ``[lora]``) on the *sliced*
diffusers model, with the model's own diffusion training loss (ε- or v-prediction for DDPM-type
schedulers, the rectified-flow velocity for flow matching) on data the caller passes, and merges
the adapters back so the result is again a plain model of the same class and size.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from iclr26.ecodiff.sampler import diffusers_model_fn

__all__ = ["denoising_loss", "lora_recover"]

log = logging.getLogger(__name__)


def _objective(scheduler: Any) -> str:
    name = type(scheduler).__name__
    if "FlowMatch" in name:
        return "flow"
    if hasattr(scheduler, "alphas_cumprod"):
        pred = getattr(getattr(scheduler, "config", None), "prediction_type", "epsilon")
        if pred not in ("epsilon", "v_prediction"):
            raise ValueError(f"scheduler prediction_type {pred!r} is not supported")
        return pred
    raise ValueError(
        f"scheduler must be a DDPM-type scheduler (with alphas_cumprod) or a FlowMatch scheduler, "
        f"got {name}"
    )


def _check_data(x: Any, cond: Any) -> tuple[torch.Tensor, Any]:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of clean samples, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be floating point, got {x.dtype}")
    if x.ndim < 2 or x.shape[0] == 0:
        raise ValueError(f"x must be a non-empty batch (N, ...), got shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("x contains NaN or inf")
    if cond is not None:
        if not isinstance(cond, torch.Tensor):
            raise TypeError(f"cond must be a torch.Tensor or None, got {type(cond).__name__}")
        if cond.shape[0] != x.shape[0]:
            raise ValueError(
                f"cond has {cond.shape[0]} rows but x has {x.shape[0]} samples (one each)"
            )
        if cond.is_floating_point() and not torch.isfinite(cond).all():
            raise ValueError("cond contains NaN or inf")
    return x, cond


def _pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def _noised(scheduler, objective: str, x0, gen):
    n = x0.shape[0]
    noise = torch.randn(x0.shape, generator=gen).to(x0)
    steps = int(scheduler.config.num_train_timesteps)
    if objective == "flow":
        s = torch.rand(n, generator=gen).to(x0)
        sv = s.view(-1, *([1] * (x0.ndim - 1)))
        return (1 - sv) * x0 + sv * noise, noise - x0, s * steps
    t = torch.randint(0, steps, (n,), generator=gen)
    a = scheduler.alphas_cumprod.to(x0)[t].view(-1, *([1] * (x0.ndim - 1)))
    xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
    target = noise if objective == "epsilon" else a.sqrt() * noise - (1 - a).sqrt() * x0
    return xt, target, t.to(x0.device)


def denoising_loss(
    model: nn.Module,
    scheduler: Any,
    x: torch.Tensor,
    cond: torch.Tensor | None = None,
    *,
    batch_size: int = 256,
    seed: int = 0,
) -> float:
    """Mean diffusion training loss of ``model`` on ``(x, cond)`` at seeded random timesteps and
    noise (the same draws for the same ``seed``, so two models compare on identical inputs).

    The loss is ``E ||f(x_t, t, c) − target||²`` with ε (or v) targets for a DDPM-type
    ``scheduler`` and the rectified-flow velocity ``noise − x_0`` for a FlowMatch scheduler.
    """
    x, cond = _check_data(x, cond)
    _pos_int("batch_size", batch_size)
    objective = _objective(scheduler)
    fn = diffusers_model_fn(model)
    gen = torch.Generator().manual_seed(int(seed))
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch_size):
            x0 = x[i : i + batch_size]
            c = None if cond is None else cond[i : i + batch_size]
            xt, target, t = _noised(scheduler, objective, x0, gen)
            total += float((fn(xt, t, c) - target).pow(2).sum())
            count += target.numel()
    return total / count


def _default_targets(model: nn.Module) -> list[str]:
    names = [
        name
        for name, mod in model.named_modules()
        if isinstance(mod, nn.Linear) and mod.in_features > 0 and mod.out_features > 0
    ]
    if not names:
        raise ValueError("model has no non-empty nn.Linear layers to adapt")
    return names


def lora_recover(
    model: nn.Module,
    scheduler: Any,
    x: torch.Tensor,
    cond: torch.Tensor | None = None,
    *,
    steps: int = 200,
    batch_size: int = 64,
    rank: int = 8,
    alpha: float | None = None,
    lr: float = 1e-3,
    target_modules: str | Sequence[str] | None = None,
    seed: int = 0,
    merge: bool = True,
    progress: bool = False,
) -> tuple[nn.Module, list[float]]:
    """LoRA fine-tuning of a (pruned) diffusers denoiser with its diffusion training loss.

    Args:
        model: the pruned model (e.g. from :func:`materialize`); it is adapted in place, so pass
            a copy to keep the original.
        scheduler: the diffusers scheduler defining the training objective (DDPM/DDIM-type: ε- or
            v-prediction by its ``prediction_type``; FlowMatch: rectified-flow velocity).
        x: clean training samples ``(N, C, H, W)``.
        cond: per-sample conditioning (class labels or prompt embeddings), ``N`` rows, or None.
        steps: optimiser steps; batch_size: samples per step (drawn with replacement, seeded).
        rank: LoRA rank ``r``; alpha: LoRA scale numerator (default ``rank``, i.e. scale 1).
        lr: AdamW learning rate of the adapter weights.
        target_modules: peft ``target_modules`` (names or a regex); default every non-empty
            ``nn.Linear`` of the model (zero-width layers left by fully pruned groups are skipped).
        seed: seeds the adapter initialisation, the batches, timesteps and noise.
        merge: fold the adapters into the weights (``merge_and_unload``) and return the plain
            model of the same class and parameter count; otherwise return the peft-wrapped model.

    Returns:
        ``(model, losses)``: the recovered model (eval mode) and the training loss per step.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    x, cond = _check_data(x, cond)
    objective = _objective(scheduler)
    steps = _pos_int("steps", steps)
    batch_size = _pos_int("batch_size", batch_size)
    rank = _pos_int("rank", rank)
    for name, v in (("lr", lr), ("alpha", rank if alpha is None else alpha)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if target_modules is None:
        targets: str | list[str] = _default_targets(model)
    elif isinstance(target_modules, str):
        try:
            re.compile(target_modules)
        except re.error as err:
            raise ValueError(f"target_modules is not a valid regex: {err}") from None
        targets = target_modules
    else:
        targets = list(target_modules)
        if not targets or not all(isinstance(t, str) for t in targets):
            raise ValueError("target_modules must be a regex or a non-empty list of names")

    from peft import LoraConfig, get_peft_model

    from iclr26.shared import progress as bar

    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    x = x.to(device, dtype)
    if cond is not None:
        cond = cond.to(device, dtype) if cond.is_floating_point() else cond.to(device)
    config = LoraConfig(
        r=rank,
        lora_alpha=float(rank if alpha is None else alpha),
        target_modules=targets,
        lora_dropout=0.0,
        bias="none",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            peft_model = get_peft_model(model, config)
        except ValueError as err:
            raise ValueError(f"target_modules matched no adaptable layer: {err}") from None
    peft_model.train()
    params = [p for p in peft_model.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in params)
    log.info("LoRA recovery: %d adapter parameters, rank %d, %d steps", n_train, rank, steps)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    fn = diffusers_model_fn(model)  # the adapters are injected into ``model`` itself
    gen = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    for _ in bar(range(steps), enabled=progress, desc="LoRA recovery"):
        idx = torch.randint(0, x.shape[0], (batch_size,), generator=gen).to(device)
        x0 = x[idx]
        c = None if cond is None else cond[idx]
        xt, target, t = _noised(scheduler, objective, x0, gen)
        loss = (fn(xt, t, c) - target).pow(2).mean()
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"LoRA recovery loss became {float(loss)} at step {len(losses)}"
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    peft_model.eval()
    if not merge:
        return peft_model, losses
    merged = peft_model.merge_and_unload()
    for p in merged.parameters():
        p.requires_grad_(True)
    return merged.eval(), losses
