"""Spec tests 1–3, 5, 6: BT recovery and its label convention, VA algebra and invariances,
gradient routing, expectile and AWR closed forms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.pvo import losses
from iclr26.pvo.agents import AgentConfig, create, update
from iclr26.pvo.nets import MLP, TwinQ, ValueNet
from iclr26.pvo.tabular import chain_mdp, sample_tabular_pairs, sample_trajectories, value_iteration


def test_bt_recovers_a_linear_reward_and_the_label_convention():
    rng = np.random.default_rng(0)
    d, m, L = 8, 5000, 5
    w = rng.normal(size=d)
    phi0, phi1 = rng.normal(size=(m, L, d)), rng.normal(size=(m, L, d))
    diff = (phi1 - phi0).sum(1) @ w
    label = (rng.random(m) < 1 / (1 + np.exp(-diff))).astype(np.float32)

    def fit(y):
        x0, x1 = jnp.asarray(phi0.sum(1)), jnp.asarray(phi1.sum(1))
        loss = jax.jit(jax.value_and_grad(lambda v: losses.bt_nll(x0 @ v, x1 @ v, jnp.asarray(y))))
        v, opt = jnp.zeros(d), optax.adam(0.05)
        s = opt.init(v)
        for _ in range(500):
            _, g = loss(v)
            u, s = opt.update(g, s)
            v = optax.apply_updates(v, u)
        return np.asarray(v)

    cos = lambda a, b: a @ b / np.linalg.norm(a) / np.linalg.norm(b)  # noqa: E731
    assert cos(fit(label), w) > 0.98
    assert cos(fit(1 - label), w) < -0.98  # label 1 ⇔ segment 1 preferred


def test_bt_soft_label_is_not_constant_at_ties():
    r0, r1 = jnp.array([0.0, 0.0]), jnp.array([0.0, 3.0])
    tie = jnp.array([0.5, 0.5])
    assert float(losses.bt_nll(r0[:1], r1[:1], tie[:1])) < float(
        losses.bt_nll(r0[1:], r1[1:], tie[1:])
    )


def _tabular_pairs(seed=0, L=4):
    mdp = chain_mdp(6, gamma=0.9)
    S, A = mdp.r.shape
    st_, ac = sample_trajectories(mdp, np.full((S, A), 0.5), 100, 12, seed=seed)
    s0, a0, s1, a1 = sample_tabular_pairs(st_, ac, 300, L, seed=seed + 1)
    return mdp, s0, a0, s1, a1


def _va(q, mdp, s0, a0, s1, a1, reward=None):
    r = mdp.r if reward is None else reward
    v = q.max(1)
    args = [
        q[s0[:, :-1], a0],
        v[s0[:, 1:]],
        q[s1[:, :-1], a1],
        v[s1[:, 1:]],
        r[s0[:, :-1], a0],
        r[s1[:, :-1], a1],
    ]
    return float(losses.value_alignment_loss(*map(jnp.asarray, args), mdp.gamma))


def test_va_is_zero_at_the_optimal_q_and_positive_after_a_perturbation():
    mdp, s0, a0, s1, a1 = _tabular_pairs()
    q = value_iteration(mdp)
    assert _va(q, mdp, s0, a0, s1, a1) <= 1e-10
    counts = np.zeros((len(s0), *q.shape))
    np.add.at(counts, (np.repeat(np.arange(len(s0)), 4), s0[:, :-1].ravel(), a0.ravel()), 1)
    np.add.at(counts, (np.repeat(np.arange(len(s0)), 4), s1[:, :-1].ravel(), a1.ravel()), -1)
    for s, a in np.argwhere((counts != 0).any(0)):  # entries whose count differs within some pair
        bumped = q.copy()
        bumped[s, a] += 0.5
        assert _va(bumped, mdp, s0, a0, s1, a1) > 1e-3


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.floats(-5, 5))
def test_va_identity_symmetry_and_shift_invariance(seed, c):
    rng = np.random.default_rng(seed)
    q0, v0, q1, v1, r0, r1 = (jnp.asarray(rng.normal(size=(7, 5))) for _ in range(6))
    g = 0.9
    loss = losses.value_alignment_loss(q0, v0, q1, v1, r0, r1, g)
    residual = ((q0 - g * v0 - r0).sum(1) - (q1 - g * v1 - r1).sum(1)) ** 2
    np.testing.assert_allclose(loss, residual.mean(), rtol=1e-5)
    np.testing.assert_allclose(
        loss, losses.value_alignment_loss(q1, v1, q0, v0, r1, r0, g), rtol=1e-5
    )
    shifted = losses.value_alignment_loss(q0 + c, v0 + c, q1 + c, v1 + c, r0, r1, g)
    np.testing.assert_allclose(loss, shifted, rtol=1e-4, atol=1e-4)  # equal lengths: invariant
    mask1 = jnp.ones((7, 5)).at[:, -2:].set(0)  # unequal lengths: the invariance breaks
    m = losses.value_alignment_loss(q0, v0, q1, v1, r0, r1, g, mask1=mask1)
    ms = losses.value_alignment_loss(q0 + c, v0 + c, q1 + c, v1 + c, r0, r1, g, mask1=mask1)
    if abs(c) > 0.5:
        assert abs(float(m - ms)) > 1e-3


def test_value_gradients_come_only_from_the_expectile_loss():
    cfg = AgentConfig(algo="pvo", hidden=(16,), transition_batch=8, pair_batch=4)
    state = create(jax.random.key(0), 3, 1, cfg)
    rng = np.random.default_rng(0)
    tr = {"obs": rng.normal(size=(8, 3)), "act": rng.normal(size=(8, 1)), "reward": rng.normal(size=8),
          "next_obs": rng.normal(size=(8, 3)), "done": np.zeros(8)}  # fmt: skip
    pairs = {"obs0": rng.normal(size=(4, 6, 3)), "act0": rng.normal(size=(4, 5, 1)), "done0": np.zeros((4, 5)),
             "obs1": rng.normal(size=(4, 6, 3)), "act1": rng.normal(size=(4, 5, 1)), "done1": np.zeros((4, 5)),
             "label": np.ones(4)}  # fmt: skip
    batch = jax.tree.map(
        lambda x: jnp.asarray(x, jnp.float32), {"transitions": tr, "va": pairs, "prefs": pairs}
    )
    rm = MLP((64, 64), 1).init(jax.random.key(2), jnp.zeros((1, 4)))
    step = jax.jit(update, static_argnums=2)
    new, _ = step(state, batch, cfg, rm)
    new2, _ = step(state, {**batch, "va": jax.tree.map(lambda x: x * 3.0, batch["va"])}, cfg, rm)
    for a, b in zip(jax.tree.leaves(new.v), jax.tree.leaves(new2.v), strict=True):
        np.testing.assert_array_equal(a, b)  # V's update never sees the VA pairs
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(new.q), jax.tree.leaves(new2.q), strict=True)
    )  # while Q's does
    qn, vn = TwinQ(cfg.hidden), ValueNet(cfg.hidden)
    p = batch["va"]

    def q_loss(vp, stop):
        v0, v1 = vn.apply(vp, p["obs0"][:, 1:]), vn.apply(vp, p["obs1"][:, 1:])
        if stop:
            v0, v1 = jax.lax.stop_gradient(v0), jax.lax.stop_gradient(v1)
        q0 = qn.apply(state.q, p["obs0"][:, :-1], p["act0"])[0]
        q1 = qn.apply(state.q, p["obs1"][:, :-1], p["act1"])[0]
        z = jnp.zeros_like(q0)
        return losses.value_alignment_loss(q0, v0, q1, v1, z, z, 0.99)

    assert all(
        float(jnp.abs(x).max()) == 0 for x in jax.tree.leaves(jax.grad(q_loss)(state.v, True))
    )
    assert any(
        float(jnp.abs(x).max()) > 0 for x in jax.tree.leaves(jax.grad(q_loss)(state.v, False))
    )


@pytest.mark.parametrize("tau", [0.5, 0.7, 0.99])
def test_expectile_minimiser_is_the_closed_form_expectile(tau):
    x = jnp.asarray(np.random.default_rng(0).exponential(size=200))
    grid = jnp.linspace(float(x.min()), float(x.max()), 20001)
    losses_ = jax.vmap(lambda v: losses.expectile_loss(x - v, tau))(grid)
    v_star = float(grid[jnp.argmin(losses_)])
    # Closed form: the τ-expectile solves τ E[(x−v)+] = (1−τ) E[(v−x)+].
    lo, hi = float(x.min()), float(x.max())
    for _ in range(100):
        mid = (lo + hi) / 2
        g = tau * jnp.mean(jnp.maximum(x - mid, 0)) - (1 - tau) * jnp.mean(jnp.maximum(mid - x, 0))
        lo, hi = (mid, hi) if g > 0 else (lo, mid)
    assert abs(v_star - lo) < 2e-3
    if tau == 0.5:
        assert abs(v_star - float(x.mean())) < 2e-3
    if tau == 0.99:
        assert v_star > float(jnp.quantile(x, 0.9))


def test_awr_weights_are_clipped_and_large_beta_finds_the_best_action_without_the_clip():
    logp = jnp.ones(3)
    adv = jnp.array([0.0, 10.0, 100.0])
    assert float(losses.awr_loss(logp, adv, beta=1.0, max_weight=100.0)) == pytest.approx(
        -(1 + 100 + 100) / 3
    )
    # One-state bandit: data actions and their advantages; the weighted-likelihood optimum of a
    # Gaussian mean is the weighted mean of the actions.
    actions = jnp.linspace(-1, 1, 21)
    adv = -((actions - 0.4) ** 2)
    w_free = jnp.exp(200.0 * (adv - adv.max()))
    assert abs(float(jnp.sum(w_free * actions) / w_free.sum()) - 0.4) < 0.05
    w_clip = jnp.minimum(jnp.exp(200.0 * (adv - adv.min())), 100.0)
    clipped_mean = float(jnp.sum(w_clip * actions) / w_clip.sum())
    assert abs(clipped_mean - 0.4) > 0.1  # errata: with the clip it is not the best action


def test_ipl_and_cpl_prefer_the_labelled_segment():
    q_good, q_bad = jnp.ones((4, 5)), jnp.zeros((4, 5))
    v = jnp.zeros((4, 5))
    one = jnp.ones(4)
    assert float(losses.ipl_loss(q_bad, v, q_good, v, one, 0.9, 0.0)) < float(
        losses.ipl_loss(q_good, v, q_bad, v, one, 0.9, 0.0)
    )
    assert float(losses.cpl_loss(q_bad, q_good, one, 1.0, 0.5)) < float(
        losses.cpl_loss(q_good, q_bad, one, 1.0, 0.5)
    )


@pytest.mark.parametrize("c", [0.1, 7.0])
def test_td3bc_actor_loss_is_scale_free_in_q_and_its_bc_term_is_the_mse(c):
    rng = np.random.default_rng(3)
    q = jnp.asarray(rng.normal(1.0, 0.5, 32), jnp.float32)
    pi = jnp.asarray(rng.uniform(-1, 1, (32, 2)), jnp.float32)
    a = jnp.asarray(rng.uniform(-1, 1, (32, 2)), jnp.float32)
    base = losses.td3bc_actor_loss(q, pi, a, 2.5)
    np.testing.assert_allclose(losses.td3bc_actor_loss(c * q, pi, a, 2.5), base, rtol=1e-5)
    mse = float(jnp.mean((pi - a) ** 2))
    expected = -2.5 * float(jnp.mean(q) / jnp.mean(jnp.abs(q))) + mse
    np.testing.assert_allclose(float(base), expected, rtol=1e-5)
    grad_pi = jax.grad(lambda p: losses.td3bc_actor_loss(q, p, a, 2.5))(pi)
    np.testing.assert_allclose(grad_pi, 2 * (pi - a) / pi.size, rtol=1e-5, atol=1e-7)


def _td3_batch(rng, scale=1.0):
    tr = {"obs": rng.normal(size=(8, 3)), "act": rng.uniform(-1, 1, (8, 1)),
          "reward": rng.normal(size=8), "next_obs": rng.normal(size=(8, 3)), "done": np.zeros(8)}  # fmt: skip
    pairs = {"obs0": rng.normal(size=(4, 6, 3)), "act0": rng.uniform(-1, 1, (4, 5, 1)),
             "done0": np.zeros((4, 5)), "obs1": rng.normal(size=(4, 6, 3)),
             "act1": rng.uniform(-1, 1, (4, 5, 1)), "done1": np.zeros((4, 5)), "label": np.ones(4)}  # fmt: skip
    pairs = {k: v * scale if k.startswith("obs") else v for k, v in pairs.items()}
    batch = jax.tree.map(
        lambda x: jnp.asarray(x, jnp.float32), {"transitions": tr, "va": pairs, "prefs": pairs}
    )
    return {**batch, "key": jax.random.key(5)}


def _same(a, b):
    return all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.mark.parametrize("algo", ["td3bc", "td3bc_va"])
def test_td3bc_delays_the_actor_and_targets_and_va_routes_only_through_the_pairs(algo):
    cfg = AgentConfig(algo=algo, hidden=(16,), transition_batch=8, pair_batch=4)
    state = create(jax.random.key(0), 3, 1, cfg)
    rm = MLP((64, 64), 1).init(jax.random.key(2), jnp.zeros((1, 4)))
    batch = _td3_batch(np.random.default_rng(0))
    step = jax.jit(update, static_argnums=2)
    one, _ = step(state, batch, cfg, rm)  # step 1 of policy_freq = 2: critic only
    assert not _same(one.q, state.q)
    assert _same(one.actor, state.actor)
    assert _same(one.actor_target, state.actor_target)
    assert _same(one.q_target, state.q_target)
    two, _ = step(one, batch, cfg, rm)  # step 2: actor and both targets move
    assert not _same(two.actor, one.actor)
    assert not _same(two.actor_target, one.actor_target)
    assert not _same(two.q_target, one.q_target)
    other = step(state, {**batch, "va": _td3_batch(np.random.default_rng(0), 3.0)["va"]}, cfg, rm)[
        0
    ]
    # TD3+BC's critic never sees the segment pairs; TD3+BC+VA's critic learns only from them.
    assert _same(other.q, one.q) == (algo == "td3bc")
