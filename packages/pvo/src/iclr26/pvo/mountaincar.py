"""MountainCarContinuous-v0 as a pure JAX step (spec §4.1's secondary environment, sparse +100
goal reward), with the scripted "pump energy" behaviour policy ``u = sign(v)``.

The step matches gymnasium's ``MountainCarContinuous-v0`` (force clipped to [−1, 1], power
0.0015, gravity term 0.0025 cos 3x, |v| <= 0.07, x in [−1.2, 0.6] with the velocity zeroed
at the left wall, goal x >= 0.45, reward 100 at the goal minus 0.1 u², 999-step episodes); a test
checks it step for step. The datasets and agents of this package use Pendulum; this module is for
users who build their own MountainCar datasets (the episodes end at the goal, so ``done`` is set).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "MOUNTAINCAR_STEPS",
    "MountainCarState",
    "mountaincar_obs",
    "mountaincar_pump_action",
    "mountaincar_reset",
    "mountaincar_step",
]

MIN_POSITION, MAX_POSITION, MAX_SPEED, GOAL_POSITION, POWER = -1.2, 0.6, 0.07, 0.45, 0.0015
MOUNTAINCAR_STEPS = 999


class MountainCarState(NamedTuple):
    """Car position x and velocity v."""

    position: jax.Array
    velocity: jax.Array


def mountaincar_obs(state: MountainCarState) -> jax.Array:
    """Observation (x, v), shape (..., 2)."""
    return jnp.stack([state.position, state.velocity], axis=-1)


def mountaincar_reset(key: jax.Array) -> MountainCarState:
    """Initial state: x ~ U(−0.6, −0.4), v = 0, as gymnasium's ``reset``."""
    x = jax.random.uniform(key, (), minval=-0.6, maxval=-0.4)
    return MountainCarState(x, jnp.zeros_like(x))


def mountaincar_step(
    state: MountainCarState, action: jax.Array
) -> tuple[MountainCarState, jax.Array, jax.Array]:
    """One step: the next state, the reward and whether the goal was reached (a termination)."""
    u = jnp.reshape(action, ())
    force = jnp.clip(u, -1.0, 1.0)
    v = state.velocity + force * POWER - 0.0025 * jnp.cos(3 * state.position)
    v = jnp.clip(v, -MAX_SPEED, MAX_SPEED)
    x = jnp.clip(state.position + v, MIN_POSITION, MAX_POSITION)
    v = jnp.where((x == jnp.asarray(MIN_POSITION, x.dtype)) & (v < 0), 0.0, v)
    done = (x >= GOAL_POSITION) & (v >= 0.0)
    reward = jnp.where(done, 100.0, 0.0) - 0.1 * u**2
    return MountainCarState(x, v), reward, done


def mountaincar_pump_action(obs: jax.Array) -> jax.Array:
    """The scripted energy-pumping policy ``u = sign(v)`` (push along the motion; +1 at rest),
    shape (..., 2) -> (..., 1); add noise for a behaviour dataset."""
    return jnp.where(obs[..., 1] >= 0, 1.0, -1.0)[..., None]
