"""Seeded re-masking of rollouts for the importance ratio (spec §2.3–2.4).

Every function takes full sequences ``seqs`` (B, T) = prompt (B, P) ‖ completion (B, L), returns
the noised sequences and the (B, L) boolean mask of completion positions that were masked, and
draws its uniforms on the CPU from a seeded :class:`torch.Generator`, so the same seed gives the
same mask on every device and in every pass (old policy, reference, current policy).
"""

from __future__ import annotations

import numpy as np
import torch

from iclr26.shared import check_int, check_range

__all__ = [
    "ar_like_keep_probs",
    "ar_like_remask",
    "d1_perturb",
    "iteration_seed",
    "random_remask",
]


def iteration_seed(seed: int, step: int, iteration: int) -> int:
    """The mask seed s_μ of inner iteration ``iteration`` of training step ``step``.

    Fixed per (seed, step, iteration) and shared by the old-policy, reference and current-policy
    passes (the paper's "fixed random seed mechanism"); different iterations get different seeds.
    """
    for v, n in ((seed, "seed"), (step, "step"), (iteration, "iteration")):
        check_int(v, n, low=0)
    return int(np.random.SeedSequence([seed, step, iteration, 0x6D61736B]).generate_state(1)[0])


def _generator(generator: torch.Generator | int | None) -> torch.Generator:
    if isinstance(generator, torch.Generator):
        return generator
    g = torch.Generator()
    if generator is None:
        g.seed()
    else:
        g.manual_seed(check_int(generator, "generator", low=0))
    return g


def _check_seqs(seqs: torch.Tensor, prompt_len: int, mask_id: int) -> int:
    if not isinstance(seqs, torch.Tensor):
        raise TypeError(f"seqs must be a torch.LongTensor, got {type(seqs).__name__}")
    if seqs.dtype != torch.long:
        raise TypeError(f"seqs must hold integer token ids (torch.long), got {seqs.dtype}")
    if seqs.ndim != 2:
        raise ValueError(f"seqs must have shape (batch, length), got {tuple(seqs.shape)}")
    check_int(prompt_len, "prompt_len", low=0, high=seqs.shape[1] - 1)
    check_int(mask_id, "mask_id", low=0)
    if seqs.shape[0] == 0:
        raise ValueError("seqs must not be empty")
    return seqs.shape[1] - prompt_len


def ar_like_keep_probs(length: int, ratio: float) -> torch.Tensor:
    """Keep probabilities q_k of the AR-like ("fading-out") remask, shape (length,) float64.

    w_k = 1 − k/(n−1) for k = 0..n−1 (w = 1 when n = 1) and q_k = min(1, w_k (1 − t) n / Σ w):
    early tokens stay visible, the last one is always masked, and the expected masked fraction is
    t whenever no q_k is clamped (t >= 0.5).
    """
    check_int(length, "length", low=1)
    check_range(ratio, "ratio", low=0.0, high=1.0)
    k = torch.arange(length, dtype=torch.float64)
    w = 1.0 - k / (length - 1) if length > 1 else torch.ones(1, dtype=torch.float64)
    return torch.clamp(w * (1.0 - ratio) * length / w.sum(), max=1.0)


def ar_like_remask(
    seqs: torch.Tensor,
    prompt_len: int,
    ratio: float,
    mask_id: int,
    generator: torch.Generator | int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AR-like re-mask of the completion (MaskGRPO text estimator, ``remask_ar`` in the code).

    Token k of the completion is masked iff U_k > q_k with q from :func:`ar_like_keep_probs`;
    the prompt is never masked. The released code warns that it behaves poorly for t < 0.3.

    Args:
        seqs: (B, P + L) long token ids.
        prompt_len: P.
        ratio: mask ratio t_μ in [0, 1] (from :func:`~iclr26.maskgrpo.mask_ratio_schedule`).
        mask_id: id of the absorbing mask token.
        generator: CPU generator or integer seed (s_μ); ``None``: fresh entropy.

    Returns:
        ``(noised, mask)``: (B, P + L) long ids and the (B, L) bool mask of masked positions.
    """
    length = _check_seqs(seqs, prompt_len, mask_id)
    q = ar_like_keep_probs(length, ratio)
    u = torch.rand(seqs.shape[0], length, generator=_generator(generator), dtype=torch.float64)
    mask = (u > q).to(seqs.device)
    return _apply(seqs, prompt_len, mask, mask_id), mask


def random_remask(
    seqs: torch.Tensor,
    prompt_len: int,
    ratio: float,
    mask_id: int,
    generator: torch.Generator | int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random re-mask: each completion token masked i.i.d. with probability ``ratio``.

    The MaskGRPO image estimator (``remask_t2i``) and, with t ~ U(0, 1) per pass, the
    UniGRPO-style uniform remasking baseline. Arguments and returns as :func:`ar_like_remask`.
    """
    length = _check_seqs(seqs, prompt_len, mask_id)
    check_range(ratio, "ratio", low=0.0, high=1.0)
    u = torch.rand(seqs.shape[0], length, generator=_generator(generator), dtype=torch.float64)
    mask = (u < ratio).to(seqs.device)
    return _apply(seqs, prompt_len, mask, mask_id), mask


def d1_perturb(
    seqs: torch.Tensor,
    prompt_len: int,
    p_mask_prompt: float,
    mask_id: int,
    generator: torch.Generator | int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """diffu-GRPO (d1) input perturbation: the whole completion masked, each prompt token masked
    with probability ``p_mask_prompt`` (0.15 in d1's training config).

    Returns ``(noised, mask)`` with ``mask`` all True over the completion (every completion token
    is scored in one mean-field pass).
    """
    length = _check_seqs(seqs, prompt_len, mask_id)
    check_range(p_mask_prompt, "p_mask_prompt", low=0.0, high=1.0)
    u = torch.rand(seqs.shape[0], prompt_len, generator=_generator(generator), dtype=torch.float64)
    prompt_mask = (u < p_mask_prompt).to(seqs.device)
    noised = seqs.clone()
    noised[:, :prompt_len] = torch.where(prompt_mask, mask_id, seqs[:, :prompt_len])
    noised[:, prompt_len:] = mask_id
    return noised, torch.ones(seqs.shape[0], length, dtype=torch.bool, device=seqs.device)


def _apply(seqs: torch.Tensor, prompt_len: int, mask: torch.Tensor, mask_id: int) -> torch.Tensor:
    noised = seqs.clone()
    noised[:, prompt_len:] = torch.where(mask, mask_id, seqs[:, prompt_len:])
    return noised
