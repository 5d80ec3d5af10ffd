"""d3rlpy's IQL on this package's datasets: the parity check of our IQL (``bench``).

d3rlpy is not a dependency: its 2.8.1 release pins ``gymnasium==1.0.0``. Install it next to this
package in an environment of its own (``pip install iclr26-pvo d3rlpy``) and ``bench`` adds the
comparison; without it ``bench`` prints a "skipped" row. :func:`to_mdp_dataset` turns an
:class:`~iclr26.pvo.data.OfflineDataset` into a d3rlpy ``MDPDataset`` holding exactly the same
transitions, and :func:`train_d3rlpy_iql` trains d3rlpy's IQL on it with our IQL's settings
(CORL's: expectile 0.7, AWR exp(3·A) clipped at 100, Adam 3e-4, Polyak 0.005, γ = 0.99, batch
256, twin Q) and the same network widths, then evaluates it on the same Pendulum start states as
our agents (:func:`rollout_returns_numpy`).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.pvo.data import OfflineDataset
from iclr26.pvo.envs import (
    ACT_DIM,
    EPISODE_STEPS,
    MAX_TORQUE,
    OBS_DIM,
    REWARDS,
    hidden_reward,
    pendulum_obs,
    pendulum_reset,
    pendulum_step,
)
from iclr26.shared import check_choice, check_int

__all__ = [
    "D3rlpyIQLResult",
    "d3rlpy_version",
    "rollout_returns_numpy",
    "to_mdp_dataset",
    "train_d3rlpy_iql",
]


def d3rlpy_version() -> str | None:
    """The importable d3rlpy's version, or ``None`` when it cannot be imported."""
    try:
        module = importlib.import_module("d3rlpy")
    except ImportError:
        return None
    return str(getattr(module, "__version__", "unknown"))


def _d3rlpy():
    try:
        return importlib.import_module("d3rlpy")
    except ImportError as err:
        raise ImportError(
            f"the d3rlpy comparison needs d3rlpy, which cannot be imported ({err}); install it in "
            "an environment of its own: pip install iclr26-pvo d3rlpy"
        ) from err


def to_mdp_dataset(dataset: OfflineDataset, reward: str = "dense"):
    """A d3rlpy ``MDPDataset`` with exactly the transitions our agents train on.

    Each episode's T transitions become T + 1 steps: the T real ones (observation, action, hidden
    ``reward``) and the final observation with a zero action and reward, marked as a timeout (or
    a terminal when the episode's last ``done`` is set). d3rlpy samples ``size − 1`` transitions of
    a timed-out episode, so it sees the same (s, a, r, s′) as our ``dataset.transitions(reward)``,
    with s′ = the final observation for the last step; the padding step is never an (s, a).
    """
    if not isinstance(dataset, OfflineDataset):
        raise TypeError(f"dataset must be an OfflineDataset, got {type(dataset).__name__}")
    check_choice(reward, "reward", REWARDS)
    if dataset.n_transitions == 0:
        raise ValueError("dataset is empty")
    if np.any(dataset.done[:, :-1] != 0):
        raise ValueError(
            "dataset has terminations before an episode's end; d3rlpy cannot hold them"
        )
    d3 = _d3rlpy()
    e, t, k = dataset.act.shape
    d = dataset.obs.shape[-1]
    r = np.asarray(hidden_reward(dataset.obs[:, :-1], dataset.act, reward), np.float32)
    act = np.concatenate([dataset.act, np.zeros((e, 1, k), dataset.act.dtype)], 1)
    rew = np.concatenate([r, np.zeros((e, 1), np.float32)], 1)
    terminal = np.zeros((e, t + 1), np.float32)
    timeout = np.zeros((e, t + 1), np.float32)
    ended = dataset.done[:, -1] != 0
    terminal[ended, -1] = 1.0
    timeout[~ended, -1] = 1.0
    return d3.dataset.MDPDataset(
        observations=dataset.obs.reshape(-1, d).astype(np.float32),
        actions=act.reshape(-1, k).astype(np.float32),
        rewards=rew.reshape(-1, 1),
        terminals=terminal.reshape(-1),
        timeouts=timeout.reshape(-1),
        action_space=d3.constants.ActionSpace.CONTINUOUS,
    )


def rollout_returns_numpy(
    policy: Callable[[np.ndarray], np.ndarray],
    key: jax.Array,
    n_episodes: int = 10,
    reward: str = "dense",
) -> np.ndarray:
    """Returns of ``n_episodes`` Pendulum episodes of a NumPy ``policy((n, 3)) -> (n, 1)`` under
    hidden ``reward``; the same start states (and, for a JAX policy, the same returns) as
    :func:`~iclr26.pvo.evaluate.rollout_returns` with the same ``key``."""
    check_int(n_episodes, "n_episodes", low=1)
    check_choice(reward, "reward", REWARDS)
    state = jax.vmap(pendulum_reset)(jax.random.split(key, n_episodes))
    step = jax.jit(jax.vmap(pendulum_step))
    rew = jax.jit(lambda o, a: hidden_reward(o, a, reward))
    total = np.zeros(n_episodes, np.float64)
    for _ in range(EPISODE_STEPS):
        obs = pendulum_obs(state)
        a = np.asarray(policy(np.asarray(obs, np.float32)), np.float32).reshape(n_episodes, ACT_DIM)
        if not np.all(np.isfinite(a)):
            raise ValueError("policy returned a non-finite action")
        a = jnp.asarray(a)
        total += np.asarray(rew(obs, a), np.float64)
        state, _ = step(state, a)
    return total


@dataclass
class D3rlpyIQLResult:
    """Per seed: evaluation returns (n_seeds, n_episodes), the mean learned V(s) and Q(s, a) over
    the dataset's transitions, and seconds per update (d3rlpy's own batch sampling included, and
    the gradient step alone)."""

    returns: np.ndarray
    mean_v: np.ndarray
    mean_q: np.ndarray
    seconds_per_update: np.ndarray
    seconds_per_gradient_step: np.ndarray
    torch_threads: int
    version: str


def train_d3rlpy_iql(
    dataset: OfflineDataset,
    *,
    reward: str = "dense",
    steps: int,
    seeds: list[int] | tuple[int, ...] = (0,),
    hidden: tuple[int, ...] = (256, 256),
    batch_size: int = 256,
    eval_episodes: int = 10,
    eval_seed: int = 0,
    torch_threads: int = 1,
) -> D3rlpyIQLResult:
    """Train d3rlpy's IQL on ``dataset`` with the hidden ``reward`` (the oracle reward our
    ``oracle_iql`` sees), one seed after another, ``steps`` updates each; evaluate each final
    policy on ``eval_episodes`` Pendulum episodes from ``jax.random.key(eval_seed)``."""
    check_int(steps, "steps", low=1)
    check_int(batch_size, "batch_size", low=1)
    check_int(eval_episodes, "eval_episodes", low=1)
    check_int(torch_threads, "torch_threads", low=1)
    seeds = [check_int(s, "seed", low=0) for s in seeds]
    if not seeds:
        raise ValueError("seeds must not be empty")
    hidden = tuple(check_int(h, "hidden", low=1) for h in hidden)
    if dataset.obs.shape[-1] != OBS_DIM or dataset.act.shape[-1] != ACT_DIM:
        raise ValueError(
            f"dataset has obs dim {dataset.obs.shape[-1]} and action dim {dataset.act.shape[-1]}; "
            f"the evaluation runs Pendulum-v1, which has {OBS_DIM} and {ACT_DIM}"
        )
    d3 = _d3rlpy()
    import torch

    torch.set_num_threads(torch_threads)
    mdp = to_mdp_dataset(dataset, reward)
    tr = dataset.transitions(reward)
    obs, act = tr["obs"].astype(np.float32), tr["act"].astype(np.float32)
    enc = d3.models.encoders.VectorEncoderFactory(hidden_units=list(hidden))
    scaler = d3.preprocessing.MinMaxActionScaler(
        minimum=np.full(ACT_DIM, -MAX_TORQUE, np.float32),
        maximum=np.full(ACT_DIM, MAX_TORQUE, np.float32),
    )
    returns, mean_v, mean_q, per_update, per_grad = [], [], [], [], []
    for seed in seeds:
        d3.seed(seed)
        algo = d3.algos.IQLConfig(
            actor_encoder_factory=enc,
            critic_encoder_factory=enc,
            value_encoder_factory=enc,
            batch_size=batch_size,
            gamma=0.99,
            tau=0.005,
            n_critics=2,
            expectile=0.7,
            weight_temp=3.0,
            max_weight=100.0,
            actor_learning_rate=3e-4,
            critic_learning_rate=3e-4,
            action_scaler=scaler,
        ).create(device="cpu:0")
        algo.build_with_dataset(mdp)
        grad_s = 0.0
        start = time.perf_counter()
        for _ in range(steps):
            batch = mdp.sample_transition_batch(batch_size)
            g0 = time.perf_counter()
            algo.update(batch)
            grad_s += time.perf_counter() - g0
        per_update.append((time.perf_counter() - start) / steps)
        per_grad.append(grad_s / steps)
        returns.append(
            rollout_returns_numpy(algo.predict, jax.random.key(eval_seed), eval_episodes, reward)
        )
        with torch.no_grad():
            v = algo.impl.modules.value_func(torch.as_tensor(obs)).numpy()
        mean_v.append(float(v.mean()))
        mean_q.append(float(algo.predict_value(obs, act).mean()))
    return D3rlpyIQLResult(
        np.asarray(returns),
        np.asarray(mean_v),
        np.asarray(mean_q),
        np.asarray(per_update),
        np.asarray(per_grad),
        torch_threads,
        d3rlpy_version() or "unknown",
    )
