"""Gates over structural units: the hard-concrete distribution (Louizos et al., 2018) as EcoDiff
samples it, its deterministic and binary limits, a sigmoid gate, and the regularisers.

The hard-concrete gate of one module with logits ``λ`` (one per unit) is

    u ~ U(0, 1)^n
    s = sigmoid((log(u + e) - log(1 - u + e) + λ) / b)          b = 0.83
    m = clamp(s · (ζ - γ) + γ, 0, 1)                            γ = -0.1, ζ = 1.1

where ``e`` is the official code's ``masking_eps`` (0.5 for SDXL, 0.1 for FLUX). With e > 0 the
logistic noise is confined to ``[-ln((1+e)/e), ln((1+e)/e)]``: ``e`` damps the noise, it is not
only a numerical epsilon.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

__all__ = [
    "GAMMA",
    "GATES",
    "REGULARIZERS",
    "TEMPERATURE",
    "ZETA",
    "deterministic_gate",
    "hard_concrete",
    "regularizer",
]

GAMMA = -0.1
ZETA = 1.1
TEMPERATURE = 0.83
GATES = ("hard_concrete", "sigmoid")
REGULARIZERS = ("l1", "bounded_l1", "l0", "l2", "bounded_l2")


def hard_concrete(
    logits: torch.Tensor,
    u: torch.Tensor,
    *,
    eps: float = 0.5,
    temperature: float = TEMPERATURE,
    gamma: float = GAMMA,
    zeta: float = ZETA,
) -> torch.Tensor:
    """One draw of the stretched-and-clamped hard-concrete gate (spec §2.2).

    Args:
        logits: ``λ``, any shape, floating.
        u: uniform noise in ``[0, 1]`` broadcastable to ``logits`` (draw it once per trajectory so
            the recomputed step of the backward sweep sees the same mask).
        eps: the official ``masking_eps`` ``e`` (0.5 SDXL, 0.1 FLUX, 0 = textbook hard concrete).
        temperature: ``b`` (0.83).
        gamma, zeta: stretch interval (-0.1, 1.1).

    Returns:
        ``m`` in ``[0, 1]``, same shape as ``logits``.
    """
    noise = torch.log(u + eps) - torch.log(1 - u + eps)
    s = torch.sigmoid((noise + logits) / temperature)
    return torch.clamp(s * (zeta - gamma) + gamma, 0.0, 1.0)


def deterministic_gate(
    logits: torch.Tensor,
    *,
    temperature: float = TEMPERATURE,
    gamma: float = GAMMA,
    zeta: float = ZETA,
) -> torch.Tensor:
    """The noise-free hard-concrete gate (``u = 1/2``): ``clamp(sigmoid(λ/b)(ζ-γ)+γ, 0, 1)``.

    Exactly 1 for ``λ >= b·ln((1-γ)/(ζ-1))`` (≈ 1.82), so large logits give the dense model bit
    for bit.
    """
    s = torch.sigmoid(logits / temperature)
    return torch.clamp(s * (zeta - gamma) + gamma, 0.0, 1.0)


def _unit_penalty(
    logits: torch.Tensor, kind: str, alpha: float, shift: float, temperature: float
) -> torch.Tensor:
    if kind == "l1":
        return logits.abs().sum() / logits.numel()
    if kind == "l2":  # the official ``lamb.norm(2) / len(lamb)``: the norm, not its square
        return torch.linalg.vector_norm(logits) / logits.numel()
    if kind == "bounded_l1":
        return torch.sigmoid(alpha * logits + shift).sum() / logits.numel()
    if kind == "bounded_l2":
        return torch.linalg.vector_norm(torch.sigmoid(alpha * logits + shift)) / logits.numel()
    if kind == "l0":
        # expected number of open gates (undamped noise); summed, not divided by n_l (official form)
        return torch.sigmoid(logits - temperature * math.log(-GAMMA / ZETA)).sum()
    raise ValueError(f"reg must be one of {REGULARIZERS}, got {kind!r}")


def regularizer(
    logits: Iterable[torch.Tensor],
    kind: str = "l1",
    *,
    alpha: float = 0.4,
    shift: float = 1.0,
    temperature: float = TEMPERATURE,
) -> torch.Tensor:
    """``R(λ)`` averaged over modules (spec §2.3, official ``calculate_reg_loss``).

    * ``"l1"``: ``mean_l ||λ_l||_1 / n_l`` (SDXL default).
    * ``"bounded_l1"``: ``mean_l ||sigmoid(α λ_l + b0)||_1 / n_l`` (FLUX default, α = 0.4, b0 = 1).
    * ``"l0"``: ``mean_l Σ_k sigmoid(λ_lk - b ln(-γ/ζ))`` (summed per module, not divided by n_l).
    * ``"l2"``, ``"bounded_l2"``: ``mean_l ||·||_2 / n_l``, the Euclidean norm (not its square)
      of ``λ_l`` or of ``sigmoid(α λ_l + b0)``, as the official ``lamb.norm(2) / len(lamb)``.

    Args:
        logits: one 1-D logit tensor per module (non-empty).
        kind: one of :data:`REGULARIZERS`.
    """
    if kind not in REGULARIZERS:
        raise ValueError(f"reg must be one of {REGULARIZERS}, got {kind!r}")
    terms = [_unit_penalty(t, kind, alpha, shift, temperature) for t in logits]
    if not terms:
        raise ValueError("logits must hold at least one module's logits")
    return torch.stack(terms).mean()
