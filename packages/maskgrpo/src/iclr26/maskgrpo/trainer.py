"""MaskGRPO training loop (pure torch): rollouts, rewards, group advantages, M inner updates with
the chosen importance estimator, checkpoints that resume exactly, and a JSONL log.

Every random draw of step ``s`` is derived from ``(config.seed, s)`` (prompts, rollouts, mask
seeds), so a run resumed from a checkpoint continues with exactly the draws an uninterrupted run
would have made: no step is repeated or skipped.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr26.maskgrpo.advantages import SCALES, group_advantages
from iclr26.maskgrpo.logprob import masked_token_logps
from iclr26.maskgrpo.loss import AGGREGATIONS, clipped_surrogate, gmpo_surrogate
from iclr26.maskgrpo.remask import ar_like_remask, d1_perturb, iteration_seed, random_remask
from iclr26.maskgrpo.sampling import emerge_sample, low_confidence_block_sample, maskgit_sample
from iclr26.maskgrpo.schedules import mask_ratio_schedule
from iclr26.maskgrpo.tasks import Task
from iclr26.shared import check_choice, check_int, check_range
from iclr26.shared import progress as progress_bar

__all__ = ["ESTIMATORS", "MaskGRPOConfig", "MaskGRPOTrainer", "build_estimator_inputs"]

log = logging.getLogger(__name__)

#: ``maskgrpo``: truncated schedule + AR-like/random remask, credit on masked tokens (the paper);
#: ``d1``: diffu-GRPO one-step mean-field estimate; ``uniform``: t ~ U(0, 1) random remask
#: (UniGRPO-like). The naive baseline is ``d1`` with ``num_iterations=1``.
ESTIMATORS = ("maskgrpo", "d1", "uniform")
SAMPLERS = ("low_confidence", "emerge", "maskgit")


@dataclass
class MaskGRPOConfig:
    """Settings of :class:`MaskGRPOTrainer` (TRL names where they mean the same).

    Defaults follow the MaskGRPO text release (ε 0.2, β 0.01, t_min 0.6, AR-like remask, token
    mean, Adam β2 0.99, weight decay 0.1, grad-clip 0.2) except the sizes and the learning rate,
    scaled for tiny models (the release: G 6, M 12, lr 3e-6 on an 8B model).

    Attributes:
        num_generations: G, rollouts per prompt (>= 2).
        num_iterations: M, inner updates per rollout batch (μ in the paper).
        estimator: one of :data:`ESTIMATORS`.
        remask: ``"ar_like"`` (text) or ``"random"`` (images) for ``estimator="maskgrpo"``.
        min_mask_rate: t_min in (0, 1).
        p_mask_prompt: prompt mask probability of the ``d1`` estimator (0.15).
        fixed_mask_seeds: share each iteration's mask seed between the old, reference and
            current passes (the paper); ``False`` draws independent masks per pass and credits
            the tokens masked in both (ablation).
        credit: ``"masked"`` (spec §2.5, credit only on the current iteration's masked tokens) or
            ``"stacked"`` (the released code: every completion token weighted by how many of the
            M iterations mask it).
        epsilon, epsilon_high: clip range; beta: KL weight.
        clip_mode: ``"grpo"`` (ratio clip) or ``"gmpo"`` (sign-aware log-ratio clip).
        loss_agg: ``"token_mean"`` or ``"seq_mean"``.
        scale_rewards: ``"group"``, ``"none"`` or ``"rank"`` (see ``group_advantages``).
        sampler: rollout sampler, one of ``"low_confidence"``, ``"emerge"``, ``"maskgit"``.
        block_length, sampling_steps: of the low-confidence sampler (``None``: one block, one
            token per step); ``sampling_steps`` is T for emerge/MaskGIT (``None``: 12).
        temperature: rollout temperature (0.9 text).
        cfg_scale: classifier-free guidance weight w of the emerge / MaskGIT rollouts
            ((1 + w)·cond − w·uncond; 3 in the image release, 0 = off); needs a task with
            ``uncond_ids`` (the null prompt, e.g. :class:`~iclr26.maskgrpo.DigitsT2I`).
        learning_rate, weight_decay, adam_beta2, max_grad_norm: AdamW and gradient clipping.
        ref_sync_steps: copy the policy into the reference every this many steps (``None``: never).
        seed: seeds every draw of the run.
    """

    num_generations: int = 8
    num_iterations: int = 4
    estimator: str = "maskgrpo"
    remask: str = "ar_like"
    min_mask_rate: float = 0.6
    p_mask_prompt: float = 0.15
    fixed_mask_seeds: bool = True
    credit: str = "masked"
    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.01
    clip_mode: str = "grpo"
    loss_agg: str = "token_mean"
    scale_rewards: str = "group"
    sampler: str = "low_confidence"
    block_length: int | None = None
    sampling_steps: int | None = None
    temperature: float = 0.9
    cfg_scale: float = 0.0
    learning_rate: float = 5e-5
    weight_decay: float = 0.1
    adam_beta2: float = 0.99
    max_grad_norm: float = 0.2
    ref_sync_steps: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        check_int(self.num_generations, "num_generations", low=2)
        check_int(self.num_iterations, "num_iterations", low=1)
        check_choice(self.estimator, "estimator", ESTIMATORS)
        check_choice(self.remask, "remask", ("ar_like", "random"))
        check_range(
            self.min_mask_rate,
            "min_mask_rate",
            low=0.0,
            high=1.0,
            low_inclusive=False,
            high_inclusive=False,
        )
        check_range(self.p_mask_prompt, "p_mask_prompt", low=0.0, high=1.0)
        if not isinstance(self.fixed_mask_seeds, bool):
            raise TypeError("fixed_mask_seeds must be a bool")
        check_choice(self.credit, "credit", ("masked", "stacked"))
        check_range(self.epsilon, "epsilon", low=0.0, low_inclusive=False)
        if self.epsilon_high is not None:
            check_range(self.epsilon_high, "epsilon_high", low=0.0, low_inclusive=False)
        check_range(self.beta, "beta", low=0.0)
        check_choice(self.clip_mode, "clip_mode", ("grpo", "gmpo"))
        check_choice(self.loss_agg, "loss_agg", AGGREGATIONS)
        check_choice(self.scale_rewards, "scale_rewards", SCALES)
        check_choice(self.sampler, "sampler", SAMPLERS)
        if self.block_length is not None:
            check_int(self.block_length, "block_length", low=1)
        if self.sampling_steps is not None:
            check_int(self.sampling_steps, "sampling_steps", low=1)
        check_range(self.temperature, "temperature", low=0.0)
        if self.sampler != "low_confidence" and self.temperature == 0:
            raise ValueError(f"temperature must be > 0 for the {self.sampler} sampler")
        check_range(self.cfg_scale, "cfg_scale", low=0.0)
        if self.cfg_scale and self.sampler == "low_confidence":
            raise ValueError("cfg_scale > 0 needs the emerge or maskgit sampler")
        check_range(self.learning_rate, "learning_rate", low=0.0, low_inclusive=False)
        check_range(self.weight_decay, "weight_decay", low=0.0)
        check_range(self.adam_beta2, "adam_beta2", low=0.0, high=1.0, high_inclusive=False)
        check_range(self.max_grad_norm, "max_grad_norm", low=0.0, low_inclusive=False)
        if self.ref_sync_steps is not None:
            check_int(self.ref_sync_steps, "ref_sync_steps", low=1)
        check_int(self.seed, "seed", low=0, high=2**63 - 1)


def build_estimator_inputs(
    seqs: torch.Tensor,
    prompt_len: int,
    mask_id: int,
    config: MaskGRPOConfig,
    step: int,
    iteration: int,
    pass_index: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Noised inputs and credit mask of inner iteration ``iteration`` for one estimator pass.

    With ``config.fixed_mask_seeds`` every pass (old policy, reference, current policy) of an
    iteration gets the same seed s_μ; otherwise ``pass_index`` changes it.

    Returns:
        ``(noised, mask)``: (B, P + L) long ids and the (B, L) bool mask of masked completion
        tokens (all True for ``d1``).
    """
    seed = iteration_seed(config.seed, step, iteration)
    if not config.fixed_mask_seeds:
        seed = int(np.random.SeedSequence([seed, pass_index + 1]).generate_state(1)[0])
    g = torch.Generator().manual_seed(seed)
    if config.estimator == "d1":
        return d1_perturb(seqs, prompt_len, config.p_mask_prompt, mask_id, g)
    if config.estimator == "uniform":
        t = float(torch.rand((), generator=g, dtype=torch.float64))
        return random_remask(seqs, prompt_len, t, mask_id, g)
    t = mask_ratio_schedule(iteration, config.num_iterations, config.min_mask_rate)
    fn = ar_like_remask if config.remask == "ar_like" else random_remask
    return fn(seqs, prompt_len, t, mask_id, g)


class MaskGRPOTrainer:
    """GRPO for a masked-diffusion policy with the MaskGRPO importance estimator (Alg. of §2).

    Args:
        policy: masked-diffusion policy (an ``nn.Module``; see ``policy_logits``), trained in
            place.
        task: a :class:`~iclr26.maskgrpo.Task` (prompts and verifiable reward).
        config: :class:`MaskGRPOConfig`.
        ref_policy: the KL reference (default: a frozen copy of ``policy`` at construction;
            for a peft policy, see :func:`~iclr26.maskgrpo.lora.lora_policy`, the base with the
            adapters disabled, as in the paper, without a second copy).
        optimizer: default AdamW from ``config`` over the parameters that require grad (only
            the adapters of a LoRA policy).
        accelerator: an ``accelerate.Accelerator`` (extra ``[accelerate]``) for data-parallel
            training: the policy and optimizer go through ``accelerator.prepare``; each process
            samples and scores its share of every step's prompts (``prompts_per_step`` divisible
            by the number of processes); rollouts and rewards are gathered so that the masks,
            advantages and metrics are those of the global batch; each process back-propagates
            its share of the loss scaled so that the averaged gradient is the global batch's
            (token-mean or sequence-mean over every credited token of all processes); only the
            main process writes logs and checkpoints. With one process the run is identical to
            one without an accelerator.
    """

    def __init__(
        self,
        policy: nn.Module,
        task: Task,
        config: MaskGRPOConfig | None = None,
        *,
        ref_policy: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        accelerator: Any | None = None,
    ) -> None:
        from iclr26.maskgrpo.lora import is_adapter_policy

        if not isinstance(policy, nn.Module):
            raise TypeError(f"policy must be a torch.nn.Module, got {type(policy).__name__}")
        if not isinstance(task, Task):
            raise TypeError(f"task must implement the Task protocol, got {type(task).__name__}")
        config = MaskGRPOConfig() if config is None else config
        if not isinstance(config, MaskGRPOConfig):
            raise TypeError(f"config must be a MaskGRPOConfig, got {type(config).__name__}")
        check_int(task.mask_id, "task.mask_id", low=0)
        if config.cfg_scale and getattr(task, "uncond_ids", None) is None:
            raise ValueError(
                "config.cfg_scale > 0 needs a task with uncond_ids (its unconditional prompt)"
            )
        vocab = getattr(getattr(policy, "config", None), "vocab_size", None)
        if vocab is None and isinstance(getattr(policy, "config", None), dict):
            vocab = policy.config.get("vocab_size")
        if vocab is not None and task.mask_id >= vocab:
            raise ValueError(
                f"task.mask_id={task.mask_id} is not a token of the policy (vocab {vocab})"
            )
        max_len = (
            getattr(policy, "config", {}).get("max_len")
            if isinstance(getattr(policy, "config", None), dict)
            else None
        )
        if max_len is not None and task.prompt_len + task.completion_len > max_len:
            raise ValueError(
                f"prompt_len + completion_len = {task.prompt_len + task.completion_len} exceeds "
                f"the model's context max_len={max_len}"
            )
        if accelerator is not None and not all(
            hasattr(accelerator, a) for a in ("prepare", "backward", "gather", "num_processes")
        ):
            raise TypeError(
                f"accelerator must be an accelerate.Accelerator, got {type(accelerator).__name__}"
            )
        self.policy, self.task, self.config = policy, task, config
        self.accelerator = accelerator
        #: the reference is the adapter-disabled base (no copy) for a peft policy
        self.adapter_reference = ref_policy is None and is_adapter_policy(policy)
        if self.adapter_reference and config.ref_sync_steps:
            raise ValueError(
                "ref_sync_steps needs a separate reference model; a peft policy's reference is "
                "its base with the adapters disabled (pass ref_policy= to sync a copy)"
            )
        if self.adapter_reference:
            self.ref_policy = None
        else:
            self.ref_policy = copy.deepcopy(policy) if ref_policy is None else ref_policy
            self.ref_policy.requires_grad_(False).eval()
        trainable = [q for q in policy.parameters() if q.requires_grad]
        if optimizer is None and not trainable:
            raise ValueError("policy has no parameter that requires grad")
        self.optimizer = optimizer or torch.optim.AdamW(
            trainable, lr=config.learning_rate, betas=(0.9, config.adam_beta2),
            weight_decay=config.weight_decay,
        )  # fmt: skip
        self.step_count = 0
        if accelerator is None:
            self.num_processes, self.process_index = 1, 0
            self.model = policy  # the module the differentiable passes run through
            self.device = next(policy.parameters()).device
        else:
            self.num_processes = int(accelerator.num_processes)
            self.process_index = int(accelerator.process_index)
            if self.num_processes > 1 and config.clip_mode != "grpo":
                raise ValueError(
                    "clip_mode='gmpo' is single-process only (its sequence and token means "
                    "cannot be split over processes exactly)"
                )
            self.model, self.optimizer = accelerator.prepare(policy, self.optimizer)
            self.policy = accelerator.unwrap_model(self.model)
            self.device = accelerator.device
            if self.ref_policy is not None:
                self.ref_policy.to(self.device)

    # --- one step -------------------------------------------------------------------------
    def _prompt_seed(self, step: int) -> int:
        return int(np.random.SeedSequence([self.config.seed, step, 1]).generate_state(1)[0] >> 1)

    def rollout(self, prompts: torch.Tensor, step: int | None = None) -> torch.Tensor:
        """G completions per prompt with the configured sampler: (P·G, prompt_len + L) long."""
        cfg, task = self.config, self.task
        step = self.step_count if step is None else step
        reps = prompts.to(self.device).repeat_interleave(cfg.num_generations, 0)
        entropy = [cfg.seed, step, 2] + ([self.process_index] if self.num_processes > 1 else [])
        g = torch.Generator().manual_seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
        self.policy.eval()
        return _sample(self.policy, reps, task, cfg, g)

    def _rewards(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        r = self.task.reward(prompts, completions)
        if not isinstance(r, torch.Tensor):
            r = torch.as_tensor(np.asarray(r))
        if r.shape != (completions.shape[0],):
            raise ValueError(
                f"the task's reward returned shape {tuple(r.shape)}, expected ({completions.shape[0]},)"
            )
        r = r.double()
        if not torch.isfinite(r).all():
            raise ValueError("the task's reward returned NaN or inf")
        return r

    def step(self, prompts: torch.Tensor) -> dict[str, float]:
        """One GRPO step on ``prompts`` (P, prompt_len): rollouts, rewards, M inner updates.

        With an accelerator, ``prompts`` is the global batch (the same on every process; P
        divisible by the number of processes) and each process rolls out its contiguous share.

        Returns the step's metrics: ``reward``, ``reward_std``, ``zero_std_frac``, ``clip_frac``,
        ``kl``, ``loss``, ``masked_frac``, ``rollout_s``, ``update_s``, ``step_s``.
        """
        task = self.task
        if not isinstance(prompts, torch.Tensor) or prompts.dtype != torch.long:
            raise TypeError("prompts must be a torch.LongTensor")
        if prompts.ndim != 2 or prompts.shape[1] != task.prompt_len or prompts.shape[0] == 0:
            raise ValueError(
                f"prompts must be (num_prompts >= 1, {task.prompt_len}), got {tuple(prompts.shape)}"
            )
        if prompts.shape[0] % self.num_processes:
            raise ValueError(
                f"prompts has {prompts.shape[0]} rows, not divisible by the "
                f"{self.num_processes} processes"
            )
        share = prompts.shape[0] // self.num_processes
        prompts = prompts[self.process_index * share : (self.process_index + 1) * share]
        t0 = time.perf_counter()
        seqs = self.rollout(prompts, self.step_count)
        p = task.prompt_len
        rewards = self._rewards(seqs[:, :p].cpu(), seqs[:, p:].cpu())
        t1 = time.perf_counter()
        rec = self.update(seqs, rewards)
        t2 = time.perf_counter()
        return {**rec, "rollout_s": t1 - t0, "update_s": t2 - t1, "step_s": t2 - t0}

    def update(self, seqs: torch.Tensor, rewards: torch.Tensor) -> dict[str, float]:
        """The M inner policy updates of one step on given rollouts (advances ``step_count``).

        Args:
            seqs: (P·G, prompt_len + L) long rollouts, groups of G contiguous (with an
                accelerator: this process's share, whole groups).
            rewards: (P·G,) rewards.
        """
        cfg, task = self.config, self.task
        if not isinstance(seqs, torch.Tensor) or seqs.dtype != torch.long or seqs.ndim != 2:
            raise TypeError("seqs must be a (batch, length) torch.LongTensor")
        if seqs.shape[1] != task.prompt_len + task.completion_len:
            raise ValueError(
                f"seqs must have length prompt_len + completion_len = "
                f"{task.prompt_len + task.completion_len}, got {seqs.shape[1]}"
            )
        step, m, p = self.step_count, cfg.num_iterations, task.prompt_len
        rewards = torch.as_tensor(rewards).double().cpu()
        if rewards.shape != (seqs.shape[0],):
            raise ValueError(
                f"rewards has shape {tuple(rewards.shape)} for {seqs.shape[0]} rollouts"
            )
        local_n = seqs.shape[0]
        if self.num_processes > 1:
            # the masks, advantages and metrics are those of the global batch (rank order);
            # this process back-propagates its own rows
            seqs = self.accelerator.gather(seqs.to(self.device))
            rewards = self.accelerator.gather(rewards.to(self.device)).cpu()
        rows = slice(self.process_index * local_n, (self.process_index + 1) * local_n)
        adv = group_advantages(rewards, cfg.num_generations, cfg.scale_rewards)
        adv = adv.float().to(self.device)[rows]
        groups = rewards.view(-1, cfg.num_generations)

        # inputs of every iteration; the old and reference passes are batched over the M masks
        old_in = [
            build_estimator_inputs(seqs, p, task.mask_id, cfg, step, mu, 0) for mu in range(m)
        ]
        cur_in = (
            old_in if cfg.fixed_mask_seeds
            else [build_estimator_inputs(seqs, p, task.mask_id, cfg, step, mu, 1) for mu in range(m)]
        )  # fmt: skip
        masks_global = torch.stack([mk for _, mk in cur_in])
        if not cfg.fixed_mask_seeds:
            masks_global = masks_global & torch.stack([mk for _, mk in old_in])
        stacked_global = masks_global.float().sum(0)
        if self.num_processes > 1:
            old_in = [(x[rows], mk[rows]) for x, mk in old_in]
            cur_in = [(x[rows], mk[rows]) for x, mk in cur_in]
        local_seqs = seqs[rows]
        masks, stacked = masks_global[:, rows], stacked_global[rows]
        all_targets = local_seqs.repeat(m, 1)
        with torch.no_grad():
            old_logps = None
            if m > 1:  # with M = 1 the old log-probs are the detached current ones
                self.policy.eval()
                all_old = torch.cat([x for x, _ in old_in])
                old_logps = masked_token_logps(self.policy, all_old, all_targets, p)
                old_logps = old_logps.view(m, local_n, -1)
            ref_logps = None
            if cfg.beta > 0:
                all_cur = torch.cat([x for x, _ in cur_in])
                ref_logps = self.reference_logps(all_cur, all_targets).view(m, local_n, -1)

        stats = torch.zeros(3, dtype=torch.float64)  # clip_frac, kl, loss (means over M)
        self.model.train()
        for mu in range(m):
            logps = masked_token_logps(self.model, cur_in[mu][0], local_seqs, p)
            old = logps.detach() if old_logps is None else old_logps[mu]
            ref = None if ref_logps is None else ref_logps[mu]
            w = masks[mu] if cfg.credit == "masked" else stacked
            if cfg.clip_mode == "grpo":
                loss, st = clipped_surrogate(
                    logps, old, adv, w, epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high,
                    ref_logps=ref, beta=cfg.beta, loss_agg=cfg.loss_agg,
                )  # fmt: skip
            else:
                loss, st = gmpo_surrogate(
                    logps, old, adv, w, epsilon=cfg.epsilon, ref_logps=ref, beta=cfg.beta
                )
            share = 1.0
            if self.num_processes > 1:
                w_all = masks_global[mu] if cfg.credit == "masked" else stacked_global
                share = _credit_share(w, w_all, cfg.loss_agg) * self.num_processes
            self.optimizer.zero_grad(set_to_none=True)
            if self.accelerator is None:
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
            else:  # DDP averages the processes' gradients: each carries its share of the mean
                self.accelerator.backward(loss * share if share != 1.0 else loss)
                self.accelerator.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            stats += torch.tensor([st["clip_frac"], st["kl"], float(loss.detach())]) * (
                share / self.num_processes / m
            )
        if self.num_processes > 1:
            stats = self.accelerator.reduce(stats.to(self.device), "sum").cpu()
        self.policy.eval()
        self.step_count += 1
        if cfg.ref_sync_steps and self.step_count % cfg.ref_sync_steps == 0:
            self.ref_policy.load_state_dict(self.policy.state_dict())
        return {
            "step": step,
            "reward": float(rewards.mean()),
            "reward_std": float(groups.std(1).mean()),
            "zero_std_frac": float((groups.amax(1) == groups.amin(1)).double().mean()),
            "masked_frac": float(masks_global.float().mean()),
            "clip_frac": float(stats[0]),
            "kl": float(stats[1]),
            "loss": float(stats[2]),
        }

    @torch.no_grad()
    def reference_logps(self, noised: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """l_ref(k) on ``noised`` (B, P + L) for every completion position: (B, L).

        The reference is ``ref_policy``, or, for a peft policy without one, the policy with its
        adapters disabled (spec §2.5).
        """
        p = self.task.prompt_len
        if self.ref_policy is not None:
            return masked_token_logps(self.ref_policy, noised, targets, p)
        was_training = self.policy.training
        self.policy.eval()
        with self.policy.disable_adapter():
            out = masked_token_logps(self.policy, noised, targets, p)
        self.policy.train(was_training)
        return out

    # --- evaluation, training loop, checkpoints ------------------------------------------------
    @torch.no_grad()
    def evaluate(self, prompts: torch.Tensor, samples: int = 4, greedy: bool = False) -> float:
        """Held-out success: mean reward of ``samples`` rollouts per prompt drawn with the
        training sampler and temperature from a fixed seed (``greedy``: one temperature-0
        low-confidence decode per prompt instead)."""
        task = self.task
        check_int(samples, "samples", low=1)
        if (
            not isinstance(prompts, torch.Tensor)
            or prompts.dtype != torch.long
            or prompts.ndim != 2
        ):
            raise TypeError("prompts must be a (num_prompts, prompt_len) torch.LongTensor")
        self.policy.eval()
        p = task.prompt_len
        if greedy:
            seqs = low_confidence_block_sample(
                self.policy, prompts.to(self.device), task.completion_len, task.mask_id,
                block_length=self.config.block_length, steps=self.config.sampling_steps,
                temperature=0.0, generator=0,
            )  # fmt: skip
        else:
            reps = prompts.to(self.device).repeat_interleave(samples, 0)
            seqs = _sample(self.policy, reps, task, self.config, torch.Generator().manual_seed(0))
        return float(self._rewards(seqs[:, :p].cpu(), seqs[:, p:].cpu()).mean())

    def train(
        self,
        num_steps: int,
        prompts_per_step: int = 8,
        *,
        eval_prompts: torch.Tensor | None = None,
        eval_every: int = 0,
        log_path: str | os.PathLike[str] | None = None,
        checkpoint_path: str | os.PathLike[str] | None = None,
        checkpoint_every: int = 0,
        stop_at_reward: float | None = None,
        callback: Callable[[dict[str, Any]], None] | None = None,
        progress: bool = False,
    ) -> list[dict[str, Any]]:
        """Run until ``step_count == num_steps`` (a resumed trainer continues where it stopped).

        Prompts of step s are ``task.sample_prompts(prompts_per_step, seed)`` with a seed derived
        from (config.seed, s). ``eval_prompts`` are scored greedily every ``eval_every`` steps
        and at the end (key ``eval``). Each record is appended to ``log_path`` (JSONL, flushed);
        the trainer state is saved to ``checkpoint_path`` every ``checkpoint_every`` steps and at
        the end. ``stop_at_reward`` stops early once the held-out reward reaches it.
        """
        from iclr26.shared import JsonlAppender

        check_int(num_steps, "num_steps", low=0)
        check_int(prompts_per_step, "prompts_per_step", low=1)
        check_int(eval_every, "eval_every", low=0)
        check_int(checkpoint_every, "checkpoint_every", low=0)
        if stop_at_reward is not None:
            check_range(stop_at_reward, "stop_at_reward")
            if eval_prompts is None or not eval_every:
                raise ValueError("stop_at_reward needs eval_prompts and eval_every > 0")
        history: list[dict[str, Any]] = []
        main = self.process_index == 0
        if log_path is not None and main:
            _trim_log(Path(log_path), self.step_count)
        appender = JsonlAppender(log_path) if log_path is not None and main else None
        try:
            bar = progress_bar(
                total=max(num_steps - self.step_count, 0),
                desc=f"MaskGRPO {self.task.name}",
                enabled=progress and main,
            )
            with bar:
                while self.step_count < num_steps:
                    prompts = self.task.sample_prompts(
                        prompts_per_step, self._prompt_seed(self.step_count)
                    )
                    rec: dict[str, Any] = self.step(prompts)
                    done = self.step_count
                    if (
                        eval_prompts is not None
                        and eval_every
                        and (done % eval_every == 0 or done == num_steps)
                    ):
                        rec["eval"] = self.evaluate(eval_prompts)
                    history.append(rec)
                    if appender is not None:
                        appender.append(rec)
                    if callback is not None:
                        callback(rec)
                    if checkpoint_path is not None and (
                        (checkpoint_every and done % checkpoint_every == 0) or done == num_steps
                    ):
                        self.save_checkpoint(checkpoint_path)
                    bar.update(1)
                    bar.set_postfix(reward=f"{rec['reward']:.3f}")
                    if stop_at_reward is not None and rec.get("eval", -1.0) >= stop_at_reward:
                        if checkpoint_path is not None:
                            self.save_checkpoint(checkpoint_path)
                        break
        finally:
            if appender is not None:
                appender.close()
        return history

    def save_checkpoint(self, path: str | os.PathLike[str]) -> Path:
        """Save policy, reference, optimizer, step count and config (atomic replace; with an
        accelerator, the main process writes after every process has arrived)."""
        path = Path(path)
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()
            if not self.accelerator.is_main_process:
                return path
        tmp = path.with_name(path.name + ".tmp")
        torch.save(
            {
                "policy": self.policy.state_dict(),
                "ref_policy": None if self.ref_policy is None else self.ref_policy.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "step": self.step_count,
                "config": dataclasses.asdict(self.config),
            },
            tmp,
        )
        os.replace(tmp, path)
        return path

    def load_checkpoint(self, path: str | os.PathLike[str]) -> int:
        """Restore a :meth:`save_checkpoint` file; returns the step to continue from."""
        path = Path(path)
        if not path.is_file():
            raise OSError(f"checkpoint {path} does not exist")
        try:
            state = torch.load(path, map_location=self.device, weights_only=True)
        except Exception as err:  # pickle, zip and torch errors alike: not a checkpoint
            raise ValueError(
                f"checkpoint {path} is not a readable trainer checkpoint ({err})"
            ) from None
        if not isinstance(state, dict) or not {"policy", "optimizer", "step"} <= set(state):
            raise ValueError(f"checkpoint {path} is not a trainer checkpoint")
        saved = state.get("config")
        if isinstance(saved, dict):  # keys added in later versions take their defaults
            saved = {**dataclasses.asdict(MaskGRPOConfig()), **saved}
        if saved != dataclasses.asdict(self.config):
            raise ValueError(f"checkpoint {path} was written with a different config")
        self.policy.load_state_dict(state["policy"])
        if self.ref_policy is not None:
            self.ref_policy.load_state_dict(state["ref_policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step_count = int(state["step"])
        return self.step_count


def _sample(
    policy: nn.Module, reps: torch.Tensor, task: Task, cfg: MaskGRPOConfig, g: torch.Generator
) -> torch.Tensor:
    if cfg.sampler == "low_confidence":
        return low_confidence_block_sample(
            policy, reps, task.completion_len, task.mask_id, block_length=cfg.block_length,
            steps=cfg.sampling_steps, temperature=cfg.temperature, generator=g,
        )  # fmt: skip
    fn = emerge_sample if cfg.sampler == "emerge" else maskgit_sample
    uncond = getattr(task, "uncond_ids", None) if cfg.cfg_scale else None
    return fn(
        policy, reps, task.completion_len, task.mask_id, steps=cfg.sampling_steps or 12,
        temperature=cfg.temperature, cfg_scale=cfg.cfg_scale, uncond_ids=uncond, generator=g,
    )  # fmt: skip


def _credit_share(w: torch.Tensor, w_all: torch.Tensor, loss_agg: str) -> float:
    """This process's fraction of the global normaliser: credited tokens (token mean) or
    sequences with a credited token (sequence mean)."""
    if loss_agg == "token_mean":
        local, total = float(w.sum()), float(w_all.sum())
    else:
        local, total = float((w.sum(1) > 0).sum()), float((w_all.sum(1) > 0).sum())
    return local / total if total > 0 else 0.0


def _trim_log(path: Path, next_step: int) -> None:
    """Keep only the records of steps before ``next_step`` (atomic rewrite, only if needed)."""
    from iclr26.shared import dumps_json, read_jsonl

    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        records = read_jsonl(path, allow_empty=True)
    except ValueError as err:
        raise ValueError(f"log {path} is not a JSONL training log ({err})") from None
    keep = [r for r in records if isinstance(r.get("step"), int) and r["step"] < next_step]
    if len(keep) == len(records):
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(dumps_json(r, indent=None) + "\n" for r in keep), encoding="utf-8")
    os.replace(tmp, path)
