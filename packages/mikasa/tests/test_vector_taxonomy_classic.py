"""Vector autoreset (test 9), taxonomy (test 10), compat ids and the native classics."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26.mikasa import (
    OFFICIAL_TO_LITE,
    MemoryType,
    list_tasks,
    make,
    make_vec,
    task_info,
)
from iclr26.mikasa.compat import MISSING, lite_id


@pytest.mark.parametrize("backend", ["kinematic", "mujoco"])
def test_next_step_autoreset(backend):
    env = make_vec("MikasaLite/ShellGameTouch-v0", 2, backend=backend)
    obs, _ = env.reset(seed=0)
    first = obs.copy()
    a = np.zeros((2, 3))
    for _ in range(89):
        obs, r, term, trunc, _ = env.step(a)
        assert not trunc.any()
    obs, r, term, trunc, info = env.step(a)
    assert trunc.all()
    assert not term.any()
    assert (info["elapsed_steps"] == 90).all() if backend == "kinematic" else True
    obs, r, term, trunc, info = env.step(np.ones((2, 3)))  # ignored: this step resets
    assert not (term | trunc).any()
    assert (r == 0).all()
    assert np.allclose(obs[:, :3], first[:, :3])  # gripper back at the start
    assert obs[0, 6] == 0.0  # t/T restarted
    assert not np.array_equal(obs[:, 10:], first[:, 10:])  # a fresh layout from the env's stream


def test_same_step_autoreset_returns_final_obs():
    env = make_vec("MikasaLite/RememberColor3-v0", 3, autoreset_mode="same_step")
    env.reset(seed=0)
    for _ in range(59):
        env.step(np.zeros((3, 3)))
    obs, _r, _term, trunc, info = env.step(np.zeros((3, 3)))
    assert trunc.all()
    assert info["_final_obs"].all()
    assert info["final_obs"][0].shape == obs[0].shape
    assert info["final_obs"][0][6] == 1.0
    assert obs[0, 6] == 0.0
    assert (info["final_info"]["elapsed_steps"] == 60).all()


def test_taxonomy_matches_the_official_table():
    expected = {
        "ShellGame": MemoryType.OBJECT, "Remember": MemoryType.OBJECT,
        "BunchOf": MemoryType.CAPACITY, "SeqOf": MemoryType.CAPACITY,
        "ChainOf": MemoryType.SEQUENTIAL, "Intercept": MemoryType.SPATIAL,
        "TakeItBack": MemoryType.SPATIAL, "RotateLenient": MemoryType.SPATIAL,
        "RotateStrict": MemoryType.OBJECT,  # the official README types RotateStrict as object
    }  # fmt: skip
    for env_id in list_tasks():
        want = next(v for k, v in expected.items() if k in env_id)
        assert want in task_info(env_id).memory_types
    assert set(list_tasks("sequential")) == {f"MikasaLite/ChainOfColors{n}-v0" for n in (3, 5, 7)}
    assert set(list_tasks(MemoryType.SPATIAL)) == {
        *(f"MikasaLite/Intercept{s}-v0" for s in ("Slow", "Medium", "Fast")),
        *(f"MikasaLite/InterceptGrab{s}-v0" for s in ("Slow", "Medium", "Fast")),
        "MikasaLite/TakeItBack-v0",
        "MikasaLite/RotateLenientPos-v0",
        "MikasaLite/RotateLenientPosNeg-v0",
    }
    assert task_info("RememberColor9-v0").chance_success == pytest.approx(1 / 9)
    assert task_info("BunchOfColors7-v0").chance_success == pytest.approx(1 / 36)
    assert task_info("ChainOfColors3-v0").chance_success == pytest.approx(1 / (9 * 8 * 7))
    with pytest.raises(ValueError, match="memory_type"):
        list_tasks("episodic")


def test_official_ids_map_to_ours(monkeypatch):
    assert OFFICIAL_TO_LITE["RememberColor9-v0"] == "MikasaLite/RememberColor9-v0"
    assert lite_id("T-Maze-v0") == "MikasaLite/TMaze-v0"
    assert "TakeItBack-v0" not in MISSING
    assert lite_id("RotateStrictPos-v0") == "MikasaLite/RotateStrictPos-v0"
    assert lite_id("InterceptGrabFast-v0") == "MikasaLite/InterceptGrabFast-v0"
    assert lite_id("InterceptFast-v0") == "MikasaLite/InterceptFast-v0"
    with pytest.raises(ValueError, match="not a MIKASA id"):
        lite_id("CartPole-v1")
    # the 3 + 3 + 3 + 3 + 3 + 3 + 3 + 2 + 1 + 1 ... = 32 official tabletop ids are all listed
    robo = [k for k in OFFICIAL_TO_LITE if not k.startswith(("T-Maze", "MemoryLength"))]
    assert len(robo) == 32
    monkeypatch.setitem(OFFICIAL_TO_LITE, "FutureTask-v0", None)
    with pytest.raises(ValueError, match="not re-implemented"):
        lite_id("FutureTask-v0")


def test_tmaze_rewards_the_cued_turn_only():
    for seed in range(6):
        for correct in (True, False):
            env = make("MikasaLite/TMaze-v0", corridor_length=4)
            obs, info = env.reset(seed=seed)
            cue = int(obs[:2].argmax())
            for _ in range(4):
                obs, _, term, _, _ = env.step(0)
                assert obs[:2].sum() == 0  # the cue is gone
                assert not term
            assert obs[2] == 1.0
            obs, r, term, _trunc, info = env.step(1 + (cue if correct else 1 - cue))
            assert term
            assert r == float(correct)
            assert info["success"] == correct


def test_memory_length_query_and_reward():
    env = make("MikasaLite/MemoryLength-v0", memory_length=5, num_bits=3)
    obs, _info = env.reset(seed=1)
    bits = (obs[2:5] > 0).astype(int)
    for _ in range(5):
        obs, r, term, *_ = env.step(0)
        assert not term
    q = int(obs[5:8].argmax())
    assert obs[1] == 1.0
    _, r, term, _, _ = env.step(bits[q])
    assert term
    assert r == 1.0
    with pytest.raises(ValueError, match="memory_length"):
        make("MikasaLite/MemoryLength-v0", memory_length=0)
