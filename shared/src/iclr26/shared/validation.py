"""Argument checks for public boundaries: clear ``ValueError``/``TypeError`` naming the argument.

The array checks accept anything with a ``shape`` (NumPy arrays, torch tensors, JAX arrays, lists
are converted with NumPy). torch and JAX are only imported when such an object is passed in, so
the checks cost nothing in packages that do not use them. Call them outside ``jax.jit``: traced
values have no concrete content to check.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "check_array",
    "check_choice",
    "check_finite",
    "check_int",
    "check_nonempty",
    "check_range",
    "check_shape",
]

T = TypeVar("T")


def _describe(x: Any) -> str:
    shape = getattr(x, "shape", None)
    if shape is not None:
        return f"{type(x).__name__} of shape {tuple(shape)}"
    return f"{type(x).__name__} {x!r}"[:120]


def _as_shaped(x: Any, name: str) -> Any:
    if hasattr(x, "shape") and hasattr(x, "ndim"):
        return x
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be array-like, got {_describe(x)}") from err
    if arr.dtype == object:  # ragged lists, sets, dict views: not an array
        raise TypeError(f"{name} must be array-like, got {_describe(x)}")
    return arr


def check_shape(x: T, name: str, shape: Sequence[int | None]) -> T:
    """Check that ``x`` has ``len(shape)`` dimensions and the given sizes (``None`` = any size).

    Returns ``x`` unchanged so the call can be used inline.
    """
    arr = _as_shaped(x, name)
    got = tuple(int(s) for s in arr.shape)
    want = tuple(shape)
    if len(got) != len(want) or any(
        w is not None and w != g for w, g in zip(want, got, strict=False)
    ):
        pretty = "(" + ", ".join("*" if w is None else str(w) for w in want)
        pretty += ",)" if len(want) == 1 else ")"
        raise ValueError(f"{name} must have shape {pretty}, got shape {got}")
    return x


def check_nonempty(x: T, name: str) -> T:
    """Check that ``x`` (an array or a sized collection) has at least one element."""
    size = getattr(x, "size", None)
    if callable(size):  # torch.Tensor.size is a method
        size = x.numel()  # type: ignore[attr-defined]
    if size is None:
        try:
            size = len(x)  # type: ignore[arg-type]
        except TypeError as err:
            raise TypeError(
                f"{name} must be an array or a sized collection, got {_describe(x)}"
            ) from err
    if int(size) == 0:
        raise ValueError(f"{name} must not be empty, got {_describe(x)}")
    return x


def _all_finite(x: Any) -> bool:
    module = type(x).__module__
    if module.startswith("torch"):
        import torch

        return bool(torch.isfinite(x).all())
    if module.startswith(("jax", "jaxlib")):
        import jax.numpy as jnp

        return bool(jnp.isfinite(x).all())
    arr = np.asarray(x)
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"expected a numeric array, got dtype {arr.dtype}")
    return bool(np.isfinite(arr).all())


def check_finite(x: T, name: str) -> T:
    """Check that every element of ``x`` is finite (no NaN, no ±inf)."""
    try:
        ok = _all_finite(x)
    except TypeError as err:
        raise TypeError(f"{name}: {err}") from err
    if not ok:
        raise ValueError(f"{name} must be finite, but contains NaN or inf ({_describe(x)})")
    return x


def check_array(
    x: T,
    name: str,
    *,
    ndim: int | None = None,
    shape: Sequence[int | None] | None = None,
    finite: bool = True,
    nonempty: bool = True,
) -> T:
    """Validate an array argument in one call: dimensions, shape, emptiness and finiteness.

    Args:
        x: NumPy array, torch tensor, JAX array or nested sequence.
        name: the argument's name, used in the error message.
        ndim: required number of dimensions.
        shape: required shape, ``None`` entries match any size (implies ``ndim``).
        finite: reject NaN and ±inf.
        nonempty: reject arrays with zero elements.

    Returns:
        ``x`` unchanged.
    """
    arr = _as_shaped(x, name)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {tuple(arr.shape)}")
    if shape is not None:
        check_shape(arr, name, shape)
    if nonempty:
        check_nonempty(arr, name)
    if finite:
        check_finite(arr, name)
    return x


def check_range(
    value: float,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Check that a real scalar lies in an interval; ``None`` bounds are open. Returns it as float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    v = float(value)
    if math.isnan(v):
        raise ValueError(f"{name} must be a number, got NaN")
    below = low is not None and (v < low if low_inclusive else v <= low)
    above = high is not None and (v > high if high_inclusive else v >= high)
    if below or above:
        left = "(-inf" if low is None else ("[" if low_inclusive else "(") + f"{low:g}"
        right = "inf)" if high is None else f"{high:g}" + ("]" if high_inclusive else ")")
        raise ValueError(f"{name} must be in {left}, {right}, got {value!r}")
    return v


def check_int(value: int, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Check that ``value`` is an integer (not a bool, not a float) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {_describe(value)}")
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else str(low)
        hi = "inf" if high is None else str(high)
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def check_choice(value: T, name: str, choices: Collection[T]) -> T:
    """Check that ``value`` is one of ``choices``; the error lists the allowed options."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {options}; got {value!r}")
    return value
