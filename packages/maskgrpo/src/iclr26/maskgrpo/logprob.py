"""Per-token log-likelihoods of the clean completion under a masked-diffusion policy."""

from __future__ import annotations

import torch
from torch import nn

from iclr26.maskgrpo.policy import policy_logits
from iclr26.shared import check_int

__all__ = ["masked_token_logps"]


def masked_token_logps(
    policy: nn.Module, noised: torch.Tensor, targets: torch.Tensor, prompt_len: int
) -> torch.Tensor:
    """l_θ(k) = log π_θ(o_k | o^t, c) for every completion position k (spec §2.4 step 3).

    One forward pass on the noised sequences; the caller restricts credit to the masked set.

    Args:
        policy: masked-diffusion policy (see :func:`~iclr26.maskgrpo.policy_logits`).
        noised: (B, P + L) long, the re-masked sequences.
        targets: (B, P + L) long, the clean sequences (prompt ‖ sampled completion).
        prompt_len: P.

    Returns:
        (B, L) log-probabilities (float32, or float64 for a float64 policy), differentiable in θ.
    """
    if not isinstance(targets, torch.Tensor) or targets.dtype != torch.long:
        raise TypeError("targets must be a torch.LongTensor of token ids")
    if not isinstance(noised, torch.Tensor) or noised.shape != targets.shape:
        raise ValueError(
            f"noised must be a tensor shaped like targets {tuple(targets.shape)}, got "
            f"{tuple(getattr(noised, 'shape', ()))}"
        )
    check_int(prompt_len, "prompt_len", low=0, high=targets.shape[1] - 1)
    logits = policy_logits(policy, noised)[:, prompt_len:]
    if logits.dtype not in (torch.float32, torch.float64):  # half precision: upcast first
        logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, targets[:, prompt_len:, None]).squeeze(-1)
