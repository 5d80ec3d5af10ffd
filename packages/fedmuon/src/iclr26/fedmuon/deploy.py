"""A real Flower deployment on loopback: a SuperLink and SuperNodes on 127.0.0.1 (extra ``flower``).

:class:`LoopbackDeployment` starts ``flower-superlink`` and one ``flower-supernode`` per node as
separate processes (the same executables a multi-machine deployment runs, here on 127.0.0.1
without TLS), then ``flwr run`` submits a Flower App to them. :func:`write_demo_app` writes a
small FedMuon App (least squares, one data partition per node) so the whole path can be tried
with one command (``iclr26-fedmuon loopback``) and measured by ``bench``.

Flower 1.42 starts a fresh ``flwr-clientapp`` process for every message (its warm executor pools
cover other task types, on Kubernetes only), so every round imports JAX and flwr and compiles the
client step again. The deployment gives the SuperNodes a shared JAX compilation cache folder
(``compilation_cache``), so only the first round compiles; ``bench`` measures both.

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
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from iclr26.shared import check_int, check_range

if TYPE_CHECKING:  # JAX loads only where the demo computes, so check_app stays light
    from iclr26.fedmuon.algorithms import FedConfig
    from iclr26.fedmuon.problems import Problem

__all__ = [
    "DeploymentRun",
    "LoopbackDeployment",
    "check_app",
    "compilation_cache_env",
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
    from iclr26.fedmuon.problems import least_squares

    check_int(nodes, "nodes", low=1)
    return least_squares(n_clients=nodes, examples=16, d_in=4, d_out=3, seed=seed)


def demo_config() -> FedConfig:
    """The demo's client hyperparameters: K = 5 full-batch steps, η = 0.05, α = 0.5, NS5.

    Full local batches make every round deterministic, whatever ids the SuperLink gives the
    nodes, so a deployment can be compared with :func:`simulate_demo` number for number.
    """
    from iclr26.fedmuon.algorithms import FedConfig
    from iclr26.fedmuon.lmo import LMOSpec

    return FedConfig(local_steps=5, batch_size=None, lr=0.05, alpha=0.5, lmo=LMOSpec(ns_steps=5))


def simulate_demo(rounds: int, nodes: int = 2, *, seed: int = 0) -> tuple[list[float], float]:
    """The demo in the single-process simulator: per-round mean local loss and ms per round.

    The losses are the quantity the Flower strategy logs as ``train_loss`` (every node sampled
    every round, equal data sizes), so they must match a loopback run of :func:`write_demo_app`.
    The time is the median of the compiled rounds after the first.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from iclr26.fedmuon.algorithms import init_clients, init_server, round_lr
    from iclr26.fedmuon.simulate import make_round

    check_int(rounds, "rounds", low=1)
    check_int(nodes, "nodes", low=1)
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


_EXPIRED = "[/v1/runtime/pull-task-input][ApiError:1008] Runtime task-token authentication failed"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_tail(path: Path, lines: int = 1) -> str:
    try:
        text = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def check_app(app: str | os.PathLike[str]) -> Path:
    """``app`` as a path, after checking that it is a Flower App folder.

    A Flower App is a folder whose ``pyproject.toml`` names a ``serverapp`` and a ``clientapp``
    under ``[tool.flwr.app.components]``.

    Raises:
        FileNotFoundError: ``app`` or its ``pyproject.toml`` does not exist.
        ValueError: ``app`` is a file, or its ``pyproject.toml`` is not TOML or names no apps.
    """
    path = Path(app)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if not path.is_dir():
        raise ValueError(f"{path} is a file, expected a Flower App folder")
    meta_path = path / "pyproject.toml"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{path} holds no pyproject.toml (not a Flower App)")
    try:
        meta = tomllib.loads(meta_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{meta_path} is not valid TOML: {err}") from None
    components = meta.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {})
    missing = [k for k in ("serverapp", "clientapp") if not components.get(k)]
    if missing:
        raise ValueError(
            f"{meta_path} names no {' and no '.join(missing)} under "
            "[tool.flwr.app.components] (not a Flower App)"
        )
    return path


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


def compilation_cache_env(path: str | os.PathLike[str]) -> dict[str, str]:
    """The environment that gives a process (and its children) a JAX compilation cache.

    JAX writes only programs that took over 1 s to compile by default; the thresholds are
    lowered to zero so that small client steps are cached too.
    """
    return {
        "JAX_COMPILATION_CACHE_DIR": os.fspath(path),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
    }


class LoopbackDeployment:
    """A SuperLink and ``nodes`` SuperNodes on 127.0.0.1, as a context manager.

    SuperNode ``i`` gets ``--node-config partition-id=i``. Each process runs in its own session and
    is stopped (SIGTERM, then SIGKILL) on exit with its children; logs go to ``workdir``
    (``superlink.log``, ``supernode<i>.log``, ``flwr-run.log``).

    Args:
        nodes: SuperNodes to start.
        workdir: folder for logs and state (default: a temporary folder removed on exit).
        startup_timeout: seconds each process may take to listen on its port.
        compilation_cache: JAX compilation cache folder handed to the SuperNodes (and so to every
            ClientApp process they start): ``None`` uses ``workdir/jax-cache``, a path uses that
            folder (reuse it across deployments to skip compiling altogether), ``False`` disables
            the cache (every round compiles, as Flower does by default).

    Example::

        with LoopbackDeployment(nodes=2) as dep:
            run = dep.run(write_demo_app(dep.workdir / "app", rounds=3))
    """

    def __init__(
        self,
        nodes: int = 2,
        *,
        workdir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 60.0,
        compilation_cache: str | os.PathLike[str] | bool | None = None,
    ) -> None:
        check_int(nodes, "nodes", low=1)
        check_range(startup_timeout, "startup_timeout", low=0.0, low_inclusive=False)
        if compilation_cache is True:
            compilation_cache = None
        if compilation_cache is not False and compilation_cache is not None:
            if not isinstance(compilation_cache, str | os.PathLike):
                raise TypeError(
                    "compilation_cache must be a folder path, None or False, got "
                    f"{type(compilation_cache).__name__}"
                )
            if Path(compilation_cache).is_file():
                raise ValueError(f"compilation_cache {compilation_cache} is a file")
        if workdir is not None and Path(workdir).is_file():
            raise ValueError(f"workdir {workdir} is a file, expected a folder")
        self.tools = find_tools()  # before creating anything
        self.nodes = nodes
        self.startup_timeout = startup_timeout
        self._tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="flwr-")
        self.workdir = Path(workdir if workdir is not None else self._tmp.name)
        self.compilation_cache: Path | None = (
            None
            if compilation_cache is False
            else Path(compilation_cache)
            if compilation_cache is not None
            else self.workdir / "jax-cache"
        )
        self.port: int | None = None
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._logs: list[IO[str]] = []
        self._run_log: Path | None = None
        self._warned: set[int] = set()
        self.env: dict[str, str] = {}

    def _start(self, args: list[str], name: str) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        proc = subprocess.Popen(
            args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._procs.append((name, proc))
        return proc

    def _check_alive(self) -> None:
        for name, proc in self._procs:
            if proc.poll() is not None:
                tail = _log_tail(self.workdir / f"{name}.log")
                raise ChildProcessError(
                    f"the {name} process exited with status {proc.returncode}"
                    + (f": {tail}" if tail else "")
                    + f" (log: {self.workdir / (name + '.log')})"
                )

    def _check_clientapp_starts(self) -> None:
        """Warn (once per node) when a ClientApp process misses Flower's start-up window.

        flwr 1.42 expires a task's token when the ClientApp process sends no heartbeat within
        30 s of being started (``HEARTBEAT_DEFAULT_INTERVAL``); on an overloaded machine the
        process is still importing flwr by then, and the SuperNode starts it again until one
        start is quick enough (or ``timeout`` ends the run).
        """
        for i in range(self.nodes):
            if i in self._warned:
                continue
            log = self.workdir / f"supernode{i}.log"
            try:
                text = log.read_text(errors="replace")
            except OSError:
                continue
            if _EXPIRED in text:
                self._warned.add(i)
                warnings.warn(
                    f"supernode{i}'s ClientApp process sent no heartbeat within flwr's 30 s "
                    "start-up window (the machine is likely overloaded); Flower restarts it "
                    f"until one start is quick enough or the timeout passes (log: {log})",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def _wait_for_port(self, port: int, name: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            self._check_alive()
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise TimeoutError(
            f"the {name} does not listen on 127.0.0.1:{port} after {self.startup_timeout:.0f} s "
            f"(log: {self.workdir / (name + '.log')})"
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
        env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT_CACHE")}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        if self.compilation_cache is not None:
            self.compilation_cache.mkdir(parents=True, exist_ok=True)
            env.update(compilation_cache_env(self.compilation_cache.resolve()))
        self.env = {
            **env,
            "FLWR_HOME": str(home),
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        try:
            self._start([self.tools["flower-superlink"], "--insecure", "--port", str(self.port),
                         "--database", str(self.workdir / "state.db"),
                         "--disable-runtime-dependency-installation"], "superlink")  # fmt: skip
            self._wait_for_port(self.port, "superlink")
            ports = [_free_port() for _ in range(self.nodes)]
            for i, port in enumerate(ports):
                self._start([self.tools["flower-supernode"], "--insecure", "--superlink",
                             f"127.0.0.1:{self.port}", "--port", str(port),
                             "--node-config", f"partition-id={i}"], f"supernode{i}")  # fmt: skip
            for i, port in enumerate(ports):
                self._wait_for_port(port, f"supernode{i}")
        except BaseException:
            self.stop()
            raise
        return self

    def run(
        self,
        app: str | os.PathLike[str],
        *,
        run_config: dict[str, object] | None = None,
        timeout: float = 600,
    ) -> DeploymentRun:
        """``flwr run APP loopback --stream``; returns its status, logs and per-round metrics.

        The output streams into ``workdir/flwr-run.log`` (:meth:`last_rounds` reads the rounds
        finished so far, e.g. after Ctrl-C).

        Raises:
            ChildProcessError: the SuperLink or a SuperNode died during the run (the run is
                stopped instead of waiting for replies that cannot come).
            TimeoutError: the run took longer than ``timeout`` seconds (it is stopped).
            KeyboardInterrupt: Ctrl-C; the run is stopped, the log kept.
        """
        if self.port is None:
            raise RuntimeError("start the deployment first (use it as a context manager)")
        check_range(timeout, "timeout", low=0.0, low_inclusive=False)
        app = check_app(app)
        cmd = [self.tools["flwr"], "run", ".", "loopback", "--stream"]
        if run_config:
            cmd += ["--run-config", " ".join(f"{k}={v!r}" for k, v in run_config.items())]
        self._run_log = self.workdir / "flwr-run.log"
        t0 = time.perf_counter()
        with open(self._run_log, "w") as log:
            proc = subprocess.Popen(
                cmd, cwd=app, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            try:
                checked = t0
                while proc.poll() is None:
                    self._check_alive()
                    if time.perf_counter() - checked > 2.0:
                        self._check_clientapp_starts()
                        checked = time.perf_counter()
                    if time.perf_counter() - t0 > timeout:
                        raise TimeoutError(
                            f"flwr run did not finish within {timeout:g} s (log: {self._run_log})"
                        )
                    time.sleep(0.2)
            except BaseException:
                _stop_group(proc, grace=5)
                raise
        out = self._run_log.read_text(errors="replace")
        return DeploymentRun(
            proc.returncode, out, time.perf_counter() - t0, parse_round_metrics(out)
        )

    def last_rounds(self) -> list[dict[str, float]]:
        """The per-round metrics ``flwr run`` has logged so far (empty before any run)."""
        if self._run_log is None or not self._run_log.exists():
            return []
        return parse_round_metrics(self._run_log.read_text(errors="replace"))

    def stop(self) -> None:
        """Stop every process (and its children); close the logs."""
        for _, p in self._procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
        for _, p in self._procs:
            _stop_group(p, grace=20)
        for log in self._logs:
            log.close()
        self._procs, self._logs, self.port = [], [], None

    def log(self, name: str) -> str:
        """The log of ``"superlink"``, ``"supernode<i>"`` or ``"flwr-run"``."""
        return (self.workdir / f"{name}.log").read_text()

    def __enter__(self) -> LoopbackDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the process group of ``proc`` (its children included: Flower's ServerApp and
    ClientApp processes), SIGKILL what is left of it after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # children that outlive the leader still hold the group
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
