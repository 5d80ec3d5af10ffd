"""Rollout samplers for masked diffusion policies (spec §2.6). The prompt is never masked.

All samplers take prompts (B, P) long, append ``gen_length`` mask tokens, and return the full
(B, P + gen_length) sequences with no mask token left. Randomness comes from a seeded CPU
:class:`torch.Generator` (float64 Gumbel noise, as LLaDA), so results do not depend on the device.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from iclr26.maskgrpo.policy import policy_logits
from iclr26.maskgrpo.schedules import kappa
from iclr26.shared import check_int, check_range

__all__ = ["emerge_sample", "low_confidence_block_sample", "maskgit_sample"]


def _setup(prompt_ids, gen_length, mask_id, generator):
    if not isinstance(prompt_ids, torch.Tensor) or prompt_ids.dtype != torch.long:
        raise TypeError("prompt_ids must be a torch.LongTensor of token ids")
    if prompt_ids.ndim != 2 or prompt_ids.shape[0] == 0:
        raise ValueError(
            f"prompt_ids must be a non-empty (batch, length), got {tuple(prompt_ids.shape)}"
        )
    check_int(gen_length, "gen_length", low=1)
    check_int(mask_id, "mask_id", low=0)
    if (prompt_ids == mask_id).any():
        raise ValueError("prompt_ids contain the mask token; prompts are never masked")
    if generator is None or isinstance(generator, int):
        g = torch.Generator()
        if generator is None:
            g.seed()
        else:
            g.manual_seed(check_int(generator, "generator", low=0))
        generator = g
    elif not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator, an int seed or None, got {type(generator).__name__}"
        )
    fill = torch.full(
        (prompt_ids.shape[0], gen_length), mask_id, dtype=torch.long, device=prompt_ids.device
    )
    return torch.cat([prompt_ids, fill], dim=1), generator


def _gumbel(shape, generator, device) -> torch.Tensor:
    u = torch.rand(shape, generator=generator, dtype=torch.float64).clamp_(1e-20, 1.0 - 1e-16)
    return (-torch.log(-torch.log(u))).to(device)


def _logits(policy, x, mask_id, cfg_scale, uncond_ids, prompt_len):
    logits = policy_logits(policy, x).double()
    if cfg_scale:
        xu = x.clone()
        xu[:, :prompt_len] = uncond_ids
        un = policy_logits(policy, xu).double()
        logits = (1.0 + cfg_scale) * logits - cfg_scale * un
    logits[..., mask_id] = -math.inf  # never "sample" the mask token
    return logits


def _check_uncond(cfg_scale, uncond_ids, prompt_ids):
    check_range(cfg_scale, "cfg_scale", low=0.0)
    if cfg_scale and uncond_ids is None:
        raise ValueError("uncond_ids (the unconditional prompt) is required when cfg_scale > 0")
    if uncond_ids is not None and (
        not isinstance(uncond_ids, torch.Tensor) or uncond_ids.dtype != torch.long
        or uncond_ids.shape[-1] != prompt_ids.shape[1]
    ):  # fmt: skip
        raise ValueError("uncond_ids must be a long tensor with the prompt's length")


@torch.no_grad()
def low_confidence_block_sample(
    policy: nn.Module,
    prompt_ids: torch.Tensor,
    gen_length: int,
    mask_id: int,
    *,
    block_length: int | None = None,
    steps: int | None = None,
    temperature: float = 0.9,
    generator: torch.Generator | int | None = None,
) -> torch.Tensor:
    """LLaDA's semi-autoregressive low-confidence remasking sampler (``generate``).

    Per block of ``block_length`` tokens and ``steps // num_blocks`` steps: x̂0 = argmax(logit +
    τ·g) with Gumbel noise g (τ = 0: greedy), confidence = softmax probability of x̂0, and the
    n_s most confident masked positions of the current block are unmasked (the block's masked
    count split evenly over its steps, remainder first).

    Args:
        policy: masked-diffusion policy.
        prompt_ids: (B, P) long.
        gen_length: completion length L.
        mask_id: mask token id.
        block_length: block size (default: L, one block); must divide L.
        steps: total denoising steps (default: L); must be a multiple of the number of blocks
            and at most L.
        temperature: Gumbel temperature τ >= 0 (0.9 in the MaskGRPO text scripts).
        generator: CPU generator or integer seed.
    """
    x, g = _setup(prompt_ids, gen_length, mask_id, generator)
    block_length = (
        gen_length if block_length is None else check_int(block_length, "block_length", low=1)
    )
    if gen_length % block_length:
        raise ValueError(f"block_length={block_length} must divide gen_length={gen_length}")
    blocks = gen_length // block_length
    steps = gen_length if steps is None else check_int(steps, "steps", low=1, high=gen_length)
    if steps % blocks:
        raise ValueError(f"steps={steps} must be a multiple of the number of blocks ({blocks})")
    tau = check_range(temperature, "temperature", low=0.0)
    per_block = steps // blocks
    p = prompt_ids.shape[1]
    base, rem = divmod(block_length, per_block)
    counts = [base + (1 if i < rem else 0) for i in range(per_block)]
    for b in range(blocks):
        lo, hi = p + b * block_length, p + (b + 1) * block_length
        for n_s in counts:
            if n_s == 0:
                continue
            # only the current block can be unmasked: the float64 work (Gumbel, softmax,
            # top-k) runs on its positions; the uniforms are still drawn for the whole
            # sequence so that the random stream (and every sample) is that of the full draw
            out = policy_logits(policy, x)
            logits = out[:, lo:hi].double()
            logits[..., mask_id] = -math.inf
            if tau > 0:
                full = (x.shape[0], x.shape[1], out.shape[-1])
                u = torch.rand(full, generator=g, dtype=torch.float64)[:, lo:hi]
                u = u.clamp_(1e-20, 1.0 - 1e-16).log_().neg_().log_().neg_().to(x.device)
                x0 = (logits + tau * u).argmax(-1)
            else:
                x0 = logits.argmax(-1)
            conf = torch.softmax(logits, -1).gather(-1, x0[..., None]).squeeze(-1)
            masked = x[:, lo:hi] == mask_id
            conf = torch.where(masked, conf, -math.inf)
            top = conf.topk(n_s, dim=1).indices
            sel = torch.zeros_like(masked).scatter_(1, top, True) & masked
            x[:, lo:hi] = torch.where(sel, x0, x[:, lo:hi])
    return x


@torch.no_grad()
def emerge_sample(
    policy: nn.Module,
    prompt_ids: torch.Tensor,
    gen_length: int,
    mask_id: int,
    *,
    steps: int = 12,
    schedule: str = "cosine",
    temperature: float = 1.0,
    cfg_scale: float = 0.0,
    uncond_ids: torch.Tensor | None = None,
    generator: torch.Generator | int | None = None,
) -> torch.Tensor:
    """The "emerge" sampler of MaskGRPO (``t2i_generate_emerge``), an MDLM ancestral sampler.

    From step s to s + 1 each still-masked token independently becomes a sample of
    softmax(logits/τ) with probability (κ_s − κ_{s+1})/κ_s, κ_s = cos(π/2·s/T); the last step
    fills every remaining position. Classifier-free guidance: (1 + w)·cond − w·uncond
    (w = 3 in the release; 0 here by default, as the toy tasks have no unconditional training).

    Args:
        policy, prompt_ids, gen_length, mask_id: as :func:`low_confidence_block_sample`.
        steps: T (12 in the release).
        schedule: ``"cosine"`` or ``"linear"`` κ.
        temperature: τ > 0 of the categorical draw.
        cfg_scale: guidance weight w >= 0.
        uncond_ids: (P,) or (B, P) unconditional prompt ids, required when ``cfg_scale > 0``.
        generator: CPU generator or integer seed.
    """
    x, g = _setup(prompt_ids, gen_length, mask_id, generator)
    check_int(steps, "steps", low=1)
    tau = check_range(temperature, "temperature", low=0.0, low_inclusive=False)
    _check_uncond(cfg_scale, uncond_ids, prompt_ids)
    p = prompt_ids.shape[1]
    for s in range(steps):
        k_now, k_next = kappa(s, steps, schedule), kappa(s + 1, steps, schedule)
        reveal_p = 1.0 if s == steps - 1 else (k_now - k_next) / k_now
        logits = _logits(policy, x, mask_id, cfg_scale, uncond_ids, p)
        sample = (logits / tau + _gumbel(logits.shape, g, x.device)).argmax(-1)
        u = torch.rand(x.shape, generator=g, dtype=torch.float64).to(x.device)
        reveal = (x == mask_id) & (u < reveal_p)
        reveal[:, :p] = False
        x = torch.where(reveal, sample, x)
    return x


@torch.no_grad()
def maskgit_sample(
    policy: nn.Module,
    prompt_ids: torch.Tensor,
    gen_length: int,
    mask_id: int,
    *,
    steps: int = 12,
    temperature: float = 1.0,
    choice_temperature: float = 4.5,
    cfg_scale: float = 0.0,
    uncond_ids: torch.Tensor | None = None,
    generator: torch.Generator | int | None = None,
) -> torch.Tensor:
    """MaskGIT sampler (``t2i_generate``), the one the emerge sampler replaces.

    Each step samples every masked token, then re-masks the floor(L·cos(π/2·(s+1)/T)) sampled
    tokens of lowest confidence (log-probability plus Gumbel noise annealed as
    ``choice_temperature``·(1 − (s+1)/T)), keeping at least one token masked until the last
    step. Arguments as :func:`emerge_sample`.
    """
    x, g = _setup(prompt_ids, gen_length, mask_id, generator)
    check_int(steps, "steps", low=1)
    tau = check_range(temperature, "temperature", low=0.0, low_inclusive=False)
    check_range(choice_temperature, "choice_temperature", low=0.0)
    _check_uncond(cfg_scale, uncond_ids, prompt_ids)
    p = prompt_ids.shape[1]
    for s in range(steps):
        logits = _logits(policy, x, mask_id, cfg_scale, uncond_ids, p)
        sample = (logits / tau + _gumbel(logits.shape, g, x.device)).argmax(-1)
        masked = x == mask_id
        cand = torch.where(masked, sample, x)
        if s == steps - 1:
            x = cand
            break
        logp = torch.log_softmax(logits / tau, -1).gather(-1, sample[..., None]).squeeze(-1)
        anneal = choice_temperature * (1.0 - (s + 1) / steps)
        conf = logp + anneal * _gumbel(logp.shape, g, x.device)
        conf = torch.where(masked, conf, math.inf)
        n_left = masked.sum(1)
        n_mask = torch.clamp(
            torch.full_like(
                n_left, math.floor(gen_length * math.cos(math.pi / 2 * (s + 1) / steps))
            ),
            max=n_left - 1,
        ).clamp_min(0)
        order = conf.argsort(dim=1)
        rank = torch.empty_like(order).scatter_(
            1, order, torch.arange(x.shape[1], device=x.device).expand_as(order)
        )
        remask = (rank < n_mask[:, None]) & masked
        x = torch.where(remask, mask_id, cand)
    return x
