"""FedMuon and its baselines as pure, jit- and vmap-able client and server updates.

FedMuon is Algorithm 1 of Takezawa et al., "FedMuon: Federated Learning with Bias-corrected
LMO-based Optimization" (ICLR 2026, arXiv 2509.26337) — not the unrelated 2510.27403 or
2510.03866 algorithms of the same name. Round ``r``, sampled clients ``S_r`` of ``n``:

* client ``i`` (lines 6–11): from ``X`` run ``K`` steps ``M_i ← (1−α)M_i + α∇F_i(X_i; ξ)``,
  ``X_i ← X_i + η·lmo(M_i − C_i + C)``; then ``C_i ← M_i`` and upload ``X_i`` and ``ΔC_i``;
* server (lines 17–18): ``C ← C + (1/n)Σ_{i∈S} ΔC_i`` and ``X ← ((n−S)/n)X + (1/n)Σ_{i∈S} X_i``.

Baselines share the signatures: ``local_muon`` (FedAvg with local Muon, the biased method),
``fedavg_sgd`` (local momentum SGD), ``fedavg_adam`` (local Adam), ``scaffold``, ``fedprox`` and
``fedadam`` (server-side Adam on the averaged update, Reddi et al. 2021).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from iclr26.fedmuon.lmo import LMOSpec
from iclr26.fedmuon.transforms import EmaState, fedmuon_local, local_muon
from iclr26.shared import check_choice, check_int, check_range

__all__ = [
    "ALGORITHMS",
    "ClientState",
    "FedConfig",
    "ServerState",
    "client_update",
    "communication_bytes",
    "init_clients",
    "init_server",
    "round_lr",
    "server_update",
]

ALGORITHMS = (
    "fedmuon",
    "local_muon",
    "fedavg_sgd",
    "fedavg_adam",
    "scaffold",
    "fedprox",
    "fedadam",
)
#: algorithms that send a control variate down and its change up (2× FedAvg's traffic)
CONTROL_VARIATE_ALGORITHMS = ("fedmuon", "scaffold")


@dataclass(frozen=True)
class FedConfig:
    """Hyperparameters of one federated run (hashable: used as a static argument under ``jit``).

    Defaults follow the paper's setup as recovered from the community reproduction (spec §1.5):
    ``n = 16`` clients, ``S = 8`` per round, ``K = 5`` local steps, batch 32, ``η = 0.01``.
    **[verify]** the paper's tuned grids; everything is exposed here.

    Attributes:
        n_clients: ``n``, the total number of clients (the server divides by it).
        clients_per_round: ``S``.
        local_steps: ``K``.
        batch_size: minibatch size per local step; ``None`` uses each client's full data.
        rounds: number of communication rounds (used by :func:`~iclr26.fedmuon.simulate`).
        lr: local step size ``η``.
        lr_decay: ``"constant"`` or ``"sqrt"`` (``η_r = η/√(r+1)``, the decaying step of the theory).
        alpha: EMA weight on the *new* gradient (FedMuon, LocalMuon). The spec's default 0.1
            equals Muon's ``β = 0.9``; the reproduction's "α = 0.9" is read as ``β``. **[verify]**
        lmo: per-leaf LMO policy (exact SVD polar when ``lmo.ns_steps`` is ``None``).
        server_lr: ``None`` for the paper's rule ``X ← ((n−S)/n)X + (1/n)ΣX_i`` (every algorithm
            but ``fedadam``), or ``γ`` for ``X ← X + γ·mean(X_i − X)`` (``1.0`` = plain FedAvg).
        momentum: heavy-ball momentum of ``fedavg_sgd``'s local optimiser.
        adam: ``(b1, b2, eps)`` of ``fedavg_adam``'s local Adam.
        prox_mu: FedProx's proximal weight ``μ``.
        server_adam: ``(lr, b1, b2, eps)`` of ``fedadam``'s server Adam (Reddi et al. defaults).
        scaffold_variant: ``"last_grad"`` (``C_i ←`` last local stochastic gradient: FedMuon with
            ``lmo(g) = −g`` and ``α = 1`` is exactly this) or ``"option2"`` (SCAFFOLD's option II,
            ``C_i ← C_i − C + (X − X_i)/(Kη)``).
    """

    n_clients: int = 16
    clients_per_round: int = 8
    local_steps: int = 5
    batch_size: int | None = 32
    rounds: int = 1000
    lr: float = 0.01
    lr_decay: str = "constant"
    alpha: float = 0.1
    lmo: LMOSpec = field(default_factory=LMOSpec)
    server_lr: float | None = None
    momentum: float = 0.9
    adam: tuple[float, float, float] = (0.9, 0.999, 1e-8)
    prox_mu: float = 0.01
    server_adam: tuple[float, float, float, float] = (1e-2, 0.9, 0.99, 1e-3)
    scaffold_variant: str = "last_grad"

    def __post_init__(self) -> None:
        check_int(self.n_clients, "n_clients", low=1)
        check_int(self.clients_per_round, "clients_per_round", low=1, high=self.n_clients)
        check_int(self.local_steps, "local_steps", low=1)
        if self.batch_size is not None:
            check_int(self.batch_size, "batch_size", low=1)
        check_int(self.rounds, "rounds", low=0)
        _check_real(self.lr, "lr", low=0.0, low_inclusive=False)
        check_choice(self.lr_decay, "lr_decay", ("constant", "sqrt"))
        check_range(self.alpha, "alpha", low=0.0, high=1.0, low_inclusive=False)
        if not isinstance(self.lmo, LMOSpec):
            raise TypeError(f"lmo must be an LMOSpec, got {type(self.lmo).__name__}")
        if self.server_lr is not None:
            _check_real(self.server_lr, "server_lr", low=0.0, low_inclusive=False)
        check_range(self.momentum, "momentum", low=0.0, high=1.0, high_inclusive=False)
        _check_real(self.prox_mu, "prox_mu", low=0.0)
        if len(tuple(self.adam)) != 3:
            raise ValueError(f"adam must be (b1, b2, eps), got {self.adam!r}")
        for value, name in zip(self.adam, ("adam b1", "adam b2"), strict=False):
            check_range(value, name, low=0.0, high=1.0, high_inclusive=False)
        _check_real(self.adam[2], "adam eps", low=0.0, low_inclusive=False)
        if len(tuple(self.server_adam)) != 4:
            raise ValueError(f"server_adam must be (lr, b1, b2, eps), got {self.server_adam!r}")
        _check_real(self.server_adam[0], "server_adam lr", low=0.0, low_inclusive=False)
        for value, name in zip(
            self.server_adam[1:3], ("server_adam b1", "server_adam b2"), strict=True
        ):
            check_range(value, name, low=0.0, high=1.0, high_inclusive=False)
        _check_real(self.server_adam[3], "server_adam eps", low=0.0, low_inclusive=False)
        check_choice(self.scaffold_variant, "scaffold_variant", ("last_grad", "option2"))

    def static_key(self) -> FedConfig:
        """This config with the fields that never change compiled code reset (``lr``, ``rounds``, ``lr_decay``)."""
        return replace(self, lr=1.0, rounds=0, lr_decay="constant")


class ServerState(NamedTuple):
    """Server state: global ``params`` X, control variate ``c_global`` C, ``round``, ``opt_state``
    (FedAdam's server optimiser; ``optax.EmptyState()`` otherwise)."""

    params: Any
    c_global: Any
    round: jax.Array
    opt_state: Any


class ClientState(NamedTuple):
    """A client's persistent state: control variate ``c_local`` (C_i) and ``momentum`` (M_i)."""

    c_local: Any
    momentum: Any


def _check_real(value: Any, name: str, **bounds: Any) -> float:
    """``check_range`` that also refuses ±inf."""
    v = check_range(value, name, **bounds)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def check_params(params: Any, name: str = "params") -> Any:
    """Check that a parameter pytree holds only floating arrays (finite, when concrete).

    Integer parameters are refused (they cannot be differentiated; convert them yourself, e.g.
    ``jax.tree.map(lambda p: p.astype(jnp.float32), params)``). Works on traced values (only the
    dtypes and shapes are checked then).
    """
    leaves = jax.tree_util.tree_leaves_with_path(params)
    if not leaves:
        raise ValueError(f"{name} must hold at least one array leaf")
    for path, leaf in leaves:
        label = f"{name}{jax.tree_util.keystr(path)}"
        if not hasattr(leaf, "dtype"):
            raise TypeError(f"{label} must be an array, got {type(leaf).__name__}")
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            raise TypeError(f"{label} must be a floating array, got dtype {leaf.dtype}")
        # NumPy, not jnp: under an outer jit even a concrete array's jnp result is traced
        if not isinstance(leaf, jax.core.Tracer) and not np.isfinite(np.asarray(leaf)).all():
            raise ValueError(f"{label} contains NaN or inf")
    return params


def _check_algo(algo: str) -> str:
    return check_choice(algo, "algo", ALGORITHMS)


def _server_adam(cfg: FedConfig) -> optax.GradientTransformation:
    lr, b1, b2, eps = cfg.server_adam
    return optax.adam(lr, b1=b1, b2=b2, eps=eps)


def init_server(algo: str, params: Any, cfg: FedConfig) -> ServerState:
    """Round-0 server state: ``X = params``, ``C = 0`` (spec §1.2, **[verify]** warm starts)."""
    _check_algo(algo)
    opt_state = _server_adam(cfg).init(params) if algo == "fedadam" else optax.EmptyState()
    return ServerState(params, optax.tree.zeros_like(params), jnp.zeros((), jnp.int32), opt_state)


def init_clients(params: Any, n_clients: int) -> ClientState:
    """Zero ``C_i`` and ``M_i`` for ``n_clients`` clients, stacked along a leading axis."""
    check_int(n_clients, "n_clients", low=1)
    zeros = jax.tree.map(
        lambda p: jnp.zeros((n_clients, *jnp.shape(p)), jnp.result_type(p)), params
    )
    return ClientState(zeros, zeros)


def round_lr(cfg: FedConfig, round_index: int) -> float:
    """Local step size of round ``round_index`` (0-based): ``η`` or ``η/√(r+1)``."""
    if not isinstance(cfg, FedConfig):
        raise TypeError(f"cfg must be a FedConfig, got {type(cfg).__name__}")
    check_int(round_index, "round_index", low=0)
    if cfg.lr_decay == "sqrt":
        return cfg.lr / math.sqrt(round_index + 1)
    return cfg.lr


def client_update(
    algo: str,
    params: Any,
    client_state: ClientState,
    c_global: Any,
    batches: Any,
    loss_fn: Any,
    cfg: FedConfig,
    lr: jax.Array | float | None = None,
) -> tuple[Any, ClientState, Any, dict[str, jax.Array]]:
    """``K`` local steps of client ``i`` (FedMuon: Algorithm 1, lines 6–11), scanned with ``lax.scan``.

    Args:
        algo: one of :data:`ALGORITHMS`.
        params: the global parameters ``X`` (pytree of float arrays).
        client_state: this client's ``C_i`` and ``M_i`` (unbatched).
        c_global: the server's ``C`` (pytree like ``params``).
        batches: pytree whose leaves have a leading axis of length ``K``; step ``k`` calls
            ``loss_fn(X_i, batch_k)``.
        loss_fn: ``(params, batch) -> scalar`` mean loss of the batch.
        cfg: hyperparameters (static).
        lr: this round's ``η`` (a traced scalar is fine); default ``cfg.lr``.

    Returns:
        ``(X_i, new_client_state, ΔC_i, metrics)``; ``ΔC_i = C_i⁺ − C_i`` is zero for algorithms
        without control variates; ``metrics["loss"]`` is the mean local minibatch loss.
    """
    _check_algo(algo)
    if not isinstance(cfg, FedConfig):
        raise TypeError(f"cfg must be a FedConfig, got {type(cfg).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    check_params(params)
    steps = {int(jnp.shape(b)[0]) if jnp.ndim(b) else None for b in jax.tree.leaves(batches)}
    if steps != {cfg.local_steps}:
        raise ValueError(
            f"batches must have a leading axis of length local_steps={cfg.local_steps} on every "
            f"leaf, got {sorted(steps, key=str)}"
        )
    if lr is not None and not isinstance(lr, jax.core.Tracer):
        _check_real(float(lr), "lr", low=0.0, low_inclusive=False)
    lr = cfg.lr if lr is None else lr
    grad_fn = jax.value_and_grad(loss_fn)
    x0 = params

    if algo in ("fedmuon", "local_muon"):
        if algo == "fedmuon":
            opt = fedmuon_local(lr, cfg.alpha, cfg.lmo)
            extra = {"c_local": client_state.c_local, "c_global": c_global}
        else:
            opt = local_muon(lr, cfg.alpha, cfg.lmo)
            extra = {}
        state = opt.init(params)
        # the momentum persists across rounds (M_i = C_i at the start of a round for FedMuon)
        state = (EmaState(mu=client_state.momentum), *state[1:])

        def step(carry, batch):
            y, st = carry
            loss, g = grad_fn(y, batch)
            updates, st = opt.update(g, st, y, **extra)
            return (optax.apply_updates(y, updates), st), loss

        (y, state), losses = jax.lax.scan(step, (params, state), batches)
        momentum = state[0].mu
        if algo == "fedmuon":
            c_new = momentum  # line 11: C_i ← M_i
            delta_c = jax.tree.map(jnp.subtract, c_new, client_state.c_local)
            return y, ClientState(c_new, momentum), delta_c, {"loss": losses.mean()}
        zero = optax.tree.zeros_like(params)
        return y, ClientState(client_state.c_local, momentum), zero, {"loss": losses.mean()}

    if algo == "scaffold":

        def step(y, batch):
            loss, g = grad_fn(y, batch)
            # same association as FedMuon's (M − C_i) + C, so the reduction test is bit-exact
            y = jax.tree.map(
                lambda p, gi, ci, c: p - lr * (gi - ci + c), y, g, client_state.c_local, c_global
            )
            return y, (loss, g)

        y, (losses, grads) = jax.lax.scan(step, params, batches)
        if cfg.scaffold_variant == "last_grad":
            c_new = jax.tree.map(lambda g: g[-1], grads)
        else:
            c_new = jax.tree.map(
                lambda ci, c, p0, p: ci - c + (p0 - p) / (cfg.local_steps * lr),
                client_state.c_local,
                c_global,
                x0,
                y,
            )
        delta_c = jax.tree.map(jnp.subtract, c_new, client_state.c_local)
        return y, ClientState(c_new, client_state.momentum), delta_c, {"loss": losses.mean()}

    # FedAvg family: a fresh local optimiser every round (stateless clients)
    if algo == "fedavg_sgd":
        opt = optax.sgd(lr, momentum=cfg.momentum)
        objective = loss_fn
    elif algo == "fedavg_adam":
        b1, b2, eps = cfg.adam
        opt = optax.adam(lr, b1=b1, b2=b2, eps=eps)
        objective = loss_fn
    elif algo == "fedprox":
        opt = optax.sgd(lr)

        def objective(y, batch):
            prox = sum(
                jnp.sum((a - b) ** 2)
                for a, b in zip(jax.tree.leaves(y), jax.tree.leaves(x0), strict=True)
            )
            return loss_fn(y, batch) + 0.5 * cfg.prox_mu * prox
    else:  # fedadam: plain local SGD, adaptivity on the server
        opt = optax.sgd(lr)
        objective = loss_fn
    obj_grad = jax.value_and_grad(objective)

    def step(carry, batch):
        y, st = carry
        loss, g = obj_grad(y, batch)
        updates, st = opt.update(g, st, y)
        return (optax.apply_updates(y, updates), st), loss

    (y, _), losses = jax.lax.scan(step, (params, opt.init(params)), batches)
    return y, client_state, optax.tree.zeros_like(params), {"loss": losses.mean()}


def server_update(
    algo: str,
    server: ServerState,
    client_params: Any,
    delta_c: Any,
    n_clients: int,
    cfg: FedConfig,
) -> ServerState:
    """Aggregate the ``S`` participating clients (FedMuon: Algorithm 1, lines 17–18).

    ``C⁺ = C + (1/n) Σ_{i∈S} ΔC_i`` (deltas, once per round, divided by the *total* ``n``) and
    ``X⁺ = ((n−S)/n) X + (1/n) Σ_{i∈S} X_i`` (``cfg.server_lr=None``), or
    ``X⁺ = X + γ·mean_i(X_i − X)``; ``fedadam`` applies server Adam to ``X − mean_i X_i``.
    Clients that were sampled but did not reply are simply left out (``S`` shrinks).

    Args:
        algo: one of :data:`ALGORITHMS`.
        server: the current :class:`ServerState`.
        client_params: pytree like ``server.params`` with a leading axis of length ``S``.
        delta_c: pytree like ``client_params`` (``ΔC_i``; ignored without control variates).
        n_clients: ``n`` (static), ``n ≥ S``.
        cfg: hyperparameters.
    """
    _check_algo(algo)
    if not isinstance(server, ServerState):
        raise TypeError(f"server must be a ServerState, got {type(server).__name__}")
    check_int(n_clients, "n_clients", low=1)
    want = jax.tree.structure(server.params)
    for tree, name in ((client_params, "client_params"), (delta_c, "delta_c")):
        if jax.tree.structure(tree) != want:
            raise ValueError(f"{name} must have the structure of server.params")
        for leaf, p in zip(jax.tree.leaves(tree), jax.tree.leaves(server.params), strict=True):
            if jnp.ndim(leaf) != jnp.ndim(p) + 1 or jnp.shape(leaf)[1:] != jnp.shape(p):
                raise ValueError(
                    f"{name} leaves must be the parameters' shapes with a leading client axis, "
                    f"got {jnp.shape(leaf)} for a parameter of shape {jnp.shape(p)}"
                )
    sizes = {int(jnp.shape(leaf)[0]) for leaf in jax.tree.leaves(client_params)}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"client_params must hold at least one client on every leaf, got {sizes}")
    s = sizes.pop()
    if not s <= n_clients:
        raise ValueError(f"more participating clients ({s}) than n_clients ({n_clients})")
    x = server.params
    opt_state = server.opt_state
    if algo == "fedadam":
        pseudo_grad = jax.tree.map(lambda p, ps: p - ps.mean(axis=0), x, client_params)
        updates, opt_state = _server_adam(cfg).update(pseudo_grad, opt_state, x)
        x_new = optax.apply_updates(x, updates)
    elif cfg.server_lr is None:
        x_new = jax.tree.map(
            lambda p, ps: ((n_clients - s) / n_clients) * p + ps.sum(axis=0) / n_clients,
            x,
            client_params,
        )
    else:
        x_new = jax.tree.map(
            lambda p, ps: p + cfg.server_lr * (ps - p).mean(axis=0), x, client_params
        )
    c = server.c_global
    if algo in CONTROL_VARIATE_ALGORITHMS:
        c = jax.tree.map(lambda cg, d: cg + d.sum(axis=0) / n_clients, c, delta_c)
    return ServerState(x_new, c, server.round + 1, opt_state)


def communication_bytes(algo: str, params: Any) -> tuple[int, int]:
    """Bytes one participating client receives and sends per round: ``(down, up)``.

    FedMuon and SCAFFOLD move ``X`` and ``C`` down, ``X_i`` and ``ΔC_i`` up: twice FedAvg.
    """
    _check_algo(algo)
    size = sum(int(jnp.size(p)) * jnp.result_type(p).itemsize for p in jax.tree.leaves(params))
    factor = 2 if algo in CONTROL_VARIATE_ALGORITHMS else 1
    return factor * size, factor * size
