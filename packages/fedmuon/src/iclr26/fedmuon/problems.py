"""Federated test problems: the bias counterexample, heterogeneous matrix least squares, digits.

Each builder returns a :class:`Problem`: a ``loss_fn(params, batch) -> scalar`` (mean over the
batch's leading axis), initial parameters, the clients' :class:`~iclr26.fedmuon.data.FederatedData`
and an optional ``eval_fn(params) -> dict`` (test accuracy). Your own model and data plug in the
same way: any loss of that signature and any stacked client data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.fedmuon.data import (
    FederatedData,
    dirichlet_partition,
    iid_partition,
    load_digits_split,
    stack_clients,
)
from iclr26.shared import check_choice, check_int, check_range

__all__ = [
    "Problem",
    "counterexample",
    "digits",
    "least_squares",
    "mlp_loss",
    "quadratic_loss",
    "softmax_loss",
]


@dataclass(frozen=True)
class Problem:
    """A federated problem: ``f(X) = (1/n) Σ_i f_i(X)``, ``f_i`` = mean loss over client i's data.

    Attributes:
        name: short label.
        loss_fn: ``(params, batch) -> scalar`` mean loss; ``batch`` is a pytree of arrays with a
            leading example axis.
        init_params: starting point ``X⁽⁰⁾``.
        clients: the stacked client datasets.
        eval_fn: ``params -> {"accuracy": ...}`` on held-out data, or ``None``.
        solution: the minimiser ``X*`` where known in closed form, else ``None``.
    """

    name: str
    loss_fn: Callable[[Any, Any], jax.Array]
    init_params: Any
    clients: FederatedData
    eval_fn: Callable[[Any], dict[str, float]] | None = None
    solution: Any = None


def quadratic_loss(params: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    """``mean_b (s_b/2)‖X − T_b‖²_F`` with ``batch = {"scale": (B,), "target": (B, d1, d2)}``."""
    diff = params[None] - batch["target"]
    return jnp.mean(0.5 * batch["scale"] * jnp.sum(diff**2, axis=(1, 2)))


def counterexample(dim: int = 2) -> Problem:
    """The two-client problem on which LocalMuon never moves (paper Theorem 1, Appendix D style).

    ``f₁(X) = (3/2)‖X − I‖²_F`` and ``f₂(X) = (1/2)‖X + I‖²_F`` from ``X⁽⁰⁾ = 0``: the client
    gradients ``−3I`` and ``I`` have polar factors ``−I`` and ``+I`` whose LMOs cancel in the
    average, while ``∇f(0) = −I`` (``‖∇f‖_F = √dim``) and ``X* = I/2``. Every local momentum stays a
    multiple of ``I``, so the cancellation holds for NS_T of every T and both coefficient sets.
    """
    check_int(dim, "dim", low=1)
    eye = np.eye(dim, dtype=np.float32)
    clients = stack_clients(
        [
            {"scale": np.array([3.0], np.float32), "target": eye[None]},
            {"scale": np.array([1.0], np.float32), "target": -eye[None]},
        ],
        pad_to_power_of_two=False,
    )
    return Problem(
        "counterexample",
        quadratic_loss,
        jnp.zeros((dim, dim), jnp.float32),
        clients,
        solution=jnp.asarray(0.5 * eye),
    )


def _ls_loss(params: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    resid = batch["a"] @ params - batch["b"]
    return 0.5 * jnp.mean(jnp.sum(resid**2, axis=-1))


def least_squares(
    n_clients: int = 16,
    examples: int = 32,
    d_in: int = 8,
    d_out: int = 6,
    heterogeneity: float = 1.0,
    *,
    seed: int,
) -> Problem:
    """Heterogeneous matrix least squares ``f_i(W) = (1/2m)‖A_i W − B_i‖²_F`` (spec §4.2).

    Client ``i`` draws features with its own scale and targets from its own ``W_i* = W₀ +
    h·Δ_i`` (``h`` = ``heterogeneity``), so ``ζ*² = (1/n)Σ‖∇f_i(W*)‖²`` grows with ``h``. The
    global minimiser ``W*`` is the pooled normal-equation solution (returned as ``solution``).
    """
    check_int(n_clients, "n_clients", low=1)
    check_int(examples, "examples", low=1)
    check_int(d_in, "d_in", low=1)
    check_int(d_out, "d_out", low=1)
    check_range(heterogeneity, "heterogeneity", low=0.0)
    if not np.isfinite(heterogeneity):
        raise ValueError(f"heterogeneity must be finite, got {heterogeneity!r}")
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=(d_in, d_out)) / np.sqrt(d_in)
    datasets = []
    gram = np.zeros((d_in, d_in))
    cross = np.zeros((d_in, d_out))
    for _ in range(n_clients):
        a = rng.normal(size=(examples, d_in)) * rng.uniform(0.5, 1.5, size=d_in)
        wi = w0 + heterogeneity * rng.normal(size=(d_in, d_out)) / np.sqrt(d_in)
        b = a @ wi
        datasets.append({"a": a.astype(np.float32), "b": b.astype(np.float32)})
        gram += a.T @ a / examples
        cross += a.T @ b / examples
    solution = np.linalg.solve(gram, cross)
    return Problem(
        "least_squares",
        _ls_loss,
        jnp.zeros((d_in, d_out), jnp.float32),
        stack_clients(datasets, pad_to_power_of_two=False),
        solution=jnp.asarray(solution, jnp.float32),
    )


def softmax_loss(params: dict[str, jax.Array], batch: dict[str, jax.Array]) -> jax.Array:
    """Cross-entropy of ``softmax(x W + b)``; ``params = {"w": (64, 10), "b": (10,)}``."""
    logits = batch["x"] @ params["w"] + params["b"]
    return _xent(logits, batch["y"])


def _mlp_logits(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def mlp_loss(params: dict[str, jax.Array], batch: dict[str, jax.Array]) -> jax.Array:
    """Cross-entropy of a 64-``hidden``-10 tanh MLP; params ``w1, b1, w2, b2``."""
    return _xent(_mlp_logits(params, batch["x"]), batch["y"])


def _xent(logits: jax.Array, y: jax.Array) -> jax.Array:
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def _predict(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    if "w1" in params:
        return _mlp_logits(params, x)
    return x @ params["w"] + params["b"]


def digits(
    model: str = "softmax",
    *,
    n_clients: int = 16,
    partition: str = "dirichlet",
    beta: float = 0.1,
    hidden: int = 128,
    seed: int,
) -> Problem:
    """sklearn digits split over ``n_clients`` (Dirichlet(β) label skew or IID), softmax or MLP.

    Substitutes for the paper's FashionMNIST/CIFAR-10 runs (no downloads on a CPU box).
    ``eval_fn`` returns the test accuracy and loss on a stratified 20 % hold-out.
    """
    check_choice(model, "model", ("softmax", "mlp"))
    check_choice(partition, "partition", ("dirichlet", "iid"))
    check_int(hidden, "hidden", low=1)
    check_int(n_clients, "n_clients", low=1)
    check_range(beta, "beta", low=0.0, low_inclusive=False)  # before loading the data
    if not np.isfinite(beta):
        raise ValueError(f"beta must be finite, got {beta!r}")
    x, y, xt, yt = load_digits_split(seed=0)
    if partition == "dirichlet":
        parts = dirichlet_partition(y, n_clients, beta, seed=seed)
    else:
        parts = iid_partition(y.size, n_clients, seed=seed)
    clients = stack_clients([{"x": x[p], "y": y[p]} for p in parts])
    key = jax.random.key(seed)
    if model == "softmax":
        params = {"w": jnp.zeros((64, 10), jnp.float32), "b": jnp.zeros((10,), jnp.float32)}
        loss = softmax_loss
    else:
        k1, k2 = jax.random.split(key)
        params = {
            "w1": jax.random.normal(k1, (64, hidden), jnp.float32) / 8.0,
            "b1": jnp.zeros((hidden,), jnp.float32),
            "w2": jax.random.normal(k2, (hidden, 10), jnp.float32) / np.sqrt(hidden),
            "b2": jnp.zeros((10,), jnp.float32),
        }
        loss = mlp_loss
    xt_j, yt_j = jnp.asarray(xt), jnp.asarray(yt)

    @jax.jit
    def _evaluate(p: Any) -> tuple[jax.Array, jax.Array]:
        logits = _predict(p, xt_j)
        return jnp.mean(jnp.argmax(logits, axis=1) == yt_j), _xent(logits, yt_j)

    def eval_fn(p: Any) -> dict[str, float]:
        acc, test_loss = _evaluate(p)
        return {"accuracy": float(acc), "test_loss": float(test_loss)}

    label = f"digits-{model}-{partition}" + (f"-beta{beta:g}" if partition == "dirichlet" else "")
    return Problem(label, loss, params, clients, eval_fn=eval_fn)
