"""Unit scores of the pruning baselines, on the same units and :func:`select` as EcoDiff.

* magnitude: L2 norm of each unit's weights (rows of its producers, columns of its consumers);
* random: i.i.d. uniform scores (seeded);
* taylor: first-order Taylor importance ``|dL/dm|`` of each unit's gate at ``m = 1`` under the
  denoising training loss, averaged over batches (the structural criterion of Diff-Pruning /
  Molchanov et al., without the fine-tuning that Diff-Pruning adds afterwards);
* torch-pruning: the group magnitude importance of the ``torch-pruning`` library (extra
  ``[torch-pruning]``): its dependency graph traced from example inputs couples every layer a
  unit's channels touch, and its ``GroupMagnitudeImportance`` (L2, mean over the group,
  mean-normalised per group, its defaults) scores them; a head scores the mean of its channels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch
from torch import nn

from iclr26.ecodiff.masking import MaskedModel
from iclr26.ecodiff.select import MaskScores
from iclr26.ecodiff.units import PrunableUnit

__all__ = ["magnitude_scores", "random_scores", "taylor_scores", "torch_pruning_scores"]


def magnitude_scores(model: nn.Module, units: Sequence[PrunableUnit]) -> MaskScores:
    """L2 norm of every unit's producer rows and consumer columns (higher = keep)."""
    units = list(units)
    if not units:
        raise ValueError("units must not be empty")
    logits = {}
    for u in units:
        sq = torch.zeros(u.size, dtype=torch.float64)
        for path, off in u.producers:
            w = model.get_submodule(path).weight.detach().double().cpu()
            rows = w[off : off + u.size * u.width].reshape(u.size, u.width, -1)
            sq += rows.pow(2).sum(dim=(1, 2))
        for path, off in u.consumers:
            w = model.get_submodule(path).weight.detach().double().cpu()
            cols = w[:, off : off + u.size * u.width].reshape(w.shape[0], u.size, u.width)
            sq += cols.pow(2).sum(dim=(0, 2))
        logits[u.key] = sq.sqrt()
    return MaskScores(logits, units)


def random_scores(units: Sequence[PrunableUnit], seed: int = 0) -> MaskScores:
    """Uniform random scores (the random-pruning baseline), reproducible from ``seed``."""
    units = list(units)
    if not units:
        raise ValueError("units must not be empty")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    gen = torch.Generator().manual_seed(seed)
    return MaskScores(
        {u.key: torch.rand(u.size, generator=gen, dtype=torch.float64) for u in units}, units
    )


def taylor_scores(
    model: nn.Module,
    units: Sequence[PrunableUnit],
    losses: Iterable[Callable[[], torch.Tensor]],
) -> MaskScores:
    """Mean ``|dL/dm|`` at ``m = 1`` over ``losses`` (each a closure running the gated model).

    Args:
        model: the dense model.
        units: unit groups.
        losses: closures returning a scalar loss (e.g. the denoising loss on one batch at random
            timesteps); they call ``model`` themselves while the probe gates are installed.
    """
    units = list(units)
    masked = MaskedModel(model, units, init_logit=0.0)
    params = [masked.logits[u.key] for u in units]
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    n = 0
    req = [p for p in model.parameters() if p.requires_grad]
    for p in req:
        p.requires_grad_(False)
    try:
        with masked, masked.use("probe"):
            for closure in losses:
                loss = closure()
                if not torch.isfinite(loss):
                    raise ValueError("a Taylor loss closure returned a non-finite loss")
                gs = torch.autograd.grad(loss, params, allow_unused=True)
                for t, g in zip(total, gs, strict=True):
                    if g is not None:
                        t += g.detach().double().abs()
                n += 1
    finally:
        for p in req:
            p.requires_grad_(True)
    if n == 0:
        raise ValueError("losses must yield at least one closure")
    return MaskScores({u.key: (t / n).cpu() for u, t in zip(units, total, strict=True)}, units)


def torch_pruning_scores(
    model: nn.Module,
    units: Sequence[PrunableUnit],
    example_inputs: tuple,
    forward_fn: Callable[[nn.Module, tuple], torch.Tensor] | None = None,
) -> MaskScores:
    """Scores from torch-pruning's ``GroupMagnitudeImportance`` on its dependency graph.

    Args:
        model: the dense model (not modified).
        units: unit groups; each is scored through the out-channels of its first producer.
        example_inputs: inputs for tracing, e.g. ``(x, t, class_labels)``.
        forward_fn: ``fn(model, example_inputs)`` returning a tensor (default: a diffusers
            call ``model(x, timestep=t, class_labels=y).sample`` for three inputs, else
            ``model(*example_inputs)``).
    """
    from iclr26.shared.optional import import_optional

    tp = import_optional(
        "torch_pruning", dist="iclr26-ecodiff", extra="torch-pruning",
        purpose="torch_pruning_scores",
    )  # fmt: skip
    units = list(units)
    if not units:
        raise ValueError("units must not be empty")
    if not isinstance(example_inputs, tuple) or not example_inputs:
        raise TypeError("example_inputs must be a non-empty tuple of model inputs")
    if forward_fn is None:

        def forward_fn(m, inputs):
            if len(inputs) == 3:
                return m(inputs[0], timestep=inputs[1], class_labels=inputs[2]).sample
            return m(*inputs)

    graph = tp.DependencyGraph().build_dependency(
        model, example_inputs=example_inputs, forward_fn=forward_fn
    )
    importance = tp.importance.GroupMagnitudeImportance(p=2)
    logits = {}
    with torch.no_grad():
        for u in units:
            path, off = u.producers[0]
            layer = model.get_submodule(path)
            idxs = list(range(off, off + u.size * u.width))
            group = graph.get_pruning_group(layer, tp.prune_linear_out_channels, idxs=idxs)
            channel = importance(group)
            if channel is None or channel.numel() != u.size * u.width:
                raise ValueError(f"torch-pruning found no prunable group for {u.name} ({u.kind})")
            logits[u.key] = channel.detach().double().cpu().reshape(u.size, u.width).mean(1)
    return MaskScores(logits, units)
