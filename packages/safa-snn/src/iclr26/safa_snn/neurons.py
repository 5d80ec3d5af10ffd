"""Multi-step LIF neurons with the LocalZO spike gradient and SAFA's sparsity-aware thresholds.

The neuron (official code, ``LIFSpike``): for t = 1..T, ``u_t = τ u_{t-1} + x_t``,
``s_t = H(u_t − θ_c)`` with the strict inequality ``u_t > θ_c``, then the hard reset
``u_t ← u_t (1 − s_t)``. Tensors are laid out ``[B, T, C, ...]`` as in the official code.

The time loop runs inside one :class:`torch.autograd.Function` (forward and hand-written BPTT
backward), which avoids building a per-step autograd graph; :func:`lif_reference` is the plain
autograd loop it is tested against.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor, nn

__all__ = [
    "LIF",
    "LOOPS",
    "PHASES",
    "SPIKE_METHODS",
    "LocalZOSpike",
    "SparsityAwareLIF",
    "compiled_lif_steps",
    "lif_backward_steps",
    "lif_forward_steps",
    "lif_reference",
    "set_phase",
    "spike_fn",
    "surrogate_factors",
    "surrogate_grad",
]

SPIKE_METHODS = ("zo", "atan", "triangle")
PHASES = ("base", "record", "adapt", "frozen")
SpikeMethod = Literal["zo", "atan", "triangle"]
Phase = Literal["base", "record", "adapt", "frozen"]


def _check_method(method: str) -> None:
    if method not in SPIKE_METHODS:
        raise ValueError(f"spike must be one of {SPIKE_METHODS}, got {method!r}")


def surrogate_grad(
    u: Tensor,
    method: str = "zo",
    *,
    delta: float = 0.5,
    n_samples: int = 5,
    alpha: float = 2.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The factor ``∂s/∂u`` that the backward of ``s = H(u)`` uses.

    - ``"zo"`` (LocalZO, §2.3, the paper's default): ``(1/b) Σ_i |z_i| 1[|u| < δ|z_i|] / (2δ)``
      with fresh ``z_i ~ N(0, 1)`` per element and sample; its expectation is the N(0, δ²)
      density ``φ(u/δ)/δ``. Draws come from ``generator`` when given.
    - ``"atan"``: ``(α/2) / (1 + (π α u / 2)²)`` (spikingjelly's and snnTorch's ATan, α = 2).
    - ``"triangle"``: ``max(0, 1 − |u|)`` (the official code's ``ZIF`` with γ = 1).
    """
    if method == "zo":
        acc = torch.zeros_like(u)
        absu = u.abs()
        for _ in range(n_samples):
            z = torch.randn(u.shape, generator=generator, dtype=u.dtype, device=u.device).abs_()
            acc += z * (absu < delta * z)
        return acc / (2.0 * delta * n_samples)
    if method == "atan":
        return (u * (math.pi / 2.0 * alpha)).square_().add_(1.0).reciprocal_().mul_(alpha / 2.0)
    if method == "triangle":
        return u.abs().neg_().add_(1.0).clamp_min_(0.0)
    raise ValueError(f"spike must be one of {SPIKE_METHODS}, got {method!r}")


class LocalZOSpike(torch.autograd.Function):
    """Heaviside ``H(u) = 1[u > 0]`` whose backward is :func:`surrogate_grad` (LocalZO by default)."""

    @staticmethod
    def forward(ctx, u, method="zo", delta=0.5, n_samples=5, generator=None):  # type: ignore[override]
        ctx.save_for_backward(u)
        ctx.cfg = (method, delta, n_samples, generator)
        return (u > 0).to(u.dtype)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (u,) = ctx.saved_tensors
        method, delta, n_samples, generator = ctx.cfg
        g = surrogate_grad(u, method, delta=delta, n_samples=n_samples, generator=generator)
        return grad * g, None, None, None, None


def spike_fn(
    u: Tensor,
    method: SpikeMethod = "zo",
    delta: float = 0.5,
    n_samples: int = 5,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``H(u)`` (strict: ``u > 0``) with the chosen surrogate backward (see :func:`surrogate_grad`)."""
    if not isinstance(u, Tensor) or not u.is_floating_point():
        raise TypeError("u must be a floating-point torch.Tensor")
    _check_method(method)
    return LocalZOSpike.apply(u, method, float(delta), int(n_samples), generator)


def lif_forward_steps(x: Tensor, theta: Tensor, tau: float) -> tuple[Tensor, Tensor]:
    """The LIF time loop as a pure function: spikes and pre-reset membranes, both ``[B, T, ...]``.

    ``u_t = τ m_{t−1} + x_t``, ``s_t = 1[u_t > θ]``, ``m_t = u_t (1 − s_t)`` with ``m_0 = 0``.
    No in-place updates, no Python scalars read from tensors and a loop of static length T, so
    ``torch.compile`` traces it into one graph (inductor fuses the T steps into one kernel).
    """
    mem = torch.zeros_like(x[:, 0])
    spikes, pre = [], []
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    for t in range(x.shape[1]):
        mem = mem * tau + x[:, t]
        fired = mem > theta
        pre.append(mem)
        spikes.append(fired.to(x.dtype))
        mem = torch.where(fired, zero, mem)
    return torch.stack(spikes, dim=1), torch.stack(pre, dim=1)


def lif_backward_steps(
    grad_s: Tensor, sg: Tensor, spikes: Tensor, pre: Tensor, tau: float, detach_reset: bool
) -> tuple[Tensor, Tensor]:
    """BPTT of :func:`lif_forward_steps` as a pure function (compile-friendly, like the forward).

    ``sg`` is the surrogate factor ``∂s_t/∂u_t`` for every step (:func:`surrogate_grad` of
    ``pre − θ``). Returns ``dL/dx`` ``[B, T, ...]`` and ``dL/dθ`` per element (summed over time,
    not yet reduced over the broadcast dimensions of θ).
    """
    carry = torch.zeros_like(pre[:, 0])  # dL/dm_t: the reset membrane feeding step t+1
    grad_theta = torch.zeros_like(pre[:, 0])
    zero = torch.zeros((), dtype=pre.dtype, device=pre.device)
    grads = []
    for t in range(pre.shape[1] - 1, -1, -1):
        # m_t = u_t (1 − s_t): ∂m/∂s = −u_t, unless the reset is detached
        gs = grad_s[:, t] if detach_reset else grad_s[:, t] - carry * pre[:, t]
        gsv = sg[:, t] * gs
        carry = torch.where(spikes[:, t] > 0, zero, carry) + gsv  # dL/du_t
        grads.append(carry)
        grad_theta = grad_theta - gsv
        carry = carry * tau
    grads.reverse()
    return torch.stack(grads, dim=1), grad_theta


def surrogate_factors(
    pre: Tensor,
    theta: Tensor,
    method: str,
    delta: float = 0.5,
    n_samples: int = 5,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``∂s_t/∂u_t`` for every step of ``pre`` ``[B, T, ...]`` (θ broadcastable to ``pre[:, 0]``).

    Deterministic surrogates are computed in one vectorised pass. LocalZO draws its Gaussian
    samples step by step from the last step to the first, the order of a step-by-step BPTT, so a
    seeded generator gives the same estimates as the loop that draws inside the backward.
    """
    if method != "zo":
        return surrogate_grad(pre - theta.unsqueeze(1), method, delta=delta, n_samples=n_samples)
    steps = [
        surrogate_grad(pre[:, t] - theta, method, delta=delta, n_samples=n_samples,
                       generator=generator)
        for t in range(pre.shape[1] - 1, -1, -1)
    ]  # fmt: skip
    return torch.stack(steps[::-1], dim=1)


LOOPS = ("fused", "compiled")


@functools.lru_cache(maxsize=4)
def compiled_lif_steps(backend: str = "inductor") -> tuple[Callable, Callable]:
    """:func:`lif_forward_steps` and :func:`lif_backward_steps` through ``torch.compile``
    (``dynamic=False``: one specialisation per shape, τ and ``detach_reset``), cached per backend.
    The first call for a new shape compiles (tens of seconds on a CPU); ``bench`` reports it."""
    return (
        torch.compile(lif_forward_steps, backend=backend, dynamic=False),
        torch.compile(lif_backward_steps, backend=backend, dynamic=False),
    )


class _FusedLIF(torch.autograd.Function):
    """Multi-step LIF over x ``[B, T, ...]`` with threshold ``theta`` broadcastable to x[:, 0].

    ``kernels`` is None (the eager loops below) or a (forward, backward) pair of compiled
    :func:`lif_forward_steps` / :func:`lif_backward_steps`.

    The eager loops run one or two tensor ops per time step and allocate nothing inside the
    loop. Forward: ``u_t = addcmul(x_t, u_{t−1}, k_{t−1}, τ)`` (``τ u_{t−1} k_{t−1} + x_t``:
    the reset membrane is ``u k``) and ``k_t = 1[u_t ≤ θ]`` written in place; the spikes are
    ``1 − k`` in one pass. Only ``u`` (pre-reset membranes) and ``k`` are saved. Backward: with
    ``a_t = dL/du_t`` the BPTT is the linear recurrence ``a_t = A_t + K_t a_{t+1}``, where
    ``A_t = σ'_t g_t`` (σ' the surrogate factor, g the incoming gradient) and
    ``K_t = τ (k_t − σ'_t u_t)`` (``τ k_t`` with a detached reset) are computed for all steps at
    once; the loop is one in-place ``addcmul`` per step. ``dL/dθ = −Σ_t (a_t − τ k_t a_{t+1})``
    is reduced after the loop, and only when θ needs a gradient.
    """

    @staticmethod
    def forward(ctx, x, theta, tau, cfg, detach_reset, kernels=None):  # type: ignore[override]
        if kernels is None and torch.compiler.is_compiling():
            # dynamo refuses ``out=`` views; the pure loops trace into one graph instead
            kernels = (lif_forward_steps, lif_backward_steps)
        ctx.tau, ctx.cfg, ctx.detach_reset, ctx.kernels = tau, cfg, detach_reset, kernels
        ctx.theta_needs_grad = theta.requires_grad
        if kernels is not None:
            spikes, pre = kernels[0](x, theta, tau)
            ctx.save_for_backward(pre, spikes, theta)
            return spikes
        T = x.shape[1]
        pre = torch.empty_like(x, memory_format=torch.contiguous_format)  # u_t before the reset
        keep = torch.empty_like(pre)  # k_t = 1 − s_t
        pre[:, 0] = x[:, 0]
        torch.le(pre[:, 0], theta, out=keep[:, 0])
        for t in range(1, T):
            # τ (u k) + x: the product u k is exact (k ∈ {0, 1}), so u_t rounds as τ m + x does
            torch.addcmul(x[:, t], pre[:, t - 1], keep[:, t - 1], value=tau, out=pre[:, t])
            torch.le(pre[:, t], theta, out=keep[:, t])
        ctx.save_for_backward(pre, keep, theta)
        return torch.rsub(keep, 1.0)

    @staticmethod
    def backward(ctx, grad_s):  # type: ignore[override]
        pre, saved, theta = ctx.saved_tensors
        method, delta, n_samples, generator = ctx.cfg
        tau, detach_reset = ctx.tau, ctx.detach_reset
        sg = surrogate_factors(pre, theta, method, delta, n_samples, generator)
        if ctx.kernels is not None:
            grad_x, grad_theta = ctx.kernels[1](
                grad_s.contiguous(), sg, saved, pre, tau, detach_reset
            )
            grad_theta = grad_theta if ctx.theta_needs_grad else None
        else:
            keep = saved
            # K_t = τ k_t (detached reset) or τ (k_t − σ'_t u_t)
            K = keep * tau if detach_reset else torch.mul(sg, pre).neg_().add_(keep).mul_(tau)
            grad_x = sg.mul_(grad_s)  # A_t, overwritten by a_t from the last step back
            for t in range(pre.shape[1] - 2, -1, -1):
                grad_x[:, t].addcmul_(grad_x[:, t + 1], K[:, t])
            grad_theta = None
            if ctx.theta_needs_grad:  # Σ_t σ'_t (g_t − u_t c_t) = Σ_t (a_t − τ k_t a_{t+1})
                grad_theta = grad_x.sum(1) - tau * (keep[:, :-1] * grad_x[:, 1:]).sum(1)
                grad_theta = grad_theta.neg_()
        if grad_theta is not None:
            dims = [i for i in range(grad_theta.ndim) if theta.shape[i] == 1]
            grad_theta = grad_theta.sum(dim=dims, keepdim=True).reshape(theta.shape)
        return grad_x, grad_theta, None, None, None, None


def lif_reference(
    x: Tensor,
    theta: Tensor | float = 1.0,
    tau: float = 0.5,
    spike: SpikeMethod = "zo",
    delta: float = 0.5,
    n_samples: int = 5,
    generator: torch.Generator | None = None,
    detach_reset: bool = False,
) -> Tensor:
    """The plain autograd loop of the official ``LIFSpike`` on x ``[B, T, ...]`` (for tests)."""
    mem = torch.zeros_like(x[:, 0])
    out = []
    for t in range(x.shape[1]):
        mem = mem * tau + x[:, t]
        s = spike_fn(mem - theta, spike, delta, n_samples, generator)
        out.append(s)
        mem = mem * (1.0 - (s.detach() if detach_reset else s))
    return torch.stack(out, dim=1)


class LIF(nn.Module):
    """Multi-step LIF layer with hard reset and a per-channel threshold (official ``LIFSpike``).

    Args:
        num_channels: C, the size of dimension ``channel_dim`` of the input ``[B, T, C, ...]``.
        tau: multiplicative leak τ (official effective default 0.5; no input scaling).
        v_threshold: initial θ (1.0). θ has shape ``(C,)`` and is an ``nn.Parameter`` trained by
            the optimiser when ``learn_threshold`` (the official code trains it in the base session).
        spike: surrogate of the backward: ``"zo"`` (LocalZO, default), ``"atan"`` or ``"triangle"``.
        delta, n_samples: LocalZO's δ (0.5) and number of Gaussian samples b (5).
        detach_reset: cut the gradient through the reset (snnTorch's default); the official code
            keeps it (False).
        generator: torch.Generator for the LocalZO draws (seeded runs); may be set later.
        loop: ``"fused"`` (default): the time loop and its BPTT as in-place eager loops inside
            one autograd function; ``"compiled"``: the same loops as pure functions through
            ``torch.compile`` (:func:`compiled_lif_steps`; the first call per shape compiles).

    Attributes:
        spike_count: spikes emitted by the last forward, a detached 0-d tensor (never a Python
            float: reading it does not synchronise or break a ``torch.compile`` graph).
    """

    def __init__(
        self,
        num_channels: int,
        tau: float = 0.5,
        v_threshold: float = 1.0,
        learn_threshold: bool = True,
        spike: SpikeMethod = "zo",
        delta: float = 0.5,
        n_samples: int = 5,
        channel_dim: int = 2,
        detach_reset: bool = False,
        generator: torch.Generator | None = None,
        loop: Literal["fused", "compiled"] = "fused",
    ) -> None:
        super().__init__()
        if loop not in LOOPS:
            raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
        if isinstance(num_channels, bool) or not isinstance(num_channels, int) or num_channels < 1:
            raise ValueError(f"num_channels must be a positive int, got {num_channels!r}")
        if not (isinstance(tau, int | float) and 0.0 <= tau <= 1.0):
            raise ValueError(f"tau must be a float in [0, 1], got {tau!r}")
        if not (isinstance(v_threshold, int | float) and math.isfinite(v_threshold)):
            raise ValueError(f"v_threshold must be a finite float, got {v_threshold!r}")
        _check_method(spike)
        if not (isinstance(delta, int | float) and delta > 0):
            raise ValueError(f"delta must be > 0, got {delta!r}")
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
        if channel_dim < 2:
            raise ValueError(
                f"channel_dim must be >= 2 (input is [B, T, C, ...]), got {channel_dim}"
            )
        self.num_channels = num_channels
        self.tau = float(tau)
        self.spike = spike
        self.delta = float(delta)
        self.n_samples = n_samples
        self.channel_dim = channel_dim
        self.detach_reset = detach_reset
        self.generator = generator
        self.loop = loop
        self.threshold = nn.Parameter(
            torch.full((num_channels,), float(v_threshold)), requires_grad=learn_threshold
        )
        self.register_buffer("spike_count", torch.zeros(()), persistent=False)

    def _theta(self, x: Tensor, track_grad: bool) -> Tensor:
        shape = [1] * (x.ndim - 1)
        shape[self.channel_dim - 1] = self.num_channels
        # detached thresholds are copied: the adapt phase updates them in place afterwards
        theta = self.threshold if track_grad else self.threshold.detach().clone()
        return theta.to(x.dtype).reshape(shape)

    def _check(self, x: Tensor) -> None:
        if not isinstance(x, Tensor) or not x.is_floating_point():
            raise TypeError(f"x must be a floating-point torch.Tensor, got {type(x).__name__}")
        if x.ndim <= self.channel_dim or x.shape[self.channel_dim] != self.num_channels:
            raise ValueError(
                f"x must be [B, T, C={self.num_channels}, ...] with C at dim {self.channel_dim}, "
                f"got shape {tuple(x.shape)}"
            )
        if x.shape[1] < 1:
            raise ValueError("x must have T >= 1 time steps (dim 1)")

    def _run(self, x: Tensor, track_grad: bool) -> Tensor:
        theta = self._theta(x, track_grad)
        cfg = (self.spike, self.delta, self.n_samples, self.generator)
        kernels = compiled_lif_steps() if self.loop == "compiled" else None
        out = _FusedLIF.apply(x, theta, self.tau, cfg, self.detach_reset, kernels)
        self.spike_count = out.detach().sum()
        return out

    def forward(self, x: Tensor) -> Tensor:
        """Spikes ``[B, T, C, ...]`` (0/1, same dtype as ``x``)."""
        self._check(x)
        return self._run(x, track_grad=True)

    def extra_repr(self) -> str:
        return f"{self.num_channels}, tau={self.tau}, spike={self.spike!r}, loop={self.loop!r}"


class SparsityAwareLIF(LIF):
    """LIF with SAFA's sparsity-aware threshold regulation (§2.2, paper Eq. for Θ).

    ``Θ ← Θ − A (r̄_n − r̄_b)``, ``A = β (I − M) + γ M``: channels inside the adaptive mask M get
    ``gamma`` (0.01) and the others ``beta`` (0.1) — the official code's mapping (the README's
    wording suggests the opposite; this is a [verify] point). r̄ are per-channel firing rates (mean
    over batch, time and space). The published sign lowers θ where the rate rose
    (anti-homeostatic); ``homeostatic=True`` flips it.

    Phases (set with :func:`set_phase`):
      - ``"base"``: θ is trained by backprop (gradient through the surrogate), no regulation;
      - ``"record"``: θ frozen; r̄_b accumulates over every forward (the base training set);
      - ``"adapt"``: each forward (on the incremental support set) updates θ, no autograd;
      - ``"frozen"``: θ frozen, no autograd to θ (evaluation).

    ``regulate=False`` is what the released code effectively does (its session counter is never
    set, so the update never runs); ``legacy_update_on_eval=True`` also updates in eval-mode
    forwards of the ``"frozen"`` phase, as the code's branch would if it ran.
    The mask is ⌊ηC⌋ channels drawn by ``torch.randperm`` with ``mask_seed``.
    """

    def __init__(
        self,
        num_channels: int,
        *,
        eta: float = 0.5,
        beta: float = 0.1,
        gamma: float = 0.01,
        regulate: bool = True,
        homeostatic: bool = False,
        mask_seed: int | None = None,
        legacy_update_on_eval: bool = False,
        **lif_kw,
    ) -> None:
        super().__init__(num_channels, **lif_kw)
        if not (isinstance(eta, int | float) and 0.0 <= eta <= 1.0):
            raise ValueError(f"eta must be in [0, 1], got {eta!r}")
        for name, v in (("beta", beta), ("gamma", gamma)):
            if not (isinstance(v, int | float) and math.isfinite(v)):
                raise ValueError(f"{name} must be a finite float, got {v!r}")
        self.eta, self.beta, self.gamma = float(eta), float(beta), float(gamma)
        self.regulate = bool(regulate)
        self.homeostatic = bool(homeostatic)
        self.legacy_update_on_eval = bool(legacy_update_on_eval)
        gen = None
        if mask_seed is not None:
            gen = torch.Generator().manual_seed(int(mask_seed))
        perm = torch.randperm(num_channels, generator=gen)
        mask = torch.zeros(num_channels, dtype=torch.bool)
        mask[perm[: math.floor(self.eta * num_channels)]] = True
        self.register_buffer("mask", mask)
        self.register_buffer("rate_sum", torch.zeros(num_channels, dtype=torch.float64))
        self.register_buffer("rate_count", torch.zeros((), dtype=torch.float64))
        self.phase: str = "base"
        self.last_rate: Tensor | None = None

    @property
    def base_rate(self) -> Tensor:
        """r̄_b: the per-channel rate recorded in the ``"record"`` phase (zeros if none)."""
        # zeros when nothing was recorded (rate_sum is then 0); no host sync
        return (self.rate_sum / self.rate_count.clamp_min(1e-300)).to(self.threshold.dtype)

    def coefficients(self) -> Tensor:
        """The diagonal of A: ``gamma`` on masked channels, ``beta`` elsewhere."""
        return torch.where(self.mask, torch.tensor(self.gamma), torch.tensor(self.beta)).to(
            self.threshold.dtype
        )

    def record_base_rate(self, rate: Tensor, weight: float = 1.0) -> None:
        """Accumulate one rate vector (C,) into r̄_b with a weight (e.g. the number of samples)."""
        self.rate_sum += rate.detach().to(torch.float64).cpu().to(self.rate_sum.device) * weight
        self.rate_count += weight

    def reset_base_rate(self) -> None:
        self.rate_sum.zero_()
        self.rate_count.zero_()

    @torch.no_grad()
    def adapt(self, rate: Tensor) -> None:
        """One regulation step ``θ ← θ ∓ A (rate − r̄_b)`` (no-op when ``regulate=False``)."""
        if not self.regulate:
            return
        diff = rate.to(self.threshold.dtype) - self.base_rate.to(self.threshold.device)
        step = self.coefficients().to(self.threshold.device) * diff
        if self.homeostatic:
            self.threshold += step
        else:
            self.threshold -= step

    def _rate(self, spikes: Tensor) -> Tensor:
        dims = [d for d in range(spikes.ndim) if d != self.channel_dim]
        return spikes.detach().mean(dim=dims)

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        out = self._run(x, track_grad=self.phase == "base")
        rate = self._rate(out)
        self.last_rate = rate
        if self.phase == "record":
            self.record_base_rate(rate, weight=float(x.shape[0]))
        elif self.phase == "adapt" or (
            self.phase == "frozen" and self.legacy_update_on_eval and not self.training
        ):
            self.adapt(rate)
        return out

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, eta={self.eta}, beta={self.beta}, gamma={self.gamma}, "
            f"regulate={self.regulate}, homeostatic={self.homeostatic}, phase={self.phase!r}"
        )


def set_phase(model: nn.Module, phase: Phase) -> None:
    """Set the phase of every :class:`SparsityAwareLIF` in ``model`` (see its docstring)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    for m in model.modules():
        if isinstance(m, SparsityAwareLIF):
            m.phase = phase
