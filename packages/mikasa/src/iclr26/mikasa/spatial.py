"""The tasks whose objects move: ShellGamePush, Intercept{Slow,Medium,Fast} and TakeItBack.

These MIKASA-Robo tasks need objects that the gripper pushes (a cup, a cube) or that roll on
their own (a ball). Their constants come from the official source:

* **ShellGamePush** (object memory, T = 90): the ShellGame scene (ball in one of three cups 0.2 m
  apart, shared offset in ±0.1; cue for t < 5 with the cups out of view). The cup that hid the
  ball must be pushed to a goal 0.1 m in front of its start; success when that cup is within
  0.05 × 1.6 = 0.08 m of the goal and the gripper is static, counted from t >= 5; dense maximum 4.
  Upstream leaves the goal sphere visible, which marks the target cup (an information leak); here
  the goal is shown only in ``state`` mode, so the task needs memory as intended.
* **Intercept{Slow,Medium,Fast}** (spatial memory, T = 90): a ball (r = 0.02) starts at
  x ∈ [-0.25, 0.05], y ∈ [-0.9, -0.65] (the official ranges, shifted +0.1 m in x to centre the
  table) rolling with v_x ∈ [0, 0.05] and v_y ∈ [0.25, 0.5] / [0.5, 0.75] / [0.75, 1.0] m/s; the
  goal region (r = 0.1) lies 0.2 m to its side (+x) at y ∈ [-0.2, 0.2]. Success: the ball's xy
  within 0.1 of the goal centre (no gating, no static requirement); dense maximum 30. Memory-mode
  observations carry positions only, so the velocity must be inferred from successive steps.
* **TakeItBack** (spatial memory, T = 180): a cube (half-size 0.02) starts on an initial region
  that is never observed (x ∈ [-0.05, 0.05], y in one of three strips c·0.1 + [0, 0.05],
  c ∈ {-1, 0, 1}); a red goal (x ∈ [0.2, 0.25], |y| <= 0.025) turns purple once the cube has
  reached it (within 0.08). Success: the goal was reached and the cube is back within 0.08 of the
  initial region; dense maximum 30.

The rules live in :class:`SpatialBatch`, shared by both backends like
:class:`iclr26.mikasa.semantics.TaskBatch`. The kinematic backend moves objects with
:meth:`SpatialBatch.push`, a planar contact model: objects are discs (cup r = 0.04, ball and cube
r = 0.02), the gripper a sphere (r = 0.01); a disc the gripper overlaps is moved out along the
contact normal (quasi-static sliding for cups and cubes: they stop when released), and the ball
keeps rolling at constant velocity, with the normal component of its velocity raised to the
gripper's (an inelastic, frictionless contact with a much heavier gripper). Four substeps per
control step keep a 1 m/s ball from passing through the gripper. The ball stops at the table edge
(|x|, |y| <= 1). The MuJoCo backend simulates the same bodies on planar slide joints with
frictionless contacts (see :mod:`iclr26.mikasa.physics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iclr26.mikasa.data import SHAPES
from iclr26.mikasa.semantics import (
    HEADER,
    OBS_MODES,
    PHASES,
    REWARD_MODES,
    STATIC_SPEED,
    ObsLayout,
    object_features,
)
from iclr26.mikasa.tasks import (
    BALL_RADIUS,
    CUBE_HALF,
    CUE_STEPS,
    CUP_HALF_HEIGHT,
    CUP_RADIUS,
    N_FEATURES,
    NAMESPACE,
    TCP_RADIUS,
)
from iclr26.mikasa.taxonomy import MemoryType

__all__ = [
    "SPATIAL_TASKS",
    "SpatialBatch",
    "SpatialLayout",
    "SpatialSpec",
    "sample_spatial_layout",
    "spatial_obs_layout",
]

TABLE_EDGE = 1.0  # the ball stops here (it would fall off the official table)
PUSH_SUBSTEPS = 4
_RED, _LIME, _BLUE, _MAGENTA = 0, 1, 2, 4
_CUBE, _SPHERE, _CYL = SHAPES.index("cube"), SHAPES.index("sphere"), SHAPES.index("cylinder")


@dataclass(frozen=True)
class SpatialSpec:
    """One task with moving objects (same role as :class:`iclr26.mikasa.tasks.TaskSpec`).

    Attributes:
        name: ``ShellGamePush``, ``InterceptSlow`` … (``env_id`` is ``MikasaLite/<name>-v0``).
        family: ``shell_push``, ``intercept`` or ``take_it_back``.
        T: episode length (official timeout).
        goal_radius: success distance of the object from its goal (xy).
        dense_max: maximum of the dense reward (4 or 30 upstream).
        velocity_range: the ball's v_y range (Intercept).
    """

    name: str
    family: str
    memory_types: tuple[MemoryType, ...]
    T: int
    goal_radius: float
    dense_max: float
    velocity_range: tuple[float, float] = (0.0, 0.0)
    official: bool = True
    kwargs: dict = field(default_factory=dict, compare=False)

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v0"

    @property
    def official_id(self) -> str | None:
        return f"{self.name}-v0" if self.official else None

    @property
    def cue_end(self) -> int:
        return CUE_STEPS if self.family == "shell_push" else 0

    delay_steps = 0

    @property
    def act_start(self) -> int:
        return self.cue_end

    @property
    def n_candidates(self) -> int:
        """Objects to choose from (3 cups), 0 for the continuous tasks."""
        return 3 if self.family == "shell_push" else 0

    @property
    def n_objects(self) -> int:
        return {"shell_push": 5, "intercept": 2, "take_it_back": 4}[self.family]

    @property
    def n_slots(self) -> int:
        return self.n_objects

    @property
    def chance_success(self) -> float | None:
        """1/3 for ShellGamePush; ``None`` for the continuous tasks (no 1/K level)."""
        return 1.0 / 3.0 if self.family == "shell_push" else None

    @property
    def oracle_dim(self) -> int:
        """Length of the state-mode oracle block."""
        return {"shell_push": 3, "intercept": 4, "take_it_back": 3}[self.family]

    @property
    def movable(self) -> np.ndarray:
        """(n_objects,) bool: which objects the gripper can move."""
        return {
            "shell_push": np.array([False, True, True, True, False]),
            "intercept": np.array([True, False]),
            "take_it_back": np.array([True, False, False, False]),
        }[self.family]

    @property
    def radius(self) -> np.ndarray:
        """(n_objects,) contact radius of each object's disc."""
        return {
            "shell_push": np.array([BALL_RADIUS, *[CUP_RADIUS] * 3, 0.0]),
            "intercept": np.array([BALL_RADIUS, 0.0]),
            "take_it_back": np.array([CUBE_HALF, 0.0, 0.0, 0.0]),
        }[self.family]

    @property
    def top(self) -> np.ndarray:
        """(n_objects,) height of each object's top (the gripper passes over above it)."""
        return {
            "shell_push": np.array([2 * BALL_RADIUS, *[2 * CUP_HALF_HEIGHT] * 3, 0.0]),
            "intercept": np.array([2 * BALL_RADIUS, 0.0]),
            "take_it_back": np.array([2 * CUBE_HALF, 0.0, 0.0, 0.0]),
        }[self.family]

    @property
    def rolling(self) -> bool:
        return self.family == "intercept"

    def phase(self, t: int) -> str:
        return "cue" if t < self.cue_end else "act"

    def with_delay(self, delta_time: int) -> SpatialSpec:
        raise ValueError(f"delta_time applies to the Remember* tasks, not {self.name}")


@dataclass(frozen=True)
class SpatialLayout:
    """One episode's initial scene.

    Attributes:
        objects: (M, 5) x, y, z, colour index, shape index per object (see the module docstring
            for the object order of each task).
        velocity: (M, 2) initial planar velocities (the Intercept ball's; zeros otherwise).
        goal: (2,) goal centre xy.
        target: the object that must reach the goal.
        oracle_info: the official ``oracle_info`` (cup index; initial velocity (v_x, v_y);
            initial region xyz).
    """

    objects: np.ndarray
    velocity: np.ndarray
    goal: np.ndarray
    target: int
    oracle_info: np.ndarray


def sample_spatial_layout(spec: SpatialSpec, rng: np.random.Generator) -> SpatialLayout:
    """Draw one episode's scene for ``spec`` from ``rng`` (same generator state, same scene)."""
    m = spec.n_objects
    objects = np.zeros((m, 5))
    velocity = np.zeros((m, 2))
    if spec.family == "shell_push":
        # the draws of ShellGameTouch, in the same order
        offset = rng.uniform(-0.1, 0.1, size=2)
        cup = int(rng.integers(3))
        slots = np.array([[-0.2, 0.0], [0.0, 0.0], [0.2, 0.0]]) + offset
        objects[0] = [*slots[cup], BALL_RADIUS, _RED, _SPHERE]
        objects[1:4, :2] = slots
        objects[1:4, 2] = CUP_HALF_HEIGHT
        objects[1:4, 3] = -1
        objects[1:4, 4] = _CYL
        goal = slots[cup] + np.array([0.0, 0.1])
        objects[4] = [*goal, 0.0, _LIME, _SPHERE]
        target, oracle = 1 + cup, np.array([cup], float)
    elif spec.family == "intercept":
        u = rng.uniform(size=6)
        x0 = (u[0] * 2 - 1) * 0.15 - 0.1
        y0 = u[1] * 0.25 - 1.0 + 0.1
        lo, hi = spec.velocity_range
        v = np.array([u[2] * 0.05, u[3] * (hi - lo) + lo])
        goal = np.array([x0 + 0.2, u[4] * 0.4 - 1.0 + 0.1 + 0.7])
        objects[0] = [x0, y0, BALL_RADIUS, _RED, _SPHERE]
        objects[1] = [*goal, 0.0, _RED, _CYL]
        velocity[0] = v
        target, oracle = 0, v.copy()
    elif spec.family == "take_it_back":
        c = int(rng.integers(3)) - 1
        u = rng.uniform(size=4)
        start = np.array([(u[0] - 0.5) * 0.1, c * 0.1 + u[1] * 0.05])
        goal = np.array([u[2] * 0.05 + 0.2, (u[3] - 0.5) * 0.05])
        objects[0] = [*start, CUBE_HALF, _LIME, _CUBE]
        objects[1] = [*goal, 0.0, _RED, _CYL]
        objects[2] = [*goal, 0.0, _MAGENTA, _CYL]
        objects[3] = [*start, 0.0, _BLUE, _CYL]
        target, oracle = 0, np.array([*start, 1e-3])
    else:  # pragma: no cover - the specs below are the only families
        raise ValueError(spec.family)
    return SpatialLayout(objects, velocity, goal, target, oracle)


def spatial_obs_layout(spec: SpatialSpec, obs_mode: str) -> ObsLayout:
    """The :class:`iclr26.mikasa.semantics.ObsLayout` of ``spec`` (one slot per object)."""
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode must be one of {OBS_MODES}; got {obs_mode!r}")
    n = spec.n_objects
    start = HEADER + n * N_FEATURES
    extra = spec.oracle_dim if obs_mode == "state" else 0
    return ObsLayout(
        dim=start + extra, tcp=slice(0, 3), vel=slice(3, 6), time=slice(6, 7),
        phase=slice(7, 10), objects=slice(HEADER, start), n_objects=n,
        oracle=slice(start, start + extra),
    )  # fmt: skip


class SpatialBatch:
    """Rules of a moving-object task for ``num_envs`` environments (numpy, batched).

    Object positions live in ``obj_pos`` (num_envs, M, 3) and the planar velocities in
    ``obj_vel``; the kinematic backend updates them with :meth:`push`, the MuJoCo backend writes
    the simulated poses into them before :meth:`advance`.

    Observations: ``memory`` mode has one slot per object (visible bit, current xyz, colour and
    shape one-hots), zero while the object is hidden: ShellGamePush shows the ball for t < 5 and
    the cups after, never the goal; Intercept shows the ball and the goal region (no velocity);
    TakeItBack shows the cube and the current goal (red, then purple), never the initial region.
    ``state`` mode shows every object's true pose and appends the oracle block: the cup one-hot
    (ShellGamePush), the initial and current ball velocity (Intercept), the initial region xy and
    the goal-reached flag (TakeItBack).
    """

    def __init__(
        self,
        spec: SpatialSpec,
        num_envs: int,
        obs_mode: str = "memory",
        reward_mode: str = "normalized_dense",
        static_speed: float = STATIC_SPEED,
    ) -> None:
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}; got {reward_mode!r}")
        self.spec = spec
        self.layout = spatial_obs_layout(spec, obs_mode)
        self.obs_mode = obs_mode
        self.reward_mode = reward_mode
        self.static_speed = float(static_speed)
        n, m = num_envs, spec.n_objects
        self.num_envs = n
        self.obj_feats = np.zeros((n, m, N_FEATURES), np.float32)
        self.obj_pos = np.zeros((n, m, 3))
        self.obj_vel = np.zeros((n, m, 2))
        self.goal = np.zeros((n, 2))
        self.target = np.zeros(n, np.int64)
        self.oracle_info = np.zeros(
            (n, {"shell_push": 1, "intercept": 2, "take_it_back": 3}[spec.family])
        )
        self.t = np.zeros(n, np.int64)
        self.success_once = np.zeros(n, bool)
        self.goal_reached = np.zeros(n, bool)  # TakeItBack
        self.reached = np.zeros(n, bool)  # Intercept's "reached the hitting pose" flag
        self._ar = np.arange(n)
        self._movable = spec.movable
        self._radius = spec.radius + TCP_RADIUS
        self._top = spec.top
        self.phase_of_t = np.array([PHASES.index(spec.phase(t)) for t in range(spec.T + 1)])
        self._phase_eye = np.eye(3, dtype=np.float32)

    # --- episode setup ---------------------------------------------------------------------
    def set_layout(self, i: int, layout: SpatialLayout) -> None:
        """Start a new episode in environment ``i`` with ``layout``."""
        self.obj_feats[i] = object_features(layout.objects)
        self.obj_pos[i] = layout.objects[:, :3]
        self.obj_vel[i] = layout.velocity
        self.goal[i] = layout.goal
        self.target[i] = layout.target
        self.oracle_info[i] = layout.oracle_info
        self.t[i] = 0
        self.success_once[i] = False
        self.goal_reached[i] = False
        self.reached[i] = False

    # --- visibility and observations --------------------------------------------------------
    def present(self) -> np.ndarray:
        """(num_envs, M) bool: objects physically on the table now (the cups leave in the cue)."""
        n, m = self.num_envs, self.spec.n_objects
        pres = np.ones((n, m), bool)
        if self.spec.family == "shell_push":
            cue = self.t < self.spec.cue_end
            pres[:, 1:4] = ~cue[:, None]
            pres[:, 0] = cue
        return pres

    def visible(self) -> np.ndarray:
        """(num_envs, M) bool: objects a camera would see now (memory-mode slots)."""
        vis = self.present()
        fam = self.spec.family
        if fam == "shell_push":
            vis[:, 4] = False  # the goal is not shown (upstream's visible goal marks the cup)
        elif fam == "take_it_back":
            vis[:, 1] = ~self.goal_reached
            vis[:, 2] = self.goal_reached
            vis[:, 3] = False
        return vis

    def observe(self, tcp: np.ndarray, vel: np.ndarray) -> np.ndarray:
        """(num_envs, dim) float32 observations for TCP positions/velocities (num_envs, 3)."""
        lay, n = self.layout, self.num_envs
        out = np.empty((n, lay.dim), np.float32)
        t = self.t
        out[:, 0:3] = tcp
        out[:, 3:6] = np.clip(vel, -2.0, 2.0)
        out[:, 6] = t / self.spec.T
        out[:, 7:10] = self._phase_eye[self.phase_of_t[t]]
        feats = self.obj_feats.copy()
        feats[:, :, 1:4] = self.obj_pos
        vis = self.visible()
        if self.obs_mode == "memory":
            feats[:, :, 0] = vis
            feats *= vis[:, :, None]
        else:
            feats[:, :, 0] = vis
            out[:, lay.oracle] = self.oracle_block()
        out[:, lay.objects] = feats.reshape(n, -1)
        return out

    def oracle_block(self) -> np.ndarray:
        fam = self.spec.family
        if fam == "shell_push":
            block = np.zeros((self.num_envs, 3))
            block[self._ar, self.oracle_info[:, 0].astype(int)] = 1.0
            return block
        if fam == "intercept":
            return np.concatenate([self.oracle_info, self.obj_vel[:, 0]], -1)
        return np.concatenate([self.oracle_info[:, :2], self.goal_reached[:, None]], -1)

    # --- kinematic object motion ------------------------------------------------------------
    def push(self, tcp_old: np.ndarray, tcp_new: np.ndarray, dt: float) -> None:
        """Move the objects over one control step of the kinematic backend (see module doc)."""
        spec = self.spec
        pres = self.present() & self._movable
        u = (tcp_new[:, :2] - tcp_old[:, :2]) / dt  # gripper planar velocity
        low = (tcp_new[:, 2] - TCP_RADIUS)[:, None] < self._top  # gripper below the tops
        for s in range(PUSH_SUBSTEPS):
            frac = (s + 1) / PUSH_SUBSTEPS
            tcp = tcp_old[:, :2] + frac * (tcp_new[:, :2] - tcp_old[:, :2])
            if spec.rolling:
                self.obj_pos[:, :, :2] += self.obj_vel * (dt / PUSH_SUBSTEPS)
            diff = self.obj_pos[:, :, :2] - tcp[:, None, :]
            d = np.sqrt((diff**2).sum(-1))
            hit = pres & low & (d < self._radius)
            if not hit.any():
                continue
            safe = np.where(d > 1e-9, d, 1.0)
            normal = np.where((d > 1e-9)[..., None], diff / safe[..., None], [1.0, 0.0])
            moved = tcp[:, None, :] + normal * self._radius[:, None]
            self.obj_pos[:, :, :2] = np.where(hit[..., None], moved, self.obj_pos[:, :, :2])
            if spec.rolling:
                vn = (self.obj_vel * normal).sum(-1)
                un = (u[:, None, :] * normal).sum(-1)
                dv = np.where(hit, np.maximum(vn, un) - vn, 0.0)
                self.obj_vel += dv[..., None] * normal
        if spec.rolling:
            xy = self.obj_pos[:, :, :2]
            out = np.abs(xy) > TABLE_EDGE
            self.obj_vel = np.where(out, 0.0, self.obj_vel)
            self.obj_pos[:, :, :2] = np.clip(xy, -TABLE_EDGE, TABLE_EDGE)

    # --- per step ---------------------------------------------------------------------------
    def advance(self, tcp: np.ndarray, vel: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
        """Count one step and score the current state (objects in ``obj_pos``)."""
        spec = self.spec
        self.t += 1
        speed = np.sqrt((vel**2).sum(-1))
        static = speed <= self.static_speed
        obj = self.obj_pos[self._ar, self.target]
        d_goal = np.sqrt(((obj[:, :2] - self.goal) ** 2).sum(-1))
        fam = spec.family
        if fam == "shell_push":
            active = self.t >= spec.act_start
            placed = d_goal <= spec.goal_radius
            success = active & placed & static
            d_tcp = np.sqrt(((obj - tcp) ** 2).sum(-1))
            reach = 1.0 - np.tanh(10.0 * d_tcp)
            place = 1.0 - np.tanh(5.0 * d_goal)
            static_r = 1.0 - np.tanh(speed / self.static_speed)
            dense = reach + 2.0 * place * (d_tcp <= 0.08) + 0.2 * placed * (static_r + static)
            dense = np.where(success, spec.dense_max, dense) * active
            comps = {"reach": reach, "place": place}
        elif fam == "intercept":
            success = d_goal < spec.goal_radius
            goal3 = np.concatenate([self.goal, np.zeros((self.num_envs, 1))], -1)
            away = obj - goal3
            away /= np.maximum(np.sqrt((away**2).sum(-1, keepdims=True)), 1e-9)
            hit_pose = obj + away * (BALL_RADIUS + 0.05)
            d_hit = np.sqrt(((hit_pose - tcp) ** 2).sum(-1))
            self.reached |= d_hit < 0.04
            reach = 1.0 - np.tanh(2.0 * d_hit)
            place = 1.0 - np.tanh(d_goal)
            dense = np.where(self.reached, 5.0 * place, 2.0 * reach)
            dense = np.where(success, spec.dense_max, dense)
            comps = {"reach": reach, "place": place}
        else:  # take_it_back
            self.goal_reached |= d_goal < spec.goal_radius
            d_back = np.sqrt(((obj[:, :2] - self.oracle_info[:, :2]) ** 2).sum(-1))
            success = self.goal_reached & (d_back < spec.goal_radius)
            d_push = np.sqrt(((obj + np.array([-CUBE_HALF - 0.005, 0, 0]) - tcp) ** 2).sum(-1))
            d_pull = np.sqrt(((obj + np.array([CUBE_HALF + 0.01, 0, 0]) - tcp) ** 2).sum(-1))
            stage1 = 2.0 * (1 - np.tanh(5 * d_push)) + 5.0 * (1 - np.tanh(5 * d_goal)) * (
                d_push < 0.01
            )
            stage2 = 10.0 * (1 - np.tanh(5 * d_pull)) + 15.0 * (1 - np.tanh(5 * d_back)) * (
                d_pull < 0.01
            )
            dense = np.where(self.goal_reached, stage2, stage1)
            dense = np.where(success, spec.dense_max, dense)
            comps = {"d_goal": d_goal, "d_back": d_back}
        self.success_once |= success
        if self.reward_mode == "sparse":
            reward = success.astype(np.float64)
        elif self.reward_mode == "dense":
            reward = dense.astype(np.float64)
        else:
            reward = dense / spec.dense_max
        return reward, success, comps

    def phase_names(self) -> np.ndarray:
        return np.asarray(PHASES)[self.phase_of_t[self.t]]


def _specs() -> dict[str, SpatialSpec]:
    obj, spa = MemoryType.OBJECT, MemoryType.SPATIAL
    specs = [
        SpatialSpec("ShellGamePush", "shell_push", (obj,), T=90, goal_radius=0.05 * 1.6,
                    dense_max=4.0),
        *(
            SpatialSpec(f"Intercept{name}", "intercept", (spa,), T=90, goal_radius=0.1,
                        dense_max=30.0, velocity_range=vr)
            for name, vr in (("Slow", (0.25, 0.5)), ("Medium", (0.5, 0.75)), ("Fast", (0.75, 1.0)))
        ),
        SpatialSpec("TakeItBack", "take_it_back", (spa,), T=180, goal_radius=0.08,
                    dense_max=30.0),
    ]  # fmt: skip
    return {s.env_id: s for s in specs}


#: The moving-object tasks, by id.
SPATIAL_TASKS: dict[str, SpatialSpec] = _specs()
