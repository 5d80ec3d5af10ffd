"""Prunable structural units of diffusers models (and plain torch modules).

A unit group is a set of ``size`` interchangeable units (attention heads or FFN neurons) of one
module. Each unit owns ``width`` consecutive output rows of its *producer* linear layers (q/k/v,
the FFN input projection — GEGLU halves both) and the same input columns of its *consumer*
layers (the attention output projection, the FFN output projection, FLUX's single-block
``proj_out``). A gate multiplies the consumer's input, i.e. each head's output before the output
projection and each neuron's activation, which is where EcoDiff's hooks place it; physical
pruning slices the same rows and columns.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

from torch import nn

__all__ = ["KINDS", "PrunableUnit", "find_prunable_units", "linear_pair_unit"]

log = logging.getLogger(__name__)

KINDS = ("ffn", "heads", "flux_single_mlp", "flux_norm")
DEFAULT_KINDS = ("ffn", "heads", "flux_single_mlp")


@dataclass(frozen=True)
class PrunableUnit:
    """One group of prunable units.

    Attributes:
        name: path of the owning module, e.g. ``"transformer_blocks.2.ff"``; for FLUX single
            blocks the MLP group is ``"<block>.mlp"``.
        kind: ``"ffn"``, ``"heads"``, ``"flux_single_mlp"`` or ``"flux_norm"`` (output channels of
            a FLUX block's AdaLN modulation linear: gated on its output, no consumer).
        size: number of units (neurons or heads).
        width: features per unit (1 for neurons, ``head_dim`` for heads).
        producers: ``(linear path, row offset)``: unit ``i`` owns rows
            ``offset + i*width ... offset + (i+1)*width - 1`` of each.
        consumers: ``(linear path, column offset)``: the same for input columns.
        params_per_unit: parameters removed with one unit (weights and biases).
    """

    name: str
    kind: Literal["ffn", "heads", "flux_single_mlp", "flux_norm"]
    size: int
    width: int
    producers: tuple[tuple[str, int], ...]
    consumers: tuple[tuple[str, int], ...]
    params_per_unit: int

    @property
    def key(self) -> str:
        """The name used as a parameter key (dots are not allowed there)."""
        return f"{self.name}:{self.kind}".replace(".", "/")


def _linear(model: nn.Module, path: str) -> nn.Linear:
    mod = model.get_submodule(path)
    if not isinstance(mod, nn.Linear):
        raise TypeError(f"{path} must be an nn.Linear, got {type(mod).__name__}")
    return mod


def _make(
    model: nn.Module,
    name: str,
    kind: str,
    size: int,
    width: int,
    producers: list[tuple[str, int]],
    consumers: list[tuple[str, int]],
) -> PrunableUnit:
    per = 0
    for path, off in producers:
        lin = _linear(model, path)
        if off + size * width > lin.out_features:
            raise ValueError(f"{path}: {size} units of width {width} at row {off} do not fit")
        per += width * (lin.in_features + (lin.bias is not None))
    for path, off in consumers:
        lin = _linear(model, path)
        if off + size * width > lin.in_features:
            raise ValueError(f"{path}: {size} units of width {width} at column {off} do not fit")
        per += width * lin.out_features
    return PrunableUnit(name, kind, size, width, tuple(producers), tuple(consumers), per)  # type: ignore[arg-type]


def linear_pair_unit(model: nn.Module, producer: str, consumer: str, name: str | None = None):
    """An FFN unit group for a plain torch MLP: the hidden neurons between two linear layers.

    Args:
        model: the module holding both layers.
        producer: path of the first ``nn.Linear`` (its output rows are the neurons).
        consumer: path of the second ``nn.Linear`` (its input columns are the neurons).
        name: group name (default: ``producer``).
    """
    p, c = _linear(model, producer), _linear(model, consumer)
    if p.out_features != c.in_features:
        raise ValueError(
            f"producer {producer} has {p.out_features} outputs but consumer {consumer} "
            f"takes {c.in_features} inputs"
        )
    return _make(
        model, name or producer, "ffn", p.out_features, 1, [(producer, 0)], [(consumer, 0)]
    )


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def _attention_unit(model: nn.Module, name: str, attn: nn.Module) -> PrunableUnit | None:
    if hasattr(attn, "to_qkv") and getattr(attn, "fused_projections", False):
        log.info("%s: fused q/k/v projections are not pruned", name)
        return None
    if not all(isinstance(getattr(attn, p, None), nn.Linear) for p in ("to_q", "to_k", "to_v")):
        return None
    heads = int(attn.heads)
    q, k, v = attn.to_q, attn.to_k, attn.to_v
    if heads <= 0 or q.out_features % heads or k.out_features != q.out_features:
        log.info("%s: grouped or uneven heads are not pruned", name)
        return None
    if v.out_features != q.out_features:
        return None
    head_dim = q.out_features // heads
    producers = [(_join(name, p), 0) for p in ("to_q", "to_k", "to_v")]
    if isinstance(getattr(attn, "add_q_proj", None), nn.Linear):
        producers += [(_join(name, p), 0) for p in ("add_q_proj", "add_k_proj", "add_v_proj")]
    consumers = []
    to_out = getattr(attn, "to_out", None)
    if isinstance(to_out, nn.ModuleList) and isinstance(to_out[0], nn.Linear):
        consumers.append((_join(name, "to_out.0"), 0))
    if isinstance(getattr(attn, "to_add_out", None), nn.Linear):
        consumers.append((_join(name, "to_add_out"), 0))
    if not consumers:
        return None
    return _make(model, name, "heads", heads, head_dim, producers, consumers)


def _ffn_unit(model: nn.Module, name: str, ff: nn.Module) -> PrunableUnit | None:
    net = getattr(ff, "net", None)
    if not isinstance(net, nn.ModuleList) or len(net) < 3:
        return None
    act, out = net[0], net[2]
    proj = getattr(act, "proj", None)
    if not isinstance(proj, nn.Linear) or not isinstance(out, nn.Linear):
        return None
    n = out.in_features
    if proj.out_features == n:
        producers = [(_join(name, "net.0.proj"), 0)]
    elif proj.out_features == 2 * n:  # GEGLU / SwiGLU: value and gate halves
        producers = [(_join(name, "net.0.proj"), 0), (_join(name, "net.0.proj"), n)]
    else:
        return None
    return _make(model, name, "ffn", n, 1, producers, [(_join(name, "net.2"), 0)])


def _flux_single_units(model: nn.Module, name: str, block: nn.Module) -> list[PrunableUnit]:
    attn = block.attn
    heads, head_dim = int(attn.heads), int(attn.head_dim)
    inner = attn.to_q.out_features
    units = [
        _make(
            model,
            _join(name, "attn"),
            "heads",
            heads,
            head_dim,
            [(_join(name, "attn", p), 0) for p in ("to_q", "to_k", "to_v")],
            [(_join(name, "proj_out"), 0)],
        ),
        _make(
            model,
            _join(name, "mlp"),
            "flux_single_mlp",
            block.proj_mlp.out_features,
            1,
            [(_join(name, "proj_mlp"), 0)],
            [(_join(name, "proj_out"), inner)],
        ),
    ]
    return units


def _flux_norm_units(model: nn.Module, name: str, block: nn.Module) -> list[PrunableUnit]:
    """The AdaLN-Zero modulation linears of a FLUX block (``norm1``, ``norm1_context`` of a
    double-stream block, ``norm`` of a single-stream block): one unit per output channel (shift,
    scale and gate of every feature), gated on the linear's output as in the official norm
    hook."""
    units = []
    for child in ("norm1", "norm1_context", "norm"):
        norm = getattr(block, child, None)
        lin = getattr(norm, "linear", None)
        if isinstance(lin, nn.Linear) and type(norm).__name__.startswith("AdaLayerNormZero"):
            path = _join(name, child, "linear")
            units.append(
                _make(model, _join(name, child), "flux_norm", lin.out_features, 1, [(path, 0)], [])
            )
    return units


def _is_flux_block(mod: nn.Module) -> bool:
    return type(mod).__name__ in ("FluxTransformerBlock", "FluxSingleTransformerBlock")


def _is_attention(mod: nn.Module) -> bool:
    return hasattr(mod, "heads") and hasattr(mod, "to_q") and hasattr(mod, "processor")


def _is_flux_single(mod: nn.Module) -> bool:
    return (
        hasattr(mod, "proj_mlp")
        and hasattr(mod, "proj_out")
        and hasattr(mod, "attn")
        and getattr(mod.attn, "pre_only", False)
    )


def find_prunable_units(
    model: nn.Module,
    *,
    include: str = ".*",
    kinds: tuple[str, ...] | list[str] = DEFAULT_KINDS,
) -> list[PrunableUnit]:
    """Discover attention heads and FFN neurons of a diffusers model from its own classes.

    Recognises diffusers ``Attention`` / ``FluxAttention`` (self-, cross- and joint attention:
    ``attn1``, ``attn2``, FLUX double-stream ``attn`` with ``to_add_out``), ``FeedForward``
    (GELU, tanh-GELU, GEGLU, SwiGLU) and FLUX single-stream blocks (heads + MLP sharing
    ``proj_out``), in ``DiTTransformer2DModel``, ``UNet2DConditionModel``,
    ``FluxTransformer2DModel`` and any model built from the same blocks. For plain torch MLPs use
    :func:`linear_pair_unit`.

    Args:
        model: the model (not modified).
        include: regular expression matched (``re.search``) against each group's name.
        kinds: which unit kinds to return; ``"flux_norm"`` (the optional FLUX norm/modulation
            channels, official ``n_lr > 0``) must be asked for explicitly.

    Returns:
        The unit groups in module order.

    Raises:
        ValueError: no unit found (the message lists what was scanned), bad ``kinds`` or regex.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {kinds}")
    try:
        pattern = re.compile(include)
    except re.error as err:
        raise ValueError(f"include is not a valid regular expression: {err}") from None
    units: list[PrunableUnit] = []
    single_attn: set[str] = set()
    scanned = 0
    for name, mod in model.named_modules():
        scanned += 1
        if _is_flux_block(mod):
            units += _flux_norm_units(model, name, mod)
        if _is_flux_single(mod):
            single_attn.add(_join(name, "attn"))
            units += _flux_single_units(model, name, mod)
        elif _is_attention(mod) and name not in single_attn:
            unit = _attention_unit(model, name, mod)
            if unit is not None:
                units.append(unit)
        elif type(mod).__name__ == "FeedForward" or (
            hasattr(mod, "net") and isinstance(getattr(mod, "net", None), nn.ModuleList)
        ):
            unit = _ffn_unit(model, name, mod)
            if unit is not None:
                units.append(unit)
    units = [u for u in units if u.kind in kinds and pattern.search(u.name)]
    if not units:
        raise ValueError(
            f"no prunable units found in {type(model).__name__} (scanned {scanned} modules for "
            f"diffusers Attention/FluxAttention heads, FeedForward neurons and FLUX single-block "
            f"MLPs; include={include!r}, kinds={kinds}); for plain MLPs use linear_pair_unit"
        )
    return units
