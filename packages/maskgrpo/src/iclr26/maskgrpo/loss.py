"""The MaskGRPO objective: clipped surrogate on masked tokens, k3 KL, sign-aware log-ratio clip."""

from __future__ import annotations

from typing import NamedTuple

import torch

from iclr26.shared import check_choice, check_range

__all__ = [
    "AGGREGATIONS",
    "LossInputs",
    "check_loss_inputs",
    "clipped_surrogate",
    "gmpo_surrogate",
    "k3_kl",
]

#: loss aggregations: one mean over every credited token, or a mean per sequence first.
AGGREGATIONS = ("token_mean", "seq_mean")


def k3_kl(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """k3 estimator of KL(π_θ ‖ π_ref) per token: exp(l_ref − l_θ) − (l_ref − l_θ) − 1 (>= 0)."""
    _check_pair(logps, ref_logps, "ref_logps")
    d = ref_logps - logps
    return torch.exp(d) - d - 1.0


def _check_pair(logps: torch.Tensor, other: torch.Tensor, name: str) -> None:
    if not isinstance(logps, torch.Tensor) or not logps.is_floating_point():
        raise TypeError("logps must be a floating-point torch.Tensor")
    if not isinstance(other, torch.Tensor) or other.shape != logps.shape:
        raise ValueError(
            f"{name} must be a tensor shaped like logps {tuple(logps.shape)}, got "
            f"{tuple(getattr(other, 'shape', ()))}"
        )


class LossInputs(NamedTuple):
    """Validated settings of a GRPO loss call (see :func:`check_loss_inputs`)."""

    weights: torch.Tensor
    epsilon_low: float
    epsilon_high: float
    beta: float


def check_loss_inputs(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    loss_agg: str = "token_mean",
    binary_mask: bool = False,
) -> LossInputs:
    """The one input validation of every GRPO loss of the package (ours and TRL's parity run).

    Checks: ``logps`` a (B, L) floating tensor; ``old_logps`` (and ``ref_logps`` when
    ``beta > 0``, where it is required) tensors shaped like it; all three finite; ``advantages``
    a finite (B,) tensor; ``mask`` (B, L) of finite non-negative weights (0/1 only with
    ``binary_mask``); ``epsilon`` > 0, ``epsilon_high`` > 0 or ``None`` (= ``epsilon``),
    ``beta`` >= 0, ``loss_agg`` one of :data:`AGGREGATIONS`. Raises ``TypeError``/``ValueError``
    naming the argument.

    Returns:
        :class:`LossInputs`: the mask as weights in ``logps``'s dtype, the clip range and β.
    """
    if not isinstance(logps, torch.Tensor) or not logps.is_floating_point():
        raise TypeError("logps must be a floating-point torch.Tensor")
    if logps.ndim != 2:
        raise ValueError(f"logps must be (batch, completion_length), got {tuple(logps.shape)}")
    _check_pair(logps, old_logps, "old_logps")
    if not isinstance(advantages, torch.Tensor) or advantages.shape != logps.shape[:1]:
        raise ValueError(
            f"advantages must be a tensor of shape ({logps.shape[0]},), got "
            f"{tuple(getattr(advantages, 'shape', ()))}"
        )
    if not isinstance(mask, torch.Tensor) or mask.shape != logps.shape:
        raise ValueError(
            f"mask must be a bool or weight tensor shaped like logps {tuple(logps.shape)}, got "
            f"{tuple(getattr(mask, 'shape', ()))}"
        )
    eps_lo = check_range(epsilon, "epsilon", low=0.0, low_inclusive=False)
    eps_hi = eps_lo if epsilon_high is None else check_range(
        epsilon_high, "epsilon_high", low=0.0, low_inclusive=False
    )  # fmt: skip
    beta = check_range(beta, "beta", low=0.0)
    check_choice(loss_agg, "loss_agg", AGGREGATIONS)
    if beta > 0:
        if ref_logps is None:
            raise ValueError("ref_logps is required when beta > 0")
        _check_pair(logps, ref_logps, "ref_logps")
    for name, t in (("logps", logps), ("old_logps", old_logps), ("advantages", advantages)):
        if not torch.isfinite(t.detach()).all():
            raise ValueError(f"{name} must be finite (no NaN or inf)")
    if beta > 0 and not torch.isfinite(ref_logps.detach()).all():
        raise ValueError("ref_logps must be finite (no NaN or inf)")
    w = mask.to(logps.dtype)
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError("mask weights must be finite and non-negative")
    if binary_mask and not ((w == 0) | (w == 1)).all():
        raise ValueError("mask must be 0/1 here (TRL's completion_mask is binary)")
    return LossInputs(w, float(eps_lo), float(eps_hi), float(beta))


def _aggregate(per_token: torch.Tensor, w: torch.Tensor, loss_agg: str) -> torch.Tensor:
    if loss_agg == "token_mean":  # DAPO-style: one mean over every credited token in the batch
        return (per_token * w).sum() / w.sum().clamp_min(1e-12)
    per_seq = (per_token * w).sum(1) / w.sum(1).clamp_min(1e-12)
    return per_seq[w.sum(1) > 0].mean() if (w.sum(1) > 0).any() else per_seq.sum() * 0.0


def clipped_surrogate(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    loss_agg: str = "token_mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO loss on the credited (masked) tokens, spec §2.5 (``mean_method: grpo``).

    J = −(1/Σ w) Σ_i Σ_k w_ik [min(ρ_ik A_i, clip(ρ_ik, 1 − ε, 1 + ε_high) A_i) − β KL_ik],
    ρ = exp(l_θ − l_old), KL = :func:`k3_kl` to the reference on the same masked input.

    Args:
        logps: (B, L) l_θ, differentiable.
        old_logps: (B, L) l_old (detached; equal to ``logps`` at θ = θ_old).
        advantages: (B,) A_i.
        mask: (B, L) bool credit mask (the masked set K_μ) or non-negative float weights.
        epsilon, epsilon_high: clip range (0.2 in MaskGRPO, 0.5 in d1; ``epsilon_high``
            defaults to ``epsilon``).
        ref_logps: (B, L) reference log-probs; required when ``beta > 0``.
        beta: KL weight (0.01 in MaskGRPO, 0.04 in d1).
        loss_agg: ``"token_mean"`` (the paper's) or ``"seq_mean"`` (mean per sequence first).

    Returns:
        ``(loss, stats)``: scalar loss and floats ``clip_frac`` (credited tokens whose ratio is
        clipped on the side that binds), ``kl`` (credited mean), ``ratio_mean``.
    """
    w, eps_lo, eps_hi, beta = check_loss_inputs(
        logps, old_logps, advantages, mask, epsilon=epsilon, epsilon_high=epsilon_high,
        ref_logps=ref_logps, beta=beta, loss_agg=loss_agg,
    )  # fmt: skip
    ratio = torch.exp(logps - old_logps.detach())
    a = advantages.to(logps.dtype)[:, None]
    surr = torch.minimum(ratio * a, torch.clamp(ratio, 1.0 - eps_lo, 1.0 + eps_hi) * a)
    per_token = -surr
    kl = None
    if beta > 0:
        kl = k3_kl(logps, ref_logps.detach())
        per_token = per_token + beta * kl
    loss = _aggregate(per_token, w, loss_agg)
    with torch.no_grad():
        clipped = ((ratio < 1 - eps_lo) & (a < 0)) | ((ratio > 1 + eps_hi) & (a > 0))
        denom = w.sum().clamp_min(1e-12)
        stats = {
            "clip_frac": float((clipped * w).sum() / denom),
            "kl": float((kl * w).sum() / denom) if kl is not None else 0.0,
            "ratio_mean": float((ratio * w).sum() / denom),
        }
    return loss, stats


def gmpo_surrogate(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon: float = 0.2,
    ref_logps: torch.Tensor | None = None,
    beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Sign-aware clipping in log-ratio space (the released ``gmpo``/``gspo`` mode, spec §2.5).

    Per token Δ = l_θ − l_old and s = sgn(A): s·Δ is clipped one-sidedly at ε
    (Δ' = s·min(s·Δ, ε)), the sequence ratio is the geometric mean exp(mean_k Δ'_k) over the
    credited tokens, and J = −mean_i [A_i exp(mean_k Δ'_ik)] + β·(token-mean k3 KL).
    Arguments and returns as :func:`clipped_surrogate`.
    """
    w, eps, _, beta = check_loss_inputs(
        logps, old_logps, advantages, mask, epsilon=epsilon, ref_logps=ref_logps, beta=beta
    )
    a = advantages.to(logps.dtype)
    s = torch.sign(a)[:, None]
    delta = logps - old_logps.detach()
    clipped_delta = s * torch.clamp(s * delta, max=eps)
    n = w.sum(1)
    mean_delta = (clipped_delta * w).sum(1) / n.clamp_min(1e-12)
    has = n > 0
    seq_obj = a * torch.exp(mean_delta)
    loss = -(seq_obj[has].mean() if has.any() else seq_obj.sum() * 0.0)
    kl = None
    if beta > 0:
        kl = k3_kl(logps, ref_logps.detach())
        loss = loss + beta * _aggregate(kl, w, "token_mean")
    with torch.no_grad():
        denom = w.sum().clamp_min(1e-12)
        clipped = (s * delta > eps) & (s != 0)
        stats = {
            "clip_frac": float((clipped * w).sum() / denom),
            "kl": float((kl * w).sum() / denom) if kl is not None else 0.0,
            "ratio_mean": float((torch.exp(delta) * w).sum() / denom),
        }
    return loss, stats
