"""LMOs against brute force over enumerated vertices, linprog, and closed-form optimal values."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import linprog

import iclr26.bregman_fw as bfw

N = 5
grads = arrays(np.float64, N, elements=st.floats(-10.0, 10.0))


def vertices(lmo):
    if isinstance(lmo, bfw.Simplex):
        return lmo.radius * np.eye(N)
    if isinstance(lmo, bfw.TruncatedSimplex):
        return lmo.eps + (1 - N * lmo.eps) * np.eye(N)
    if isinstance(lmo, bfw.L1Ball):
        return np.vstack([lmo.radius * np.eye(N), -lmo.radius * np.eye(N)])
    if isinstance(lmo, bfw.Box):
        return np.array(list(itertools.product([lmo.lo, lmo.hi], repeat=N)))
    out = []
    for support in itertools.combinations(range(N), lmo.k):
        for signs in itertools.product([-1.0, 1.0], repeat=lmo.k):
            v = np.zeros(N)
            v[list(support)] = lmo.tau * np.array(signs)
            out.append(v)
    return np.array(out)


POLYTOPES = [
    bfw.Simplex(2.0),
    bfw.TruncatedSimplex(0.05),
    bfw.L1Ball(1.5),
    bfw.Box(-1.0, 2.0),
    bfw.KSparse(2, 0.7),
]


@pytest.mark.parametrize("lmo", POLYTOPES, ids=lambda m: type(m).__name__)
@settings(max_examples=30, deadline=None)
@given(g=grads)
def test_polytope_lmo_attains_brute_force_minimum(lmo, g):
    v = np.asarray(lmo(jnp.asarray(g)))
    best = (vertices(lmo) @ g).min()
    assert v @ g == pytest.approx(best, rel=1e-12, abs=1e-12)
    assert lmo.contains(v)
    assert lmo.is_polytope


def test_ksparse_matches_linprog():
    # the K-sparse polytope {|x_i| <= tau, sum |x_i| <= K tau} as an LP in (x, s) with s >= |x|
    rng = np.random.default_rng(1)
    n, k, tau = 8, 3, 0.5
    lmo = bfw.KSparse(k, tau)
    for _ in range(5):
        g = rng.normal(size=n)
        c = np.concatenate([g, np.zeros(n)])
        eye = np.eye(n)
        A = np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, n)), np.ones((1, n))]])
        b = np.concatenate([np.zeros(2 * n), [k * tau]])
        res = linprog(c, A_ub=A, b_ub=b, bounds=[(-tau, tau)] * n + [(0, tau)] * n)
        assert float(lmo(jnp.asarray(g)) @ g) == pytest.approx(res.fun, abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(g=grads, p=st.sampled_from([1.3, 2.0, 3.0, 7.0]))
def test_lp_balls_attain_dual_norm(g, p):
    if np.abs(g).max() < 1e-6:
        return
    q = p / (p - 1)
    lmo = bfw.LpBall(p, 2.0)
    v = np.asarray(lmo(jnp.asarray(g)))
    assert v @ g == pytest.approx(-2.0 * np.linalg.norm(g, q), rel=1e-9)
    assert lmo.contains(v, atol=1e-9)
    if p == 2.0:
        np.testing.assert_allclose(bfw.L2Ball(2.0)(jnp.asarray(g)), v, rtol=1e-9, atol=1e-12)


def test_matrix_lmos():
    rng = np.random.default_rng(0)
    G = rng.normal(size=(4, 3))
    for lmo in (bfw.NuclearBall(2.0), bfw.NuclearBall(2.0, method="power", iters=200)):
        V = np.asarray(lmo(jnp.asarray(G)))
        assert np.sum(V * G) == pytest.approx(
            -2.0 * np.linalg.svd(G, compute_uv=False)[0], rel=1e-8
        )
        assert lmo.contains(V, atol=1e-8)
    S = rng.normal(size=(4, 4))
    V = np.asarray(bfw.Spectrahedron(3.0)(jnp.asarray(S)))
    assert np.sum(V * S) == pytest.approx(
        3.0 * np.linalg.eigvalsh(0.5 * (S + S.T)).min(), rel=1e-10
    )
    assert bfw.Spectrahedron(3.0).contains(V, atol=1e-9)


def test_product_lmo_is_blockwise():
    lmo = bfw.Product((bfw.Simplex(), bfw.L1Ball(2.0)), (3, 2))
    g = jnp.array([0.5, -1.0, 2.0, 0.3, -4.0])
    np.testing.assert_allclose(lmo(g), [0, 1, 0, 0, 2.0])
    assert lmo.is_polytope
    assert lmo.contains(np.array([0, 1, 0, 0, 2.0]))


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="radius"):
        bfw.Simplex(-1.0)
    with pytest.raises(ValueError, match="1 < p"):
        bfw.LpBall(1.0)
    with pytest.raises(ValueError, match="lo < hi"):
        bfw.Box(1.0, 0.0)
    with pytest.raises(ValueError, match="k must"):
        bfw.KSparse(0)
    with pytest.raises(ValueError, match="n\\*eps < 1"):
        bfw.TruncatedSimplex(0.5)(jnp.ones(3))
