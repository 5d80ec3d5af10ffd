"""float64 for every array of the package: importing this module switches JAX to float64.

Every module of the package that uses JAX imports it first. The adaptive step's acceptance test
subtracts nearly equal objective values, which float32 cannot resolve (backtracking then loops
to its cap), so the solvers also refuse non-float64 starting points (:func:`as_float64`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["F64_INT_EXACT", "as_float64", "enable_x64"]

#: Integers up to this magnitude convert to float64 exactly.
F64_INT_EXACT = 2**53


def enable_x64() -> None:
    """Switch JAX to float64 (``jax_enable_x64``); done once when this module is imported."""
    jax.config.update("jax_enable_x64", True)


enable_x64()


def as_float64(x, name: str) -> jax.Array:
    """``x`` as a float64 JAX array: float64 as is; integers converted exactly (``ValueError``
    beyond 2**53); float32/float16, bool, complex or anything else: ``TypeError`` naming
    ``name``."""
    arr = np.asarray(x) if not isinstance(x, jax.Array) else x
    dtype = np.dtype(arr.dtype)
    if dtype == np.bool_ or not (
        np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)
    ):
        raise TypeError(f"{name} must be a float64 (or integer) array, got dtype {dtype}")
    if np.issubdtype(dtype, np.integer):
        if arr.size and int(np.max(np.abs(np.asarray(arr).astype(object)))) > F64_INT_EXACT:
            raise ValueError(f"{name} has integers beyond 2**53, which float64 cannot hold exactly")
        return jnp.asarray(np.asarray(arr).astype(np.float64))
    if dtype != np.float64:
        raise TypeError(
            f"{name} must be float64 (the acceptance test subtracts nearly equal f values), got {dtype}; "
            "convert it with .astype(float64) (is jax_enable_x64 switched off?)"
        )
    return jnp.asarray(arr)
