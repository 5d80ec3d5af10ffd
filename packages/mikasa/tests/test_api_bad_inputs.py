"""Every function in the README API table refuses bad input with an error naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

import iclr26.mikasa as mk


def _rms(*args, **kwargs):
    from iclr26.mikasa.ppo import RunningMeanStd

    return RunningMeanStd(*args, **kwargs)


def _vec():
    return mk.make_vec("RememberColor3-v0", 2)


CASES = [
    (lambda: mk.make("Nope-v0"), ValueError, "valid ids"),
    (lambda: mk.make("RememberColor3-v0", obs_mode="pixels"), ValueError, "obs_mode"),
    (lambda: mk.make("RememberColor3-v0", seed=-1), ValueError, "seed"),
    (lambda: mk.make_vec("RememberColor3-v0", 0), ValueError, "num_envs"),
    (lambda: mk.make_vec("RememberColor3-v0", 2.0), TypeError, "num_envs"),
    (lambda: mk.make_vec("RememberColor3-v0", 2, autoreset_mode="never"), ValueError, "autoreset_mode"),
    (lambda: mk.make_vec("MikasaLite/TMaze-v0", 2), ValueError, "make_vec"),
    (lambda: _vec().step(np.zeros((2, 3))), Exception, "reset"),
    (lambda: (v := _vec(), v.reset(seed=0), v.step(np.zeros((3, 3)))), ValueError, "actions"),
    (lambda: _vec().reset(seed=[1]), ValueError, "seed"),
    (lambda: mk.task_info("Nope"), ValueError, "valid ids"),
    (lambda: mk.list_tasks("episodic"), ValueError, "memory_type"),
    (lambda: mk.get_spec(1), TypeError, "env_id"),
    (lambda: mk.evaluate("RememberColor3-v0", mk.MemoryOracle("RememberColor3-v0"), 0), ValueError, "n_episodes"),
    (lambda: mk.evaluate("RememberColor3-v0", mk.MemoryOracle("RememberColor3-v0"), 2, backend="gpu"), ValueError, "backend"),
    (lambda: mk.collect_demos("RememberColor3-v0", "expert"), ValueError, "oracle"),
    (lambda: mk.collect_demos("RememberColor3-v0", "state", 2, obs_mode="memory"), ValueError, "obs_mode"),
    (lambda: mk.collect_demos("RememberColor3-v0", object(), 2), TypeError, "oracle"),
    (lambda: mk.episode_frames("RememberColor3-v0", mk.MemoryOracle("RememberColor3-v0"), size=8), ValueError, "size"),
    (lambda: mk.episode_frames("RememberColor3-v0", mk.MemoryOracle("RememberColor3-v0"), backend="gpu"), ValueError, "backend"),
    (lambda: mk.episode_frames("RememberColor3-v0", mk.MemoryOracle("RememberColor3-v0"), seed=-2), ValueError, "seed"),
    (lambda: mk.episode_frames("RememberColor3-v0", mk.MemoryOracle("RememberColor3-v0"), steps=[0, 61]), ValueError, "steps"),
    (lambda: mk.episode_frames("RememberColor3-v0", mk.MemoryOracle("RememberColor3-v0"), steps=[1.5]), TypeError, "steps"),
    (lambda: mk.write_gif(np.zeros((2, 8, 8, 3)), "a.gif"), TypeError, "uint8"),
    (lambda: mk.write_gif(np.zeros((2, 8, 8), np.uint8), "a.gif"), ValueError, "frames"),
    (lambda: mk.write_gif(np.zeros((2, 8, 8, 3), np.uint8), "a.gif", fps=0), ValueError, "fps"),
    (lambda: mk.episode_strip("Nope-v0", mk.MemoryOracle("RememberColor3-v0")), ValueError, "valid ids"),
    (lambda: mk.MemorylessOracle("RememberColor3-v0", choice="best"), ValueError, "choice"),
    (lambda: mk.MemoryOracle(object()), TypeError, "MikasaLite"),
    (lambda: mk.MemoryOracle("RememberColor3-v0").act(np.zeros((2, 5))), ValueError, "obs"),
    (lambda: mk.make_oracle("psychic", "RememberColor3-v0"), ValueError, "oracle"),
    (lambda: mk.leak_probe("RememberColor3-v0", phase="late"), ValueError, "phase"),
    (lambda: mk.leak_probe("RememberColor3-v0", n_episodes=3), ValueError, "n_episodes"),
    (lambda: mk.leak_probe("RememberColor3-v0", test_fraction=1.5), ValueError, "test_fraction"),
    (lambda: mk.leak_probe("RememberColor3-v0", policy="greedy"), ValueError, "policy"),
    (lambda: mk.BC("cnn"), ValueError, "policy"),
    (lambda: mk.BC("gru", epochs=0), ValueError, "epochs"),
    (lambda: mk.BC("gru", lr=float("nan")), ValueError, "lr"),
    (lambda: mk.BC("mlp").fit({"obs": np.zeros((2, 5, 4))}), ValueError, "action"),
    (lambda: mk.BC("mlp").fit({"obs": np.zeros((2, 5, 4)), "action": np.zeros((2, 5, 2))}), ValueError, "action"),
    (lambda: mk.BC("mlp").fit({"obs": np.full((2, 5, 4), np.nan), "action": np.zeros((2, 5, 3))}), ValueError, "NaN"),
    (lambda: mk.BC("mlp").act(np.zeros((1, 4))), RuntimeError, "fit"),
    (lambda: mk.BC("mlp", normalize=1), TypeError, "normalize"),
    (lambda: mk.BC("mlp").fit({"obs": np.zeros((2, 5, 4)), "action": np.zeros((2, 5, 3)), "mask": np.ones((2, 5))}), ValueError, "mask"),
    (lambda: mk.make_policy("gru", 0), ValueError, "obs_dim"),
    (lambda: mk.make_policy("framestack", 4, k=0), ValueError, "k"),
    (lambda: mk.make_policy("slot_gru", 40), ValueError, "memory-mode"),
    (lambda: mk.TMaze(corridor_length=0), ValueError, "corridor_length"),
    (lambda: mk.TMaze(corridor_length=5, episode_length=3), ValueError, "episode_length"),
    (lambda: mk.MemoryLength(num_bits=1.5), TypeError, "num_bits"),
    (lambda: mk.lite_id("CartPole-v1"), ValueError, "official_id"),
    (lambda: mk.load_demos("missing.npz"), ValueError, "missing.npz"),
    (lambda: mk.save_demos("x.npz", {"obs": np.zeros((1, 2))}), ValueError, "lacks"),
    (lambda: mk.make("TakeItBack-v0", backend="kinematic", delta_time=3), ValueError, "delta_time"),
    (lambda: mk.SpatialOracle(mk.get_spec("TakeItBack-v0"), "psychic"), ValueError, "kind"),
    (lambda: mk.SpatialOracle(mk.get_spec("TakeItBack-v0")).act(np.zeros((2, 5))), ValueError, "obs"),
    (lambda: mk.SpatialBatch(mk.get_spec("InterceptFast-v0"), 2, reward_mode="x"), ValueError, "reward_mode"),
    (lambda: mk.SpatialBatch(mk.get_spec("InterceptFast-v0"), 2, obs_mode="rgb"), ValueError, "obs_mode"),
    (lambda: mk.PPO("slot_gru"), ValueError, "policy"),
    (lambda: _rms(0), ValueError, "dim"),
    (lambda: _rms(3, clip=float("inf")), ValueError, "clip"),
    (lambda: _rms(3).update(np.zeros((2, 4))), ValueError, "x must be"),
    (lambda: _rms(2).update(np.full((2, 2), np.nan)), ValueError, "NaN"),
    (lambda: mk.PPO("transformer", hidden=30), ValueError, "hidden"),
    (lambda: mk.PPO("gru", gamma=2.0), ValueError, "gamma"),
    (lambda: mk.PPO("gru").act(np.zeros((1, 4))), RuntimeError, "fit"),
    (lambda: mk.finite_horizon_gae(np.zeros((2, 3)), np.zeros(3), 0.9, 0.9), ValueError, "values"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "needle"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_input(call, exc, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(exc, match=needle):
        call()
