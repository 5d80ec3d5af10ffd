"""The README's API table, walked with bad input: every public function fails early and clearly.

Each row calls one public function with one bad argument (wrong shape, integer or complex dtype,
NaN/inf, empty, out of range, wrong type) and expects a ValueError/TypeError whose message names
the argument. Integer matrices are converted to float, never truncated: tested against the float
result below.
"""

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from iclr26.fedmuon import (
    ClientState,
    FedConfig,
    LMOSpec,
    client_update,
    communication_bytes,
    control_variate_correction,
    counterexample,
    digits,
    dirichlet_partition,
    ema_momentum,
    fedmuon_local,
    frobenius_lmo,
    global_metrics,
    iid_partition,
    init_clients,
    init_server,
    l2_lmo,
    least_squares,
    linf_lmo,
    load_digits_split,
    local_muon,
    newton_schulz,
    nuclear_norm,
    polar,
    round_lr,
    run_problem,
    scale_by_lmo,
    server_update,
    simulate,
    spectral_lmo,
    stack_clients,
    tree_lmo,
)
from iclr26.fedmuon.deploy import (
    LoopbackDeployment,
    check_app,
    demo_problem,
    simulate_demo,
    write_demo_app,
)

G = jnp.asarray([[3.0, 1.0], [1.0, 2.0], [0.0, 1.0]])
NAN = G.at[0, 0].set(jnp.nan)
INF = G.at[1, 1].set(jnp.inf)
EMPTY = jnp.zeros((0, 3))
CPLX = G.astype(jnp.complex64)
LS = least_squares(n_clients=2, examples=4, d_in=3, d_out=2, seed=0)
CFG = FedConfig(n_clients=2, clients_per_round=2, local_steps=2, batch_size=None, rounds=1)
ZEROS = jnp.zeros((3, 2))
STATE = ClientState(ZEROS, ZEROS)
BATCHES = {k: jnp.broadcast_to(v[0, :4], (2, *v.shape[1:])) for k, v in LS.clients.data.items()}
SERVER = init_server("fedmuon", LS.init_params, CFG)
LABELS = np.repeat(np.arange(4), 5)

# (id, call, exception, message fragment naming the argument)
CASES = [
    # lmo
    ("ns-vector", lambda: newton_schulz(jnp.zeros(3)), ValueError, "x must be a 2-D"),
    ("ns-list", lambda: newton_schulz([[1.0, 0.0]]), TypeError, "x must be an array"),
    ("ns-complex", lambda: newton_schulz(CPLX), TypeError, "x must be real"),
    ("ns-nan", lambda: newton_schulz(NAN), ValueError, "x contains NaN"),
    ("ns-inf", lambda: newton_schulz(INF), ValueError, "x contains NaN or inf"),
    ("ns-empty", lambda: newton_schulz(EMPTY), ValueError, "x must not be empty"),
    ("ns-steps-neg", lambda: newton_schulz(G, -1), ValueError, "steps"),
    ("ns-steps-float", lambda: newton_schulz(G, 1.5), ValueError, "steps"),
    ("ns-coeffs-name", lambda: newton_schulz(G, 1, "quartic"), ValueError, "coeffs"),
    ("ns-coeffs-shape", lambda: newton_schulz(G, 1, (1.0, 2.0)), ValueError, "coeffs"),
    ("ns-coeffs-nan", lambda: newton_schulz(G, 1, (1.0, math.nan, 0.0)), ValueError, "coeffs"),
    ("ns-eps", lambda: newton_schulz(G, 1, eps=-1.0), ValueError, "eps"),
    ("polar-3d", lambda: polar(jnp.zeros((2, 2, 2))), ValueError, "x must be a 2-D"),
    ("polar-list", lambda: polar([[1.0]]), TypeError, "x must be an array"),
    ("polar-nan", lambda: polar(NAN), ValueError, "x contains NaN"),
    ("polar-empty", lambda: polar(EMPTY), ValueError, "x must not be empty"),
    ("polar-complex", lambda: polar(CPLX), TypeError, "x must be real"),
    ("spectral-steps", lambda: spectral_lmo(G, ns_steps=-2), ValueError, "ns_steps"),
    ("spectral-nan", lambda: spectral_lmo(NAN), ValueError, "x contains NaN"),
    ("spectral-ns-nan", lambda: spectral_lmo(NAN, ns_steps=3), ValueError, "x contains NaN"),
    ("frobenius-nan", lambda: frobenius_lmo(NAN), ValueError, "g contains NaN"),
    ("frobenius-empty", lambda: frobenius_lmo(EMPTY), ValueError, "g must not be empty"),
    ("frobenius-list", lambda: frobenius_lmo([1.0]), TypeError, "g must be an array"),
    ("l2-inf", lambda: l2_lmo(jnp.asarray([1.0, jnp.inf])), ValueError, "v contains"),
    ("l2-empty", lambda: l2_lmo(jnp.zeros(0)), ValueError, "v must not be empty"),
    ("linf-nan", lambda: linf_lmo(jnp.asarray([jnp.nan])), ValueError, "v contains NaN"),
    ("linf-complex", lambda: linf_lmo(jnp.ones(2, jnp.complex64)), TypeError, "v must be real"),
    ("nuclear-nan", lambda: nuclear_norm(NAN), ValueError, "x contains NaN"),
    ("nuclear-empty", lambda: nuclear_norm(EMPTY), ValueError, "x must not be empty"),
    ("spec-matrix", lambda: LMOSpec(matrix="nuclear"), ValueError, "matrix"),
    ("spec-vector", lambda: LMOSpec(vector="l1"), ValueError, "vector"),
    ("spec-steps", lambda: LMOSpec(ns_steps=-2), ValueError, "ns_steps"),
    ("spec-scale", lambda: LMOSpec(scale="fan"), ValueError, "scale"),
    ("spec-coeffs", lambda: LMOSpec(coeffs=(1.0, 2.0)), ValueError, "coeffs"),
    ("spec-eps", lambda: LMOSpec(eps=math.nan), ValueError, "eps"),
    ("tree-spec", lambda: tree_lmo(G, "spectral"), TypeError, "spec must be an LMOSpec"),
    ("tree-nan", lambda: tree_lmo({"w": NAN}), ValueError, r"tree\['w'\] contains NaN"),
    ("tree-empty-leaf", lambda: tree_lmo({"b": jnp.zeros(0)}), ValueError, r"tree\['b'\]"),
    ("tree-no-leaves", lambda: tree_lmo({}), ValueError, "tree must hold"),
    ("tree-complex", lambda: tree_lmo([CPLX]), TypeError, r"tree\[0\] must be real"),
    # transforms
    ("ema-zero", lambda: ema_momentum(0.0), ValueError, "alpha"),
    ("ema-big", lambda: ema_momentum(1.5), ValueError, "alpha"),
    ("ema-nan", lambda: ema_momentum(math.nan), ValueError, "alpha"),
    ("scale-spec", lambda: scale_by_lmo("spectral"), TypeError, "spec"),
    ("local-lr-neg", lambda: local_muon(-0.1), ValueError, "learning_rate"),
    ("local-lr-inf", lambda: local_muon(math.inf), ValueError, "learning_rate"),
    ("fedmuon-alpha", lambda: fedmuon_local(0.1, alpha=2.0), ValueError, "alpha"),
    ("fedmuon-lr-nan", lambda: fedmuon_local(math.nan), ValueError, "learning_rate"),
    (
        "correction-no-c",
        lambda: control_variate_correction().update(G, None),
        ValueError,
        "c_local",
    ),
    # algorithms
    (
        "cfg-s-gt-n",
        lambda: FedConfig(n_clients=4, clients_per_round=10),
        ValueError,
        "clients_per_round",
    ),
    ("cfg-lr-inf", lambda: FedConfig(lr=math.inf), ValueError, "lr"),
    ("cfg-lr-nan", lambda: FedConfig(lr=math.nan), ValueError, "lr"),
    ("cfg-alpha", lambda: FedConfig(alpha=0.0), ValueError, "alpha"),
    ("cfg-steps-float", lambda: FedConfig(local_steps=2.5), TypeError, "local_steps"),
    ("cfg-batch", lambda: FedConfig(batch_size=0), ValueError, "batch_size"),
    ("cfg-decay", lambda: FedConfig(lr_decay="cosine"), ValueError, "lr_decay"),
    ("cfg-lmo", lambda: FedConfig(lmo="spectral"), TypeError, "lmo"),
    ("cfg-server-lr", lambda: FedConfig(server_lr=-1.0), ValueError, "server_lr"),
    ("cfg-adam", lambda: FedConfig(adam=(0.9, 1.5, 1e-8)), ValueError, "adam b2"),
    ("cfg-server-adam", lambda: FedConfig(server_adam=(0.1, 0.9)), ValueError, "server_adam"),
    (
        "client-algo",
        lambda: client_update("fedsgd", ZEROS, STATE, ZEROS, BATCHES, LS.loss_fn, CFG),
        ValueError,
        "algo",
    ),
    (
        "client-int-params",
        lambda: client_update(
            "fedmuon", ZEROS.astype(jnp.int32), STATE, ZEROS, BATCHES, LS.loss_fn, CFG
        ),
        TypeError,
        "params must be a floating",
    ),
    (
        "client-nan-params",
        lambda: client_update(
            "fedmuon", ZEROS.at[0, 0].set(jnp.nan), STATE, ZEROS, BATCHES, LS.loss_fn, CFG
        ),
        ValueError,
        "params contains NaN",
    ),
    (
        "client-steps",
        lambda: client_update(
            "fedmuon", ZEROS, STATE, ZEROS, jax.tree.map(lambda b: b[:1], BATCHES), LS.loss_fn, CFG
        ),
        ValueError,
        "local_steps=2",
    ),
    (
        "client-lr",
        lambda: client_update("fedmuon", ZEROS, STATE, ZEROS, BATCHES, LS.loss_fn, CFG, lr=-1.0),
        ValueError,
        "lr",
    ),
    (
        "client-cfg",
        lambda: client_update("fedmuon", ZEROS, STATE, ZEROS, BATCHES, LS.loss_fn, {}),
        TypeError,
        "cfg",
    ),
    (
        "server-algo",
        lambda: server_update("x", SERVER, ZEROS[None], ZEROS[None], 2, CFG),
        ValueError,
        "algo",
    ),
    (
        "server-n",
        lambda: server_update(
            "fedmuon", SERVER, jnp.stack([ZEROS] * 3), jnp.stack([ZEROS] * 3), 2, CFG
        ),
        ValueError,
        "n_clients",
    ),
    (
        "server-n-zero",
        lambda: server_update("fedmuon", SERVER, ZEROS[None], ZEROS[None], 0, CFG),
        ValueError,
        "n_clients",
    ),
    (
        "server-shape",
        lambda: server_update("fedmuon", SERVER, ZEROS, ZEROS[None], 2, CFG),
        ValueError,
        "client_params",
    ),
    (
        "server-tree",
        lambda: server_update("fedmuon", SERVER, ZEROS[None], {"a": ZEROS[None]}, 2, CFG),
        ValueError,
        "delta_c",
    ),
    (
        "server-empty",
        lambda: server_update("fedmuon", SERVER, ZEROS[None][:0], ZEROS[None][:0], 2, CFG),
        ValueError,
        "client_params",
    ),
    (
        "server-state",
        lambda: server_update("fedmuon", (ZEROS,), ZEROS[None], ZEROS[None], 2, CFG),
        TypeError,
        "server",
    ),
    ("init-clients", lambda: init_clients(ZEROS, 0), ValueError, "n_clients"),
    ("round-lr", lambda: round_lr(CFG, -1), ValueError, "round_index"),
    ("round-lr-cfg", lambda: round_lr({}, 0), TypeError, "cfg"),
    ("bytes-algo", lambda: communication_bytes("fedx", ZEROS), ValueError, "algo"),
    # simulate
    (
        "sim-cfg",
        lambda: simulate("fedmuon", LS.loss_fn, LS.init_params, LS.clients, {}, seed=0),
        TypeError,
        "cfg",
    ),
    (
        "sim-clients",
        lambda: simulate("fedmuon", LS.loss_fn, LS.init_params, [], CFG, seed=0),
        TypeError,
        "clients",
    ),
    (
        "sim-n",
        lambda: simulate(
            "fedmuon",
            LS.loss_fn,
            LS.init_params,
            LS.clients,
            FedConfig(n_clients=3, clients_per_round=2),
            seed=0,
        ),
        ValueError,
        "n_clients",
    ),
    (
        "sim-seed",
        lambda: simulate("fedmuon", LS.loss_fn, LS.init_params, LS.clients, CFG, seed=-1),
        ValueError,
        "seed",
    ),
    (
        "sim-eval-every",
        lambda: simulate(
            "fedmuon", LS.loss_fn, LS.init_params, LS.clients, CFG, seed=0, eval_every=0
        ),
        ValueError,
        "eval_every",
    ),
    (
        "sim-int-params",
        lambda: simulate("fedmuon", LS.loss_fn, ZEROS.astype(int), LS.clients, CFG, seed=0),
        TypeError,
        "init_params must be a floating",
    ),
    (
        "sim-nan-params",
        lambda: simulate("fedmuon", LS.loss_fn, ZEROS + jnp.nan, LS.clients, CFG, seed=0),
        ValueError,
        "init_params contains NaN",
    ),
    (
        "sim-loss",
        lambda: simulate("fedmuon", None, LS.init_params, LS.clients, CFG, seed=0),
        TypeError,
        "loss_fn",
    ),
    ("run-problem", lambda: run_problem("fedmuon", "ls", CFG, seed=0), TypeError, "problem"),
    ("metrics-clients", lambda: global_metrics(LS.loss_fn, ZEROS, {}), TypeError, "clients"),
    (
        "metrics-nan",
        lambda: global_metrics(LS.loss_fn, ZEROS + jnp.nan, LS.clients),
        ValueError,
        "params contains NaN",
    ),
    # problems and data
    ("counterexample-dim", lambda: counterexample(0), ValueError, "dim"),
    ("ls-clients", lambda: least_squares(n_clients=0, seed=0), ValueError, "n_clients"),
    (
        "ls-het-inf",
        lambda: least_squares(heterogeneity=math.inf, seed=0),
        ValueError,
        "heterogeneity",
    ),
    (
        "ls-het-nan",
        lambda: least_squares(heterogeneity=math.nan, seed=0),
        ValueError,
        "heterogeneity",
    ),
    ("digits-model", lambda: digits("cnn", seed=0), ValueError, "model"),
    ("digits-beta", lambda: digits(beta=0.0, seed=0), ValueError, "beta"),
    ("digits-clients", lambda: digits(n_clients=0, seed=0), ValueError, "n_clients"),
    (
        "dirichlet-2d",
        lambda: dirichlet_partition(LABELS[None], 2, 0.1, seed=0),
        ValueError,
        "labels",
    ),
    (
        "dirichlet-nan",
        lambda: dirichlet_partition(LABELS + np.nan, 2, 0.1, seed=0),
        ValueError,
        "labels",
    ),
    (
        "dirichlet-frac",
        lambda: dirichlet_partition(LABELS + 0.5, 2, 0.1, seed=0),
        ValueError,
        "labels",
    ),
    (
        "dirichlet-empty",
        lambda: dirichlet_partition(np.zeros(0, int), 2, 0.1, seed=0),
        ValueError,
        "labels",
    ),
    (
        "dirichlet-beta-inf",
        lambda: dirichlet_partition(LABELS, 2, math.inf, seed=0),
        ValueError,
        "beta",
    ),
    (
        "dirichlet-clients",
        lambda: dirichlet_partition(LABELS, 50, 0.1, seed=0),
        ValueError,
        "n_clients",
    ),
    ("iid-small", lambda: iid_partition(3, 4, seed=0), ValueError, "n_examples"),
    ("stack-empty", lambda: stack_clients([]), ValueError, "datasets"),
    ("stack-type", lambda: stack_clients({"x": np.ones((2, 2))}), TypeError, "datasets"),
    ("stack-no-rows", lambda: stack_clients([{"x": np.ones((0, 2))}]), ValueError, "no examples"),
    ("stack-nan", lambda: stack_clients([{"x": np.full((2, 2), np.nan)}]), ValueError, "NaN"),
    (
        "stack-ragged",
        lambda: stack_clients([{"x": np.ones((2, 2)), "y": np.ones(3)}]),
        ValueError,
        "disagree",
    ),
    (
        "digits-split",
        lambda: load_digits_split(seed=0, test_fraction=1.0),
        ValueError,
        "test_fraction",
    ),
    # deploy (no processes are started: arguments are checked first)
    ("loopback-nodes", lambda: LoopbackDeployment(nodes=0), ValueError, "nodes"),
    (
        "loopback-cache",
        lambda: LoopbackDeployment(compilation_cache=3),
        TypeError,
        "compilation_cache",
    ),
    (
        "loopback-timeout",
        lambda: LoopbackDeployment(startup_timeout=0.0),
        ValueError,
        "startup_timeout",
    ),
    ("demo-rounds", lambda: write_demo_app("unused", rounds=0), ValueError, "rounds"),
    ("demo-nodes", lambda: demo_problem(0), ValueError, "nodes"),
    ("simulate-demo", lambda: simulate_demo(0), ValueError, "rounds"),
    ("app-missing", lambda: check_app("no/such/app"), FileNotFoundError, "does not exist"),
]


@pytest.mark.parametrize(
    ("call", "exc", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_public_functions_refuse_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_every_public_function_is_walked():
    """Each name of the package's API appears in CASES (so a new public function needs a row)."""
    import inspect

    import iclr26.fedmuon as fm

    source = inspect.getsource(sys.modules[__name__])
    skip = {"__version__", "ALGORITHMS", "NS_COEFFS", "History", "Problem", "FederatedData",
            "EmaState", "ClientState", "ServerState", "__all__"}  # fmt: skip
    missing = [n for n in fm.__all__ if n not in skip and f"{n}(" not in source]
    assert not missing, missing


@pytest.mark.parametrize("fn", [newton_schulz, polar, spectral_lmo, nuclear_norm, frobenius_lmo])
def test_integer_matrices_are_converted_to_float_not_truncated(fn):
    g_int = jnp.asarray([[3, 1], [1, 2], [0, 1]], dtype=jnp.int32)
    out = fn(g_int)
    assert jnp.issubdtype(out.dtype, jnp.floating)
    np.testing.assert_allclose(out, fn(g_int.astype(jnp.float32)), rtol=1e-6, atol=1e-6)


def test_integer_trees_get_a_float_direction():
    g_int = jnp.asarray([[3, 1], [1, 2], [0, 1]], dtype=jnp.int32)
    tree = {"w": g_int, "b": jnp.asarray([1, 2], dtype=jnp.int32), "m": g_int.astype(bool)}
    out = tree_lmo(tree, LMOSpec(ns_steps=None))
    np.testing.assert_allclose(out["w"], -polar(g_int.astype(jnp.float32)), atol=1e-6)
    np.testing.assert_allclose(out["b"], -np.array([1, 2]) / np.sqrt(5), rtol=1e-6)
    assert all(jnp.issubdtype(v.dtype, jnp.floating) for v in out.values())
    # the old failure: a direction truncated to int was all zeros
    assert float(jnp.abs(out["w"]).sum()) > 1.0
    # the coefficients were cast to the matrix dtype (3.4445 -> 3): the result was not NS_5
    np.testing.assert_allclose(newton_schulz(g_int, 5), newton_schulz(g_int * 1.0, 5), rtol=1e-6)
