"""LassoBench's synthetic weighted-Lasso problems, from their definition."""

import numpy as np
import pytest

from iclr26.git_bo import GITBO, LassoSynthetic


@pytest.fixture(scope="module")
def simple():
    return LassoSynthetic("synt_simple")


def test_data_follow_the_definition(simple):
    p = LassoSynthetic("synt_hard")
    X = np.vstack([p.X_train, p.X_test])
    assert X.shape == (500, 1000)
    assert p.dim == 1000
    # AR(1) columns: neighbours correlate at 0.6, columns two apart at 0.36
    Z = (X - X.mean(0)) / X.std(0)
    assert np.mean(Z[:, 1:] * Z[:, :-1]) == pytest.approx(0.6, abs=0.02)
    assert np.mean(Z[:, 2:] * Z[:, :-2]) == pytest.approx(0.36, abs=0.02)
    # k = 50 alternating +-1 coefficients on every 20th feature
    assert np.flatnonzero(p.w_true).tolist() == list(range(0, 1000, 20))
    assert p.w_true[0] == 1
    assert p.w_true[20] == -1
    # snr 10: the noise norm is a tenth of the signal's
    y = np.concatenate([p.y_train, p.y_test])
    assert np.linalg.norm(y - X @ p.w_true) == pytest.approx(np.linalg.norm(X @ p.w_true) / 10)
    assert len(simple.folds) == 5
    assert len(simple.y_test) == 5


def test_search_space_maps_to_log_alpha(simple):
    d = simple.dim
    assert simple.alphas(-np.ones(d)) == pytest.approx(np.full(d, simple.alpha_max / 100))
    assert simple.alphas(np.ones(d)) == pytest.approx(np.full(d, simple.alpha_max))
    assert simple.alphas(np.zeros(d)) == pytest.approx(np.full(d, simple.alpha_max / 10))


def test_weighted_lasso_meets_its_optimality_conditions(simple):
    rng = np.random.default_rng(0)
    alpha = simple.alphas(rng.uniform(-1, 1, simple.dim))
    X, y = simple.X_train, simple.y_train
    w = LassoSynthetic("synt_simple", tol=1e-10).fit(X, y, alpha)
    g = (
        X.T @ (y - X @ w) / len(y)
    )  # KKT: g_j = alpha_j sign(w_j) on the support, |g_j| <= alpha_j off it
    on = w != 0
    assert on.any()
    assert (~on).any()
    np.testing.assert_allclose(g[on], alpha[on] * np.sign(w[on]), rtol=1e-4, atol=1e-8)
    assert np.all(np.abs(g[~on]) <= alpha[~on] * (1 + 1e-6))
    # at alpha_max everywhere the solution is 0 (alpha_max = ||X^T y||_inf / n)
    assert not simple.fit(X, y, np.full(simple.dim, simple.alpha_max * (1 + 1e-9))).any()


def test_weights_that_know_the_support_beat_uniform_ones(simple):
    oracle = np.where(simple.w_true != 0, -1.0, 1.0)
    uniform = np.zeros(simple.dim)
    assert simple(oracle) < 1.5 < 3.0 < simple(uniform)
    assert simple.test_mspe(oracle) < simple.test_mspe(uniform)


def test_gitbo_runs_on_lasso(simple):
    opt = GITBO(simple.bounds, "rff", n_init=6, maximize=False, seed=0, n_candidates=200)
    res = opt.run(simple, 9)
    assert res.n_evals == 9
    assert np.isfinite(res.y).all()
    assert np.all(res.X >= -1)
    assert np.all(res.X <= 1)


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [({"bench": "synt_tiny"}, ValueError), ({"noise": 1}, TypeError), ({"tol": 0.0}, ValueError),
     ({"seed": -1}, ValueError), ({"seed": 1.5}, TypeError)],
)  # fmt: skip
def test_bad_construction(kwargs, err):
    with pytest.raises(err):
        LassoSynthetic(**kwargs)


@pytest.mark.parametrize("x", [np.zeros(59), np.full(60, np.nan), np.zeros((2, 60))])
def test_bad_points(simple, x):
    with pytest.raises(ValueError, match="x must"):
        simple(x)
