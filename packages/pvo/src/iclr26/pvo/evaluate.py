"""Policy evaluation (JAX Pendulum, or the real gymnasium one), normalised scores, IQM and
bootstrap confidence intervals (Agarwal et al. 2021)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.pvo.envs import (
    EPISODE_STEPS,
    hidden_reward,
    pendulum_obs,
    pendulum_reset,
    pendulum_step,
)
from iclr26.shared import check_array, check_int, import_optional

__all__ = ["bootstrap_ci", "evaluate_gymnasium", "iqm", "normalized_score", "rollout_returns"]


def rollout_returns(
    policy: Callable[[jax.Array], jax.Array],
    key: jax.Array,
    n_episodes: int = 10,
    reward: str = "dense",
) -> jax.Array:
    """Returns of ``n_episodes`` Pendulum episodes of a deterministic ``policy(obs) -> action``
    under hidden reward ``reward``; pure and jittable (vmap over episodes, scan over steps)."""

    def episode(k):
        def step(state, _):
            obs = pendulum_obs(state)
            a = policy(obs)
            nxt, _ = pendulum_step(state, a)
            return nxt, hidden_reward(obs, a, reward)

        _, r = jax.lax.scan(step, pendulum_reset(k), None, length=EPISODE_STEPS)
        return r.sum()

    return jax.vmap(episode)(jax.random.split(key, n_episodes))


def normalized_score(returns, ref: tuple[float, float]):
    """``100 (R − R_random) / (R_expert − R_random)``."""
    lo, hi = ref
    return 100.0 * (np.asarray(returns) - lo) / (hi - lo)


def iqm(x) -> float:
    """Interquartile mean: the mean of the middle 50 % (robust to one bad seed)."""
    x = np.sort(np.asarray(x, float).ravel())
    check_array(x, "x", ndim=1)
    n = len(x)
    lo, hi = int(np.floor(0.25 * n)), int(np.ceil(0.75 * n))
    return float(x[lo:hi].mean()) if hi > lo else float(x.mean())


def bootstrap_ci(
    x, *, stat: Callable = iqm, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``stat`` over the runs in ``x``."""
    x = np.asarray(x, float).ravel()
    check_array(x, "x", ndim=1)
    check_int(n_boot, "n_boot", low=1)
    rng = np.random.default_rng(seed)
    boots = np.array([stat(x[rng.integers(0, len(x), len(x))]) for _ in range(n_boot)])
    a = (1 - level) / 2
    return float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a))


def evaluate_gymnasium(
    policy: Callable[[np.ndarray], np.ndarray], n_episodes: int = 10, seed: int = 0
) -> np.ndarray:
    """Episode returns of ``policy`` in the real ``gymnasium`` ``Pendulum-v1`` (needs [gym])."""
    gym = import_optional(
        "gymnasium", dist="iclr26-pvo", extra="gym", purpose="evaluation in gymnasium"
    )
    env = gym.make("Pendulum-v1")
    out = []
    for ep in range(n_episodes):
        obs, _ = env.reset(seed=seed + ep)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(np.asarray(policy(jnp.asarray(obs)), np.float32))
            total += float(r)
            done = term or trunc
        out.append(total)
    env.close()
    return np.array(out)
