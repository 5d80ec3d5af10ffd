"""Pre-training (SFT) of a masked denoiser on a task with the MDLM loss (spec §2.2, §5.3)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import nn

from iclr26.maskgrpo.policy import policy_logits
from iclr26.maskgrpo.tasks import Task
from iclr26.shared import check_int, check_range
from iclr26.shared import progress as progress_bar

__all__ = ["mdlm_loss", "pretrain_denoiser"]

log = logging.getLogger(__name__)


def mdlm_loss(
    policy: nn.Module,
    seqs: torch.Tensor,
    prompt_len: int,
    mask_id: int,
    generator: torch.Generator,
    t_min: float = 1e-3,
) -> torch.Tensor:
    """MDLM / LLaDA-SFT loss: t ~ U(t_min, 1) per sequence, completion tokens masked i.i.d. with
    probability t (the prompt stays clean), cross-entropy on masked tokens weighted by 1/t,
    averaged over all completion tokens (a Monte-Carlo estimate of the negative ELBO per token).
    """
    if not isinstance(seqs, torch.Tensor) or seqs.dtype != torch.long or seqs.ndim != 2:
        raise TypeError("seqs must be a (batch, length) torch.LongTensor")
    check_int(prompt_len, "prompt_len", low=0, high=seqs.shape[1] - 1)
    b, length = seqs.shape[0], seqs.shape[1] - prompt_len
    t = t_min + (1 - t_min) * torch.rand(b, 1, generator=generator)
    mask = (torch.rand(b, length, generator=generator) < t).to(seqs.device)
    noised = seqs.clone()
    noised[:, prompt_len:] = torch.where(mask, mask_id, seqs[:, prompt_len:])
    logits = policy_logits(policy, noised)[:, prompt_len:].float()
    ce = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), seqs[:, prompt_len:].reshape(-1), reduction="none"
    ).view(b, length)
    return (ce * mask / t.to(seqs.device)).sum() / (b * length)


def pretrain_denoiser(
    model: nn.Module,
    task: Task,
    *,
    steps: int = 600,
    batch_size: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = False,
    callback: Callable[[int, nn.Module], None] | None = None,
) -> list[float]:
    """Train ``model`` with :func:`mdlm_loss` on fresh (prompt, solution) pairs of ``task``
    (``task.sample_pairs(n, seed)`` where the task defines it, e.g. dataset images of
    :class:`~iclr26.maskgrpo.DigitsT2I`).

    Deliberately short by default so the RL stage has headroom. Returns the loss per step;
    ``callback(steps_done, model)`` runs after every step (snapshots, early stop by raising).
    Prompts are drawn with seeds from ``seed`` (disjoint from the evaluation seeds used by the
    experiments, which start at 10**6).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(task, Task):
        raise TypeError(f"task must implement the Task protocol, got {type(task).__name__}")
    check_int(steps, "steps", low=1)
    check_int(batch_size, "batch_size", low=1)
    check_range(lr, "lr", low=0.0, low_inclusive=False)
    check_int(seed, "seed", low=0)
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.01)
    # linear warm-up then constant: a run of k steps is a prefix of a longer run
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50))
    g = torch.Generator().manual_seed(seed)
    pairs = getattr(task, "sample_pairs", None)
    losses = []
    model.train()
    for step in progress_bar(range(steps), desc=f"pretrain {task.name}", enabled=progress):
        if pairs is not None:  # tasks with many solutions per prompt (DigitsT2I: images)
            prompts, completions = pairs(batch_size, seed=seed * 100_003 + step)
        else:
            prompts = task.sample_prompts(batch_size, seed=seed * 100_003 + step)
            completions = task.solutions(prompts)
        seqs = torch.cat([prompts, completions], 1).to(device)
        loss = mdlm_loss(model, seqs, task.prompt_len, task.mask_id, g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if callback is not None:
            callback(step + 1, model)
    model.eval()
    log.info("pretrained %s for %d steps, final loss %.4f", task.name, steps, losses[-1])
    return losses
