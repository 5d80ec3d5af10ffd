"""PPO: finite-horizon GAE, a training smoke run, determinism and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

import iclr26.mikasa as mk
from iclr26.mikasa.ppo import PPO, finite_horizon_gae


def test_gae_with_lambda_one_is_discounted_return_minus_value():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(3, 7)), rng.normal(size=(3, 7))
    adv = finite_horizon_gae(r, v, 0.9, 1.0)
    disc = np.array([[sum(0.9**k * r[i, t + k] for k in range(7 - t)) for t in range(7)]
                     for i in range(3)])  # fmt: skip
    np.testing.assert_allclose(adv, disc - v, atol=1e-12)
    # lambda = 0: the one-step TD error, with V after the last step = 0
    td = finite_horizon_gae(r, v, 0.9, 0.0)
    np.testing.assert_allclose(td[:, -1], r[:, -1] - v[:, -1])
    np.testing.assert_allclose(td[:, 0], r[:, 0] + 0.9 * v[:, 1] - v[:, 0])


def test_gae_matches_the_backward_recursion():
    # the matrix form equals A_t = δ_t + γλ A_{t+1} with V_T = 0, for any λ
    rng = np.random.default_rng(1)
    r, v = rng.normal(size=(5, 13)), rng.normal(size=(5, 13))
    gamma, lam = 0.97, 0.8
    ref = np.zeros_like(r)
    last = np.zeros(5)
    for t in reversed(range(13)):
        nxt = v[:, t + 1] if t + 1 < 13 else 0.0
        last = r[:, t] + gamma * nxt - v[:, t] + gamma * lam * last
        ref[:, t] = last
    np.testing.assert_allclose(finite_horizon_gae(r, v, gamma, lam), ref, atol=1e-12)


def test_gae_refuses_bad_shapes_and_nan():
    with pytest.raises(ValueError, match="rewards and values"):
        finite_horizon_gae(np.zeros((2, 3)), np.zeros((2, 4)), 0.9, 0.9)
    with pytest.raises(ValueError, match="finite"):
        finite_horizon_gae(np.full((2, 3), np.nan), np.zeros((2, 3)), 0.9, 0.9)


@pytest.mark.parametrize("policy", ["mlp", pytest.param("gru", marks=pytest.mark.slow)])
def test_ppo_trains_acts_and_is_deterministic(policy):
    kw = {"num_envs": 4, "minibatches": 2, "total_steps": 2 * 4 * 90, "hidden": 16, "seed": 3}
    a = PPO(policy, **kw).fit("ShellGameTouch-v0")
    b = PPO(policy, **kw).fit("ShellGameTouch-v0")
    assert len(a.history_) == 2
    assert a.history_[-1]["env_steps"] == 720
    assert [h["policy_loss"] for h in a.history_] == [h["policy_loss"] for h in b.history_]
    a.reset(3)
    obs = np.zeros(
        (3, mk.make("ShellGameTouch-v0", backend="kinematic").observation_space.shape[0])
    )
    act = a.act(obs)
    assert act.shape == (3, 3)
    assert np.all(np.abs(act) <= 1)
    res = mk.evaluate("ShellGameTouch-v0", a, 4, seed=0)
    assert 0.0 <= res["success_at_end"] <= 1.0


def test_transformer_core_is_causal_and_steps_like_the_whole_episode():
    import torch

    from iclr26.mikasa.ppo import ActorCritic

    torch.manual_seed(0)
    net = ActorCritic(7, hidden=16, core="transformer", max_len=32).eval()
    seq = torch.randn(3, 12, 7)
    with torch.no_grad():
        mean, value, _ = net(seq)
        # stepping one observation at a time with the history as state gives the same outputs
        state, steps = None, []
        for t in range(12):
            m, v, state = net(seq[:, t : t + 1], state)
            steps.append((m[:, 0], v[:, 0]))
        # causal: changing the future leaves the past unchanged, and changes the future
        later = seq.clone()
        later[:, 8:] += 1.0
        mean2, _, _ = net(later)
    torch.testing.assert_close(torch.stack([m for m, _ in steps], 1), mean, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.stack([v for _, v in steps], 1), value, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mean2[:, :8], mean[:, :8])
    assert not torch.allclose(mean2[:, 8:], mean[:, 8:])
    with pytest.raises(ValueError, match="context"):
        net(torch.randn(1, 33, 7))


def test_transformer_core_matches_torch_encoder_with_a_causal_mask():
    # the KV-cached layers compute what nn.TransformerEncoder computes on the whole episode
    import torch
    from torch import nn

    from iclr26.mikasa.ppo import CausalTransformerCore

    torch.manual_seed(0)
    core = CausalTransformerCore(16, max_len=32).eval()
    h = torch.randn(3, 11, 16)
    with torch.no_grad():
        out, (t, caches) = core(h)
        mask = nn.Transformer.generate_square_subsequent_mask(11)
        ref = core.body(h + core.pos[:, :11], mask=mask, is_causal=True)
        # and two chunks with the cache in between
        first, state = core(h[:, :4])
        second, _ = core(h[:, 4:], state)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat([first, second], 1), ref, atol=1e-5, rtol=1e-5)
    assert t == 11
    assert len(caches) == 2
    assert caches[0][0].shape == (3, 11, 16)


def test_transformer_cache_trains_through_chunks_and_steps_in_inference_mode():
    # with gradients the cache is concatenated (backward works across chunks); without, the
    # keys and values go into a preallocated buffer and stepping still matches the whole pass
    import torch

    from iclr26.mikasa.ppo import CausalTransformerCore

    torch.manual_seed(0)
    core = CausalTransformerCore(16, max_len=32)
    h = torch.randn(2, 9, 16, requires_grad=True)
    first, state = core(h[:, :5])
    second, _ = core(h[:, 5:], state)
    torch.cat([first, second], 1).sum().backward()
    assert h.grad is not None
    assert torch.isfinite(h.grad).all()
    with torch.inference_mode():
        whole, _ = core(h)
        state, outs = None, []
        for t in range(9):
            out, state = core(h[:, t : t + 1], state)
            outs.append(out)
    assert state[1][0][0].shape == (2, 32, 16)  # the buffer, filled up to step 9
    torch.testing.assert_close(torch.cat(outs, 1), whole, atol=1e-5, rtol=1e-5)


def test_running_mean_std_matches_the_pooled_moments():
    from iclr26.mikasa.ppo import RunningMeanStd

    rng = np.random.default_rng(0)
    batches = [rng.normal(2.0, 3.0, size=(n, 4)) for n in (5, 17, 1, 40)]
    rms = RunningMeanStd(4)
    for b in batches:
        rms.update(b)
    every = np.concatenate(batches)
    np.testing.assert_allclose(rms.mean, every.mean(0), atol=1e-4)
    np.testing.assert_allclose(rms.var, every.var(0), rtol=1e-4)
    z = rms.normalize(every)
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-4)
    assert rms.normalize(np.full((1, 4), 1e9)).max() == 10.0  # clipped


def test_ppo_transformer_trains_acts_and_is_deterministic():
    kw = {"num_envs": 4, "minibatches": 2, "total_steps": 4 * 60, "hidden": 16, "seed": 1}
    a = PPO("transformer", **kw).fit("RememberColor3-v0")
    b = PPO("transformer", **kw).fit("RememberColor3-v0")
    assert a.history_[-1]["env_steps"] == 240
    assert [h["policy_loss"] for h in a.history_] == [h["policy_loss"] for h in b.history_]
    assert all(np.isfinite(h["value_loss"]) for h in a.history_)
    # the policy remembers: its action at an act step depends on what the cue showed
    env = mk.make("RememberColor3-v0", backend="kinematic")
    dim = env.observation_space.shape[0]
    rng = np.random.default_rng(0)
    cue = rng.normal(size=(2, dim)).astype(np.float32)
    cue[1] += 1.0
    a.reset(2)
    a.act(cue)
    later = np.repeat(rng.normal(size=(1, dim)), 2, 0)
    act = a.act(later)
    assert act.shape == (2, 3)
    assert not np.allclose(act[0], act[1])
    res = mk.evaluate("RememberColor3-v0", a, 4, seed=0)
    assert 0.0 <= res["success_at_end"] <= 1.0


def test_ppo_gru_state_starts_at_zero_in_every_episode():
    # reset() drops the recurrent state: acting on a second episode after a first gives the
    # actions a fresh policy gives on that episode alone (no memory crosses episodes)
    kw = {"num_envs": 2, "minibatches": 1, "total_steps": 90, "hidden": 8, "seed": 0}
    a = PPO("gru", **kw).fit("ShellGameTouch-v0")
    dim = mk.make("ShellGameTouch-v0", backend="kinematic").observation_space.shape[0]
    rng = np.random.default_rng(0)
    first, second = rng.normal(size=(2, 5, 2, dim))
    a.reset(2)
    for o in first:
        a.act(o)
    a.reset(2)
    after = [a.act(o) for o in second]
    a.reset(2)
    fresh = [a.act(o) for o in second]
    np.testing.assert_array_equal(np.stack(after), np.stack(fresh))
    a.reset(2)
    a.act(first[0])
    assert not np.array_equal(a.act(second[0]), fresh[0])  # without reset the state carries


def test_ppo_state_mode_and_refusals():
    agent = PPO("mlp", obs_mode="state", num_envs=2, minibatches=1, total_steps=90, hidden=8)
    agent.fit("RememberColor3-v0")
    assert mk.evaluate("RememberColor3-v0", agent, 2)["n_episodes"] == 2
    with pytest.raises(RuntimeError, match="fit"):
        PPO("gru").act(np.zeros((1, 4)))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"policy": "slot_gru"}, "policy"),
        ({"policy": "transformer", "hidden": 6}, "hidden"),
        ({"num_envs": 0}, "num_envs"),
        ({"num_envs": 2, "minibatches": 4}, "minibatches"),
        ({"gamma": 1.5}, "gamma"),
        ({"lr": float("nan")}, "lr"),
        ({"ent_coef": -1.0}, "ent_coef"),
        ({"total_steps": 2.5}, "total_steps"),
        ({"obs_mode": "rgb"}, "obs_mode"),
        ({"normalize_obs": 1}, "normalize_obs"),
    ],
)
def test_ppo_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        PPO(**kwargs)


def test_e2_runs_a_subset_of_variants_and_refuses_unknown_ones():
    from iclr26.mikasa.experiments import ppo_experiment

    report = ppo_experiment(quick=True, steps=1_000, progress=False, variants=(("mlp", "state"),))
    md = report.to_markdown()
    assert "PPO-MLP in state mode" in md
    assert "beats PPO-MLP" not in md  # no memory-mode runs, so no memory-gap check
    with pytest.raises(ValueError, match="variants"):
        ppo_experiment(variants=(("cnn", "memory"),))
    with pytest.raises(ValueError, match="variants"):
        ppo_experiment(variants=())
    with pytest.raises(ValueError, match="seeds"):
        ppo_experiment(variants=(("mlp", "state"),), seeds=0)


def test_e2_runs_several_seeds_and_reports_their_mean():
    from iclr26.mikasa.experiments import ppo_experiment

    report = ppo_experiment(
        quick=True, steps=1_000, progress=False, variants=(("mlp", "memory"),), seeds=2
    )
    per_run = next(t for t in report.tables if t.title == "E2 per run").rows
    assert [r["seed"] for r in per_run] == [0, 1]
    summary = next(t for t in report.tables if t.title.startswith("E2: PPO")).rows
    assert summary[0]["seeds"] == 2
    assert summary[0]["mean"] == pytest.approx(np.mean([r["success at end"] for r in per_run]))
