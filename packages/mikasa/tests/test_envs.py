"""Registry, spaces, check_env, determinism and bad input of the environments."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from iclr26.mikasa import all_ids, make, task_info
from iclr26.mikasa.tasks import TASKS

OFFICIAL_T = {"ShellGame": 90, "Remember": 60, "BunchOf": 120, "SeqOf": 120, "ChainOf": 120}


@pytest.mark.parametrize("env_id", all_ids())
def test_every_id_makes_steps_and_passes_check_env(env_id):
    env = make(env_id, backend="kinematic")
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    if env_id in TASKS:
        T = gym.spec(env_id).max_episode_steps
        assert next(v for k, v in OFFICIAL_T.items() if k in env_id) == T
        assert task_info(env_id).T == T
        for _ in range(T):
            obs, _r, term, trunc, info = env.step(env.action_space.sample())
            assert env.observation_space.contains(obs)
        assert trunc
        assert not term
        assert set(info) >= {"success", "success_once", "phase", "elapsed_steps", "oracle_info"}


@pytest.mark.parametrize(
    "env_id",
    ["MikasaLite/ShellGameTouch-v0", "MikasaLite/RememberShape9-v0", "MikasaLite/SeqOfColors3-v0"],
)
def test_mujoco_backend_passes_check_env(env_id):
    env = make(env_id, backend="mujoco")
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("backend", ["kinematic", "mujoco"])
def test_same_seed_same_trajectory_different_seed_different_layout(backend):
    env = make("MikasaLite/RememberColor5-v0", backend=backend)
    actions = np.random.default_rng(0).uniform(-1, 1, size=(30, 3))

    def run(seed):
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for a in actions:
            out.append(env.step(a)[0])
        return np.stack(out)

    a, b, c = run(7), run(7), run(8)
    assert np.array_equal(a, b)  # bit-identical, physics included
    assert not np.array_equal(a[-1, 10:], c[-1, 10:])


@pytest.mark.parametrize("env_id", ["MikasaLite/ShellGameTouch-v0", "MikasaLite/ChainOfColors5-v0"])
def test_layout_and_target_identical_across_backends(env_id):
    k = make(env_id, backend="kinematic", obs_mode="state")
    m = make(env_id, backend="mujoco", obs_mode="state")
    for seed in (0, 1, 2):
        ok, ik = k.reset(seed=seed)
        om, im = m.reset(seed=seed)
        np.testing.assert_array_equal(ok, om)
        np.testing.assert_array_equal(ik["oracle_info"], im["oracle_info"])


def test_hidden_objects_really_hidden_in_mujoco():
    env = make("MikasaLite/RememberColor3-v0", backend="mujoco")
    env.reset(seed=0)
    z = env.unwrapped.data.mocap_pos[:, 2]
    assert (z > 0).sum() == 1  # only the cue cube is on the table during the cue
    for _ in range(10):
        env.step(np.zeros(3))
    z = env.unwrapped.data.mocap_pos[:, 2]
    assert (z > 0).sum() == 3


def test_rgb_mode_renders_two_cameras_or_says_why():
    import mujoco

    try:
        mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8).close()
    except Exception:
        with pytest.raises(RuntimeError, match="OpenGL"):
            make("MikasaLite/ShellGameTouch-v0", obs_mode="rgb")
        return
    env = make("MikasaLite/ShellGameTouch-v0", obs_mode="rgb")
    obs, _ = env.reset(seed=0)
    assert obs["rgb"].shape == (128, 128, 6)
    assert obs["rgb"].dtype == np.uint8
    cue = obs["rgb"][..., :3].astype(int)
    for _ in range(5):
        obs, *_ = env.step(np.zeros(3, np.float32))
    cups = obs["rgb"][..., :3].astype(int)  # the ball is hidden, the three cups appear at once
    assert np.abs(cups - cue).sum(-1).astype(bool).mean() > 0.005
    env.close()


def test_bad_input_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="valid ids: MikasaLite/ShellGameTouch-v0"):
        make("MikasaLite/Nope-v0")
    with pytest.raises(TypeError, match="env_id"):
        make(3)
    env = make("MikasaLite/ShellGameTouch-v0", backend="kinematic")
    with pytest.raises(TypeError, match="seed"):
        env.unwrapped.reset(seed="1")
    with pytest.raises(TypeError, match="seed"):
        make("MikasaLite/ShellGameTouch-v0", seed=1.0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(np.array([2.0, 0, 0]))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(4))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan, 0, 0]))
    for _ in range(90):
        env.step(np.zeros(3))
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step(np.zeros(3))
    with pytest.raises(ValueError, match="obs_mode"):
        make("MikasaLite/ShellGameTouch-v0", backend="kinematic", obs_mode="rgb")
    with pytest.raises(ValueError, match="reward_mode"):
        make("MikasaLite/ShellGameTouch-v0", backend="kinematic", reward_mode="shaped")
    with pytest.raises(ValueError, match="backend"):
        make("MikasaLite/ShellGameTouch-v0", backend="sapien")
    with pytest.raises(ValueError, match="delta_time"):
        make("MikasaLite/ShellGameTouch-v0", backend="kinematic", delta_time=3)
    with pytest.raises(ValueError, match="delta_time"):
        make("MikasaLite/RememberColor3-v0", backend="kinematic", delta_time=0)
