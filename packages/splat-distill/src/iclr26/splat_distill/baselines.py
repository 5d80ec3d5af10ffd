"""Baselines the paper compares against, at toy scale on the same data and backbone.

* :func:`fit3d_like` — FiT3D (Yue et al., ECCV 2024): per-scene feature Gaussians optimised so
  their renders match the frozen teacher's features in every view (L1), then the 2D model is
  fine-tuned with L1 towards those renders. Geometry here is the oracle pixel-aligned lifting
  (FiT3D fits it from colour with L1 + SSIM).
* :func:`mef_like` — multiview-equivariance fine-tuning (MEF, ICLR 2025): the student's features
  at ground-truth correspondences of two views are pulled together against the other
  correspondences (InfoNCE here; MEF uses a smooth-AP ranking loss).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr26.shared import progress as progress_bar
from iclr26.splat_distill.data import MultiViewData
from iclr26.splat_distill.evaluation import gt_correspondences, sample_features
from iclr26.splat_distill.gaussians import Gaussians, pixel_aligned_gaussians
from iclr26.splat_distill.raster import compositing_weights

__all__ = ["fit3d_like", "fit_scene_features", "mef_like"]


def _check(model, data, steps, batch, lr):
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(data, MultiViewData):
        raise TypeError(f"data must be MultiViewData, got {type(data).__name__}")
    for name, v in (("steps", steps), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")


def fit_scene_features(
    teacher: nn.Module, data: MultiViewData, scene: int, *, render_size: int = 16, lift_stride: int = 2,
    iters: int = 60, lr: float = 0.05, scale_px: float = 0.75,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """FiT3D stage 1 for one scene: optimise the features of the scene's Gaussians (lifted from
    every view) by L1 between their renders and the teacher's (bilinearly upsampled) features.

    Returns the renders of the fitted features ``[V, C, R, R]`` and their alphas ``[V, R, R]``.
    """
    V, H = data.n_views, data.size
    with torch.no_grad():
        feats = teacher(data.rgb[scene])  # [V, C, h, w]
    C = feats.shape[1]
    R = render_size
    geo = [
        pixel_aligned_gaussians(data.depth[scene, v], data.cam(scene, v), torch.zeros(1, H, H),
                                scale_px=scale_px, stride=lift_stride)
        for v in range(V)
    ]  # fmt: skip
    g = Gaussians.concat(geo)
    Ws = torch.stack([compositing_weights(g, data.cam(scene, v).scaled(R, R)) for v in range(V)])
    target = F.interpolate(feats, size=(R, R), mode="bilinear", align_corners=False)
    target = target.flatten(2).transpose(1, 2)  # [V, R², C]
    alpha = Ws.sum(-1)  # [V, R²]
    f = torch.zeros(len(g), C, requires_grad=True)
    opt = torch.optim.Adam([f], lr=lr)
    for _ in range(iters):
        opt.zero_grad(set_to_none=True)
        loss = ((Ws @ f - target).abs() * alpha[..., None]).mean()
        loss.backward()
        opt.step()
    with torch.no_grad():
        render = (Ws @ f).transpose(1, 2).reshape(V, C, R, R)
    return render, alpha.reshape(V, R, R)


def fit3d_like(
    model: nn.Module, data: MultiViewData, *, steps: int = 200, batch: int = 4, lr: float = 1e-4,
    fit_iters: int = 60, render_size: int = 16, lift_stride: int = 2, seed: int = 0,
    progress: bool = False,
) -> nn.Module:  # fmt: skip
    """FiT3D-like fine-tuning: per-scene feature fitting (:func:`fit_scene_features`) with the
    frozen ``model`` as teacher, then ``steps`` Adam steps of L1 between the student's tokens and
    the fitted renders resized to the token grid (pixels with render alpha > 0.5).
    FiT3D: lr 1e-5, one epoch; lr here matches the other methods of the comparison.

    Returns a fine-tuned copy of ``model``.
    """
    _check(model, data, steps, batch, lr)
    torch.manual_seed(seed)
    teacher = copy.deepcopy(model).eval().requires_grad_(False)
    renders, alphas = [], []
    for s in progress_bar(range(data.n_scenes), enabled=progress, desc="FiT3D-like scene fits"):
        r, a = fit_scene_features(
            teacher, data, s, render_size=render_size, lift_stride=lift_stride, iters=fit_iters
        )
        renders.append(r)
        alphas.append(a)
    student = copy.deepcopy(model).train()
    with torch.no_grad():
        h, w = teacher(data.rgb[0, :1]).shape[2:]
    tgt = F.interpolate(
        torch.cat(renders), size=(h, w), mode="bilinear", antialias=True, align_corners=False
    )
    val = (
        F.interpolate(
            torch.cat(alphas)[:, None],
            size=(h, w),
            mode="bilinear",
            antialias=True,
            align_corners=False,
        )[:, 0]
        > 0.5
    )
    images = data.rgb.flatten(0, 1)
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    for _ in progress_bar(range(steps), enabled=progress, desc="FiT3D-like fine-tuning"):
        idx = torch.randint(0, images.shape[0], (batch,), generator=g)
        err = (student(images[idx]) - tgt[idx]).abs().mean(1)
        m = val[idx].float()
        loss = (err * m).sum() / m.sum().clamp_min(1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 0.5)
        opt.step()
    return student.eval()


def mef_like(
    model: nn.Module, data: MultiViewData, *, steps: int = 200, batch: int = 4, lr: float = 1e-4,
    n_corr: int = 128, tau: float = 0.1, max_gap: int = 2, seed: int = 0, progress: bool = False,
) -> nn.Module:  # fmt: skip
    """MEF-like fine-tuning: InfoNCE over ground-truth correspondences between two views (gap ≤
    ``max_gap``) of a scene; features are sampled bilinearly at the corresponding pixels.

    Returns a fine-tuned copy of ``model``.
    """
    _check(model, data, steps, batch, lr)
    torch.manual_seed(seed)
    student = copy.deepcopy(model).train()
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    H = data.size
    for _ in progress_bar(range(steps), enabled=progress, desc="MEF-like fine-tuning"):
        s = torch.randint(0, data.n_scenes, (batch,), generator=g)
        v0 = torch.randint(0, data.n_views - 1, (batch,), generator=g)
        v1 = (v0 + 1 + torch.randint(0, max_gap, (batch,), generator=g)).clamp(max=data.n_views - 1)
        f = student(torch.cat([data.rgb[s, v0], data.rgb[s, v1]]))
        losses = []
        for b in range(batch):
            uv0, uv1 = gt_correspondences(
                data.depth[s[b], v0[b]], data.cam(int(s[b]), int(v0[b])), data.depth[s[b], v1[b]],
                data.cam(int(s[b]), int(v1[b])), num_corr=n_corr, seed=int(torch.randint(0, 2**31, (1,), generator=g)),
            )  # fmt: skip
            if len(uv0) < 2:
                continue
            a = F.normalize(sample_features(f[b], uv0, H, H), dim=-1)
            c = F.normalize(sample_features(f[batch + b], uv1, H, H), dim=-1)
            logits = a @ c.T / tau
            lbl = torch.arange(len(uv0))
            losses.append(0.5 * (F.cross_entropy(logits, lbl) + F.cross_entropy(logits.T, lbl)))
        if not losses:
            continue
        loss = torch.stack(losses).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 0.5)
        opt.step()
    return student.eval()
