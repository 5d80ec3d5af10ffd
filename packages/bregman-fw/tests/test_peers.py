"""Cross-library checks against copt and accbpg (the ``[bench]`` extra; skipped without it)."""

import contextlib
import io

import jax.numpy as jnp
import numpy as np
import pytest

import iclr26.bregman_fw as bfw
from iclr26.bregman_fw.peers import least_squares


def test_objectives_match_accbpg():
    accbpg = pytest.importorskip("accbpg")
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 1.0, 12)
    x /= x.sum()
    p = bfw.poisson_inverse(20, 12, seed=0)
    A, b = (np.asarray(a) for a in p.args)
    b = np.maximum(b, 1e-3)  # accbpg's formula needs b > 0
    assert float(p.f(jnp.asarray(x), jnp.asarray(A), jnp.asarray(b))) == pytest.approx(
        accbpg.PoissonRegression(A, b)(x), rel=1e-12
    )
    q = bfw.kl_regression(20, 12, seed=0)
    A, b = (np.asarray(a) for a in q.args)
    assert float(q.objective(jnp.asarray(x))) == pytest.approx(
        accbpg.KLdivRegression(A, b)(x), rel=1e-10, abs=1e-14
    )
    d = bfw.d_optimal(4, 12, seed=0)
    (H,) = (np.asarray(a) for a in d.args)
    assert float(d.objective(jnp.asarray(x))) == pytest.approx(accbpg.DOptimalObj(H)(x), rel=1e-12)


def test_bregman_proximal_gradient_follows_accbpg():
    accbpg = pytest.importorskip("accbpg")
    d = bfw.d_optimal(4, 12, seed=0)
    (H,) = (np.asarray(a) for a in d.args)
    x0 = np.full(12, 1 / 12)
    ours = bfw.bregman_proximal_gradient(
        d.f, jnp.asarray(x0), bfw.Burg(), 1.0, args=d.args, max_iter=50
    )
    with contextlib.redirect_stdout(io.StringIO()):
        _, F, _, _ = accbpg.BPG(
            accbpg.DOptimalObj(H),
            accbpg.BurgEntropySimplex(),
            1.0,
            x0,
            51,
            epsilon=-np.inf,
            linesearch=False,
            verbose=False,
        )
    # accbpg solves the 1-D Burg prox equation to its own tolerance (~1e-9 relative)
    np.testing.assert_allclose(np.asarray(ours.f_hist), F[:51], rtol=1e-7)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # copt divides by a zero decrease internally
def test_euclidean_adaptive_matches_copt_backtracking():
    copt = pytest.importorskip("copt")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 30))
    x_true = np.zeros(30)
    x_true[:4] = [1.0, -0.5, 0.3, 0.2]
    b = A @ x_true + 0.01 * rng.standard_normal(40)
    alpha = 1.0
    x0 = np.zeros(30)
    x0[0] = alpha

    def fun(x):
        r = A @ x - b
        return 0.5 * np.mean(r * r), A.T @ r / 40

    fs = []
    with contextlib.redirect_stdout(io.StringIO()):
        copt.minimize_frank_wolfe(
            fun,
            x0.copy(),
            copt.constraint.L1Ball(alpha).lmo,
            jac=True,
            step="backtracking",
            max_iter=300,
            tol=0.0,
            callback=lambda kw: fs.append(float(kw["f_next"])) if "f_next" in kw else None,
        )
    r = bfw.frank_wolfe(
        least_squares,
        jnp.asarray(x0),
        bfw.L1Ball(alpha),
        step=bfw.EuclideanAdaptive(),
        args=(jnp.asarray(A), jnp.asarray(b)),
        max_iter=300,
        tol=0.0,
        patience=None,  # the full 300 iterations, as copt runs them
    )
    ours = np.asarray(r.history.f)
    f_star = min(min(fs), ours.min())
    assert ours[-1] - f_star < 1e-7
    assert fs[-1] - f_star < 1e-7
    # iterations to a 1e-6 primal gap within ±20%
    it_ours = np.flatnonzero(ours - f_star <= 1e-6)[0]
    it_copt = np.flatnonzero(np.array(fs) - f_star <= 1e-6)[0] + 1
    assert abs(it_ours - it_copt) <= 0.2 * max(it_ours, it_copt) + 2
