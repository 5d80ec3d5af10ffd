"""The loopback deployment: a SuperLink and two SuperNodes on 127.0.0.1, then ``flwr run``.

The deployment test is slow (every round starts ClientApp processes that import and compile JAX);
run it with ``make test-slow PKG=fedmuon``. The log parser and the demo app are tested fast.
"""

import importlib
import itertools
import sys

import numpy as np
import pytest

from iclr26.fedmuon.deploy import (
    LoopbackDeployment,
    find_tools,
    parse_round_metrics,
    simulate_demo,
    write_demo_app,
)

LOG = """\
INFO :      [ROUND 1/2]
INFO :      	└──> Aggregated MetricRecord: {'train_loss': 1.5, 'participants': 2, 'round_s': 12.5}
INFO :      	└──> Aggregated MetricRecord: {'eval_loss': 9.0}
INFO :
INFO :      [ROUND 2/2]
INFO :      	└──> Aggregated MetricRecord: {'train_loss': 1.25, 'participants': 1, 'round_s': 3e-1}
INFO :      Final results:
INFO :      	{ 1: { 'train_loss': '1.5e+00'}}
"""


def test_parse_round_metrics_reads_one_training_record_per_round():
    rows = parse_round_metrics(LOG)
    assert rows == [
        {"round": 1, "train_loss": 1.5, "participants": 2.0, "round_s": 12.5},
        {"round": 2, "train_loss": 1.25, "participants": 1.0, "round_s": 0.3},
    ]
    assert parse_round_metrics("no rounds here") == []


def test_demo_app_is_a_flower_app_whose_modules_import(tmp_path, monkeypatch):
    pytest.importorskip("flwr")
    import tomllib

    app = write_demo_app(tmp_path / "app", rounds=3, nodes=2, seed=1)
    meta = tomllib.loads((app / "pyproject.toml").read_text())
    assert meta["tool"]["flwr"]["app"]["config"]["num-server-rounds"] == 3
    monkeypatch.syspath_prepend(str(app))
    try:
        server = importlib.import_module("fedmuon_demo.server_app")
        client = importlib.import_module("fedmuon_demo.client_app")
        assert type(server.app).__name__ == "ServerApp"
        assert type(client.app).__name__ == "ClientApp"
        assert server.strategy.min_train_nodes == 2
    finally:
        for name in [m for m in sys.modules if m.startswith("fedmuon_demo")]:
            del sys.modules[name]


def test_simulated_demo_decreases_the_loss_deterministically():
    losses, ms = simulate_demo(4, nodes=2)
    assert losses == simulate_demo(4, nodes=2)[0]
    assert all(b < a for a, b in itertools.pairwise(losses))
    assert ms > 0


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="rounds"):
        write_demo_app(tmp_path, rounds=0)
    with pytest.raises(ValueError, match="nodes"):
        LoopbackDeployment(nodes=0)


def test_loopback_command_refuses_a_folder_that_is_no_app_before_starting(tmp_path, capsys):
    from iclr26.fedmuon.cli import main

    with pytest.raises(SystemExit) as exc:  # at parse time
        main(["loopback", "--app", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr()
    assert "not a Flower App" in err.err
    assert "SuperLink" not in err.out


@pytest.mark.slow
def test_loopback_deployment_matches_the_simulator(tmp_path):
    pytest.importorskip("flwr")
    try:
        find_tools()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    with LoopbackDeployment(nodes=2, workdir=tmp_path) as dep:
        run = dep.run(write_demo_app(tmp_path / "app", rounds=2), timeout=540)
    assert run.returncode == 0, run.output[-3000:]
    assert "[ROUND 2/2]" in run.output, run.output[-3000:]
    assert [r["participants"] for r in run.rounds] == [2, 2], run.output[-3000:]
    assert all(r["round_s"] >= r["client_train_s"] > 0 for r in run.rounds)
    # full local batches: the deployment computes exactly what the simulator computes
    simulated, _ = simulate_demo(2, nodes=2)
    np.testing.assert_allclose([r["train_loss"] for r in run.rounds], simulated, rtol=1e-5)
