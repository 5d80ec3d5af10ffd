"""Spec tests 4, 7, 8, 9: tabular end-to-end, segment sampler, teachers, environment fidelity."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr26.pvo.data import load_npz_pairs, make_dataset, save_npz_pairs
from iclr26.pvo.envs import (
    PendulumState,
    collect_episodes,
    hidden_reward,
    pendulum_obs,
    pendulum_step,
)
from iclr26.pvo.segments import label_pairs, sample_segment_pairs
from iclr26.pvo.tabular import (
    chain_mdp,
    fit_tabular_reward,
    fitted_td_tabular,
    gridworld_mdp,
    sample_tabular_pairs,
    sample_trajectories,
    solve_pvo_tabular,
    value_iteration,
)


@pytest.mark.parametrize("make", [chain_mdp, gridworld_mdp])
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]
)
def test_tabular_pvo_and_mr_td_act_optimally_at_covered_states(make, seed):
    mdp = make()
    S, A = mdp.r.shape
    q_star = value_iteration(mdp)
    states, actions = sample_trajectories(mdp, np.full((S, A), 1 / A), 200, 20, seed=seed)
    s0, a0, s1, a1 = sample_tabular_pairs(states, actions, 500, 5, seed=seed + 10)
    R0, R1 = mdp.r[s0[:, :-1], a0].sum(1), mdp.r[s1[:, :-1], a1].sum(1)
    rng = np.random.default_rng(seed)
    label = (rng.random(500) < 1 / (1 + np.exp(-5 * (R1 - R0)))).astype(float)
    r_hat = fit_tabular_reward(s0, a0, s1, a1, label, S, A)
    u = sample_tabular_pairs(states, actions, 2000, 5, seed=seed + 20)
    _, pi_va = solve_pvo_tabular(*u, r_hat, mdp.gamma)
    pi_td = fitted_td_tabular(states, actions, r_hat, mdp.gamma).argmax(1)
    covered = np.unique(states)
    for pi in (pi_va, pi_td):
        gap = q_star.max(1) - q_star[np.arange(S), pi]
        assert gap[covered].max() < 1e-9  # greedy action is optimal (ties allowed)


def test_tabular_va_fails_with_the_wrong_pair_sign():
    mdp = chain_mdp()
    S, A = mdp.r.shape
    states, actions = sample_trajectories(mdp, np.full((S, A), 0.5), 200, 20, seed=0)
    u0, ua0, u1, ua1 = sample_tabular_pairs(states, actions, 2000, 5, seed=1)
    _, right = solve_pvo_tabular(u0, ua0, u1, ua1, mdp.r, mdp.gamma)
    _, wrong = solve_pvo_tabular(u0, ua0, u1, ua1, -mdp.r, mdp.gamma)  # flipped sign of R̂0 − R̂1
    q = value_iteration(mdp)
    assert np.all(q[np.arange(S), right] == q.max(1))
    assert np.any(q[np.arange(S), wrong] < q.max(1) - 1e-6)


def test_segments_never_cross_episodes_and_successors_are_true():
    E, T = 7, 30
    t = np.arange(T + 1, dtype=np.float32)
    obs = np.stack([np.stack([t, np.full(T + 1, e, np.float32)], -1) for e in range(E)])
    act = obs[:, :-1, :1].copy()
    p = sample_segment_pairs(obs, act, 500, length=10, seed=0)
    for o, a in ((p.obs0, p.act0), (p.obs1, p.act1)):
        assert np.all(o[:, :, 1] == o[:, :1, 1])  # one episode id per segment
        assert np.all(np.diff(o[:, :, 0], axis=1) == 1)  # obs[:, 1:] are the successors
        np.testing.assert_array_equal(a[..., 0], o[:, :-1, 0])
    assert np.isnan(p.label).all()


def test_teachers():
    ds = make_dataset("medium_replay", 10, seed=0)
    pairs = sample_segment_pairs(ds.obs, ds.act, 4000, seed=1)
    reward = lambda o, a: hidden_reward(o, a, "dense")  # noqa: E731
    script = label_pairs(pairs, reward)
    bt_sharp = label_pairs(pairs, reward, teacher="bt", beta=1e12, seed=2)
    np.testing.assert_array_equal(script.label, bt_sharp.label)
    eps = 0.2
    mistake = label_pairs(pairs, reward, teacher="mistake", mistake_prob=eps, seed=3)
    rate = np.mean(mistake.label != script.label)
    assert abs(rate - eps) < 3 * np.sqrt(eps * (1 - eps) / pairs.size)
    sparse = lambda o, a: hidden_reward(o, a, "sparse")  # noqa: E731
    half = label_pairs(pairs, sparse)
    dropped = label_pairs(pairs, sparse, ties="drop")
    assert np.any(half.label == 0.5)
    assert dropped.size == int(np.sum(half.label != 0.5))


def test_jax_pendulum_matches_gymnasium_step_for_step():
    gym = pytest.importorskip("gymnasium")
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    th, thd = env.unwrapped.state
    state = PendulumState(jnp.float32(th), jnp.float32(thd))
    rng = np.random.default_rng(0)
    step = jax.jit(pendulum_step)
    for _ in range(200):
        # Start each step from gymnasium's own (float64) state: the dynamics are chaotic, so a
        # float32 trajectory drifts from a float64 one; the step itself must agree.
        th, thd = env.unwrapped.state
        a = rng.uniform(-3, 3, size=(1,)).astype(np.float32)  # beyond ±2: clipping is tested too
        obs, r, term, trunc, _ = env.step(a)
        state, r_jax = step(PendulumState(jnp.float32(th), jnp.float32(thd)), jnp.asarray(a))
        np.testing.assert_allclose(np.asarray(pendulum_obs(state)), obs, rtol=1e-5, atol=1e-5)
        assert abs(float(r_jax) - r) < 1e-4 * max(1.0, abs(r))
        assert not term
    assert trunc  # 200 steps end by truncation, as EPISODE_STEPS says


def test_scripted_expert_swings_up():
    ep = collect_episodes(jax.random.key(0), 10)
    assert ep["reward"].sum(1).mean() >= -200


def test_npz_round_trip_and_bad_files(tmp_path):
    ds = make_dataset("expert", 10, seed=0)
    pairs = label_pairs(
        sample_segment_pairs(ds.obs, ds.act, 10, seed=0), lambda o, a: hidden_reward(o, a)
    )
    path = save_npz_pairs(pairs, tmp_path / "prefs.npz")
    back = load_npz_pairs(path)
    for a, b in zip(pairs, back, strict=True):
        np.testing.assert_array_equal(a, b)
    np.savez(tmp_path / "bad_label.npz", obs_1=pairs.obs0, obs_2=pairs.obs1, action_1=pairs.act0,
             action_2=pairs.act1, label=np.full(10, 2.0))  # fmt: skip
    with pytest.raises(ValueError, match=r"labels must be 0, 0\.5 or 1"):
        load_npz_pairs(tmp_path / "bad_label.npz")
    nan_obs = pairs.obs0.copy()
    nan_obs[0, 0, 0] = np.nan
    np.savez(tmp_path / "nan.npz", obs_1=nan_obs, obs_2=pairs.obs1, action_1=pairs.act0,
             action_2=pairs.act1, label=pairs.label)  # fmt: skip
    with pytest.raises(ValueError, match="finite"):
        load_npz_pairs(tmp_path / "nan.npz")
    np.savez(tmp_path / "short.npz", obs_1=pairs.obs0[:, :-1], obs_2=pairs.obs1[:, :-1],
             action_1=pairs.act0, action_2=pairs.act1, label=pairs.label)  # fmt: skip
    with pytest.raises(ValueError, match="L\\+1"):
        load_npz_pairs(tmp_path / "short.npz")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_npz_pairs(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a NumPy"):
        load_npz_pairs(tmp_path / "junk.npz")


def test_jax_mountaincar_matches_gymnasium_step_for_step():
    from iclr26.pvo.mountaincar import (
        MountainCarState,
        mountaincar_obs,
        mountaincar_pump_action,
        mountaincar_reset,
        mountaincar_step,
    )

    gym = pytest.importorskip("gymnasium")
    env = gym.make("MountainCarContinuous-v0")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    step = jax.jit(mountaincar_step)
    hit_wall = reached = False
    for t in range(999):
        x, v = (np.float32(z) for z in env.unwrapped.state)
        obs = mountaincar_obs(MountainCarState(jnp.float32(x), jnp.float32(v)))
        # Pumping (with noise and out-of-range forces) swings the car to the wall and the goal.
        a = (np.asarray(mountaincar_pump_action(obs)) * (1.5 if t % 7 else -0.3)).astype(np.float32)
        a = a + rng.normal(0, 0.2, 1).astype(np.float32)
        nobs, r, term, _, _ = env.step(a)
        state, r_jax, done = step(MountainCarState(jnp.float32(x), jnp.float32(v)), jnp.asarray(a))
        np.testing.assert_allclose(np.asarray(mountaincar_obs(state)), nobs, rtol=1e-5, atol=1e-6)
        assert abs(float(r_jax) - r) < 1e-4 * max(1.0, abs(r))
        assert bool(done) == term
        if term:
            reached = True
            break
    assert reached
    # Random states and out-of-range forces: the wall (x = −1.2, v zeroed) and the goal edge.
    for _ in range(300):
        x = np.float32(rng.uniform(-1.2, 0.6))
        v = np.float32(rng.uniform(-0.07, 0.07))
        a = rng.uniform(-2, 2, 1).astype(np.float32)
        env.unwrapped.state = np.array([x, v], np.float32)
        nobs, r, term, _, _ = env.step(a)
        state, r_jax, done = step(MountainCarState(jnp.float32(x), jnp.float32(v)), jnp.asarray(a))
        np.testing.assert_allclose(np.asarray(mountaincar_obs(state)), nobs, rtol=1e-5, atol=1e-6)
        assert abs(float(r_jax) - r) < 1e-4 * max(1.0, abs(r))
        assert bool(done) == term
        hit_wall |= bool(nobs[0] == np.float32(-1.2))
    assert hit_wall
    starts = jax.vmap(mountaincar_reset)(jax.random.split(jax.random.key(0), 500))
    assert float(starts.position.min()) >= -0.6
    assert float(starts.position.max()) <= -0.4
    assert float(jnp.abs(starts.velocity).max()) == 0.0
