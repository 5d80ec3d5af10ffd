"""Spec test 1 (similarity sanity and invariances) and the official statistic."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import RidgeCV

from iclr26.interp_equiv import (
    cka,
    cka_permutation_test,
    linear_predictivity,
    procrustes_similarity,
    ridge_r2,
    svcca,
)
from iclr26.interp_equiv.experiments import _naive_debiased_cka, _naive_ridge_grid, _svd_ridge_grid
from iclr26.interp_equiv.similarity import train_test_rows


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_predictivity_self_and_invariances():
    rng = _rng()
    X = rng.standard_normal((500, 12))
    Y = np.tanh(X @ rng.standard_normal((12, 6))) + 0.1 * rng.standard_normal((500, 6))
    assert linear_predictivity(X, X) > 0.99
    base = linear_predictivity(X, Y)
    A = rng.standard_normal((12, 12)) + 3 * np.eye(12)  # invertible
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    assert abs(linear_predictivity(X @ A, Y) - base) < 1e-2
    assert abs(linear_predictivity(X, Y @ Q) - base) < 1e-2


def test_predictivity_of_independent_gaussians_is_low():
    rng = _rng(1)
    X, Y = rng.standard_normal((1000, 10)), rng.standard_normal((1000, 10))
    assert linear_predictivity(X, Y) < 0.15


def test_ridge_r2_is_sklearn_ridgecv_on_the_same_split():
    rng = _rng(2)
    X = rng.standard_normal((200, 15))
    Y = X @ rng.standard_normal((15, 5)) + 2 * rng.standard_normal((200, 5))
    Y[:, 2] = 3.0  # constant column: sklearn's r2 convention
    for alphas in [(0.1, 1.0, 10.0), tuple(np.logspace(-3, 5, 9))]:
        r2, alpha = ridge_r2(X, Y, alphas=alphas, seed=4)
        train, test = train_test_rows(200, 0.1, 4)
        ref = RidgeCV(alphas=alphas, fit_intercept=True, alpha_per_target=False).fit(
            X[train], Y[train]
        )
        assert alpha == pytest.approx(ref.alpha_)
        assert r2 == pytest.approx(ref.score(X[test], Y[test]), abs=1e-10)
    assert linear_predictivity(X, Y) == pytest.approx(math.sqrt(max(ridge_r2(X, Y)[0], 0)))


def test_svd_alpha_grid_equals_one_solve_per_alpha():
    rng = _rng(3)
    X = rng.standard_normal((300, 20))
    Y = X @ rng.standard_normal((20, 4)) + rng.standard_normal((300, 4))
    alphas = np.logspace(-3, 3, 13)
    assert _svd_ridge_grid(X, Y, alphas) == pytest.approx(_naive_ridge_grid(X, Y, alphas), abs=1e-8)


def test_debiased_cka_is_unbiased_at_small_n_and_biased_is_not():
    vals = [cka(*_rng(s).standard_normal((2, 64, 10))) for s in range(20)]
    biased = [cka(*_rng(s).standard_normal((2, 64, 10)), debiased=False) for s in range(20)]
    assert abs(np.mean(vals)) < 0.02
    assert np.mean(biased) > 0.1  # the MONAI lesson: biased HSIC inflates CKA at small n


def test_cka_feature_space_equals_gram_formula_and_invariances():
    rng = _rng(4)
    X = rng.standard_normal((120, 9))
    Y = X[:, :4] @ rng.standard_normal((4, 7)) + rng.standard_normal((120, 7))
    ours = cka(X, Y)
    assert ours == pytest.approx(_naive_debiased_cka(X, Y), abs=1e-4)
    Q, _ = np.linalg.qr(rng.standard_normal((9, 9)))
    assert cka(3.0 * X @ Q + 5.0, Y) == pytest.approx(ours, abs=1e-10)
    assert cka(X, X) == pytest.approx(1.0)
    assert cka(X, Y, debiased=False) == pytest.approx(cka(Y, X, debiased=False))


def test_cka_undefined_cases_warn_and_return_nan():
    X = _rng().standard_normal((20, 3))
    with pytest.warns(UserWarning, match="no variance"):
        assert math.isnan(cka(X, np.ones((20, 2))))
    with pytest.warns(UserWarning, match="n >= 4"):
        assert math.isnan(cka(X[:3], X[:3]))


def test_procrustes_and_svcca():
    rng = _rng(5)
    X = rng.standard_normal((200, 8))
    Q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    assert procrustes_similarity(X, 2 * X @ Q + 1) == pytest.approx(1.0)
    assert procrustes_similarity(X, rng.standard_normal((200, 8))) < 0.5
    A = rng.standard_normal((8, 8)) + 3 * np.eye(8)
    assert svcca(X, X @ A) == pytest.approx(1.0, abs=1e-8)
    assert svcca(X, rng.standard_normal((200, 8)), keep=4) < 0.3
    with pytest.raises(ValueError, match="constant"):
        procrustes_similarity(X, np.zeros((200, 3)))


def test_cka_permutation_test_reuses_pieces_correctly():
    rng = _rng(6)
    X = rng.standard_normal((150, 6))
    Y = X @ rng.standard_normal((6, 5)) * 0.3 + rng.standard_normal((150, 5))
    observed, p, null = cka_permutation_test(X, Y, n_perm=200, seed=1)
    assert observed == pytest.approx(cka(X, Y))
    assert p < 0.01
    # the null values are CKAs of row-permuted Y: same distribution as a direct recomputation
    direct = [cka(X, Y[np.random.default_rng(s).permutation(150)]) for s in range(200)]
    assert abs(np.mean(null) - np.mean(direct)) < 0.01
    assert abs(np.std(null) - np.std(direct)) < 0.01
    _, p_ind, _ = cka_permutation_test(X, rng.standard_normal((150, 5)), n_perm=200, seed=1)
    assert p_ind > 0.01


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000), n=st.integers(12, 60), d1=st.integers(1, 6), d2=st.integers(1, 6)
)
def test_measures_stay_in_range(seed, n, d1, d2):
    rng = _rng(seed)
    X, Y = rng.standard_normal((n, d1)), rng.standard_normal((n, d2))
    assert 0.0 <= linear_predictivity(X, Y) <= 1.0
    assert -1.0 <= cka(X, Y) <= 1.0 + 1e-9
    assert 0.0 <= procrustes_similarity(X, Y) <= 1.0
    assert 0.0 <= svcca(X, Y) <= 1.0
