import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from iclr26.shared import (
    check_array,
    check_choice,
    check_finite,
    check_int,
    check_nonempty,
    check_range,
    check_shape,
)


def test_check_shape_accepts_wildcards_and_returns_input():
    x = np.zeros((3, 4))
    assert check_shape(x, "x", (3, None)) is x


@pytest.mark.parametrize("shape", [(4, 3), (3,), (3, 4, 1)])
def test_check_shape_names_argument_and_both_shapes(shape):
    with pytest.raises(ValueError, match=r"grads must have shape .* got shape \(3, 4\)"):
        check_shape(np.zeros((3, 4)), "grads", shape)


def test_check_shape_converts_nested_lists():
    check_shape([[1, 2], [3, 4]], "m", (2, 2))


def test_check_shape_rejects_non_arrays():
    with pytest.raises(TypeError, match="x must be array-like"):
        check_shape({1: 2}.keys(), "x", (1,))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_finite_rejects_nan_and_inf(bad):
    x = np.ones(5)
    x[2] = bad
    with pytest.raises(ValueError, match="scores must be finite"):
        check_finite(x, "scores")


def test_check_finite_rejects_non_numeric():
    with pytest.raises(TypeError, match="labels: expected a numeric array"):
        check_finite(np.array(["a", "b"]), "labels")


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1))
def test_check_finite_accepts_every_finite_list(values):
    assert check_finite(values, "v") == values


@given(st.lists(st.floats(), min_size=1))
def test_check_finite_agrees_with_math_isfinite(values):
    if all(math.isfinite(v) for v in values):
        check_finite(values, "v")
    else:
        with pytest.raises(ValueError, match="v must be finite"):
            check_finite(values, "v")


@pytest.mark.parametrize("empty", [np.zeros((0, 3)), [], ""])
def test_check_nonempty_rejects_empty(empty):
    with pytest.raises(ValueError, match="pool must not be empty"):
        check_nonempty(empty, "pool")


def test_check_array_combines_checks():
    x = np.ones((2, 3))
    assert check_array(x, "x", ndim=2, shape=(2, 3)) is x
    with pytest.raises(ValueError, match="x must be 1-dimensional"):
        check_array(x, "x", ndim=1)
    with pytest.raises(ValueError, match="must not be empty"):
        check_array(np.ones((0,)), "x")
    with pytest.raises(ValueError, match="finite"):
        check_array(np.array([1.0, np.nan]), "x")
    check_array(np.array([1.0, np.nan]), "x", finite=False)


@given(
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
def test_check_range_matches_interval_definition(value, a, b):
    low, high = min(a, b), max(a, b)
    if low <= value <= high:
        assert check_range(value, "v", low=low, high=high) == value
    else:
        with pytest.raises(ValueError, match=r"v must be in \["):
            check_range(value, "v", low=low, high=high)


def test_check_range_open_bounds_and_types():
    assert check_range(0.5, "p", low=0, high=1, low_inclusive=False) == 0.5
    with pytest.raises(ValueError, match=r"p must be in \(0, 1\]"):
        check_range(0, "p", low=0, high=1, low_inclusive=False)
    with pytest.raises(ValueError, match="got NaN"):
        check_range(float("nan"), "p", low=0)
    with pytest.raises(TypeError, match="p must be a real number"):
        check_range("0.5", "p")
    with pytest.raises(TypeError):
        check_range(True, "p")


def test_check_int():
    assert check_int(np.int64(3), "k", low=1) == 3
    with pytest.raises(TypeError, match="k must be an integer"):
        check_int(3.0, "k")
    with pytest.raises(TypeError):
        check_int(True, "k")
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 10\], got 11"):
        check_int(11, "k", low=1, high=10)


def test_check_choice_lists_options():
    assert check_choice("exact", "rerank", ("exact", "none")) == "exact"
    with pytest.raises(ValueError, match="rerank must be one of 'exact', 'none'; got 'fast'"):
        check_choice("fast", "rerank", ("exact", "none"))
