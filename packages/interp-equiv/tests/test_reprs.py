"""Representation extraction, intervened (co-interpretive) samples, storage."""

import numpy as np
import pytest
import torch

from iclr26.interp_equiv import (
    PermutationDetection,
    Site,
    TinyTransformer,
    intervened_representations,
    load_representations,
    representations,
    save_representations,
)


@pytest.fixture
def model_and_tokens():
    torch.manual_seed(0)
    model = TinyTransformer(6, 6, 2, d_model=16, n_layers=2).eval()
    gen = torch.Generator().manual_seed(0)
    task = PermutationDetection(5)
    return model, task.sample(40, gen)[0], task.sample(40, gen)[0]


def test_official_representation_is_ln_of_each_resid_mean_pooled_and_concatenated(model_and_tokens):
    model, x, _ = model_and_tokens
    R = representations(model, x, batch=7)
    _, cache = model.run_with_cache(x)
    expected = torch.cat(
        [model.ln_final(cache[f"blocks.{layer}.hook_resid_post"]).mean(1) for layer in range(2)], 1
    )
    assert R.shape == (40, 32)
    np.testing.assert_allclose(R, expected.detach().numpy(), atol=1e-5)
    last = representations(
        model, x, sites=["blocks.1.hook_resid_post"], pool="last", apply_ln=False
    )
    np.testing.assert_allclose(
        last, cache["blocks.1.hook_resid_post"][:, -1].detach().numpy(), atol=1e-6
    )


def test_intervened_representations(model_and_tokens):
    model, base, source = model_and_tokens
    sites = [Site.resid(0, pos=i) for i in range(5)]
    same = intervened_representations(model, base, base, sites)
    np.testing.assert_allclose(same, representations(model, base), atol=1e-5)
    moved = intervened_representations(model, base, source, sites)
    assert not np.allclose(moved, representations(model, base), atol=1e-3)
    with pytest.raises(ValueError, match="same shape"):
        intervened_representations(model, base, source[:5], sites)


def test_save_and_load(tmp_path):
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((10, 3)).astype(np.float32),
        rng.standard_normal((10, 4)).astype(np.float32),
    )
    save_representations(tmp_path / "m1.npy", a)
    save_representations(tmp_path / "set.safetensors", {"m2": b, "m3": a})
    loaded = load_representations(tmp_path)
    assert sorted(loaded) == ["m1", "set:m2", "set:m3"]
    np.testing.assert_array_equal(loaded["set:m2"], b)
    with pytest.raises(ValueError, match=r"\.npy or \.safetensors"):
        save_representations(tmp_path / "x.txt", a)
    with pytest.raises(OSError, match="no such"):
        load_representations(tmp_path / "missing.npy")
