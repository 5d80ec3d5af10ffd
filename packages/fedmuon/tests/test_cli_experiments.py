import json

import numpy as np
import pytest

from iclr26.fedmuon import (
    FedConfig,
    LMOSpec,
    digits,
    dirichlet_partition,
    iid_partition,
    least_squares,
    run_problem,
    stack_clients,
)
from iclr26.fedmuon.cli import main


def test_simulate_command_prints_a_history(capsys):
    args = ["simulate", "--problem", "counterexample", "--algo", "local_muon", "--rounds", "5",
            "--alpha", "0.5", "--lr", "0.013", "--eval-every", "5", "--json"]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["round"] for r in out["history"]] == [0, 5]
    assert out["history"][-1]["grad_fro"] == pytest.approx(np.sqrt(2), abs=1e-6)


def test_cli_reports_bad_arguments(capsys):
    assert main(["simulate", "--problem", "least_squares", "--lr", "-1", "--rounds", "1"]) == 2
    assert "lr" in capsys.readouterr().err


def test_partitions():
    labels = np.repeat(np.arange(10), 30)
    parts = dirichlet_partition(labels, 8, 0.1, seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(300))
    skew = [len(np.unique(labels[p])) for p in parts]
    iid = [len(np.unique(labels[p])) for p in iid_partition(300, 8, seed=0)]
    assert np.mean(skew) < np.mean(iid)
    assert dirichlet_partition(labels, 8, 0.1, seed=0)[3].tolist() == parts[3].tolist()
    data = stack_clients([{"x": np.ones((3, 2))}, {"x": np.zeros((5, 2))}])
    assert data.data["x"].shape == (2, 8, 2)
    assert data.counts.tolist() == [3, 5]
    with pytest.raises(ValueError, match="beta"):
        dirichlet_partition(labels, 8, 0.0, seed=0)
    with pytest.raises(ValueError, match="no examples"):
        stack_clients([{"x": np.ones((0, 2))}])


def test_headline_claims_at_tiny_scale():
    """E2 in miniature (LocalMuon's floor stays, FedMuon's shrinks with η) and E3 on digits."""
    problem = least_squares(n_clients=8, examples=16, d_in=6, d_out=4, heterogeneity=1.0, seed=0)
    floor = {}
    for algo in ("local_muon", "fedmuon"):
        for lr in (0.1, 0.01):
            cfg = FedConfig(n_clients=8, clients_per_round=4, local_steps=5, batch_size=None,
                            rounds=150, lr=lr, alpha=0.5, lmo=LMOSpec(ns_steps=None))  # fmt: skip
            h = run_problem(algo, problem, cfg, seed=0, eval_every=5)
            floor[algo, lr] = float(np.mean(h.grad_fro[-6:]))
    assert floor["local_muon", 0.01] > 0.5 * floor["local_muon", 0.1], floor
    assert floor["fedmuon", 0.01] < 0.3 * floor["fedmuon", 0.1], floor
    assert floor["fedmuon", 0.01] < 0.2 * floor["local_muon", 0.01], floor
    problem = digits("softmax", beta=0.1, seed=0)
    cfg = FedConfig(rounds=60, lr=0.05, alpha=0.1)
    acc = {
        a: run_problem(a, problem, cfg, seed=0, eval_every=60).final("accuracy")
        for a in ("fedmuon", "local_muon")
    }
    assert acc["fedmuon"] > acc["local_muon"] + 0.02, acc
    assert acc["fedmuon"] > 0.85, acc
