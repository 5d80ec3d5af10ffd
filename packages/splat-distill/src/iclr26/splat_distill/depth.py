"""Depth sources for the Gaussian lifting: oracle, noisy, or a tiny learned monocular depth net.

The paper lifts teacher features onto the Gaussians of a frozen feed-forward reconstructor
(MVSplat). Its weights cannot be used here, so the lifting takes depth from one of three sources
(spec §10/§14): the exact ray-cast depth (``"oracle"``), the oracle corrupted by smooth
multiplicative noise (``"noisy"``, :func:`noisy_depth`), or :class:`DepthNet`, a small U-Net
trained on the procedural scenes by ``iclr26-splat-distill train-depth`` (``"learned"``; the
package ships its weights, :func:`load_depth_net`). The last two show how the distillation holds
up with imperfect geometry.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr26.shared import progress as progress_bar
from iclr26.splat_distill.geometry import check_tensor
from iclr26.splat_distill.models import IMAGENET_MEAN, IMAGENET_STD, check_images

__all__ = [
    "DepthNet",
    "constant_depth_baseline",
    "depth_errors",
    "load_depth_net",
    "noisy_depth",
    "save_depth_net",
    "train_depth_net",
]

log = logging.getLogger(__name__)


def _any_shape(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return check_tensor(x, name, (None,) * x.ndim)


def noisy_depth(
    depth: Tensor, sigma: float = 0.1, *, generator: torch.Generator, smooth: int = 4
) -> Tensor:
    """``depth · exp(σ·n)`` with ``n`` a spatially smooth unit-variance Gaussian field.

    ``n`` is white noise on a grid ``smooth`` times coarser than the image, bicubically upsampled
    and renormalised to unit standard deviation per map, so neighbouring pixels share their error
    like a reconstructor's (MVSplat's depth errors are smooth, not per-pixel).

    Args:
        depth: positive depth maps [..., H, W].
        sigma: standard deviation of the log-depth error (≥ 0; 0 returns ``depth``).
        generator: seeds the noise (a :class:`torch.Generator` on ``depth``'s device or CPU).
        smooth: correlation length in pixels (int ≥ 1).
    """
    _any_shape(depth, "depth")
    if depth.ndim < 2:
        raise ValueError(f"depth must be [..., H, W], got {list(depth.shape)}")
    if (depth <= 0).any():
        raise ValueError("depth must be positive everywhere")
    if not (isinstance(sigma, int | float) and math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number ≥ 0, got {sigma!r}")
    if isinstance(smooth, bool) or not isinstance(smooth, int) or smooth < 1:
        raise ValueError(f"smooth must be an int ≥ 1, got {smooth!r}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if sigma == 0:
        return depth.clone()
    H, W = depth.shape[-2:]
    lead = depth.shape[:-2]
    d = depth.reshape(-1, 1, H, W)
    h, w = max(H // smooth, 1) + 1, max(W // smooth, 1) + 1
    n = torch.randn(d.shape[0], 1, h, w, generator=generator, device=generator.device)
    n = F.interpolate(n.to(d), size=(H, W), mode="bicubic", align_corners=True)
    n = (n - n.mean((2, 3), keepdim=True)) / n.std(dim=(2, 3), keepdim=True).clamp_min(1e-6)
    return (d * torch.exp(sigma * n)).reshape(*lead, H, W)


def _conv(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1), nn.GroupNorm(4, cout), nn.GELU()
    )


class DepthNet(nn.Module):
    """A tiny U-Net for monocular metric depth: RGB [B,3,H,W] in [0, 1] → depth [B,H,W] > 0.

    Three resolutions (H, H/2, H/4) with ``width``, 2·``width``, 4·``width`` channels, skip
    connections, and a log-depth output ``log d = out + log_depth_mean`` (so depth is positive and
    the untrained net predicts the training set's geometric-mean depth). H and W must be
    multiples of 4. ImageNet normalisation is applied inside.

    Args:
        width: channels at full resolution.
        log_depth_mean: initial output bias (the log of a typical depth).
    """

    def __init__(self, width: int = 8, log_depth_mean: float = 1.1) -> None:
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, int) or width < 4 or width % 4:
            raise ValueError(f"width must be an int ≥ 4 and a multiple of 4, got {width!r}")
        if not math.isfinite(log_depth_mean):
            raise ValueError(f"log_depth_mean must be finite, got {log_depth_mean}")
        self.config = {"width": width, "log_depth_mean": float(log_depth_mean)}
        c1, c2, c3 = width, 2 * width, 4 * width
        self.enc1 = nn.Sequential(_conv(3, c1), _conv(c1, c1))
        self.enc2 = nn.Sequential(_conv(c1, c2, 2), _conv(c2, c2))
        self.enc3 = nn.Sequential(_conv(c2, c3, 2), _conv(c3, c3), _conv(c3, c3))
        self.dec2 = nn.Sequential(_conv(c3 + c2, c2), _conv(c2, c2))
        self.dec1 = nn.Sequential(_conv(c2 + c1, c1), _conv(c1, c1))
        self.out = nn.Conv2d(c1, 1, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.constant_(self.out.bias, float(log_depth_mean))
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def log_depth(self, x: Tensor) -> Tensor:
        """Predicted log-depth [B, H, W]."""
        check_images(x)
        if x.shape[2] % 4 or x.shape[3] % 4:
            raise ValueError(f"image size {tuple(x.shape[2:])} must be a multiple of 4")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating tensor, got {x.dtype}")
        e1 = self.enc1((x - self.mean) / self.std)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        up = F.interpolate(e3, size=e2.shape[2:], mode="bilinear", align_corners=False)
        d2 = self.dec2(torch.cat([up, e2], 1))
        up = F.interpolate(d2, size=e1.shape[2:], mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([up, e1], 1))
        return self.out(d1)[:, 0]

    def forward(self, x: Tensor) -> Tensor:
        return self.log_depth(x).exp()


def depth_errors(pred: Tensor, gt: Tensor) -> dict[str, float]:
    """Standard depth metrics of ``pred`` against ``gt`` (same shape, both > 0): ``rmse``,
    ``absrel`` (mean |p − g| / g), ``log_mae`` (mean |log p − log g|), ``delta1`` (share of
    pixels with max(p/g, g/p) < 1.25)."""
    _any_shape(gt, "gt")
    check_tensor(pred, "pred", tuple(gt.shape))
    if (gt <= 0).any() or (pred <= 0).any():
        raise ValueError("pred and gt must be positive")
    if gt.numel() == 0:
        raise ValueError("gt must not be empty")
    ratio = torch.maximum(pred / gt, gt / pred)
    return {
        "rmse": float(((pred - gt) ** 2).mean().sqrt()),
        "absrel": float(((pred - gt).abs() / gt).mean()),
        "log_mae": float((pred.log() - gt.log()).abs().mean()),
        "delta1": float((ratio < 1.25).float().mean()),
    }


def constant_depth_baseline(train_depth: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The best constant in log space: ``exp(median log d)`` of the training depths, at ``shape``."""
    _any_shape(train_depth, "train_depth")
    if train_depth.numel() == 0 or (train_depth <= 0).any():
        raise ValueError("train_depth must be non-empty and positive")
    return torch.full(shape, float(train_depth.log().median().exp()), dtype=train_depth.dtype)


def train_depth_net(
    images: Tensor,
    depth: Tensor,
    *,
    steps: int = 800,
    batch: int = 16,
    lr: float = 2e-3,
    width: int = 8,
    seed: int = 0,
    flip: bool = True,
    progress: bool = False,
) -> tuple[DepthNet, dict[str, list[float]]]:
    """Train a :class:`DepthNet` on (RGB, depth) pairs with an L1 loss on log-depth.

    Adam with a cosine learning-rate decay; random horizontal flips (``flip``). Deterministic in
    ``seed`` (initialisation, batches and flips).

    Args:
        images: [N, 3, H, W] in [0, 1]; depth: [N, H, W] > 0.
        steps, batch, lr, width: optimisation and model size.

    Returns:
        The trained net (eval mode) and its loss history ``{"loss": [...]}``.
    """
    check_tensor(images, "images", (None, 3, None, None))
    if images.shape[0] == 0:
        raise ValueError("images must not be empty")
    check_tensor(depth, "depth", (images.shape[0], images.shape[2], images.shape[3]))
    if (depth <= 0).any():
        raise ValueError("depth must be positive everywhere")
    for name, v in (("steps", steps), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
    if not (isinstance(lr, int | float) and lr > 0):
        raise ValueError(f"lr must be positive, got {lr!r}")
    log_d = depth.log()
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    net = DepthNet(width=width, log_depth_mean=float(log_d.mean()))
    torch.random.set_rng_state(gen_state)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    hist: dict[str, list[float]] = {"loss": []}
    net.train()
    for _ in progress_bar(range(steps), enabled=progress, desc="depth net"):
        idx = torch.randint(0, images.shape[0], (batch,), generator=g)
        x, y = images[idx], log_d[idx]
        if flip:
            f = torch.rand(batch, generator=g) < 0.5
            x = torch.where(f[:, None, None, None], x.flip(-1), x)
            y = torch.where(f[:, None, None], y.flip(-1), y)
        loss = (net.log_depth(x) - y).abs().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        hist["loss"].append(float(loss.detach()))
    log.info("depth net: final loss %.4f", hist["loss"][-1])
    return net.eval(), hist


def save_depth_net(net: DepthNet, path, extra: dict | None = None) -> None:
    """Save a :class:`DepthNet` as safetensors with its config in the metadata."""
    from safetensors.torch import save_file

    if not isinstance(net, DepthNet):
        raise TypeError(f"net must be a DepthNet, got {type(net).__name__}")
    meta = {"config": json.dumps(net.config)}
    meta.update({k: json.dumps(v) for k, v in (extra or {}).items()})
    save_file(
        {k: v.detach().contiguous().cpu() for k, v in net.state_dict().items()},
        str(path),
        metadata=meta,
    )


def load_depth_net(path: str | None = None, *, device: str | torch.device = "cpu") -> DepthNet:
    """The depth net shipped with the package (or one written by ``train-depth --out``)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    if path is None:
        ref = importlib.resources.files("iclr26.splat_distill") / "weights" / "depth.safetensors"
        with importlib.resources.as_file(ref) as p:
            return load_depth_net(str(p), device=device)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as err:  # safetensors raises its own error types
        raise ValueError(f"{path} is not a readable safetensors file ({err})") from None
    if "config" not in meta:
        raise ValueError(f"{path} has no DepthNet config in its metadata")
    net = DepthNet(**json.loads(meta["config"]))
    net.load_state_dict(load_file(str(path)), strict=True)
    return net.to(device).eval()
