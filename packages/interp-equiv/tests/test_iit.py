"""Spec test 5: IIT produces aligned, specific implementations; gating; saving."""

import pytest
import torch

from iclr26.interp_equiv import (
    ModSum,
    PermutationDetection,
    Site,
    TinyMLP,
    TinyTransformer,
    gate,
    interchange_accuracy,
    load_implementation,
    save_implementation,
    train_implementation,
)


@pytest.fixture(scope="module")
def pairwise_impl():
    task = ModSum(3, 4)
    torch.manual_seed(0)
    model = TinyMLP(3, 4, (64, 64), 3)
    align = {"pair0": Site("hidden.0", dims=(0, 16)), "pair1": Site("hidden.0", dims=(16, 32))}
    # strict (SIIT) loss on the units outside the two variables' blocks
    return train_implementation(
        task, "pairwise", model, align, steps=300, lr=1e-2, probe_w=1.0, seed=0,
        strict_sites=[Site("hidden.0", dims=(32, 64))],
    )  # fmt: skip


def test_iit_reaches_high_iia_and_the_alignment_is_specific(pairwise_impl):
    impl = pairwise_impl
    assert impl.accuracy >= 0.95
    assert min(impl.iia.values()) >= 0.95
    # swapping pair1's block while predicting pair0's counterfactual: near chance
    wrong = {"pair0": Site("hidden.0", dims=(16, 32)), "pair1": Site("hidden.0", dims=(0, 16))}
    off = interchange_accuracy(impl.model, impl.task, impl.algorithm, wrong, n=512, seed=9)
    assert max(off.values()) < 0.6
    # an unused block of units carries neither variable
    unused = {"pair0": Site("hidden.0", dims=(40, 56))}
    assert (
        interchange_accuracy(impl.model, impl.task, impl.algorithm, unused, seed=9)["pair0"] < 0.6
    )


@torch.no_grad()
def test_strict_sites_do_not_matter(pairwise_impl):
    """SIIT: resample-ablating the non-aligned units from another input keeps the base label,
    while ablating an aligned block changes the output whenever its variable changes."""
    impl = pairwise_impl
    gen = torch.Generator().manual_seed(11)
    base, y = impl.task.sample(512, gen)
    source, _ = impl.task.sample(512, gen)
    for site, expect_same in ((Site("hidden.0", dims=(32, 64)), True), (Site("hidden.0", dims=(0, 16)), False)):  # fmt: skip
        _, cache = impl.model.run_with_cache(source, sites=[site])
        with impl.model.patched({site: cache[site]}):
            same = float((impl.model(base).argmax(-1) == y).float().mean())
        if expect_same:
            assert same >= 0.95
        else:
            assert same < 0.6  # pair0 differs in 2/3 of the pairs, and so does the label


def test_gate_reports_why_and_save_load_roundtrip(pairwise_impl, tmp_path):
    task = pairwise_impl.task
    torch.manual_seed(1)
    untrained = train_implementation(
        task,
        "total",
        TinyMLP(3, 4, (64, 64), 3),
        {"total": Site("hidden.0", dims=(0, 32))},
        steps=0,
    )
    kept, rejected = gate([pairwise_impl, untrained])
    assert kept == [pairwise_impl]
    assert rejected[0][0] is untrained
    assert "accuracy" in rejected[0][1]
    path = tmp_path / "impl.safetensors"
    save_implementation(pairwise_impl, path)
    loaded = load_implementation(path)
    x = task.sample(32, torch.Generator().manual_seed(3))[0]
    assert torch.allclose(loaded.model(x), pairwise_impl.model(x))
    assert loaded.alignment == pairwise_impl.alignment
    assert loaded.algorithm.name == "pairwise"


def test_training_input_errors():
    task = PermutationDetection(5)
    model = TinyTransformer(6, 6, 2, d_model=16, n_layers=2)
    good = {f"v{i}": Site.resid(0, pos=i) for i in range(5)}
    with pytest.raises(ValueError, match="does not have"):
        train_implementation(task, "sort_diff", model, {"w0": Site.resid(0)}, steps=1)
    with pytest.raises(ValueError, match="unknown algorithm"):
        train_implementation(task, "bogo_sort", model, good, steps=1)
    with pytest.raises(ValueError, match="unknown hook site"):
        train_implementation(
            task, "sort_diff", model, {"v0": Site("blocks.7.hook_resid_post")}, steps=1
        )
    with pytest.raises(ValueError, match="same site"):
        train_implementation(
            task, "sort_diff", model, {"v0": Site.resid(0), "v1": Site.resid(0)}, steps=1
        )
    with pytest.raises(TypeError, match="steps"):
        train_implementation(task, "sort_diff", model, good, steps=1.5)
    with pytest.raises(TypeError, match="hook protocol"):
        train_implementation(task, "sort_diff", torch.nn.Linear(2, 2), good, steps=1)


@pytest.mark.slow
def test_transformer_iit_on_permutation_detection():
    task = PermutationDetection(5)
    torch.manual_seed(0)
    model = TinyTransformer(6, 6, 2, d_model=32, n_layers=2)
    align = {f"v{i}": Site.resid(0, pos=i) for i in range(5)}
    impl = train_implementation(task, "sort_diff", model, align, steps=800, batch=128, probe_w=0.5)
    assert impl.accuracy >= 0.95
    assert impl.min_iia >= 0.9
    # the embedding of position i (the raw token) is not the sorted value at position i
    emb = {f"v{i}": Site("hook_embed", pos=i) for i in range(5)}
    off = interchange_accuracy(impl.model, task, impl.algorithm, emb, seed=4)
    assert min(off.values()) < impl.min_iia - 0.1


def test_transformer_tier_aligns_variables_to_the_host_mlp_output():
    from iclr26.interp_equiv.data import TRANSFORMER_TIER as tier

    task = tier.make_task()
    for v in tier.variants:
        model = tier.model(task, v)
        for algo in tier.algorithms:
            align = tier.alignment(task, algo, v)
            hook = f"blocks.{v.host_layer}.hook_mlp_out"
            assert align == {f"v{i}": Site(hook, pos=i) for i in range(task.n)}
            assert hook in model.hook_names
            assert tier.strict_sites(task, algo, v) == [Site(hook, pos=task.n)]


@pytest.mark.slow
def test_rank_check_clears_the_iia_gate_at_the_mlp_output():
    # the tier's first rank_check model (seed 200): aligned to the whole residual stream at
    # position i it plateaued at IIA 0.908 (0.910 at 2,000 steps); at the MLP output, 0.98
    from iclr26.interp_equiv.data import TRANSFORMER_TIER as tier

    task = tier.make_task()
    v = tier.variants[0]
    torch.manual_seed(200)
    model = tier.model(task, v)
    impl = train_implementation(
        task, "rank_check", model, tier.alignment(task, "rank_check", v), steps=tier.steps,
        batch=tier.batch, lr=tier.lr, probe_w=tier.probe_w, strict_w=0.0,
        intervention=tier.intervention, clip_grad_norm=None, detach_source=False, seed=200,
    )  # fmt: skip
    assert impl.accuracy >= 0.95
    assert impl.min_iia >= 0.95
