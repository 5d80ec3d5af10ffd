"""Projection- and prox-based baselines of the paper's experiments: ProjGD, MD and Bregman proximal
gradient (BPG). Each runs ``max_iter`` iterations in a ``jax.lax.fori_loop`` and returns a
:class:`BaselineResult` with the objective history."""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclr26.bregman_fw.kernels import Burg, Entropy, Kernel
from iclr26.bregman_fw.precision import as_float64  # also switches JAX to float64
from iclr26.shared import check_array, check_choice, check_int, check_range

__all__ = ["BaselineResult", "bregman_proximal_gradient", "mirror_descent", "projected_gradient"]

PROJECTIONS = ("simplex", "l1_ball", "l2_ball", "box")


class BaselineResult(NamedTuple):
    """``x``: last iterate; ``f_hist``: f at iterates 0..max_iter; ``n_f_evals``: objective
    evaluations (backtracking trials included)."""

    x: jax.Array
    f_hist: jax.Array
    n_f_evals: jax.Array


def _project(name: str, radius: float, x):
    if name == "simplex":
        return optax.projections.projection_simplex(x, radius)
    if name == "l1_ball":
        return optax.projections.projection_l1_ball(x, radius)
    if name == "l2_ball":
        return optax.projections.projection_l2_ball(x, radius)
    return optax.projections.projection_box(x, 0.0, radius)


@functools.partial(jax.jit, static_argnames=("f", "projection", "radius", "max_iter", "fixed"))
def _pgd_run(f, x0, args, projection, radius, max_iter, fixed, step0, eta, tau):
    vg = jax.value_and_grad(lambda x: f(x, *args))
    fx0, _ = vg(x0)
    hist = jnp.full((max_iter + 1,), jnp.nan).at[0].set(fx0)

    def body(t, c):
        x, L, hist, nf = c
        fx, g = vg(x)
        if fixed:
            xn = _project(projection, radius, x - step0 * g)
            fn = f(xn, *args)
            return xn, L, hist.at[t + 1].set(fn), nf + 2

        def trial(M):
            xn = _project(projection, radius, x - g / M)
            dx = xn - x
            fn = f(xn, *args)
            ok = fn <= fx + jnp.sum(g * dx) + 0.5 * M * jnp.sum(dx * dx)
            return xn, fn, ok

        def cond(s):
            return (~s[3]) & (s[4] < 60)

        def bt(s):
            M = s[0] * tau
            xn, fn, ok = trial(M)
            return M, xn, fn, ok, s[4] + 1

        M0 = eta * L
        xn, fn, ok = trial(M0)
        M, xn, fn, ok, n = jax.lax.while_loop(cond, bt, (M0, xn, fn, ok, jnp.asarray(1)))
        return xn, M, hist.at[t + 1].set(fn), nf + n + 1

    x, _, hist, nf = jax.lax.fori_loop(0, max_iter, body, (x0, 1.0 / step0, hist, jnp.asarray(1)))
    return BaselineResult(x, hist, nf)


def projected_gradient(
    f,
    x0: Any,
    *,
    projection: str = "simplex",
    radius: float = 1.0,
    args: tuple = (),
    step_size: float | None = None,
    max_iter: int = 1000,
) -> BaselineResult:
    """Projected gradient descent ("ProjGD") with ``optax.projections``.

    ``x⁺ = Π(x − s∇f(x))`` with a fixed ``step_size`` s, or (``step_size=None``) backtracking on
    the local Lipschitz estimate M (start 1, then ``M ← 0.9 M`` per iteration and ``M ← 2M`` until
    the sufficient-decrease test of Beck & Teboulle holds). ``projection`` is one of
    ``"simplex"`` (Σx = radius, x ≥ 0), ``"l1_ball"``, ``"l2_ball"``, ``"box"`` ([0, radius]).
    """
    check_choice(projection, "projection", PROJECTIONS)
    check_range(radius, "radius", low=0.0, low_inclusive=False)
    if not math.isfinite(radius):
        raise ValueError(f"radius must be a finite number > 0, got {radius!r}")
    x0 = as_float64(x0, "x0")
    check_array(x0, "x0")
    check_int(max_iter, "max_iter", low=1)
    fixed = step_size is not None
    s0 = check_range(step_size, "step_size", low=0.0, low_inclusive=False) if fixed else 1.0
    return _pgd_run(
        f, jnp.asarray(x0), args, projection, float(radius), max_iter, fixed, s0, 0.9, 2.0
    )


@functools.partial(jax.jit, static_argnames=("f", "max_iter"))
def _md_run(f, x0, args, max_iter, step):
    vg = jax.value_and_grad(lambda x: f(x, *args))
    hist = jnp.full((max_iter + 1,), jnp.nan).at[0].set(vg(x0)[0])

    def body(t, c):
        x, hist = c
        _, g = vg(x)
        logits = jnp.log(x) - step / jnp.sqrt(t + 1.0) * g
        xn = jax.nn.softmax(logits)
        return xn, hist.at[t + 1].set(f(xn, *args))

    x, hist = jax.lax.fori_loop(0, max_iter, body, (x0, hist))
    return BaselineResult(x, hist, jnp.asarray(2 * max_iter + 1))


def mirror_descent(
    f, x0: Any, *, args: tuple = (), step_size: float = 1.0, max_iter: int = 1000
) -> BaselineResult:
    """Entropic mirror descent ("MD", exponentiated gradient) on the probability simplex with the
    classical step ``step_size/√(t+1)``; ``x0`` must be strictly positive and sum to 1."""
    x0 = as_float64(x0, "x0")
    check_array(x0, "x0", ndim=1)
    check_int(max_iter, "max_iter", low=1)
    check_range(step_size, "step_size", low=0.0, low_inclusive=False)
    x0 = jnp.asarray(x0)
    if not bool(jnp.all(x0 > 0)) or abs(float(x0.sum()) - 1) > 1e-8:
        raise ValueError("mirror_descent needs x0 > 0 with sum(x0) = 1")
    return _md_run(f, x0, args, max_iter, float(step_size))


def _burg_prox(x, g, L):
    """argmin_{u ∈ Δ} ⟨g, u⟩ + L D_Burg(u, x): u_i = 1/(1/x_i + (g_i + λ)/L), Σu = 1 by bisection."""
    lo = jnp.max(-L / x - g)
    n = x.shape[0]

    def total(lam):
        return jnp.sum(1.0 / (1.0 / x + (g + lam) / L))

    lo_b, hi_b = lo + 1e-300, lo + n * L

    def body(_, b):
        a, c = b
        mid = 0.5 * (a + c)
        big = total(mid) > 1.0
        return jnp.where(big, mid, a), jnp.where(big, c, mid)

    a, c = jax.lax.fori_loop(0, 200, body, (lo_b, hi_b))
    u = 1.0 / (1.0 / x + (g + 0.5 * (a + c)) / L)
    return u / jnp.sum(u)


@functools.partial(jax.jit, static_argnames=("f", "kernel", "max_iter"))
def _bpg_run(f, x0, args, kernel, L, max_iter):
    vg = jax.value_and_grad(lambda x: f(x, *args))
    hist = jnp.full((max_iter + 1,), jnp.nan).at[0].set(vg(x0)[0])

    def body(t, c):
        x, hist = c
        _, g = vg(x)
        if isinstance(kernel, Entropy):
            xn = jax.nn.softmax(jnp.log(x) - g / L)
        else:
            xn = _burg_prox(x, g, L)
        return xn, hist.at[t + 1].set(f(xn, *args))

    x, hist = jax.lax.fori_loop(0, max_iter, body, (x0, hist))
    return BaselineResult(x, hist, jnp.asarray(2 * max_iter + 1))


def bregman_proximal_gradient(
    f, x0: Any, kernel: Kernel, L: float, *, args: tuple = (), max_iter: int = 1000
) -> BaselineResult:
    """Bregman proximal gradient (NoLips; Bauschke, Bolte & Teboulle 2017) on the probability
    simplex: ``x⁺ = argmin_{u ∈ Δ} ⟨∇f(x), u⟩ + L D_φ(u, x)`` with step 1/L, for the
    :class:`Entropy` kernel (closed form) and the :class:`Burg` kernel (1-D bisection on the
    multiplier). ``L`` is the relative smoothness constant of f w.r.t. the kernel."""
    if not isinstance(kernel, Entropy | Burg):
        raise ValueError(
            f"kernel must be Entropy() or Burg() for bregman_proximal_gradient, got {kernel!r}"
        )
    x0 = as_float64(x0, "x0")
    check_array(x0, "x0", ndim=1)
    check_int(max_iter, "max_iter", low=1)
    check_range(L, "L", low=0.0, low_inclusive=False)
    if not math.isfinite(L):
        raise ValueError(f"L must be a finite number > 0, got {L!r}")
    x0 = jnp.asarray(x0)
    if not bool(jnp.all(x0 > 0)) or abs(float(x0.sum()) - 1) > 1e-8:
        raise ValueError("bregman_proximal_gradient needs x0 > 0 with sum(x0) = 1")
    return _bpg_run(f, x0, args, kernel, float(L), max_iter)
