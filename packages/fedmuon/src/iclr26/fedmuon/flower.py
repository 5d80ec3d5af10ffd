"""FedMuon on real Flower nodes: a Message-API strategy and a stateful ClientApp (extra ``flower``).

The server keeps ``X`` (handed around by ``Strategy.start`` as an ``ArrayRecord``) and the control
variate ``C`` (kept in the strategy). Each sampled node receives ``X`` (``"arrays"``), ``C``
(``"c_global"``) and the hyperparameters (``"config"``), runs ``K`` local FedMuon steps with its
``C_i`` and momentum ``M_i`` kept in ``context.state`` (they never leave the node), and replies
with ``X_i`` (``"arrays"``), ``ΔC_i`` (``"delta_c"``) and a ``MetricRecord`` (``"metrics"``). The
strategy then applies Algorithm 1's server lines 17–18 of Takezawa et al. (ICLR 2026, arXiv
2509.26337) through :func:`~iclr26.fedmuon.algorithms.server_update`. Nodes that fail or time out
are treated as non-participants: ``S`` shrinks and the ``(n−S)/n`` term adapts.

Flower 1.42 starts a fresh ClientApp process for every message, so every round pays the imports
and the compilation of the client step again. :func:`enable_compilation_cache` (or the
``JAX_COMPILATION_CACHE_DIR`` environment of the SuperNodes, which
:class:`~iclr26.fedmuon.deploy.LoopbackDeployment` sets) makes every process after the first load
the compiled client step from disk instead.

Requires ``pip install "iclr26-fedmuon[flower]"``; tested against ``flwr`` 1.42. Without the
extra, importing this module raises :class:`~iclr26.shared.MissingDependencyError` naming it.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr26.shared import check_int, check_range, import_optional

import_optional("flwr", dist="iclr26-fedmuon", extra="flower", purpose="iclr26.fedmuon.flower")

from flwr.app import (  # noqa: E402 - after the one-line message for a missing extra
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

from iclr26.fedmuon.algorithms import (  # noqa: E402
    ClientState,
    FedConfig,
    ServerState,
    client_update,
    server_update,
)
from iclr26.fedmuon.lmo import LMOSpec  # noqa: E402

__all__ = [
    "FedMuonStrategy",
    "arrays_to_params",
    "config_from_record",
    "config_to_record",
    "enable_compilation_cache",
    "make_client_app",
    "make_server_app",
    "params_to_arrays",
]

logger = logging.getLogger(__name__)

STATE_C = "fedmuon_c_local"
STATE_M = "fedmuon_momentum"


def params_to_arrays(params: Any) -> ArrayRecord:
    """A pytree of arrays as an ``ArrayRecord`` (leaves in ``jax.tree.leaves`` order)."""
    return ArrayRecord([np.asarray(leaf) for leaf in jax.tree.leaves(params)])


def arrays_to_params(record: ArrayRecord, template: Any) -> Any:
    """The inverse of :func:`params_to_arrays`, shaped like ``template``."""
    leaves, treedef = jax.tree.flatten(template)
    arrays = record.to_numpy_ndarrays()
    if len(arrays) != len(leaves):
        raise ValueError(f"expected {len(leaves)} arrays, got {len(arrays)}")
    for i, (a, t) in enumerate(zip(arrays, leaves, strict=True)):
        if a.shape != np.shape(t):
            raise ValueError(f"array {i} has shape {a.shape}, expected {np.shape(t)}")
    return jax.tree.unflatten(treedef, [jnp.asarray(a) for a in arrays])


def config_to_record(cfg: FedConfig) -> ConfigRecord:
    """The client-side hyperparameters of ``cfg`` as a ``ConfigRecord``."""
    return ConfigRecord(
        {
            "lr": float(cfg.lr),
            "alpha": float(cfg.alpha),
            "local-steps": int(cfg.local_steps),
            "batch-size": 0 if cfg.batch_size is None else int(cfg.batch_size),
            "ns-steps": -1 if cfg.lmo.ns_steps is None else int(cfg.lmo.ns_steps),
            "ns-coeffs": cfg.lmo.coeffs
            if isinstance(cfg.lmo.coeffs, str)
            else [float(c) for c in cfg.lmo.coeffs],
            "lmo-matrix": cfg.lmo.matrix,
            "lmo-vector": cfg.lmo.vector,
        }
    )


def config_from_record(record: ConfigRecord) -> FedConfig:
    """Rebuild the client's :class:`FedConfig` from a ``ConfigRecord`` of :func:`config_to_record`."""
    ns = int(record["ns-steps"])
    batch = int(record["batch-size"])
    return FedConfig(
        n_clients=1,
        clients_per_round=1,
        local_steps=int(record["local-steps"]),
        batch_size=None if batch == 0 else batch,
        lr=float(record["lr"]),
        alpha=float(record["alpha"]),
        lmo=LMOSpec(
            matrix=str(record["lmo-matrix"]),
            vector=str(record["lmo-vector"]),
            ns_steps=None if ns < 0 else ns,
            coeffs=coeffs if isinstance(coeffs := record["ns-coeffs"], str) else tuple(coeffs),
        ),
    )


class FedMuonStrategy(FedAvg):
    """Flower strategy running FedMuon's server (Algorithm 1, lines 17–18) over real nodes.

    Inherits FedAvg's node sampling (``fraction_train``, ``min_train_nodes``,
    ``min_available_nodes``) and its federated evaluation; replaces ``configure_train`` and
    ``aggregate_train``.

    Args:
        cfg: hyperparameters (``lr``, ``alpha``, ``local_steps``, ``batch_size``, ``lmo``, and
            ``server_lr`` for the server rule); ``n_clients`` and ``clients_per_round`` are taken
            from the deployment instead.
        params_template: a pytree shaped like the model parameters.
        n_clients: ``n`` in ``(1/n)Σ``. ``None`` uses the number of distinct nodes seen so far
            (cross-silo); set it when the population is larger than the connected nodes.
        fraction_train: share of connected nodes sampled per round (the paper: 8 of 16).
        **kwargs: passed on to :class:`flwr.serverapp.strategy.FedAvg`.
    """

    def __init__(
        self,
        cfg: FedConfig,
        params_template: Any,
        *,
        n_clients: int | None = None,
        fraction_train: float = 0.5,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        if not isinstance(cfg, FedConfig):
            raise TypeError(f"cfg must be a FedConfig, got {type(cfg).__name__}")
        if n_clients is not None:
            check_int(n_clients, "n_clients", low=1)
        super().__init__(fraction_train=fraction_train, **kwargs)
        self.cfg = cfg
        self.template = params_template
        self.n_clients = n_clients
        self.c_global: Any = None
        self.params: Any = None
        self.known_nodes: set[int] = set()
        self.round = 0
        self._rng = random.Random(seed)
        self._sent_at: float | None = None

    def summary(self) -> None:
        super().summary()
        logger.info("FedMuon: lr %s, alpha %s, K %s, %s", self.cfg.lr, self.cfg.alpha,
                    self.cfg.local_steps, self.cfg.lmo)  # fmt: skip

    def _n(self, participants: int) -> int:
        return max(self.n_clients or len(self.known_nodes), participants, 1)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Sample nodes; send ``X``, ``C`` and the hyperparameters to each."""
        nodes = list(grid.get_node_ids())
        self.known_nodes.update(nodes)
        sample_size = max(int(len(nodes) * self.fraction_train), self.min_train_nodes)
        sample_size = min(sample_size, len(nodes))
        sampled = self._rng.sample(nodes, sample_size) if nodes else []
        self.params = arrays_to_params(arrays, self.template)
        if self.c_global is None:
            self.c_global = optax.tree.zeros_like(self.params)
        record = config_to_record(self.cfg)
        for key, value in config.items():
            record[key] = value
        record["server-round"] = server_round
        self._sent_at = time.perf_counter()
        content = RecordDict(
            {"arrays": arrays, "c_global": params_to_arrays(self.c_global), "config": record}
        )
        return [Message(content=content, message_type="train", dst_node_id=n) for n in sampled]

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """``C ← C + (1/n)ΣΔC_i``, ``X ← ((n−S)/n)X + (1/n)ΣX_i`` over the valid replies."""
        valid = []
        for msg in replies:
            if msg.has_error():
                logger.warning("node %s failed: %s", msg.metadata.src_node_id, msg.error.reason)
                continue
            content = msg.content
            if "arrays" not in content or "delta_c" not in content:
                logger.warning("node %s sent no arrays/delta_c", msg.metadata.src_node_id)
                continue
            valid.append(content)
        if not valid or self.params is None:
            return None, None
        xs = [arrays_to_params(c["arrays"], self.template) for c in valid]
        dcs = [arrays_to_params(c["delta_c"], self.template) for c in valid]
        stack = functools.partial(jax.tree.map, lambda *a: jnp.stack(a))
        server = ServerState(self.params, self.c_global, jnp.int32(self.round), optax.EmptyState())
        server = server_update(
            "fedmuon", server, stack(*xs), stack(*dcs), self._n(len(valid)), self.cfg
        )
        self.params, self.c_global, self.round = server.params, server.c_global, int(server.round)
        weights = np.array([float(c["metrics"].get("num-examples", 1)) for c in valid])
        losses = np.array([float(c["metrics"].get("train_loss", np.nan)) for c in valid])
        values = {"train_loss": float(np.sum(weights * losses) / np.sum(weights)),
                  "participants": len(valid), "n_clients": self._n(len(valid))}  # fmt: skip
        if self._sent_at is not None:  # messages out -> replies aggregated, in seconds
            values["round_s"] = time.perf_counter() - self._sent_at
        # the slowest node's time inside its train handler, compiling, and starting its process
        for key in ("train_s", "compile_s", "startup_s"):
            times = [float(c["metrics"][key]) for c in valid if key in c["metrics"]]
            if times:
                values[f"client_{key}"] = max(times)
        metrics = MetricRecord(values)
        return params_to_arrays(self.params), metrics


def enable_compilation_cache(
    path: str | os.PathLike[str], *, min_compile_time_s: float = 0.0, min_entry_size_bytes: int = -1
) -> None:
    """Keep JAX's compiled programs in ``path`` so that later processes load instead of compiling.

    Sets ``jax_compilation_cache_dir`` and lowers the thresholds (JAX only writes programs that
    took at least 1 s to compile by default; FedMuon's client step on a small model compiles
    faster than that and would never be cached). Safe to call after something was compiled: the
    cache is set up again. The same effect for every process of a SuperNode comes from the
    environment variables ``JAX_COMPILATION_CACHE_DIR``,
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0`` and
    ``JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1`` (the ClientApp processes inherit them).

    Args:
        path: cache folder (created); processes sharing it share compiled programs.
        min_compile_time_s: write only programs that took at least this long to compile.
        min_entry_size_bytes: write only entries at least this large (``-1``: any size).
    """
    from jax.experimental.compilation_cache import compilation_cache as cc

    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a folder path, got {type(path).__name__}")
    check_range(min_compile_time_s, "min_compile_time_s", low=0.0)
    check_int(min_entry_size_bytes, "min_entry_size_bytes", low=-1)
    folder = os.fspath(path)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"path {folder} is a file, expected a cache folder")
    os.makedirs(folder, exist_ok=True)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", int(min_entry_size_bytes))
    cc.reset_cache()
    cc.set_cache_dir(folder)


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``), or ``None`` elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return time.time() - (boot + start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


@functools.lru_cache(maxsize=16)
def _compiled_client(loss_fn: Callable, cfg: FedConfig) -> Callable:
    def run(params, state, c_global, batches, lr):
        return client_update("fedmuon", params, state, c_global, batches, loss_fn, cfg, lr)

    return jax.jit(run)


def make_client_app(
    loss_fn: Callable[[Any, Any], jax.Array],
    load_data: Callable[[Context], Any],
    params_template: Any,
    *,
    evaluate_fn: Callable[[Any, Any], dict[str, float]] | None = None,
    seed: int = 0,
    compilation_cache_dir: str | os.PathLike[str] | None = None,
) -> ClientApp:
    """A Flower ``ClientApp`` running FedMuon's client (Algorithm 1, lines 6–11) on a node.

    Args:
        loss_fn: ``(params, batch) -> scalar`` mean loss.
        load_data: ``context -> pytree of arrays`` (leading axis = examples) for this node, e.g.
            reading ``context.node_config["partition-id"]``.
        params_template: pytree shaped like the parameters.
        evaluate_fn: optional ``(params, data) -> metrics`` for federated evaluation (default:
            the mean loss on the node's data).
        seed: base seed of the minibatch sampling (mixed with the node id and the round).
        compilation_cache_dir: a JAX compilation cache folder on the node
            (:func:`enable_compilation_cache`); ``None`` leaves JAX's configuration alone (the
            ``JAX_COMPILATION_CACHE_DIR`` environment variable still applies).

    ``C_i`` and ``M_i`` persist in ``context.state`` across rounds (zeros on first contact). The
    reply's metrics add ``train_s`` (time in the handler), ``compile_s`` (compiling, or loading
    from the cache, the client step) and ``startup_s`` (process start to handler, where known).
    """
    check_int(seed, "seed", low=0)
    if not callable(loss_fn) or not callable(load_data):
        raise TypeError("loss_fn and load_data must be callables")
    if compilation_cache_dir is not None:
        enable_compilation_cache(compilation_cache_dir)
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        startup_s = _process_age_s()
        t0 = time.perf_counter()
        cfg = config_from_record(msg.content["config"])
        params = arrays_to_params(msg.content["arrays"], params_template)
        c_global = arrays_to_params(msg.content["c_global"], params_template)
        if STATE_C in context.state:
            state = ClientState(
                arrays_to_params(context.state[STATE_C], params_template),
                arrays_to_params(context.state[STATE_M], params_template),
            )
        else:
            zeros = optax.tree.zeros_like(params)
            state = ClientState(zeros, zeros)
        data = load_data(context)
        m = int(jax.tree.leaves(data)[0].shape[0])
        server_round = int(msg.content["config"].get("server-round", 0))
        rng = np.random.default_rng([seed, int(context.node_id) % 2**32, server_round])
        if cfg.batch_size is None:
            idx = np.tile(np.arange(m), (cfg.local_steps, 1))
        else:
            idx = rng.integers(0, m, (cfg.local_steps, cfg.batch_size))
        batches = jax.tree.map(lambda a: jnp.asarray(np.asarray(a)[idx]), data)
        args = (params, state, c_global, batches, jnp.float32(cfg.lr))
        t_compile = time.perf_counter()
        step = _compiled_client(loss_fn, cfg.static_key()).lower(*args).compile()
        compile_s = time.perf_counter() - t_compile
        y, new_state, delta_c, metrics = step(*args)
        context.state[STATE_C] = params_to_arrays(new_state.c_local)
        context.state[STATE_M] = params_to_arrays(new_state.momentum)
        reply = RecordDict(
            {
                "arrays": params_to_arrays(y),
                "delta_c": params_to_arrays(delta_c),
                "metrics": MetricRecord(
                    {
                        "train_loss": float(metrics["loss"]),
                        "num-examples": m,
                        "train_s": time.perf_counter() - t0,
                        "compile_s": compile_s,
                        **({} if startup_s is None else {"startup_s": startup_s}),
                    }
                ),
            }
        )
        return Message(reply, reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        params = arrays_to_params(msg.content["arrays"], params_template)
        data = load_data(context)
        m = int(jax.tree.leaves(data)[0].shape[0])
        if evaluate_fn is None:
            values = {"eval_loss": float(loss_fn(params, jax.tree.map(jnp.asarray, data)))}
        else:
            values = {k: float(v) for k, v in evaluate_fn(params, data).items()}
        return Message(
            RecordDict({"metrics": MetricRecord({**values, "num-examples": m})}), reply_to=msg
        )

    return app


def make_server_app(
    strategy: FedMuonStrategy,
    initial_params: Any,
    *,
    num_rounds: int = 3,
    timeout: float = 600.0,
    on_result: Callable[[Any], None] | None = None,
) -> ServerApp:
    """A Flower ``ServerApp`` whose main runs ``strategy.start`` from ``initial_params``.

    ``num_rounds`` can be overridden by the run config key ``num-server-rounds``; ``on_result``
    receives Flower's ``Result`` (final arrays and per-round metrics).
    """
    check_int(num_rounds, "num_rounds", low=1)
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        rounds = int(context.run_config.get("num-server-rounds", num_rounds))
        result = strategy.start(
            grid=grid,
            initial_arrays=params_to_arrays(initial_params),
            num_rounds=rounds,
            timeout=timeout,
        )
        if on_result is not None:
            on_result(result)

    return app
