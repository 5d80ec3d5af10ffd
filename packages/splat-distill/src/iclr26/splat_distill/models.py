"""A tiny ViT that returns patch tokens (the stand-in "VFM" for DINOv2) and the DINO head.

Any ``nn.Module`` mapping images [B,3,H,W] to patch tokens [B,C,h,w] works with
:class:`~iclr26.splat_distill.distill.SplatAndDistill`; :class:`TinyViT` is the one this package
pretrains 2D-only (:func:`~iclr26.splat_distill.pretrain.pretrain_2d`) and ships.
"""

from __future__ import annotations

import importlib.resources
import json

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["DINOHead", "TinyViT", "load_pretrained_vfm"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)  # names match timm/DINOv2 (LoRA targets qkv, proj)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(dim * mlp_ratio)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        B, N, C = x.shape
        q, k, v = (
            self.qkv(self.norm1(x))
            .reshape(B, N, 3, self.heads, C // self.heads)
            .permute(2, 0, 3, 1, 4)
        )
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TinyViT(nn.Module):
    """Pre-norm ViT with learned absolute position embeddings (bicubically interpolated for other
    input sizes) and ImageNet normalisation inside; ``forward`` returns patch tokens [B,C,h,w]
    after the final LayerNorm (DINOv2's ``x_norm_patchtokens``, reshaped).

    Args:
        img_size: training image side (position-embedding grid = img_size / patch).
        patch: patch side in pixels.
        dim, depth, heads, mlp_ratio: transformer width, blocks, attention heads, MLP ratio.
    """

    def __init__(
        self, img_size: int = 64, patch: int = 8, dim: int = 64, depth: int = 4, heads: int = 4,
        mlp_ratio: float = 4.0,
    ) -> None:  # fmt: skip
        super().__init__()
        for name, v in (
            ("img_size", img_size),
            ("patch", patch),
            ("dim", dim),
            ("depth", depth),
            ("heads", heads),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
        if img_size % patch:
            raise ValueError(f"patch {patch} must divide img_size {img_size}")
        if dim % heads:
            raise ValueError(f"heads {heads} must divide dim {dim}")
        self.config = {
            "img_size": img_size,
            "patch": patch,
            "dim": dim,
            "depth": depth,
            "heads": heads,
            "mlp_ratio": mlp_ratio,
        }
        self.patch = patch
        self.embed_dim = dim
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        g = img_size // patch
        self.pos_embed = nn.Parameter(torch.randn(1, dim, g, g) * 0.02)
        self.blocks = nn.ModuleList([_Block(dim, heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(
                f"x must be images [B, 3, H, W], got {getattr(x, 'shape', type(x).__name__)}"
            )
        if x.shape[2] % self.patch or x.shape[3] % self.patch:
            raise ValueError(
                f"image size {tuple(x.shape[2:])} must be a multiple of patch {self.patch}"
            )
        t = self.patch_embed((x - self.mean) / self.std)
        pos = self.pos_embed
        if pos.shape[2:] != t.shape[2:]:
            pos = F.interpolate(pos, size=t.shape[2:], mode="bicubic", align_corners=False)
        t = t + pos
        B, C, h, w = t.shape
        z = t.flatten(2).transpose(1, 2)
        for blk in self.blocks:
            z = blk(z)
        return self.norm(z).transpose(1, 2).reshape(B, C, h, w)


class DINOHead(nn.Module):
    """DINO projection head: 3-layer MLP → L2-normalise → weight-normalised prototypes (no bias,
    norm fixed to 1). Paper/official: 384→2048→2048→256→65536; defaults here are scaled down.

    Input [..., in_dim] → prototype logits [..., n_prototypes].
    """

    def __init__(
        self, in_dim: int, hidden: int = 256, bottleneck: int = 64, n_prototypes: int = 1024
    ) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, bottleneck),
        )  # fmt: skip
        last = nn.Linear(bottleneck, n_prototypes, bias=False)
        self.last = nn.utils.parametrizations.weight_norm(last)
        self.last.parametrizations.weight.original0.data.fill_(1.0)
        self.last.parametrizations.weight.original0.requires_grad = False

    def forward(self, x: Tensor) -> Tensor:
        return self.last(F.normalize(self.mlp(x), dim=-1))


def load_pretrained_vfm(path: str | None = None, *, device: str | torch.device = "cpu") -> TinyViT:
    """The 2D-only pretrained TinyViT shipped with the package (or one saved by ``pretrain``).

    The weights are a plain ``safetensors`` state dict whose metadata holds the TinyViT config;
    retrain them with ``iclr26-splat-distill pretrain --out vfm.safetensors``.
    """
    from safetensors import safe_open
    from safetensors.torch import load_file

    if path is None:
        ref = importlib.resources.files("iclr26.splat_distill") / "weights" / "vfm.safetensors"
        with importlib.resources.as_file(ref) as p:
            return load_pretrained_vfm(str(p), device=device)
    try:
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as err:  # safetensors raises its own error types
        raise ValueError(f"{path} is not a readable safetensors file ({err})") from None
    if "config" not in meta:
        raise ValueError(f"{path} has no TinyViT config in its metadata")
    cfg = json.loads(meta["config"])
    model = TinyViT(**cfg)
    model.load_state_dict(load_file(path), strict=True)
    return model.to(device).eval()


def save_vfm(model: TinyViT, path, extra: dict | None = None) -> None:
    """Save a TinyViT as safetensors with its config in the metadata (see :func:`load_pretrained_vfm`)."""
    from safetensors.torch import save_file

    meta = {"config": json.dumps(model.config)}
    meta.update({k: json.dumps(v) for k, v in (extra or {}).items()})
    save_file(
        {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()},
        str(path),
        metadata=meta,
    )


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
