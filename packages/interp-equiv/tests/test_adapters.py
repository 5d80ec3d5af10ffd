"""Adapters: the package API on a TransformerLens HookedTransformer gives exactly TransformerLens'
own cached activations and patched outputs (and pyvene's interchange interventions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

tl = pytest.importorskip("transformer_lens")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

from iclr26.interp_equiv import (  # noqa: E402
    HookedTransformerAdapter,
    Site,
    intervened_representations,
    representations,
)


@pytest.fixture(scope="module")
def ht():
    cfg = tl.HookedTransformerConfig(
        n_layers=2, d_model=32, n_ctx=8, d_head=8, n_heads=4, d_mlp=64, d_vocab=13,
        act_fn="gelu", normalization_type="LN", seed=0,
    )  # fmt: skip
    model = tl.HookedTransformer(cfg)
    model.eval()
    return model


@pytest.fixture(scope="module")
def toks():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 13, (2, 16, 8), generator=g)  # base, source


def test_cache_equals_transformer_lens(ht, toks):
    ad = HookedTransformerAdapter(ht)
    assert set(ad.hook_names) == set(ht.hook_dict)
    with torch.no_grad():
        ref_logits, ref = ht.run_with_cache(toks[0])
        logits, cache = ad.run_with_cache(toks[0])
    assert torch.equal(logits, ref_logits[:, -1])
    assert set(cache) == set(ref.cache_dict)
    for name in ref.cache_dict:
        assert torch.equal(cache[name], ref[name]), name
    assert torch.equal(
        cache[Site("blocks.1.attn.hook_z", pos=3, head=2)], ref["blocks.1.attn.hook_z"][:, 3, 2]
    )


def test_representations_equal_accumulated_resid(ht, toks):
    ad = HookedTransformerAdapter(ht)
    got = representations(ad, toks[0])  # every resid_post, final LN, mean over positions
    with torch.no_grad():
        _, ref = ht.run_with_cache(toks[0])
    acc = ref.accumulated_resid(apply_ln=True)[1:]  # drop the embedding: resid_post of each layer
    want = torch.cat(list(acc.mean(2)), 1).detach().float().numpy()
    assert got.shape == (16, 2 * 32)
    np.testing.assert_array_equal(got, want)


def test_patched_equals_run_with_hooks(ht, toks):
    ad = HookedTransformerAdapter(ht, output="all")
    base, source = toks
    with torch.no_grad():
        _, src_cache = ht.run_with_cache(source)
        z = src_cache["blocks.0.attn.hook_z"]
        r = src_cache["blocks.1.hook_resid_post"]

        def hook_z(act, hook):
            act[:, 5, 1] = z[:, 5, 1]
            return act

        def hook_r(act, hook):
            act[:, :, 4:12] = r[:, :, 4:12]
            return act

        want = ht.run_with_hooks(
            base, fwd_hooks=[("blocks.0.attn.hook_z", hook_z), ("blocks.1.hook_resid_post", hook_r)]
        )
        patches = {
            Site("blocks.0.attn.hook_z", pos=5, head=1): z[:, 5, 1],
            Site("blocks.1.hook_resid_post", dims=(4, 12)): r[:, :, 4:12],
        }
        with ad.patched(patches):
            got = ad(base)
    assert torch.equal(got, want)
    assert not torch.equal(got, ht(base))  # the patch changed the output
    # hooks are removed after the context and after TL's own run
    assert torch.equal(ad(base), ht(base))


def test_intervened_representations_match_tl(ht, toks):
    ad = HookedTransformerAdapter(ht)
    base, source = toks
    site = Site("blocks.0.hook_resid_post", pos=2)
    got = intervened_representations(ad, base, source, [site], sites=["blocks.1.hook_resid_post"])
    with torch.no_grad():
        _, src_cache = ht.run_with_cache(source)

        def hook(act, hook):
            act[:, 2] = src_cache["blocks.0.hook_resid_post"][:, 2]
            return act

        with ht.hooks(fwd_hooks=[("blocks.0.hook_resid_post", hook)]):
            _, ref = ht.run_with_cache(base)
    want = ht.ln_final(ref["blocks.1.hook_resid_post"]).mean(1).detach().float().numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"model": torch.nn.Linear(2, 2)}, TypeError),
        ({"output": "first"}, ValueError),
        ({"hooks": ["blocks.9.hook_resid_post"]}, ValueError),
    ],
)
def test_adapter_bad_input(ht, kwargs, exc):
    args = {"model": ht, **kwargs}
    with pytest.raises(exc):
        HookedTransformerAdapter(**args)


@pytest.mark.parametrize(
    ("tokens", "exc"),
    [
        (torch.zeros(2, 8), TypeError),
        (torch.zeros(2, 9, dtype=torch.long), ValueError),
        (torch.full((2, 8), 13), ValueError),
    ],
)
def test_adapter_bad_tokens(ht, tokens, exc):
    ad = HookedTransformerAdapter(ht)
    with pytest.raises(exc):
        ad(tokens)
    with pytest.raises(ValueError, match="valid sites"):
        ad.run_with_cache(torch.zeros(2, 8, dtype=torch.long), sites=["blocks.0.nope"])


@pytest.mark.slow
def test_interchange_equals_pyvene(toks):
    """A pyvene IntervenableModel interchange intervention (VanillaIntervention at one position of
    a hook point) gives exactly the output of ``patched`` with the source run's activation."""
    pv = pytest.importorskip("pyvene")
    cfg = tl.HookedTransformerConfig(
        n_layers=2, d_model=32, n_ctx=8, d_head=8, n_heads=4, d_mlp=64, d_vocab=13,
        act_fn="gelu", normalization_type="LN", seed=1,
    )  # fmt: skip
    ht = tl.HookedTransformer(cfg).eval()
    base, source = toks
    ad = HookedTransformerAdapter(ht, output="all")
    with torch.no_grad():
        _, cache = ad.run_with_cache(source, sites=["blocks.0.hook_resid_post"])
        site = Site("blocks.0.hook_resid_post", pos=2)
        with ad.patched({site: cache[site]}):
            ours = ad(base)
    ad.remove()
    # pyvene reads model.config / model.device, which HookedTransformer does not define
    ht.config = type("Config", (), {})()
    ht.device = torch.device("cpu")
    pvm = pv.IntervenableModel(
        {
            "component": "blocks[0].hook_resid_post.output",
            "intervention": pv.VanillaIntervention(embed_dim=32),
        },
        model=ht,
    )
    n = base.shape[0]
    _, theirs = pvm(
        base={"input": base},
        sources=[{"input": source}],
        unit_locations={"sources->base": ([[[2]] * n], [[[2]] * n])},
    )
    assert torch.equal(ours, theirs)
    assert not torch.equal(ours, ht(base))
