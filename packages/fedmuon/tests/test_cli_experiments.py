import json
import sys

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
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--problem", "least_squares", "--lr", "-1", "--rounds", "1"])
    assert exc.value.code == 2
    assert "--lr" in capsys.readouterr().err


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


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["simulate", "--per-round", "10", "--clients", "4"], "--per-round 10 exceeds"),
        (["simulate", "--problem", "counterexample", "--clients", "4"], "--clients 4"),
    ],
)
def test_simulate_refuses_inconsistent_options_before_any_work(args, fragment, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert fragment in err[0], err


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["simulate", "--ns-steps", "-2"], "--ns-steps"),
        (["simulate", "--rounds", "0"], "--rounds"),
        (["simulate", "--clients", "0"], "--clients"),
        (["simulate", "--alpha", "1.5"], "--alpha"),
        (["simulate", "--lr", "nan"], "--lr"),
        (["simulate", "--beta", "0"], "--beta"),
        (["simulate", "--seed", "-1"], "--seed"),
        (["simulate", "--local-steps", "0"], "--local-steps"),
        (["simulate", "--eval-every", "0"], "--eval-every"),
        (["loopback", "--nodes", "0"], "--nodes"),
        (["loopback", "--rounds", "0"], "--rounds"),
        (["loopback", "--timeout", "-5"], "--timeout"),
        (["loopback", "--app", "no/such/folder"], "--app"),
    ],
)
def test_nonsense_is_rejected_at_parse_time_naming_the_option(args, option, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert option in err[-1], err


def test_loopback_refuses_a_toml_without_flower_apps(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    with pytest.raises(SystemExit):
        main(["loopback", "--app", str(tmp_path)])
    assert "names no serverapp and no clientapp" in capsys.readouterr().err


def test_loopback_without_the_flower_extra_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "flwr", None)  # as on a plain install
    assert main(["loopback"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "iclr26-fedmuon[flower]" in err[0], err


def test_loopback_refuses_an_existing_file_as_workdir(tmp_path, capsys):
    pytest.importorskip("flwr")
    f = tmp_path / "f"
    f.write_text("")
    assert main(["loopback", "--workdir", str(f)]) == 2
    assert "--workdir" in capsys.readouterr().err


def test_cli_lists_match_the_library():
    from iclr26.fedmuon import ALGORITHMS, NS_COEFFS, cli

    assert cli.ALGORITHMS == ALGORITHMS
    assert set(cli.COEFFS) == set(NS_COEFFS)


def test_help_imports_no_jax():
    import subprocess

    code = (
        "import sys\n"
        "from iclr26.fedmuon.cli import main\n"
        "try:\n    main(['loopback', '--help'])\nexcept SystemExit:\n    pass\n"
        "import iclr26.fedmuon\n"
        "print(sorted(m for m in ('jax', 'optax', 'flwr') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
