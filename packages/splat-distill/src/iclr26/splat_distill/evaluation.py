"""3D-awareness evaluation (Probe3D-style): correspondence recall and multi-view consistency from
ground-truth geometry, and linear depth / normal / semantic probes on frozen patch tokens."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr26.splat_distill.geometry import (
    Camera,
    check_tensor,
    pixel_grid,
    project_points,
    unproject_depth,
)

__all__ = [
    "correspondence_recall",
    "gt_correspondences",
    "linear_probes",
    "multiview_consistency",
    "rotation_angle",
]


def rotation_angle(cam0: Camera, cam1: Camera) -> float:
    """Relative rotation between two cameras in degrees."""
    R = cam0.c2w[:3, :3].T @ cam1.c2w[:3, :3]
    c = ((torch.trace(R) - 1) / 2).clamp(-1, 1)
    return math.degrees(math.acos(float(c)))


def gt_correspondences(
    depth0: Tensor, cam0: Camera, depth1: Tensor, cam1: Camera, *, num_corr: int = 1000,
    seed: int = 0, rel_tol: float = 0.03,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Ground-truth pixel correspondences from view 0 to view 1: random pixel centres of view 0,
    unprojected with ``depth0`` and projected into view 1, kept when they land inside the image
    and are visible (``depth1`` at the landing pixel within ``rel_tol`` of the projected depth).

    Returns ``uv0``, ``uv1`` [M, 2] continuous pixel coordinates (M ≤ ``num_corr``).
    """
    check_tensor(depth0, "depth0", (cam0.height, cam0.width))
    check_tensor(depth1, "depth1", (cam1.height, cam1.width))
    if isinstance(num_corr, bool) or not isinstance(num_corr, int) or num_corr < 1:
        raise ValueError(f"num_corr must be an int ≥ 1, got {num_corr!r}")
    g = torch.Generator().manual_seed(int(seed))
    H, W = depth0.shape
    n = min(num_corr * 3, H * W)
    idx = torch.randperm(H * W, generator=g)[:n]
    X = unproject_depth(depth0, cam0).reshape(-1, 3)[idx]
    uv1, z1 = project_points(X, cam1)
    inside = (
        (z1 > 0)
        & (uv1[:, 0] >= 0)
        & (uv1[:, 0] < cam1.width)
        & (uv1[:, 1] >= 0)
        & (uv1[:, 1] < cam1.height)
    )
    uv1 = torch.nan_to_num(uv1)
    j = uv1[:, 0].long().clamp(0, cam1.width - 1)
    i = uv1[:, 1].long().clamp(0, cam1.height - 1)
    visible = inside & ((depth1[i, j] - z1).abs() < rel_tol * z1)
    uv0 = pixel_grid(H, W, dtype=depth0.dtype).reshape(-1, 2)[idx]
    keep = visible.nonzero().squeeze(1)[:num_corr]
    return uv0[keep], uv1[keep]


def sample_features(f: Tensor, uv: Tensor, H: int, W: int) -> Tensor:
    """Bilinear feature lookup [M, C] at pixel coordinates uv of an H×W image (f spans the image)."""
    grid = torch.stack([uv[:, 0] / W * 2 - 1, uv[:, 1] / H * 2 - 1], -1)
    return F.grid_sample(
        f[None], grid[None, None].to(f.dtype), mode="bilinear", align_corners=False
    )[0, :, 0].T


def correspondence_recall(
    f0: Tensor, f1: Tensor, uv0: Tensor, uv1: Tensor, image_size: tuple[int, int], *,
    px_thresholds: tuple[float, ...] = (5, 10, 20),
) -> dict[str, float]:  # fmt: skip
    """Nearest-neighbour matching recall (Probe3D): features of view 0 at ``uv0`` are matched by
    cosine similarity against view 1's features upsampled (bilinear) to every pixel; a match is
    correct when it lands within a threshold of ``uv1``.

    Args:
        f0, f1: feature maps [C, h, w] spanning the images.
        uv0, uv1: ground-truth correspondences [M, 2] (e.g. :func:`gt_correspondences`).
        image_size: (H, W) of the images the coordinates refer to.
        px_thresholds: pixel error thresholds (Probe3D: 5/10/20 px at its resolution).

    Returns:
        ``{"recall@<t>": fraction, ..., "consistency": mean cosine at GT correspondences,
        "n": M}``; with M = 0 the recalls are NaN.
    """
    for name, f in (("f0", f0), ("f1", f1)):
        if not isinstance(f, Tensor) or f.ndim != 3:
            raise ValueError(f"{name} must be a [C, h, w] tensor")
    if f0.shape[0] != f1.shape[0]:
        raise ValueError(
            f"f0 and f1 must have the same channels, got {f0.shape[0]} and {f1.shape[0]}"
        )
    check_tensor(uv0, "uv0", (None, 2))
    check_tensor(uv1, "uv1", (uv0.shape[0], 2))
    H, W = image_size
    M = uv0.shape[0]
    if M == 0:
        return {
            **{f"recall@{t:g}": float("nan") for t in px_thresholds},
            "consistency": float("nan"),
            "n": 0,
        }
    q = F.normalize(sample_features(f0, uv0, H, W), dim=-1)
    dense = F.normalize(
        F.interpolate(f1[None], size=(H, W), mode="bilinear", align_corners=False)[0], dim=0
    )
    sims = q @ dense.reshape(dense.shape[0], -1)
    best = sims.argmax(1)
    pred = pixel_grid(H, W, dtype=uv1.dtype).reshape(-1, 2)[best]
    err = (pred - uv1).norm(dim=-1)
    p = F.normalize(sample_features(f1, uv1, H, W), dim=-1)
    out = {f"recall@{t:g}": float((err <= t).float().mean()) for t in px_thresholds}
    out["consistency"] = float((q * p).sum(-1).mean())
    out["n"] = M
    return out


def multiview_consistency(
    f0: Tensor, f1: Tensor, uv0: Tensor, uv1: Tensor, image_size: tuple[int, int]
) -> float:
    """Mean cosine similarity of the two views' features at ground-truth correspondences."""
    return correspondence_recall(f0, f1, uv0, uv1, image_size, px_thresholds=())["consistency"]


def _fit(head: nn.Module, x: Tensor, loss_fn, steps: int, lr: float) -> None:
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(head(x))
        loss.backward()
        opt.step()


def linear_probes(
    train_feats: Tensor, train: dict[str, Tensor], test_feats: Tensor, test: dict[str, Tensor],
    *, n_classes: int, steps: int = 300, lr: float = 0.02, seed: int = 0,
) -> dict[str, float]:  # fmt: skip
    """Linear (1×1-conv) probes on frozen patch tokens, predictions bilinearly upsampled to the
    label resolution (Probe3D-style; the paper uses mmseg/FiT3D linear heads).

    Args:
        train_feats, test_feats: tokens [N, C, h, w].
        train, test: ``depth`` [N,H,W] (> 0), ``normals`` [N,H,W,3] camera-frame unit normals,
            ``semantic`` [N,H,W] int64 labels in [0, n_classes).
        n_classes: semantic classes.
        steps, lr: full-batch Adam steps and learning rate per probe.

    Returns:
        depth ``rmse``, ``absrel``, ``delta1`` (scale-invariant log loss for training, metric
        depth at test), normals ``normal_mean_deg`` and ``normal_11.25``, semantic ``miou``.
    """
    torch.manual_seed(seed)
    C = train_feats.shape[1]
    H, W = train["depth"].shape[-2:]
    up = lambda y: F.interpolate(y, size=(H, W), mode="bilinear", align_corners=False)  # noqa: E731
    xm, xs = (
        train_feats.mean((0, 2, 3), keepdim=True),
        train_feats.std((0, 2, 3), keepdim=True) + 1e-6,
    )
    xtr, xte = (train_feats - xm) / xs, (test_feats - xm) / xs
    out: dict[str, float] = {}
    # depth: log-depth regression with the scale-invariant log loss (λ = 0.5)
    dh = nn.Conv2d(C, 1, 1)
    ltr = train["depth"].log()[:, None]

    def sig(pred):
        d = up(pred) - ltr
        return (d**2).mean() - 0.5 * d.mean() ** 2

    _fit(dh, xtr, sig, steps, lr)
    with torch.no_grad():
        pd = up(dh(xte)).exp()[:, 0]
        gt = test["depth"]
        out["rmse"] = float(((pd - gt) ** 2).mean().sqrt())
        out["absrel"] = float(((pd - gt).abs() / gt).mean())
        out["delta1"] = float((torch.maximum(pd / gt, gt / pd) < 1.25).float().mean())
    # normals: angular (1 − cos) loss on unit predictions
    nh = nn.Conv2d(C, 3, 1)
    ntr = train["normals"].permute(0, 3, 1, 2)
    _fit(nh, xtr, lambda p: (1 - F.cosine_similarity(up(p), ntr, dim=1)).mean(), steps, lr)
    with torch.no_grad():
        cos = F.cosine_similarity(up(nh(xte)), test["normals"].permute(0, 3, 1, 2), dim=1).clamp(
            -1, 1
        )
        ang = torch.rad2deg(torch.acos(cos))
        out["normal_mean_deg"] = float(ang.mean())
        out["normal_11.25"] = float((ang < 11.25).float().mean())
    # semantics: per-pixel cross-entropy, mIoU over classes present in the test set
    sh = nn.Conv2d(C, n_classes, 1)
    _fit(sh, xtr, lambda p: F.cross_entropy(up(p), train["semantic"]), steps, lr)
    with torch.no_grad():
        pred = up(sh(xte)).argmax(1)
        ious = []
        for k in range(n_classes):
            gt_k, pr_k = test["semantic"] == k, pred == k
            if gt_k.any():
                ious.append(float((gt_k & pr_k).sum()) / float((gt_k | pr_k).sum()))
        out["miou"] = sum(ious) / len(ious)
    return out
