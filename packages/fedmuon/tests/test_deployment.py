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
        dep_cache = dep.compilation_cache
    assert run.returncode == 0, run.output[-3000:]
    assert "[ROUND 2/2]" in run.output, run.output[-3000:]
    assert [r["participants"] for r in run.rounds] == [2, 2], run.output[-3000:]
    assert all(r["round_s"] >= r["client_train_s"] > 0 for r in run.rounds)
    # full local batches: the deployment computes exactly what the simulator computes
    simulated, _ = simulate_demo(2, nodes=2)
    np.testing.assert_allclose([r["train_loss"] for r in run.rounds], simulated, rtol=1e-5)
    # round 2's fresh ClientApp processes load the client step from the deployment's JAX cache
    assert run.rounds[1]["client_compile_s"] < 0.5 * run.rounds[0]["client_compile_s"], run.rounds
    assert any(dep_cache.iterdir())


FAKE_FLWR = """#!/bin/sh
echo $$ > pid
echo "INFO :      [ROUND 1/3]"
echo "INFO :      Aggregated MetricRecord: {'train_loss': 1.5, 'participants': 2}"
exec sleep 60
"""


@pytest.fixture
def fake_deployment(tmp_path, monkeypatch):
    """A deployment whose ``flwr`` is a script that logs one round and hangs (no Flower)."""
    import iclr26.fedmuon.deploy as deploy

    tool = tmp_path / "flwr"
    tool.write_text(FAKE_FLWR)
    tool.chmod(0o755)
    monkeypatch.setattr(deploy, "find_tools", lambda: dict.fromkeys(deploy.TOOLS, str(tool)))
    app = write_demo_app(tmp_path / "app", rounds=3)
    dep = LoopbackDeployment(nodes=1, workdir=tmp_path / "work")
    dep.workdir.mkdir()
    dep.port = 1  # as if started
    return dep, app


def _gone(pid):
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_run_stops_flwr_at_the_timeout_and_keeps_the_rounds(fake_deployment):
    dep, app = fake_deployment
    with pytest.raises(TimeoutError, match="did not finish within 1 s"):
        dep.run(app, timeout=1.0)
    assert _gone(int((app / "pid").read_text()))
    assert dep.last_rounds() == [{"round": 1, "train_loss": 1.5, "participants": 2.0}]


def test_ctrl_c_stops_flwr_and_keeps_the_rounds(fake_deployment, monkeypatch):
    import iclr26.fedmuon.deploy as deploy

    dep, app = fake_deployment
    real_sleep = deploy.time.sleep
    calls = []

    def interrupt(seconds):  # one Ctrl-C once a round is logged (time.sleep is global)
        calls.append(seconds)
        if "raised" not in calls and len(calls) > 5 and dep.last_rounds():
            calls.append("raised")
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(deploy.time, "sleep", interrupt)
    with pytest.raises(KeyboardInterrupt):
        dep.run(app, timeout=60)
    monkeypatch.setattr(deploy.time, "sleep", real_sleep)
    assert _gone(int((app / "pid").read_text()))
    assert [r["round"] for r in dep.last_rounds()] == [1]


def test_a_dead_deployment_process_stops_the_run_with_one_line(fake_deployment):
    import subprocess

    dep, app = fake_deployment
    (dep.workdir / "supernode0.log").write_text("starting\nOSError: address already in use\n")
    dead = subprocess.Popen(["sh", "-c", "exit 3"])
    dead.wait()
    dep._procs.append(("supernode0", dead))
    with pytest.raises(ChildProcessError, match="supernode0 process exited with status 3: OSError"):
        dep.run(app, timeout=60)
    # The dead node may be noticed before the fake flwr wrote its pid; if it did, it is gone.
    pid_file = app / "pid"
    assert not pid_file.exists() or _gone(int(pid_file.read_text()))


def test_a_clientapp_missing_flowers_start_window_is_one_warning(fake_deployment):
    from iclr26.fedmuon.deploy import _EXPIRED

    dep, app = fake_deployment
    (dep.workdir / "supernode0.log").write_text(f"ERROR : {_EXPIRED}.\n" * 2)
    with pytest.warns(RuntimeWarning, match="30 s start-up window") as record:
        with pytest.raises(TimeoutError):
            dep.run(app, timeout=4.5)
    assert len(record) == 1


def test_check_app_names_what_is_missing(tmp_path):
    from iclr26.fedmuon.deploy import check_app

    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_app(tmp_path / "none")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        check_app(tmp_path / "file")
    with pytest.raises(FileNotFoundError, match=r"no pyproject\.toml"):
        check_app(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.flwr.app.components]\nserverapp = 'a:b'\n")
    with pytest.raises(ValueError, match="names no clientapp"):
        check_app(tmp_path)
    (tmp_path / "pyproject.toml").write_text("not = [toml")
    with pytest.raises(ValueError, match="not valid TOML"):
        check_app(tmp_path)
    assert check_app(write_demo_app(tmp_path / "app")) == tmp_path / "app"


def test_the_deployment_hands_its_supernodes_a_compilation_cache(tmp_path, monkeypatch):
    import iclr26.fedmuon.deploy as deploy

    monkeypatch.setattr(deploy, "find_tools", lambda: dict.fromkeys(deploy.TOOLS, "/bin/true"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/elsewhere")
    default = LoopbackDeployment(workdir=tmp_path / "w")
    assert default.compilation_cache == tmp_path / "w" / "jax-cache"
    assert LoopbackDeployment(workdir=tmp_path, compilation_cache=False).compilation_cache is None
    env = deploy.compilation_cache_env(tmp_path / "c")
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "c")
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"


def test_loopback_command_on_ctrl_c_prints_the_finished_rounds_and_exits_130(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("flwr")
    import iclr26.fedmuon.deploy as deploy
    from iclr26.fedmuon.cli import main

    class Interrupted:
        def __init__(self, nodes, workdir, compilation_cache):
            self.workdir, self.port = tmp_path, 1

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.stopped = True

        def run(self, app, run_config, timeout):
            raise KeyboardInterrupt

        def last_rounds(self):
            return [{"round": 1, "train_loss": 1.5}]

    monkeypatch.setattr(deploy, "LoopbackDeployment", Interrupted)
    assert main(["loopback", "--rounds", "3"]) == 130
    err = capsys.readouterr().err
    assert "interrupted after 1 round(s)" in err
    assert "train_loss 1.5" in err
