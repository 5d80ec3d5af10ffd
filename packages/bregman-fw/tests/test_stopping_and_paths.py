"""The stopping rules users see (converged / stalled / max_iter), the vertex-indexed active set
against the dense buffer, one-slot history, value-and-grad reuse, and the lazy package import."""

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import iclr26.bregman_fw as bfw
from iclr26.bregman_fw.problems import dopt_objective
from iclr26.bregman_fw.solvers import CONVERGED, MAX_ITER, STALLED

ITERS = 300


def _dopt(m=10, n=100):
    H = jnp.asarray(np.random.default_rng(0).standard_normal((m, n)))
    return H, jnp.full(n, 1.0 / n), jnp.eye(n)


@pytest.fixture(scope="module")
def dopt_stalled():
    """EucAFW on D-optimal design at a tol its FW gap cannot reach: it stops when f stops
    changing, i.e. at the optimum to float64 round-off (shared by two tests; tol is traced, so
    this run and the default-tol run share one compiled loop)."""
    H, x0, V = _dopt()
    kw = {"step": bfw.EuclideanAdaptive(), "args": (H,), "atoms": V, "weights": x0}
    return bfw.away_frank_wolfe(dopt_objective, x0, bfw.Simplex(), max_iter=3000, tol=1e-12, **kw)


@pytest.mark.parametrize(
    "step",
    # the DOptimalStep case compiles two more loops: slow, to keep `make test` inside 120 s
    [bfw.EuclideanAdaptive(), pytest.param(bfw.DOptimalStep(), marks=pytest.mark.slow)],
)
def test_d_optimal_converges_at_the_default_tol(step, dopt_stalled):
    """The FW gap shrinks like sqrt(primal gap) on D-optimal design and levels off near
    1e-7 * |f| (|f| = 3.77 here) once f is at float64 resolution: the default test
    ``gap <= tol * max(1, |f|)`` is reached and the run says 'converged', with f at the optimum
    to round-off, although the absolute gap stays above 1e-7."""
    H, x0, V = _dopt()
    kw = {"step": step, "args": (H,), "atoms": V, "weights": x0}
    f = dopt_objective
    r = bfw.away_frank_wolfe(f, x0, bfw.Simplex(), max_iter=3000, **kw)
    assert int(r.status) == CONVERGED
    assert "converged" in r.message
    assert bool(r.converged)
    assert float(r.gap) <= 1e-7 * abs(float(r.f))
    assert float(r.gap) > 1e-7  # an absolute test at 1e-7 would not have stopped here
    assert float(r.f) - float(dopt_stalled.f) < 1e-13 * abs(float(dopt_stalled.f))


def test_d_optimal_stalls_below_float64_resolution(dopt_stalled):
    """A tol the FW gap cannot reach: the run says 'stalled' (not max_iter, not converged)."""
    r = dopt_stalled
    assert int(r.status) == STALLED
    assert "stalled" in r.message
    assert not bool(r.converged)
    assert int(r.n_iter) < 3000


@pytest.mark.slow  # two more compiled loops; the D-optimal test covers the rule by default
def test_relative_gap_is_absolute_below_one():
    # |f| <= 1: the test is the paper's absolute gap <= tol
    q = bfw.quadratic_simplex(20, margin=0.1, seed=0)
    r = bfw.away_frank_wolfe(
        q.f, q.x0, q.lmo, args=q.args, step=bfw.EuclideanAdaptive(), tol=1e-6, max_iter=ITERS
    )
    assert abs(float(r.f)) <= 1.0
    assert bool(r.converged)
    assert float(r.gap) <= 1e-6
    # f + 100 has the same gap and iterates but |f| ~ 100: the test scales with |f|
    g = lambda x, y: q.f(x, y) + 100.0  # noqa: E731
    r2 = bfw.away_frank_wolfe(
        g, q.x0, q.lmo, args=q.args, step=bfw.EuclideanAdaptive(), tol=1e-8, max_iter=ITERS
    )
    assert bool(r2.converged)
    assert float(r2.gap) <= 1e-8 * abs(float(r2.f))
    assert float(r2.gap) > 1e-8  # converged only because the test is relative


def test_converged_and_max_iter_statuses():
    q = bfw.quadratic_simplex(20, margin=0.1, seed=0)
    kw = {"step": bfw.EuclideanAdaptive(), "args": q.args, "max_iter": ITERS}
    r = bfw.away_frank_wolfe(q.f, q.x0, q.lmo, tol=1e-6, **kw)
    assert int(r.status) == CONVERGED
    assert bool(r.converged)
    assert float(r.gap) <= 1e-6
    r = bfw.frank_wolfe(q.f, q.x0, q.lmo, tol=0.0, patience=None, **kw)
    assert int(r.status) == MAX_ITER
    assert int(r.n_iter) == ITERS


def test_patience_counts_only_real_decreases():
    # f is constant: no step can decrease it, so the run stalls after exactly `patience` steps
    r = bfw.frank_wolfe(
        lambda x: 0.0 * jnp.sum(x), jnp.array([1.0, 0.0]), bfw.Simplex(), tol=-0.0, patience=7
    )
    assert int(r.status) in (CONVERGED, STALLED)
    q = bfw.quadratic_simplex(20, margin=0.1, seed=0)
    r = bfw.frank_wolfe(q.f, q.x0, q.lmo, args=q.args, max_iter=ITERS, tol=0.0, patience=3)
    f = np.asarray(r.history.f)[: int(r.n_iter) + 1]
    if int(r.status) == STALLED:  # the last 3 steps changed f by less than ftol·|f| each
        assert np.all(np.abs(f[-3:] - f[-4]) <= 1e-14 * abs(f[-4]))


# every LMO and both variants are covered by default (two compiled loops per case); the other
# three combinations are slow
_SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    ("lmo", "pairwise"),
    [
        (bfw.Simplex(), False),
        (bfw.L1Ball(1.0), True),
        (bfw.TruncatedSimplex(0.01), False),
        pytest.param(bfw.Simplex(), True, marks=_SLOW),
        pytest.param(bfw.L1Ball(1.0), False, marks=_SLOW),
        pytest.param(bfw.TruncatedSimplex(0.01), True, marks=_SLOW),
    ],
    ids=str,
)
def test_vertex_indexed_active_set_matches_dense_buffer(lmo, pairwise):
    n = 12
    rng = np.random.default_rng(1)
    y = jnp.asarray(rng.standard_normal(n))

    def f(x, y):
        return 0.5 * jnp.sum((x - y) ** 2) + 0.1 * jnp.sum(x**4)

    x0 = lmo.vertex(jnp.asarray(3), jnp.zeros(n))
    kw = {"step": bfw.EuclideanAdaptive(), "args": (y,), "max_iter": 120, "tol": 0.0}
    kw.update(pairwise=pairwise, patience=None)
    idx = bfw.away_frank_wolfe(f, x0, lmo, vertex_index=True, **kw)
    dense = bfw.away_frank_wolfe(f, x0, lmo, vertex_index=False, **kw)
    assert idx.active_vertices is None
    assert idx.active_weights.shape == (lmo.vertex_count((n,)),)
    np.testing.assert_allclose(idx.history.f, dense.history.f, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(idx.history.kind, dense.history.kind)
    for r in (idx, dense):
        w, atoms = r.active_set(lmo)
        assert np.all(w > 0)
        assert w.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(w @ atoms, r.x, atol=1e-10)


def test_lmo_vertex_enumeration_agrees_with_the_oracle():
    rng = np.random.default_rng(0)
    for lmo in (bfw.Simplex(2.0), bfw.TruncatedSimplex(0.01), bfw.L1Ball(1.5)):
        for _ in range(10):
            g = jnp.asarray(rng.standard_normal(7))
            i = lmo.vertex_id(g)
            np.testing.assert_allclose(lmo.vertex(i, g), lmo(g))
            V = np.stack([np.asarray(lmo.vertex(k, g)) for k in range(lmo.vertex_count((7,)))])
            np.testing.assert_allclose(lmo.vertex_scores(g), V @ np.asarray(g), atol=1e-12)
        assert lmo.vertex_ids_of(V[[4, 2]]).tolist() == [4, 2]
        assert lmo.vertex_ids_of(np.full((1, 7), 1 / 7)) is None
    assert bfw.Box(0.0, 1.0).vertex_count((7,)) is None


def test_one_slot_history_gives_the_same_run():
    q = bfw.quadratic_simplex(20, margin=0.1, seed=0)
    kw = {"args": q.args, "max_iter": ITERS, "tol": 1e-9}
    full = bfw.away_frank_wolfe(q.f, q.x0, q.lmo, **kw)
    slim = bfw.away_frank_wolfe(q.f, q.x0, q.lmo, record=False, **kw)
    assert slim.history.f.shape == (1,)
    np.testing.assert_array_equal(slim.x, full.x)
    assert int(slim.n_iter) == int(full.n_iter)
    assert float(slim.history.f[0]) == float(full.f)


def test_adaptive_trials_reuse_their_gradient():
    """An adaptive step evaluates value-and-grad at each trial and the solver reuses the accepted
    one: evaluations = trials (+1 at the start), no extra gradient per iteration."""
    # the same calls (problem, step, budget) as test_solvers' fw-gap and open-loop tests: the
    # compiled loops are reused
    q = bfw.quadratic_simplex(20, margin=0.1, seed=0)
    r = bfw.frank_wolfe(
        q.f, q.x0, q.lmo, step=bfw.AdaptiveBregman(), args=q.args, max_iter=ITERS, tol=0.0
    )
    n = int(r.n_iter)
    assert n > 50
    trials = int(np.asarray(r.history.n_evals)[:n].sum())
    assert trials > n  # some iterations backtracked
    assert int(r.n_f_evals) == trials + 1
    assert int(r.n_grad_evals) == trials + 1
    o = bfw.frank_wolfe(
        q.f, q.x0, q.lmo, step=bfw.OpenLoop(), args=q.args, max_iter=ITERS, tol=0.0, patience=None
    )
    assert int(o.n_iter) == ITERS
    assert int(o.n_f_evals) == ITERS + 1


def test_package_import_is_lazy():
    code = (
        "import sys, iclr26.bregman_fw as b; assert 'jax' not in sys.modules, 'jax imported';"
        "print(b.__version__); b.Simplex; import jax.numpy as jnp;"
        "assert jnp.ones(1).dtype == jnp.float64"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
