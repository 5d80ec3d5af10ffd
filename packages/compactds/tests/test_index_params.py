import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.compactds import auto_params
from iclr26.compactds.index import train_ivfpq


@given(st.integers(1, 2_000_000), st.sampled_from([16, 64, 128, 384, 768]), st.integers(1, 200_000))
def test_auto_params_are_always_trainable(n, dim, n_train):
    n_train = min(n, n_train)
    p = auto_params(n, dim, n_train=n_train)
    assert dim % p.m == 0
    assert 1 <= p.nlist <= max(1, n_train // 39)
    assert p.nlist <= round(4 * np.sqrt(n)) or p.nlist == 1
    assert 1 <= p.nbits <= 8
    assert 2**p.nbits <= max(2, n_train)
    if n_train >= 39 * 256:
        assert p.nbits == 8


@settings(max_examples=5, deadline=None)
@given(st.integers(60, 400))
def test_small_stores_train_without_errors(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 32)).astype(np.float32)
    index = train_ivfpq(x, auto_params(n, 32), seed=0)
    index.add(x)
    assert index.ntotal == n


def test_explicit_params_are_checked():
    with pytest.raises(ValueError, match="divide"):
        auto_params(1000, 384, m=7)
    with pytest.raises(ValueError, match="nlist"):
        auto_params(100, 32, nlist=500)
    with pytest.raises(ValueError, match="nbits"):
        auto_params(100, 32, nbits=8)
    assert auto_params(10**6, 768, n_train=10**5).nlist == 2564
