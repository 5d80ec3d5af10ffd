"""EcoDiff mask learning (spec §2.3–2.5): hard-concrete gates over heads and FFN neurons of a
frozen model, trained to make the final sample of the gated sampler match the dense model's
final sample from the same noise, plus a sparsity regulariser.

    L(λ) = E_{c,u} || ẑ_0(λ, u; c) − z_0*(c) ||²  +  β (R_attn(λ) + R_ffn(λ))

The gradient flows through all ``T`` sampler steps with time-step checkpointing. The
``"local"`` objective is the ablation: a per-step loss ``|| Φ_k^masked(z_k) − Φ_k(z_k) ||²`` on
the dense model's own trajectory (no error propagation across steps).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr26.ecodiff.adjoint import trajectory_grad
from iclr26.ecodiff.gates import GATES, REGULARIZERS, regularizer
from iclr26.ecodiff.masking import MaskedModel
from iclr26.ecodiff.sampler import MarkovSampler, ModelFn, diffusers_model_fn
from iclr26.ecodiff.select import MaskScores
from iclr26.ecodiff.units import PrunableUnit, find_prunable_units

__all__ = ["EcoDiffConfig", "NonFiniteLossError", "learn_masks"]

log = logging.getLogger(__name__)


class NonFiniteLossError(ValueError):
    """Mask learning met a NaN/inf loss or gradient; the last good logits were kept."""


@dataclass
class EcoDiffConfig:
    """Hyper-parameters of :func:`learn_masks` (official defaults noted per field).

    Attributes:
        epochs: passes over the calibration set (4 SDXL/FLUX, 3 DiT).
        lr_attn, lr_ffn: AdamW learning rates of head and neuron logits (0.1 / 0.1 SDXL).
        lr_norm: learning rate of FLUX norm/modulation logits (the official ``n_lr``); ``None``
            uses ``lr_ffn``. Only used when the units include ``"flux_norm"`` groups.
        warmup: linear warm-up optimiser steps before the constant rate (10).
        weight_decay: AdamW weight decay (torch's default 0.01; the official configs do not set it).
        beta: regulariser weight β (0.5 SDXL, 0.01 FLUX, 1 DiT).
        reg: ``"l1"`` (SDXL), ``"bounded_l1"`` (FLUX), ``"l0"``, ``"l2"``, ``"bounded_l2"``.
        recon: ``"l2"`` (mean squared) or ``"l1"`` reconstruction of the final sample.
        gate: ``"hard_concrete"`` or ``"sigmoid"``.
        init_logit: initial λ (3 SDXL/FLUX, 10 DiT).
        noise_eps: hard-concrete ``masking_eps`` (0.5 SDXL, 0.1 FLUX).
        grad_accum: calibration batches per optimiser step (4).
        checkpoint: time-step gradient checkpointing (on for SDXL/FLUX).
        objective: ``"end_to_end"`` (EcoDiff) or ``"local"`` (per-step ablation).
        seed: seeds the gate noise.
    """

    epochs: int = 4
    lr_attn: float = 0.1
    lr_ffn: float = 0.1
    lr_norm: float | None = None
    warmup: int = 10
    weight_decay: float = 0.01
    beta: float = 0.5
    reg: str = "l1"
    recon: str = "l2"
    gate: str = "hard_concrete"
    init_logit: float = 3.0
    noise_eps: float = 0.5
    grad_accum: int = 4
    checkpoint: bool = True
    objective: str = "end_to_end"
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "grad_accum", "warmup", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int, got {type(v).__name__}")
            if v < (0 if name in ("warmup", "seed") else 1):
                raise ValueError(
                    f"{name} must be >= {0 if name in ('warmup', 'seed') else 1}, got {v}"
                )
        for name in ("lr_attn", "lr_ffn", "weight_decay", "beta", "init_logit", "noise_eps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if self.lr_norm is not None and (
            isinstance(self.lr_norm, bool)
            or not isinstance(self.lr_norm, int | float)
            or not math.isfinite(self.lr_norm)
            or self.lr_norm <= 0
        ):
            raise ValueError(f"lr_norm must be None or a finite number > 0, got {self.lr_norm!r}")
        for name in ("lr_attn", "lr_ffn"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        for name in ("weight_decay", "beta", "noise_eps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        choices = {"reg": REGULARIZERS, "recon": ("l2", "l1"), "gate": GATES,
                   "objective": ("end_to_end", "local")}  # fmt: skip
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")


def _check_calibration(calibration: Sequence[tuple[torch.Tensor, Any]]) -> list:
    batches = list(calibration)
    if not batches:
        raise ValueError("calibration must hold at least one (z_T, cond) batch")
    for i, item in enumerate(batches):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ValueError(f"calibration[{i}] must be a (z_T, cond) pair")
        z, cond = item
        if not isinstance(z, torch.Tensor) or not z.is_floating_point() or z.ndim < 2:
            raise TypeError(f"calibration[{i}] z_T must be a floating tensor (B, ...)")
        if not torch.isfinite(z).all():
            raise ValueError(f"calibration[{i}] z_T is not finite")
        if isinstance(cond, torch.Tensor) and cond.shape[0] != z.shape[0]:
            raise ValueError(
                f"calibration[{i}]: cond has batch {cond.shape[0]} but z_T has batch {z.shape[0]}"
            )
    return batches


def _recon(kind: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if kind == "l2":
        return lambda a, b: (a - b).pow(2).mean()
    return lambda a, b: (a - b).abs().mean()


def learn_masks(
    model: nn.Module,
    sampler: MarkovSampler,
    calibration: Sequence[tuple[torch.Tensor, Any]],
    *,
    units: Sequence[PrunableUnit] | None = None,
    config: EcoDiffConfig | None = None,
    model_fn: ModelFn | None = None,
    init_scores: MaskScores | None = None,
    checkpoint_path: str | os.PathLike[str] | None = None,
    callback: Callable[[dict], None] | None = None,
    progress: bool = False,
    accelerator: Any = None,
) -> MaskScores:
    """Learn unit scores (gate logits) of ``model`` by EcoDiff's end-to-end objective.

    Args:
        model: frozen denoiser (a diffusers model or anything ``model_fn`` calls). Its weights
            are not changed.
        sampler: a stateless :class:`MarkovSampler` (:func:`from_scheduler`).
        calibration: ``(z_T, cond)`` batches: fixed initial noise (already scaled by
            ``sampler.init_noise_sigma``) and the conditioning (class labels or text embeddings).
        units: unit groups (default: every head and FFN neuron found).
        config: :class:`EcoDiffConfig`.
        model_fn: ``fn(z, t, cond)`` (default :func:`diffusers_model_fn`; pass one with
            classifier-free guidance if the pipeline uses it).
        init_scores: resume from these logits.
        checkpoint_path: ``.safetensors`` file the logits are written to after every epoch and
            when learning stops on a non-finite loss.
        callback: called with a dict per optimiser step (epoch, step, recon, reg, density).
        progress: show a progress bar.
        accelerator: a Hugging Face ``accelerate.Accelerator`` for data-parallel mask learning:
            each process takes every ``num_processes``-th calibration batch, the gate gradients
            (and the logged loss) are all-reduced by their mean before every update, so the
            logits stay identical on every process; only the main process writes the
            checkpoint and shows progress. The calibration batches must divide evenly
            across processes. Put the model and batches on ``accelerator.device`` yourself.

    Returns:
        :class:`MaskScores` with the learned logits and the per-step ``history``.

    Raises:
        NonFiniteLossError: a NaN/inf loss or gradient (the last good logits are kept and saved).
    """
    from iclr26.shared import progress as bar

    config = EcoDiffConfig() if config is None else config
    if not isinstance(config, EcoDiffConfig):
        raise TypeError(f"config must be an EcoDiffConfig, got {type(config).__name__}")
    if not isinstance(sampler, MarkovSampler):
        raise TypeError(
            f"sampler must be a MarkovSampler (from_scheduler), got {type(sampler).__name__}"
        )
    batches = _check_calibration(calibration)
    rank, world, main = 0, 1, True
    if accelerator is not None:
        for attr in ("num_processes", "process_index", "is_main_process", "reduce"):
            if not hasattr(accelerator, attr):
                raise TypeError(f"accelerator must be an accelerate.Accelerator, lacks .{attr}")
        rank, world = int(accelerator.process_index), int(accelerator.num_processes)
        main = bool(accelerator.is_main_process)
        if len(batches) % world:
            raise ValueError(
                f"calibration has {len(batches)} batches, which {world} processes cannot share "
                "evenly (every process must run the same number of updates)"
            )
        batches = batches[rank::world]
    units = list(find_prunable_units(model) if units is None else units)
    if checkpoint_path is not None:
        checkpoint_path = Path(checkpoint_path)
        if checkpoint_path.is_dir():
            raise ValueError(f"checkpoint_path {checkpoint_path} is a folder, expected a file")
    fn = diffusers_model_fn(model) if model_fn is None else model_fn
    masked = MaskedModel(model, units, gate=config.gate, init_logit=config.init_logit,
                         noise_eps=config.noise_eps)  # fmt: skip
    if init_scores is not None:
        masked.load_scores(init_scores)
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    was_training = model.training
    model.eval()
    recon = _recon(config.recon)
    attn_keys = [u.key for u in units if u.kind == "heads"]
    ffn_keys = [u.key for u in units if u.kind in ("ffn", "flux_single_mlp")]
    norm_keys = [u.key for u in units if u.kind == "flux_norm"]
    lr_norm = config.lr_ffn if config.lr_norm is None else config.lr_norm
    groups = [
        {"params": [masked.logits[k] for k in keys], "lr": lr}
        for keys, lr in (
            (attn_keys, config.lr_attn),
            (ffn_keys, config.lr_ffn),
            (norm_keys, lr_norm),
        )
        if keys
    ]
    opt = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / config.warmup) if config.warmup else 1.0
    )
    params = [masked.logits[u.key] for u in units]
    gen = torch.Generator().manual_seed(config.seed + rank)
    history: list[dict] = []

    def save(path: Path | None) -> None:
        if path is not None and main:
            from safetensors.torch import save_file

            save_file(masked.scores().to_state_dict(), str(path))

    def reg_loss() -> torch.Tensor:
        total = torch.zeros((), dtype=params[0].dtype, device=params[0].device)
        for keys in (attn_keys, ffn_keys):
            if keys:
                total = total + regularizer([masked.logits[k] for k in keys], config.reg)
        return config.beta * total

    try:
        with torch.no_grad():  # targets: the dense model's final samples, computed once
            targets, teacher = [], []
            for z, cond in batches:
                traj = [z]
                for k in range(sampler.num_steps):
                    traj.append(sampler.step(fn, traj[-1], k, cond))
                targets.append(traj[-1])
                teacher.append(traj if config.objective == "local" else None)
        masked.install()
        n_steps = config.epochs * math.ceil(len(batches) / config.grad_accum)
        pbar = bar(total=n_steps, enabled=progress and main, desc="learning masks", unit="update")
        step_no = 0
        with pbar:
            for epoch in range(config.epochs):
                for start in range(0, len(batches), config.grad_accum):
                    chunk = range(start, min(start + config.grad_accum, len(batches)))
                    good = {k: v.detach().clone() for k, v in masked.logits.items()}
                    opt.zero_grad(set_to_none=True)
                    acc = [torch.zeros_like(p) for p in params]
                    rec_sum = 0.0
                    for i in chunk:
                        z, cond = batches[i]
                        masked.resample_noise(gen)
                        if config.objective == "end_to_end":
                            target = targets[i]
                            loss, grads, _ = trajectory_grad(
                                lambda zz, k, c=cond: sampler.step(fn, zz, k, c),
                                z, sampler.num_steps, lambda zz, t=target: recon(zz, t),
                                params, checkpoint=config.checkpoint,
                            )  # fmt: skip
                        else:
                            loss, grads = _local_grad(sampler, fn, teacher[i], cond, recon, params)
                        rec_sum += float(loss)
                        for a, g in zip(acc, grads, strict=True):
                            a.add_(g, alpha=1.0 / len(chunk))
                    if accelerator is not None:  # data parallel: mean over processes
                        acc = [accelerator.reduce(a, reduction="mean") for a in acc]
                        rec_sum = float(
                            accelerator.reduce(torch.tensor([rec_sum]), reduction="mean")[0]
                        )
                    reg = reg_loss()
                    reg_grads = torch.autograd.grad(reg, params, allow_unused=True)
                    for p, a, g in zip(params, acc, reg_grads, strict=True):
                        p.grad = a if g is None else a + g
                    finite = math.isfinite(rec_sum) and all(
                        torch.isfinite(p.grad).all() for p in params
                    )
                    if not finite:
                        with torch.no_grad():
                            for k, v in good.items():
                                masked.logits[k].copy_(v)
                        save(checkpoint_path)
                        where = f" (saved to {checkpoint_path})" if checkpoint_path else ""
                        raise NonFiniteLossError(
                            f"non-finite loss or gradient at epoch {epoch}, update {step_no}; "
                            f"stopped with the last good logits{where}"
                        )
                    opt.step()
                    sched.step()
                    with torch.no_grad():
                        density = float(
                            sum(int((masked.logits[k] > 0).sum()) for k in masked.logits)
                            / sum(u.size for u in units)
                        )
                    rec = {"epoch": epoch, "step": step_no, "recon": rec_sum / len(chunk),
                           "reg": float(reg.detach()), "density": density}  # fmt: skip
                    history.append(rec)
                    if callback is not None:
                        callback(rec)
                    pbar.update(1)
                    pbar.set_postfix(recon=f"{rec['recon']:.4g}", density=f"{density:.3f}")
                    step_no += 1
                save(checkpoint_path)
                log.info(
                    "epoch %d: recon %.4g density %.3f",
                    epoch,
                    history[-1]["recon"],
                    history[-1]["density"],
                )
    finally:
        masked.remove()
        for p in frozen:
            p.requires_grad_(True)
        model.train(was_training)
    scores = masked.scores()
    scores.history = history
    return scores


def _local_grad(sampler, fn, traj, cond, recon, params):
    """Per-step ablation: Σ_k ||Φ_k^masked(z_k) − Φ_k(z_k)||² / T on the dense trajectory."""
    grads = [torch.zeros_like(p) for p in params]
    total = 0.0
    T = sampler.num_steps
    for k in range(T):
        out = sampler.step(fn, traj[k], k, cond)
        loss = recon(out, traj[k + 1]) / T
        gs = torch.autograd.grad(loss, params, allow_unused=True)
        for i, g in enumerate(gs):
            if g is not None:
                grads[i] += g
        total += float(loss.detach())
    return torch.tensor(total), grads


def config_dict(config: EcoDiffConfig) -> dict:
    """The config as a plain dict (for reports)."""
    return asdict(config)
