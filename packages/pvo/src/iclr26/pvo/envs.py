"""Pendulum-v1 as a pure JAX step, scripted behaviour policies, and batched episode collection.

The step matches gymnasium's ``Pendulum-v1`` (g = 10, m = l = 1, dt = 0.05, |u| <= 2, |θ̇| <= 8,
reward −(θ² + 0.1 θ̇² + 0.001 u²), 200-step episodes ending by truncation, never by termination)
so data generated and policies evaluated here mean the same as in the real environment; a test
checks it step for step. The hidden rewards that preference teachers see are ``"dense"`` (the
environment's reward) or ``"sparse"`` (1 when |θ| < 0.3: reward-model errors matter more there).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "EPISODE_STEPS",
    "REWARDS",
    "PendulumState",
    "angle_normalize",
    "collect_episodes",
    "hidden_reward",
    "pendulum_obs",
    "pendulum_reset",
    "pendulum_step",
    "scripted_action",
]

G, MASS, LENGTH, DT, MAX_SPEED, MAX_TORQUE = 10.0, 1.0, 1.0, 0.05, 8.0, 2.0
EPISODE_STEPS = 200
OBS_DIM, ACT_DIM = 3, 1
REWARDS = ("dense", "sparse")


class PendulumState(NamedTuple):
    """Angle θ (0 = upright, not wrapped, as in gymnasium) and angular velocity θ̇."""

    theta: jax.Array
    theta_dot: jax.Array


def angle_normalize(x: jax.Array) -> jax.Array:
    """Wrap an angle to [−π, π)."""
    return ((x + jnp.pi) % (2 * jnp.pi)) - jnp.pi


def pendulum_obs(state: PendulumState) -> jax.Array:
    """Observation (cos θ, sin θ, θ̇), shape (..., 3)."""
    return jnp.stack([jnp.cos(state.theta), jnp.sin(state.theta), state.theta_dot], axis=-1)


def pendulum_reset(key: jax.Array) -> PendulumState:
    """Initial state: θ ~ U(−π, π), θ̇ ~ U(−1, 1), as gymnasium's ``reset``."""
    k1, k2 = jax.random.split(key)
    return PendulumState(
        jax.random.uniform(k1, (), minval=-jnp.pi, maxval=jnp.pi),
        jax.random.uniform(k2, (), minval=-1.0, maxval=1.0),
    )


def pendulum_step(state: PendulumState, action: jax.Array) -> tuple[PendulumState, jax.Array]:
    """One step of Pendulum-v1: returns the next state and the (dense) reward."""
    u = jnp.clip(jnp.reshape(action, ()), -MAX_TORQUE, MAX_TORQUE)
    th, thdot = state
    cost = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
    new_thdot = thdot + (3 * G / (2 * LENGTH) * jnp.sin(th) + 3.0 / (MASS * LENGTH**2) * u) * DT
    new_thdot = jnp.clip(new_thdot, -MAX_SPEED, MAX_SPEED)
    return PendulumState(th + new_thdot * DT, new_thdot), -cost


def hidden_reward(obs: jax.Array, act: jax.Array, kind: str = "dense") -> jax.Array:
    """The reward a teacher scores segments with, from observation (cos θ, sin θ, θ̇) and action.

    ``"dense"`` is Pendulum's own reward; ``"sparse"`` is 1 while the pole is within 0.3 rad of
    upright. Shapes: obs (..., 3), act (..., 1) -> (...).
    """
    theta = jnp.arctan2(obs[..., 1], obs[..., 0])
    if kind == "dense":
        u = jnp.clip(act[..., 0], -MAX_TORQUE, MAX_TORQUE)
        return -(theta**2 + 0.1 * obs[..., 2] ** 2 + 0.001 * u**2)
    if kind == "sparse":
        return (jnp.abs(theta) < 0.3).astype(obs.dtype)
    raise ValueError(f"reward must be one of {REWARDS}, got {kind!r}")


def scripted_action(obs: jax.Array, gain: jax.Array | float = 1.0) -> jax.Array:
    """Energy-shaping swing-up with a PD catch near upright; ``gain`` < 1 degrades it.

    Pendulum's dynamics are θ̈ = 15 sin θ + 3u, so E = θ̇²/2 + 15 cos θ is 15 at rest upright;
    the swing-up pumps ``u ∝ (15 − E) θ̇`` and the catch is ``u = −(10 θ + 2 θ̇)`` once the pole
    is within about 0.5 rad of upright. Shape (..., 3) -> (..., 1).
    """
    cos, sin, thdot = obs[..., 0], obs[..., 1], obs[..., 2]
    theta = jnp.arctan2(sin, cos)
    energy = 0.5 * thdot**2 + 15.0 * cos
    swing = 0.5 * (15.0 - energy) * jnp.sign(thdot + 1e-6) * gain
    catch = -(10.0 * theta + 2.0 * thdot) * gain
    u = jnp.where((cos > 0.88) & (jnp.abs(thdot) < 5.0), catch, swing)
    return jnp.clip(u, -MAX_TORQUE, MAX_TORQUE)[..., None]


def collect_episodes(
    key: jax.Array,
    n_episodes: int,
    *,
    gain: jax.Array | float = 1.0,
    noise: float = 0.1,
    random_prob: jax.Array | float = 0.0,
) -> dict[str, np.ndarray]:
    """Roll out the scripted policy (with Gaussian action noise and a share of uniform random
    actions) for ``n_episodes`` full episodes, vectorised over episodes.

    ``gain`` and ``random_prob`` may be arrays of shape (n_episodes,) to vary quality per episode
    (a medium-replay schedule). Returns NumPy arrays ``obs`` (E, 201, 3), ``act`` (E, 200, 1) and
    the dense ``reward`` (E, 200).
    """
    gain = np.broadcast_to(np.asarray(gain, np.float32), (n_episodes,))
    random_prob = np.broadcast_to(np.asarray(random_prob, np.float32), (n_episodes,))
    keys = jax.random.split(key, n_episodes)
    parts = []
    # Fixed-size chunks: one compiled program serves every dataset size.
    for start in range(0, n_episodes, _CHUNK):
        idx = np.minimum(np.arange(start, start + _CHUNK), n_episodes - 1)
        out = _collect(keys[idx], gain[idx], random_prob[idx], jnp.float32(noise))
        parts.append([np.asarray(x)[: n_episodes - start] for x in out])
    obs, act, rew = (np.concatenate(x) for x in zip(*parts, strict=True))
    return {"obs": obs, "act": act, "reward": rew}


def _episode(key, gain, random_prob, noise):
    k0, key = jax.random.split(key)
    state = pendulum_reset(k0)

    def step(state, k):
        k1, k2, k3 = jax.random.split(k, 3)
        obs = pendulum_obs(state)
        a = scripted_action(obs, gain) + noise * jax.random.normal(k1, (1,))
        uniform = jax.random.uniform(k3, (1,), minval=-MAX_TORQUE, maxval=MAX_TORQUE)
        a = jnp.clip(jnp.where(jax.random.uniform(k2) < random_prob, uniform, a), -2.0, 2.0)
        nxt, r = pendulum_step(state, a)
        return nxt, (obs, a, r)

    last, (obs, act, rew) = jax.lax.scan(step, state, jax.random.split(key, EPISODE_STEPS))
    return jnp.concatenate([obs, pendulum_obs(last)[None]], 0), act, rew


_CHUNK = 10
_collect = jax.jit(jax.vmap(_episode, in_axes=(0, 0, 0, None)))
