"""The reward model r̂ fitted by Bradley–Terry maximum likelihood on labelled segment pairs."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr26.pvo.losses import bt_nll
from iclr26.pvo.nets import MLP
from iclr26.pvo.segments import SegmentPairs, check_labels
from iclr26.shared import check_int, check_range

__all__ = ["RewardModel", "fit_reward_model", "fit_reward_models"]


@dataclass(frozen=True)
class RewardModel:
    """A fitted r̂(s, a): ``model(obs, act) -> reward`` on (..., d) and (..., k) arrays."""

    hidden: tuple[int, ...]
    params: Any
    train_nll: float
    val_nll: float
    val_accuracy: float

    def __call__(self, obs: jax.Array, act: jax.Array) -> jax.Array:
        return reward_apply(self.hidden, self.params, obs, act)


def reward_apply(hidden: Sequence[int], params: Any, obs: jax.Array, act: jax.Array) -> jax.Array:
    """r̂(s, a) from the MLP's parameters (pure; usable inside jit and vmap)."""
    return MLP(tuple(hidden), 1).apply(params, jnp.concatenate([obs, act], -1))[..., 0]


def _segment_sums(hidden, params, obs, act):
    return reward_apply(hidden, params, obs[:, :-1], act).sum(-1)


def fit_reward_model(
    pairs: SegmentPairs,
    *,
    hidden: Sequence[int] = (64, 64),
    steps: int = 1000,
    lr: float = 3e-4,
    batch: int = 64,
    val_frac: float = 0.1,
    seed: int = 0,
) -> RewardModel:
    """Fit r̂ by BT maximum likelihood (paper §1.2 step 1) with Adam and early stopping.

    Args:
        pairs: labelled pairs (labels in {0, 0.5, 1}; 1 ⇒ segment 1 preferred).
        hidden: MLP widths (paper/IPL: 256 × 2–3; 64 × 2 here for CPU budgets).
        steps: Adam steps; the parameters with the best validation NLL are kept.
        lr: Adam learning rate (3e-4).
        batch: pairs per step.
        val_frac: share of pairs held out for early stopping (0: keep the last step).
        seed: initialisation, batching and split seed.
    """
    return fit_reward_models(
        pairs, [seed], hidden=hidden, steps=steps, lr=lr, batch=batch, val_frac=val_frac
    )[0]


def fit_reward_models(
    pairs: SegmentPairs,
    seeds: Sequence[int],
    *,
    hidden: Sequence[int] = (64, 64),
    steps: int = 1000,
    lr: float = 3e-4,
    batch: int = 64,
    val_frac: float = 0.1,
) -> list[RewardModel]:
    """:func:`fit_reward_model` for several seeds at once (one compiled program, vmapped)."""
    label = check_labels(pairs.label)
    check_int(steps, "steps", low=1)
    check_int(batch, "batch", low=1)
    check_range(val_frac, "val_frac", low=0, high=0.5)
    if pairs.size < 2:
        raise ValueError(f"need at least 2 labelled pairs to fit a reward model, got {pairs.size}")
    if not len(seeds):
        raise ValueError("seeds must not be empty")
    hidden = tuple(int(h) for h in hidden)
    n_val = round(val_frac * pairs.size)
    n_train = pairs.size - n_val
    splits, batches = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        order = rng.permutation(pairs.size)
        val, train = order[:n_val], order[n_val:]
        splits.append((val if n_val else train, train))
        batches.append(rng.choice(train, size=(steps, min(batch, n_train))))
    data = (
        tuple(jnp.asarray(x) for x in (pairs.obs0, pairs.act0, pairs.obs1, pairs.act1)),
        jnp.asarray(label),
    )
    keys = jnp.stack([jax.random.key(s) for s in seeds])
    best, stats = _fit_many(
        data,
        jnp.asarray(np.stack(batches)),
        jnp.asarray(np.stack([v for v, _ in splits])),
        jnp.asarray(np.stack([t for _, t in splits])),
        keys,
        hidden,
        float(lr),
    )
    stats = np.asarray(stats)
    return [
        RewardModel(
            hidden,
            jax.tree.map(lambda x, i=i: x[i], best),
            train_nll=float(stats[i, 0]),
            val_nll=float(stats[i, 1]),
            val_accuracy=float(stats[i, 2]),
        )
        for i in range(len(seeds))
    ]


def _pair_loss(hidden, params, data, idx):
    (o0, a0, o1, a1), y = data
    r0 = _segment_sums(hidden, params, o0[idx], a0[idx])
    r1 = _segment_sums(hidden, params, o1[idx], a1[idx])
    return bt_nll(r0, r1, y[idx]), r1 - r0, y[idx]


@functools.partial(jax.jit, static_argnums=(5, 6))
def _fit_many(data, batches, val_idx, train_idx, keys, hidden, lr):
    model = MLP(hidden, 1)
    d = data[0][0].shape[-1] + data[0][1].shape[-1]
    opt = optax.adam(lr)

    def one(batches, val_idx, train_idx, key):
        params = model.init(key, jnp.zeros((1, d)))

        def loss_fn(p, idx):
            return _pair_loss(hidden, p, data, idx)[0]

        def step(carry, idx):
            p, s, best, best_loss = carry
            grad = jax.grad(loss_fn)(p, idx)
            updates, s = opt.update(grad, s, p)
            p = optax.apply_updates(p, updates)
            v = loss_fn(p, val_idx)
            better = v < best_loss
            best = jax.tree.map(lambda a, b: jnp.where(better, a, b), p, best)
            return (p, s, best, jnp.minimum(v, best_loss)), None

        init = (params, opt.init(params), params, loss_fn(params, val_idx))
        (_, _, best, best_val), _ = jax.lax.scan(step, init, batches)
        _, diff, y = _pair_loss(hidden, best, data, val_idx)
        hard = y != 0.5
        acc = jnp.sum(((diff > 0) == (y > 0.5)) * hard) / jnp.maximum(hard.sum(), 1)
        return best, jnp.stack([loss_fn(best, train_idx), best_val, acc])

    return jax.vmap(one)(batches, val_idx, train_idx, keys)
