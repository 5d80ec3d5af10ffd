"""Solvers: known optima, certificates, away-step rates, active-set invariants, jit/vmap, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import iclr26.bregman_fw as bfw

ITERS = 300  # one buffer length everywhere: compiled loops are reused across tests


@pytest.fixture(scope="module")
def quad():
    return bfw.quadratic_simplex(20, margin=0.1, seed=0)


def primal_gaps(result, f_star):
    f = np.asarray(result.history.f)
    return f[: int(result.n_iter) + 1] - f_star


def test_away_steps_find_the_projection(quad):
    r = bfw.away_frank_wolfe(
        quad.f,
        quad.x0,
        quad.lmo,
        step=bfw.EuclideanAdaptive(),
        args=quad.args,
        max_iter=ITERS,
        tol=0.0,
    )
    expected = optax.projections.projection_simplex(quad.args[0])
    np.testing.assert_allclose(r.x, expected, atol=1e-8)


def test_away_steps_linear_vanilla_sublinear_on_face_optimum(quad):
    kw = {"step": bfw.EuclideanAdaptive(), "args": quad.args, "max_iter": ITERS, "tol": 0.0}
    afw = primal_gaps(bfw.away_frank_wolfe(quad.f, quad.x0, quad.lmo, **kw), quad.f_star)
    fw = primal_gaps(bfw.frank_wolfe(quad.f, quad.x0, quad.lmo, **kw), quad.f_star)
    assert fw[-1] > 1e-6  # vanilla FW zig-zags towards the face
    hit = np.flatnonzero(afw <= 1e-10)
    assert hit.size
    assert hit[0] < ITERS
    t = np.arange(hit[0] + 1)
    slope = np.polyfit(t, np.log(np.maximum(afw[: hit[0] + 1], 1e-300)), 1)[0]
    assert slope < -0.01


def test_open_loop_rate_is_one_over_t(quad):
    r = bfw.frank_wolfe(
        quad.f,
        quad.x0,
        quad.lmo,
        step=bfw.OpenLoop(),
        args=quad.args,
        max_iter=ITERS,
        tol=0.0,
        patience=None,
    )
    gaps = primal_gaps(r, quad.f_star)
    t = np.arange(30, ITERS)
    slope = np.polyfit(np.log(t), np.log(gaps[30:ITERS]), 1)[0]
    assert -2.2 <= slope <= -0.8


def test_fw_gap_bounds_primal_gap(quad):
    for step in (bfw.AdaptiveBregman(), bfw.OpenLoop()):
        r = bfw.frank_wolfe(
            quad.f, quad.x0, quad.lmo, step=step, args=quad.args, max_iter=ITERS, tol=0.0
        )
        n = int(r.n_iter) + 1
        assert np.all(np.asarray(r.history.gap)[:n] >= primal_gaps(r, quad.f_star) - 1e-12)


def test_active_set_invariants_and_drop_steps(quad):
    r = bfw.away_frank_wolfe(
        quad.f,
        quad.x0,
        quad.lmo,
        step=bfw.EuclideanAdaptive(),
        args=quad.args,
        max_iter=ITERS,
        tol=1e-9,
    )
    w, atoms = r.active_set(quad.lmo)
    assert np.all(w >= 0)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(w @ atoms, r.x, atol=1e-12)
    for a in atoms[w > 0]:  # every active atom is a vertex of the simplex
        assert sorted(a.tolist())[-1] == 1.0
        assert np.count_nonzero(a) == 1
    kinds = np.asarray(r.history.kind)[: int(r.n_iter)]
    assert (kinds == 3).any(), "expected drop steps on a face optimum"


def test_drop_step_removes_exactly_one_vertex(quad):
    r = bfw.away_frank_wolfe(
        quad.f,
        quad.x0,
        quad.lmo,
        step=bfw.EuclideanAdaptive(),
        args=quad.args,
        max_iter=ITERS,
        tol=1e-9,
    )
    n = int(r.n_iter)
    kinds, counts = np.asarray(r.history.kind)[:n], np.asarray(r.history.n_active)[: n + 1]
    drops = np.flatnonzero(kinds == 3)
    assert drops.size
    np.testing.assert_array_equal(counts[drops + 1], counts[drops] - 1)
    fw = np.flatnonzero(kinds == 0)  # a FW step adds at most one atom
    assert np.all(counts[fw + 1] <= counts[fw] + 1)


def test_pairwise_reaches_optimum(quad):
    r = bfw.away_frank_wolfe(
        quad.f,
        quad.x0,
        quad.lmo,
        step=bfw.EuclideanAdaptive(),
        args=quad.args,
        max_iter=ITERS,
        tol=0.0,
        pairwise=True,
    )
    assert float(r.f) - quad.f_star < 1e-10
    assert set(np.unique(np.asarray(r.history.kind)[: int(r.n_iter)])) <= {2, 3}


def test_symmetric_d_optimal_design_has_uniform_optimum():
    p = bfw.d_optimal_symmetric()
    r = bfw.frank_wolfe(p.f, p.x0, p.lmo, kernel=p.kernel, args=p.args, max_iter=ITERS, tol=1e-10)
    # a FW gap of 1e-10 is below what f's float64 resolution can certify here: the run stops
    # as stalled (status 1) with the optimum found, or converges
    assert int(r.status) in (0, 1)
    assert float(r.gap) < 1e-5
    np.testing.assert_allclose(r.x, 1.0 / 3.0, atol=1e-5)
    assert float(r.f) == pytest.approx(np.log(4.0), abs=1e-10)


def kl_b_x(x, b):
    return jnp.sum(b * jnp.log(b / x) + x - b)


def test_poisson_kl_on_simplex_recovers_b():
    b = jnp.array([0.2, 0.3, 0.5])
    x0 = jnp.ones(3) / 3
    r = bfw.frank_wolfe(
        kl_b_x,
        x0,
        bfw.TruncatedSimplex(0.01),
        kernel=bfw.Burg(),
        args=(b,),
        max_iter=ITERS,
        tol=0.0,
    )
    np.testing.assert_allclose(r.x, b, atol=1e-6)


def test_kl_regression_reaches_zero():
    p = bfw.kl_regression(20, 10, seed=0)
    r = bfw.away_frank_wolfe(
        p.f,
        p.x0,
        p.lmo,
        step=bfw.EuclideanAdaptive(),
        kernel=p.kernel,
        args=p.args,
        max_iter=ITERS,
        tol=0.0,
        atoms=p.vertices,
        weights=p.x0,
    )
    assert float(r.f) < 1e-8
    np.testing.assert_allclose(r.x, p.x_star, atol=1e-3)


def test_jit_and_vmap_equal_eager_loop():
    problems = [bfw.kl_regression(20, 10, seed=s) for s in range(3)]
    p0 = problems[0]

    def solve(x0, args):
        return bfw.frank_wolfe(
            p0.f, x0, p0.lmo, kernel=p0.kernel, args=args, max_iter=50, tol=0.0
        ).x

    eager = np.stack([np.asarray(solve(p.x0, p.args)) for p in problems])
    x0s = jnp.stack([p.x0 for p in problems])
    args = tuple(jnp.stack(a) for a in zip(*(p.args for p in problems), strict=True))
    # the solver inside a user's jit and vmap at once (one more compiled loop, not two)
    batched = jax.jit(jax.vmap(solve))(x0s, args)
    np.testing.assert_allclose(batched, eager, rtol=1e-10, atol=1e-13)


def test_optax_transform_matches_solver(quad):
    tx = bfw.frank_wolfe_transform(quad.lmo, step=bfw.AdaptiveBregman())

    def value_fn(x):
        return quad.f(x, *quad.args)

    @jax.jit
    def train_step(params, state):
        value, grad = jax.value_and_grad(value_fn)(params)
        updates, state = tx.update(grad, state, params, value=value, value_fn=value_fn)
        return optax.apply_updates(params, updates), state, value

    params, state = quad.x0, tx.init(quad.x0)
    fs = []
    for _ in range(15):
        params, state, value = train_step(params, state)
        fs.append(float(value))
    r = bfw.frank_wolfe(quad.f, quad.x0, quad.lmo, args=quad.args, max_iter=ITERS, tol=0.0)
    np.testing.assert_allclose(fs, np.asarray(r.history.f)[:15], rtol=1e-10)


def test_bad_inputs_raise_clear_errors(quad):
    with pytest.raises(ValueError, match="open positive orthant"):
        bfw.frank_wolfe(
            kl_b_x, jnp.ones(3) / 3, bfw.Simplex(), kernel=bfw.Burg(), args=(jnp.ones(3) / 3,)
        )
    with pytest.raises(ValueError, match="nonnegative orthant"):
        bfw.frank_wolfe(quad.f, jnp.zeros(20), bfw.L1Ball(), kernel=bfw.Entropy(), args=quad.args)
    with pytest.raises(ValueError, match="not in the feasible set"):
        bfw.frank_wolfe(quad.f, jnp.ones(20), quad.lmo, args=quad.args)
    with pytest.raises(TypeError, match="float64"):
        bfw.frank_wolfe(quad.f, np.asarray(quad.x0, np.float32), quad.lmo, args=quad.args)
    with pytest.raises(ValueError, match="polytope"):
        bfw.away_frank_wolfe(quad.f, jnp.zeros(20), bfw.L2Ball(), args=quad.args)
    with pytest.raises(ValueError, match="max_iter"):
        bfw.frank_wolfe(quad.f, quad.x0, quad.lmo, args=quad.args, max_iter=0)
    with pytest.raises(ValueError, match="finite"):
        bfw.frank_wolfe(quad.f, jnp.full(20, jnp.nan), quad.lmo, args=quad.args)
    with pytest.raises(TypeError, match="step rule"):
        bfw.frank_wolfe(quad.f, quad.x0, quad.lmo, args=quad.args, step="adaptive")
