"""Spec test 4: hook correctness for the tiny models and the generic module adapter."""

import numpy as np
import pytest
import torch
from torch import nn

from iclr26.interp_equiv import (
    ModSum,
    ModuleHooks,
    PermutationDetection,
    Site,
    TinyMLP,
    TinyTransformer,
    representations,
)


def _transformer():
    torch.manual_seed(0)
    return TinyTransformer(6, 6, 2, d_model=32, n_layers=2, n_heads=4).eval()


def _tokens(n=16, seed=0):
    return PermutationDetection(5).sample(n, torch.Generator().manual_seed(seed))[0]


def test_patching_a_site_with_its_own_activation_changes_nothing():
    model, x = _transformer(), _tokens()
    logits, cache = model.run_with_cache(x)
    for name in model.hook_names:
        with model.patched({name: cache[name]}):
            assert torch.allclose(model(x), logits, atol=1e-6), name


def test_patching_from_a_source_makes_the_site_equal_to_the_source():
    model, base, source = _transformer(), _tokens(seed=1), _tokens(seed=2)
    _, src = model.run_with_cache(source)
    _, clean = model.run_with_cache(base)
    for site in [
        Site.resid(0, pos=2),
        Site("blocks.1.attn.hook_z", pos=4, head=3),
        Site.resid(1, dims=(0, 8)),
    ]:
        with model.patched({site: src[site]}):
            _logits, patched = model.run_with_cache(base)
        assert torch.equal(patched[site], src[site])
        # the rest of the activation is untouched at the patched hook
        other = (
            Site(site.hook, pos=0) if site.pos not in (None, 0) else Site(site.hook, dims=(8, 32))
        )
        assert torch.allclose(patched[other], clean[other]) or site.hook.endswith("resid_post")
    with model.patched({Site.resid(1): src[Site.resid(1)]}):
        assert torch.allclose(model(base), model(source), atol=1e-5)  # final residual fully swapped


def test_masked_patch_touches_only_selected_rows():
    model, base, source = _transformer(), _tokens(seed=1), _tokens(seed=2)
    site = Site.resid(0)
    _, src = model.run_with_cache(source)
    mask = torch.arange(16) % 2 == 0
    with model.patched({site: (src[site], mask)}):
        _, c = model.run_with_cache(base)
    _, clean = model.run_with_cache(base)
    assert torch.equal(c[site][mask], src[site][mask])
    assert torch.equal(c[site][~mask], clean[site][~mask])


def test_unknown_site_lists_valid_ones_and_bad_patches_fail():
    model, x = _transformer(), _tokens()
    with pytest.raises(
        ValueError, match=r"unknown hook site 'blocks.9.hook_resid_post'.*hook_embed"
    ):
        model.run_with_cache(x, sites=["blocks.9.hook_resid_post"])
    with (
        pytest.raises(ValueError, match="unknown hook site"),
        model.patched({"nope": torch.zeros(1)}),
    ):
        pass
    with (
        pytest.raises(ValueError, match="patch for"),
        model.patched({Site.resid(0): torch.zeros(3, 3)}),
    ):
        model(x)
    with pytest.raises(ValueError, match="head"):
        model.run_with_cache(x)[1][
            Site.resid(0, pos=0).__class__("blocks.0.hook_resid_post", head=1)
        ]
    with pytest.raises(TypeError, match="integer"):
        model(x.float())
    with pytest.raises(ValueError, match="token ids"):
        model(x + 10)


def test_mlp_hooks_and_module_adapter_agree():
    torch.manual_seed(0)
    mlp = TinyMLP(5, 4, (16, 16), 5).eval()
    x = ModSum(5, 4).sample(8, torch.Generator().manual_seed(0))[0]
    _logits, cache = mlp.run_with_cache(x)
    with mlp.patched({Site("hidden.0", dims=(0, 4)): torch.zeros(8, 4)}):
        _, c = mlp.run_with_cache(x)
    assert torch.equal(c[Site("hidden.0", dims=(0, 4))], torch.zeros(8, 4))
    seq = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    hooked = ModuleHooks(seq)
    assert hooked.hook_names == ("0", "1", "2")
    xf = torch.randn(5, 3)
    out, cache = hooked.run_with_cache(xf, sites=["1"])
    assert torch.allclose(cache["1"], torch.relu(seq[0](xf)))
    with hooked.patched({"1": torch.zeros(5, 8)}):
        assert torch.allclose(hooked(xf), seq[2].bias.expand(5, 2))
    assert torch.allclose(hooked(xf), out)  # patch removed on exit
    reps = representations(hooked, xf, sites=["1"])
    assert np.allclose(reps, torch.relu(seq[0](xf)).detach().numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="no submodule"):
        ModuleHooks(seq, hooks=["9"])
    hooked.remove()
