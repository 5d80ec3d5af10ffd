"""From learned scores (logits) to binary keep-masks at a requested sparsity (spec §2.6)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from iclr26.ecodiff.units import PrunableUnit

__all__ = ["MaskScores", "count_macs", "count_params", "select", "threshold"]


@dataclass
class MaskScores:
    """One score per unit (higher = keep), keyed by :attr:`PrunableUnit.key`.

    Keeps raw logits so one learned score gives masks at many sparsities.
    """

    logits: dict[str, torch.Tensor]
    units: list[PrunableUnit]
    history: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.units:
            raise ValueError("units must not be empty")
        for u in self.units:
            if u.key not in self.logits:
                raise ValueError(f"logits lack unit {u.name} ({u.kind})")
            t = self.logits[u.key]
            if not isinstance(t, torch.Tensor) or t.shape != (u.size,):
                raise ValueError(f"logits[{u.key!r}] must be a tensor of shape ({u.size},)")
            if not t.is_floating_point():
                raise TypeError(f"logits[{u.key!r}] must be floating, got {t.dtype}")
            if torch.isnan(t).any():
                raise ValueError(f"logits[{u.key!r}] contain NaN")

    def to_state_dict(self) -> dict[str, torch.Tensor]:
        """Logits as a flat tensor dict (for ``safetensors``)."""
        return {k: v.detach().cpu().contiguous() for k, v in self.logits.items()}


def count_params(model: nn.Module, units: Sequence[PrunableUnit] | None = None) -> dict[str, int]:
    """Parameter counts: ``total`` of the model and, with ``units``, the ``prunable`` share."""
    out = {"total": sum(p.numel() for p in model.parameters())}
    if units is not None:
        out["prunable"] = sum(u.size * u.params_per_unit for u in units)
    return out


def count_macs(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Multiply–accumulates of one call ``fn(*args, **kwargs)`` (e.g. a denoiser forward),
    counted by ``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions and
    attention; elementwise work is not counted): its FLOPs / 2."""
    from torch.utils.flop_counter import FlopCounterMode

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        fn(*args, **kwargs)
    return int(counter.get_total_flops()) // 2


def threshold(scores: MaskScores, value: float = 0.0) -> dict[str, torch.Tensor]:
    """Keep units whose logit exceeds ``value`` (the official "continues2binary")."""
    return {u.key: scores.logits[u.key].detach().cpu() > value for u in scores.units}


def select(
    scores: MaskScores,
    sparsity: float,
    *,
    scope: str = "global",
    budget: str = "params",
    total_params: int | None = None,
    exact: bool = False,
) -> dict[str, torch.Tensor]:
    """Binary keep-masks removing the lowest-scored units (spec §2.6: global or local top-k).

    Args:
        scores: learned (or baseline) scores.
        sparsity: fraction in ``[0, 1)`` to remove: of ``total_params`` (or, if ``None``, of the
            prunable parameters) for ``budget="params"``; of the units for ``budget="units"``.
        scope: ``"global"`` ranks all units of the model together (scores compared across
            modules); ``"local"`` removes the same fraction from every module.
        budget: ``"params"`` (units weighted by the parameters they remove) or ``"units"``.
        total_params: parameter count the sparsity refers to (e.g. the whole model's).
        exact: raise if the removed amount differs from the request (a parameter budget is
            otherwise met to within one unit, never exceeded).

    Returns:
        ``{unit key: bool tensor (size,)}``, True = keep. Ties broken by module order then
        unit index (deterministic).
    """
    if (
        not isinstance(sparsity, int | float)
        or isinstance(sparsity, bool)
        or not math.isfinite(sparsity)
    ):
        raise ValueError(f"sparsity must be a number in [0, 1), got {sparsity!r}")
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
    if scope not in ("global", "local"):
        raise ValueError(f"scope must be 'global' or 'local', got {scope!r}")
    if budget not in ("params", "units"):
        raise ValueError(f"budget must be 'params' or 'units', got {budget!r}")
    units = scores.units
    pool = sum(u.size * (u.params_per_unit if budget == "params" else 1) for u in units)
    if total_params is not None:
        if budget != "params":
            raise ValueError("total_params only applies to budget='params'")
        if (
            isinstance(total_params, bool)
            or not isinstance(total_params, int)
            or total_params < pool
        ):
            raise ValueError(
                f"total_params must be an int >= the prunable pool ({pool}), got {total_params!r}"
            )
    keep = {u.key: torch.ones(u.size, dtype=torch.bool) for u in units}
    if scope == "global":
        ref = pool if total_params is None else total_params
        target = round(sparsity * ref)
        if target > pool:
            raise ValueError(
                f"sparsity {sparsity} asks to remove {target} of {ref} but only {pool} are prunable"
            )
        entries = []
        for gi, u in enumerate(units):
            s = scores.logits[u.key].detach().double().cpu().tolist()
            cost = u.params_per_unit if budget == "params" else 1
            entries += [(v, gi, i, cost, u.key) for i, v in enumerate(s)]
        entries.sort(key=lambda e: (e[0], e[1], e[2]))
        removed = 0
        for _, _, i, cost, key in entries:
            if removed + cost > target:
                if budget == "units":
                    break
                continue  # a smaller unit further down may still fit
            keep[key][i] = False
            removed += cost
        if exact and removed != target:
            raise ValueError(
                f"budget of {target} cannot be met exactly with these units (got {removed})"
            )
        return keep
    for u in units:
        n_remove = round(sparsity * u.size)
        order = sorted(range(u.size), key=lambda i: (float(scores.logits[u.key][i]), i))
        for i in order[:n_remove]:
            keep[u.key][i] = False
        if exact and abs(n_remove - sparsity * u.size) > 1e-9:
            raise ValueError(f"{u.name}: {sparsity} of {u.size} units is not an integer count")
    return keep
