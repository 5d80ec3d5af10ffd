"""Single-process federated simulation: sampled clients under ``vmap``, one ``jit`` per round.

Each round samples ``S`` of the ``n`` clients without replacement, draws ``K`` minibatches per
client with ``jax.random``, runs :func:`~iclr26.fedmuon.algorithms.client_update` for all of
them at once under ``jax.vmap``, writes their new states back and applies
:func:`~iclr26.fedmuon.algorithms.server_update` — all inside one compiled function, compiled
once per (algorithm, static config, data shapes): the step size is a traced argument, so
learning-rate sweeps and decaying schedules reuse the compiled round.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.fedmuon.algorithms import (
    ClientState,
    FedConfig,
    ServerState,
    check_params,
    client_update,
    communication_bytes,
    init_clients,
    init_server,
    round_lr,
    server_update,
)
from iclr26.fedmuon.data import FederatedData
from iclr26.fedmuon.lmo import nuclear_norm
from iclr26.fedmuon.problems import Problem
from iclr26.shared import check_int, progress

__all__ = ["History", "global_metrics", "make_round", "run_problem", "simulate"]


@dataclass
class History:
    """Per-evaluation record of a simulated run (NumPy arrays, one entry per evaluated round).

    Attributes:
        algo: the algorithm.
        rounds: round index after which the metrics were taken (0 = the initial point).
        loss: global objective ``f(X) = (1/n)Σ f_i(X)`` on all client data.
        grad_fro: ``‖∇f(X)‖_F`` (over the whole pytree).
        grad_nuc: ``Σ_leaves ‖∇f(X)‖_*`` (trace norm for matrices, L2 for vectors).
        metrics: extra metrics from ``eval_fn`` (e.g. ``accuracy``), aligned with ``rounds``.
        wall_time: seconds since the start (excluding evaluation), aligned with ``rounds``.
        bytes_per_round: bytes sent down + up by all participating clients in one round.
        compile_time: seconds spent in the first round (compilation + one round).
        params: final global parameters.
    """

    algo: str
    rounds: np.ndarray
    loss: np.ndarray
    grad_fro: np.ndarray
    grad_nuc: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    wall_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    bytes_per_round: int = 0
    compile_time: float = 0.0
    params: Any = None

    def final(self, name: str = "grad_fro") -> float:
        """Last recorded value of ``loss``, ``grad_fro``, ``grad_nuc`` or an ``eval_fn`` metric."""
        values = self.metrics[name] if name in self.metrics else getattr(self, name)
        return float(values[-1])


def _per_client_mean(loss_fn: Callable, params: Any, data: Any, count: jax.Array) -> jax.Array:
    per_example = jax.vmap(lambda ex: loss_fn(params, jax.tree.map(lambda a: a[None], ex)))(data)
    mask = jnp.arange(per_example.shape[0]) < count
    return jnp.sum(jnp.where(mask, per_example, 0.0)) / count


@functools.lru_cache(maxsize=64)
def _global_fn(loss_fn: Callable) -> Callable:
    def f(params: Any, data: Any, counts: jax.Array) -> jax.Array:
        return jnp.mean(
            jax.vmap(lambda d, c: _per_client_mean(loss_fn, params, d, c))(data, counts)
        )

    @jax.jit
    def metrics(params: Any, data: Any, counts: jax.Array) -> tuple[jax.Array, ...]:
        loss, grad = jax.value_and_grad(f)(params, data, counts)
        leaves = jax.tree.leaves(grad)
        fro = jnp.sqrt(sum(jnp.sum(g**2) for g in leaves))
        nuc = sum(nuclear_norm(g) for g in leaves)
        return loss, fro, nuc

    return metrics


def global_metrics(
    loss_fn: Callable, params: Any, clients: FederatedData
) -> tuple[float, float, float]:
    """``(f(X), ‖∇f(X)‖_F, ‖∇f(X)‖_*)`` with ``f = (1/n)Σ_i f_i`` over all client data."""
    if not isinstance(clients, FederatedData):
        raise TypeError(f"clients must be FederatedData, got {type(clients).__name__}")
    check_params(params)
    return _metrics(loss_fn, params, clients)


def _metrics(loss_fn: Callable, params: Any, clients: FederatedData) -> tuple[float, float, float]:
    loss, fro, nuc = _global_fn(loss_fn)(params, clients.data, jnp.asarray(clients.counts))
    return float(loss), float(fro), float(nuc)


def _sample_batches(key: jax.Array, data: Any, count: jax.Array, cfg: FedConfig) -> Any:
    if cfg.batch_size is None:  # full batch: every local step sees the whole client dataset
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (cfg.local_steps, *a.shape)), data)
    idx = jax.random.randint(key, (cfg.local_steps, cfg.batch_size), 0, count)
    return jax.tree.map(lambda a: a[idx], data)


@functools.lru_cache(maxsize=128)
def make_round(algo: str, loss_fn: Callable, cfg: FedConfig) -> Callable:
    """The compiled round ``(server, clients, data, counts, key, lr) -> (server, clients, loss)``.

    ``cfg`` must be a :meth:`FedConfig.static_key`; ``lr`` is traced. Cached per arguments.
    """
    n, s = cfg.n_clients, cfg.clients_per_round

    def one_round(
        server: ServerState,
        clients: ClientState,
        data: Any,
        counts: jax.Array,
        key: jax.Array,
        lr: jax.Array,
    ) -> tuple[ServerState, ClientState, jax.Array]:
        k_sample, k_batch = jax.random.split(key)
        idx = jax.random.permutation(k_sample, n)[:s] if s < n else jnp.arange(n)
        take = functools.partial(jax.tree.map, lambda a: a[idx])
        batches = jax.vmap(lambda k, d, c: _sample_batches(k, d, c, cfg))(
            jax.random.split(k_batch, s), take(data), counts[idx]
        )

        def run_client(state: ClientState, batch: Any) -> Any:
            return client_update(
                algo, server.params, state, server.c_global, batch, loss_fn, cfg, lr
            )

        new_params, new_states, delta_c, metrics = jax.vmap(run_client)(take(clients), batches)
        clients = jax.tree.map(lambda all_, new: all_.at[idx].set(new), clients, new_states)
        server = server_update(algo, server, new_params, delta_c, n, cfg)
        return server, clients, metrics["loss"].mean()

    return jax.jit(one_round)


def simulate(
    algo: str,
    loss_fn: Callable[[Any, Any], jax.Array],
    init_params: Any,
    clients: FederatedData,
    cfg: FedConfig,
    *,
    seed: int,
    eval_fn: Callable[[Any], dict[str, float]] | None = None,
    eval_every: int = 1,
    show_progress: bool = False,
) -> History:
    """Run ``cfg.rounds`` rounds of ``algo`` on ``clients`` and record the global metrics.

    Args:
        algo: one of :data:`~iclr26.fedmuon.algorithms.ALGORITHMS`.
        loss_fn: ``(params, batch) -> scalar`` mean loss.
        init_params: ``X⁽⁰⁾`` (pytree of float arrays).
        clients: stacked client data; ``clients.n_clients`` must equal ``cfg.n_clients``.
        cfg: hyperparameters (:class:`FedConfig`).
        seed: seeds client sampling and minibatches (``jax.random.key(seed)``).
        eval_fn: optional ``params -> dict`` of extra metrics (e.g. test accuracy).
        eval_every: evaluate every this many rounds (and after the last).
        show_progress: show a progress bar.

    Returns:
        :class:`History`.
    """
    if not isinstance(cfg, FedConfig):
        raise TypeError(f"cfg must be a FedConfig, got {type(cfg).__name__}")
    if not isinstance(clients, FederatedData):
        raise TypeError(f"clients must be FederatedData, got {type(clients).__name__}")
    if clients.n_clients != cfg.n_clients:
        raise ValueError(
            f"cfg.n_clients={cfg.n_clients} but the data holds {clients.n_clients} clients"
        )
    if cfg.batch_size is None and len(set(clients.counts.tolist())) != 1:
        raise ValueError("batch_size=None (full batch) needs clients of equal size")
    if cfg.batch_size is None and jax.tree.leaves(clients.data)[0].shape[1] != clients.counts[0]:
        raise ValueError("batch_size=None (full batch) needs unpadded client data")
    check_int(eval_every, "eval_every", low=1)
    check_int(seed, "seed", low=0)
    check_params(init_params, "init_params")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError(f"eval_fn must be callable or None, got {type(eval_fn).__name__}")
    round_fn = make_round(algo, loss_fn, cfg.static_key())
    server = init_server(algo, init_params, cfg)
    states = init_clients(init_params, cfg.n_clients)
    data = jax.tree.map(jnp.asarray, clients.data)
    counts = jnp.asarray(clients.counts)
    down, up = communication_bytes(algo, init_params)
    key = jax.random.key(seed)

    records: dict[str, list[float]] = {"rounds": [], "loss": [], "grad_fro": [], "grad_nuc": []}
    extra: dict[str, list[float]] = {}
    wall: list[float] = []
    elapsed = 0.0
    compile_time = 0.0

    def record(r: int) -> None:
        loss, fro, nuc = _metrics(loss_fn, server.params, clients)  # NaN recorded, not raised
        for name, value in (("rounds", r), ("loss", loss), ("grad_fro", fro), ("grad_nuc", nuc)):
            records[name].append(value)
        if eval_fn is not None:
            for name, value in eval_fn(server.params).items():
                extra.setdefault(name, []).append(float(value))
        wall.append(elapsed)

    record(0)
    for r in progress(range(cfg.rounds), enabled=show_progress, desc=algo):
        key, sub = jax.random.split(key)
        start = time.perf_counter()
        server, states, _ = round_fn(
            server, states, data, counts, sub, jnp.float32(round_lr(cfg, r))
        )
        jax.block_until_ready(server.params)
        took = time.perf_counter() - start
        if r == 0:
            compile_time = took
        elapsed += took
        if (r + 1) % eval_every == 0 or r + 1 == cfg.rounds:
            record(r + 1)
    return History(
        algo=algo,
        rounds=np.asarray(records["rounds"]),
        loss=np.asarray(records["loss"]),
        grad_fro=np.asarray(records["grad_fro"]),
        grad_nuc=np.asarray(records["grad_nuc"]),
        metrics={k: np.asarray(v) for k, v in extra.items()},
        wall_time=np.asarray(wall),
        bytes_per_round=cfg.clients_per_round * (down + up),
        compile_time=compile_time,
        params=server.params,
    )


def run_problem(
    algo: str,
    problem: Problem,
    cfg: FedConfig,
    *,
    seed: int,
    eval_every: int = 1,
    show_progress: bool = False,
) -> History:
    """:func:`simulate` on a :class:`~iclr26.fedmuon.problems.Problem`."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem, got {type(problem).__name__}")
    return simulate(
        algo,
        problem.loss_fn,
        problem.init_params,
        problem.clients,
        cfg,
        seed=seed,
        eval_fn=problem.eval_fn,
        eval_every=eval_every,
        show_progress=show_progress,
    )
