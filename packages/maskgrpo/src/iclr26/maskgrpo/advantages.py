"""Group-relative advantages of GRPO (spec §2.1)."""

from __future__ import annotations

import torch

from iclr26.shared import check_choice, check_int

__all__ = ["group_advantages", "rank_rewards"]

SCALES = ("group", "none", "rank")


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if not isinstance(rewards, torch.Tensor):
        raise TypeError(f"rewards must be a torch.Tensor, got {type(rewards).__name__}")
    if rewards.ndim != 1:
        raise ValueError(
            f"rewards must be 1-D (num_prompts * group_size,), got {tuple(rewards.shape)}"
        )
    if not rewards.is_floating_point():
        rewards = rewards.double()
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards must be finite, got NaN or inf")
    check_int(group_size, "group_size", low=2)
    if rewards.numel() == 0 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards has {rewards.numel()} entries, not a positive multiple of group_size={group_size}"
        )
    return rewards.view(-1, group_size)


def rank_rewards(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Rank ("pref") rewards r_i ← (G − 1 − rank_i)/(G − 1) within each group: best 1, worst 0.

    Ties get the mean of the ranks they span (the released code's unstable argsort leaves tie
    order unspecified), so equal rewards always get equal rank rewards and a constant group stays
    constant.
    """
    r = _grouped(rewards, group_size)
    greater = (r[:, None, :] > r[:, :, None]).sum(-1)  # how many beat i
    equal = (r[:, None, :] == r[:, :, None]).sum(-1)  # ties, i included
    rank = greater + (equal - 1) / 2.0
    return ((group_size - 1 - rank) / (group_size - 1)).reshape(-1).to(r.dtype)


def group_advantages(
    rewards: torch.Tensor, group_size: int, scale: str = "group", eps: float = 1e-5
) -> torch.Tensor:
    """A_i = (r_i − mean_G r) / (std_G r + eps) per group of ``group_size`` consecutive rollouts.

    Args:
        rewards: (N,) rewards, N = num_prompts · G, groups contiguous.
        group_size: G >= 2.
        scale: ``"group"`` (GRPO: divide by the group std, torch ``.std()``, ddof = 1),
            ``"none"`` (centre only, Dr.GRPO style), ``"rank"`` (rank rewards, then ``"group"``).
        eps: added to the std (1e-5 in the released code).

    Returns:
        (N,) advantages; a group whose rewards are all equal gets exactly 0 (never NaN).
    """
    check_choice(scale, "scale", SCALES)
    r = _grouped(rewards, group_size)
    if scale == "rank":
        r = rank_rewards(rewards, group_size).view(-1, group_size)
    centred = r - r.mean(dim=1, keepdim=True)
    constant = (r.amax(dim=1) == r.amin(dim=1))[:, None]
    centred = torch.where(constant, torch.zeros_like(centred), centred)
    if scale != "none":
        centred = centred / (r.std(dim=1, keepdim=True) + eps)
    return centred.reshape(-1)
