"""2D-only self-distillation pretraining of the stand-in VFM (the paper starts from DINOv2).

Dense DINO on single images: two random crops (scale and translation) with colour jitter; the
student's patch tokens of one crop predict the EMA teacher's prototype distribution at the same
image location in the other crop (known 2D warp), with DINO's centering and sharpening
(τ_s = 0.1, τ_t = 0.04). The model sees no multi-view data, so its features are 2D-invariant but
carry no 3D-consistency signal — the deficit Splat and Distill targets.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr26.shared import progress as progress_bar
from iclr26.splat_distill.distill import dino_ce_loss, ema_update
from iclr26.splat_distill.models import DINOHead

__all__ = ["pretrain_2d"]


def _crops(x: Tensor, g: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """Random crops of [B,3,H,W]: images, scales [B], shifts [B,2] (image = s·crop + t, in [-1,1])."""
    B = x.shape[0]
    s = 0.55 + 0.45 * torch.rand(B, generator=g)
    t = (torch.rand(B, 2, generator=g) * 2 - 1) * (1 - s)[:, None]
    theta = torch.zeros(B, 2, 3)
    theta[:, 0, 0] = s
    theta[:, 1, 1] = s
    theta[:, :, 2] = t
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    gain = 0.75 + 0.5 * torch.rand(B, 3, 1, 1, generator=g)
    bias = 0.1 * (torch.rand(B, 1, 1, 1, generator=g) * 2 - 1)
    return (out * gain + bias).clamp(0, 1), s, t


def pretrain_2d(
    model: nn.Module,
    images: Tensor,
    *,
    steps: int = 600,
    batch: int = 16,
    lr: float = 5e-4,
    n_prototypes: int = 256,
    momentum: float = 0.99,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, list[float]]:
    """Pretrain ``model`` (images → patch tokens [B,C,h,w], with ``embed_dim``) in place.

    Args:
        images: training images [N, 3, H, W] in [0, 1] (single views; no geometry used).
        steps, batch, lr: Adam steps, batch size, learning rate (linear warm-up over 10%).
        n_prototypes: DINO prototypes; momentum: teacher EMA per step.

    Returns:
        ``{"loss": [...], "teacher_entropy": [...]}`` per step.
    """
    if not isinstance(images, Tensor) or images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be [N, 3, H, W], got {getattr(images, 'shape', images)}")
    if images.shape[0] == 0:
        raise ValueError("images is empty")
    for name, v in (("steps", steps), ("batch", batch), ("n_prototypes", n_prototypes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    C = model.embed_dim
    head = DINOHead(C, 256, 64, n_prototypes)
    teacher = copy.deepcopy(model).requires_grad_(False)
    head_t = copy.deepcopy(head).requires_grad_(False)
    params = [p for p in [*model.parameters(), *head.parameters()] if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.04)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / max(1, steps // 10))
    )
    center = torch.zeros(n_prototypes)
    hist: dict[str, list[float]] = {"loss": [], "teacher_entropy": []}
    model.train()
    for _ in progress_bar(range(steps), enabled=progress, desc="2D pretraining"):
        idx = torch.randint(0, images.shape[0], (batch,), generator=g)
        x = images[idx]
        xa, sa, ta = _crops(x, g)
        xb, sb, tb = _crops(x, g)
        fa, fb = model(torch.cat([xa, xb])).chunk(2)
        with torch.no_grad():
            ga, gb = teacher(torch.cat([xa, xb])).chunk(2)
        h, w = fa.shape[2:]
        ys = (torch.arange(h) + 0.5) / h * 2 - 1
        xs_ = (torch.arange(w) + 0.5) / w * 2 - 1
        yy, xx = torch.meshgrid(ys, xs_, indexing="ij")
        tok = torch.stack([xx, yy], -1)  # crop-normalised token centres
        losses, ents = [], []
        for fs, s1, t1, gt_, s2, t2 in ((fa, sa, ta, gb, sb, tb), (fb, sb, tb, ga, sa, ta)):
            img = tok[None] * s1[:, None, None, None] + t1[:, None, None, :]
            other = (img - t2[:, None, None, :]) / s2[:, None, None, None]
            valid = (other.abs() < 1).all(-1).reshape(-1).float()
            with torch.no_grad():
                tl = head_t(gt_.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
                tl = F.grid_sample(tl, other, mode="bilinear", align_corners=False)
                tl = tl.permute(0, 2, 3, 1).reshape(-1, n_prototypes)
            sl = head(fs.permute(0, 2, 3, 1).reshape(-1, C))
            losses.append(dino_ce_loss(sl, tl, tau_s=0.1, tau_t=0.04, center=center, weights=valid))
            with torch.no_grad():
                p = F.softmax((tl - center) / 0.04, -1)
                ents.append(float(-(p * p.clamp_min(1e-12).log()).sum(-1).mean()))
                center.mul_(0.9).add_(tl.mean(0), alpha=0.1)
        loss = sum(losses) / 2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 3.0)
        opt.step()
        sched.step()
        ema_update(teacher, model, momentum)
        ema_update(head_t, head, momentum)
        hist["loss"].append(float(loss.detach()))
        hist["teacher_entropy"].append(sum(ents) / 2)
    model.load_state_dict(teacher.state_dict())  # the EMA teacher is the released model (DINO)
    model.eval()
    return hist
