"""Gradients of a loss on the final sample through the whole sampler (spec §2.4).

``checkpoint=True`` is EcoDiff's time-step gradient checkpointing: a no-grad forward keeps only
the ``T`` input latents; the backward sweep recomputes one step at a time with gradients on and
takes one vector-Jacobian product per step, so activation memory is one network call (O(1) in
``T``) plus ``T`` latents. ``checkpoint=False`` is plain back-propagation through time (O(T)).
Both give the same gradient when the recomputed step is bit-identical to the forward step, which
needs a gate noise drawn once per trajectory (:meth:`MaskedModel.resample_noise`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

__all__ = ["SavedTensorMeter", "trajectory_grad"]

StepFn = Callable[[torch.Tensor, int], torch.Tensor]


@dataclass
class SavedTensorMeter:
    """Counts bytes of tensors autograd saves for backward (peak over the run)."""

    current: int = 0
    peak: int = 0
    _live: list = field(default_factory=list)

    def hooks(self):
        """The ``saved_tensors_hooks`` context that counts (the peak is per graph built)."""

        def pack(t: torch.Tensor):
            n = t.numel() * t.element_size()
            self.current += n
            self.peak = max(self.peak, self.current)
            return t

        return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)

    def release(self) -> None:
        """The graph built so far was freed (after its backward)."""
        self.current = 0

    def add_static(self, nbytes: int) -> None:
        """Account for stored tensors outside autograd (the checkpointed latents)."""
        self.current += nbytes
        self.peak = max(self.peak, self.current)


def trajectory_grad(
    step: StepFn,
    z_T: torch.Tensor,
    num_steps: int,
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    params: Sequence[torch.Tensor],
    *,
    checkpoint: bool = True,
    meter: SavedTensorMeter | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """``L(z_0)`` and ``dL/dparams`` through ``num_steps`` sampler steps.

    Args:
        step: ``step(z_k, k) -> z_{k+1}``; must be a pure function of its inputs (and of
            ``params``): same inputs, same output.
        z_T: initial noise, shape ``(B, ...)``, floating.
        num_steps: ``T >= 1``.
        loss_fn: scalar loss of the final sample.
        params: tensors with ``requires_grad`` (the gate logits).
        checkpoint: time-step checkpointing (True) or naive BPTT (False).
        meter: optional :class:`SavedTensorMeter` recording saved-for-backward bytes.

    Returns:
        ``(loss, grads, z_0)``: the detached loss, one gradient per parameter (zeros where
        unused) and the detached final sample.
    """
    if not isinstance(z_T, torch.Tensor) or not z_T.is_floating_point():
        raise TypeError("z_T must be a floating torch tensor")
    if not torch.isfinite(z_T).all():
        raise ValueError("z_T must be finite")
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps must be a positive int, got {num_steps!r}")
    params = list(params)
    if not params or not all(p.requires_grad for p in params):
        raise ValueError("params must be a non-empty list of tensors that require grad")
    meter_ctx = meter.hooks if meter is not None else None

    def grads_or_zeros(gs):
        return [torch.zeros_like(p) if g is None else g for p, g in zip(params, gs, strict=True)]

    if not checkpoint:
        ctx = meter_ctx() if meter_ctx else _null()
        with ctx:
            z = z_T
            for k in range(num_steps):
                z = step(z, k)
            loss = loss_fn(z)
        grads = grads_or_zeros(torch.autograd.grad(loss, params, allow_unused=True))
        if meter is not None:
            meter.release()
        return loss.detach(), grads, z.detach()

    latents = []
    with torch.no_grad():
        z = z_T
        for k in range(num_steps):
            latents.append(z)
            z = step(z, k)
    latent_bytes = sum(t.numel() * t.element_size() for t in latents)
    if meter is not None:
        meter.add_static(latent_bytes)
    z0 = z.detach().requires_grad_(True)
    loss = loss_fn(z0)
    g_z, *g_direct = torch.autograd.grad(loss, [z0, *params], allow_unused=True)
    grads = grads_or_zeros(g_direct)
    for k in range(num_steps - 1, -1, -1):
        z_in = latents[k].detach().requires_grad_(True)
        ctx = meter_ctx() if meter_ctx else _null()
        with ctx:
            out = step(z_in, k)
        g_z, *g_p = torch.autograd.grad(out, [z_in, *params], grad_outputs=g_z, allow_unused=True)
        for i, g in enumerate(g_p):
            if g is not None:
                grads[i] = grads[i] + g
        if meter is not None:
            meter.current = latent_bytes  # the step's graph is freed; the latents stay
    return loss.detach(), grads, z.detach()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
