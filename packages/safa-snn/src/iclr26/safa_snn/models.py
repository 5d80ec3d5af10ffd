"""Spiking backbones with SAFA's LIF neurons and direct encoding: an MLP, a small conv net, the
official spiking VGG9 and a Spiking ResNet-20.

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

__all__ = [
    "ConvBNLIF",
    "ReLUNeuron",
    "SpikingBasicBlock",
    "SpikingConvNet",
    "SpikingMLP",
    "SpikingResNet20",
    "SpikingVGG9",
    "direct_encode",
    "make_neuron",
]

NEURONS = ("sparsity_aware", "lif", "relu")


class ReLUNeuron(nn.Module):
    """ReLU in place of the spiking neuron: the backbones built with ``neuron="relu"`` (and
    ``T=1``) are their ANN twins, same layers and widths, one pass, analogue activations."""

    def __init__(self, num_channels: int) -> None:
        super().__init__()
        self.num_channels = _pos(num_channels, "num_channels")

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(x)

    def extra_repr(self) -> str:
        return str(self.num_channels)


def make_neuron(kind: str, channels: int, **kw) -> nn.Module:
    """A :class:`SparsityAwareLIF` (``"sparsity_aware"``), a plain :class:`LIF` (``"lif"``) or
    a :class:`ReLUNeuron` (``"relu"``, the ANN twin; it takes no neuron arguments)."""
    if kind == "sparsity_aware":
        return SparsityAwareLIF(channels, **kw)
    if kind == "lif":
        return LIF(channels, **kw)
    if kind == "relu":
        if kw:
            raise TypeError(f"neuron='relu' takes no neuron arguments, got {sorted(kw)}")
        return ReLUNeuron(channels)
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
        self.T = _pos(T, "T")
        self.feat_dim = _pos(feat_dim, "feat_dim")
        self.head = nn.Linear(feat_dim, num_classes, bias=False)

    def _init_image(self, in_channels: int, img_size: int, multiple: int, why: str) -> None:
        self.in_channels = _pos(in_channels, "in_channels")
        self.img_size = _pos(img_size, "img_size")
        if img_size % multiple:
            raise ValueError(f"img_size must be a multiple of {multiple} ({why}), got {img_size}")

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
        neuron: ``"sparsity_aware"`` (SAFA), ``"lif"`` or ``"relu"`` (the ANN twin, with
            ``T=1``); ``neuron_kw`` go to the neurons.
    """

    def __init__(
        self,
        in_features: int,
        hidden: tuple[int, ...] = (256, 128),
        feat_dim: int = 128,
        T: int = 4,
        num_classes: int = 10,
        neuron: Literal["sparsity_aware", "lif", "relu"] = "sparsity_aware",
        **neuron_kw,
    ) -> None:
        super().__init__()
        self._init_common(T, feat_dim, num_classes)
        self.in_features = _pos(in_features, "in_features")
        layers: list[nn.Module] = []
        prev = in_features
        for i, h in enumerate(hidden):
            layers += [
                nn.Linear(prev, h),
                nn.BatchNorm1d(h),
                make_neuron(neuron, h, **_neuron_kw(neuron_kw, i)),
            ]
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
            h = layer(h) if isinstance(layer, LIF | ReLUNeuron | nn.Linear) else _bt(layer, h)
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
        neuron: Literal["sparsity_aware", "lif", "relu"] = "sparsity_aware",
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
            blocks.append(ConvBNLIF(prev, w, bias=True, neuron=neuron, **_neuron_kw(neuron_kw, i)))
            prev = w
        self.blocks = nn.ModuleList(blocks)
        side = img_size // 2 ** len(widths)
        self.fc = nn.Linear(prev * side * side, feat_dim)

    def features(self, x: Tensor) -> Tensor:
        """Features ``[B, T, feat_dim]``."""
        h = _check_image(self, x)
        for block in self.blocks:
            h = _bt(lambda z: nn.functional.avg_pool2d(z, 2), block(h))
        return self.fc(h.flatten(2))


def _neuron_kw(neuron_kw: dict, i: int) -> dict:
    """The neuron arguments of the i-th spiking layer (``mask_seed`` offset by i)."""
    kw = dict(neuron_kw)
    if kw.get("mask_seed") is not None:
        kw["mask_seed"] = kw["mask_seed"] + i
    return kw


def _check_image(model: nn.Module, x: Tensor) -> Tensor:
    _check_input(x, 4)
    if x.shape[-3:] != (model.in_channels, model.img_size, model.img_size):
        raise ValueError(
            f"x must end in ({model.in_channels}, {model.img_size}, {model.img_size}), "
            f"got {tuple(x.shape)}"
        )
    return direct_encode(x, model.T) if x.ndim == 4 else x


def _pos(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


class ConvBNLIF(nn.Module):
    """3×3 (or k×k) conv → BatchNorm → LIF on ``[B, T, C, H, W]`` (conv and BN per time step);
    the conv has no bias unless ``bias=True`` (BatchNorm follows it)."""

    def __init__(
        self, c_in: int, c_out: int, *, stride: int = 1, kernel: int = 3, bias: bool = False,
        neuron="sparsity_aware", **neuron_kw,
    ) -> None:  # fmt: skip
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=bias)
        self.bn = nn.BatchNorm2d(c_out)
        self.lif = make_neuron(neuron, c_out, **neuron_kw)

    def forward(self, x: Tensor) -> Tensor:
        return self.lif(_bt(lambda z: self.bn(self.conv(z)), x))


VGG9_CFG = (64, 64, "P", 128, 128, "P", 256, 256, 256, "P")


class SpikingVGG9(_Spiking):
    """The official spiking VGG9 (``backbone/spiking_vgg.py``): conv64, conv64, avgpool 2,
    conv128, conv128, avgpool 2, conv256 ×3, avgpool 2 — every conv 3×3 + BN + LIF, the pooling
    not spiking — then a non-spiking linear layer 256·(H/8)·(W/8) → ``feat_dim`` (1024).

    Args:
        in_channels, img_size: input ``[B, C, H, W]`` (direct encoding) or ``[B, T, C, H, W]``
            (event frames) with H = W = ``img_size`` (a multiple of 8).
        width: channel multiplier (1.0 = the official 64/128/256; smaller for CPU tests).
        T, feat_dim, num_classes, neuron, neuron_kw: as in :class:`SpikingMLP`.
    """

    def __init__(
        self,
        in_channels: int = 3,
        img_size: int = 32,
        T: int = 4,
        feat_dim: int = 1024,
        num_classes: int = 100,
        *,
        width: float = 1.0,
        neuron: Literal["sparsity_aware", "lif", "relu"] = "sparsity_aware",
        **neuron_kw,
    ) -> None:
        super().__init__()
        self._init_common(T, feat_dim, num_classes)
        self._init_image(in_channels, img_size, 8, "three pooling stages")
        if not (isinstance(width, int | float) and 0 < width <= 16):
            raise ValueError(f"width must be a float in (0, 16], got {width!r}")
        layers: list[nn.Module] = []
        prev, i = in_channels, 0
        for v in VGG9_CFG:
            if v == "P":
                layers.append(nn.AvgPool2d(2))
                continue
            c = max(1, round(v * width))
            layers.append(ConvBNLIF(prev, c, neuron=neuron, **_neuron_kw(neuron_kw, i)))
            prev, i = c, i + 1
        self.layers = nn.ModuleList(layers)
        side = img_size // 8
        self.fc = nn.Linear(prev * side * side, feat_dim)

    def features(self, x: Tensor) -> Tensor:
        """Features ``[B, T, feat_dim]``: the time steps of the (non-spiking) linear layer."""
        h = _check_image(self, x)
        for layer in self.layers:
            h = _bt(layer, h) if isinstance(layer, nn.AvgPool2d) else layer(h)
        return self.fc(h.flatten(2))


class SpikingBasicBlock(nn.Module):
    """ResNet basic block with spikes: ``LIF(BN(conv(LIF(BN(conv(s))))) + shortcut(s))``; the
    shortcut is the identity, or a 1×1 conv + BN when the stride or the width changes."""

    def __init__(
        self, c_in: int, c_out: int, stride: int, *, neuron="sparsity_aware", index: int = 0,
        **neuron_kw,
    ) -> None:  # fmt: skip
        super().__init__()
        self.conv1 = ConvBNLIF(
            c_in, c_out, stride=stride, neuron=neuron, **_neuron_kw(neuron_kw, index)
        )
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out)
            )
        self.lif = make_neuron(neuron, c_out, **_neuron_kw(neuron_kw, index + 1))

    def forward(self, s: Tensor) -> Tensor:
        h = self.conv1(s)
        h = _bt(lambda z: self.bn2(self.conv2(z)), h) + _bt(self.shortcut, s)
        return self.lif(h)


class SpikingResNet20(_Spiking):
    """Spiking ResNet-20 (He et al.'s CIFAR ResNet-20 with LIF neurons; the backbone of the
    paper's energy claim, absent from the released code): a 3×3 stem conv + BN + LIF, three
    stages of three :class:`SpikingBasicBlock` (widths ``widths``, strides 1, 2, 2), global
    average pooling over space, then a non-spiking linear layer to ``feat_dim``.

    Args:
        in_channels, img_size: input ``[B, C, H, W]`` or ``[B, T, C, H, W]`` (H = W = img_size,
            a multiple of 4).
        widths: the three stage widths (16, 32, 64 as in ResNet-20).
        blocks: basic blocks per stage (3 gives 1 + 3·3·2 + 1 = 20 weight layers).
        T, feat_dim, num_classes, neuron, neuron_kw: as in :class:`SpikingMLP`.
    """

    def __init__(
        self,
        in_channels: int = 3,
        img_size: int = 32,
        T: int = 4,
        feat_dim: int = 64,
        num_classes: int = 100,
        *,
        widths: tuple[int, int, int] = (16, 32, 64),
        blocks: int = 3,
        neuron: Literal["sparsity_aware", "lif", "relu"] = "sparsity_aware",
        **neuron_kw,
    ) -> None:
        super().__init__()
        self._init_common(T, feat_dim, num_classes)
        self._init_image(in_channels, img_size, 4, "two stride-2 stages")
        if len(widths) != 3:
            raise ValueError(f"widths must give three stage widths, got {widths!r}")
        widths = tuple(_pos(w, "widths") for w in widths)
        _pos(blocks, "blocks")
        self.stem = ConvBNLIF(in_channels, widths[0], neuron=neuron, **_neuron_kw(neuron_kw, 0))
        layers = []
        prev, k = widths[0], 1
        for stage, w in enumerate(widths):
            for b in range(blocks):
                stride = 2 if stage > 0 and b == 0 else 1
                layers.append(
                    SpikingBasicBlock(prev, w, stride, neuron=neuron, index=k, **neuron_kw)
                )
                prev, k = w, k + 2
        self.layers = nn.ModuleList(layers)
        self.fc = nn.Linear(prev, feat_dim)

    def features(self, x: Tensor) -> Tensor:
        """Features ``[B, T, feat_dim]``: linear map of the spatially averaged last spikes."""
        h = self.stem(_check_image(self, x))
        for block in self.layers:
            h = block(h)
        return self.fc(h.mean(dim=(-2, -1)))
