"""ProjGD, mirror descent and Bregman proximal gradient reach known optima."""

import jax.numpy as jnp
import numpy as np
import pytest

import iclr26.bregman_fw as bfw


def test_projected_gradient_finds_projection():
    p = bfw.quadratic_simplex(20, seed=0)
    for step in (None, 0.5):
        r = bfw.projected_gradient(
            p.f, p.x0, projection="simplex", args=p.args, step_size=step, max_iter=200
        )
        np.testing.assert_allclose(r.x, p.x_star, atol=1e-8)


def test_bregman_proximal_gradient_entropy_and_burg():
    p = bfw.kl_regression(20, 10, seed=0)
    r = bfw.bregman_proximal_gradient(p.f, p.x0, bfw.Entropy(), p.L_rel, args=p.args, max_iter=200)
    hist = np.asarray(r.f_hist)
    assert np.all(np.diff(hist) <= 1e-12)  # NoLips with step 1/L is a descent method
    assert hist[-1] < 0.05 * hist[0]
    b = jnp.array([0.1, 0.2, 0.3, 0.4])
    kl = lambda x, b: jnp.sum(b * jnp.log(b / x) + x - b)  # noqa: E731
    r = bfw.bregman_proximal_gradient(kl, jnp.ones(4) / 4, bfw.Burg(), 1.0, args=(b,), max_iter=200)
    np.testing.assert_allclose(r.x, b, atol=1e-8)


def test_mirror_descent_decreases():
    p = bfw.kl_regression(20, 10, seed=0)
    r = bfw.mirror_descent(p.f, p.x0, args=p.args, step_size=10.0, max_iter=200)
    assert float(r.f_hist[-1]) < 0.3 * float(r.f_hist[0])
    with pytest.raises(ValueError, match="x0 > 0"):
        bfw.mirror_descent(p.f, jnp.zeros(10), args=p.args)
