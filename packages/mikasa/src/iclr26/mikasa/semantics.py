"""The task rules, batched over environments: observations, success, reward, phases.

Both backends call the same :class:`TaskBatch`, so the MuJoCo and the kinematic environments agree
on every rule by construction; a backend only supplies the TCP position and velocity.

Observation modes (flat float32 vectors; :class:`ObsLayout` gives the slices):

* ``memory`` (default; the analogue of the official RGB+joints mode): TCP xyz and velocity,
  t/T, the phase one-hot, and ``n_slots`` object slots holding only *currently visible* objects
  (visible bit, xyz, colour one-hot, shape one-hot); hidden slots are zero. No oracle information.
* ``state`` (the official ``state`` mode, an MDP): the same header, *every* object with its true
  pose and its current visibility bit (hidden ones included), then ``oracle_info`` one-hot per
  target (the cup index, the colour, the shape, or the shown colour sequence).

Success (official semantics, gated by one inequality ``t >= act_start`` in every reward mode):

* ShellGameTouch / Remember*: TCP within ``touch_threshold`` of the target and static.
* Bunch/Seq: every shown cube touched (TCP within 0.02 of a point 0.025 above it, static), no
  other cube touched, any order; Chain also needs the shown order. Touches are recorded once.

"Static" is TCP speed <= ``static_speed`` (0.05 m/s), replacing ``is_static(0.2)`` on joint speeds
(there is no arm). Dense rewards are reconstructions with the official maxima (3 or 100); the
``normalized_dense`` reward is dense / max, in [0, 1], and equals 1 exactly at success.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from iclr26.mikasa.data import COLORS
from iclr26.mikasa.tasks import N_FEATURES, Layout, TaskSpec

__all__ = ["OBS_MODES", "PHASES", "REWARD_MODES", "ObsLayout", "TaskBatch", "obs_layout"]

OBS_MODES = ("memory", "state")
REWARD_MODES = ("sparse", "dense", "normalized_dense")
PHASES = ("cue", "delay", "act")
HEADER = 10  # tcp xyz, tcp velocity, t/T, phase one-hot
STATIC_SPEED = 0.05


@dataclass(frozen=True)
class ObsLayout:
    """Where things are in a flat observation.

    Attributes:
        dim: observation length.
        tcp, vel, time, phase: slices of the header.
        objects: slice of the object block, reshaped ``(n, N_FEATURES)``.
        n_objects: slots (memory) or objects (state) in that block.
        oracle: slice of the ``oracle_info`` one-hot block (empty in memory mode).
        extra: slice of a task's extra block, in both modes (the Rotate prompt and peg yaw, the
            grasp flag of the grasping tasks; empty elsewhere).
    """

    dim: int
    tcp: slice
    vel: slice
    time: slice
    phase: slice
    objects: slice
    n_objects: int
    oracle: slice
    extra: slice = field(default_factory=lambda: slice(0, 0))

    def split_objects(self, obs: np.ndarray) -> np.ndarray:
        """(..., n_objects, N_FEATURES) view of the object block of ``obs``."""
        block = obs[..., self.objects]
        return block.reshape(*obs.shape[:-1], self.n_objects, N_FEATURES)


def obs_layout(spec: TaskSpec, obs_mode: str) -> ObsLayout:
    """The :class:`ObsLayout` of ``spec`` in ``obs_mode`` (``memory`` or ``state``)."""
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode must be one of {OBS_MODES}; got {obs_mode!r}")
    n = spec.n_slots if obs_mode == "memory" else spec.n_objects
    start = HEADER + n * N_FEATURES
    oracle = spec.n_targets * spec.n_values if obs_mode == "state" else 0
    return ObsLayout(
        dim=start + oracle,
        tcp=slice(0, 3),
        vel=slice(3, 6),
        time=slice(6, 7),
        phase=slice(7, 10),
        objects=slice(HEADER, start),
        n_objects=n,
        oracle=slice(start, start + oracle),
    )


def object_features(objects: np.ndarray) -> np.ndarray:
    """(..., M, N_FEATURES) features of layout objects (..., M, 5), visible bit set to 1."""
    objects = np.asarray(objects)
    feats = np.zeros((*objects.shape[:-1], N_FEATURES + 1), np.float32)  # last: "no colour"
    feats[..., 0] = 1.0
    feats[..., 1:4] = objects[..., :3]
    colour = objects[..., 3].astype(int)
    hot = np.stack([np.where(colour >= 0, 4 + colour, N_FEATURES),
                    4 + len(COLORS) + objects[..., 4].astype(int)], -1)  # fmt: skip
    np.put_along_axis(feats, hot, 1.0, -1)
    return feats[..., :N_FEATURES]


class TaskBatch:
    """Rules of ``spec`` for ``num_envs`` environments at once (numpy, no Python loop per env).

    Args:
        spec: the task.
        num_envs: batch size.
        obs_mode: ``memory`` or ``state``.
        reward_mode: ``sparse``, ``dense`` or ``normalized_dense``.
        static_speed: TCP speed (m/s) at or below which the gripper counts as static.
    """

    def __init__(
        self,
        spec: TaskSpec,
        num_envs: int,
        obs_mode: str = "memory",
        reward_mode: str = "normalized_dense",
        static_speed: float = STATIC_SPEED,
    ) -> None:
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}; got {reward_mode!r}")
        self.spec = spec
        self.layout = obs_layout(spec, obs_mode)
        self.obs_mode = obs_mode
        self.reward_mode = reward_mode
        self.static_speed = float(static_speed)
        n, s, m, k = num_envs, spec.n_slots, spec.n_objects, spec.n_candidates
        self.num_envs = n
        self.frame_of_t = spec.frame_index(np.arange(spec.T + 1))
        self.phase_of_t = np.array([PHASES.index(spec.phase(t)) for t in range(spec.T + 1)])
        self._phase_eye = np.eye(3, dtype=np.float32)
        self.slot_feats = np.zeros((n, spec.n_frames, s, N_FEATURES), np.float32)
        self.obj_feats = np.zeros((n, m, N_FEATURES), np.float32)
        self.obj_visible = np.zeros((n, spec.n_frames, m), np.float32)
        self.oracle_onehot = np.zeros((n, spec.n_targets * spec.n_values), np.float32)
        self.oracle_info = np.zeros((n, spec.n_targets), np.int64)
        self.touch_points = np.zeros((n, k, 3))
        self.targets = np.zeros((n, spec.n_targets), np.int64)
        self.t = np.zeros(n, np.int64)
        self.rank = np.full((n, k), -1, np.int64)  # order in which candidates were touched
        self.n_touched = np.zeros(n, np.int64)
        self.success_once = np.zeros(n, bool)
        self._ar = np.arange(n)
        self._is_target = np.zeros((n, k), bool)
        self._frame_rows = np.arange(spec.n_frames)[:, None]
        self._n_cue = spec.n_cue_objects
        self._touch_offset = np.array([0.0, 0.0, spec.touch_offset])
        self._onehot_base = np.arange(spec.n_targets) * spec.n_values
        self._target_point = np.zeros((n, 3))
        self._act_start = spec.act_start
        self._T = spec.T

    # --- episode setup ---------------------------------------------------------------------
    def set_layout(self, i: int, layout: Layout) -> None:
        """Start a new episode in environment ``i`` with ``layout``."""
        self.set_layouts(np.array([i]), [layout])

    def set_layouts(self, idx: np.ndarray, layouts: list[Layout]) -> None:
        """Start new episodes in environments ``idx`` with ``layouts`` (one numpy pass)."""
        idx = np.asarray(idx, dtype=np.int64)
        b = len(idx)
        objects = np.stack([lay.objects for lay in layouts])
        frames = np.stack([lay.frames for lay in layouts])
        targets = np.stack([lay.targets for lay in layouts])
        oracle = np.stack([lay.oracle_info for lay in layouts])
        feats = object_features(objects)
        m = feats.shape[1]
        pad = np.zeros((b, m + 1, N_FEATURES), np.float32)
        pad[:, :m] = feats
        rows = np.arange(b)
        self.obj_feats[idx] = feats
        self.slot_feats[idx] = pad[rows[:, None, None], frames]  # slot -1 picks the zero row
        vis = np.zeros((b, frames.shape[1], m + 1), np.float32)
        vis[rows[:, None, None], self._frame_rows[None], frames] = 1.0
        self.obj_visible[idx] = vis[..., :m]
        points = objects[:, self._n_cue :, :3] + self._touch_offset
        self.touch_points[idx] = points
        self._target_point[idx] = points[rows, targets[:, 0]]
        self.targets[idx] = targets
        self._is_target[idx] = False
        self._is_target[idx[:, None], targets] = True
        self.oracle_info[idx] = oracle
        self.oracle_onehot[idx] = 0.0
        self.oracle_onehot[idx[:, None], self._onehot_base + oracle] = 1.0
        self.t[idx] = 0
        self.rank[idx] = -1
        self.n_touched[idx] = 0
        self.success_once[idx] = False

    # --- per step ---------------------------------------------------------------------------
    def observe(
        self, tcp: np.ndarray, vel: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """(num_envs, dim) float32 observations for TCP positions/velocities (num_envs, 3)."""
        lay = self.layout
        n = self.num_envs
        if out is None:
            out = np.empty((n, lay.dim), np.float32)
        t = self.t
        out[:, 0:3] = tcp
        out[:, 3:6] = np.minimum(np.maximum(vel, -2.0), 2.0)
        out[:, 6] = t / self._T
        out[:, 7:10] = self._phase_eye[self.phase_of_t[t]]
        frame = self.frame_of_t[t]
        if self.obs_mode == "memory":
            out[:, lay.objects] = self.slot_feats[self._ar, frame].reshape(n, -1)
        else:
            feats = self.obj_feats.copy()
            feats[:, :, 0] = self.obj_visible[self._ar, frame]
            out[:, lay.objects] = feats.reshape(n, -1)
            out[:, lay.oracle] = self.oracle_onehot
        return out

    def advance(self, tcp: np.ndarray, vel: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
        """Count one step for every environment and score the new TCP state.

        Returns:
            ``(reward, success, components)``: float64 (num_envs,), bool (num_envs,), and the
            dense terms (``reach``, ``static``, ``progress``).
        """
        spec = self.spec
        if self.num_envs == 1 and spec.n_targets == 1:
            return self._advance_one(tcp, vel)
        self.t += 1
        active = self.t >= self._act_start
        speed = np.sqrt(np.einsum("ij,ij->i", vel, vel))
        static = speed <= self.static_speed
        thr = spec.touch_threshold
        if spec.n_targets == 1:
            diff = tcp - self._target_point
            d_target = np.sqrt(np.einsum("ij,ij->i", diff, diff))
            near = d_target < thr
            success = active & static & near
            reach = 1.0 - np.tanh(5.0 * d_target)
            static_term = near * (1.0 - np.tanh(speed / self.static_speed))
            dense = np.where(success, spec.dense_max, reach + static_term)
            components = {"reach": reach, "static": static_term}
        else:
            diff = tcp[:, None, :] - self.touch_points
            dist = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))  # (N, K)
            new = (active & static)[:, None] & (dist < thr) & (self.rank < 0)
            if new.any():
                # several cubes cannot be within 0.02 of the TCP at once (they are >= 0.08 apart)
                rows, cols = np.nonzero(new)
                self.rank[rows, cols] = self.n_touched[rows]
                np.add.at(self.n_touched, rows, 1)
            touched = self.rank >= 0
            wrong = (touched & ~self._is_target).any(-1)
            target_rank = np.take_along_axis(self.rank, self.targets, 1)  # (N, n)
            n_good = (target_rank >= 0).sum(-1)
            if spec.family == "chain":
                in_order = target_rank == np.arange(spec.n_targets)
                # a target touched out of order can never be repaired
                wrong |= ((target_rank >= 0) & ~in_order).any(-1)
            success = active & ~wrong & (n_good == spec.n_targets)
            untouched = (target_rank < 0) & ~wrong[:, None]
            if spec.family == "chain":
                nxt = np.minimum(n_good, spec.n_targets - 1)
                d_next = dist[self._ar, self.targets[self._ar, nxt]]
            else:
                d_t = np.take_along_axis(dist, self.targets, 1)
                d_next = np.where(untouched, d_t, np.inf).min(-1)
                d_next = np.where(np.isfinite(d_next), d_next, 0.0)
            reach = 1.0 - np.tanh(5.0 * d_next)
            progress = (n_good + reach) / (spec.n_targets + 1)
            dense = np.where(
                success, spec.dense_max, np.where(wrong, 0.0, 0.9 * spec.dense_max * progress)
            )
            components = {"reach": reach, "progress": progress}
        dense = np.where(active, dense, 0.0)
        self.success_once |= success
        if self.reward_mode == "sparse":
            reward = success.astype(np.float64)
        elif self.reward_mode == "dense":
            reward = dense.astype(np.float64)
        else:
            reward = dense / spec.dense_max
        return reward, success, components

    def _advance_one(self, tcp: np.ndarray, vel: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
        """:meth:`advance` for one environment and one target in Python floats (same rules).

        A single MuJoCo environment calls this every control step; numpy's per-call overhead on
        arrays of three numbers would otherwise cost as much as the physics.
        """
        spec = self.spec
        t = int(self.t[0]) + 1
        self.t[0] = t
        active = t >= self._act_start
        vx, vy, vz = float(vel[0, 0]), float(vel[0, 1]), float(vel[0, 2])
        speed = math.sqrt(vx * vx + vy * vy + vz * vz)
        p = self._target_point[0]
        dx, dy, dz = float(tcp[0, 0]) - p[0], float(tcp[0, 1]) - p[1], float(tcp[0, 2]) - p[2]
        d = math.sqrt(dx * dx + dy * dy + dz * dz)
        near = d < spec.touch_threshold
        success = active and speed <= self.static_speed and near
        reach = 1.0 - math.tanh(5.0 * d)
        static_term = (1.0 - math.tanh(speed / self.static_speed)) if near else 0.0
        dense = (spec.dense_max if success else reach + static_term) if active else 0.0
        if success:
            self.success_once[0] = True
        if self.reward_mode == "sparse":
            reward = float(success)
        elif self.reward_mode == "dense":
            reward = dense
        else:
            reward = dense / spec.dense_max
        components = {"reach": np.array([reach]), "static": np.array([static_term])}
        return np.array([reward]), np.array([success]), components

    def phase_names(self) -> np.ndarray:
        """Phase name of each environment at its current step."""
        return np.asarray(PHASES)[self.phase_of_t[self.t]]
