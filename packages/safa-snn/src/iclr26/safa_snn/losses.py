"""TET loss (Deng et al., ICLR 2022), the official base-session objective."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = ["tet_loss"]


def tet_loss(outputs: Tensor, y: Tensor, lamb: float = 0.05, phi: float = 5.0) -> Tensor:
    """``(1 − λ) (1/T) Σ_t CE(o_t, y) + λ MSE(o, φ)`` on per-step logits ``outputs [B, T, K]``.

    Defaults are the official ``lamb = 0.05`` and ``means = 5``.
    """
    if not isinstance(outputs, Tensor) or outputs.ndim != 3:
        raise ValueError(
            f"outputs must be a [B, T, K] tensor, got {getattr(outputs, 'shape', outputs)}"
        )
    if not isinstance(y, Tensor) or y.dtype not in (torch.int64, torch.int32):
        raise TypeError("y must be an integer torch.Tensor of class indices")
    if y.shape != outputs.shape[:1]:
        raise ValueError(f"y must have shape ({outputs.shape[0]},), got {tuple(y.shape)}")
    if not 0.0 <= lamb <= 1.0:
        raise ValueError(f"lamb must be in [0, 1], got {lamb}")
    B, T, K = outputs.shape
    ce = F.cross_entropy(outputs.reshape(B * T, K), y.long().repeat_interleave(T))
    mse = F.mse_loss(outputs, torch.full_like(outputs, phi))
    return (1.0 - lamb) * ce + lamb * mse
