"""The moving-object tasks: ShellGame{Push,Pick}, Intercept*, InterceptGrab*, TakeItBack, Rotate*."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import iclr26.mikasa as mk
from iclr26.mikasa.compat import MISSING, lite_id
from iclr26.mikasa.spatial import SPATIAL_TASKS, SpatialBatch, sample_spatial_layout
from iclr26.mikasa.taxonomy import MemoryType

IDS = list(SPATIAL_TASKS)
OFFICIAL_T = {
    "ShellGamePush": 90, "ShellGamePick": 90, "InterceptSlow": 90, "InterceptMedium": 90,
    "InterceptFast": 90, "InterceptGrabSlow": 90, "InterceptGrabMedium": 90,
    "InterceptGrabFast": 90, "TakeItBack": 180, "RotateLenientPos": 90,
    "RotateLenientPosNeg": 90, "RotateStrictPos": 90, "RotateStrictPosNeg": 90,
}  # fmt: skip


@pytest.mark.parametrize("env_id", IDS)
def test_registered_with_official_timeout_and_check_env(env_id):
    spec = SPATIAL_TASKS[env_id]
    assert env_id in mk.all_ids()
    assert gym.spec(env_id).max_episode_steps == OFFICIAL_T[spec.name] == spec.T
    assert lite_id(f"{spec.name}-v0") == env_id
    assert f"{spec.name}-v0" not in MISSING
    for backend in ("kinematic", "mujoco"):
        env = mk.make(env_id, backend=backend)
        check_env(env.unwrapped, skip_render_check=True)
        env.close()


def test_every_official_robo_id_is_mapped():
    assert MISSING == ()
    assert (
        len([k for k in mk.OFFICIAL_TO_LITE if not k.startswith(("T-Maze", "MemoryLength"))]) == 32
    )


def test_taxonomy_entries():
    for name in ("ShellGamePush", "ShellGamePick", "RotateStrictPos", "RotateStrictPosNeg"):
        assert mk.task_info(f"{name}-v0").memory_types == (MemoryType.OBJECT,)  # official labels
    assert mk.task_info("ShellGamePush-v0").chance_success == pytest.approx(1 / 3)
    assert mk.task_info("ShellGamePick-v0").chance_success == pytest.approx(1 / 3)
    for name in ("InterceptSlow", "InterceptMedium", "InterceptFast", "TakeItBack",
                 "InterceptGrabSlow", "InterceptGrabFast", "RotateLenientPos",
                 "RotateLenientPosNeg"):  # fmt: skip
        info = mk.task_info(f"{name}-v0")
        assert info.memory_types == (MemoryType.SPATIAL,)
        assert info.chance_success is None
        assert info.cue_steps == 0
    assert set(mk.list_tasks("spatial")) >= {f"MikasaLite/{n}-v0" for n in ("TakeItBack",)}


def test_official_constants():
    s = SPATIAL_TASKS
    assert s["MikasaLite/ShellGamePush-v0"].goal_radius == pytest.approx(0.08)
    assert s["MikasaLite/TakeItBack-v0"].goal_radius == 0.08
    vr = [s[f"MikasaLite/Intercept{n}-v0"].velocity_range for n in ("Slow", "Medium", "Fast")]
    assert vr == [(0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
    assert [x.dense_max for x in s.values()] == [
        4.0, 75.0, 30.0, 30.0, 30.0, 300.0, 300.0, 300.0, 30.0, 25.0, 25.0, 100.0, 100.0
    ]  # fmt: skip
    grab = [s[f"MikasaLite/InterceptGrab{n}-v0"].velocity_range for n in ("Slow", "Medium", "Fast")]
    assert grab == vr
    assert s["MikasaLite/RotateLenientPos-v0"].goal_radius == 0.1  # the angle tolerance (rad)


@pytest.mark.parametrize("env_id", IDS)
def test_seed_determinism_and_backend_agreement(env_id):
    k = mk.make(env_id, backend="kinematic")
    m = mk.make(env_id, backend="mujoco")
    a, _ = k.reset(seed=7)
    b, _ = k.reset(seed=7)
    c, _ = k.reset(seed=8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    k.reset(seed=11)
    ok, info_k = k.reset(seed=11)
    om, info_m = m.reset(seed=11)
    np.testing.assert_array_equal(ok, om)  # identical layout from the same seed
    np.testing.assert_array_equal(info_k["oracle_info"], info_m["oracle_info"])
    # no contact: the ball rolls and the objects rest identically on both backends
    for _ in range(30):
        ok, *_ = k.step(np.zeros(3, np.float32))
        om, *_ = m.step(np.zeros(3, np.float32))
    np.testing.assert_allclose(ok, om, atol=1e-4)
    m.close()


def test_layout_ranges_match_the_official_source():
    rng = np.random.default_rng(0)
    spec = SPATIAL_TASKS["MikasaLite/InterceptMedium-v0"]
    lays = [sample_spatial_layout(spec, rng) for _ in range(500)]
    v = np.array([lay.velocity[0] for lay in lays])
    assert v[:, 0].min() >= 0
    assert v[:, 0].max() <= 0.05
    assert v[:, 1].min() >= 0.5
    assert v[:, 1].max() <= 0.75
    dx = np.array([lay.goal[0] - lay.objects[0, 0] for lay in lays])
    np.testing.assert_allclose(dx, 0.2)
    tib = SPATIAL_TASKS["MikasaLite/TakeItBack-v0"]
    starts = np.array([sample_spatial_layout(tib, rng).oracle_info[:2] for _ in range(600)])
    strip = np.floor(starts[:, 1] / 0.1 + 1e-9).astype(int)
    assert set(strip) == {-1, 0, 1}
    assert np.all((starts[:, 1] - strip * 0.1 >= 0) & (starts[:, 1] - strip * 0.1 <= 0.05))
    cups = np.array([sample_spatial_layout(SPATIAL_TASKS[IDS[0]], rng).target for _ in range(900)])
    counts = np.bincount(cups - 1, minlength=3)
    assert ((counts - 300) ** 2 / 300).sum() < 13.8  # chi2(2) at p = 0.001


def _batch(env_id, reward_mode="normalized_dense"):
    spec = SPATIAL_TASKS[env_id]
    b = SpatialBatch(spec, 1, "memory", reward_mode)
    b.set_layout(0, sample_spatial_layout(spec, np.random.default_rng(0)))
    return b


def test_shell_push_success_threshold_gating_and_static():
    b = _batch("MikasaLite/ShellGamePush-v0")
    cup = b.target[0]
    still = np.zeros((1, 3))
    for dist, t0, vel, want in (
        (0.079, 5, still, True), (0.081, 5, still, False), (0.0, 3, still, False),
        (0.0, 5, np.array([[0.2, 0.0, 0.0]]), False),
    ):  # fmt: skip
        b.t[:] = t0 - 1
        b.obj_pos[0, cup, :2] = b.goal[0] + [dist, 0.0]
        r, s, _ = b.advance(np.array([[0.0, 0.0, 0.2]]), vel)
        assert bool(s[0]) is want, (dist, t0)
        assert 0.0 <= r[0] <= 1.0
        assert (r[0] == 1.0) == want


def test_intercept_success_threshold_and_dense_max():
    b = _batch("MikasaLite/InterceptSlow-v0", "dense")
    for dist, want in ((0.099, True), (0.101, False)):
        b.obj_pos[0, 0, :2] = b.goal[0] + [0.0, dist]
        r, s, _ = b.advance(np.array([[0.0, 0.0, 0.2]]), np.ones((1, 3)))  # no static needed
        assert bool(s[0]) is want
        assert (r[0] == 30.0) == want
        assert r[0] <= 30.0


def test_take_it_back_needs_the_goal_first():
    b = _batch("MikasaLite/TakeItBack-v0", "sparse")
    start = b.oracle_info[0, :2]
    tcp, vel = np.array([[0.0, 0.0, 0.2]]), np.zeros((1, 3))
    b.obj_pos[0, 0, :2] = start
    assert not b.advance(tcp, vel)[1][0]  # back at the start without reaching the goal
    b.obj_pos[0, 0, :2] = b.goal[0] + [0.07, 0.0]
    r, s, _ = b.advance(tcp, vel)
    assert not s[0]
    assert b.goal_reached[0]
    assert r[0] == 0.0
    vis = b.visible()[0]
    assert not vis[1]
    assert vis[2]
    assert not vis[3]
    b.obj_pos[0, 0, :2] = start + np.array([0.0, 0.079])
    assert b.advance(tcp, vel)[1][0]


def test_push_model_moves_discs_along_the_normal_and_stops_the_ball():
    b = _batch("MikasaLite/TakeItBack-v0")
    cube = b.obj_pos[0, 0].copy()
    old = np.array([[cube[0] - 0.05, cube[1], 0.02]])
    new = old + np.array([0.03, 0.0, 0.0])  # overlaps the disc by 0.01
    b.push(old, new, 0.04)
    np.testing.assert_allclose(b.obj_pos[0, 0, :2], [cube[0] + 0.01, cube[1]], atol=1e-12)
    bi = _batch("MikasaLite/InterceptFast-v0")
    ball = bi.obj_pos[0, 0].copy()
    bi.obj_vel[0, 0] = [0.0, 0.8]
    wall = np.array([[ball[0], ball[1] + 0.05, 0.02]])  # a static gripper straight ahead
    for _ in range(3):
        bi.push(wall, wall, 0.04)
    np.testing.assert_allclose(bi.obj_vel[0, 0], 0.0, atol=1e-12)
    assert bi.obj_pos[0, 0, 1] == pytest.approx(ball[1] + 0.05 - 0.03)


def _binomial_interval(p, n, z=2.576):
    half = z * math.sqrt(p * (1 - p) / n)
    return p - half - 1 / n, p + half + 1 / n


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_bounds_kinematic(env_id):
    spec = SPATIAL_TASKS[env_id]
    metric = spec.success_metric
    res = {k: mk.evaluate(env_id, mk.make_oracle(k, env_id), 100, seed=0) for k in
           ("memory", "memoryless", "state")}  # fmt: skip
    assert res["memory"][metric] >= 0.95
    assert res["state"][metric] >= 0.95
    blind = res["memoryless"][metric]
    if spec.chance_success is not None:  # ShellGamePush / Pick: a random cup
        lo, hi = _binomial_interval(spec.chance_success, 100)
        assert lo <= blind <= hi
    elif spec.family == "rotate":  # a fixed guess of the uniform initial yaw: about 0.2 / 2π
        assert blind <= 0.1
    else:  # Intercept, InterceptGrab, TakeItBack: the velocity-blind / start-blind oracle
        assert blind <= res["memory"][metric] - 0.3


@pytest.mark.parametrize(
    ("env_id", "n"),
    [
        ("ShellGamePush-v0", 2),
        ("ShellGamePick-v0", 2),
        ("RotateStrictPosNeg-v0", 2),
        ("InterceptGrabFast-v0", 2),
        pytest.param("InterceptFast-v0", 4, marks=pytest.mark.slow),
        pytest.param("TakeItBack-v0", 2, marks=pytest.mark.slow),
        pytest.param("RotateLenientPos-v0", 4, marks=pytest.mark.slow),
    ],
)
def test_memory_oracle_on_mujoco(env_id, n):
    metric = mk.get_spec(env_id).success_metric
    res = mk.evaluate(env_id, mk.make_oracle("memory", env_id), n, seed=0, backend="mujoco")
    assert res[metric] >= 0.75


def test_vector_autoreset_on_a_moving_task():
    vec = mk.make_vec("InterceptSlow-v0", 4, autoreset_mode="same_step")
    vec.reset(seed=0)
    for _ in range(89):
        vec.step(np.zeros((4, 3)))
    _obs, _r, term, trunc, info = vec.step(np.zeros((4, 3)))
    assert trunc.all()
    assert not term.any()
    assert info["_final_obs"].all()
    assert (info["elapsed_steps"] == 0).all()


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [
        ({"obs_mode": "pixels"}, ValueError),
        ({"reward_mode": "shaped"}, ValueError),
        ({"delta_time": 3}, ValueError),
    ],
)
def test_bad_arguments(kwargs, err):
    with pytest.raises(err):
        mk.make("TakeItBack-v0", backend="kinematic", **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ShellGamePush", "ShellGamePick"])
def test_shell_memory_mode_does_not_leak_the_cup(name):
    from sklearn.linear_model import LogisticRegression

    spec = SPATIAL_TASKS[f"MikasaLite/{name}-v0"]
    n = 400
    vec = mk.make_vec(f"{name}-v0", n)
    cue, info = vec.reset(seed=0)
    y = info["oracle_info"][:, 0].astype(int)
    for _ in range(spec.cue_end + 2):
        after, *_ = vec.step(np.zeros((n, 3)))
    for obs, lo, hi in ((cue, 0.9, 1.0), (after, 0.0, 1 / 3 + 0.1)):
        clf = LogisticRegression(C=100.0, max_iter=5000).fit(obs[:300], y[:300])
        acc = clf.score(obs[300:], y[300:])
        assert lo <= acc <= hi, acc


# --- Rotate -----------------------------------------------------------------------------------


def test_rotate_prompts_follow_the_official_draw():
    rng = np.random.default_rng(0)
    pos = [sample_spatial_layout(SPATIAL_TASKS["MikasaLite/RotateLenientPos-v0"], rng)
           for _ in range(2000)]  # fmt: skip
    neg = [sample_spatial_layout(SPATIAL_TASKS["MikasaLite/RotateStrictPosNeg-v0"], rng)
           for _ in range(2000)]  # fmt: skip
    p = np.array([lay.prompt for lay in pos])
    assert p.min() >= np.float16(0.1)
    assert p.max() <= np.float16(np.pi / 2)
    np.testing.assert_array_equal(p, p.astype(np.float16).astype(float))  # float16 as upstream
    q = np.array([lay.prompt for lay in neg])
    mid = (0.1 + np.pi / 4) / 2  # one uniform number draws sign and magnitude
    assert q[q > 0].min() >= mid - 1e-3
    assert q[q > 0].max() <= np.pi / 4 + 1e-3
    assert q[q < 0].min() >= -mid - 1e-3
    assert q[q < 0].max() <= -0.1 + 1e-3
    assert 0.45 < (q > 0).mean() < 0.55
    yaw = np.array([lay.yaw[0] for lay in pos])
    assert yaw.min() >= 0
    assert yaw.max() < 2 * np.pi
    xy = np.array([lay.objects[0, :2] for lay in pos])
    assert np.abs(xy).max() <= 0.1


@pytest.mark.parametrize("strict", [False, True])
def test_rotate_success_threshold_static_and_drift(strict):
    env_id = f"MikasaLite/Rotate{'Strict' if strict else 'Lenient'}PosNeg-v0"
    b = _batch(env_id)
    y0, goal = b.yaw0[0], b.prompt[0]
    tcp, still = np.array([[0.3, 0.3, 0.2]]), np.zeros((1, 3))
    start = b.obj_pos[0, 0, :2].copy()
    for dyaw, drift, vel, want in (
        (0.099, 0.0, still, True), (0.101, 0.0, still, False), (-0.099, 0.0, still, True),
        (0.0, 0.0, np.array([[0.2, 0.0, 0.0]]), False),
        (0.0, 0.049, still, True), (0.0, 0.051, still, not strict),
    ):  # fmt: skip
        b.obj_yaw[0, 0] = y0 + goal + dyaw + 2 * np.pi  # the relative angle is wrapped
        b.obj_pos[0, 0, :2] = start + np.array([0.0, drift])
        r, s, comps = b.advance(tcp, vel)
        assert bool(s[0]) is want, (dyaw, drift)
        assert (r[0] == 1.0) == want
        assert 0.0 <= r[0] <= 1.0
        assert comps["angle_error"][0] == pytest.approx(-dyaw, abs=1e-9)


def test_rotate_memory_observation_hides_the_initial_yaw():
    spec = SPATIAL_TASKS["MikasaLite/RotateLenientPos-v0"]
    obs = {}
    for mode in ("memory", "state"):
        b = SpatialBatch(spec, 2, mode)
        for i in range(2):
            b.set_layout(i, sample_spatial_layout(spec, np.random.default_rng(3)))
        b.yaw0[1] += 0.7  # another episode that started elsewhere, same pose now
        obs[mode] = b.observe(np.zeros((2, 3)), np.zeros((2, 3)))
    np.testing.assert_array_equal(obs["memory"][0], obs["memory"][1])
    assert not np.array_equal(obs["state"][0], obs["state"][1])


def test_peg_push_follows_the_limit_surface():
    from iclr26.mikasa.spatial import PEG_GYRATION2, PEG_HALF_WIDTH, TCP_RADIUS

    b = _batch("MikasaLite/RotateLenientPos-v0")
    reach = PEG_HALF_WIDTH + TCP_RADIUS
    for lever in (0.0, 0.06):
        b.obj_pos[0, 0, :2] = 0.0
        b.obj_yaw[0, 0] = 0.0  # the axis along x; push from below (−y) by depth 0.002
        tcp = np.array([[lever, -reach + 0.002, 0.02]])
        b.push(tcp, tcp, 0.04)
        dy, yaw = b.obj_pos[0, 0, 1], b.obj_yaw[0, 0]
        force = 0.002 / (1 + lever**2 / PEG_GYRATION2)
        if lever == 0.0:
            assert yaw == 0.0  # a push through the centre only translates
            assert dy == pytest.approx(0.002)
        else:
            # the first substep resolves the overlap to first order; the others, the remainder
            assert dy == pytest.approx(force, rel=0.01)
            assert yaw / dy == pytest.approx(lever / PEG_GYRATION2, rel=0.01)
            assert dy + yaw * lever == pytest.approx(0.002, rel=0.01)


# --- grasping (ShellGamePick, InterceptGrab) --------------------------------------------------


def test_grasp_rule_and_pick_success():
    b = _batch("MikasaLite/ShellGamePick-v0", "sparse")
    cup = b.target[0]
    top = b.obj_pos[0, cup].copy() + np.array(
        [0.0, 0.0, 0.05 + 0.01]
    )  # the gripper resting on the cup
    still = np.zeros((1, 3))
    b.update_grasp(top[None], still)
    assert b.grasped[0] == -1  # cups are out of the scene during the cue
    b.t[:] = 5
    b.update_grasp((top + np.array([0.021, 0.0, 0.0]))[None], still)
    assert b.grasped[0] == -1
    b.update_grasp((top + np.array([0.0, 0.0, 0.016]))[None], still)
    assert b.grasped[0] == -1
    b.update_grasp((top + np.array([0.019, 0.0, 0.01]))[None], still)
    assert b.grasped[0] == cup
    assert b.observe(top[None], still)[0, b.layout.extra][0] == 1.0  # the grasp flag
    goal = np.array([*b.goal[0], b.goal_z[0]])
    for dist, vel, want in ((0.079, still, True), (0.081, still, False),
                            (0.0, np.array([[0.2, 0.0, 0.0]]), False)):  # fmt: skip
        tcp = (goal + np.array([0.0, 0.0, dist]) - b.grasp_offset[0])[None]
        b.update_grasp(tcp, vel)  # the held cup follows the gripper
        np.testing.assert_allclose(b.obj_pos[0, cup], goal + np.array([0.0, 0.0, dist]))
        assert bool(b.advance(tcp, vel)[1][0]) is want
    b2 = _batch("MikasaLite/ShellGamePick-v0", "sparse")  # a wrong cup at the goal: no success
    b2.t[:] = 5
    wrong = 1 + (b2.target[0] % 3)
    b2.update_grasp((b2.obj_pos[0, wrong] + [0.0, 0.0, 0.09])[None], still)
    b2.update_grasp((b2.obj_pos[0, wrong] + [0.0, 0.0, 0.06])[None], still)
    assert b2.grasped[0] == wrong
    b2.obj_pos[0, b2.target[0]] = [*b2.goal[0], b2.goal_z[0]]
    assert not b2.advance(np.zeros((1, 3)), still)[1][0]


def test_intercept_grab_needs_the_ball_held_and_static():
    b = _batch("MikasaLite/InterceptGrabSlow-v0", "dense")
    ball = b.obj_pos[0, 0]
    above = (ball + np.array([0.0, 0.0, 0.03 + 0.005]))[None]
    r, s, _ = b.advance(above, np.zeros((1, 3)))
    assert not s[0]
    assert r[0] < 300.0
    b.update_grasp(above, np.zeros((1, 3)))
    assert b.grasped[0] == -1  # the first check of an episode only records the height
    b.update_grasp(above + np.array([[0.0, 0.0, 0.011]]), np.zeros((1, 3)))  # above the window
    assert b.grasped[0] == -1
    b.update_grasp(above, np.zeros((1, 3)))  # came down onto the ball
    assert b.grasped[0] == 0
    np.testing.assert_array_equal(b.obj_vel[0, 0], 0.0)  # held: it moves with the gripper
    assert not b.advance(above, np.array([[0.1, 0.0, 0.0]]))[1][0]
    r, s, _ = b.advance(above, np.zeros((1, 3)))
    assert s[0]
    assert r[0] == 300.0


def test_grasp_closes_only_on_a_gripper_coming_down():
    b = _batch("MikasaLite/InterceptGrabSlow-v0", "sparse")
    ball = b.obj_pos[0, 0].copy()
    still = np.zeros((1, 3))
    waiting = (ball + np.array([0.0, 0.1, 0.035]))[None]  # in the window height, on the path
    b.update_grasp(waiting + np.array([[0.0, 0.0, 0.05]]), still)  # above the window first
    b.update_grasp(waiting, still)  # down in the window, but the ball is 0.1 m away
    assert b.grasped[0] == -1
    for y in np.linspace(0.0, 0.2, 41):  # the ball rolls under the waiting gripper
        b.obj_pos[0, 0, :2] = ball[:2] + np.array([0.0, y])
        b.update_grasp(waiting, still)
        assert b.grasped[0] == -1
    b.obj_pos[0, 0, :2] = ball[:2] + np.array([0.0, 0.1 - 0.019])
    b.update_grasp(waiting + np.array([[0.0, 0.0, 0.016]]), still)  # lift above the window ...
    b.update_grasp(waiting, still)  # ... and drop onto the ball as it arrives
    assert b.grasped[0] == 0


class _WaitingGripper(mk.SpatialOracle):
    """The state oracle's catch point, but the gripper waits in the grasp window from step 1."""

    def _intercept_grab(self, obs, feats, t):
        action = super()._intercept_grab(obs, feats, t)
        self.drop_at[:] = -1
        return action


@pytest.mark.parametrize("backend", ["kinematic", "mujoco"])
def test_intercept_grab_needs_timing_on_both_backends(backend):
    env_id = "InterceptGrabMedium-v0"
    spec = mk.get_spec(env_id)
    n = 3 if backend == "mujoco" else 20
    waiting = mk.evaluate(env_id, _WaitingGripper(spec, "state"), n, seed=0, backend=backend)
    assert waiting["success_once"] == 0.0  # the ball rolls under a waiting gripper
    memory = mk.evaluate(env_id, mk.make_oracle("memory", env_id), n, seed=0, backend=backend)
    assert memory["success_at_end"] == 1.0  # dropping onto it on time catches it
