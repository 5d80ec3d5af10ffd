"""Success, timing and reward semantics with hand-placed gripper states (spec tests 6-8)."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26.mikasa import make
from iclr26.mikasa.semantics import TaskBatch
from iclr26.mikasa.tasks import TASKS, get_spec, sample_layout


def _batch(name, reward_mode="normalized_dense", seed=0, n=1):
    spec = get_spec(name)
    b = TaskBatch(spec, n, "memory", reward_mode)
    lay = sample_layout(spec, np.random.default_rng(seed))
    for i in range(n):
        b.set_layout(i, lay)
    return spec, b, lay


def _touch_point(b, cand):
    return b.touch_points[0, cand] + np.array([0, 0, 0.005])


def _step_at(b, t, tcp, speed=0.0):
    b.t[:] = t - 1
    vel = np.array([[speed, 0.0, 0.0]])
    return b.advance(np.asarray(tcp, float)[None], vel)


def test_shellgame_success_needs_right_cup_static_and_act_phase():
    _spec, b, lay = _batch("ShellGameTouch-v0")
    target = lay.targets[0]
    wrong = (target + 1) % 3
    above = _touch_point(b, target) + np.array(
        [0, 0, 0.055]
    )  # resting on top of the cup: 0.06 < 0.08
    assert _step_at(b, 5, above)[1][0]
    assert not _step_at(b, 3, above)[1][0]  # before the act phase: gated
    assert not _step_at(b, 6, _touch_point(b, wrong) + np.array([0, 0, 0.055]))[1][0]
    assert not _step_at(b, 6, above, speed=0.06)[1][0]  # moving faster than 0.05 m/s
    assert _step_at(b, 6, above, speed=0.049)[1][0]
    assert not _step_at(b, 6, _touch_point(b, target) + np.array([0, 0, 0.085]))[1][
        0
    ]  # 0.085 > 0.08


@pytest.mark.parametrize("mode", ["sparse", "dense", "normalized_dense"])
def test_reward_modes(mode):
    spec, b, lay = _batch("RememberColor3-v0", mode)
    tgt = _touch_point(b, lay.targets[0])
    r_far, s_far, _ = _step_at(b, 20, tgt + np.array([0.2, 0, 0.1]))
    r_hit, s_hit, _ = _step_at(b, 20, tgt)
    r_pre, _, _ = _step_at(b, 5, tgt)
    assert not s_far[0]
    assert s_hit[0]
    assert r_pre[0] == 0.0
    if mode == "sparse":
        assert (r_far[0], r_hit[0]) == (0.0, 1.0)
    elif mode == "dense":
        assert r_hit[0] == spec.dense_max == 3.0
        assert 0 < r_far[0] < 3.0
    else:
        assert r_hit[0] == 1.0
        assert 0 < r_far[0] < 1.0


def _touch_sequence(name, order, seed=0):
    spec, b, lay = _batch(name, "dense", seed)
    t = spec.act_start
    hist = []
    for cand in order:
        t += 1
        r, s, _ = _step_at(b, t, _touch_point(b, cand))
        hist.append((float(r[0]), bool(s[0])))
    return spec, lay, hist


def test_chain_needs_the_shown_order_seq_does_not():
    _spec, lay, _ = _touch_sequence("SeqOfColors3-v0", [])
    rev = list(lay.targets[::-1])
    _, _, seq = _touch_sequence("SeqOfColors3-v0", rev)
    _, lay_c, chain = _touch_sequence(
        "ChainOfColors3-v0",
        list(sample_layout(get_spec("ChainOfColors3-v0"), np.random.default_rng(0)).targets[::-1]),
    )
    assert seq[-1][1]  # right set, any order
    assert not chain[-1][1]  # right set, wrong order
    _, _, chain_ok = _touch_sequence("ChainOfColors3-v0", list(lay_c.targets))
    assert chain_ok[-1][1]
    assert chain_ok[-1][0] == 100.0
    assert [h[1] for h in chain_ok] == [False, False, True]


@pytest.mark.parametrize("name", ["BunchOfColors3-v0", "SeqOfColors3-v0", "ChainOfColors3-v0"])
def test_touching_an_extra_cube_fails(name):
    _spec, _b, lay = _batch(name)
    other = next(c for c in range(9) if c not in lay.targets)
    _, _, hist = _touch_sequence(name, [*lay.targets, other])
    assert hist[-2][1]
    assert not hist[-1][1]
    _, _, hist = _touch_sequence(name, [other, *lay.targets])
    assert not any(h[1] for h in hist)


def test_capacity_touch_radius_is_two_centimetres():
    _spec, b, lay = _batch("BunchOfColors3-v0")
    tp = b.touch_points[0, lay.targets[0]]
    _step_at(b, 15, tp + np.array([0.021, 0, 0]))
    assert b.rank[0, lay.targets[0]] == -1
    _step_at(b, 16, tp + np.array([0.019, 0, 0]))
    assert b.rank[0, lay.targets[0]] == 0


@pytest.mark.parametrize("delta_time", [2, 5, 20])
def test_cue_visible_exactly_for_five_steps_then_delay(delta_time):
    env = make("MikasaLite/RememberColor3-v0", backend="kinematic", delta_time=delta_time)
    obs, info = env.reset(seed=0)
    lay = env.unwrapped._vec.batch.layout
    visible, phases = [], []
    for _t in range(30):
        visible.append(int((lay.split_objects(obs)[:, 0] > 0).sum()))
        phases.append(info["phase"])
        obs, _, _, _, info = env.step(np.zeros(3))
    assert visible[:5] == [1] * 5
    assert visible[5 : 5 + delta_time] == [0] * delta_time
    assert visible[5 + delta_time] == 3
    assert phases[:5] == ["cue"] * 5
    assert phases[5 : 5 + delta_time] == ["delay"] * delta_time
    assert phases[5 + delta_time] == "act"


@pytest.mark.parametrize(("name", "act"), [("SeqOfColors3-v0", 20), ("SeqOfColors5-v0", 30),
                                           ("ChainOfColors7-v0", 40), ("BunchOfColors7-v0", 10),
                                           ("ShellGameTouch-v0", 5)])  # fmt: skip
def test_act_phase_starts_as_upstream(name, act):
    spec = get_spec(name)
    assert spec.act_start == act
    assert spec.phase(act - 1) != "act"
    assert spec.phase(act) == "act"


def test_seq_shows_one_cube_at_a_time_in_order():
    spec = get_spec("SeqOfColors3-v0")
    env = make(spec.env_id, backend="kinematic")
    obs, info = env.reset(seed=4)
    lay = env.unwrapped._vec.batch.layout
    colours = []
    for _t in range(15):
        f = lay.split_objects(obs)
        assert (f[:, 0] > 0).sum() == 1
        colours.append(int(f[0, 4:13].argmax()))
        obs, *_ = env.step(np.zeros(3))
    shown = [colours[0], colours[5], colours[10]]
    assert shown == list(info["oracle_info"])


def test_actions_are_ignored_before_the_act_phase_by_default():
    env = make("MikasaLite/RememberColor3-v0", backend="kinematic")
    obs0, _ = env.reset(seed=0)
    for _ in range(10):
        obs, *_ = env.step(np.ones(3))
    np.testing.assert_array_equal(obs[:3], obs0[:3])
    obs, *_ = env.step(np.ones(3))
    assert obs[0] > obs0[0]
    free = make("MikasaLite/RememberColor3-v0", backend="kinematic", hold_until_act=False)
    free.reset(seed=0)
    assert free.step(np.ones(3))[0][0] > obs0[0]


def test_normalized_dense_in_unit_interval_on_random_rollouts():
    rng = np.random.default_rng(0)
    for name in ("ShellGameTouch-v0", "BunchOfColors5-v0", "ChainOfColors3-v0"):
        env = make(name, backend="kinematic")
        env.reset(seed=1)
        for _ in range(get_spec(name).T):
            _, r, _, _, info = env.step(rng.uniform(-1, 1, 3))
            assert 0.0 <= r <= 1.0
            assert (r == 1.0) == info["success"]


def test_dense_maxima_are_the_official_ones():
    for spec in TASKS.values():
        assert spec.dense_max == (100.0 if spec.family in ("bunch", "seq", "chain") else 3.0)


@pytest.mark.parametrize("env_id", ["ShellGameTouch-v0", "RememberShapeAndColor5x3-v0",
                                    "ChainOfColors7-v0"])  # fmt: skip
def test_batched_resets_equal_one_at_a_time(env_id):
    spec = get_spec(env_id)
    lays = [sample_layout(spec, np.random.default_rng(s)) for s in range(6)]
    one, many = TaskBatch(spec, 6, "state"), TaskBatch(spec, 6, "state")
    for i, lay in enumerate(lays):
        one.set_layout(i, lay)
    many.set_layouts(np.array([4, 0, 5, 1, 3, 2]), [lays[i] for i in (4, 0, 5, 1, 3, 2)])
    for name in ("slot_feats", "obj_feats", "obj_visible", "oracle_onehot", "touch_points",
                 "targets", "_is_target", "_target_point"):  # fmt: skip
        np.testing.assert_array_equal(getattr(one, name), getattr(many, name), err_msg=name)
    tcp, vel = np.zeros((6, 3)), np.zeros((6, 3))
    np.testing.assert_array_equal(one.observe(tcp, vel), many.observe(tcp, vel))
