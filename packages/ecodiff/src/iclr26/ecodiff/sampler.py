"""Samplers as stateless Markov steps ``z_{k+1} = Φ_k(z_k)`` over diffusers schedulers.

Time-step checkpointing recomputes one step from its stored input latent alone, so a step must
depend on ``(z_k, k)`` and nothing else. diffusers schedulers keep a step counter (and multistep
solvers keep past model outputs); the adapters below read the schedule from the scheduler once
and implement the first-order, state-free updates (DDIM with η = 0, Euler, flow-matching Euler)
as pure functions of ``k``. Multistep or stochastic schedulers are refused.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["MarkovSampler", "diffusers_model_fn", "from_scheduler"]

ModelFn = Callable[[torch.Tensor, torch.Tensor, Any], torch.Tensor]

SUPPORTED = ("DDIMScheduler", "EulerDiscreteScheduler", "FlowMatchEulerDiscreteScheduler")


class MarkovSampler:
    """A first-order, state-free sampler built from a diffusers scheduler.

    Attributes:
        kind: ``"ddim"``, ``"euler"`` or ``"flow_euler"``.
        num_steps: ``T``.
        timesteps: the model's timestep input at each step (length ``T``).
        init_noise_sigma: multiply unit Gaussian noise by this to get ``z_T``.
    """

    def __init__(self, kind: str, timesteps: list[float], coefs: list[tuple[float, ...]], *,
                 prediction_type: str = "epsilon", clip: float | None = None,
                 init_noise_sigma: float = 1.0) -> None:  # fmt: skip
        self.kind = kind
        self.timesteps = list(timesteps)
        self.num_steps = len(timesteps)
        self._coefs = coefs
        self.prediction_type = prediction_type
        self.clip = clip
        self.init_noise_sigma = float(init_noise_sigma)

    def __repr__(self) -> str:
        return f"MarkovSampler({self.kind!r}, num_steps={self.num_steps})"

    def _check_k(self, k: int) -> None:
        if not isinstance(k, int) or not 0 <= k < self.num_steps:
            raise ValueError(f"k must be an int in [0, {self.num_steps}), got {k!r}")

    def model_input(self, z: torch.Tensor, k: int) -> torch.Tensor:
        """The network input at step ``k`` (Euler scales by ``1/sqrt(σ²+1)``)."""
        if self.kind == "euler":
            sigma = self._coefs[k][0]
            return z / (sigma**2 + 1) ** 0.5
        return z

    def update(self, z: torch.Tensor, out: torch.Tensor, k: int) -> torch.Tensor:
        """``z_{k+1}`` from ``z_k`` and the network output at step ``k``."""
        if self.kind == "ddim":
            a_t, a_prev = self._coefs[k]
            b_t = 1 - a_t
            if self.prediction_type == "epsilon":
                x0 = (z - b_t**0.5 * out) / a_t**0.5
                eps = out
            elif self.prediction_type == "sample":
                x0 = out
                eps = (z - a_t**0.5 * x0) / b_t**0.5
            else:  # v_prediction
                x0 = a_t**0.5 * z - b_t**0.5 * out
                eps = a_t**0.5 * out + b_t**0.5 * z
            if self.clip is not None:
                x0 = x0.clamp(-self.clip, self.clip)
            return a_prev**0.5 * x0 + (1 - a_prev) ** 0.5 * eps
        if self.kind == "euler":
            sigma, sigma_next = self._coefs[k]
            if self.prediction_type == "epsilon":
                x0 = z - sigma * out
            else:  # v_prediction
                x0 = out * (-sigma / (sigma**2 + 1) ** 0.5) + z / (sigma**2 + 1)
            return z + (z - x0) / sigma * (sigma_next - sigma)
        sigma, sigma_next = self._coefs[k]  # flow matching: out is the velocity
        return z + (sigma_next - sigma) * out

    def step(self, model_fn: ModelFn, z: torch.Tensor, k: int, cond: Any = None) -> torch.Tensor:
        """One sampler step ``Φ_k``: a pure function of ``(z, k, cond)``."""
        self._check_k(k)
        tdtype = torch.float32 if z.dtype in (torch.float16, torch.bfloat16) else z.dtype
        t = torch.full((z.shape[0],), self.timesteps[k], dtype=tdtype, device=z.device)
        return self.update(z, model_fn(self.model_input(z, k), t, cond), k)

    def sample(self, model_fn: ModelFn, z: torch.Tensor, cond: Any = None) -> torch.Tensor:
        """Run all ``T`` steps from ``z`` (= ``z_T``) and return the final sample."""
        for k in range(self.num_steps):
            z = self.step(model_fn, z, k, cond)
        return z


def from_scheduler(scheduler: Any, num_steps: int) -> MarkovSampler:
    """Build a :class:`MarkovSampler` from a diffusers scheduler (it is copied, not modified).

    Supported: ``DDIMScheduler`` (η = 0, with its ``clip_sample``), ``EulerDiscreteScheduler``
    (no churn), ``FlowMatchEulerDiscreteScheduler`` (deterministic). Other schedulers keep state
    across steps (multistep solvers) and are refused rather than given wrong gradients.
    """
    name = type(scheduler).__name__
    if name not in SUPPORTED:
        raise ValueError(
            f"scheduler {name} is not a stateless first-order sampler; supported: {SUPPORTED} "
            "(multistep solvers need their history in the checkpointed state)"
        )
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps must be a positive int, got {num_steps!r}")
    sch = copy.deepcopy(scheduler)
    cfg = sch.config
    if name == "FlowMatchEulerDiscreteScheduler":
        if cfg.get("stochastic_sampling", False):
            raise ValueError(
                "FlowMatchEulerDiscreteScheduler with stochastic_sampling is not stateless"
            )
        sch.set_timesteps(num_steps)
        sig = [float(s) for s in sch.sigmas]
        coefs = [(sig[k], sig[k + 1]) for k in range(num_steps)]
        return MarkovSampler("flow_euler", [float(t) for t in sch.timesteps], coefs)
    pred = cfg.get("prediction_type", "epsilon")
    if pred not in ("epsilon", "v_prediction", "sample"):
        raise ValueError(f"prediction_type {pred!r} is not supported")
    if name == "DDIMScheduler":
        if cfg.get("thresholding", False):
            raise ValueError("DDIMScheduler with dynamic thresholding is not supported")
        sch.set_timesteps(num_steps)
        ac = sch.alphas_cumprod
        final = float(sch.final_alpha_cumprod)
        step = cfg.num_train_timesteps // num_steps
        coefs = []
        for t in sch.timesteps.tolist():
            prev = t - step
            coefs.append((float(ac[t]), float(ac[prev]) if prev >= 0 else final))
        clip = float(cfg.clip_sample_range) if cfg.get("clip_sample", False) else None
        return MarkovSampler("ddim", [float(t) for t in sch.timesteps], coefs,
                             prediction_type=pred, clip=clip)  # fmt: skip
    if pred == "sample":
        raise ValueError("EulerDiscreteScheduler with prediction_type 'sample' is not supported")
    if cfg.get("timestep_type", "discrete") != "discrete":
        raise ValueError("EulerDiscreteScheduler with continuous timesteps is not supported")
    sch.set_timesteps(num_steps)
    sig = [float(s) for s in sch.sigmas]
    coefs = [(sig[k], sig[k + 1]) for k in range(num_steps)]
    return MarkovSampler("euler", [float(t) for t in sch.timesteps], coefs,
                         prediction_type=pred, init_noise_sigma=float(sch.init_noise_sigma))  # fmt: skip


def diffusers_model_fn(
    model: nn.Module, *, guidance_scale: float = 1.0, null_cond: Any = None
) -> ModelFn:
    """Wrap a diffusers denoiser as ``fn(z, t, cond) -> prediction``.

    ``cond`` is passed as ``class_labels`` (DiT, class-conditional ``UNet2DModel``) or
    ``encoder_hidden_states`` (``UNet2DConditionModel``). Learned-variance outputs (twice the
    input channels) keep the first half. With ``guidance_scale != 1`` classifier-free guidance
    runs the conditional and ``null_cond`` halves as one batch:
    ``ε = ε_∅ + s (ε_c − ε_∅)``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    params = inspect.signature(model.forward).parameters
    key = "encoder_hidden_states" if "encoder_hidden_states" in params else "class_labels"
    if key not in params:
        raise ValueError(
            f"{type(model).__name__}.forward takes neither class_labels nor encoder_hidden_states"
        )
    if guidance_scale != 1.0 and null_cond is None:
        raise ValueError("guidance_scale != 1 needs null_cond (the unconditional label/embedding)")

    def raw(z: torch.Tensor, t: torch.Tensor, cond: Any) -> torch.Tensor:
        kwargs = {} if cond is None else {key: cond}
        out = model(z, t, **kwargs, return_dict=False)[0]
        if out.shape[1] == 2 * z.shape[1]:
            out = out[:, : z.shape[1]]
        return out

    if guidance_scale == 1.0:
        return raw

    def guided(z: torch.Tensor, t: torch.Tensor, cond: Any) -> torch.Tensor:
        n = z.shape[0]
        null = null_cond
        if isinstance(null, torch.Tensor) and null.shape[0] != n:
            null = null.expand(n, *null.shape[1:])
        out = raw(torch.cat([z, z]), torch.cat([t, t]), torch.cat([cond, null]))
        c, u = out[:n], out[n:]
        return u + guidance_scale * (c - u)

    return guided
