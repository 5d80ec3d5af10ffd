"""Frank–Wolfe as an ``optax.GradientTransformationExtraArgs``, so it drops into an optax loop.

The pattern follows ``optax.scale_by_backtracking_linesearch``: ``update`` receives the gradient
as ``updates`` and the objective through the extra arguments ``value`` (f at ``params``) and
``value_fn`` (a function of the params). It returns ``γ (v − params)``, so
``optax.apply_updates(params, updates)`` is the FW iterate ``x + γ(v − x)`` of Algorithm 1.
Pytrees of params are flattened with ``jax.flatten_util.ravel_pytree`` and the LMO acts on the
flat vector (use :class:`~iclr26.bregman_fw.lmo.Product` for per-leaf sets).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from iclr26.bregman_fw import precision  # noqa: F401  (float64 before any array)
from iclr26.bregman_fw.kernels import Euclidean, Kernel
from iclr26.bregman_fw.lmo import LMO
from iclr26.bregman_fw.steps import AdaptiveBregman, Oracle, StepRule, StepState

__all__ = ["FWTransformState", "frank_wolfe_transform"]


class FWTransformState(NamedTuple):
    """``count``: iterations done; ``step``: the step rule's state (L̃, κ); ``gap``: the FW gap
    at the last params seen; ``gamma``: the last step size."""

    count: jax.Array
    step: StepState
    gap: jax.Array
    gamma: jax.Array


def frank_wolfe_transform(
    lmo: LMO, *, kernel: Kernel | None = None, step: StepRule | None = None
) -> optax.GradientTransformationExtraArgs:
    """Frank–Wolfe (Algorithm 1) with any step rule, default the adaptive Bregman step (Algorithm 2).

    Args:
        lmo: the feasible set (params must start inside it).
        kernel: Bregman kernel, default :class:`Euclidean`.
        step: step rule, default :class:`~iclr26.bregman_fw.steps.AdaptiveBregman`.

    Returns:
        A transformation whose ``update(grads, state, params, *, value, value_fn)`` returns the
        FW update. ``value_fn(params)`` must return f; ``value`` is ``value_fn(params)``.
    """
    if not isinstance(lmo, LMO):
        raise TypeError(f"lmo must be an iclr26.bregman_fw LMO, got {type(lmo).__name__}")
    kernel = Euclidean() if kernel is None else kernel
    step = AdaptiveBregman() if step is None else step
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a Kernel (e.g. Euclidean()), got {type(kernel).__name__}")
    if not isinstance(step, StepRule):
        raise TypeError(
            f"step must be a step rule (e.g. AdaptiveBregman()), got {type(step).__name__}"
        )

    def init_fn(params: Any) -> FWTransformState:
        flat, _ = ravel_pytree(params)
        nan = jnp.asarray(jnp.nan, flat.dtype)
        return FWTransformState(
            jnp.asarray(0, jnp.int32), StepState(nan, jnp.asarray(1.0, flat.dtype)), nan, nan
        )

    def update_fn(updates, state, params=None, *, value, value_fn, **extra_args):
        del extra_args
        if params is None:
            raise ValueError("frank_wolfe_transform needs params in update()")
        x, unravel = ravel_pytree(params)
        g, _ = ravel_pytree(updates)
        fa = lambda z: value_fn(unravel(z))  # noqa: E731
        problem = Oracle(fa, jax.value_and_grad(fa))
        v = lmo(g)
        d = v - x
        gap = -jnp.sum(g * d)
        one = jnp.ones((), x.dtype)
        first = state.count == 0
        fresh = step.init(problem, x, value, g, d, one, kernel)
        st = jax.tree.map(lambda a, b: jnp.where(first, a, b), fresh, state.step)
        gamma, st, _ = step(problem, state.count, x, value, g, d, gap, one, kernel, st)
        new_state = FWTransformState(state.count + 1, st, gap, gamma)
        return unravel(gamma * d), new_state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)
