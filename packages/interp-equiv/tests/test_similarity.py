"""Spec test 1 (similarity sanity and invariances) and the official statistic."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import RidgeCV

from iclr26.interp_equiv import (
    CKAStats,
    cka,
    cka_permutation_test,
    linear_predictivity,
    procrustes_similarity,
    ridge_r2,
    similarity,
    svcca,
)
from iclr26.interp_equiv.estimator import similarity_matrix
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


def _gram_cka(X, Y, debiased=True):
    """CKA from the n × n Gram matrices of the raw (uncentred) inputs, in float64: Song et al.
    (2012)'s unbiased HSIC on zero-diagonal Grams, or the biased tr(HKHL) / ..."""
    n = X.shape[0]
    K, L = X @ X.T, Y @ Y.T
    if not debiased:
        H = np.eye(n) - 1.0 / n
        Kc, Lc = H @ K @ H, H @ L @ H
        return (Kc * Lc).sum() / math.sqrt((Kc * Kc).sum() * (Lc * Lc).sum())

    def hsic(A, B):
        A, B = A - np.diag(np.diag(A)), B - np.diag(np.diag(B))
        one = np.ones(n)
        t = np.trace(A @ B) + one @ A @ one * (one @ B @ one) / ((n - 1) * (n - 2))
        return (t - 2.0 / (n - 2) * one @ A @ B @ one) / (n * (n - 3))

    return hsic(K, L) / math.sqrt(hsic(K, K) * hsic(L, L))


@pytest.mark.parametrize("block", [3, 2048])
@pytest.mark.parametrize(("n", "d1", "d2"), [(4, 2, 3), (5, 6, 1), (37, 9, 7), (200, 30, 12)])
def test_cka_equals_the_n_by_n_gram_formula(monkeypatch, block, n, d1, d2):
    # feature space, centred block by block: the same number as the n × n formulas, to
    # rounding, on uncentred inputs, at any block size (3: many blocks and a ragged last one)
    monkeypatch.setattr(similarity, "_BLOCK", block)
    rng = _rng(n + d1)
    X = rng.standard_normal((n, d1)) + rng.standard_normal(d1) * 3
    Y = X[:, :1] @ rng.standard_normal((1, d2)) + rng.standard_normal((n, d2)) + 2.0
    assert cka(X, Y) == pytest.approx(_gram_cka(X, Y), abs=1e-10)
    assert cka(X, Y, debiased=False) == pytest.approx(_gram_cka(X, Y, False), abs=1e-12)
    # CKAStats reused for either side gives the same number
    sx, sy = CKAStats(X), CKAStats(Y)
    assert cka(sx, Y) == cka(X, sy) == cka(sx, sy) == cka(X, Y)
    assert cka(sx, sx) == pytest.approx(1.0)


def test_cka_centring_is_exact_under_large_offsets_and_float32_input():
    rng = _rng(11)
    X = rng.standard_normal((300, 8))
    Y = X @ rng.standard_normal((8, 5)) + rng.standard_normal((300, 5))
    ref = cka(X, Y)
    # translation invariance with an offset 10⁶ times the spread: centring happens before any
    # product, so no cancellation (folding n·x̄ȳᵀ into XᵀY instead would cancel ~12 digits)
    assert cka(X + 1e6, Y - 3e5) == pytest.approx(ref, abs=1e-9)
    # float32 input is read as it is (no float64 copy) and promoted block by block: the same
    # as the float64 array holding the same values
    X32 = X.astype(np.float32)
    assert cka(X32, Y) == pytest.approx(cka(X32.astype(np.float64), Y), abs=1e-12)
    # symmetric, and isotropic scaling / orthogonal maps of either side leave it unchanged
    Q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    assert cka(Y, X) == pytest.approx(ref, abs=1e-12)
    assert cka(X, 0.01 * Y @ Q) == pytest.approx(ref, abs=1e-12)


def test_cka_similarity_matrix_reuses_stats():
    rng = _rng(12)
    reps = [rng.standard_normal((60, 4)) @ rng.standard_normal((4, d)) for d in (3, 5, 6)]
    S = similarity_matrix(reps, "cka")
    for i in range(3):
        for j in range(3):
            want = 1.0 if i == j else cka(reps[i], reps[j])
            assert S[i, j] == pytest.approx(want, abs=1e-12)
    Sb = similarity_matrix(reps, "cka_biased")
    assert Sb[0, 2] == pytest.approx(cka(reps[0], reps[2], debiased=False), abs=1e-12)


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
