"""``train_offline``: one jitted ``lax.scan`` over update steps, ``vmap`` over seeds, evaluation
between chunks, and a checkpoint after each chunk that a restarted run resumes from."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from iclr26.pvo.agents import (
    NEEDS_LABELS,
    NEEDS_REWARD_MODEL,
    VA_ALGOS,
    AgentConfig,
    AgentState,
    act,
    create_states,
    update,
)
from iclr26.pvo.data import OfflineDataset, reference_returns
from iclr26.pvo.evaluate import normalized_score, rollout_returns
from iclr26.pvo.reward_model import RewardModel, fit_reward_models
from iclr26.pvo.segments import SegmentPairs, check_labels, sample_segment_pairs
from iclr26.shared import check_int
from iclr26.shared import progress as progress_bar

__all__ = ["TrainResult", "train_offline"]

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run produced: per-evaluation normalised scores (n_evals, n_seeds), the evaluation
    steps, final agent states (stacked over seeds), reward models and throughput: seed-steps per
    second of wall time and per second of this process's CPU time (all its threads), each the
    median over the update chunks after the first (which includes compilation)."""

    config: AgentConfig
    eval_steps: list[int]
    scores: np.ndarray
    states: AgentState
    reward_models: list[RewardModel]
    steps_per_second: float
    resumed_from: int
    cpu_steps_per_second: float = float("nan")

    @property
    def final_scores(self) -> np.ndarray:
        """Normalised score of each seed at the last evaluation."""
        return self.scores[-1]


def _pairs_dict(p: SegmentPairs) -> dict[str, jax.Array]:
    return {k: jnp.asarray(v, jnp.float32) for k, v in p._asdict().items()}


def _fingerprint(
    cfg: AgentConfig, seeds: list[int], steps: int, eval_every: int, reward: str, data_key: str
) -> str:
    blob = json.dumps(
        [dataclasses.asdict(cfg), seeds, steps, eval_every, reward, data_key], sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def train_offline(
    cfg: AgentConfig,
    dataset: OfflineDataset,
    prefs: SegmentPairs | None,
    *,
    steps: int,
    seeds: list[int] | tuple[int, ...] = (0,),
    eval_every: int | None = None,
    reward: str = "dense",
    n_unlabeled: int = 2000,
    eval_episodes: int = 10,
    reward_model_steps: int = 1000,
    checkpoint: str | os.PathLike[str] | None = None,
    progress: bool = False,
    reward_models: list[RewardModel] | tuple[RewardModel, ...] | None = None,
) -> TrainResult:
    """Train ``cfg.algo`` on ``dataset`` (+ labelled ``prefs``) for ``steps`` updates per seed.

    Seeds run together under ``vmap`` (one compiled program); updates run in chunks of
    ``eval_every`` steps inside ``lax.scan``. After each chunk every seed's policy is evaluated
    on ``eval_episodes`` Pendulum episodes under the hidden ``reward`` and the state is saved to
    ``checkpoint`` (msgpack) if given; a run started with the same arguments resumes from it
    without repeating or losing steps, and one with other arguments is refused.

    ``reward_models`` (one :class:`~iclr26.pvo.reward_model.RewardModel` per seed, e.g. from
    :func:`~iclr26.pvo.reward_model.fit_reward_models` on ``prefs`` and ``seeds``) replaces the
    r̂ fit, so several agents trained on the same preferences share one fit; they must have
    ``cfg.reward_hidden`` widths. Without them, agents that use r̂ fit it here
    (``reward_model_steps`` Adam steps, seed i's model from seed i).
    """
    check_int(steps, "steps", low=1)
    eval_every = (
        steps if eval_every is None else check_int(eval_every, "eval_every", low=1, high=steps)
    )
    if steps % eval_every:
        raise ValueError(f"steps ({steps}) must be a multiple of eval_every ({eval_every})")
    seeds = [check_int(s, "seed", low=0) for s in seeds]
    if not seeds:
        raise ValueError("seeds must not be empty")
    if dataset.n_transitions == 0:
        raise ValueError("the dataset is empty")
    needs_prefs = cfg.algo in NEEDS_REWARD_MODEL + NEEDS_LABELS
    if needs_prefs:
        if prefs is None or prefs.size == 0:
            raise ValueError(f"{cfg.algo} learns from preferences: give labelled pairs")
        check_labels(prefs.label)
        d, k = dataset.obs.shape[-1], dataset.act.shape[-1]
        if prefs.obs0.shape[-1] != d or prefs.act0.shape[-1] != k:
            raise ValueError(
                f"preference pairs have obs dim {prefs.obs0.shape[-1]} and action dim "
                f"{prefs.act0.shape[-1]}; the dataset has {d} and {k}"
            )
    obs_dim, act_dim = dataset.obs.shape[-1], dataset.act.shape[-1]
    tr = {k: jnp.asarray(v) for k, v in dataset.transitions(reward).items()}
    seg_len = prefs.act0.shape[1] if prefs is not None else 25
    # Reward models, one per seed (stacked for vmap); agents that do not use r̂ get a dummy.
    models: list[RewardModel] = []
    if reward_models is not None:
        if not isinstance(reward_models, list | tuple) or not all(
            isinstance(m, RewardModel) for m in reward_models
        ):
            raise TypeError("reward_models must be a list of RewardModel (one per seed)")
        if len(reward_models) != len(seeds):
            raise ValueError(
                f"reward_models has {len(reward_models)} models for {len(seeds)} seeds"
            )
        if any(tuple(m.hidden) != tuple(cfg.reward_hidden) for m in reward_models):
            raise ValueError(
                f"reward_models must have the config's reward_hidden {tuple(cfg.reward_hidden)}"
            )
    if cfg.algo in NEEDS_REWARD_MODEL:
        models = (
            list(reward_models)
            if reward_models is not None
            else fit_reward_models(prefs, seeds, hidden=cfg.reward_hidden, steps=reward_model_steps)
        )
        rm_params = jax.tree.map(lambda *x: jnp.stack(x), *[m.params for m in models])
    else:
        rm_params = jnp.zeros((len(seeds),))
    # Value-alignment pairs: unlabelled pairs from the whole dataset (D_TJ), the labelled ones, or both.
    labelled = _pairs_dict(prefs) if prefs is not None else None
    va = None
    if cfg.algo in VA_ALGOS:
        parts = []
        if cfg.va_pairs in ("unlabeled", "both"):
            # Drawn once per dataset, not per seed, so a seed's run does not depend on its company.
            unl = sample_segment_pairs(
                dataset.obs, dataset.act, n_unlabeled, length=seg_len, seed=7919, done=dataset.done
            )
            parts.append(_pairs_dict(unl._replace(label=np.zeros(unl.size, np.float32))))
        if cfg.va_pairs in ("labeled", "both"):
            parts.append(labelled)
        va = {k: jnp.concatenate([p[k] for p in parts]) for k in parts[0]}
    empty = {"label": jnp.zeros((1,))}
    data = {
        "transitions": tr,
        "va": va if va is not None else empty,
        "prefs": labelled if (labelled is not None and cfg.algo in NEEDS_LABELS) else empty,
    }
    ref = reference_returns(reward)
    states = create_states(jnp.stack([jax.random.key(s) for s in seeds]), obs_dim, act_dim, cfg)
    keys = jnp.stack([jax.random.key(s + 1_000_003) for s in seeds])
    done_steps, eval_steps, scores = 0, [], []
    fp = _fingerprint(
        cfg,
        seeds,
        steps,
        eval_every,
        reward,
        f"{dataset.name}:{dataset.n_transitions}:{float(dataset.obs.sum()):.6g}",
    )
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.exists():
        saved = flax.serialization.msgpack_restore(ckpt.read_bytes())
        if saved.get("fingerprint") != fp:
            raise ValueError(
                f"checkpoint {ckpt} is from a different run (agent, data, seeds or schedule); "
                "use another path or delete it"
            )
        states = flax.serialization.from_state_dict(states, saved["states"])
        keys = jax.random.wrap_key_data(jnp.asarray(saved["keys"]))
        done_steps = int(saved["done_steps"])
        eval_steps = [int(s) for s in saved["eval_steps"]]
        scores = [
            np.asarray(s) for s in np.asarray(saved["scores"]).reshape(len(eval_steps), len(seeds))
        ]
        log.info("resuming %s from step %d of %d", cfg.algo, done_steps, steps)
    resumed_from = done_steps
    chunk_seconds: list[float] = []
    chunk_cpu: list[float] = []
    with progress_bar(total=steps, enabled=progress, desc=cfg.algo, unit="step") as bar:
        bar.update(done_steps)
        while done_steps < steps:
            split = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
            keys, chunk_keys, eval_keys = split[:, 0], split[:, 1], split[:, 2]
            start, start_cpu = time.perf_counter(), time.process_time()
            states = _run_chunk(states, chunk_keys, rm_params, data, cfg, eval_every)
            jax.block_until_ready(states)
            chunk_seconds.append(time.perf_counter() - start)
            chunk_cpu.append(time.process_time() - start_cpu)
            done_steps += eval_every
            returns = _evaluate(states, eval_keys, cfg, act_dim, eval_episodes, reward)
            scores.append(np.asarray(normalized_score(np.asarray(returns).mean(-1), ref)))
            eval_steps.append(done_steps)
            bar.update(eval_every)
            if ckpt is not None:
                ckpt.parent.mkdir(parents=True, exist_ok=True)
                tmp = ckpt.with_suffix(ckpt.suffix + ".tmp")
                tmp.write_bytes(
                    flax.serialization.msgpack_serialize(
                        {
                            "fingerprint": fp,
                            "states": flax.serialization.to_state_dict(states),
                            "keys": np.asarray(jax.random.key_data(keys)),
                            "done_steps": done_steps,
                            "eval_steps": np.asarray(eval_steps),
                            "scores": np.asarray(scores).reshape(-1),
                        }
                    )
                )
                os.replace(tmp, ckpt)
    # The first chunk includes compilation: throughput is the median of the others (if any).
    timed = chunk_seconds[1:] or chunk_seconds
    rate = eval_every * len(seeds) / float(np.median(timed)) if timed else float("nan")
    timed_cpu = chunk_cpu[1:] or chunk_cpu
    cpu_rate = (
        eval_every * len(seeds) / max(float(np.median(timed_cpu)), 1e-9)
        if timed_cpu
        else float("nan")
    )
    return TrainResult(
        cfg, eval_steps, np.asarray(scores), states, models, rate, resumed_from, cpu_rate
    )


def _sample(data: dict[str, Any], key: jax.Array, cfg: AgentConfig) -> dict[str, Any]:
    k1, k2, k3 = jax.random.split(key, 3)
    k4 = jax.random.fold_in(key, 1)  # TD3+BC's target noise; leaves the other streams as they were
    tr = data["transitions"]
    i = jax.random.randint(k1, (cfg.transition_batch,), 0, tr["obs"].shape[0])
    batch = {"transitions": {k: v[i] for k, v in tr.items()}, "key": k4}
    for name, k in (("va", k2), ("prefs", k3)):
        pairs = data[name]
        j = jax.random.randint(k, (cfg.pair_batch,), 0, pairs["label"].shape[0])
        batch[name] = {n: v[j] for n, v in pairs.items()}
    return batch


@functools.partial(jax.jit, static_argnums=(4, 5))
def _run_chunk(states, keys, rm_params, data, cfg: AgentConfig, n_steps: int):
    """``n_steps`` updates of every seed: vmap over seeds of a scan over steps (module-level so
    repeated runs with the same config and shapes reuse the compiled program)."""

    def chunk(state, key, rmp):
        def body(s, k):
            return update(s, _sample(data, k, cfg), cfg, rmp)[0], None

        return jax.lax.scan(body, state, jax.random.split(key, n_steps))[0]

    return jax.vmap(chunk)(states, keys, rm_params)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _evaluate(states, keys, cfg: AgentConfig, act_dim: int, episodes: int, reward: str):
    def one(s, k):
        return rollout_returns(lambda o: act(s, o, cfg, act_dim), k, episodes, reward)

    return jax.vmap(one)(states, keys)
