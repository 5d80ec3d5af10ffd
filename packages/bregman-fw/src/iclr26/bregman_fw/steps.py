"""Step-size rules for Frank–Wolfe directions, including the paper's adaptive Bregman rule.

Every rule is a frozen dataclass of hyperparameters (hashable: a static argument of ``jax.jit``)
with two pure, jittable methods:

- ``init(problem, x, fx, grad, d, gamma_max, kernel) -> StepState`` before the first iteration;
- ``__call__(problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state) -> (gamma, state, info)``.

Here ``d`` is the search direction (``v − x`` for a FW step, ``x − v_A`` for an away step,
``v − v_A`` for a pairwise step), ``g_d = ⟨−∇f(x), d⟩ ≥ 0`` its slope and ``gamma_max`` the
largest feasible step. ``problem`` is an :class:`Oracle` (``f`` and ``value_and_grad`` of the
objective). ``info`` is a :class:`StepInfo`: the accepted estimate M, the exponent κ, the number
of objective evaluations the rule used, whether the test accepted (``False`` means the cap or
fallback was hit) and the descent bound ``f(x) − γ g_d + M (γ/γ_max)^{1+κ} D_φ(x + γ_max d, x)``
that an accepted step certifies (NaN for rules without one).

For directions with ``γ_max ≠ 1`` the Bregman rules apply the paper's formula to the endpoint
``y = x + γ_max d`` and the step fraction ``γ/γ_max`` (our derivation, not confirmed from the
paper text: see the README); with ``γ_max = 1`` this is exactly Algorithm 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

from iclr26.bregman_fw import precision  # noqa: F401  (float64 before any array)
from iclr26.bregman_fw.kernels import Euclidean

__all__ = [
    "AdaptiveBregman",
    "BregmanShortStep",
    "DOptimalStep",
    "EuclideanAdaptive",
    "ExactLineSearch",
    "FWJLAdaptive",
    "OpenLoop",
    "Oracle",
    "ShortStep",
    "StepInfo",
    "StepRule",
    "StepState",
]


class Oracle(NamedTuple):
    """The objective as the step rules see it: ``f(x)`` and ``value_and_grad(x)``."""

    f: Callable[[jax.Array], jax.Array]
    value_and_grad: Callable[[jax.Array], tuple[jax.Array, jax.Array]]


class StepState(NamedTuple):
    """What a rule carries between iterations: the smoothness estimate L̃ and the last κ."""

    L: jax.Array
    kappa: jax.Array


class StepInfo(NamedTuple):
    """Per-step record (see the module docstring)."""

    M: jax.Array
    kappa: jax.Array
    n_evals: jax.Array
    accepted: jax.Array
    bound: jax.Array


def _vdot(a, b):
    return jnp.sum(a * b)


def _num(value, name: str, low: float, high: float = math.inf, *, low_open=True, high_open=False):
    """A real hyperparameter in an interval (finite unless ``high`` is inf and open)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    below = v <= low if low_open else v < low
    above = v >= high if high_open else v > high
    if math.isnan(v) or math.isinf(v) or below or above:
        left = "(" if low_open else "["
        right = ")" if high_open or math.isinf(high) else "]"
        raise ValueError(f"{name} must be in {left}{low:g}, {high:g}{right}, got {value!r}")


def _count(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def _check_adaptive(rule) -> None:
    _num(rule.eta, "eta", 0.0, 1.0)
    _num(rule.tau, "tau", 1.0)
    if rule.L0 is not None:
        _num(rule.L0, "L0", 0.0)
    _count(rule.max_backtracks, "max_backtracks")
    _num(rule.max_estimate, "max_estimate", 0.0)


def _info(M, kappa, n_evals, accepted, bound) -> StepInfo:
    f64 = jnp.result_type(float)
    return StepInfo(
        jnp.asarray(M, f64),
        jnp.asarray(kappa, f64),
        jnp.asarray(n_evals, jnp.int32),
        jnp.asarray(accepted, bool),
        jnp.asarray(bound, f64),
    )


def _nan_state() -> StepState:
    return StepState(jnp.asarray(jnp.nan), jnp.asarray(1.0))


class StepRule:
    """Base class: ``init`` returns a state with no estimate; subclasses implement ``__call__``.

    Rules whose trials evaluate ``value_and_grad`` at ``x + γd`` override :meth:`apply` to hand
    the accepted point's value and gradient to the solver, which then skips its own evaluation.
    """

    name: str = "step"

    def init(self, problem, x, fx, grad, d, gamma_max, kernel) -> StepState:
        return _nan_state()

    def apply(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        """``(gamma, state, info, point)``: ``point`` is ``(f, ∇f)`` at ``x + γd`` when the rule
        evaluated it, else ``None`` (the solver evaluates it)."""
        gamma, state, info = self(problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state)
        return gamma, state, info, None


@dataclass(frozen=True)
class OpenLoop(StepRule):
    """Agnostic step γ_t = ℓ/(t + ℓ), clipped to γ_max (ℓ = 2: the classical 2/(t+2); "OpenFW")."""

    ell: float = 2.0
    name = "open-loop"

    def __post_init__(self):
        _num(self.ell, "ell", 0.0)

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        gamma = jnp.minimum(self.ell / (t + self.ell), gamma_max)
        return gamma, state, _info(jnp.nan, jnp.nan, 0, True, jnp.nan)


@dataclass(frozen=True)
class ShortStep(StepRule):
    """Euclidean short step γ = min(g_d/(L‖d‖²), γ_max) with a global Lipschitz constant L ("ShortFW")."""

    L: float = 1.0
    name = "short"

    def __post_init__(self):
        _num(self.L, "L", 0.0)

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        dd = _vdot(d, d)
        gamma = jnp.clip(g_d / (self.L * jnp.where(dd > 0, dd, 1.0)), 0.0, gamma_max)
        bound = fx - gamma * g_d + 0.5 * self.L * gamma**2 * dd
        return gamma, state, _info(self.L, 1.0, 0, True, bound)


def _endpoint(x, d, gamma_max, kernel):
    """y = x + γ_max d, with round-off below 0 removed for kernels living on the orthant (the
    endpoint of an away step has exact zeros that can come out as -1e-17)."""
    y = x + gamma_max * d
    return y if kernel.domain == "real" else jnp.maximum(y, 0.0)


def _bregman_gamma(g_d, gamma_max, M, kappa, D):
    """Paper §1.2/Algorithm 2 step: γ_max·min{(g_d γ_max / ((1+κ) M D))^{1/κ}, 1}, D = D_φ(y, x)."""
    ratio = g_d * gamma_max / ((1.0 + kappa) * M * jnp.where(D > 0, D, 1.0))
    frac = jnp.where(D > 0, jnp.clip(ratio, 0.0, None) ** (1.0 / kappa), 1.0)
    frac = jnp.where(jnp.isfinite(D), frac, 0.0)
    return gamma_max * jnp.minimum(frac, 1.0)


@dataclass(frozen=True)
class BregmanShortStep(StepRule):
    """Bregman short step (paper §3, eq. for known L and ν):
    γ = min{(g / ((1+ν) L D_φ(v, x)))^{1/ν}, γ_max}, with the endpoint form for γ_max ≠ 1."""

    L: float = 1.0
    nu: float = 1.0
    name = "bregman-short"

    def __post_init__(self):
        _num(self.L, "L", 0.0)
        _num(self.nu, "nu", 0.0, 1.0)

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        D = kernel.divergence(_endpoint(x, d, gamma_max, kernel), x)
        gamma = _bregman_gamma(g_d, gamma_max, self.L, self.nu, D)
        bound = fx - gamma * g_d + self.L * (gamma / gamma_max) ** (1 + self.nu) * D
        return gamma, state, _info(self.L, self.nu, 0, True, bound)


def _probe_estimate(problem, x, fx, grad, d, gamma_max, kernel):
    """Initial M from one probe step ε = 1e-3 along d: M₀ = |D_f(x_ε, x)| / D_φ(x_ε, x)."""
    eps = 1e-3 * gamma_max
    xe = x + eps * d
    df = problem.f(xe) - fx - eps * _vdot(grad, d)
    dphi = kernel.divergence(xe, x)
    m0 = jnp.abs(df) / jnp.where(dphi > 0, dphi, 1.0)
    ok = jnp.isfinite(m0) & (m0 > 0) & (dphi > 0)
    return jnp.where(ok, m0, 1.0)


class _Backtrack(NamedTuple):
    M: jax.Array
    kappa: jax.Array
    n: jax.Array
    accepted: jax.Array
    gamma: jax.Array
    f_new: jax.Array
    g_new: jax.Array
    bound: jax.Array


@dataclass(frozen=True)
class AdaptiveBregman(StepRule):
    """The paper's adaptive Bregman step size (Algorithm 2, ``step_size``), searching M and κ.

    Per call: ``M = η·L̃`` and ``κ = 1`` (or the last κ when ``kappa_reset=False``); then repeat
    ``γ = γ_max·min{(g_d γ_max / ((1+κ) M D_φ(y, x)))^{1/κ}, 1}`` with ``y = x + γ_max d`` until
    ``f(x + γd) ≤ f(x) − γ g_d + M (γ/γ_max)^{1+κ} D_φ(y, x)`` (equivalently
    ``D_f(x⁺, x) ≤ M (γ/γ_max)^{1+κ} D_φ(y, x)``), multiplying ``M ← τM`` and
    ``κ ← max(βκ, κ_min)`` after each rejection. On acceptance ``L̃ ← M``.

    Defaults are the paper's: η = 0.9, τ = 2, β = 0.9 (§6). [verify] items kept configurable:
    ``kappa_reset`` (the paper note says κ restarts at 1 every iteration) and ``kappa_min`` (no
    floor is stated; 1e-3 keeps 1/κ finite). ``L0=None`` estimates the first L̃ from a probe step.
    Float64 round-off: the test accepts ``f(x⁺) ≤ bound + rtol·|f(x)|`` (``rtol`` = 2e-15, about
    nine ulps), otherwise decreases below the resolution of f are rejected forever near the
    optimum and M runs away (FrankWolfe.jl#337); a pass that needed this slack does not lower L̃.
    Set ``rtol=0`` for the exact test.
    Safeguards (not in the paper): at most ``max_backtracks`` trials and ``M ≤ max_estimate``;
    if the cap is hit the step falls back to the last trial if it decreased f, else γ = 0, and
    ``info.accepted`` is ``False``. With the Euclidean kernel and ``beta=1`` the rule is
    step-for-step :class:`EuclideanAdaptive`.
    """

    eta: float = 0.9
    tau: float = 2.0
    beta: float = 0.9
    L0: float | None = None
    kappa0: float = 1.0
    kappa_min: float = 1e-3
    kappa_reset: bool = True
    max_backtracks: int = 60
    max_estimate: float = 1e12
    rtol: float = 2e-15
    name = "adaptive-bregman"

    def __post_init__(self):
        _check_adaptive(self)
        _num(self.beta, "beta", 0.0, 1.0)
        _num(self.kappa0, "kappa0", 0.0, 1.0)
        _num(self.kappa_min, "kappa_min", 0.0, self.kappa0)
        _num(self.rtol, "rtol", 0.0, 1.0, low_open=False)
        if not isinstance(self.kappa_reset, bool):
            raise TypeError(f"kappa_reset must be True or False, got {self.kappa_reset!r}")

    def init(self, problem, x, fx, grad, d, gamma_max, kernel):
        if self.L0 is not None:
            L = jnp.asarray(float(self.L0))
        else:
            L = _probe_estimate(problem, x, fx, grad, d, gamma_max, kernel) / self.eta
        return StepState(L, jnp.asarray(self.kappa0, L.dtype))

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        return self.apply(problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state)[:3]

    def apply(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        D = kernel.divergence(_endpoint(x, d, gamma_max, kernel), x)
        M0 = jnp.minimum(self.eta * state.L, self.max_estimate)
        k0 = jnp.asarray(self.kappa0, M0.dtype) if self.kappa_reset else state.kappa

        # Each trial evaluates f and ∇f together (as copt does): the accepted trial's gradient is
        # the next iterate's, so an iteration costs one value-and-grad per trial and no more.
        def trial(M, kappa):
            gamma = _bregman_gamma(g_d, gamma_max, M, kappa, D)
            f_new, g_new = problem.value_and_grad(x + gamma * d)
            bound = fx - gamma * g_d + M * (gamma / gamma_max) ** (1.0 + kappa) * D
            return gamma, f_new, g_new, bound

        slack = self.rtol * jnp.abs(fx)

        def cond(c: _Backtrack):
            return (~c.accepted) & (c.n < self.max_backtracks) & (self.max_estimate > c.M)

        def body(c: _Backtrack):
            M = jnp.minimum(c.M * self.tau, self.max_estimate)
            kappa = jnp.maximum(c.kappa * self.beta, self.kappa_min)
            gamma, f_new, g_new, bound = trial(M, kappa)
            return _Backtrack(M, kappa, c.n + 1, f_new <= bound + slack, gamma, f_new, g_new, bound)

        gamma, f_new, g_new, bound = trial(M0, k0)
        init = _Backtrack(
            M0, k0, jnp.asarray(1, jnp.int32), f_new <= bound + slack, gamma, f_new, g_new, bound
        )
        c = jax.lax.while_loop(cond, body, init)
        # Fallback when the cap is hit: keep the last trial only if it decreased f.
        keep = (c.accepted | (c.f_new <= fx)) & jnp.isfinite(c.f_new)
        gamma = jnp.where(keep, c.gamma, 0.0)
        point = (jnp.where(keep, c.f_new, fx), jnp.where(keep, c.g_new, grad))
        # A pass that needed the round-off slack says nothing about the curvature: keep L̃ from
        # falling, or M drifts down on noise and the steps overshoot near the optimum.
        by_noise = c.accepted & (c.f_new > c.bound)
        L_new = jnp.where(by_noise, jnp.maximum(c.M, state.L), c.M)
        new_state = StepState(jnp.where(c.accepted, L_new, state.L), c.kappa)
        return gamma, new_state, _info(c.M, c.kappa, c.n, c.accepted, c.bound), point


@dataclass(frozen=True)
class EuclideanAdaptive(StepRule):
    """Adaptive Euclidean step of Pedregosa, Negiar, Askari & Jaggi (AISTATS 2020) ("EucFW").

    ``M = ηL̃``; γ = min(g_d/(M‖d‖²), γ_max); accept if f(x + γd) ≤ f(x) − γ g_d + (M/2)γ²‖d‖²,
    else M ← τM. copt's ``step="backtracking"`` uses the same test.
    """

    eta: float = 0.9
    tau: float = 2.0
    L0: float | None = None
    max_backtracks: int = 60
    max_estimate: float = 1e12
    rtol: float = 2e-15
    name = "euclidean-adaptive"

    def __post_init__(self):
        _check_adaptive(self)
        _num(self.rtol, "rtol", 0.0, 1.0, low_open=False)

    def init(self, problem, x, fx, grad, d, gamma_max, kernel):
        if self.L0 is not None:
            return StepState(jnp.asarray(float(self.L0)), jnp.asarray(1.0))
        L = _probe_estimate(problem, x, fx, grad, d, gamma_max, Euclidean()) / self.eta
        return StepState(L, jnp.asarray(1.0))

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        return self.apply(problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state)[:3]

    def apply(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        rule = AdaptiveBregman(
            eta=self.eta,
            tau=self.tau,
            beta=1.0,
            kappa_min=1.0,
            max_backtracks=self.max_backtracks,
            max_estimate=self.max_estimate,
            rtol=self.rtol,
        )
        return rule.apply(problem, t, x, fx, grad, d, g_d, gamma_max, Euclidean(), state)


@dataclass(frozen=True)
class FWJLAdaptive(StepRule):
    """FrankWolfe.jl's ``Adaptive`` test (Pokutta 2023), re-implemented from its documented rule.

    ``M = ηL̃``; γ = min(g_d/(M‖d‖²), γ_max); backtrack (M ← τM) while ``f(x⁺) > f(x)`` or
    ``⟨∇f(x⁺), d⟩ > 0`` (the step overshot). Costs a gradient per trial.
    """

    eta: float = 0.9
    tau: float = 2.0
    L0: float | None = None
    max_backtracks: int = 60
    max_estimate: float = 1e12
    name = "fwjl-adaptive"

    def __post_init__(self):
        _check_adaptive(self)

    def init(self, problem, x, fx, grad, d, gamma_max, kernel):
        if self.L0 is not None:
            return StepState(jnp.asarray(float(self.L0)), jnp.asarray(1.0))
        L = _probe_estimate(problem, x, fx, grad, d, gamma_max, Euclidean()) / self.eta
        return StepState(L, jnp.asarray(1.0))

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        return self.apply(problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state)[:3]

    def apply(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        dd = jnp.where(_vdot(d, d) > 0, _vdot(d, d), 1.0)

        def trial(M):
            gamma = jnp.clip(g_d / (M * dd), 0.0, gamma_max)
            f_new, g_new = problem.value_and_grad(x + gamma * d)
            ok = (f_new <= fx + 2e-15 * jnp.abs(fx)) & (_vdot(g_new, d) <= 0.0) | (gamma == 0)
            return gamma, ok, f_new, g_new

        def cond(c):
            return (~c[2]) & (c[1] < self.max_backtracks) & (c[0] < self.max_estimate)

        def body(c):
            M = jnp.minimum(c[0] * self.tau, self.max_estimate)
            gamma, ok, f_new, g_new = trial(M)
            return M, c[1] + 1, ok, gamma, f_new, g_new

        M0 = jnp.minimum(self.eta * state.L, self.max_estimate)
        gamma, ok, f_new, g_new = trial(M0)
        M, n, ok, gamma, f_new, g_new = jax.lax.while_loop(
            cond, body, (M0, jnp.asarray(1, jnp.int32), ok, gamma, f_new, g_new)
        )
        keep = (ok | (f_new <= fx)) & jnp.isfinite(f_new)
        gamma = jnp.where(keep, gamma, 0.0)
        point = (jnp.where(keep, f_new, fx), jnp.where(keep, g_new, grad))
        new_state = StepState(jnp.where(ok, M, state.L), state.kappa)
        return gamma, new_state, _info(M, 1.0, n, ok, jnp.nan), point


@dataclass(frozen=True)
class ExactLineSearch(StepRule):
    """Exact line search by bisection on ⟨∇f(x + γd), d⟩ over [0, γ_max] (reference only;
    exact for convex f along the segment). ``iters`` bisections, each one gradient."""

    iters: int = 60
    name = "exact"

    def __post_init__(self):
        _count(self.iters, "iters")

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        def slope(g):
            return _vdot(problem.value_and_grad(x + g * d)[1], d)

        def body(_, lohi):
            lo, hi = lohi
            mid = 0.5 * (lo + hi)
            neg = slope(mid) < 0
            return jnp.where(neg, mid, lo), jnp.where(neg, hi, mid)

        end = x + gamma_max * d
        # the full step only if f also decreased there (guards ill-conditioned endpoints)
        end_neg = (slope(gamma_max) <= 0) & (problem.f(end) <= fx)
        lo, hi = jax.lax.fori_loop(0, self.iters, body, (jnp.zeros_like(g_d), gamma_max * 1.0))
        gamma = jnp.where(end_neg, gamma_max, 0.5 * (lo + hi))
        return gamma, state, _info(jnp.nan, jnp.nan, self.iters + 2, True, jnp.nan)


@dataclass(frozen=True)
class DOptimalStep(StepRule):
    """Closed-form exact step for D-optimal design ``f(x) = −log det(H diag(x) Hᵀ)`` over the
    probability simplex: the Fedorov–Wynn / Khachiyan step, as in accbpg's ``D_opt_FW(_away)``.

    Along a FW direction ``d = e_k − x`` or an away direction ``d = x − e_k`` the matrix is a
    rank-one update of ``M = H diag(x) Hᵀ``: with ``u = ±γ``, ``f(x + γd) = f(x) −
    (m − 1) log(1 − u) − log(1 + u (w_k − 1))``, where ``w_k = hₖᵀ M⁻¹ hₖ = −∂ₖf(x)`` and
    ``m = −⟨∇f(x), x⟩`` (``Σ xⱼ wⱼ = tr I``). Both come from the gradient the solver already
    has, so the exact minimiser over ``[0, γ_max]`` costs O(n) and no objective evaluation:
    ``u* = (w_k − m) / (m (w_k − 1))``. The vertex k and the sign are read off ``d``
    (its largest entry in magnitude).

    Valid only for this objective on :class:`~iclr26.bregman_fw.lmo.Simplex` with FW or away
    steps (not pairwise steps, not the truncated simplex): elsewhere the formula is not the
    line minimum. As a guard, a step that does not decrease f is replaced by γ = 0
    (``accepted=False`` in the history). Not a method of the paper: the specialised peer rule
    for this one problem, so that the bench compares like with like.
    """

    name = "dopt-exact"

    def __call__(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        flat_d, flat_g = d.reshape(-1), grad.reshape(-1)
        k = jnp.argmax(jnp.abs(flat_d))
        s = jnp.sign(flat_d[k])  # +1: FW step towards e_k, -1: away step from e_k
        w = -flat_g[k]
        m = -_vdot(grad, x)

        def slope(gamma):  # dφ/dγ along d, φ(γ) = f(x + γd) − f(x)
            u = s * gamma
            return s * ((m - 1.0) / (1.0 - u) - (w - 1.0) / (1.0 + u * (w - 1.0)))

        den = m * (w - 1.0)
        u_star = (w - m) / jnp.where(den == 0, 1.0, den)
        g_star = jnp.clip(s * u_star, 0.0, gamma_max)
        # φ is convex on its domain: the full step when φ still decreases at γ_max
        full = slope(gamma_max) <= 0
        gamma = jnp.where(full | (den == 0), gamma_max, g_star)
        gamma = jnp.where((g_d > 0) & (s != 0), gamma, 0.0)
        return gamma, state, _info(jnp.nan, jnp.nan, 0, True, jnp.nan)

    def apply(self, problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state):
        gamma, state, info = self(problem, t, x, fx, grad, d, g_d, gamma_max, kernel, state)
        f_new, g_new = problem.value_and_grad(x + gamma * d)
        ok = f_new <= fx + 2e-15 * jnp.abs(fx)
        f0, g0 = fx, grad
        gamma = jnp.where(ok, gamma, 0.0)
        point = (jnp.where(ok, f_new, f0), jnp.where(ok, g_new, g0))
        info = info._replace(n_evals=jnp.asarray(1, jnp.int32), accepted=ok)
        return gamma, state, info, point
