"""Oracle bounds, uniform targets and the leak probe (spec tests 3-5)."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26.mikasa import evaluate, leak_probe, make_oracle
from iclr26.mikasa.experiments import binomial_interval
from iclr26.mikasa.kinematic import KinematicVectorEnv
from iclr26.mikasa.tasks import get_spec, sample_layout

# chi-square critical values at p = 0.001 for df = 2, 4, 8
CHI2_999 = {2: 13.82, 4: 18.47, 8: 26.12}


def _chi2(counts):
    expected = counts.sum() / len(counts)
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize(("name", "k"), [("ShellGameTouch-v0", 3), ("RememberColor9-v0", 9),
                                         ("RememberShape5-v0", 9), ("SeqOfColors3-v0", 9)])  # fmt: skip
def test_targets_are_uniform_over_3000_seeds(name, k):
    spec = get_spec(name)
    infos, slots = [], []
    for seed in range(3000):
        lay = sample_layout(spec, np.random.default_rng(seed))
        infos.append(lay.oracle_info[0])
        slots.append(lay.targets[0])
    assert _chi2(np.bincount(infos, minlength=k)) < CHI2_999[k - 1]
    kk = spec.n_candidates
    assert _chi2(np.bincount(slots, minlength=kk)) < CHI2_999[kk - 1]


def test_sequences_have_no_repeats():
    spec = get_spec("ChainOfColors7-v0")
    for seed in range(200):
        lay = sample_layout(spec, np.random.default_rng(seed))
        assert len(set(lay.oracle_info)) == 7
        assert len(set(lay.targets)) == 7


@pytest.mark.parametrize(
    "name", ["ShellGameTouch-v0", "RememberColor5-v0", "RememberShapeAndColor3x2-v0",
             "BunchOfColors3-v0", "ChainOfColors5-v0"],
)  # fmt: skip
def test_oracle_bounds_on_the_kinematic_backend(name):
    spec = get_spec(name)
    n = 150
    assert evaluate(name, make_oracle("memory", spec), n, seed=1)["success_at_end"] >= 0.95
    assert evaluate(name, make_oracle("state", spec), n, seed=1)["success_at_end"] >= 0.95
    blind = evaluate(name, make_oracle("memoryless", spec, seed=2), n, seed=1)["success_at_end"]
    lo, hi = binomial_interval(spec.chance_success, n, level=0.999)  # deterministic, few tasks
    assert lo <= blind <= hi


@pytest.mark.parametrize("name", ["ShellGameTouch-v0", "BunchOfColors3-v0"])
def test_memory_oracle_on_mujoco(name):
    r = evaluate(name, make_oracle("memory", name), 3, seed=0, backend="mujoco")
    assert r["success_at_end"] == 1.0


def test_binomial_interval_exact_small_case():
    lo, hi = binomial_interval(0.5, 2, level=0.5)  # pmf 1/4, 1/2, 1/4
    assert (lo, hi) == (0.5, 0.5)
    lo, hi = binomial_interval(1 / 3, 100)
    assert lo < 1 / 3 < hi


@pytest.mark.parametrize("name", ["ShellGameTouch-v0", "RememberColor3-v0"])
def test_leak_probe_memory_mode_hides_the_target_and_has_power(name):
    after = leak_probe(name, phase="after_cue", policy="random", n_episodes=160, seed=0)
    assert after["accuracy"] <= max(after["chance"], after["majority"]) + 0.08
    assert leak_probe(name, phase="cue", n_episodes=160, seed=0)["accuracy"] >= 0.9
    assert leak_probe(name, phase="after_cue", obs_mode="state", n_episodes=160)["accuracy"] >= 0.9


class _PointAtBall:
    """A leaky setup: moves toward the ball while it is shown, so the pose stores the cue."""

    def reset(self, n):
        pass

    def act(self, obs):
        a = np.zeros((len(obs), 3))
        slots = obs[:, 10:].reshape(len(obs), -1, 22)
        vis = (slots[:, 0, 0] > 0.5) & (obs[:, 7] == 1.0)  # the ball, during the cue phase
        # half the ball's x is reachable within the 5 cue steps and still tells the cup
        a[vis, 0] = np.clip((slots[vis, 0, 1] / 2 - obs[vis, 0]) / 0.03, -1, 1)
        return a


def test_leak_probe_catches_a_cue_stored_in_the_gripper_pose():
    leaky = leak_probe("ShellGameTouch-v0", policy=_PointAtBall(), n_episodes=160,
                       hold_until_act=False)  # fmt: skip
    assert leaky["accuracy"] >= 0.8
    held = leak_probe("ShellGameTouch-v0", policy=_PointAtBall(), n_episodes=160)
    assert held["accuracy"] <= held["chance"] + 0.08


def test_vector_env_agrees_with_single_envs():
    from iclr26.mikasa import make

    spec = get_spec("RememberColor3-v0")
    vec = KinematicVectorEnv(spec, 3)
    obs, _ = vec.reset(seed=10)
    for i in range(3):
        single, _ = make(spec.env_id, backend="kinematic").reset(seed=10 + i)
        np.testing.assert_array_equal(obs[i], single)
