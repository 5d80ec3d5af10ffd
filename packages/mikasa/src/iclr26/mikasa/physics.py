"""The MuJoCo backend: a floating Cartesian gripper on a table, objects as mocap bodies.

The official tasks run a Franka Panda in ManiSkill3/SAPIEN, which cannot build a scene without a
Vulkan GPU. Here the gripper is a sphere (radius 0.01) on three slide joints driven by position
actuators (kp = 2500, kv = 100: critically damped for its 1 kg): an action sets the set-point to
the *current* position plus ``0.03 * action`` (like ManiSkill's ``pd_ee_delta_pos``), and 20
physics substeps of 2 ms make one 40 ms control step. The TCP collides with the table and the
objects. Objects are mocap bodies from per-shape pools; an object is shown by moving a body of
its shape to its position (and colouring it), hidden by moving the body under the table — the
official tasks teleport hidden objects away in the same way. The task rules are those of
:class:`iclr26.mikasa.semantics.TaskBatch`, shared with the kinematic backend.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import gymnasium as gym
import mujoco
import numpy as np

from iclr26.mikasa.data import COLORS, SHAPES
from iclr26.mikasa.kinematic import MAX_DELTA, check_action, check_seed, obs_space
from iclr26.mikasa.semantics import TaskBatch
from iclr26.mikasa.spatial import (
    PEG_GYRATION2,
    PEG_HALF_WIDTH,
    PEG_SEGMENT,
    PUSH_SUBSTEPS,
    TABLE_EDGE,
    SpatialBatch,
    SpatialSpec,
    sample_spatial_layout,
)
from iclr26.mikasa.tasks import (
    BALL_RADIUS,
    CUBE_HALF,
    CUP_HALF_HEIGHT,
    CUP_RADIUS,
    TCP_RADIUS,
    TCP_START,
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
    TaskSpec,
    sample_layout,
)

__all__ = [
    "MujocoEnv",
    "SpatialMujocoEnv",
    "build_model",
    "build_spatial_model",
    "make_mujoco_env",
    "shape_pools",
]

SUBSTEPS = 20
TIMESTEP = 0.002
KP, KV = 2500.0, 100.0
HIDDEN_Z = -0.5
GREY = (0.6, 0.6, 0.6)
BLUE_SHAPES = COLORS[2]

_MESHES = {
    "tetrahedron": "0.022 0 -0.02  -0.011 0.019 -0.02  -0.011 -0.019 -0.02  0 0 0.02",
    "octahedron": "0.022 0 0  -0.022 0 0  0 0.022 0  0 -0.022 0  0 0 0.02  0 0 -0.02",
    "prism": "0.022 0 -0.02  -0.011 0.019 -0.02  -0.011 -0.019 -0.02  "
    "0.022 0 0.02  -0.011 0.019 0.02  -0.011 -0.019 0.02",
}


def shape_pools(spec: TaskSpec) -> dict[int, int]:
    """Bodies needed per shape index: the most objects of that shape visible at once."""
    if spec.family == "shell_touch":
        return {SHAPES.index("sphere"): 1, SHAPES.index("cylinder"): 3}
    if spec.family == "remember" and spec.attribute == "shape":
        return dict.fromkeys(range(len(SHAPES)), 1)
    if spec.family == "remember" and spec.attribute == "shape_color":
        return dict.fromkeys(range(spec.n_shapes), spec.n_colors)
    return {0: spec.n_slots}


def _geom(shape: str) -> str:
    h = CUBE_HALF
    if shape == "cube":
        return f'type="box" size="{h} {h} {h}"'
    if shape == "sphere":
        return f'type="sphere" size="{BALL_RADIUS}"'
    if shape == "cylinder":
        return f'type="cylinder" size="{h} {h}"'
    if shape == "capsule":
        return f'type="capsule" size="{h * 0.6} {h * 0.4}"'
    if shape == "ellipsoid":
        return f'type="ellipsoid" size="{h} {h * 0.6} {h}"'
    if shape in _MESHES:
        return f'type="mesh" mesh="{shape}"'
    if shape == "cross":  # two crossed bars: one body, second geom added by the caller
        return f'type="box" size="{h} {h * 0.35} {h}"'
    raise ValueError(shape)


def build_model(spec: TaskSpec) -> tuple[mujoco.MjModel, dict[int, list[int]]]:
    """Compile the scene of ``spec``; returns the model and mocap ids per shape index."""
    pools = shape_pools(spec)
    bodies, ids, mocap = [], {}, 0
    for shape_idx, count in pools.items():
        name = SHAPES[shape_idx]
        ids[shape_idx] = []
        for _j in range(count):
            if spec.family == "shell_touch" and name == "cylinder":
                geom = f'type="cylinder" size="{CUP_RADIUS} {CUP_HALF_HEIGHT}"'
            else:
                geom = _geom(name)
            extra = ""
            if name == "cross":
                h = CUBE_HALF
                extra = f'<geom type="box" size="{h * 0.35} {h} {h}" rgba="1 1 1 1"/>'
            x = 0.5 + 0.1 * mocap
            bodies.append(
                f'<body name="obj{mocap}" mocap="true" pos="{x} 0 {HIDDEN_Z}">'
                f'<geom name="obj{mocap}" {geom} rgba="1 1 1 1"/>{extra}</body>'
            )
            ids[shape_idx].append(mocap)
            mocap += 1
    meshes = "".join(f'<mesh name="{k}" vertex="{v}"/>' for k, v in _MESHES.items())
    lo, hi = WORKSPACE_LOW, WORKSPACE_HIGH
    joints = "".join(
        f'<joint name="{ax}" type="slide" axis="{v}" range="{lo[i]} {hi[i]}" limited="true"/>'
        for i, (ax, v) in enumerate((("x", "1 0 0"), ("y", "0 1 0"), ("z", "0 0 1")))
    )
    start = " ".join(str(v) for v in TCP_START)
    actuators = "".join(
        f'<position joint="{ax}" kp="{KP}" kv="{KV}" ctrlrange="{lo[i]} {hi[i]}" ctrllimited="true"/>'
        for i, ax in enumerate("xyz")
    )
    xml = f"""
<mujoco model="mikasa_lite">
  <option timestep="{TIMESTEP}" gravity="0 0 -9.81"/>
  <asset>{meshes}</asset>
  <visual><global offwidth="256" offheight="256"/></visual>
  <worldbody>
    <light pos="0 0 1.5" dir="0 0 -1"/>
    <camera name="overhead" pos="0 -0.55 0.75" xyaxes="1 0 0 0 0.8 0.6"/>
    <geom name="table" type="box" pos="0 0 -0.02" size="0.4 0.4 0.02" rgba="0.8 0.7 0.55 1"/>
    <body name="tcp" pos="0 0 0" gravcomp="1">
      {joints}
      <inertial pos="0 0 0" mass="1" diaginertia="1e-3 1e-3 1e-3"/>
      <geom name="tcp" type="sphere" size="{TCP_RADIUS}" rgba="0.2 0.2 0.2 1"/>
      <camera name="gripper" pos="0 0 -0.012" xyaxes="1 0 0 0 1 0" fovy="90"/>
    </body>
    {"".join(bodies)}
  </worldbody>
  <actuator>{actuators}</actuator>
  <keyframe><key qpos="{start}" ctrl="{start}"/></keyframe>
</mujoco>"""
    return mujoco.MjModel.from_xml_string(xml), ids


def _check_env_args(obs_mode: str, render_mode: str | None, control_dt: float) -> None:
    """The constructor checks both MuJoCo environments share."""
    if obs_mode not in ("memory", "state", "rgb"):
        raise ValueError(f"obs_mode must be one of 'memory', 'state', 'rgb'; got {obs_mode!r}")
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"render_mode must be None or 'rgb_array'; got {render_mode!r}")
    if not control_dt > 0:
        raise ValueError(f"control_dt must be > 0, got {control_dt}")


class MujocoEnv(gym.Env):
    """One MIKASA-style task simulated in MuJoCo (see the module docstring).

    Args:
        spec: the task.
        obs_mode: ``memory`` (default), ``state`` or ``rgb`` (two 128×128 cameras, overhead and
            gripper, stacked to (128, 128, 6) uint8, plus ``proprio``; needs an OpenGL context,
            e.g. ``MUJOCO_GL=egl``).
        reward_mode: ``sparse``, ``dense`` or ``normalized_dense``.
        render_mode: ``None`` or ``"rgb_array"`` (overhead camera).
        control_dt: must equal 20 × 2 ms substeps (0.04 s); other values change the substeps.
        hold_until_act, terminate_on_success: as :class:`iclr26.mikasa.kinematic.KinematicVectorEnv`.
    """

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(
        self,
        spec: TaskSpec,
        *,
        obs_mode: str = "memory",
        reward_mode: str = "normalized_dense",
        render_mode: str | None = None,
        control_dt: float = 0.04,
        hold_until_act: bool = True,
        terminate_on_success: bool = False,
        image_size: int = 128,
    ) -> None:
        self.model, self._pools = build_model(spec)
        self._setup(spec, TaskBatch, obs_mode, reward_mode, render_mode, control_dt,
                    hold_until_act, terminate_on_success, image_size)  # fmt: skip
        self._frame = -1
        n_mocap = self.model.nmocap
        self._hidden_pos = np.stack(
            [0.5 + 0.1 * np.arange(n_mocap), np.zeros(n_mocap), np.full(n_mocap, HIDDEN_Z)], -1
        )
        self._body_geoms = []
        for k in range(n_mocap):
            bid = self.model.body(f"obj{k}").id
            adr = int(self.model.body_geomadr[bid])
            self._body_geoms.append((adr, adr + int(self.model.body_geomnum[bid])))

    def _setup(self, spec, batch_cls, obs_mode, reward_mode, render_mode, control_dt,
               hold_until_act, terminate_on_success, image_size) -> None:  # fmt: skip
        """What both MuJoCo environments set up once ``self.model`` exists."""
        _check_env_args(obs_mode, render_mode, control_dt)
        self.spec_task = spec
        self.obs_mode = obs_mode
        self.render_mode = render_mode
        self.data = mujoco.MjData(self.model)
        self.substeps = max(1, round(control_dt / TIMESTEP))
        self.hold_until_act = hold_until_act
        self.terminate_on_success = terminate_on_success
        self.batch = batch_cls(spec, 1, "memory" if obs_mode == "rgb" else obs_mode, reward_mode)
        self.image_size = image_size
        self._renderer: Any = None
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        if obs_mode == "rgb":
            self._renderer = self._make_renderer(image_size)
            self.observation_space = gym.spaces.Dict(
                {
                    "rgb": gym.spaces.Box(0, 255, (image_size, image_size, 6), np.uint8),
                    "proprio": obs_space(7),
                }
            )
        else:
            self.observation_space = obs_space(self.batch.layout.dim)
        self._layout = None
        self._done = True
        self._success = np.zeros(1, bool)
        self._phases = [spec.phase(t) for t in range(spec.T + 1)]
        self._act_start = spec.act_start
        self._lo, self._hi = WORKSPACE_LOW, WORKSPACE_HIGH

    def _set_target(self, action: Any) -> None:
        """Check ``action`` and move the set-point (ignored before the act phase if held)."""
        if self._done:
            raise gym.error.ResetNeeded("step() after the episode ended: call reset() first")
        a = check_action(action, (3,))
        if not (self.hold_until_act and self.batch.t[0] < self._act_start):
            target = np.minimum(np.maximum(self.data.qpos[:3] + MAX_DELTA * a, self._lo), self._hi)
            self.data.ctrl[:3] = target

    def _finish_step(self, reward: np.ndarray, success: np.ndarray):
        self._success = success
        t = int(self.batch.t[0])
        terminated = bool(success[0]) and self.terminate_on_success
        truncated = t >= self.spec_task.T and not terminated
        self._done = terminated or truncated
        return self._obs(), float(reward[0]), terminated, truncated, self._info()

    def _make_renderer(self, size: int):
        try:
            return mujoco.Renderer(self.model, size, size)
        except Exception as err:  # no OpenGL context on this machine
            backend = os.environ.get("MUJOCO_GL", "unset")
            raise RuntimeError(
                f"rgb rendering needs an OpenGL context (MUJOCO_GL={backend}): install EGL or "
                f"OSMesa and set MUJOCO_GL=egl or MUJOCO_GL=osmesa ({err})"
            ) from None

    # --- scene ------------------------------------------------------------------------------
    def _show_frame(self, frame: int) -> None:
        if frame == self._frame:
            return
        self._frame = frame
        lay = self._layout
        pos = self.data.mocap_pos
        pos[:] = self._hidden_pos
        used = dict.fromkeys(self._pools, 0)
        for obj in lay.frames[frame]:
            if obj < 0:
                continue
            x, y, z, colour, shape = lay.objects[obj]
            body = self._pools[int(shape)][used[int(shape)]]
            used[int(shape)] += 1
            pos[body] = (x, y, z)
            start, stop = self._body_geoms[body]
            self.model.geom_rgba[start:stop] = (
                *(COLORS[int(colour)] if colour >= 0 else GREY),
                1.0,
            )
        mujoco.mj_kinematics(self.model, self.data)  # moved bodies show at once (cameras)

    def _tcp(self) -> tuple[np.ndarray, np.ndarray]:
        return self.data.qpos[None, :3].copy(), self.data.qvel[None, :3].copy()

    def _obs(self):
        tcp, vel = self._tcp()
        obs = self.batch.observe(tcp, vel)[0]
        if self.obs_mode != "rgb":
            return obs
        images = []
        for cam in ("overhead", "gripper"):
            self._renderer.update_scene(self.data, camera=cam)
            images.append(self._renderer.render())
        return {"rgb": np.concatenate(images, -1), "proprio": obs[:7].copy()}

    # --- gymnasium API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_seed(seed)
        super().reset(seed=seed)
        rng = (
            np.random.default_rng(seed)
            if seed is not None
            else np.random.default_rng(self.np_random.integers(2**63))
        )
        self._layout = sample_layout(self.spec_task, rng)
        self.batch.set_layout(0, self._layout)
        mujoco.mj_resetDataKeyframe(self.model, self.data, 0)
        self._frame = -1
        self._show_frame(int(self.batch.frame_of_t[0]))
        mujoco.mj_forward(self.model, self.data)
        self._done = False
        self._success[:] = False
        return self._obs(), self._info()

    def _info(self) -> dict[str, Any]:
        b = self.batch
        t = int(b.t[0])
        return {
            "success": bool(self._success[0]),
            "success_once": bool(b.success_once[0]),
            "elapsed_steps": t,
            "phase": self._phases[t],
            "oracle_info": b.oracle_info[0].copy(),
        }

    def step(self, action):
        self._set_target(action)
        b = self.batch
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)
        reward, success, _ = b.advance(*self._tcp())
        self._show_frame(int(b.frame_of_t[int(b.t[0])]))
        return self._finish_step(reward, success)

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            self._renderer = self._make_renderer(self.image_size)
        self._renderer.update_scene(self.data, camera="overhead")
        return self._renderer.render()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


# --- the moving-object tasks (ShellGamePush, Intercept*, TakeItBack) ----------------------------

OBJ_DAMPING = 20.0  # N·s/m on the planar joints of pushed objects: they stop when released


def build_spatial_model(spec: SpatialSpec) -> tuple[mujoco.MjModel, list[int], list[int]]:
    """Compile the scene of a moving-object task.

    Movable objects (cups, the TakeItBack cube, the Intercept ball, the Rotate peg) sit on two
    planar slide joints (no tipping) and touch the gripper and each other through frictionless
    contacts, so a push moves them along the contact normal as in the kinematic model; pushed
    objects are damped (quasi-static sliding), the ball is not (it rolls at constant velocity and
    stops at |x|, |y| = 1). Graspable objects (ShellGamePick cups, the InterceptGrab ball) also
    have a vertical slide joint (gravity-compensated, limited to above the table), so a grasp can
    lift them. The peg is a capsule with a yaw hinge whose damping is the translational damping
    times c² = 0.12²/3, which gives the quasi-static push of the kinematic model's limit surface.
    Markers (goals, the ShellGame ball of the cue) are mocap bodies without collision. Returns
    the model, the joint qpos address of each object (-1 for mocap objects) and the mocap index
    of each object (-1 for movable ones).
    """
    movable, radius, graspable = spec.movable, spec.radius, spec.graspable
    layout = sample_spatial_layout(spec, np.random.default_rng(0))
    bodies, qadr, mocap_idx = [], [], []
    n_mocap = 0
    for j, (x, y, z, colour, shape) in enumerate(layout.objects):
        rgba = " ".join(str(v) for v in (*(COLORS[int(colour)] if colour >= 0 else GREY), 1.0))
        name = SHAPES[int(shape)]
        if movable[j]:
            if name == "cylinder":
                geom = f'type="cylinder" size="{CUP_RADIUS} {CUP_HALF_HEIGHT}" rgba="{rgba}"'
                geoms = f'<geom name="obj{j}" {geom} contype="1" conaffinity="1" condim="1"/>'
            elif name == "cube":
                h = CUBE_HALF
                geoms = (
                    f'<geom name="obj{j}" type="cylinder" size="{h} {h}" rgba="0 0 0 0" '
                    f'group="3" contype="1" conaffinity="1" condim="1"/>'
                    f'<geom type="box" size="{h} {h} {h}" rgba="{rgba}" contype="0" conaffinity="0"/>'
                )
            elif name == "capsule":  # the Rotate peg
                a = PEG_SEGMENT
                geoms = (
                    f'<geom name="obj{j}" type="capsule" fromto="{-a} 0 0 {a} 0 0" '
                    f'size="{PEG_HALF_WIDTH}" rgba="{rgba}" contype="1" conaffinity="1" '
                    f'condim="1"/><geom type="sphere" pos="{a} 0 0" size="{PEG_HALF_WIDTH * 1.05}" '
                    f'rgba="1 1 1 1" contype="0" conaffinity="0"/>'
                )
            else:
                geoms = (
                    f'<geom name="obj{j}" type="sphere" size="{radius[j]}" rgba="{rgba}" '
                    f'contype="1" conaffinity="1" condim="1"/>'
                )
            rolling = spec.rolling
            damp = 0.0 if rolling else OBJ_DAMPING
            rng = f'range="{-TABLE_EDGE} {TABLE_EDGE}" limited="true"' if rolling else ""
            extra_joints = ""
            if graspable[j]:
                extra_joints = (
                    f'<joint name="oz{j}" type="slide" axis="0 0 1" damping="{OBJ_DAMPING}" '
                    f'range="0 0.4" limited="true"/>'
                )
            if name == "capsule":
                extra_joints = (
                    f'<joint name="oyaw{j}" type="hinge" axis="0 0 1" '
                    f'damping="{OBJ_DAMPING * PEG_GYRATION2}"/>'
                )
            grav = ' gravcomp="1"' if graspable[j] else ""
            bodies.append(
                f'<body name="obj{j}" pos="0 0 {z}"{grav}>'
                f'<joint name="ox{j}" type="slide" axis="1 0 0" damping="{damp}" {rng}/>'
                f'<joint name="oy{j}" type="slide" axis="0 1 0" damping="{damp}" {rng}/>'
                f"{extra_joints}{geoms}</body>"
            )
            mocap_idx.append(-1)
        else:
            if name == "cylinder":  # a flat goal disc
                r = 0.1 if spec.family == "intercept" else spec.goal_radius
                geom = f'type="cylinder" size="{r} 0.001"'
            else:
                geom = f'type="sphere" size="{BALL_RADIUS}"'
            bodies.append(
                f'<body name="obj{j}" mocap="true" pos="{x} {y} {HIDDEN_Z}">'
                f'<geom {geom} rgba="{rgba}" contype="0" conaffinity="0"/></body>'
            )
            mocap_idx.append(n_mocap)
            n_mocap += 1
    lo, hi = WORKSPACE_LOW, WORKSPACE_HIGH
    joints = "".join(
        f'<joint name="{ax}" type="slide" axis="{v}" range="{lo[i]} {hi[i]}" limited="true"/>'
        for i, (ax, v) in enumerate((("x", "1 0 0"), ("y", "0 1 0"), ("z", "0 0 1")))
    )
    actuators = "".join(
        f'<position joint="{ax}" kp="{KP}" kv="{KV}" ctrlrange="{lo[i]} {hi[i]}" ctrllimited="true"/>'
        for i, ax in enumerate("xyz")
    )
    n_obj_dof = 2 * int(movable.sum()) + int((movable & graspable).sum())
    n_obj_dof += sum(SHAPES[int(o[4])] == "capsule" for o in layout.objects[movable])
    start = " ".join(str(v) for v in TCP_START)
    key_qpos = start + " 0" * n_obj_dof
    xml = f"""
<mujoco model="mikasa_lite_spatial">
  <option timestep="{TIMESTEP}" gravity="0 0 -9.81"/>
  <visual><global offwidth="256" offheight="256"/></visual>
  <worldbody>
    <light pos="0 0 1.5" dir="0 0 -1"/>
    <camera name="overhead" pos="0 -0.55 0.75" xyaxes="1 0 0 0 0.8 0.6"/>
    <geom name="table" type="box" pos="0 0 -0.02" size="1.0 1.0 0.02" rgba="0.8 0.7 0.55 1"
          contype="2" conaffinity="2"/>
    <body name="tcp" pos="0 0 0" gravcomp="1">
      {joints}
      <inertial pos="0 0 0" mass="1" diaginertia="1e-3 1e-3 1e-3"/>
      <geom name="tcp" type="sphere" size="{TCP_RADIUS}" rgba="0.2 0.2 0.2 1" contype="3"
            conaffinity="3" condim="1"/>
      <camera name="gripper" pos="0 0 -0.012" xyaxes="1 0 0 0 1 0" fovy="90"/>
    </body>
    {"".join(bodies)}
  </worldbody>
  <actuator>{actuators}</actuator>
  <keyframe><key qpos="{key_qpos}" ctrl="{start}"/></keyframe>
</mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    for j in range(spec.n_objects):
        qadr.append(int(model.jnt_qposadr[model.joint(f"ox{j}").id]) if movable[j] else -1)
    return model, qadr, mocap_idx


class SpatialMujocoEnv(MujocoEnv):
    """A moving-object task (ShellGamePush, Intercept*, TakeItBack) simulated in MuJoCo.

    Same arguments and API as :class:`MujocoEnv`; the rules are those of
    :class:`iclr26.mikasa.spatial.SpatialBatch`, fed with the simulated object poses.
    """

    def __init__(
        self,
        spec: SpatialSpec,
        *,
        obs_mode: str = "memory",
        reward_mode: str = "normalized_dense",
        render_mode: str | None = None,
        control_dt: float = 0.04,
        hold_until_act: bool = True,
        terminate_on_success: bool = False,
        image_size: int = 128,
    ) -> None:
        self.model, self._qadr, self._mocap = build_spatial_model(spec)
        self._setup(spec, SpatialBatch, obs_mode, reward_mode, render_mode, control_dt,
                    hold_until_act, terminate_on_success, image_size)  # fmt: skip
        self._movable = np.flatnonzero(spec.movable)
        self._qidx = np.array([self._qadr[j] for j in self._movable], int)
        self._present = np.ones(spec.n_objects, bool)
        self._dofadr = [
            int(self.model.jnt_dofadr[self.model.joint(f"ox{j}").id]) if q >= 0 else -1
            for j, q in enumerate(self._qadr)
        ]
        names = {self.model.joint(k).name for k in range(self.model.njnt)}
        self._has_z = [f"oz{j}" in names for j in range(spec.n_objects)]
        self._has_yaw = [f"oyaw{j}" in names for j in range(spec.n_objects)]
        self._base_z = self.model.body_pos[
            [self.model.body(f"obj{j}").id for j in range(spec.n_objects)], 2
        ].copy()
        self._chunks = np.diff(np.linspace(0, self.substeps, PUSH_SUBSTEPS + 1).round()).astype(int)

    def _write(self, j: int, present: bool = True) -> None:
        """Copy object ``j``'s pose and velocity from the rules into the simulation."""
        b, a, d = self.batch, self._qadr[j], self._dofadr[j]
        self.data.qpos[a : a + 2] = b.obj_pos[0, j, :2] if present else (3.0 + j, 3.0)
        self.data.qvel[d : d + 2] = b.obj_vel[0, j] if present else 0.0
        if self._has_z[j]:
            self.data.qpos[a + 2] = b.obj_pos[0, j, 2] - self._base_z[j]
            self.data.qvel[d + 2] = 0.0
        if self._has_yaw[j]:
            self.data.qpos[a + 2] = b.obj_yaw[0, j]
            self.data.qvel[d + 2] = 0.0

    def _place(self) -> None:
        """Put every object where the rules say it is (present) or out of the scene (hidden)."""
        b = self.batch
        present = b.present()[0]
        vis = b.visible()[0]
        for j in range(self.spec_task.n_objects):
            if self._qadr[j] >= 0:
                if present[j] != self._present[j] or not present[j]:
                    self._write(j, bool(present[j]))
            else:
                k = self._mocap[j]
                pos = b.obj_pos[0, j].copy()
                if not vis[j]:
                    pos[2] = HIDDEN_Z
                self.data.mocap_pos[k] = pos
        self._present = present
        mujoco.mj_forward(self.model, self.data)

    def _read_objects(self) -> None:
        b = self.batch
        present = b.present()[0]
        for j in self._movable:
            if present[j]:
                a = self._qadr[j]
                b.obj_pos[0, j, :2] = self.data.qpos[a : a + 2]
                d = self._dofadr[j]
                b.obj_vel[0, j] = self.data.qvel[d : d + 2]
                if self._has_z[j]:
                    b.obj_pos[0, j, 2] = self._base_z[j] + self.data.qpos[a + 2]
                if self._has_yaw[j]:
                    b.obj_yaw[0, j] = self.data.qpos[a + 2]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_seed(seed)
        gym.Env.reset(self, seed=seed)
        rng = (
            np.random.default_rng(seed)
            if seed is not None
            else np.random.default_rng(self.np_random.integers(2**63))
        )
        self._layout = sample_spatial_layout(self.spec_task, rng)
        self.batch.set_layout(0, self._layout)
        mujoco.mj_resetDataKeyframe(self.model, self.data, 0)
        self._present[:] = ~self.batch.present()[0]  # force placing every object
        self._place()
        self._done = False
        self._success[:] = False
        return self._obs(), self._info()

    def step(self, action):
        self._set_target(action)
        b = self.batch
        if self.spec_task.grasping:  # the grasp rule is checked between substep chunks
            for k in self._chunks:
                mujoco.mj_step(self.model, self.data, nstep=int(k))
                self._read_objects()
                b.update_grasp(*self._tcp())
                j = int(b.grasped[0])
                if j >= 0:  # the held object moves with the gripper
                    self._write(j)
                    d = self._dofadr[j]
                    self.data.qvel[d : d + 2] = self.data.qvel[:2]
                    if self._has_z[j]:
                        self.data.qvel[d + 2] = self.data.qvel[2]
        else:
            mujoco.mj_step(self.model, self.data, nstep=self.substeps)
        self._read_objects()
        reward, success, _ = b.advance(*self._tcp())
        self._place()
        return self._finish_step(reward, success)


def make_mujoco_env(spec: TaskSpec | SpatialSpec, **kwargs: Any) -> MujocoEnv:
    """The MuJoCo env of ``spec``: :class:`MujocoEnv` or :class:`SpatialMujocoEnv`."""
    if isinstance(spec, SpatialSpec):
        return SpatialMujocoEnv(spec, **kwargs)
    return MujocoEnv(spec, **kwargs)
