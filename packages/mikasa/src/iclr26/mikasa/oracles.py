"""Scripted oracles, evaluation and demonstration collection.

* :class:`MemoryOracle` reads ``memory`` observations, stores the cue while it is shown (the
  ball's slot, the target's colour/shape, the shown colours in order) and then drives to the
  matching object(s) with a P-controller: over at a safe height, down onto the object, hold still
  (the touch counts when the gripper is static), up and on to the next.
* :class:`MemorylessOracle` is cue-blind: it commits once, at the first act step, to a random (or
  the first-slot) candidate — or n distinct ones in random order — and drives there. Scored by
  success at the end of the episode its success is the chance level 1/K (1/C(9, n), 1/P(9, n)).
* :class:`StateOracle` reads ``oracle_info`` from ``state`` observations (an MDP: no memory).

Oracles act on batches: ``act(obs)`` takes (num_envs, dim) observations and returns
(num_envs, 3) actions, keeping per-environment memory; ``reset(num_envs)`` clears it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from iclr26.mikasa.data import COLORS, DEMO_FIELDS, EXPORT_FIELDS, SHAPES
from iclr26.mikasa.kinematic import MAX_DELTA, check_seed
from iclr26.mikasa.semantics import obs_layout
from iclr26.mikasa.spatial import SpatialSpec
from iclr26.mikasa.tasks import CUBE_HALF, CUP_HALF_HEIGHT, TCP_RADIUS, TaskSpec, get_spec

__all__ = [
    "ORACLES",
    "MemoryOracle",
    "MemorylessOracle",
    "StateOracle",
    "check_oracle_obs",
    "collect_demos",
    "evaluate",
    "make_oracle",
]

log = logging.getLogger(__name__)
ORACLES = ("memory", "memoryless", "state")
N_COL = len(COLORS)


def _spec_of(env_or_id: Any) -> TaskSpec | SpatialSpec:
    if isinstance(env_or_id, TaskSpec | SpatialSpec):
        return env_or_id
    if isinstance(env_or_id, str):
        return get_spec(env_or_id)
    for obj in (env_or_id, getattr(env_or_id, "unwrapped", None)):
        spec = getattr(obj, "spec_task", None)
        if isinstance(spec, TaskSpec | SpatialSpec):
            return spec
    raise TypeError(
        "expected a MikasaLite tabletop env, an env id or a TaskSpec, got "
        f"{type(env_or_id).__name__}"
    )


def check_oracle_obs(oracle: Any, obs: Any) -> np.ndarray:
    """``obs`` as a float (num_envs, dim) batch for ``oracle`` (which has ``layout``, ``spec``,
    ``obs_mode``, ``num_envs`` and ``reset``); a new batch size resets the oracle."""
    obs = np.asarray(obs, dtype=np.float64)
    if obs.ndim == 1:
        obs = obs[None]
    if obs.ndim != 2 or obs.shape[1] != oracle.layout.dim:
        raise ValueError(
            f"obs must have shape (num_envs, {oracle.layout.dim}) for {oracle.spec.env_id} in "
            f"{oracle.obs_mode} mode, got {obs.shape}"
        )
    if oracle.num_envs != len(obs):
        oracle.reset(len(obs))
    return obs


class _Oracle:
    obs_mode = "memory"

    def __init__(self, env: Any) -> None:
        self.spec = _spec_of(env)
        self.layout = obs_layout(self.spec, self.obs_mode)
        cup = self.spec.family == "shell_touch"
        self.z_touch = (CUP_HALF_HEIGHT if cup else CUBE_HALF) * 2 + TCP_RADIUS + 0.002
        self.z_safe = 0.14 if cup else 0.08
        self.num_envs = 0

    def reset(self, num_envs: int) -> None:
        """Forget everything; the next ``act`` starts new episodes in ``num_envs`` environments."""
        self.num_envs = int(num_envs)
        n = self.spec.n_targets
        self.goals = np.full((num_envs, n), -1, np.int64)  # candidate slot per target, in order
        self.progress = np.zeros(num_envs, np.int64)
        self.committed = np.zeros(num_envs, bool)

    def _check(self, obs: np.ndarray) -> np.ndarray:
        return check_oracle_obs(self, obs)

    def _values(self, feats: np.ndarray) -> np.ndarray:
        """The ``oracle_info`` value each object feature row stands for (-1 if not visible)."""
        colour = feats[..., 4 : 4 + N_COL].argmax(-1)
        shape = feats[..., 4 + N_COL :].argmax(-1)
        attr = self.spec.attribute
        if attr in ("color", "cup"):
            v = colour
        elif attr == "shape":
            v = shape
        else:
            v = shape * self.spec.n_colors + colour
        return np.where(feats[..., 0] > 0.5, v, -1)

    def _drive(self, obs: np.ndarray, cand: np.ndarray, active: np.ndarray) -> np.ndarray:
        """P-controller toward the current goal of each env; cand: (N, K, 3) positions."""
        lay, n = self.layout, len(obs)
        tcp, vel = obs[:, lay.tcp], obs[:, lay.vel]
        k = np.minimum(self.progress, self.spec.n_targets - 1)
        slot = self.goals[np.arange(n), k]
        ok = active & (slot >= 0)
        goal = cand[np.arange(n), np.maximum(slot, 0)]
        target = np.empty((n, 3))
        target[:, :2] = goal[:, :2]
        far = np.linalg.norm(goal[:, :2] - tcp[:, :2], axis=-1) > 0.02
        target[:, 2] = np.where(far, self.z_safe, self.z_touch)
        # a touch is counted when the gripper is static near the goal: then move on
        at = (np.linalg.norm(target - tcp, axis=-1) < 0.01) & (np.linalg.norm(vel, axis=-1) < 0.04)
        if self.spec.n_targets > 1:
            done_one = ok & at & (self.progress < self.spec.n_targets)
            self.progress += done_one
            finished = self.progress >= self.spec.n_targets
            k = np.minimum(self.progress, self.spec.n_targets - 1)
            slot = self.goals[np.arange(n), k]
            goal = cand[np.arange(n), np.maximum(slot, 0)]
            target[:, :2] = np.where(finished[:, None], tcp[:, :2], goal[:, :2])
            far = np.linalg.norm(goal[:, :2] - tcp[:, :2], axis=-1) > 0.02
            target[:, 2] = np.where(
                finished, self.z_safe, np.where(far | done_one, self.z_safe, self.z_touch)
            )
        action = np.clip((target - tcp) / MAX_DELTA, -1.0, 1.0)
        return np.where(ok[:, None], action, 0.0)

    def _phase(self, obs: np.ndarray) -> np.ndarray:
        return obs[:, self.layout.phase].argmax(-1)


class MemoryOracle(_Oracle):
    """Stores the cue from ``memory`` observations, then touches the target(s).

    Args:
        env: a MikasaLite tabletop env (single or vector), its id, or its ``TaskSpec``.
    """

    def reset(self, num_envs: int) -> None:
        super().reset(num_envs)
        n = self.spec.n_targets
        self.cue_values = np.full((num_envs, n), -1, np.int64)
        self.n_seen = np.zeros(num_envs, np.int64)
        self.ball_xy = np.zeros((num_envs, 2))

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions (num_envs, 3) for memory-mode observations (num_envs, dim)."""
        obs = self._check(obs)
        feats = self.layout.split_objects(obs)
        phase = self._phase(obs)
        cue = phase == 0
        ar = np.arange(len(obs))
        if cue.any():
            vis = feats[..., 0] > 0.5
            if self.spec.family == "shell_touch":
                ball = feats[..., 4 + N_COL + SHAPES.index("sphere")] > 0.5
                idx = (vis & ball).argmax(-1)
                self.ball_xy[cue] = feats[ar, idx, 1:3][cue]
            elif self.spec.family in ("seq", "chain"):
                v = self._values(feats[:, 0])
                new = cue & (v >= 0) & (self.n_seen < self.spec.n_targets)
                new &= ~(self.cue_values == v[:, None]).any(-1)
                rows = np.flatnonzero(new)
                self.cue_values[rows, self.n_seen[rows]] = v[rows]
                self.n_seen[rows] += 1
            else:
                vals = self._values(feats)[:, : self.spec.n_targets]
                self.cue_values[cue] = vals[cue]
        act = phase == 2
        first = act & ~self.committed
        if first.any():
            pos = feats[..., 1:3]
            if self.spec.family == "shell_touch":
                d = np.linalg.norm(pos - self.ball_xy[:, None], axis=-1)
                d = np.where(feats[..., 0] > 0.5, d, np.inf)
                self.goals[first, 0] = d.argmin(-1)[first]
            else:
                vals = self._values(feats)  # (N, S)
                match = vals[:, None, :] == self.cue_values[:, :, None]  # (N, n, S)
                slot = np.where(match.any(-1), match.argmax(-1), -1)
                self.goals[first] = slot[first]
            self.committed |= first
        return self._drive(obs, feats[..., 1:4], act)


class MemorylessOracle(_Oracle):
    """A cue-blind policy: commits at the first act step to random candidate(s) and touches them.

    Args:
        env: a MikasaLite tabletop env, its id, or its ``TaskSpec``.
        choice: ``"random"`` (uniform, seeded) or ``"first"`` (the first slot; slots are shuffled
            per episode, so this is also chance).
        seed: seed of the random choices.
    """

    def __init__(self, env: Any, choice: str = "random", seed: int | None = 0) -> None:
        super().__init__(env)
        if choice not in ("random", "first"):
            raise ValueError(f"choice must be 'random' or 'first'; got {choice!r}")
        self.choice = choice
        self.rng = np.random.default_rng(check_seed(seed))

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions (num_envs, 3) for memory-mode observations (num_envs, dim)."""
        obs = self._check(obs)
        feats = self.layout.split_objects(obs)
        act = self._phase(obs) == 2
        first = act & ~self.committed
        k, n = self.spec.n_candidates, self.spec.n_targets
        for i in np.flatnonzero(first):
            order = np.arange(k) if self.choice == "first" else self.rng.permutation(k)
            self.goals[i] = order[:n]
        self.committed |= first
        return self._drive(obs, feats[..., 1:4], act)


class StateOracle(_Oracle):
    """Reads ``oracle_info`` from ``state`` observations and touches the target(s); no memory."""

    obs_mode = "state"

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions (num_envs, 3) for state-mode observations (num_envs, dim)."""
        obs = self._check(obs)
        spec = self.spec
        feats = self.layout.split_objects(obs)[:, spec.n_cue_objects :]  # the candidates
        oracle = obs[:, self.layout.oracle].reshape(len(obs), spec.n_targets, spec.n_values)
        want = oracle.argmax(-1)  # (N, n)
        if spec.family == "shell_touch":
            self.goals[:] = want
        else:
            vals = self._values(np.concatenate([np.ones_like(feats[..., :1]), feats[..., 1:]], -1))
            match = vals[:, None, :] == want[:, :, None]
            self.goals[:] = np.where(match.any(-1), match.argmax(-1), -1)
        act = self._phase(obs) == 2
        return self._drive(obs, feats[..., 1:4], act)


def make_oracle(kind: str, env: Any, seed: int | None = 0) -> Any:
    """``"memory"``, ``"memoryless"`` or ``"state"`` oracle for ``env``.

    Moving-object tasks get a :class:`iclr26.mikasa.spatial_oracles.SpatialOracle`.
    """
    spec = _spec_of(env)
    if isinstance(spec, SpatialSpec):
        if kind not in ORACLES:
            raise ValueError(f"oracle must be one of {ORACLES}; got {kind!r}")
        from iclr26.mikasa.spatial_oracles import SpatialOracle

        return SpatialOracle(spec, kind, seed=seed)
    if kind == "memory":
        return MemoryOracle(env)
    if kind == "memoryless":
        return MemorylessOracle(env, seed=seed)
    if kind == "state":
        return StateOracle(env)
    raise ValueError(f"oracle must be one of {ORACLES}; got {kind!r}")


def _rollout_kinematic(
    spec: TaskSpec, policy: Any, n_episodes: int, seed: int, obs_mode: str, record: bool, **kw: Any
) -> dict[str, np.ndarray]:
    from iclr26.mikasa.kinematic import KinematicVectorEnv

    env = KinematicVectorEnv(
        spec, n_episodes, obs_mode=obs_mode, reward_mode="normalized_dense", **kw
    )
    obs, _ = env.reset(seed=seed)
    policy.reset(n_episodes)
    T = spec.T
    out: dict[str, list] = {k: [] for k in (*DEMO_FIELDS, *EXPORT_FIELDS[1:])}
    success = np.zeros(n_episodes, bool)
    for _t in range(T):
        a = policy.act(obs)
        nxt, r, term, trunc, info = env.step(a)
        if record:
            out["obs"].append(obs)
            out["proprio"].append(obs[:, :7])
            out["action"].append(np.asarray(a, np.float32))
            out["reward"].append(r)
            out["success"].append(info["success"])
            out["done"].append(term | trunc)
            out["terminated"].append(term)
            out["truncated"].append(trunc)
        success = info["success"]
        obs = nxt
    res = {
        "success_at_end": success.astype(float),
        "success_once": info["success_once"].astype(float),
    }
    if record:
        res.update({k: np.stack(v, 1) for k, v in out.items()})
        # next-step autoreset: the observation after step T is the final one of each episode
        res["final_obs"] = obs.copy()
    return res


def _rollout_mujoco(
    spec: TaskSpec, policy: Any, n_episodes: int, seed: int, obs_mode: str, **kw: Any
) -> dict[str, np.ndarray]:
    from iclr26.mikasa.physics import make_mujoco_env

    env = make_mujoco_env(spec, obs_mode=obs_mode, **kw)
    end, once = np.zeros(n_episodes), np.zeros(n_episodes)
    for e in range(n_episodes):
        obs, info = env.reset(seed=seed + e)
        policy.reset(1)
        for _ in range(spec.T):
            obs, _, _, _, info = env.step(policy.act(obs[None])[0])
        end[e], once[e] = info["success"], info["success_once"]
    env.close()
    return {"success_at_end": end, "success_once": once}


def evaluate(
    env_id: str,
    policy: Any,
    n_episodes: int = 100,
    *,
    seed: int = 0,
    backend: str = "kinematic",
    obs_mode: str | None = None,
    **env_kwargs: Any,
) -> dict[str, float]:
    """Success of ``policy`` (an oracle, or anything with ``reset(n)`` and ``act(obs)``).

    Episodes run to T; ``success_at_end`` is success at the last step, ``success_once`` success at
    any step (the official ``success_once``). Episode e uses seed ``seed + e``.

    Returns:
        ``{"success_at_end", "success_once", "n_episodes"}``.
    """
    spec = get_spec(env_id) if isinstance(env_id, str) else _spec_of(env_id)
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, int) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an int >= 1, got {n_episodes!r}")
    seed = check_seed(seed) or 0
    delta_time = env_kwargs.pop("delta_time", None)
    if delta_time is not None:
        spec = spec.with_delay(delta_time)
    mode = obs_mode or getattr(policy, "obs_mode", "memory")
    if backend == "kinematic":
        res = _rollout_kinematic(spec, policy, n_episodes, seed, mode, False, **env_kwargs)
    elif backend == "mujoco":
        res = _rollout_mujoco(spec, policy, n_episodes, seed, mode, **env_kwargs)
    else:
        raise ValueError(f"backend must be 'kinematic' or 'mujoco'; got {backend!r}")
    return {
        "success_at_end": float(res["success_at_end"].mean()),
        "success_once": float(res["success_once"].mean()),
        "n_episodes": n_episodes,
    }


def collect_demos(
    env_id: str,
    oracle: Any = "memory",
    n_episodes: int = 100,
    *,
    seed: int = 0,
    obs_mode: str | None = None,
    path: str | os.PathLike[str] | None = None,
    **env_kwargs: Any,
) -> dict[str, np.ndarray]:
    """Roll out an oracle (or any policy) on the kinematic backend and return its episodes.

    Fields follow the official dataset layout (:data:`iclr26.mikasa.data.DEMO_FIELDS`): ``obs``
    (E, T, dim) in ``obs_mode``, ``proprio`` (E, T, 7: TCP xyz, velocity, t/T — the analogue of
    ``joints``), ``action`` (E, T, 3), ``reward``, ``success``, ``done`` (E, T); plus
    :data:`iclr26.mikasa.data.EXPORT_FIELDS` for a lossless export
    (:func:`iclr26.mikasa.minari_export.to_minari`): ``final_obs`` (E, dim, the observation
    after the last step), ``terminated`` and ``truncated`` (E, T). Episode e uses seed
    ``seed + e``; rewards are ``normalized_dense``.

    Args:
        env_id: task id.
        oracle: ``"memory"``, ``"memoryless"`` or ``"state"`` (a scripted oracle), or a policy
            with ``reset(n)`` and ``act(obs)`` (e.g. a fitted :class:`iclr26.mikasa.agents.BC`
            or :class:`iclr26.mikasa.ppo.PPO`: a BC rollout dataset).
        n_episodes: episodes (>= 1), rolled out as one batch.
        seed: seed of the first episode (and of the memoryless oracle's choices).
        obs_mode: ``memory`` or ``state``; default: the mode the policy acts on.
        path: if given, also save the episodes there (:func:`iclr26.mikasa.data.save_demos`).
        **env_kwargs: ``delta_time``, ``hold_until_act``, ``terminate_on_success``.
    """
    spec = get_spec(env_id) if isinstance(env_id, str) else _spec_of(env_id)
    if isinstance(oracle, str):
        if oracle not in ORACLES:
            raise ValueError(f"oracle must be one of {ORACLES} or a policy; got {oracle!r}")
    elif not (callable(getattr(oracle, "act", None)) and callable(getattr(oracle, "reset", None))):
        raise TypeError(
            "oracle must be an oracle name or a policy with reset(n) and act(obs), got "
            f"{type(oracle).__name__}"
        )
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, int) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an int >= 1, got {n_episodes!r}")
    seed = check_seed(seed) or 0
    delta_time = env_kwargs.pop("delta_time", None)
    if delta_time is not None:
        spec = spec.with_delay(delta_time)
    policy = make_oracle(oracle, spec, seed=seed) if isinstance(oracle, str) else oracle
    acts_on = getattr(policy, "obs_mode", "memory")
    if obs_mode is None:
        obs_mode = acts_on
    if acts_on != obs_mode:
        raise ValueError(
            f"the {type(policy).__name__} acts on {acts_on} observations; collect with "
            f"obs_mode={acts_on!r}"
        )
    res = _rollout_kinematic(spec, policy, n_episodes, seed, obs_mode, True, **env_kwargs)
    demos = {k: res[k] for k in (*DEMO_FIELDS, *EXPORT_FIELDS)}
    if path is not None:
        from iclr26.mikasa.data import save_demos

        save_demos(path, demos)
    return demos
