"""bench's FLOP count of one PVO update against XLA's own count of the compiled update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from iclr26.pvo.agents import AgentConfig, create, update
from iclr26.pvo.experiments import pvo_update_flops
from iclr26.pvo.nets import MLP


def test_pvo_update_flops_match_xla_cost_analysis():
    hidden = 64
    cfg = AgentConfig(algo="pvo", hidden=(hidden, hidden), reward_hidden=(hidden, hidden))
    B, P, L = cfg.transition_batch, cfg.pair_batch, 25
    z = jnp.zeros
    pairs = {"obs0": z((P, L + 1, 3)), "act0": z((P, L, 1)), "done0": z((P, L)),
             "obs1": z((P, L + 1, 3)), "act1": z((P, L, 1)), "done1": z((P, L)), "label": z((P,))}  # fmt: skip
    batch = {
        "transitions": {
            "obs": z((B, 3)),
            "act": z((B, 1)),
            "reward": z((B,)),
            "next_obs": z((B, 3)),
            "done": z((B,)),
        },
        "va": pairs,
        "prefs": {"label": z((1,))},
        "key": jax.random.key(0),
    }
    state = create(jax.random.key(0), 3, 1, cfg)
    rm = MLP(cfg.reward_hidden, 1).init(jax.random.key(1), z((1, 4)))
    compiled = jax.jit(lambda s, b, r: update(s, b, cfg, r)).lower(state, batch, rm).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    xla = float(cost["flops"])
    ours = pvo_update_flops(hidden, B, 2 * P * L)
    # XLA adds the elementwise work (ReLU, Adam, losses) and saves what it can share (V(s) is
    # one forward pass for both the V loss and the advantage; no input gradient at the first
    # layer): within a few percent of the matmul count. The old count (everything forward +
    # backward, 138 MFLOP at 64 × 64) or one forward pass more or less would fail.
    assert 0.95 * ours <= xla <= 1.1 * ours, (ours, xla)


def test_pvo_update_flops_refuses_bad_sizes():
    with pytest.raises(ValueError, match="hidden"):
        pvo_update_flops(0)
    with pytest.raises(TypeError, match="pair_steps"):
        pvo_update_flops(64, 256, 800.5)


def test_bench_rounds_tables_checks_and_figure(tmp_path, monkeypatch):
    """bench's wiring with a stand-in trainer whose throughput is known: k seeds under vmap run
    at k × 100 seed-updates/s of wall time and 2 × 100 per CPU-second, so the speed-up is 5× in
    wall and 2× in CPU time in every round; the report has its tables, checks and PNG."""
    from types import SimpleNamespace

    import numpy as np

    from iclr26.pvo import experiments
    from iclr26.pvo.train import TrainResult

    def fake_train(cfg, ds, prefs, *, steps, seeds, **kwargs):
        n = len(seeds)
        rate, cpu = 100.0 * n, 100.0 * min(n, 2)
        scores = np.tile(np.arange(n, dtype=float), (2, 1))
        return TrainResult(cfg, [steps // 2, steps], scores, None, [], rate, 0, cpu)

    monkeypatch.setattr(experiments, "make_dataset", lambda *a, **k: SimpleNamespace(obs=0, act=0))
    monkeypatch.setattr(experiments, "sample_segment_pairs", lambda *a, **k: None)
    monkeypatch.setattr(experiments, "label_pairs", lambda *a, **k: None)
    monkeypatch.setattr(experiments, "fit_reward_models", lambda prefs, seeds: list(seeds))
    monkeypatch.setattr(experiments, "train_offline", fake_train)
    monkeypatch.setattr(experiments, "d3rlpy_parity", lambda *a, **k: None)
    report = experiments.bench(quick=True)
    checks = {c.name: c for c in report.checks}
    vmap = next(c for name, c in checks.items() if name.startswith("vmap over 5 seeds"))
    assert vmap.held
    assert vmap.detail.startswith("5.00×")
    assert "per CPU-second 2.00×" in vmap.detail
    titles = [t.title for t in report.tables]
    assert any(t.startswith("All agents") for t in titles)
    agents = report.tables[0].rows
    assert len(agents) == len(experiments.LABELS)
    assert agents[0]["ms per seed-update (wall)"] == pytest.approx(2.0)  # 5 seeds: 500/s
    flop = next(t for t in report.tables if t.title.startswith("One PVO update"))
    ms = next(r for r in flop.rows if r["quantity"] == "ms per update (CPU)")
    assert ms["median"] == pytest.approx(10.0)  # one seed: 100 updates per CPU-second
    report.write(tmp_path)
    assert (tmp_path / "bench_time_per_update.png").stat().st_size > 0
