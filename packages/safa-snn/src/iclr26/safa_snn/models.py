"""Spiking backbones: an MLP and a small conv net with SAFA's LIF neurons, direct encoding.

Every model maps a static input ``[B, ...]`` (repeated T times: direct encoding, the official
``add_dimention``) or a temporal input ``[B, T, ...]`` to features ``[B, T, D]`` via
``.features(x)``; the feature layer is a non-spiking linear map as in the official VGG9, and
``forward`` adds a bias-free linear head (``ft_dot``) used for base training.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from iclr26.safa_snn.neurons import LIF, SparsityAwareLIF

__all__ = ["SpikingConvNet", "SpikingMLP", "direct_encode", "make_neuron"]

NEURONS = ("sparsity_aware", "lif")


def make_neuron(kind: str, channels: int, **kw) -> LIF:
    """A :class:`SparsityAwareLIF` (``"sparsity_aware"``) or a plain :class:`LIF` (``"lif"``)."""
    if kind == "sparsity_aware":
        return SparsityAwareLIF(channels, **kw)
    if kind == "lif":
        return LIF(channels, **kw)
    raise ValueError(f"neuron must be one of {NEURONS}, got {kind!r}")


def direct_encode(x: Tensor, T: int) -> Tensor:
    """Repeat a static input ``[B, ...]`` T times: ``[B, T, ...]``."""
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"T must be a positive int, got {T!r}")
    return x.unsqueeze(1).expand(x.shape[0], T, *x.shape[1:])


def _check_input(x: Tensor, static_ndim: int, name: str = "x") -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch.Tensor, got {type(x).__name__}")
    if x.ndim not in (static_ndim, static_ndim + 1) or x.shape[0] == 0:
        raise ValueError(
            f"{name} must be [B, ...] ({static_ndim}-D) or [B, T, ...] ({static_ndim + 1}-D) "
            f"with B >= 1, got shape {tuple(x.shape)}"
        )
    # a data-dependent branch: skipped while torch.compile traces (it would break the graph)
    if not torch.compiler.is_compiling() and not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf")


def _bt(fn, x: Tensor) -> Tensor:
    """Apply a per-sample module to ``[B, T, ...]`` by folding T into the batch."""
    B, T = x.shape[:2]
    y = fn(x.reshape(B * T, *x.shape[2:]))
    return y.reshape(B, T, *y.shape[1:])


class _Spiking(nn.Module):
    T: int
    feat_dim: int

    def _init_common(self, T: int, feat_dim: int, num_classes: int) -> None:
        if isinstance(T, bool) or not isinstance(T, int) or T < 1:
            raise ValueError(f"T must be a positive int, got {T!r}")
        if isinstance(feat_dim, bool) or not isinstance(feat_dim, int) or feat_dim < 1:
            raise ValueError(f"feat_dim must be a positive int, got {feat_dim!r}")
        self.T = T
        self.feat_dim = feat_dim
        self.head = nn.Linear(feat_dim, num_classes, bias=False)

    def neurons(self) -> list[LIF]:
        return [m for m in self.modules() if isinstance(m, LIF)]

    def set_generator(self, generator: torch.Generator | None) -> None:
        """Use ``generator`` for the LocalZO draws of every neuron (seeded training)."""
        for m in self.neurons():
            m.generator = generator

    def forward(self, x: Tensor) -> Tensor:
        """Per-time-step logits of the linear head: ``[B, T, num_classes]``."""
        return self.head(self.features(x))


class SpikingMLP(_Spiking):
    """Linear → BN → LIF per hidden layer, then a non-spiking linear feature layer.

    Args:
        in_features: input size; inputs are ``[B, in_features]`` or ``[B, T, in_features]``.
        hidden: hidden widths (each followed by spiking neurons).
        feat_dim: D, the size of the (non-spiking) feature layer.
        T: time steps for direct encoding (official default 4).
        num_classes: rows of the training head.
        neuron: ``"sparsity_aware"`` (SAFA) or ``"lif"``; ``neuron_kw`` go to the neurons.
    """

    def __init__(
        self,
        in_features: int,
        hidden: tuple[int, ...] = (256, 128),
        feat_dim: int = 128,
        T: int = 4,
        num_classes: int = 10,
        neuron: Literal["sparsity_aware", "lif"] = "sparsity_aware",
        **neuron_kw,
    ) -> None:
        super().__init__()
        self._init_common(T, feat_dim, num_classes)
        if isinstance(in_features, bool) or not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features must be a positive int, got {in_features!r}")
        self.in_features = in_features
        layers: list[nn.Module] = []
        prev = in_features
        for i, h in enumerate(hidden):
            kw = dict(neuron_kw)
            if "mask_seed" in kw and kw["mask_seed"] is not None:
                kw["mask_seed"] = kw["mask_seed"] + i
            layers += [nn.Linear(prev, h), nn.BatchNorm1d(h), make_neuron(neuron, h, **kw)]
            prev = h
        self.layers = nn.ModuleList(layers)
        self.fc = nn.Linear(prev, feat_dim)

    def features(self, x: Tensor) -> Tensor:
        """Features ``[B, T, feat_dim]``."""
        _check_input(x, 2)
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x must have {self.in_features} features, got {x.shape[-1]}")
        h = direct_encode(x, self.T) if x.ndim == 2 else x
        for layer in self.layers:
            h = layer(h) if isinstance(layer, LIF | nn.Linear) else _bt(layer, h)
        return self.fc(h)


class SpikingConvNet(_Spiking):
    """(3×3 conv → BN → LIF → avgpool 2) per width, then a non-spiking linear feature layer.

    Inputs ``[B, C, H, W]`` (direct encoding) or ``[B, T, C, H, W]`` (event frames).
    """

    def __init__(
        self,
        in_channels: int,
        img_size: int = 8,
        T: int = 4,
        widths: tuple[int, ...] = (32, 64),
        feat_dim: int = 128,
        num_classes: int = 10,
        neuron: Literal["sparsity_aware", "lif"] = "sparsity_aware",
        **neuron_kw,
    ) -> None:
        super().__init__()
        self._init_common(T, feat_dim, num_classes)
        if img_size < 2 ** len(widths):
            raise ValueError(f"img_size {img_size} too small for {len(widths)} pooling stages")
        self.in_channels, self.img_size = in_channels, img_size
        blocks = []
        prev = in_channels
        for i, w in enumerate(widths):
            kw = dict(neuron_kw)
            if kw.get("mask_seed") is not None:
                kw["mask_seed"] = kw["mask_seed"] + i
            blocks.append(
                nn.ModuleDict(
                    {
                        "conv": nn.Conv2d(prev, w, 3, padding=1),
                        "bn": nn.BatchNorm2d(w),
                        "lif": make_neuron(neuron, w, **kw),
                    }
                )
            )
            prev = w
        self.blocks = nn.ModuleList(blocks)
        side = img_size // 2 ** len(widths)
        self.fc = nn.Linear(prev * side * side, feat_dim)

    def features(self, x: Tensor) -> Tensor:
        _check_input(x, 4)
        if x.shape[-3:] != (self.in_channels, self.img_size, self.img_size):
            raise ValueError(
                f"x must end in ({self.in_channels}, {self.img_size}, {self.img_size}), "
                f"got {tuple(x.shape)}"
            )
        h = direct_encode(x, self.T) if x.ndim == 4 else x
        for b in self.blocks:
            h = _bt(lambda z, b=b: b["bn"](b["conv"](z)), h)
            h = b["lif"](h)
            h = _bt(lambda z: nn.functional.avg_pool2d(z, 2), h)
        return self.fc(h.flatten(2))
