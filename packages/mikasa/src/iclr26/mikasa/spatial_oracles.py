"""Scripted oracles for the moving-object tasks (ShellGamePush, Intercept*, TakeItBack).

All act on batches like :mod:`iclr26.mikasa.oracles` (``reset(num_envs)``, ``act(obs)``):

* **ShellGamePush**: the memory oracle stores the ball's position during the cue, picks the cup
  nearest to it and pushes that cup 0.1 m forward (+y) from where it stood; the cue-blind oracle
  picks a cup at random (chance 1/3); the state oracle reads the cup from ``oracle_info``.
* **Intercept**: the memory oracle estimates the ball's velocity from its first two positions
  and parks the gripper, still, where the ball will graze it so that the frictionless contact
  turns the ball toward the goal centre (a deflector); the velocity-blind oracle assumes the
  middle of the task's velocity range; the state oracle reads the velocity.
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
from iclr26.mikasa.spatial import SpatialSpec, spatial_obs_layout
from iclr26.mikasa.tasks import BALL_RADIUS, CUBE_HALF, CUP_RADIUS, TCP_RADIUS

__all__ = ["SpatialOracle", "make_spatial_oracle", "plan_deflector", "push_action"]

DT = 0.04
TIB_BLIND_RETURN = np.array([0.0, -0.025])


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
    action = np.clip((target - tcp) / MAX_DELTA, -1.0, 1.0)
    stop = ~active | (dist < tol)
    return np.where(stop[:, None], 0.0, action)


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
        self.t = np.zeros(n, np.int64)

    def _check(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64)
        if obs.ndim == 1:
            obs = obs[None]
        if obs.ndim != 2 or obs.shape[1] != self.layout.dim:
            raise ValueError(
                f"obs must have shape (num_envs, {self.layout.dim}) for {self.spec.env_id} in "
                f"{self.obs_mode} mode, got {obs.shape}"
            )
        if self.num_envs != len(obs):
            self.reset(len(obs))
        return obs

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions (num_envs, 3) for observations (num_envs, dim)."""
        obs = self._check(obs)
        t = np.rint(obs[:, 6] * self.spec.T).astype(np.int64)
        new = t == 0
        if new.any():  # an episode (re)started in these envs
            self.cup[new] = -1
            self.park[new] = np.nan
            self.prev_xy[new] = np.nan
        feats = self.layout.split_objects(obs)
        fam = self.spec.family
        if fam == "shell_push":
            return self._shell_push(obs, feats, t)
        if fam == "intercept":
            return self._intercept(obs, feats, t)
        return self._take_it_back(obs, feats, t)

    # --- ShellGamePush ------------------------------------------------------------------------
    def _shell_push(self, obs, feats, t):
        tcp = obs[:, :3]
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
        ar = np.arange(len(obs))
        obj = feats[ar, 1 + np.maximum(self.cup, 0), 1:3]
        return push_action(
            tcp, obj, self.goal, CUP_RADIUS + TCP_RADIUS, 0.03, 0.14, ~cue & (self.cup >= 0)
        )

    # --- Intercept ----------------------------------------------------------------------------
    def _intercept(self, obs, feats, t):
        tcp = obs[:, :3]
        ball, goal = feats[:, 0, 1:3], feats[:, 1, 1:3]
        lo, hi = self.spec.velocity_range
        for i in np.flatnonzero(np.isnan(self.park[:, 0])):
            if self.kind == "state":
                vel = obs[i, self.layout.oracle][2:4]
            elif self.kind == "memoryless":
                vel = np.array([0.025, (lo + hi) / 2])
            elif np.isnan(self.prev_xy[i, 0]):
                continue  # one more position needed
            else:
                vel = (ball[i] - self.prev_xy[i]) / DT
            self.park[i] = plan_deflector(ball[i], vel, goal[i], tcp[i])
        self.prev_xy = ball.copy()
        planned = ~np.isnan(self.park[:, 0])
        target = np.empty_like(tcp)
        park = np.where(planned[:, None], self.park, tcp[:, :2])
        target[:, :2] = park
        far = np.linalg.norm(park - tcp[:, :2], axis=-1) > 0.008
        target[:, 2] = np.where(far, 0.08, BALL_RADIUS)
        action = np.clip((target - tcp) / MAX_DELTA, -1.0, 1.0)
        return np.where(planned[:, None], action, 0.0)

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
