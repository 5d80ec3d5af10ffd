"""The d3rlpy bridge: the same transitions in d3rlpy's dataset, the same evaluation start states
for a NumPy policy, bad input refused before d3rlpy is needed, and bench's "skipped" row when d3rlpy
cannot be imported (the d3rlpy tests run only where d3rlpy is installed)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr26.pvo import experiments, peers
from iclr26.pvo.data import OfflineDataset, make_dataset
from iclr26.pvo.envs import hidden_reward, scripted_action
from iclr26.pvo.evaluate import rollout_returns
from iclr26.shared import Report


@pytest.fixture(scope="module")
def ds():
    return make_dataset("medium_replay", 3, seed=0)


def test_numpy_rollouts_equal_the_jitted_rollouts_for_the_same_key():
    def policy(o):
        return jnp.clip(-2.0 * o[..., 1:2] - 0.5 * o[..., 2:3], -2, 2)  # a PD-like law

    key = jax.random.key(5)
    expected = np.asarray(rollout_returns(policy, key, 4, "dense"))
    got = peers.rollout_returns_numpy(lambda o: np.asarray(policy(jnp.asarray(o))), key, 4, "dense")
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    other = peers.rollout_returns_numpy(
        lambda o: np.asarray(policy(jnp.asarray(o))), jax.random.key(6), 4, "dense"
    )
    assert not np.allclose(other, expected)  # the key sets the start states


def test_numpy_rollouts_score_the_scripted_expert_above_a_zero_policy():
    key = jax.random.key(0)

    def expert(o):
        return np.asarray(scripted_action(jnp.asarray(o)))

    good = peers.rollout_returns_numpy(expert, key, 3, "sparse")
    idle = peers.rollout_returns_numpy(lambda o: np.zeros((len(o), 1)), key, 3, "sparse")
    assert good.mean() > idle.mean() + 50


@pytest.mark.parametrize(
    ("call", "error", "needle"),
    [
        (lambda ds: peers.to_mdp_dataset(ds.obs), TypeError, "dataset must be an OfflineDataset"),
        (lambda ds: peers.to_mdp_dataset(ds, "shaped"), ValueError, "reward"),
        (lambda ds: peers.train_d3rlpy_iql(ds, steps=0), ValueError, "steps"),
        (lambda ds: peers.train_d3rlpy_iql(ds, steps=2, seeds=[]), ValueError, "seeds"),
        (lambda ds: peers.train_d3rlpy_iql(ds, steps=2, seeds=[-1]), ValueError, "seed"),
        (lambda ds: peers.train_d3rlpy_iql(ds, steps=2, batch_size=0), ValueError, "batch_size"),
        (lambda ds: peers.train_d3rlpy_iql(ds, steps=2, hidden=(0,)), ValueError, "hidden"),
        (lambda ds: peers.train_d3rlpy_iql(ds, steps=2.5), TypeError, "steps"),
        (
            lambda ds: peers.train_d3rlpy_iql(
                OfflineDataset("x", ds.obs[..., :2], ds.act, ds.done, ds.reward), steps=2
            ),
            ValueError,
            "obs dim 2",
        ),
        (
            lambda ds: peers.rollout_returns_numpy(np.zeros_like, jax.random.key(0), 0),
            ValueError,
            "n_episodes",
        ),
        (
            lambda ds: peers.rollout_returns_numpy(
                lambda o: np.full((len(o), 1), np.nan), jax.random.key(0), 2
            ),
            ValueError,
            "non-finite",
        ),
    ],
)
def test_bad_input_is_refused_before_d3rlpy_is_needed(ds, call, error, needle):
    with pytest.raises(error, match=needle):
        call(ds)


def test_bench_reports_a_skipped_row_without_d3rlpy(ds, monkeypatch):
    monkeypatch.setattr(peers, "d3rlpy_version", lambda: None)
    report = Report("iclr26-pvo", "bench", "parity", seed=0)
    experiments.d3rlpy_parity(report, ds, None, 10, 2, 0)
    (table,) = report.tables
    assert list(table.rows) == [{"method": "d3rlpy IQL", "status": "skipped: d3rlpy not installed"}]
    assert report.checks == []


def test_mdp_dataset_holds_exactly_our_transitions(ds):
    pytest.importorskip("d3rlpy")
    mdp = peers.to_mdp_dataset(ds, "sparse")
    tr = ds.transitions("sparse")
    assert mdp.transition_count == ds.n_transitions
    t = ds.act.shape[1]
    for e, episode in enumerate(mdp.episodes):
        for i in (0, t // 2, t - 1):
            got = mdp.transition_picker(episode, i)
            j = e * t + i
            np.testing.assert_allclose(got.observation, tr["obs"][j], rtol=1e-6)
            np.testing.assert_allclose(got.action, tr["act"][j], rtol=1e-6)
            np.testing.assert_allclose(got.reward[0], tr["reward"][j], rtol=1e-6)
            np.testing.assert_allclose(got.next_observation, tr["next_obs"][j], rtol=1e-6)
            assert got.terminal == 0.0
    np.testing.assert_allclose(
        np.asarray(hidden_reward(ds.obs[:, :-1], ds.act, "sparse")).sum(),
        sum(float(ep.rewards.sum()) for ep in mdp.episodes),
        rtol=1e-5,
    )


@pytest.mark.slow
def test_d3rlpy_iql_trains_on_our_data_and_returns_finite_values(ds):
    pytest.importorskip("d3rlpy")
    out = peers.train_d3rlpy_iql(ds, reward="sparse", steps=5, seeds=[0, 1], hidden=(16,),
                                 batch_size=32, eval_episodes=2)  # fmt: skip
    assert out.returns.shape == (2, 2)
    assert np.all(np.isfinite(out.mean_v))
    assert np.all(np.isfinite(out.mean_q))
    assert np.all(out.seconds_per_update >= out.seconds_per_gradient_step)


@pytest.mark.slow  # compiles three training and evaluation programs (~25 s)
def test_bench_parity_tables_and_checks_with_a_stand_in_peer(ds, monkeypatch):
    """The bench wiring (our side: evaluation on the same start states, V and Q, timing) with a
    stand-in for d3rlpy that returns our own policy's returns: the return check must hold."""
    from iclr26.pvo.agents import AgentConfig
    from iclr26.pvo.train import train_offline

    cfg = AgentConfig(algo="oracle_iql", hidden=(8,), transition_batch=16)
    ours = train_offline(cfg, ds, None, steps=4, eval_every=2, seeds=[0, 1], reward="sparse",
                         eval_episodes=2)  # fmt: skip
    seen = {}

    def stand_in(dataset, **kw):
        seen.update(kw)
        n = len(kw["seeds"])
        state = jax.tree.map(lambda x: x[0], ours.states)
        from iclr26.pvo.agents import act

        ret = np.asarray(rollout_returns(lambda o: act(state, o, cfg, 1),
                                         jax.random.key(kw["eval_seed"]), 10, "sparse"))  # fmt: skip
        return peers.D3rlpyIQLResult(np.tile(ret, (n, 1)), np.zeros(n), np.zeros(n),
                                     np.full(n, 1e3), np.full(n, 5e2), 1, "stand-in")  # fmt: skip

    monkeypatch.setattr(peers, "d3rlpy_version", lambda: "stand-in")
    monkeypatch.setattr(peers, "train_d3rlpy_iql", stand_in)
    ours = ours.__class__(**{**ours.__dict__, "states": jax.tree.map(
        lambda x: jnp.stack([x[0], x[0]]), ours.states)})  # fmt: skip
    report = Report("iclr26-pvo", "bench", "parity", seed=0)
    experiments.d3rlpy_parity(report, ds, ours, 4, 2, 0)
    assert seen["hidden"] == (8,)
    assert seen["seeds"] == [0, 1]
    parity, timing = report.tables
    assert parity.rows[0]["IQM"] == pytest.approx(parity.rows[1]["IQM"])
    assert timing.rows[1]["ratio to ours"] > 1
    assert [c.held for c in report.checks] == [True, True]
