"""Flax networks: MLP, twin-Q ensemble, state value, Gaussian actor with a tanh-squashed mean."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["MLP", "GaussianActor", "TwinQ", "ValueNet"]

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class MLP(nn.Module):
    """ReLU MLP with a linear head of ``out`` units."""

    hidden: Sequence[int]
    out: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.out)(x)


class TwinQ(nn.Module):
    """``n`` independent Q-heads on (s, a): returns (n, ...) values (IQL's twin critic)."""

    hidden: Sequence[int]
    n: int = 2

    @nn.compact
    def __call__(self, obs: jax.Array, act: jax.Array) -> jax.Array:
        heads = nn.vmap(
            MLP,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.n,
        )(self.hidden, 1)
        return heads(jnp.concatenate([obs, act], -1))[..., 0]


class ValueNet(nn.Module):
    """V(s)."""

    hidden: Sequence[int]

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return MLP(self.hidden, 1)(obs)[..., 0]


class GaussianActor(nn.Module):
    """π(a|s) = N(max_action · tanh(μ(s)), σ²) with a state-independent log σ (CORL's IQL actor)."""

    hidden: Sequence[int]
    act_dim: int
    max_action: float = 1.0

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        mean = self.max_action * jnp.tanh(MLP(self.hidden, self.act_dim)(obs))
        log_std = self.param("log_std", nn.initializers.zeros, (self.act_dim,))
        return mean, jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)

    @staticmethod
    def log_prob(mean: jax.Array, log_std: jax.Array, act: jax.Array) -> jax.Array:
        """log N(act; mean, exp(log_std)²) summed over action dimensions."""
        z = (act - mean) / jnp.exp(log_std)
        return jnp.sum(-0.5 * z**2 - log_std - 0.5 * jnp.log(2 * jnp.pi), axis=-1)
