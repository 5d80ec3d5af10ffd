"""A real Flower deployment on loopback: a SuperLink and SuperNodes on 127.0.0.1 (extra ``flower``).

:class:`LoopbackDeployment` starts ``flower-superlink`` and one ``flower-supernode`` per node as
separate processes (the same executables a multi-machine deployment runs, here on 127.0.0.1
without TLS), then ``flwr run`` submits a Flower App to them. :func:`write_demo_app` writes a
small FedMuon App (least squares, one data partition per node) so the whole path can be tried
with one command (``iclr26-fedmuon loopback``) and measured by ``bench``.

Requires ``pip install "iclr26-fedmuon[flower]"``; tested against ``flwr`` 1.42 (one HTTP port per
process; a database file, since ``:memory:`` failed under concurrent pushes in our runs).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.fedmuon.algorithms import FedConfig, init_clients, init_server, round_lr
from iclr26.fedmuon.lmo import LMOSpec
from iclr26.fedmuon.problems import Problem, least_squares
from iclr26.fedmuon.simulate import make_round
from iclr26.shared import check_int

__all__ = [
    "DeploymentRun",
    "LoopbackDeployment",
    "check_app",
    "demo_config",
    "demo_problem",
    "find_tools",
    "parse_round_metrics",
    "simulate_demo",
    "write_demo_app",
]

TOOLS = ("flower-superlink", "flower-supernode", "flwr")

_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fedmuon-demo"
version = "1.0.0"
description = "FedMuon on a Flower deployment: least squares, one partition per node"
license = "MIT"
dependencies = ["iclr26-fedmuon[flower]"]

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "iclr26"

[tool.flwr.app.components]
serverapp = "fedmuon_demo.server_app:app"
clientapp = "fedmuon_demo.client_app:app"

[tool.flwr.app.config]
num-server-rounds = {rounds}
"""

_TASK = """\
from iclr26.fedmuon.deploy import demo_config, demo_problem

PROBLEM = demo_problem({nodes}, seed={seed})
CFG = demo_config()


def load_data(context):
    i = int(context.node_config.get("partition-id", 0))
    count = int(PROBLEM.clients.counts[i])
    return {{k: v[i, :count] for k, v in PROBLEM.clients.data.items()}}
"""

_SERVER = """\
from iclr26.fedmuon.flower import FedMuonStrategy, make_server_app
from fedmuon_demo.task import CFG, PROBLEM

strategy = FedMuonStrategy(
    CFG, PROBLEM.init_params, fraction_train=1.0, min_train_nodes={nodes},
    min_available_nodes={nodes}, fraction_evaluate=0.0, seed={seed},
)
app = make_server_app(strategy, PROBLEM.init_params, num_rounds={rounds})
"""

_CLIENT = """\
from iclr26.fedmuon.flower import make_client_app
from fedmuon_demo.task import PROBLEM, load_data

app = make_client_app(PROBLEM.loss_fn, load_data, PROBLEM.init_params, seed={seed})
"""


def demo_problem(nodes: int, *, seed: int = 0) -> Problem:
    """The demo's data: heterogeneous least squares, one client per node (16 examples, 4 → 3)."""
    return least_squares(n_clients=nodes, examples=16, d_in=4, d_out=3, seed=seed)


def demo_config() -> FedConfig:
    """The demo's client hyperparameters: K = 5 full-batch steps, η = 0.05, α = 0.5, NS5.

    Full local batches make every round deterministic, whatever ids the SuperLink gives the
    nodes, so a deployment can be compared with :func:`simulate_demo` number for number.
    """
    return FedConfig(local_steps=5, batch_size=None, lr=0.05, alpha=0.5, lmo=LMOSpec(ns_steps=5))


def simulate_demo(rounds: int, nodes: int = 2, *, seed: int = 0) -> tuple[list[float], float]:
    """The demo in the single-process simulator: per-round mean local loss and ms per round.

    The losses are the quantity the Flower strategy logs as ``train_loss`` (every node sampled
    every round, equal data sizes), so they must match a loopback run of :func:`write_demo_app`.
    The time is the median of the compiled rounds after the first.
    """
    check_int(rounds, "rounds", low=1)
    problem = demo_problem(nodes, seed=seed)
    cfg = dataclasses.replace(demo_config(), n_clients=nodes, clients_per_round=nodes)
    round_fn = make_round("fedmuon", problem.loss_fn, cfg.static_key())
    server = init_server("fedmuon", problem.init_params, cfg)
    clients = init_clients(problem.init_params, nodes)
    data = jax.tree.map(jnp.asarray, problem.clients.data)
    counts = jnp.asarray(problem.clients.counts)
    key = jax.random.key(seed)
    losses, times = [], []
    for r in range(rounds):
        t0 = time.perf_counter()
        server, clients, loss = round_fn(
            server, clients, data, counts, key, jnp.float32(round_lr(cfg, r))
        )
        losses.append(float(loss))  # blocks until the round is done
        times.append(time.perf_counter() - t0)
    return losses, 1e3 * float(np.median(times[1:] if rounds > 1 else times))


def write_demo_app(path: str | Path, *, rounds: int = 2, nodes: int = 2, seed: int = 0) -> Path:
    """Write a FedMuon Flower App (``pyproject.toml`` + package ``fedmuon_demo``) into ``path``.

    The app trains FedMuon on :func:`demo_problem` with :func:`demo_config`, one client partition
    per SuperNode (``--node-config partition-id=i``), every node sampled every round. Every
    SuperNode's Python environment needs ``iclr26-fedmuon[flower]``.
    """
    check_int(rounds, "rounds", low=1)
    check_int(nodes, "nodes", low=1)
    check_int(seed, "seed", low=0)
    root = Path(path)
    pkg = root / "fedmuon_demo"
    pkg.mkdir(parents=True, exist_ok=True)
    fill = {"rounds": rounds, "nodes": nodes, "seed": seed}
    (root / "pyproject.toml").write_text(_PYPROJECT.format(**fill))
    (pkg / "__init__.py").write_text("")
    for name, text in (("task", _TASK), ("server_app", _SERVER), ("client_app", _CLIENT)):
        (pkg / f"{name}.py").write_text(text.format(**fill))
    return root


_ROUND = re.compile(r"\[ROUND (\d+)/(\d+)\]")
_TRAIN = re.compile(r"Aggregated MetricRecord: (\{[^}]*\})")


def parse_round_metrics(output: str) -> list[dict[str, float]]:
    """The strategy's aggregated training metrics, one dict per round, from ``flwr run`` logs.

    Reads the ``[ROUND r/R]`` headers and the ``Aggregated MetricRecord: {...}`` line that
    Flower's strategy logs after each ``aggregate_train`` (``train_loss``, ``participants``, and
    :class:`~iclr26.fedmuon.flower.FedMuonStrategy`'s ``round_s`` and ``client_train_s``).
    """
    rows: list[dict[str, float]] = []
    current = None
    for line in output.splitlines():
        if m := _ROUND.search(line):
            current = int(m.group(1))
        elif (m := _TRAIN.search(line)) and current is not None:
            if rows and rows[-1]["round"] == current:
                continue  # evaluation metrics of the same round
            values = ast.literal_eval(m.group(1))
            rows.append({"round": current, **{k: float(v) for k, v in values.items()}})
    return rows


@dataclass
class DeploymentRun:
    """What ``flwr run`` returned: exit status, logs, wall time and per-round metrics."""

    returncode: int
    output: str
    wall_s: float
    rounds: list[dict[str, float]] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def check_app(app: str | Path) -> Path:
    """``app`` as a path, or ``FileNotFoundError`` when it is not a Flower App folder."""
    app = Path(app)
    if not (app / "pyproject.toml").is_file():
        raise FileNotFoundError(f"{app} holds no pyproject.toml (not a Flower App)")
    return app


def find_tools() -> dict[str, str]:
    """Paths of Flower's executables next to this interpreter (or on ``PATH``)."""
    bindir = str(Path(sys.executable).parent)
    found = {n: shutil.which(n, path=bindir) or shutil.which(n) for n in TOOLS}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        raise FileNotFoundError(
            f"Flower executables not found: {', '.join(missing)}; "
            'install them with pip install "iclr26-fedmuon[flower]"'
        )
    return {n: str(p) for n, p in found.items()}


class LoopbackDeployment:
    """A SuperLink and ``nodes`` SuperNodes on 127.0.0.1, as a context manager.

    SuperNode ``i`` gets ``--node-config partition-id=i``. Each process runs in its own session and
    is stopped (SIGTERM, then SIGKILL) on exit with its children; logs go to ``workdir``.

    Example::

        with LoopbackDeployment(nodes=2) as dep:
            run = dep.run(write_demo_app(dep.workdir / "app", rounds=3))
    """

    def __init__(
        self, nodes: int = 2, *, workdir: str | Path | None = None, startup_timeout: float = 60.0
    ) -> None:
        check_int(nodes, "nodes", low=1)
        self.nodes = nodes
        self.startup_timeout = startup_timeout
        self._tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="flwr-")
        self.workdir = Path(workdir if workdir is not None else self._tmp.name)
        self.tools = find_tools()
        self.port: int | None = None
        self._procs: list[subprocess.Popen] = []
        self._logs: list[IO[str]] = []
        self.env: dict[str, str] = {}

    def _start(self, args: list[str], name: str) -> None:
        log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        self._procs.append(
            subprocess.Popen(
                args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )

    def start(self) -> LoopbackDeployment:
        """Start the SuperLink, wait until it listens, then start the SuperNodes."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        home = self.workdir / "flwr-home"
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text(
            textwrap.dedent(f"""\
            [superlink]
            default = "loopback"

            [superlink.loopback]
            address = "127.0.0.1:{self.port}"
            insecure = true
            """)
        )
        bindir = str(Path(self.tools["flwr"]).parent)
        self.env = {
            **os.environ,
            "FLWR_HOME": str(home),
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        try:
            self._start([self.tools["flower-superlink"], "--insecure", "--port", str(self.port),
                         "--database", str(self.workdir / "state.db"),
                         "--disable-runtime-dependency-installation"], "superlink")  # fmt: skip
            _wait_for_port(self.port, self.startup_timeout)
            ports = [_free_port() for _ in range(self.nodes)]
            for i, port in enumerate(ports):
                self._start([self.tools["flower-supernode"], "--insecure", "--superlink",
                             f"127.0.0.1:{self.port}", "--port", str(port),
                             "--node-config", f"partition-id={i}"], f"supernode{i}")  # fmt: skip
            for port in ports:
                _wait_for_port(port, self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def run(
        self, app: str | Path, *, run_config: dict[str, object] | None = None, timeout: float = 600
    ) -> DeploymentRun:
        """``flwr run APP loopback --stream``; returns its status, logs and per-round metrics."""
        if self.port is None:
            raise RuntimeError("start the deployment first (use it as a context manager)")
        app = check_app(app)
        cmd = [self.tools["flwr"], "run", ".", "loopback", "--stream"]
        if run_config:
            cmd += ["--run-config", " ".join(f"{k}={v!r}" for k, v in run_config.items())]
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=app, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        out = proc.stdout + proc.stderr
        return DeploymentRun(
            proc.returncode, out, time.perf_counter() - t0, parse_round_metrics(out)
        )

    def stop(self) -> None:
        """Stop every process (and its children); close the logs."""
        for p in self._procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in self._procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in self._logs:
            log.close()
        self._procs, self._logs, self.port = [], [], None

    def log(self, name: str) -> str:
        """The log of ``"superlink"`` or ``"supernode<i>"``."""
        return (self.workdir / f"{name}.log").read_text()

    def __enter__(self) -> LoopbackDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
