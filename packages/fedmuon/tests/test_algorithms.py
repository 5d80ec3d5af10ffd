import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclr26.fedmuon import (
    ClientState,
    FedConfig,
    LMOSpec,
    ServerState,
    client_update,
    communication_bytes,
    counterexample,
    ema_momentum,
    fedmuon_local,
    init_clients,
    init_server,
    least_squares,
    run_problem,
    server_update,
    simulate,
    stack_clients,
)

SQRT2 = float(np.sqrt(2.0))
E1 = FedConfig(
    n_clients=2, clients_per_round=2, local_steps=5, batch_size=None, rounds=200, lr=0.013,
    alpha=0.5, lmo=LMOSpec(ns_steps=None),
)  # fmt: skip


REDUCTION = FedConfig(
    n_clients=6, clients_per_round=3, local_steps=4, batch_size=4, rounds=3, lr=0.05, alpha=1.0,
    lmo=LMOSpec(matrix="neg_identity", vector="neg_identity"),
)  # fmt: skip


@pytest.fixture(scope="module")
def ls_problem():
    return least_squares(n_clients=6, examples=16, d_in=5, d_out=3, seed=0)


# ------------------------------------------------------------------ the counterexample (E1)


def _polar(g):
    u, s, vt = np.linalg.svd(g, full_matrices=False)
    return (u * (s > 1e-9 * max(s.max(), 1e-30))) @ vt


def reference_fedmuon(mutation=None, rounds=200, lr=0.013, alpha=0.5, k=5):
    """Plain NumPy FedMuon on the two-client counterexample, with optional bugs."""
    scale, target = [3.0, 1.0], [np.eye(2), -np.eye(2)]
    n = 2
    x, c = np.zeros((2, 2)), np.zeros((2, 2))
    ci = [np.zeros((2, 2)) for _ in range(n)]
    m = [np.zeros((2, 2)) for _ in range(n)]
    for _ in range(rounds):
        xs, deltas = [], []
        for i in range(n):
            y = x.copy()
            for _ in range(k):
                m[i] = (1 - alpha) * m[i] + alpha * scale[i] * (y - target[i])
                corr = m[i] + ci[i] - c if mutation == "flipped_sign" else m[i] - ci[i] + c
                y = y - lr * _polar(corr)
            deltas.append(m[i] - ci[i])
            ci[i] = m[i].copy()
            xs.append(y)
            if mutation == "per_client_c":
                c = c + deltas[-1] / n
        if mutation == "full_values":
            c = c + sum(ci) / n
        elif mutation != "per_client_c":
            c = c + sum(deltas) / n
        x = sum(xs) / n
    grad = (3 * (x - np.eye(2)) + (x + np.eye(2))) / 2
    return x, float(np.linalg.norm(grad))


def test_localmuon_stalls_and_fedmuon_converges_for_every_ns_depth():
    problem = counterexample()
    for ns_steps, coeffs in ((None, "jordan"), (0, "jordan"), (2, "cubic"), (5, "jordan")):
        cfg = dataclasses.replace(E1, lmo=LMOSpec(ns_steps=ns_steps, coeffs=coeffs))
        local = run_problem("local_muon", problem, dataclasses.replace(cfg, rounds=100), seed=0)
        np.testing.assert_allclose(local.grad_fro, SQRT2, atol=1e-6)
        fed = run_problem("fedmuon", problem, cfg, seed=0, eval_every=50)
        assert fed.final() < 0.05, (ns_steps, coeffs, fed.final())


def test_fedmuon_matches_the_reference_and_the_mutants_fail():
    fed = run_problem("fedmuon", counterexample(), E1, seed=0, eval_every=200)
    x_ref, g_ref = reference_fedmuon()
    np.testing.assert_allclose(fed.params, x_ref, atol=2e-5)
    assert fed.final() == pytest.approx(g_ref, abs=2e-5)
    assert g_ref < 0.05
    for mutation in ("flipped_sign", "per_client_c", "full_values"):
        _, g = reference_fedmuon(mutation)
        assert g > 0.05, mutation


def test_decaying_step_rate():
    """η_r = η₀/√(r+1): FedMuon's min-so-far ‖∇f‖ falls like r^(−1/4) or faster; LocalMuon's not."""
    problem = least_squares(n_clients=8, examples=16, d_in=6, d_out=4, heterogeneity=1.0, seed=1)
    cfg = FedConfig(
        n_clients=8, clients_per_round=8, local_steps=5, batch_size=None, rounds=400, lr=0.05,
        lr_decay="sqrt", alpha=0.5, lmo=LMOSpec(ns_steps=None),
    )  # fmt: skip
    slopes = {}
    for algo in ("fedmuon", "local_muon"):
        h = run_problem(algo, problem, cfg, seed=0, eval_every=10)
        best = np.minimum.accumulate(h.grad_fro[1:])
        r = h.rounds[1:]
        sel = r >= 40
        slopes[algo] = np.polyfit(np.log(r[sel]), np.log(best[sel]), 1)[0]
    assert slopes["fedmuon"] < -0.2, slopes
    assert slopes["local_muon"] > -0.1, slopes


# ------------------------------------------------------------------ structural properties


def test_reduction_to_scaffold_is_bit_exact(ls_problem):
    """lmo(g) = −g and α = 1 turn FedMuon into SCAFFOLD with C_i = last local gradient."""
    a = run_problem("fedmuon", ls_problem, REDUCTION, seed=3)
    b = run_problem("scaffold", ls_problem, REDUCTION, seed=3)
    np.testing.assert_array_equal(np.asarray(a.params), np.asarray(b.params))
    np.testing.assert_array_equal(a.loss, b.loss)
    assert a.loss[-1] < a.loss[0]


def test_homogeneous_clients_make_the_correction_vanish():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(16, 5)).astype(np.float32)
    b = (a @ rng.normal(size=(5, 3))).astype(np.float32)
    clients = stack_clients([{"a": a, "b": b}] * 4, pad_to_power_of_two=False)
    loss = least_squares(seed=0).loss_fn
    cfg = FedConfig(
        n_clients=4,
        clients_per_round=4,
        local_steps=3,
        batch_size=None,
        rounds=6,
        lr=0.05,
        alpha=0.3,
    )
    x0 = jnp.zeros((5, 3))
    fed = simulate("fedmuon", loss, x0, clients, cfg, seed=0)
    local = simulate("local_muon", loss, x0, clients, cfg, seed=0)
    np.testing.assert_allclose(fed.loss, local.loss, rtol=1e-5)
    np.testing.assert_allclose(fed.params, local.params, atol=1e-6)


def test_server_equations_by_hand():
    n = 4
    x = {"w": jnp.asarray([[1.0, 2.0]]), "b": jnp.asarray([0.5])}
    c = {"w": jnp.asarray([[0.1, -0.1]]), "b": jnp.asarray([0.0])}
    server = ServerState(x, c, jnp.int32(7), optax.EmptyState())
    xi = {"w": jnp.asarray([[[3.0, 0.0]], [[1.0, 4.0]]]), "b": jnp.asarray([[1.0], [2.0]])}
    dci = {"w": jnp.asarray([[[0.4, 0.8]], [[-0.4, 0.4]]]), "b": jnp.asarray([[2.0], [2.0]])}
    new = server_update("fedmuon", server, xi, dci, n, FedConfig(n_clients=4, clients_per_round=2))
    # X⁺ = ((n−S)/n) X + (1/n) Σ X_i,  C⁺ = C + (1/n) Σ ΔC_i  (n = 4, S = 2)
    np.testing.assert_allclose(new.params["w"], [[0.5 + 1.0, 1.0 + 1.0]])
    np.testing.assert_allclose(new.params["b"], [0.25 + 0.75])
    np.testing.assert_allclose(new.c_global["w"], [[0.1 + 0.0, -0.1 + 0.3]], atol=1e-7)
    np.testing.assert_allclose(new.c_global["b"], [1.0])
    assert int(new.round) == 8
    # 1/S instead of 1/n would give C_b = 2.0: the hand value above rules it out
    local = server_update(
        "local_muon", server, xi, dci, n, FedConfig(n_clients=4, clients_per_round=2)
    )
    np.testing.assert_allclose(local.c_global["b"], [0.0])
    plain = server_update(
        "fedavg_sgd", server, xi, dci, n, FedConfig(n_clients=4, clients_per_round=2, server_lr=1.0)
    )
    np.testing.assert_allclose(plain.params["w"], [[2.0, 2.0]])


def test_client_update_matches_the_optax_chain_and_the_definition(ls_problem):
    cfg = FedConfig(
        n_clients=6,
        clients_per_round=6,
        local_steps=3,
        batch_size=None,
        lr=0.1,
        alpha=0.4,
        lmo=LMOSpec(ns_steps=None),
    )
    data = jax.tree.map(lambda a: jnp.asarray(a[0]), ls_problem.clients.data)
    batches = jax.tree.map(lambda a: jnp.broadcast_to(a, (3, *a.shape)), data)
    x = jnp.ones((5, 3)) * 0.1
    rng = np.random.default_rng(0)
    ci, c, m0 = (jnp.asarray(rng.normal(size=(5, 3)), jnp.float32) for _ in range(3))
    y, st, dc, _ = client_update(
        "fedmuon", x, ClientState(ci, m0), c, batches, ls_problem.loss_fn, cfg
    )
    # by hand: M ← 0.6 M + 0.4 g;  X ← X − η polar(M − C_i + C);  C_i⁺ = M;  ΔC = M − C_i
    m, xr = np.asarray(m0, np.float64), np.asarray(x, np.float64)
    a, b = np.asarray(data["a"], np.float64), np.asarray(data["b"], np.float64)
    for _ in range(3):
        g = a.T @ (a @ xr - b) / a.shape[0]
        m = 0.6 * m + 0.4 * g
        xr = xr - 0.1 * _polar(m - np.asarray(ci) + np.asarray(c))
    np.testing.assert_allclose(y, xr, atol=1e-4)
    np.testing.assert_allclose(st.c_local, m, atol=1e-4)
    np.testing.assert_allclose(st.momentum, m, atol=1e-4)
    np.testing.assert_allclose(dc, m - np.asarray(ci), atol=1e-4)
    # the same K steps through the public optax chain
    tx = fedmuon_local(0.1, 0.4, LMOSpec(ns_steps=None))
    state = tx.init(x)
    state = (state[0]._replace(mu=m0), *state[1:])
    yy = x
    for _ in range(3):
        g = jax.grad(ls_problem.loss_fn)(yy, data)
        upd, state = tx.update(g, state, yy, c_local=ci, c_global=c)
        yy = optax.apply_updates(yy, upd)
    np.testing.assert_allclose(yy, y, atol=1e-6)


def test_vmap_equals_loop_and_jit_equals_eager(ls_problem):
    cfg = FedConfig(n_clients=6, clients_per_round=6, local_steps=2, batch_size=None, lr=0.05)
    x = jnp.zeros((5, 3))
    states = init_clients(x, 6)
    c = jnp.full((5, 3), 0.01)
    data = jax.tree.map(jnp.asarray, ls_problem.clients.data)
    batches = jax.tree.map(lambda a: jnp.broadcast_to(a[:, None], (6, 2, *a.shape[1:])), data)
    loss = ls_problem.loss_fn

    def one(state, batch):
        return client_update("fedmuon", x, state, c, batch, loss, cfg)

    vm = jax.vmap(one)(states, batches)
    jitted = jax.jit(jax.vmap(one))(states, batches)
    for i in (0, 5):
        take = lambda t, i=i: jax.tree.map(lambda a: a[i], t)  # noqa: E731
        eager = one(take(states), take(batches))
        np.testing.assert_allclose(vm[0][i], eager[0], atol=1e-6)
        np.testing.assert_allclose(vm[2][i], eager[2], atol=1e-6)
        np.testing.assert_allclose(jitted[0][i], eager[0], atol=1e-6)


def test_every_baseline_trains_and_communication_is_counted(ls_problem):
    # the reduction test's config: its compiled SCAFFOLD round is reused (the LMO spec only
    # matters to the Muon methods)
    cfg = dataclasses.replace(REDUCTION, rounds=25, lr=0.02)
    for algo in ("fedavg_sgd", "fedavg_adam", "scaffold", "fedprox", "fedadam"):
        h = run_problem(algo, ls_problem, cfg, seed=0, eval_every=25)
        assert h.loss[-1] < 0.8 * h.loss[0], algo
    assert communication_bytes("fedmuon", jnp.zeros((5, 3))) == (120, 120)
    assert communication_bytes("fedavg_sgd", jnp.zeros((5, 3))) == (60, 60)


def test_bad_input_is_rejected(ls_problem):
    with pytest.raises(ValueError, match="algo"):
        init_server("fedmuon2", jnp.zeros(2), FedConfig())
    with pytest.raises(ValueError, match="clients_per_round"):
        FedConfig(n_clients=4, clients_per_round=5)
    with pytest.raises(ValueError, match="alpha"):
        FedConfig(alpha=0.0)
    with pytest.raises(ValueError, match="n_clients"):
        run_problem("fedmuon", ls_problem, FedConfig(n_clients=5, clients_per_round=2), seed=0)
    with pytest.raises(ValueError, match="alpha"):
        ema_momentum(1.5)
    with pytest.raises(ValueError, match="c_local"):
        fedmuon_local(0.1).update(jnp.zeros((2, 2)), fedmuon_local(0.1).init(jnp.zeros((2, 2))))
