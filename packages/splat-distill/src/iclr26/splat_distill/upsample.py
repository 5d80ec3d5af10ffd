"""Mask-aware feature upsampling (Sec. 3.1) and semantic blending with instance-mask means (Sec. 3.3)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

__all__ = ["mask_aware_upsample", "semantic_blend"]


def _check_mask(mask, name: str, shape: tuple[int, int] | None = None) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype.is_floating_point or mask.dtype.is_complex or mask.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer labels, got {mask.dtype}")
    if mask.ndim != 2:
        raise ValueError(f"{name} must be [H, W], got {list(mask.shape)}")
    if shape is not None and tuple(mask.shape) != shape:
        raise ValueError(f"{name} has size {tuple(mask.shape)}, expected {shape}")
    return mask


def _check_features(f, name: str) -> Tensor:
    if not isinstance(f, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(f).__name__}")
    if f.ndim != 3:
        raise ValueError(f"{name} must be [C, H, W], got {list(f.shape)}")
    if not f.is_floating_point():
        raise TypeError(f"{name} must be floating point, got {f.dtype}")
    if f.numel() == 0:
        raise ValueError(f"{name} is empty")
    if not torch.isfinite(f).all():
        raise ValueError(f"{name} contains NaN or inf")
    return f


def _axis(n_hi: int, n_lo: int, device, dtype):
    """Align-corners source coordinate of every HR index: low neighbour, high neighbour, weight."""
    if n_lo == 1 or n_hi == 1:
        pos = torch.zeros(n_hi, device=device, dtype=dtype)
    else:
        pos = torch.arange(n_hi, device=device, dtype=dtype) * ((n_lo - 1) / (n_hi - 1))
    lo = pos.floor().long().clamp(0, n_lo - 1)
    hi = (lo + 1).clamp(max=n_lo - 1)
    return lo, hi, pos - lo.to(dtype)


def mask_aware_upsample(
    f_lo: Tensor,
    mask_hi: Tensor,
    *,
    fallback: Literal["zero", "bilinear"] = "zero",
) -> Tensor:
    """Bilinear upsampling that only mixes low-resolution features of the pixel's own mask label.

        F_hi(u) = Σ_{v∈N4(u)} w_uv 1[m(v) = m(u)] F_lo(v) / Σ_{v∈N4(u)} w_uv 1[m(v) = m(u)]

    ``w_uv`` are bilinear weights on an align-corners grid; ``m(v)`` is the high-resolution mask
    sampled (nearest) at the low-resolution grid positions (official ``mask_aware_bilinear_
    upsample_hr_mask``).

    Args:
        f_lo: low-resolution features [C, h, w] (e.g. ViT patch tokens).
        mask_hi: integer instance labels [H, W] of the high-resolution image.
        fallback: where no neighbour shares the pixel's label: ``"zero"`` (the official code,
            which divides by 1 and returns a zero feature) or ``"bilinear"`` (plain bilinear).

    Returns:
        [C, H, W]; with a constant mask it equals ``F.interpolate(..., "bilinear",
        align_corners=True)``.
    """
    _check_features(f_lo, "f_lo")
    _check_mask(mask_hi, "mask_hi")
    if fallback not in ("zero", "bilinear"):
        raise ValueError(f"fallback must be 'zero' or 'bilinear', got {fallback!r}")
    C, h, w = f_lo.shape
    H, W = mask_hi.shape
    dev, dt = f_lo.device, f_lo.dtype
    y0, y1, wy = _axis(H, h, dev, dt)
    x0, x1, wx = _axis(W, w, dev, dt)
    # labels of the low-res nodes: the HR mask at their (align-corners) positions, nearest
    ry = torch.round(torch.arange(h, device=dev, dtype=dt) * ((H - 1) / max(h - 1, 1))).long()
    rx = torch.round(torch.arange(w, device=dev, dtype=dt) * ((W - 1) / max(w - 1, 1))).long()
    m_lo = mask_hi.to(dev)[ry][:, rx]
    m = mask_hi.to(dev)
    num = torch.zeros(C, H, W, device=dev, dtype=dt)
    den = torch.zeros(H, W, device=dev, dtype=dt)
    plain = torch.zeros(C, H, W, device=dev, dtype=dt)
    for yy, wyy in ((y0, 1 - wy), (y1, wy)):
        for xx, wxx in ((x0, 1 - wx), (x1, wx)):
            wgt = wyy[:, None] * wxx[None, :]
            feat = f_lo[:, yy][:, :, xx]
            same = (m_lo[yy][:, xx] == m).to(dt)
            num = num + feat * (wgt * same)
            den = den + wgt * same
            plain = plain + feat * wgt
    ok = den > 0
    out = num / torch.where(ok, den, torch.ones_like(den))
    if fallback == "bilinear":
        out = torch.where(ok, out, plain)
    return out


def semantic_blend(
    f: Tensor, mask: Tensor, alpha: float = 0.5, weight: Tensor | None = None
) -> Tensor:
    """``F_blend(u) = α F(u) + (1 − α) mean_{v: m(v) = m(u)} F(v)`` (Sec. 3.3, α = 0.5).

    Args:
        f: rendered features [C, H, W].
        mask: integer instance labels [H, W] of the target view.
        alpha: weight of the per-pixel feature, in [0, 1]; 1 returns ``f``.
        weight: optional per-pixel weights [H, W] ≥ 0 for the region means (e.g. the render's
            alpha, so empty pixels do not dilute a region); default uniform (official code).
    """
    _check_features(f, "f")
    _check_mask(mask, "mask", tuple(f.shape[1:]))
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    C = f.shape[0]
    labels, inv = torch.unique(mask.to(f.device).reshape(-1), return_inverse=True)
    wt = torch.ones(inv.shape[0], device=f.device, dtype=f.dtype)
    if weight is not None:
        if not isinstance(weight, Tensor) or tuple(weight.shape) != tuple(mask.shape):
            raise ValueError(f"weight must be a tensor of shape {tuple(mask.shape)}")
        if not torch.isfinite(weight).all() or (weight < 0).any():
            raise ValueError("weight must be finite and ≥ 0")
        wt = weight.reshape(-1).to(f.dtype)
    flat = f.reshape(C, -1)
    sums = torch.zeros(C, len(labels), device=f.device, dtype=f.dtype).index_add(1, inv, flat * wt)
    cnt = torch.zeros(len(labels), device=f.device, dtype=f.dtype).index_add(0, inv, wt)
    means = sums / cnt.clamp_min(1e-12)
    return (alpha * flat + (1 - alpha) * means[:, inv]).reshape_as(f)
