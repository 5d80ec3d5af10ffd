import jax.numpy as jnp
import numpy as np
import optax
import pytest

from iclr26.fedmuon import (
    LMOSpec,
    control_variate_correction,
    ema_momentum,
    local_muon,
    polar,
    scale_by_lmo,
)


def test_ema_momentum_has_no_bias_correction():
    tx = ema_momentum(0.25)
    g = {"w": jnp.full((2, 2), 4.0)}
    state = tx.init(g)
    out, state = tx.update(g, state)
    np.testing.assert_allclose(out["w"], 1.0)  # α g, not g
    out, state = tx.update(g, state)
    np.testing.assert_allclose(out["w"], 0.75 * 1.0 + 0.25 * 4.0)
    np.testing.assert_allclose(state.mu["w"], out["w"])


def test_correction_sign_and_lmo_direction():
    u = jnp.asarray([[2.0, 0.0], [0.0, -1.0]])
    ci = jnp.asarray([[1.0, 0.0], [0.0, 0.0]])
    c = jnp.asarray([[0.0, 0.0], [0.0, 3.0]])
    corr, _ = control_variate_correction().update(u, optax.EmptyState(), c_local=ci, c_global=c)
    np.testing.assert_allclose(corr, [[1.0, 0.0], [0.0, 2.0]])  # u − C_i + C
    d, _ = scale_by_lmo(LMOSpec(ns_steps=None)).update(corr, optax.EmptyState())
    np.testing.assert_allclose(d, -np.eye(2), atol=1e-6)  # the descent direction −polar


def test_composes_with_multi_transform():
    """Matrices through local Muon, vectors through Adam, as optax.contrib.muon routes them."""
    params = {"w": jnp.arange(12.0).reshape(4, 3) / 10, "b": jnp.ones(3)}
    grads = {
        "w": jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)), jnp.float32),
        "b": jnp.asarray([1.0, -2.0, 0.5]),
    }
    labels = {"w": "muon", "b": "adam"}
    tx = optax.multi_transform(
        {"muon": local_muon(0.1, alpha=1.0, spec=LMOSpec(ns_steps=None)), "adam": optax.adam(0.01)},
        labels,
    )
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates["w"], -0.1 * polar(grads["w"]), atol=1e-6)
    adam_updates, _ = optax.adam(0.01).update(grads["b"], optax.adam(0.01).init(params["b"]))
    np.testing.assert_allclose(updates["b"], adam_updates, rtol=1e-6)
    masked = optax.masked(scale_by_lmo(LMOSpec(ns_steps=None)), {"w": True, "b": False})
    out, _ = masked.update(grads, masked.init(params))
    np.testing.assert_array_equal(out["b"], grads["b"])


def test_transforms_reject_bad_arguments():
    with pytest.raises(ValueError, match="alpha"):
        local_muon(0.1, alpha=0.0)
    with pytest.raises(TypeError, match="LMOSpec"):
        scale_by_lmo("spectral")
