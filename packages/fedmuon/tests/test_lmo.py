import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.fedmuon import (
    LMOSpec,
    frobenius_lmo,
    l2_lmo,
    linf_lmo,
    newton_schulz,
    nuclear_norm,
    polar,
    spectral_lmo,
    tree_lmo,
)

SHAPES = [(1, 1), (1, 7), (5, 1), (3, 3), (4, 9), (12, 5), (16, 16), (40, 23)]


def matrix(shape, seed, cond=None):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=shape)
    if cond is not None:  # prescribed singular values in [1/cond, 1]
        u, _, vt = np.linalg.svd(g, full_matrices=False)
        s = np.geomspace(1.0, 1.0 / cond, min(shape))
        g = (u * s) @ vt * rng.uniform(0.1, 10)
    return jnp.asarray(g, jnp.float32)


def op_norm(x):
    return float(np.linalg.norm(np.asarray(x, np.float64), 2))


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(SHAPES), st.integers(0, 10_000))
def test_spectral_lmo_is_optimal(shape, seed):
    g = matrix(shape, seed)
    d = spectral_lmo(g)
    nuc = float(np.linalg.svd(np.asarray(g, np.float64), compute_uv=False).sum())
    assert float(jnp.vdot(g, d)) == pytest.approx(-nuc, rel=1e-5)
    assert op_norm(d) <= 1 + 1e-5
    # no feasible direction does better: random D scaled onto the spectral ball
    rng = np.random.default_rng(seed + 1)
    for _ in range(20):
        cand = rng.normal(size=shape)
        cand /= np.linalg.norm(cand, 2)
        assert float(np.vdot(np.asarray(g, np.float64), cand)) >= -nuc * (1 + 1e-6)


def test_polar_of_rank_deficient_and_zero_matrix():
    assert np.all(np.asarray(polar(jnp.zeros((3, 4)))) == 0)
    assert np.all(np.asarray(spectral_lmo(jnp.zeros((3, 4)), ns_steps=5)) == 0)
    u = jnp.asarray([[1.0], [2.0], [2.0]]) @ jnp.asarray([[3.0, 0.0, 4.0]])  # rank 1, ‖·‖_* = 15
    d = spectral_lmo(u)
    assert op_norm(d) == pytest.approx(1.0, abs=1e-5)
    assert float(jnp.vdot(u, d)) == pytest.approx(-15.0, rel=1e-5)
    assert float(nuclear_norm(u)) == pytest.approx(15.0, rel=1e-5)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(SHAPES), st.integers(0, 10_000))
def test_ns_zero_steps_is_frobenius_normalisation(shape, seed):
    g = matrix(shape, seed)
    np.testing.assert_allclose(newton_schulz(g, 0), g / jnp.linalg.norm(g), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(frobenius_lmo(g), -newton_schulz(g, 0), rtol=1e-5, atol=1e-7)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(SHAPES), st.integers(0, 10_000))
def test_ns_cubic_descent_and_norm_bound(shape, seed):
    """Theorem 3's premises for the cubic set: ⟨G, NS_T(G)⟩ ≥ ‖G‖_F and ‖NS_T(G)‖_op ≤ 1."""
    g = matrix(shape, seed)
    fro = float(jnp.linalg.norm(g))
    for t in (0, 1, 2, 3, 5, 10):
        x = newton_schulz(g, t, "cubic")
        assert float(jnp.vdot(g, x)) >= (1 - 1e-5) * fro, t
        assert op_norm(x) <= 1 + 1e-5, t


def test_jordan_violates_the_premises_on_a_rank_one_input():
    """After Frobenius normalisation a rank-1 G has σ = 1, which Jordan's quintic maps to 0.701:
    ⟨G, NS_1(G)⟩ < ‖G‖_F. This is why the theory-safe "cubic" preset exists."""
    rng = np.random.default_rng(0)
    g = jnp.asarray(np.outer(rng.normal(size=6), rng.normal(size=4)), jnp.float32)
    fro = float(jnp.linalg.norm(g))
    assert float(jnp.vdot(g, newton_schulz(g, 1, "jordan"))) < 0.75 * fro
    assert float(jnp.vdot(g, newton_schulz(g, 1, "cubic"))) >= (1 - 1e-5) * fro


def test_ns_composes_one_step_at_a_time():
    g = matrix((6, 9), 0)
    for coeffs in ("cubic", "jordan"):
        np.testing.assert_allclose(
            newton_schulz(g, 3, coeffs),
            jnp.asarray(_ns_numpy(np.asarray(g, np.float64), 3, coeffs)),
            rtol=2e-4,
            atol=2e-5,
        )


def _ns_numpy(g, steps, coeffs):
    a, b, c = {"cubic": (1.5, -0.5, 0.0), "jordan": (3.4445, -4.7750, 2.0315)}[coeffs]
    x = g / np.linalg.norm(g)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + b * gram @ x + c * gram @ gram @ x
    return x


def test_jordan_overshoots_and_cubic_converges_to_polar():
    g = matrix((16, 16), 3, cond=20.0)
    sv = np.linalg.svd(np.asarray(newton_schulz(g, 5, "jordan")), compute_uv=False)
    assert sv.min() > 0.6
    assert sv.max() < 1.25
    assert sv.max() > 1.0  # the quintic overshoots: ‖NS_5‖_op > 1 (the premise of Thm 3 fails)
    err = [float(jnp.linalg.norm(newton_schulz(g, t, "cubic") - polar(g))) for t in (5, 10, 20)]
    assert err[0] > err[1] > err[2]
    assert err[2] < 1e-3


def test_optax_contrib_parity():
    """NS_5 with Jordan's coefficients = optax.contrib.scale_by_muon(beta=0, nesterov=False)."""
    params = {"w": jnp.zeros((24, 10)), "v": jnp.zeros((7, 31))}
    dims = {k: optax.contrib.MuonDimensionNumbers(0, 1) for k in params}
    tx = optax.contrib.scale_by_muon(beta=0.0, nesterov=False, weight_dimension_numbers=dims)
    state = tx.init(params)
    for seed in range(1):
        g = {"w": matrix((24, 10), seed), "v": matrix((7, 31), seed + 10)}
        out, state = tx.update(g, state)
        for k in g:
            np.testing.assert_allclose(newton_schulz(g[k], 5, "jordan"), out[k], atol=1e-5)


def test_vector_and_conv_policies():
    v = jnp.asarray([3.0, -4.0])
    np.testing.assert_allclose(l2_lmo(v), [-0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(linf_lmo(v), [-1.0, 1.0])
    assert np.all(np.asarray(l2_lmo(jnp.zeros(3))) == 0)
    kernel = matrix((4, 18), 0).reshape(4, 3, 3, 2)
    spec = LMOSpec(ns_steps=None)
    out = tree_lmo({"k": kernel, "b": v}, spec)
    np.testing.assert_allclose(out["k"].reshape(4, -1), -polar(kernel.reshape(4, -1)), atol=1e-6)
    np.testing.assert_allclose(out["b"], l2_lmo(v))
    out = tree_lmo({"k": kernel, "b": v}, LMOSpec(matrix="neg_identity", vector="neg_identity"))
    np.testing.assert_array_equal(out["k"], -kernel)
    w = matrix((32, 8), 1)
    np.testing.assert_allclose(
        tree_lmo(w, LMOSpec(ns_steps=None, scale="width")), 2.0 * spectral_lmo(w), rtol=1e-6
    )
    np.testing.assert_allclose(
        tree_lmo(w, LMOSpec(ns_steps=None, scale="rms")),
        0.2 * np.sqrt(32) * spectral_lmo(w),
        rtol=1e-5,
    )


def test_lmos_are_jittable():
    g = matrix((8, 5), 0)
    f = jax.jit(lambda x: tree_lmo(x, LMOSpec(ns_steps=None)))
    np.testing.assert_allclose(f(g), spectral_lmo(g), atol=1e-6)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="2-D"):
        newton_schulz(jnp.zeros(3))
    with pytest.raises(ValueError, match="steps"):
        newton_schulz(jnp.zeros((2, 2)), -1)
    with pytest.raises(ValueError, match="coeffs"):
        newton_schulz(jnp.zeros((2, 2)), 1, "quartic")
    with pytest.raises(ValueError, match="matrix"):
        LMOSpec(matrix="nuclear")
    with pytest.raises(ValueError, match="ns_steps"):
        LMOSpec(ns_steps=-2)
    with pytest.raises(TypeError, match="array"):
        polar([[1.0]])
    with pytest.raises(TypeError, match="LMOSpec"):
        tree_lmo(jnp.zeros((2, 2)), "spectral")
