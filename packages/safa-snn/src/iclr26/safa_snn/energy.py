"""Spike-count energy estimates: synaptic operations per layer, MACs, joules (§2.7).

``E = E_MAC · MAC + E_AC · SOP``: a layer whose input is analogue (the encoding layer, or any
input that is not 0/1) is charged its dense multiply-accumulates; a layer fed by spikes is
charged one accumulate per presynaptic spike and per synapse it reaches (spikes × fan-out,
counted exactly with forward hooks). E_MAC = 4.6 pJ and E_AC = 0.9 pJ are the 45 nm CMOS figures
of Horowitz (ISSCC 2014) used throughout the SNN literature.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from iclr26.safa_snn.neurons import SparsityAwareLIF

__all__ = [
    "E_AC",
    "E_MAC",
    "EnergyReport",
    "LayerCount",
    "ann_twin_energy",
    "count_sops",
    "energy_joules",
    "training_energy",
]

E_MAC = 4.6e-12
E_AC = 0.9e-12


@dataclass
class LayerCount:
    """Operation counts of one synaptic layer, summed over the batch and all time steps."""

    name: str
    kind: str  # "MAC" (analogue input) or "SOP" (spiking input)
    macs: float
    sops: float
    dense_macs: float
    input_rate: float


@dataclass
class EnergyReport:
    """Per-layer counts of one forward pass over ``n_samples`` inputs with ``T`` time steps."""

    layers: list[LayerCount] = field(default_factory=list)
    n_samples: int = 0
    T: int = 1

    @property
    def macs(self) -> float:
        """MACs per sample (analogue-input layers)."""
        return sum(c.macs for c in self.layers) / max(self.n_samples, 1)

    @property
    def sops(self) -> float:
        """Synaptic operations per sample (spike-input layers)."""
        return sum(c.sops for c in self.layers) / max(self.n_samples, 1)

    @property
    def dense_macs(self) -> float:
        """MACs per sample if every layer ran densely at every time step."""
        return sum(c.dense_macs for c in self.layers) / max(self.n_samples, 1)


def count_sops(model: nn.Module, x: Tensor, encoding_layers: int = 1) -> EnergyReport:
    """Count MACs and SOPs of ``model(x)`` layer by layer (``nn.Linear`` and ``nn.Conv2d``).

    The first ``encoding_layers`` synaptic layers to run are the encoding layers, charged dense
    MACs whatever their input; later layers are charged SOPs when their input is 0/1 spikes and
    MACs otherwise (e.g. after average pooling).

    The model runs once without gradients, in eval mode and with every
    :class:`~iclr26.safa_snn.neurons.SparsityAwareLIF` frozen (so counting never moves
    thresholds); modes and phases are restored afterwards. Conv layers must have ``groups=1``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.ndim < 2 or x.shape[0] == 0:
        raise ValueError("x must be a non-empty floating-point tensor [B, ...]")
    if not torch.isfinite(x).all():
        raise ValueError("x contains NaN or inf")
    if (
        isinstance(encoding_layers, bool)
        or not isinstance(encoding_layers, int)
        or encoding_layers < 0
    ):
        raise ValueError(f"encoding_layers must be an int >= 0, got {encoding_layers!r}")
    seen: list[str] = []
    report = EnergyReport(n_samples=int(x.shape[0]), T=int(getattr(model, "T", 1)))
    handles = []

    def hook(name):
        def fn(mod, inputs, output):
            inp = inputs[0].detach()
            nz = inp != 0
            binary = bool((nz == (inp == 1)).all()) if inp.numel() else True
            if isinstance(mod, nn.Linear):
                rows = inp.numel() // mod.in_features
                dense = float(rows * mod.in_features * mod.out_features)
                sops = float(nz.sum()) * mod.out_features
            else:
                if mod.groups != 1:
                    raise ValueError(f"count_sops supports Conv2d with groups=1 only ({name})")
                kh, kw = mod.kernel_size
                dense = float(output.numel() * mod.in_channels * kh * kw)
                ones = torch.ones(1, mod.in_channels, kh, kw, dtype=inp.dtype, device=inp.device)
                reach = F.conv2d(
                    nz.to(inp.dtype), ones, stride=mod.stride, padding=mod.padding,
                    dilation=mod.dilation,
                )  # fmt: skip
                sops = float(reach.sum()) * mod.out_channels
            rate = float(nz.float().mean()) if inp.numel() else 0.0
            if name not in seen:
                seen.append(name)
            encoding = seen.index(name) < encoding_layers
            if binary and not encoding:
                report.layers.append(LayerCount(name, "SOP", 0.0, sops, dense, rate))
            else:
                report.layers.append(LayerCount(name, "MAC", dense, 0.0, dense, rate))

        return fn

    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear | nn.Conv2d):
            handles.append(mod.register_forward_hook(hook(name)))
    neurons = [m for m in model.modules() if isinstance(m, SparsityAwareLIF)]
    phases = [m.phase for m in neurons]
    was_training = model.training
    try:
        for m in neurons:
            m.phase = "frozen"
        model.eval()
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
        for m, p in zip(neurons, phases, strict=True):
            m.phase = p
        model.train(was_training)
    return report


def energy_joules(report: EnergyReport, e_mac: float = E_MAC, e_ac: float = E_AC) -> float:
    """Inference energy per sample: ``E_MAC · MAC + E_AC · SOP`` (joules)."""
    if not isinstance(report, EnergyReport):
        raise TypeError("report must be an EnergyReport from count_sops")
    return e_mac * report.macs + e_ac * report.sops


def training_energy(
    report: EnergyReport, backward_factor: float = 2.0, e_mac: float = E_MAC, e_ac: float = E_AC
) -> float:
    """Energy per sample of one training step: forward + ``backward_factor`` × dense MACs.

    Surrogate gradients are dense, so the backward is costed as MACs (an assumption, §2.7).
    """
    if backward_factor < 0:
        raise ValueError(f"backward_factor must be >= 0, got {backward_factor}")
    return energy_joules(report, e_mac, e_ac) + backward_factor * e_mac * report.dense_macs


def ann_twin_energy(report: EnergyReport, e_mac: float = E_MAC) -> float:
    """Inference energy per sample of the same architecture as a ReLU ANN (one pass, all MACs)."""
    if not isinstance(report, EnergyReport):
        raise TypeError("report must be an EnergyReport from count_sops")
    return e_mac * report.dense_macs / report.T
