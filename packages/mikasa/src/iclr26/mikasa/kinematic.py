"""The batched kinematic backend: a TCP integrator plus the analytic touch rules, in numpy.

The TCP is a point that moves by ``max_delta * action`` per control step (clipped to the
workspace); its velocity is that displacement over ``control_dt``. Objects never move, so every
touch task is exact and cheap. :class:`KinematicVectorEnv` is a native
``gymnasium.vector.VectorEnv`` (one numpy program for all environments);
:class:`KinematicEnv` is the single-environment view of the same code.

Autoreset (gymnasium >= 1.0): ``autoreset_mode="next_step"`` (gymnasium's default) returns the
final observation of an episode with ``truncated=True``, and the *next* ``step`` resets that
environment, ignores its action and returns the first observation with reward 0 and both flags
false. ``"same_step"`` returns the first observation of the new episode at once and puts the final
one in ``info["final_obs"]`` (``info["final_info"]`` for its info; masks ``_final_obs`` /
``_final_info``). Recurrent agents must reset their state where ``terminated | truncated``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from iclr26.mikasa.semantics import OBS_MODES, TaskBatch
from iclr26.mikasa.spatial import SpatialBatch, SpatialSpec, sample_spatial_layout
from iclr26.mikasa.tasks import TCP_START, WORKSPACE_HIGH, WORKSPACE_LOW, TaskSpec, sample_layout

__all__ = ["KinematicEnv", "KinematicVectorEnv", "check_action", "check_seed"]

MAX_DELTA = 0.03  # metres per control step at |action| = 1
AUTORESET_MODES = ("next_step", "same_step")


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """``None`` or a non-negative Python/NumPy integer; anything else is refused."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"{name} must be a non-negative int or None, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"{name} must be >= 0, got {seed}")
    return int(seed)


def check_action(action: Any, shape: tuple[int, ...], name: str = "action") -> np.ndarray:
    """A finite float array of ``shape`` inside [-1, 1]; refuses anything else (never clips)."""
    a = action if type(action) is np.ndarray else np.asarray(action)
    if a.dtype.kind == "f" and a.shape == shape:
        if a.size <= 8:  # one environment: Python floats beat numpy reductions
            ok = all(-1.0 <= x <= 1.0 for x in a.ravel().tolist())  # NaN fails the comparison
        else:
            ok = a.min() >= -1.0 and a.max() <= 1.0
        if ok:  # fast path
            return a.astype(np.float64, copy=False)
    if a.dtype == object or not (
        np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)
    ):
        raise TypeError(f"{name} must be a numeric array, got dtype {a.dtype}")
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got NaN or inf")
    if (np.abs(a) > 1.0 + 1e-6).any():
        raise ValueError(
            f"{name} is outside the action space [-1, 1]: max |a| = {np.abs(a).max():.3g}"
        )
    return np.minimum(np.maximum(a, -1.0), 1.0)


OBS_BOUND = 2.0  # positions lie in ±0.35 m; velocities are clipped to ±2 m/s in observations


def obs_space(dim: int) -> gym.spaces.Box:
    """The float32 observation Box (±``OBS_BOUND``) of dimension ``dim``, for both backends."""
    return gym.spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(dim,), dtype=np.float32)


def _action_space() -> gym.spaces.Box:
    return gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)


class _Kinematics:
    """TCP state of a batch and its integrator."""

    def __init__(self, n: int, control_dt: float, max_delta: float, hold_until_act: bool):
        self.tcp = np.tile(np.asarray(TCP_START, float), (n, 1))
        self.vel = np.zeros((n, 3))
        self.control_dt = control_dt
        self.max_delta = max_delta
        self.hold_until_act = hold_until_act

    def reset(self, i: int | np.ndarray) -> None:
        self.tcp[i] = TCP_START
        self.vel[i] = 0.0

    def move(self, action: np.ndarray, t: np.ndarray, act_start: int) -> None:
        delta = self.max_delta * action
        if self.hold_until_act:
            delta = np.where((t < act_start)[:, None], 0.0, delta)
        new = np.minimum(np.maximum(self.tcp + delta, WORKSPACE_LOW), WORKSPACE_HIGH)
        self.vel = (new - self.tcp) / self.control_dt
        self.tcp = new


class KinematicVectorEnv(VectorEnv):
    """``num_envs`` episodes of one task, stepped as one numpy program.

    Args:
        spec: the task (:func:`iclr26.mikasa.tasks.get_spec`; a ``TaskSpec`` or a ``SpatialSpec``).
        num_envs: number of environments (>= 1).
        obs_mode: ``memory`` (default) or ``state``.
        reward_mode: ``sparse``, ``dense`` or ``normalized_dense`` (default, as the official PPO).
        autoreset_mode: ``next_step`` (gymnasium's default) or ``same_step``.
        control_dt: seconds per control step (velocity = displacement / control_dt).
        hold_until_act: ignore actions before the act phase, so no policy can store the cue in
            the gripper pose (the paper's memoryless-is-chance premise; see README).
        terminate_on_success: end an episode at success (default False: episodes run to T).
    """

    metadata: ClassVar[dict] = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        spec: TaskSpec,
        num_envs: int,
        *,
        obs_mode: str = "memory",
        reward_mode: str = "normalized_dense",
        autoreset_mode: str = "next_step",
        control_dt: float = 0.04,
        hold_until_act: bool = True,
        terminate_on_success: bool = False,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer):
            raise TypeError(f"num_envs must be an int, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if obs_mode not in OBS_MODES:
            raise ValueError(
                f"obs_mode {obs_mode!r} is not available on the kinematic backend; "
                f"choose one of {OBS_MODES}"
            )
        if autoreset_mode not in AUTORESET_MODES:
            raise ValueError(
                f"autoreset_mode must be one of {AUTORESET_MODES}; got {autoreset_mode!r}"
            )
        if not control_dt > 0:
            raise ValueError(f"control_dt must be > 0, got {control_dt}")
        self.spec_task = spec
        self.num_envs = int(num_envs)
        if isinstance(spec, SpatialSpec):
            self.batch = SpatialBatch(spec, self.num_envs, obs_mode, reward_mode)
            self._sample = sample_spatial_layout
        else:
            self.batch = TaskBatch(spec, self.num_envs, obs_mode, reward_mode)
            self._sample = sample_layout
        self._moving = isinstance(spec, SpatialSpec)
        self.kin = _Kinematics(self.num_envs, control_dt, MAX_DELTA, hold_until_act)
        self.terminate_on_success = terminate_on_success
        self.autoreset_mode = autoreset_mode
        self.metadata = {
            "render_modes": [],
            "autoreset_mode": {
                "next_step": AutoresetMode.NEXT_STEP,
                "same_step": AutoresetMode.SAME_STEP,
            }[autoreset_mode],
        }
        self.single_observation_space = obs_space(self.batch.layout.dim)
        self.single_action_space = _action_space()
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self._rngs: list[np.random.Generator] = [
            np.random.default_rng(None) for _ in range(self.num_envs)
        ]
        self._needs_reset = np.zeros(self.num_envs, bool)
        self._success = np.zeros(self.num_envs, bool)
        self._started = False

    def _reset_envs(self, idx: np.ndarray) -> None:
        spec, rngs = self.spec_task, self._rngs
        self.batch.set_layouts(idx, [self._sample(spec, rngs[i]) for i in idx])
        self.kin.reset(idx)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        """Reset every environment; ``seed`` s seeds environment i with s + i (as gymnasium)."""
        if isinstance(seed, list | tuple):
            if len(seed) != self.num_envs:
                raise ValueError(f"seed list must have {self.num_envs} entries, got {len(seed)}")
            seeds = [check_seed(s) for s in seed]
        else:
            s = check_seed(seed)
            seeds = [None if s is None else s + i for i in range(self.num_envs)]
        for i, s in enumerate(seeds):
            if s is not None or not self._started:
                self._rngs[i] = np.random.default_rng(s)
        self._started = True
        self._reset_envs(np.arange(self.num_envs))
        self._needs_reset[:] = False
        self._success[:] = False
        obs = self.batch.observe(self.kin.tcp, self.kin.vel)
        return obs, self._info()

    def _info(self) -> dict[str, Any]:
        b = self.batch
        return {
            "success": self._success.copy(),
            "success_once": b.success_once.copy(),
            "elapsed_steps": b.t.copy(),
            "phase": b.phase_names(),
            "oracle_info": b.oracle_info.copy(),
        }

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step all environments with actions of shape (num_envs, 3) in [-1, 1]."""
        if not self._started:
            raise gym.error.ResetNeeded("call reset() before step()")
        a = check_action(actions, (self.num_envs, 3), "actions")
        b, kin = self.batch, self.kin
        resetting = self._needs_reset.copy()
        if self._moving:
            old = kin.tcp.copy()
            kin.move(a, b.t, self.spec_task.act_start)
            b.push(old, kin.tcp, kin.control_dt)
        else:
            kin.move(a, b.t, self.spec_task.act_start)
        reward, success, _ = b.advance(kin.tcp, kin.vel)
        self._success = success
        terminated = success & self.terminate_on_success
        truncated = (b.t >= self.spec_task.T) & ~terminated
        done = terminated | truncated
        if resetting.any():  # next-step autoreset: these envs start over, their action ignored
            idx = np.flatnonzero(resetting)
            self._reset_envs(idx)
            reward[idx] = 0.0
            success[idx] = False
            terminated[idx] = False
            truncated[idx] = False
            done[idx] = False
        obs = b.observe(kin.tcp, kin.vel)
        info = self._info()
        if self.autoreset_mode == "next_step":
            self._needs_reset = done
        elif done.any():
            idx = np.flatnonzero(done)
            final_obs = np.empty(self.num_envs, dtype=object)
            final_obs[idx] = list(obs[idx].copy())
            final_info = {k: v.copy() for k, v in info.items()}
            self._reset_envs(idx)
            self._success = np.where(done, False, success)
            obs = b.observe(kin.tcp, kin.vel)
            info = self._info()
            info["final_obs"] = final_obs
            info["_final_obs"] = done.copy()
            info["final_info"] = final_info
            info["_final_info"] = done.copy()
        return obs, reward, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        return None


class KinematicEnv(gym.Env):
    """One environment of the kinematic backend (same arguments as :class:`KinematicVectorEnv`).

    ``step`` after the episode ended raises ``gymnasium.error.ResetNeeded``; actions outside the
    action space raise ``ValueError``.
    """

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(
        self,
        spec: TaskSpec,
        *,
        obs_mode: str = "memory",
        reward_mode: str = "normalized_dense",
        control_dt: float = 0.04,
        hold_until_act: bool = True,
        terminate_on_success: bool = False,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None:
            raise ValueError(
                f"render_mode {render_mode!r} needs the mujoco backend; the kinematic backend "
                "does not render (use iclr26.mikasa.render.episode_strip for a top-down view)"
            )
        self.spec_task = spec
        self._vec = KinematicVectorEnv(
            spec, 1, obs_mode=obs_mode, reward_mode=reward_mode, control_dt=control_dt,
            hold_until_act=hold_until_act, terminate_on_success=terminate_on_success,
        )  # fmt: skip
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self._done = True

    @property
    def tcp(self) -> np.ndarray:
        return self._vec.kin.tcp[0].copy()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_seed(seed)
        super().reset(seed=seed)
        if seed is not None:
            self._vec.reset(seed=seed)
        else:
            # unseeded resets continue this env's own stream
            self._vec._rngs[0] = np.random.default_rng(self.np_random.integers(2**63))
            self._vec._started = True
            self._vec.reset()
        self._vec._needs_reset[:] = False
        self._done = False
        obs = self._vec.batch.observe(self._vec.kin.tcp, self._vec.kin.vel)
        return obs[0], _single(self._vec._info())

    def step(self, action):
        if self._done:
            raise gym.error.ResetNeeded("step() after the episode ended: call reset() first")
        a = check_action(action, (3,))
        obs, rew, term, trunc, info = self._vec.step(a[None])
        self._vec._needs_reset[:] = False
        self._done = bool(term[0] or trunc[0])
        return obs[0], float(rew[0]), bool(term[0]), bool(trunc[0]), _single(info)


def _single(info: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in info.items():
        v = v[0]
        out[k] = v.item() if isinstance(v, np.generic) else v
    out["phase"] = str(out["phase"])
    return out
