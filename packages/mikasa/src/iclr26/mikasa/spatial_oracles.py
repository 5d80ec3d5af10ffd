"""Scripted oracles for the moving-object tasks (ShellGame{Push,Pick}, Intercept*, InterceptGrab*,
TakeItBack, Rotate*).

All act on batches like :mod:`iclr26.mikasa.oracles` (``reset(num_envs)``, ``act(obs)``):

* **ShellGamePush**: the memory oracle stores the ball's position during the cue, picks the cup
  nearest to it and pushes that cup 0.1 m forward (+y) from where it stood; the cue-blind oracle
  picks a cup at random (chance 1/3); the state oracle reads the cup from ``oracle_info``.
* **Intercept**: the memory oracle estimates the ball's velocity from its first two positions
  and parks the gripper, still, where the ball will graze it so that the frictionless contact
  turns the ball toward the goal centre (a deflector); the velocity-blind oracle assumes the
  middle of the task's velocity range; the state oracle reads the velocity.
* **ShellGamePick**: the cup is chosen as for ShellGamePush; the oracle descends onto its top
  (which grasps it) and lifts it to the goal 0.1 m in front of and above its slot.
* **InterceptGrab**: the velocity is estimated (or assumed, or read) as for Intercept; the
  gripper hovers just above the grasp window over the ball's predicted path at the first point it can reach
  in time and drops onto the ball just as it arrives (the grasp closes only on a gripper coming
  down, see :mod:`iclr26.mikasa.spatial`). The arrival time comes from the velocity, so the
  velocity-blind oracle drops too early or too late.
* **Rotate**: the memory oracle stores the peg's initial yaw and centre at t = 0 and pushes one
  end of the peg sideways (a step sized by the limit-surface rotation rate) until the rotation
  since the start matches the prompt; it pushes the end that also moves the centre back toward
  its start (RotateStrict). The state oracle reads the remaining error and the start; the
  memoryless oracle, which cannot know the initial yaw, takes it to be 0 (any fixed guess is
  as good: the initial yaw is uniform), so it succeeds only when the peg started within the
  tolerance of that guess (about 0.2 / 2π ≈ 3 %).
* **TakeItBack**: the memory oracle stores the cube's first position (the hidden initial region),
  pushes the cube to the red goal and, once the goal has turned purple, back to the stored
  position; the memoryless oracle returns it to (0, -0.025), the best fixed point (the errata's
  63 % yardstick); the state oracle reads the initial region.

Pushing is a closed-loop rule: go over the object at a safe height to a point behind it (seen
from the goal), descend, and push along the line to the goal, correcting sideways drift.
"""

from __future__ import annotations

import numpy as np

from iclr26.mikasa.kinematic import MAX_DELTA, check_seed
from iclr26.mikasa.oracles import check_oracle_obs
from iclr26.mikasa.spatial import (
    PEG_GYRATION2,
    PEG_HALF_WIDTH,
    PICK_LIFT,
    SpatialSpec,
    spatial_obs_layout,
    wrap_angle,
)
from iclr26.mikasa.tasks import BALL_RADIUS, CUBE_HALF, CUP_HALF_HEIGHT, CUP_RADIUS, TCP_RADIUS

__all__ = [
    "SpatialOracle",
    "make_spatial_oracle",
    "plan_catch",
    "plan_deflector",
    "push_action",
    "rotate_action",
]

DT = 0.04
TIB_BLIND_RETURN = np.array([0.0, -0.025])
PEG_LEVER = 0.085  # where the Rotate oracle pushes the peg, from its centre along the axis
PEG_Z = PEG_HALF_WIDTH  # pushing height: the peg's axis
GRAB_Z = 2 * BALL_RADIUS + TCP_RADIUS + 0.005  # InterceptGrab: the height the gripper drops to
GRAB_HOVER = GRAB_Z + 0.015  # InterceptGrab: hover 0.005 m above the grasp window
# InterceptGrab: the drop from GRAB_HOVER enters the grasp window after the second of the four
# grasp checks of the control step on the kinematic backend and after the third on MuJoCo (its
# position actuators lag); aiming between them keeps a 1 m/s ball within 0.005 m of the aim
GRAB_ENTRY = 0.625
PICK_Z = 2 * CUP_HALF_HEIGHT + TCP_RADIUS + 0.005  # ShellGamePick: rest on the cup's top


def toward(tcp: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(N, 3) P-controller actions that move the TCP to ``target`` (clipped to [-1, 1])."""
    return np.clip((target - tcp) / MAX_DELTA, -1.0, 1.0)


def push_action(
    tcp: np.ndarray,
    obj: np.ndarray,
    goal: np.ndarray,
    radius: float,
    z_push: float,
    z_safe: float,
    active: np.ndarray,
    tol: float = 0.012,
) -> np.ndarray:
    """(N, 3) actions that push discs at ``obj`` (N, 2) toward ``goal`` (N, 2), batched.

    ``radius`` is the disc's contact radius plus the gripper's. Environments that are not
    ``active`` or whose object is within ``tol`` of its goal get a zero action (static).
    """
    d = goal - obj
    dist = np.linalg.norm(d, axis=-1)
    u = d / np.maximum(dist, 1e-9)[:, None]
    w = tcp[:, :2] - obj
    along = (w * u).sum(-1)
    lateral = w - along[:, None] * u
    lat = np.linalg.norm(lateral, axis=-1)
    low = tcp[:, 2] < z_push + 0.015
    behind = (along < -(radius - 0.006)) & (along > -(radius + 0.03)) & (lat < 0.012)
    pre = obj - u * (radius + 0.015)
    near_pre = np.linalg.norm(tcp[:, :2] - pre, axis=-1) < 0.01
    target = np.empty_like(tcp)
    # 1. aligned and low: push along the line, removing the lateral offset
    step = np.minimum(dist, 0.025)[:, None] * u - 0.5 * lateral
    target[:, :2] = np.where((behind & low)[:, None], tcp[:, :2] + step, pre)
    target[:, 2] = np.where(behind & low, z_push, np.where(near_pre, z_push, z_safe))
    # 2. low but not behind: rise first (never drag across the object)
    rise = low & ~behind & ~near_pre
    target[:, :2] = np.where(rise[:, None], tcp[:, :2], target[:, :2])
    target[:, 2] = np.where(rise, z_safe, target[:, 2])
    action = toward(tcp, target)
    stop = ~active | (dist < tol)
    return np.where(stop[:, None], 0.0, action)


def rotate_action(
    tcp: np.ndarray,
    centre: np.ndarray,
    yaw: np.ndarray,
    err: np.ndarray,
    end: np.ndarray,
    tol: float = 0.03,
) -> np.ndarray:
    """(N, 3) actions that turn the Rotate peg by ``err`` radians, pushing end ``end`` (±1).

    Pushing the end at lever s along the axis sideways by δ turns the peg by about
    δ s / (c² + s²) (the kinematic limit-surface model), so the push step is sized from the
    remaining error. Environments within ``tol`` get a zero action (static).
    """
    sigma = np.where(err >= 0, 1.0, -1.0)
    axis = np.stack([np.cos(yaw), np.sin(yaw)], -1)
    perp = np.stack([-axis[:, 1], axis[:, 0]], -1)
    d = (sigma * end)[:, None] * perp  # the push direction
    touch = centre + (end * PEG_LEVER)[:, None] * axis - d * (PEG_HALF_WIDTH + TCP_RADIUS)
    pre = touch - 0.02 * d
    rate = PEG_LEVER / (PEG_GYRATION2 + PEG_LEVER**2)
    step = np.minimum(np.abs(err) / rate, MAX_DELTA)
    w = tcp[:, :2] - touch
    along = (w * d).sum(-1)
    lateral = np.linalg.norm(w - along[:, None] * d, axis=-1)
    low = tcp[:, 2] < PEG_Z + 0.012
    engaged = low & (lateral < 0.012) & (along > -0.025) & (along < 0.015)
    near_pre = np.linalg.norm(tcp[:, :2] - pre, axis=-1) < 0.008
    target = np.empty_like(tcp)
    target[:, :2] = np.where(engaged[:, None], touch + step[:, None] * d, pre)
    target[:, 2] = np.where(engaged | near_pre, PEG_Z, 0.08)
    rise = low & ~engaged & ~near_pre
    target[:, :2] = np.where(rise[:, None], tcp[:, :2], target[:, :2])
    target[:, 2] = np.where(rise, 0.08, target[:, 2])
    return np.where((np.abs(err) < tol)[:, None], 0.0, toward(tcp, target))


def plan_catch(pos: np.ndarray, vel: np.ndarray, tcp: np.ndarray) -> tuple[np.ndarray, float]:
    """Where to drop onto a ball at ``pos`` rolling at ``vel``, and when.

    Returns ``(xy, steps)``: the point of the ball's path (y from -0.3 on) that the gripper
    reaches first, at 0.75 m/s per axis plus two steps of margin, before the ball, moved along
    the path so that the ball is there exactly ``GRAB_ENTRY`` of a step after the start of the
    drop; ``steps`` (an integer, counted from now) is when to start the drop.
    """
    for y_c in np.arange(-0.30, 0.31, 0.02):
        if vel[1] <= 1e-6:
            break
        tau = (y_c - pos[1]) / vel[1]
        x_c = pos[0] + vel[0] * tau
        if tau <= 0 or abs(x_c) > 0.34:
            continue
        need = max(abs(x_c - tcp[0]), abs(y_c - tcp[1]), abs(GRAB_HOVER - tcp[2])) / MAX_DELTA
        if (need + 2) * DT < tau:
            drop = float(np.ceil(tau / DT - GRAB_ENTRY))  # the drop's step, from now
            return pos + vel * (drop + GRAB_ENTRY) * DT, drop
    return np.array([pos[0], 0.3]), np.inf


def plan_deflector(
    pos: np.ndarray, vel: np.ndarray, goal: np.ndarray, tcp: np.ndarray, steps_left: int = 0
) -> np.ndarray:
    """Where to park the gripper (x, y) so a ball at ``pos`` rolling at ``vel`` is turned to ``goal``.

    The ball keeps the velocity component tangent to a frictionless contact, so touching it with
    contact normal n ⟂ (goal − c) at the contact point c sends it straight at the goal. The
    latest contact point that the gripper (0.75 m/s at most, plus two steps to descend) reaches
    before the ball is chosen, at most 0.25 m before the goal in y.
    """
    R = BALL_RADIUS + TCP_RADIUS
    speed = max(float(np.linalg.norm(vel)), 1e-6)
    v_hat = vel / speed
    best = None
    for lead in np.arange(0.25, 0.02, -0.01):
        y_c = goal[1] - lead
        if vel[1] <= 1e-6:
            break
        tau = (y_c - pos[1]) / vel[1]
        if tau <= 0:
            continue
        c = pos + vel * tau
        d = goal - c
        d /= max(np.linalg.norm(d), 1e-9)
        n = np.array([-d[1], d[0]])
        if (n * v_hat).sum() > 0:
            n = -n
        park = c - R * n
        if park[1] < -0.34 or abs(park[0]) > 0.34:
            continue
        travel = np.linalg.norm(park - tcp[:2]) + abs(tcp[2] - 0.08)
        need = travel / MAX_DELTA + 3
        if need * DT < tau:
            return park
        if best is None:
            best = park
    return best if best is not None else goal - np.array([0.0, 0.05])


class SpatialOracle:
    """Oracle for a moving-object task.

    Args:
        env: the task's ``SpatialSpec`` (or an env / id resolved by :func:`make_oracle`).
        kind: ``memory``, ``memoryless`` or ``state``.
        seed: seed of the memoryless oracle's random cup (ShellGamePush).
    """

    def __init__(self, spec: SpatialSpec, kind: str = "memory", seed: int | None = 0) -> None:
        if kind not in ("memory", "memoryless", "state"):
            raise ValueError(f"kind must be 'memory', 'memoryless' or 'state'; got {kind!r}")
        self.spec = spec
        self.kind = kind
        self.obs_mode = "state" if kind == "state" else "memory"
        self.layout = spatial_obs_layout(spec, self.obs_mode)
        self.rng = np.random.default_rng(check_seed(seed))
        self.num_envs = 0

    def reset(self, num_envs: int) -> None:
        """Forget everything; the next ``act`` starts ``num_envs`` new episodes."""
        n = self.num_envs = int(num_envs)
        self.mem_xy = np.zeros((n, 2))  # ball (cue) / cube start
        self.prev_xy = np.full((n, 2), np.nan)
        self.cup = np.full(n, -1, np.int64)
        self.goal = np.zeros((n, 2))
        self.park = np.full((n, 2), np.nan)
        self.drop_at = np.full(n, np.inf)  # InterceptGrab: the step at which to drop
        self.t = np.zeros(n, np.int64)
        self.yaw0 = np.zeros(n)
        self.end = np.ones(n)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions (num_envs, 3) for observations (num_envs, dim)."""
        obs = check_oracle_obs(self, obs)
        t = np.rint(obs[:, 6] * self.spec.T).astype(np.int64)
        new = t == 0
        if new.any():  # an episode (re)started in these envs
            self.cup[new] = -1
            self.park[new] = np.nan
            self.drop_at[new] = np.inf
            self.prev_xy[new] = np.nan
            self.end[new] = 1.0
        feats = self.layout.split_objects(obs)
        return getattr(self, f"_{self.spec.family}")(obs, feats, t)

    def _velocity(self, obs, ball, i):
        """Ball velocity of env ``i``: read (state), assumed (memoryless) or estimated (memory)."""
        lo, hi = self.spec.velocity_range
        if self.kind == "state":
            return obs[i, self.layout.oracle][2:4]
        if self.kind == "memoryless":
            return np.array([0.025, (lo + hi) / 2])
        if np.isnan(self.prev_xy[i, 0]):
            return None  # one more position needed
        return (ball[i] - self.prev_xy[i]) / DT

    # --- ShellGamePush / ShellGamePick --------------------------------------------------------
    def _choose_cup(self, obs, feats, t) -> np.ndarray:
        """Remember the ball (cue), commit to a cup at the first act step; True while acting."""
        cue = t < self.spec.cue_end
        if self.kind == "memory" and cue.any():
            self.mem_xy[cue] = feats[cue, 0, 1:3]
        first = ~cue & (self.cup < 0)
        if first.any():
            cups = feats[:, 1:4, 1:3]
            if self.kind == "memory":
                choice = np.linalg.norm(cups - self.mem_xy[:, None], axis=-1).argmin(-1)
            elif self.kind == "state":
                choice = obs[:, self.layout.oracle].argmax(-1)
            else:
                choice = self.rng.integers(3, size=len(obs))
            rows = np.flatnonzero(first)
            self.cup[rows] = choice[rows]
            self.goal[rows] = cups[rows, choice[rows]] + np.array([0.0, 0.1])
        return ~cue & (self.cup >= 0)

    def _shell_push(self, obs, feats, t):
        active = self._choose_cup(obs, feats, t)
        obj = feats[np.arange(len(obs)), 1 + np.maximum(self.cup, 0), 1:3]
        return push_action(obs[:, :3], obj, self.goal, CUP_RADIUS + TCP_RADIUS, 0.03, 0.14, active)

    def _shell_pick(self, obs, feats, t):
        tcp = obs[:, :3]
        active = self._choose_cup(obs, feats, t)
        cup = feats[np.arange(len(obs)), 1 + np.maximum(self.cup, 0), 1:4]
        held = obs[:, self.layout.extra][:, 0] > 0.5
        over = np.linalg.norm(tcp[:, :2] - cup[:, :2], axis=-1) < 0.006
        target = np.empty_like(tcp)
        target[:, :2] = cup[:, :2]
        target[:, 2] = np.where(over, PICK_Z, PICK_Z + 0.05)
        goal = np.concatenate([self.goal, np.full((len(obs), 1), CUP_HALF_HEIGHT + PICK_LIFT)], -1)
        carry = tcp + goal - cup
        target = np.where(held[:, None], carry, target)
        done = held & (np.linalg.norm(goal - cup, axis=-1) < 0.005)
        return np.where((active & ~done)[:, None], toward(tcp, target), 0.0)

    # --- Intercept ----------------------------------------------------------------------------
    def _intercept(self, obs, feats, t):
        tcp = obs[:, :3]
        ball, goal = feats[:, 0, 1:3], feats[:, 1, 1:3]
        for i in np.flatnonzero(np.isnan(self.park[:, 0])):
            vel = self._velocity(obs, ball, i)
            if vel is not None:
                self.park[i] = plan_deflector(ball[i], vel, goal[i], tcp[i])
        self.prev_xy = ball.copy()
        planned = ~np.isnan(self.park[:, 0])
        target = np.empty_like(tcp)
        park = np.where(planned[:, None], self.park, tcp[:, :2])
        target[:, :2] = park
        far = np.linalg.norm(park - tcp[:, :2], axis=-1) > 0.008
        target[:, 2] = np.where(far, 0.08, BALL_RADIUS)
        return np.where(planned[:, None], toward(tcp, target), 0.0)

    # --- InterceptGrab ------------------------------------------------------------------------
    def _intercept_grab(self, obs, feats, t):
        tcp = obs[:, :3]
        ball = feats[:, 0, 1:3]
        for i in np.flatnonzero(np.isnan(self.park[:, 0])):
            vel = self._velocity(obs, ball, i)
            if vel is not None:
                self.park[i], steps = plan_catch(ball[i], vel, tcp[i])
                self.drop_at[i] = t[i] + steps
        self.prev_xy = ball.copy()
        planned = ~np.isnan(self.park[:, 0])
        held = obs[:, self.layout.extra][:, 0] > 0.5
        z = np.where(t >= self.drop_at, GRAB_Z, GRAB_HOVER)
        target = np.concatenate([self.park, z[:, None]], -1)
        return np.where((planned & ~held)[:, None], toward(tcp, np.nan_to_num(target)), 0.0)

    # --- Rotate -------------------------------------------------------------------------------
    def _rotate(self, obs, feats, t):
        extra = obs[:, self.layout.extra]
        prompt, yaw = extra[:, 0], np.arctan2(extra[:, 2], extra[:, 1])
        centre = feats[:, 0, 1:3]
        start = t == 0
        if self.kind == "state":
            oracle = obs[:, self.layout.oracle]
            err, home = oracle[:, 0], oracle[:, 3:5]
        else:
            if self.kind == "memory":
                self.yaw0[start] = yaw[start]
                self.mem_xy[start] = centre[start]
            else:  # no memory of the start: a fixed guess of the initial yaw and centre
                self.yaw0[:] = 0.0
                self.mem_xy[:] = centre
            err = wrap_angle(prompt - wrap_angle(yaw - self.yaw0))
            home = self.mem_xy
        # push the end whose push also moves the centre back toward its start (hysteresis 1 cm)
        sigma = np.where(err >= 0, 1.0, -1.0)
        drift = ((centre - home) * np.stack([-np.sin(yaw), np.cos(yaw)], -1)).sum(-1)
        self.end = np.where(np.abs(drift) > 0.01, -np.sign(sigma * drift), self.end)
        return rotate_action(obs[:, :3], centre, yaw, err, self.end)

    # --- TakeItBack ---------------------------------------------------------------------------
    def _take_it_back(self, obs, feats, t):
        tcp = obs[:, :3]
        cube = feats[:, 0, 1:3]
        start = t == 0
        if self.kind == "memory":
            self.mem_xy[start] = cube[start]
            back = self.mem_xy
        elif self.kind == "state":
            back = obs[:, self.layout.oracle][:, :2]
        else:
            back = np.broadcast_to(TIB_BLIND_RETURN, cube.shape)
        if self.kind == "state":
            reached = obs[:, self.layout.oracle][:, 2] > 0.5
            goal_xy = feats[:, 1, 1:3]
        else:
            reached = feats[:, 2, 0] > 0.5  # the purple goal is shown once the goal was reached
            goal_xy = np.where(reached[:, None], feats[:, 2, 1:3], feats[:, 1, 1:3])
        # aim a little past the goal centre so the cube enters the 0.08 region firmly
        target = np.where(reached[:, None], back, goal_xy)
        return push_action(
            tcp, cube, target, CUBE_HALF + TCP_RADIUS, CUBE_HALF, 0.08,
            np.ones(len(obs), bool),
        )  # fmt: skip


def make_spatial_oracle(kind: str, spec: SpatialSpec, seed: int | None = 0) -> SpatialOracle:
    """The ``memory`` / ``memoryless`` / ``state`` oracle of a moving-object task."""
    return SpatialOracle(spec, kind, seed)
