"""Loopback deployment smoke test: a SuperLink and two SuperNodes on 127.0.0.1, then `flwr run`.

Slow (every round starts ClientApp processes that import and compile JAX); run with
`make test-slow PKG=fedmuon`.
"""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fedmuon-smoke"
version = "1.0.0"
description = "FedMuon loopback smoke test"
license = "MIT"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "iclr26"

[tool.flwr.app.components]
serverapp = "smoke_app.server_app:app"
clientapp = "smoke_app.client_app:app"

[tool.flwr.app.config]
num-server-rounds = 2
"""

TASK = """\
from iclr26.fedmuon import FedConfig, LMOSpec, least_squares

PROBLEM = least_squares(n_clients=2, examples=16, d_in=4, d_out=3, seed=0)
CFG = FedConfig(local_steps=3, batch_size=8, lr=0.02, alpha=0.1, lmo=LMOSpec(ns_steps=5))


def load_data(context):
    i = int(context.node_config.get("partition-id", 0))
    return {k: v[i] for k, v in PROBLEM.clients.data.items()}
"""

SERVER = """\
from iclr26.fedmuon.flower import FedMuonStrategy, make_server_app
from smoke_app.task import CFG, PROBLEM

strategy = FedMuonStrategy(
    CFG, PROBLEM.init_params, fraction_train=1.0, min_train_nodes=2, fraction_evaluate=0.0
)
app = make_server_app(strategy, PROBLEM.init_params, num_rounds=2)
"""

CLIENT = """\
from iclr26.fedmuon.flower import make_client_app
from smoke_app.task import PROBLEM, load_data

app = make_client_app(PROBLEM.loss_fn, load_data, PROBLEM.init_params)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


@pytest.mark.slow
def test_fedmuon_runs_on_a_loopback_flower_deployment(tmp_path: Path):
    bindir = Path(sys.executable).parent
    tools = {
        name: shutil.which(name, path=str(bindir))
        for name in ("flower-superlink", "flower-supernode", "flwr")
    }
    if not all(tools.values()):
        pytest.skip(f"Flower executables missing: {tools}")
    app = tmp_path / "app"
    (app / "smoke_app").mkdir(parents=True)
    (app / "pyproject.toml").write_text(PYPROJECT)
    (app / "smoke_app" / "__init__.py").write_text("")
    (app / "smoke_app" / "task.py").write_text(TASK)
    (app / "smoke_app" / "server_app.py").write_text(SERVER)
    (app / "smoke_app" / "client_app.py").write_text(CLIENT)
    link = free_port()
    home = tmp_path / "flwr-home"
    home.mkdir()
    (home / "config.toml").write_text(
        textwrap.dedent(f"""\
        [superlink]
        default = "loopback"

        [superlink.loopback]
        address = "127.0.0.1:{link}"
        insecure = true
        """)
    )
    env = {
        **os.environ,
        "FLWR_HOME": str(home),
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
    }
    procs: list[subprocess.Popen] = []
    logs = []

    def start(args: list[str], name: str) -> None:
        log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed in finally
        logs.append(log)
        # own session: the SuperNodes' SuperExec children are stopped with them
        procs.append(
            subprocess.Popen(
                args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )

    try:
        start([tools["flower-superlink"], "--insecure", "--port", str(link),
               "--database", str(tmp_path / "state.db"), "--disable-runtime-dependency-installation"], "superlink")  # fmt: skip
        wait_for_port(link)
        for i in range(2):
            start([tools["flower-supernode"], "--insecure", "--superlink", f"127.0.0.1:{link}",
                   "--port", str(free_port()), "--node-config", f"partition-id={i}"], f"supernode{i}")  # fmt: skip
        time.sleep(5)
        run = subprocess.run(
            [tools["flwr"], "run", ".", "loopback", "--stream"],
            cwd=app, env=env, capture_output=True, text=True, timeout=540,
        )  # fmt: skip
        out = run.stdout + run.stderr
        losses = [
            float(x) for x in re.findall(r"'train_loss': ([0-9.e+-]+), 'participants': 2", out)
        ]
        assert run.returncode == 0, out[-3000:]
        assert "[ROUND 2/2]" in out, out[-3000:]
        assert len(losses) == 2, out[-3000:]
        assert losses[1] < losses[0]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
        for log in logs:
            log.close()
