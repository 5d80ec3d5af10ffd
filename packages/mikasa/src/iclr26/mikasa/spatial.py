"""The tasks whose objects move: ShellGame{Push,Pick}, Intercept*, InterceptGrab*, TakeItBack, Rotate*.

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

* **ShellGamePick** (object memory, T = 90): the ShellGame scene; the cup that hid the ball must
  be grasped and lifted to a goal 0.1 m in front of its slot and 0.1 m up (the goal height is
  ours); success when the target cup is held, its centre within 0.08 of the goal and the
  gripper static, from t >= 5; dense maximum 75. A grasped wrong cup stays in the gripper.
* **InterceptGrab{Slow,Medium,Fast}** (spatial memory, T = 90): the Intercept ball (same ranges,
  no goal); success when the ball is grasped and the gripper static; dense maximum 300.
* **Rotate{Lenient,Strict}{Pos,PosNeg}** (spatial; Strict is typed object memory as in the
  official README, T = 90): a peg (half-length 0.12, half-width 0.025) lies at a uniform yaw in
  [0, 2π) and xy in ±0.1; the prompt is the relative rotation to apply, drawn from one uniform
  number u as upstream: Pos 0.1 + u (π/2 − 0.1); PosNeg magnitude 0.1 + u (π/4 − 0.1), positive
  when u > 0.5 (so positive targets lie in (0.443, π/4], negative ones in [−0.443, −0.1]), cast
  to float16. Success: |target − wrap(yaw − yaw₀)| < 0.1 rad and static (Strict: the peg centre
  also within 0.05 of its start in x and in y); dense maxima 25 (Lenient) and 100 (Strict). The
  observation shows the current yaw and the prompt, never the initial yaw, so the agent must
  remember where the peg started. The peg is turned by pushing it (as upstream, no grasp).

**Grasping** (ShellGamePick, InterceptGrab) has no finger action here (the action stays the 3-d
Cartesian delta): an object is grasped when the gripper *comes down onto* its grasp point — at a
check where the gripper is within 0.02 m in xy of the object's centre and between 0.005 m below
and 0.015 m above the height at which the gripper sphere rests on its top, having been above that
window at the previous check — and then moves rigidly with the gripper for the rest of the
episode. A gripper already lowered into the window does not catch an object that slides or rolls
under it: a parallel gripper closes on what lies between its fingers as it comes down, and a
rolling ball passes the fingers of a waiting gripper. Catching the InterceptGrab ball is therefore
a matter of timing — the gripper must drop onto the ball's path just as the ball arrives, which
needs the ball's velocity, i.e. memory of its earlier positions. Both backends check this rule
four times per control step.

The rules live in :class:`SpatialBatch`, shared by both backends like
:class:`iclr26.mikasa.semantics.TaskBatch`. The kinematic backend moves objects with
:meth:`SpatialBatch.push`, a planar contact model: objects are discs (cup r = 0.04, ball and cube
r = 0.02), the gripper a sphere (r = 0.01); a disc the gripper overlaps is moved out along the
contact normal (quasi-static sliding for cups and cubes: they stop when released), and the ball
keeps rolling at constant velocity, with the normal component of its velocity raised to the
gripper's (an inelastic, frictionless contact with a much heavier gripper). Four substeps per
control step keep a 1 m/s ball from passing through the gripper. The ball stops at the table edge
(|x|, |y| <= 1). The peg of the Rotate tasks is a capsule (a segment of half-length 0.095 with
radius 0.025) moved quasi-statically with an ellipsoidal limit surface: a contact at signed
distance s along the axis with penetration δ along the normal n moves the centre by
F (−n) and turns the peg by F τ / c², with τ = (r × (−n))_z, c² = 0.12²/3 (a uniform rod's
radius of gyration) and F = δ / (1 + τ²/c²), which resolves the penetration to first order.
The MuJoCo backend simulates the same bodies on planar slide joints with
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
    "FAMILIES",
    "SPATIAL_TASKS",
    "Family",
    "SpatialBatch",
    "SpatialLayout",
    "SpatialSpec",
    "sample_spatial_layout",
    "spatial_obs_layout",
    "wrap_angle",
]

TABLE_EDGE = 1.0  # the ball stops here (it would fall off the official table)
PUSH_SUBSTEPS = 4
PEG_HALF_LENGTH, PEG_HALF_WIDTH = 0.12, 0.025
PEG_SEGMENT = PEG_HALF_LENGTH - PEG_HALF_WIDTH  # half-length of the capsule's axis
PEG_GYRATION2 = PEG_HALF_LENGTH**2 / 3.0  # c² of the ellipsoidal limit surface
GRASP_XY, GRASP_BELOW, GRASP_ABOVE = 0.02, 0.005, 0.015
PICK_LIFT = 0.1  # ShellGamePick: the goal lies this far above the cup's resting centre
ROTATE_DRIFT = 0.05  # RotateStrict: the peg centre stays within this of its start (x and y)
_RED, _LIME, _BLUE, _MAGENTA = 0, 1, 2, 4
_CUBE, _SPHERE, _CYL = SHAPES.index("cube"), SHAPES.index("sphere"), SHAPES.index("cylinder")
_CAPSULE = SHAPES.index("capsule")


@dataclass(frozen=True)
class Family:
    """Per-family constants of the moving-object tasks (one row of :data:`FAMILIES`).

    Attributes:
        n_objects: objects in the scene (one observation slot each).
        oracle_dim: length of the state-mode oracle block.
        info_dim: length of ``oracle_info``.
        extra_dim: length of the extra block shown in both modes.
        movable, radius, top, graspable: per object: moved by contact, contact radius (disc or
            capsule), height of its top, can be grasped.
        cue: steps the ball is shown before the cups cover it (ShellGame), else 0.
        n_candidates: objects to choose from (3 cups), 0 for the continuous tasks.
    """

    n_objects: int
    oracle_dim: int
    info_dim: int
    extra_dim: int
    movable: tuple[bool, ...]
    radius: tuple[float, ...]
    top: tuple[float, ...]
    graspable: tuple[bool, ...]
    cue: int = 0
    n_candidates: int = 0


_SHELL_RADIUS = (BALL_RADIUS, *[CUP_RADIUS] * 3, 0.0)
_SHELL_TOP = (2 * BALL_RADIUS, *[2 * CUP_HALF_HEIGHT] * 3, 0.0)
#: The constants of each family of moving-object tasks.
FAMILIES: dict[str, Family] = {
    "shell_push": Family(5, 3, 1, 0, (False, True, True, True, False), _SHELL_RADIUS, _SHELL_TOP,
                         (False,) * 5, CUE_STEPS, 3),
    "shell_pick": Family(5, 3, 1, 1, (False, True, True, True, False), _SHELL_RADIUS, _SHELL_TOP,
                         (False, True, True, True, False), CUE_STEPS, 3),
    "intercept": Family(2, 4, 2, 0, (True, False), (BALL_RADIUS, 0.0), (2 * BALL_RADIUS, 0.0),
                        (False, False)),
    "intercept_grab": Family(1, 4, 2, 1, (True,), (BALL_RADIUS,), (2 * BALL_RADIUS,), (True,)),
    "take_it_back": Family(4, 3, 3, 0, (True, False, False, False), (CUBE_HALF, 0.0, 0.0, 0.0),
                           (2 * CUBE_HALF, 0.0, 0.0, 0.0), (False,) * 4),
    "rotate": Family(1, 5, 1, 3, (True,), (PEG_HALF_WIDTH,), (2 * PEG_HALF_WIDTH,), (False,)),
}  # fmt: skip


@dataclass(frozen=True)
class SpatialSpec:
    """One task with moving objects (same role as :class:`iclr26.mikasa.tasks.TaskSpec`).

    Attributes:
        name: ``ShellGamePush``, ``InterceptSlow`` … (``env_id`` is ``MikasaLite/<name>-v0``).
        family: a key of :data:`FAMILIES` (``shell_push``, ``shell_pick``, ``intercept``,
            ``intercept_grab``, ``take_it_back``, ``rotate``).
        T: episode length (official timeout).
        goal_radius: success distance of the object from its goal (xy; 3-d for ShellGamePick;
            the angle tolerance in radians for Rotate).
        dense_max: maximum of the dense reward (4, 75, 30, 300, 25 or 100 upstream).
        velocity_range: the ball's v_y range (Intercept, InterceptGrab).
        angle_mode: ``pos`` or ``posneg`` (Rotate).
        strict: RotateStrict (the peg must also stay in place).
    """

    name: str
    family: str
    memory_types: tuple[MemoryType, ...]
    T: int
    goal_radius: float
    dense_max: float
    velocity_range: tuple[float, float] = (0.0, 0.0)
    angle_mode: str = ""
    strict: bool = False
    official: bool = True
    kwargs: dict = field(default_factory=dict, compare=False)

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v0"

    @property
    def official_id(self) -> str | None:
        return f"{self.name}-v0" if self.official else None

    @property
    def fam(self) -> Family:
        return FAMILIES[self.family]

    @property
    def cue_end(self) -> int:
        return self.fam.cue

    delay_steps = 0

    @property
    def act_start(self) -> int:
        return self.cue_end

    @property
    def n_candidates(self) -> int:
        """Objects to choose from (3 cups), 0 for the continuous tasks."""
        return self.fam.n_candidates

    @property
    def n_objects(self) -> int:
        return self.fam.n_objects

    @property
    def n_slots(self) -> int:
        return self.n_objects

    @property
    def chance_success(self) -> float | None:
        """1/3 for the ShellGame tasks; ``None`` for the continuous tasks (no 1/K level)."""
        return 1.0 / self.n_candidates if self.n_candidates else None

    @property
    def oracle_dim(self) -> int:
        """Length of the state-mode oracle block."""
        return self.fam.oracle_dim

    @property
    def movable(self) -> np.ndarray:
        """(n_objects,) bool: which objects the gripper can move."""
        return np.array(self.fam.movable)

    @property
    def graspable(self) -> np.ndarray:
        """(n_objects,) bool: which objects the gripper can grasp."""
        return np.array(self.fam.graspable)

    @property
    def grasping(self) -> bool:
        return any(self.fam.graspable)

    @property
    def radius(self) -> np.ndarray:
        """(n_objects,) contact radius of each object (disc, or the peg capsule's)."""
        return np.array(self.fam.radius)

    @property
    def top(self) -> np.ndarray:
        """(n_objects,) height of each object's top (the gripper passes over above it)."""
        return np.array(self.fam.top)

    @property
    def rolling(self) -> bool:
        return self.family in ("intercept", "intercept_grab")

    @property
    def success_metric(self) -> str:
        """The metric reported for this task: ``success_once`` for Intercept (the ball rolls on
        and upstream has no static requirement), ``success_at_end`` elsewhere."""
        return "success_once" if self.family == "intercept" else "success_at_end"

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
            initial region xyz; the remaining angle error, initially the prompt).
        yaw: (M,) initial yaws (the Rotate peg's; zeros otherwise).
        prompt: the Rotate target rotation (0 elsewhere).
        goal_z: height of the goal (ShellGamePick; 0 elsewhere).
    """

    objects: np.ndarray
    velocity: np.ndarray
    goal: np.ndarray
    target: int
    oracle_info: np.ndarray
    yaw: np.ndarray | None = None
    prompt: float = 0.0
    goal_z: float = 0.0


def sample_spatial_layout(spec: SpatialSpec, rng: np.random.Generator) -> SpatialLayout:
    """Draw one episode's scene for ``spec`` from ``rng`` (same generator state, same scene)."""
    m = spec.n_objects
    objects = np.zeros((m, 5))
    velocity = np.zeros((m, 2))
    yaw, prompt, goal_z = np.zeros(m), 0.0, 0.0
    if spec.family in ("shell_push", "shell_pick"):
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
        if spec.family == "shell_pick":
            goal_z = CUP_HALF_HEIGHT + PICK_LIFT
        objects[4] = [*goal, goal_z, _LIME, _SPHERE]
        target, oracle = 1 + cup, np.array([cup], float)
    elif spec.family in ("intercept", "intercept_grab"):
        u = rng.uniform(size=6)
        x0 = (u[0] * 2 - 1) * 0.15 - 0.1
        y0 = u[1] * 0.25 - 1.0 + 0.1
        lo, hi = spec.velocity_range
        v = np.array([u[2] * 0.05, u[3] * (hi - lo) + lo])
        goal = np.array([x0 + 0.2, u[4] * 0.4 - 1.0 + 0.1 + 0.7])
        objects[0] = [x0, y0, BALL_RADIUS, _RED, _SPHERE]
        if spec.family == "intercept":
            objects[1] = [*goal, 0.0, _RED, _CYL]
        velocity[0] = v
        target, oracle = 0, v.copy()
    elif spec.family == "rotate":
        u, u_yaw, *xy = rng.uniform(size=4)
        if spec.angle_mode == "pos":
            prompt = 0.1 + u * (0.5 * np.pi - 0.1)
        else:  # one number draws sign and magnitude, as upstream
            prompt = (0.1 + u * (0.25 * np.pi - 0.1)) * (1.0 if u > 0.5 else -1.0)
        prompt = float(np.float16(prompt))
        yaw[0] = u_yaw * 2 * np.pi
        goal = np.array(xy) * 0.2 - 0.1  # the start, where RotateStrict keeps the peg
        objects[0] = [*goal, PEG_HALF_WIDTH, _BLUE, _CAPSULE]
        target, oracle = 0, np.array([prompt])
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
    return SpatialLayout(objects, velocity, goal, target, oracle, yaw, prompt, goal_z)


def spatial_obs_layout(spec: SpatialSpec, obs_mode: str) -> ObsLayout:
    """The :class:`iclr26.mikasa.semantics.ObsLayout` of ``spec`` (one slot per object)."""
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode must be one of {OBS_MODES}; got {obs_mode!r}")
    n = spec.n_objects
    start = HEADER + n * N_FEATURES
    ex = start + spec.fam.extra_dim
    oracle = spec.oracle_dim if obs_mode == "state" else 0
    return ObsLayout(
        dim=ex + oracle, tcp=slice(0, 3), vel=slice(3, 6), time=slice(6, 7),
        phase=slice(7, 10), objects=slice(HEADER, start), n_objects=n,
        oracle=slice(ex, ex + oracle), extra=slice(start, ex),
    )  # fmt: skip


def wrap_angle(a: np.ndarray) -> np.ndarray:
    """Angles wrapped to [-π, π) (as upstream's ``(a + π) % 2π − π``)."""
    return (np.asarray(a) + np.pi) % (2 * np.pi) - np.pi


class SpatialBatch:
    """Rules of a moving-object task for ``num_envs`` environments (numpy, batched).

    Object positions live in ``obj_pos`` (num_envs, M, 3), the planar velocities in ``obj_vel``
    and the yaws in ``obj_yaw``; the kinematic backend updates them with :meth:`push`, the MuJoCo
    backend writes the simulated poses into them before :meth:`advance`. Both call
    :meth:`update_grasp` (the grasp rule) between substeps.

    Observations: ``memory`` mode has one slot per object (visible bit, current xyz, colour and
    shape one-hots), zero while the object is hidden: ShellGamePush/Pick show the ball for t < 5
    and the cups after, never the goal; Intercept shows the ball and the goal region (no velocity);
    TakeItBack shows the cube and the current goal (red, then purple), never the initial region.
    An extra block follows the slots in both modes: the prompt and the peg's (cos, sin) yaw
    (Rotate), or the grasp flag (ShellGamePick, InterceptGrab). ``state`` mode shows every
    object's true pose and appends the oracle block: the cup one-hot (ShellGame), the initial and
    current ball velocity (Intercept*), the initial region xy and the goal-reached flag
    (TakeItBack), the remaining angle error, the initial (cos, sin) yaw and the start xy (Rotate).
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
        self.obj_yaw = np.zeros((n, m))
        self.yaw0 = np.zeros(n)
        self.prompt = np.zeros(n)
        self.goal = np.zeros((n, 2))
        self.goal_z = np.zeros(n)
        self.target = np.zeros(n, np.int64)
        self.oracle_info = np.zeros((n, spec.fam.info_dim))
        self.t = np.zeros(n, np.int64)
        self.success_once = np.zeros(n, bool)
        self.goal_reached = np.zeros(n, bool)  # TakeItBack
        self.reached = np.zeros(n, bool)  # Intercept's "reached the hitting pose" flag
        self.grasped = np.full(n, -1, np.int64)  # the held object, -1 for none
        self.grasp_offset = np.zeros((n, 3))
        # height of the gripper above each object's grasp window at the previous grasp check
        # (NaN at an episode start: the first check only records it)
        self.grasp_prev_dz = np.full((n, m), np.nan)
        self._ar = np.arange(n)
        self._movable = spec.movable
        self._graspable = spec.graspable
        self._radius = spec.radius + TCP_RADIUS
        self._top = spec.top
        self._grasp_z = spec.top + TCP_RADIUS
        self.phase_of_t = np.array([PHASES.index(spec.phase(t)) for t in range(spec.T + 1)])
        self._phase_eye = np.eye(3, dtype=np.float32)

    # --- episode setup ---------------------------------------------------------------------
    def set_layout(self, i: int, layout: SpatialLayout) -> None:
        """Start a new episode in environment ``i`` with ``layout``."""
        self.obj_feats[i] = object_features(layout.objects)
        self.obj_pos[i] = layout.objects[:, :3]
        self.obj_vel[i] = layout.velocity
        self.obj_yaw[i] = 0.0 if layout.yaw is None else layout.yaw
        self.yaw0[i] = self.obj_yaw[i, 0]
        self.prompt[i] = layout.prompt
        self.goal[i] = layout.goal
        self.goal_z[i] = layout.goal_z
        self.target[i] = layout.target
        self.oracle_info[i] = layout.oracle_info
        self.t[i] = 0
        self.success_once[i] = False
        self.goal_reached[i] = False
        self.reached[i] = False
        self.grasped[i] = -1
        self.grasp_prev_dz[i] = np.nan

    def set_layouts(self, idx: np.ndarray, layouts: list[SpatialLayout]) -> None:
        """Start new episodes in environments ``idx`` with ``layouts``."""
        for i, layout in zip(idx, layouts, strict=True):
            self.set_layout(int(i), layout)

    # --- visibility and observations --------------------------------------------------------
    def present(self) -> np.ndarray:
        """(num_envs, M) bool: objects physically on the table now (the cups leave in the cue)."""
        n, m = self.num_envs, self.spec.n_objects
        pres = np.ones((n, m), bool)
        if self.spec.cue_end:
            cue = self.t < self.spec.cue_end
            pres[:, 1:4] = ~cue[:, None]
            pres[:, 0] = cue
        return pres

    def visible(self) -> np.ndarray:
        """(num_envs, M) bool: objects a camera would see now (memory-mode slots)."""
        vis = self.present()
        fam = self.spec.family
        if fam in ("shell_push", "shell_pick"):
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
        feats[:, :, 0] = vis
        if self.obs_mode == "memory":
            feats *= vis[:, :, None]
        else:
            out[:, lay.oracle] = self.oracle_block()
        out[:, lay.objects] = feats.reshape(n, -1)
        if self.spec.family == "rotate":
            yaw = self.obj_yaw[:, 0]
            out[:, lay.extra] = np.stack([self.prompt, np.cos(yaw), np.sin(yaw)], -1)
        elif self.spec.grasping:
            out[:, lay.extra] = (self.grasped >= 0)[:, None]
        return out

    def angle_error(self) -> np.ndarray:
        """(num_envs,) Rotate: the rotation still to apply, wrap(prompt − wrap(yaw − yaw₀))."""
        rel = wrap_angle(self.obj_yaw[:, 0] - self.yaw0)
        return wrap_angle(self.prompt - rel)

    def oracle_block(self) -> np.ndarray:
        fam = self.spec.family
        if fam in ("shell_push", "shell_pick"):
            block = np.zeros((self.num_envs, 3))
            block[self._ar, self.oracle_info[:, 0].astype(int)] = 1.0
            return block
        if fam in ("intercept", "intercept_grab"):
            return np.concatenate([self.oracle_info, self.obj_vel[:, 0]], -1)
        if fam == "rotate":
            return np.stack(
                [self.angle_error(), np.cos(self.yaw0), np.sin(self.yaw0), *self.goal.T], -1
            )
        return np.concatenate([self.oracle_info[:, :2], self.goal_reached[:, None]], -1)

    # --- kinematic object motion ------------------------------------------------------------
    def push(self, tcp_old: np.ndarray, tcp_new: np.ndarray, dt: float) -> None:
        """Move the objects over one control step of the kinematic backend (see module doc)."""
        spec = self.spec
        free = self.present() & self._movable
        u = (tcp_new - tcp_old) / dt  # gripper velocity
        low = (tcp_new[:, 2] - TCP_RADIUS)[:, None] < self._top  # gripper below the tops
        for s in range(PUSH_SUBSTEPS):
            frac = (s + 1) / PUSH_SUBSTEPS
            tcp = tcp_old + frac * (tcp_new - tcp_old)
            if spec.rolling:
                self.obj_pos[:, :, :2] += self.obj_vel * (dt / PUSH_SUBSTEPS)
            if spec.grasping:
                free[self._ar, self.grasped] &= self.grasped < 0  # held objects are not pushed
            if spec.family == "rotate":
                self._push_peg(tcp[:, :2], low[:, 0])
            else:
                self._push_discs(tcp[:, :2], u[:, :2], free & low)
            if spec.grasping:
                self.update_grasp(tcp, u)
        if spec.rolling:
            xy = self.obj_pos[:, :, :2]
            out = np.abs(xy) > TABLE_EDGE
            self.obj_vel = np.where(out, 0.0, self.obj_vel)
            self.obj_pos[:, :, :2] = np.clip(xy, -TABLE_EDGE, TABLE_EDGE)

    def _push_discs(self, tcp: np.ndarray, u: np.ndarray, candidates: np.ndarray) -> None:
        diff = self.obj_pos[:, :, :2] - tcp[:, None, :]
        d = np.sqrt((diff**2).sum(-1))
        hit = candidates & (d < self._radius)
        if not hit.any():
            return
        safe = np.where(d > 1e-9, d, 1.0)
        normal = np.where((d > 1e-9)[..., None], diff / safe[..., None], [1.0, 0.0])
        moved = tcp[:, None, :] + normal * self._radius[:, None]
        self.obj_pos[:, :, :2] = np.where(hit[..., None], moved, self.obj_pos[:, :, :2])
        if self.spec.rolling:
            vn = (self.obj_vel * normal).sum(-1)
            un = (u[:, None, :] * normal).sum(-1)
            dv = np.where(hit, np.maximum(vn, un) - vn, 0.0)
            self.obj_vel += dv[..., None] * normal

    def _push_peg(self, tcp: np.ndarray, low: np.ndarray) -> None:
        """Quasi-static push of the Rotate peg (ellipsoidal limit surface, see module doc)."""
        c = self.obj_pos[:, 0, :2]
        yaw = self.obj_yaw[:, 0]
        axis = np.stack([np.cos(yaw), np.sin(yaw)], -1)
        w = tcp - c
        s = np.clip((w * axis).sum(-1), -PEG_SEGMENT, PEG_SEGMENT)
        r = s[:, None] * axis  # closest point on the axis, relative to the centre
        diff = w - r
        d = np.sqrt((diff**2).sum(-1))
        reach = self._radius[0]
        hit = low & (d < reach) & (d > 1e-9)
        if not hit.any():
            return
        n = diff / np.where(d > 1e-9, d, 1.0)[:, None]  # from the peg toward the gripper
        depth = np.where(hit, reach - d, 0.0)
        tau = -(r[:, 0] * n[:, 1] - r[:, 1] * n[:, 0])  # (r × (−n))_z
        force = depth / (1.0 + tau**2 / PEG_GYRATION2)
        self.obj_pos[:, 0, :2] = c - force[:, None] * n
        self.obj_yaw[:, 0] = yaw + force * tau / PEG_GYRATION2

    def update_grasp(self, tcp: np.ndarray, tcp_vel: np.ndarray) -> None:
        """The grasp rule: attach an object onto whose grasp point the gripper came down; move
        held ones.

        ``tcp`` (num_envs, 3) positions, ``tcp_vel`` (num_envs, 3) velocities of the gripper. An
        object is grasped when the gripper is inside its grasp window now (xy within
        ``GRASP_XY`` of its centre, height from ``-GRASP_BELOW`` to ``GRASP_ABOVE`` about the
        resting point on its top) and was above the window at the previous call.
        """
        free = self.grasped < 0
        if free.any():
            cand = self.present() & self._graspable & free[:, None]
            dxy = np.sqrt(((self.obj_pos[:, :, :2] - tcp[:, None, :2]) ** 2).sum(-1))
            dz = tcp[:, 2, None] - (self.obj_pos[:, :, 2] - self._top / 2 + self._grasp_z)
            came_down = self.grasp_prev_dz > GRASP_ABOVE  # NaN (episode start) -> False
            self.grasp_prev_dz = dz
            ok = cand & (dxy < GRASP_XY) & (dz >= -GRASP_BELOW) & (dz <= GRASP_ABOVE) & came_down
            rows = np.flatnonzero(ok.any(-1))
            if len(rows):
                j = ok[rows].argmax(-1)
                self.grasped[rows] = j
                self.grasp_offset[rows] = self.obj_pos[rows, j] - tcp[rows]
        held = np.flatnonzero(self.grasped >= 0)
        if len(held):
            j = self.grasped[held]
            self.obj_pos[held, j] = tcp[held] + self.grasp_offset[held]
            self.obj_vel[held, j] = tcp_vel[held, :2]

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
        held = self.grasped == self.target
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
        elif fam == "shell_pick":
            active = self.t >= spec.act_start
            d_goal = np.sqrt(d_goal**2 + (obj[:, 2] - self.goal_z) ** 2)
            placed = held & (d_goal <= spec.goal_radius)
            success = active & placed & static
            grasp_point = obj + np.array([0.0, 0.0, CUP_HALF_HEIGHT + TCP_RADIUS])
            reach = 1.0 - np.tanh(5.0 * np.sqrt(((grasp_point - tcp) ** 2).sum(-1)))
            place = 1.0 - np.tanh(5.0 * d_goal)
            dense = reach + held * (5.0 + 10.0 * place) + 5.0 * placed
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
        elif fam == "intercept_grab":
            success = held & static
            grasp_point = obj + np.array([0.0, 0.0, BALL_RADIUS + TCP_RADIUS])
            reach = 1.0 - np.tanh(5.0 * np.sqrt(((grasp_point - tcp) ** 2).sum(-1)))
            static_r = 1.0 - np.tanh(speed / self.static_speed)
            dense = 2.0 * reach + held * (10.0 + 5.0 * static_r)
            dense = np.where(success, spec.dense_max, dense)
            comps = {"reach": reach, "held": held.astype(float)}
        elif fam == "rotate":
            err = self.angle_error()
            self.oracle_info[:, 0] = err
            correct = np.abs(err) < spec.goal_radius
            drift = np.abs(obj[:, :2] - self.goal).max(-1)
            success = correct & static
            d_tcp = np.sqrt(((obj - tcp) ** 2).sum(-1))
            dense = np.exp(-5.0 * d_tcp) + 15.0 * (d_tcp < 0.1) * np.exp(-1.5 * np.abs(err))
            dense = dense + 5.0 * correct + 2.0 * (correct & static)
            if spec.strict:
                success &= drift <= ROTATE_DRIFT
                dense = dense + 10.0 * (1.0 - np.tanh(10.0 * drift))
            dense = np.where(success, spec.dense_max, dense)
            comps = {"angle_error": err, "drift": drift}
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
    speeds = (("Slow", (0.25, 0.5)), ("Medium", (0.5, 0.75)), ("Fast", (0.75, 1.0)))
    specs = [
        SpatialSpec("ShellGamePush", "shell_push", (obj,), T=90, goal_radius=0.05 * 1.6,
                    dense_max=4.0),
        SpatialSpec("ShellGamePick", "shell_pick", (obj,), T=90, goal_radius=0.08,
                    dense_max=75.0),
        *(
            SpatialSpec(f"Intercept{name}", "intercept", (spa,), T=90, goal_radius=0.1,
                        dense_max=30.0, velocity_range=vr)
            for name, vr in speeds
        ),
        *(
            SpatialSpec(f"InterceptGrab{name}", "intercept_grab", (spa,), T=90, goal_radius=0.0,
                        dense_max=300.0, velocity_range=vr)
            for name, vr in speeds
        ),
        SpatialSpec("TakeItBack", "take_it_back", (spa,), T=180, goal_radius=0.08,
                    dense_max=30.0),
        *(
            SpatialSpec(f"Rotate{kind}{sign}", "rotate", (obj,) if strict else (spa,), T=90,
                        goal_radius=0.1, dense_max=100.0 if strict else 25.0,
                        angle_mode=sign.lower(), strict=strict)
            for kind, strict in (("Lenient", False), ("Strict", True))
            for sign in ("Pos", "PosNeg")
        ),
    ]  # fmt: skip
    return {s.env_id: s for s in specs}


#: The moving-object tasks, by id.
SPATIAL_TASKS: dict[str, SpatialSpec] = _specs()
