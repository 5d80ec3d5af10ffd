import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import ndtr, ndtri
from scipy.stats import multivariate_normal, spearmanr

from iclr26.refusal_index import (
    bvn_density,
    bvn_upper,
    pearson_to_spearman,
    spearman_to_pearson,
    tetrachoric,
)

GRID = [(a, b, r) for a in (-2.0, -0.5, 0.0, 0.7, 1.8) for b in (-1.3, 0.0, 0.4, 2.2)
        for r in (-0.999, -0.95, -0.6, -0.2, 0.0, 0.3, 0.8, 0.93, 0.999)]  # fmt: skip


@pytest.mark.parametrize(("a", "b", "rho"), GRID)
def test_bvn_upper_matches_scipy(a, b, rho):
    cov = [[1, rho], [rho, 1]]
    ref = multivariate_normal.cdf([-a, -b], mean=[0, 0], cov=cov, abseps=1e-10, releps=1e-10, rng=0)
    assert bvn_upper(a, b, rho) == pytest.approx(ref, abs=1e-7)


@given(st.floats(-4, 4), st.floats(-4, 4), st.floats(-1, 1))
def test_bvn_upper_symmetry_and_bounds(a, b, rho):
    p = bvn_upper(a, b, rho)
    assert p == pytest.approx(bvn_upper(b, a, rho), abs=1e-13)
    assert max(0.0, ndtr(-a) + ndtr(-b) - 1.0) - 1e-12 <= p <= min(ndtr(-a), ndtr(-b)) + 1e-12


@given(st.floats(-4, 4), st.floats(-4, 4))
def test_bvn_upper_independence_and_extremes(a, b):
    assert bvn_upper(a, b, 0.0) == pytest.approx(ndtr(-a) * ndtr(-b), abs=1e-14)
    assert bvn_upper(a, b, 1.0) == pytest.approx(ndtr(-max(a, b)), abs=1e-14)
    assert bvn_upper(a, b, -1.0) == pytest.approx(max(0.0, ndtr(-a) - ndtr(b)), abs=1e-14)


def test_bvn_upper_infinite_thresholds_and_broadcasting():
    assert bvn_upper(np.inf, 0.3, 0.5) == 0.0
    assert bvn_upper(-np.inf, 0.3, 0.5) == pytest.approx(ndtr(-0.3))
    assert bvn_upper(0.3, -np.inf, -0.5) == pytest.approx(ndtr(-0.3))
    out = bvn_upper(np.zeros((2, 3)), 0.0, np.array([-0.5, 0.0, 0.5]))
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out[0], 0.25 + np.arcsin([-0.5, 0.0, 0.5]) / (2 * np.pi), atol=1e-14)
    with pytest.raises(ValueError, match="rho"):
        bvn_upper(0, 0, 1.2)


def test_density_is_derivative_in_rho():
    a, b, rho, h = 0.4, -0.9, 0.35, 1e-6
    numeric = (bvn_upper(a, b, rho + h) - bvn_upper(a, b, rho - h)) / (2 * h)
    assert bvn_density(a, b, rho) == pytest.approx(numeric, rel=1e-6)


@pytest.mark.parametrize("p11", [0.01, 0.1, 0.2, 0.25, 0.3, 0.4, 0.49])
def test_sheppard_closed_form(p11):
    assert tetrachoric(0.5, 0.5, p11) == pytest.approx(
        math.sin(2 * math.pi * (p11 - 0.25)), abs=1e-9
    )


@settings(max_examples=200)
@given(st.floats(0.02, 0.98), st.floats(0.02, 0.98), st.floats(-0.995, 0.995))
def test_round_trip(q, pe, rho):
    p11 = bvn_upper(ndtri(1 - q), ndtri(1 - pe), rho)
    lower, upper = max(0.0, q + pe - 1), min(q, pe)
    if min(p11 - lower, upper - p11) < 1e-7:  # flat at the bounds: ρ is not identified numerically
        return
    assert tetrachoric(q, pe, p11) == pytest.approx(rho, abs=1e-8)


def test_p11_is_increasing_in_rho_and_vectorised_solve():
    rho = np.linspace(-0.99, 0.99, 199)
    p11 = bvn_upper(ndtri(0.7), ndtri(0.4), rho)
    assert np.all(np.diff(p11) > 0)
    np.testing.assert_allclose(tetrachoric(0.3, 0.6, p11), rho, atol=1e-8)


def test_frechet_bounds_and_degenerate_marginals():
    assert tetrachoric(0.3, 0.4, 0.3) == 1.0  # p11 = min(q, pe)
    assert tetrachoric(0.7, 0.6, 0.3) == -1.0  # p11 = q + pe - 1
    assert math.isnan(tetrachoric(0.3, 0.4, 0.35))  # above the upper bound
    assert math.isnan(tetrachoric(0.7, 0.6, 0.2))  # below the lower bound q + pe - 1
    with pytest.raises(ValueError, match="p_11 must be rates"):
        tetrachoric(0.3, 0.4, -0.01)  # not a rate at all
    assert math.isnan(tetrachoric(0.0, 0.4, 0.0))
    assert math.isnan(tetrachoric(0.3, 1.0, 0.3))


def test_pearson_to_spearman_matches_monte_carlo():
    rng = np.random.default_rng(0)
    rho = 0.6
    z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=1_000_000)
    mc = spearmanr(z[:, 0], z[:, 1]).statistic
    assert pearson_to_spearman(rho) == pytest.approx(mc, abs=0.003)
    assert spearman_to_pearson(pearson_to_spearman(rho)) == pytest.approx(rho)
    assert pearson_to_spearman(1.0) == pytest.approx(1.0)
