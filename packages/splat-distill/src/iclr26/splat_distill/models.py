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

__all__ = [
    "DINOHead",
    "TimmViT",
    "TinyViT",
    "add_lora",
    "check_images",
    "load_pretrained_vfm",
    "merge_lora",
]

LORA_TARGETS = ("qkv", "proj")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def check_images(x: Tensor) -> None:
    """Refuse anything but a batch of RGB images ``[B, 3, H, W]`` (ValueError naming ``x``)."""
    if not isinstance(x, Tensor) or x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(
            f"x must be images [B, 3, H, W], got {getattr(x, 'shape', type(x).__name__)}"
        )


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
        check_images(x)
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


def add_lora(
    model: nn.Module,
    *,
    rank: int = 8,
    alpha: float = 8.0,
    dropout: float = 0.1,
    targets: tuple[str, ...] = LORA_TARGETS,
    seed: int = 0,
) -> nn.Module:
    """Wrap ``model`` with peft LoRA adapters (the official code's setting: r = 8, α = 8,
    dropout 0.1 on the modules named ``qkv`` and ``proj``); only the adapters are trainable.

    peft injects the adapters into ``model`` in place and returns a ``PeftModel`` whose forward is
    the model's; the B matrices start at zero, so at initialisation it computes exactly what
    ``model`` computed. The A matrices are drawn under ``torch.manual_seed(seed)`` (the global
    RNG state is restored afterwards). Needs the ``lora`` extra (``peft``).
    """
    from iclr26.shared import import_optional

    peft = import_optional("peft", dist="iclr26-splat-distill", extra="lora", purpose="LoRA")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank must be an int ≥ 1, got {rank!r}")
    if not (isinstance(alpha, int | float) and alpha > 0):
        raise ValueError(f"alpha must be positive, got {alpha!r}")
    if not (isinstance(dropout, int | float) and 0 <= dropout < 1):
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    if isinstance(targets, str) or not targets or not all(isinstance(t, str) for t in targets):
        raise ValueError(f"targets must be a non-empty sequence of module names, got {targets!r}")
    names = [n for n, _ in model.named_modules()]
    if not any(n == t or n.endswith("." + t) for n in names for t in targets):
        raise ValueError(f"targets {tuple(targets)} match no module of {type(model).__name__}")
    cfg = peft.LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(targets), bias="none"
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        wrapped = peft.get_peft_model(model, cfg)
    finally:
        torch.random.set_rng_state(state)
    for attr in ("embed_dim", "config", "patch"):
        if hasattr(model, attr) and not isinstance(getattr(model, attr), nn.Module):
            object.__setattr__(wrapped, attr, getattr(model, attr))
    return wrapped


def is_lora(model: nn.Module) -> bool:
    """Whether ``model`` is a peft-wrapped module (see :func:`add_lora`)."""
    return hasattr(model, "merge_and_unload") and hasattr(model, "peft_config")


def merge_lora(model: nn.Module) -> nn.Module:
    """A copy of a LoRA-wrapped ``model`` with the adapters merged into the base weights
    (``W + (α/r)·B A``), as a plain module with the original parameter names; ``model`` itself
    is left untouched. A module without adapters is returned as a copy."""
    import copy

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    dup = copy.deepcopy(model)
    return dup.merge_and_unload() if is_lora(dup) else dup


class TimmViT(nn.Module):
    """Any timm Vision Transformer as a patch-token backbone: images [B,3,H,W] in [0, 1] →
    patch tokens [B,C,H/p,W/p] after the final norm (prefix tokens — class and register tokens —
    dropped), the same contract as :class:`TinyViT`.

    ``model`` is either a timm model instance or a timm model name, built here from its config
    with ``pretrained=False`` (nothing is downloaded), ``num_classes=0`` and
    ``dynamic_img_size=True`` (timm then interpolates the position embeddings to the input's
    token grid); ``create_kwargs`` override the architecture (``img_size``, ``patch_size``,
    ``embed_dim``, ``depth``, ``num_heads``, ``reg_tokens``, …). A model built without
    ``dynamic_img_size`` only accepts its own ``img_size``. Images are normalised inside with
    the model's ``pretrained_cfg`` mean/std (ImageNet by default). Needs the ``timm`` extra.

    Attributes: ``vit`` (the timm module), ``embed_dim``, ``patch`` (pixels, square),
    ``num_prefix_tokens``. LoRA targets ``qkv``/``proj`` exist under the same names as in DINOv2.
    """

    def __init__(self, model: nn.Module | str, **create_kwargs) -> None:
        super().__init__()
        if isinstance(model, str):
            from iclr26.shared import import_optional

            timm = import_optional(
                "timm", dist="iclr26-splat-distill", extra="timm", purpose="TimmViT"
            )
            kw = {"pretrained": False, "num_classes": 0, "dynamic_img_size": True} | create_kwargs
            if kw["pretrained"]:
                raise ValueError("pretrained=True would download weights; load them yourself")
            try:
                model = timm.create_model(model, **kw)
            except RuntimeError as err:  # timm's "Unknown model"
                raise ValueError(f"model: {err}") from None
        elif create_kwargs:
            raise ValueError("create_kwargs are only used when model is a timm model name")
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a timm model or its name, got {type(model).__name__}")
        for attr in ("forward_features", "patch_embed", "num_prefix_tokens", "embed_dim"):
            if not hasattr(model, attr):
                raise TypeError(f"model must be a timm VisionTransformer (it has no {attr!r})")
        ps = model.patch_embed.patch_size
        ps = (ps, ps) if isinstance(ps, int) else tuple(ps)
        if ps[0] != ps[1]:
            raise ValueError(f"model must have square patches, got {ps}")
        self.vit = model
        self.embed_dim = int(model.embed_dim)
        self.patch = int(ps[0])
        self.num_prefix_tokens = int(model.num_prefix_tokens)
        self.dynamic = bool(getattr(model, "dynamic_img_size", False))
        img = getattr(model.patch_embed, "img_size", None)
        self.img_size = None if img is None else tuple(int(v) for v in img)
        pcfg = getattr(model, "pretrained_cfg", None) or {}
        mean, std = pcfg.get("mean", IMAGENET_MEAN), pcfg.get("std", IMAGENET_STD)
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        check_images(x)
        H, W = x.shape[2:]
        if H % self.patch or W % self.patch:
            raise ValueError(f"image size {(H, W)} must be a multiple of patch {self.patch}")
        if not self.dynamic and self.img_size is not None and self.img_size != (H, W):
            raise ValueError(
                f"image size {(H, W)} differs from the model's {self.img_size}; build it with "
                "dynamic_img_size=True to interpolate position embeddings"
            )
        z = self.vit.forward_features((x - self.mean) / self.std)
        h, w = H // self.patch, W // self.patch
        z = z[:, self.num_prefix_tokens :]
        if z.shape[1] != h * w:
            raise ValueError(f"model returned {z.shape[1]} patch tokens, expected {h}×{w}")
        return z.transpose(1, 2).reshape(x.shape[0], self.embed_dim, h, w)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
