"""The default reproduce's wiring, with a stand-in trainer whose scores are known: PVO scores
100 + 1000 / M and MR + IQL 100, so PVO leads everywhere and most at the smallest budget."""

from types import SimpleNamespace

import numpy as np
import pytest


def test_default_reproduce_runs_the_p3_and_p4_sweeps(tmp_path, monkeypatch):
    from iclr26.pvo import experiments
    from iclr26.pvo.train import TrainResult

    runs = []

    def fake_train(cfg, ds, prefs, *, steps, seeds, **kwargs):
        runs.append((cfg.algo, ds.kind, prefs, len(seeds)))
        score = 100.0 + (1000.0 / prefs if cfg.algo == "pvo" else 0.0)
        scores = np.full((2, len(seeds)), score)
        return TrainResult(cfg, [steps // 2, steps], scores, None, None, 1.0, 0, 1.0)

    def fake_dataset(kind, n, *, expert_ratio=0.3, seed=0):
        return SimpleNamespace(kind=(kind, expert_ratio), obs=0, act=0)

    monkeypatch.setattr(experiments, "make_dataset", fake_dataset)
    monkeypatch.setattr(experiments, "sample_segment_pairs", lambda obs, act, m, **k: m)
    monkeypatch.setattr(experiments, "label_pairs", lambda pairs, teacher, **k: pairs)
    monkeypatch.setattr(
        experiments,
        "fit_reward_models",
        lambda prefs, seeds: [SimpleNamespace(val_accuracy=0.9) for _ in seeds],
    )
    monkeypatch.setattr(experiments, "train_offline", fake_train)
    monkeypatch.setattr(
        experiments,
        "tabular_error_propagation",
        lambda n, seed=0: [
            {"pairs M": 20, "method": m, "mean regret": 1.0, "std": 0.0, "seeds": n}
            for m in ("TD on r̂", "PVO (min-norm)")
        ],
    )
    report = experiments.reproduce(quick=False)
    tables = {t.title.split(":")[0]: t for t in report.tables}
    p3, p4 = tables["P3"].rows, tables["P4"].rows
    assert [r["expert ratio"] for r in p3] == [0.1, 0.3, 0.5, 1.0]
    assert [r["pairs M"] for r in p4] == [50, 100, 250, 500, 1000]
    assert all(r["seeds"] == 3 for r in p3 + p4)
    assert p4[0]["gap"] == pytest.approx(20.0)
    assert p4[-1]["gap"] == pytest.approx(1.0)
    # The sweeps train on the mixed datasets at each ratio and use 3 seeds.
    mixed = {kind[1] for algo, kind, m, n in runs if kind[0] == "mixed" and n == 3}
    assert mixed == {0.1, 0.3, 0.5, 1.0}
    checks = {c.name: c.held for c in report.checks}
    assert checks["P3 PVO ≥ MR+IQL at most expert ratios"]
    assert checks["P4 PVO's lead over MR+IQL is largest at the smallest budget"]
    report.write(tmp_path)
    assert (tmp_path / "p3_p4_sweeps.png").stat().st_size > 0
