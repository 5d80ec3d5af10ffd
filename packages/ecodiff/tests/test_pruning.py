"""Units, gates on real diffusers classes, selection budgets and physical slicing."""

import pytest
import torch
from torch import nn

from iclr26.ecodiff.baselines import magnitude_scores, random_scores
from iclr26.ecodiff.masking import MaskedModel
from iclr26.ecodiff.materialize import load_pruned, materialize, save_pruned
from iclr26.ecodiff.sampler import diffusers_model_fn, from_scheduler
from iclr26.ecodiff.select import MaskScores, count_macs, count_params, select
from iclr26.ecodiff.toy import tiny_flux, tiny_unet
from iclr26.ecodiff.units import find_prunable_units, linear_pair_unit


def _dit_out(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(3, 1, 8, 8, generator=g, dtype=torch.float64)
    return model(z, torch.tensor([10.0, 500.0, 900.0], dtype=torch.float64),
                 class_labels=torch.tensor([1, 4, 7]), return_dict=False)[0]  # fmt: skip


def test_units_of_dit_count_parameters_exactly(dit):
    units = find_prunable_units(dit)
    assert [u.kind for u in units] == ["heads", "ffn"] * 2
    heads, ffn = units[0], units[1]
    assert (heads.size, heads.width) == (2, 8)
    assert (ffn.size, ffn.width) == (64, 1)
    # removing one unit of each kind by slicing removes exactly params_per_unit parameters
    for u in (heads, ffn):
        keep = {v.key: torch.ones(v.size, dtype=torch.bool) for v in units}
        keep[u.key][0] = False
        pruned = materialize(dit, units, keep)
        assert count_params(dit)["total"] - count_params(pruned)["total"] == u.params_per_unit


def test_dense_limit_is_bit_for_bit(dit):
    units = find_prunable_units(dit)
    with torch.no_grad():
        ref = _dit_out(dit)
        masked = MaskedModel(dit, units, init_logit=50.0)
        with masked:
            for mode in ("stochastic", "deterministic", "binary"):
                with masked.use(mode):
                    assert torch.equal(_dit_out(dit), ref)
        assert not masked.installed
        assert torch.equal(_dit_out(dit), ref)


def test_gates_change_output_and_hooks_come_off(dit):
    units = find_prunable_units(dit)
    with torch.no_grad():
        ref = _dit_out(dit)
        with MaskedModel(dit, units, init_logit=-50.0):
            assert not torch.allclose(_dit_out(dit), ref)
        assert torch.equal(_dit_out(dit), ref)


@pytest.mark.parametrize("budget", ["units", "params"])
def test_binary_gates_equal_materialised_dit(dit, budget):
    units = find_prunable_units(dit)
    keep = select(random_scores(units, seed=3), 0.5, budget=budget)
    keep[units[0].key][:] = False  # a fully pruned attention module
    keep[units[3].key][:] = False  # a fully pruned FFN
    masked = MaskedModel(dit, units)
    with torch.no_grad():
        with masked, masked.use("keep", keep):
            gated = _dit_out(dit)
        pruned = materialize(dit, units, keep)
        assert pruned.transformer_blocks[0].attn1.heads == 0
        assert pruned.transformer_blocks[1].ff.net[2].in_features == 0
        assert torch.allclose(_dit_out(pruned), gated, atol=1e-10)
    assert count_params(pruned)["total"] < count_params(dit)["total"]


def test_binary_gates_equal_materialised_unet_geglu_and_cross_attention():
    unet = tiny_unet().double().eval()
    units = find_prunable_units(unet)
    kinds = {u.name.rsplit(".", 1)[-1] for u in units}
    assert kinds == {"attn1", "attn2", "ff"}
    ff = next(u for u in units if u.kind == "ffn")
    assert len(ff.producers) == 2
    assert ff.producers[1][1] == ff.size
    keep = select(random_scores(units, seed=1), 0.4, budget="units")
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 1, 8, 8, generator=g, dtype=torch.float64)
    c = torch.randn(2, 3, 32, generator=g, dtype=torch.float64)
    masked = MaskedModel(unet, units)
    with torch.no_grad():
        with masked, masked.use("keep", keep):
            gated = unet(z, 10, encoder_hidden_states=c).sample
        dense = unet(z, 10, encoder_hidden_states=c).sample
        pruned = materialize(unet, units, keep)
        out = pruned(z, 10, encoder_hidden_states=c).sample
    assert not torch.allclose(gated, dense)
    assert torch.allclose(out, gated, atol=1e-10)


def test_binary_gates_equal_materialised_flux_single_and_double_blocks():
    flux = tiny_flux().double().eval()
    units = find_prunable_units(flux)
    assert {u.kind for u in units} == {"heads", "ffn", "flux_single_mlp"}
    mlp = next(u for u in units if u.kind == "flux_single_mlp")
    assert mlp.consumers[0][1] == flux.single_transformer_blocks[0].attn.to_q.out_features
    keep = select(random_scores(units, seed=2), 0.5, budget="units")
    keep[units[0].key][:] = False  # all heads of the double-stream block
    single_heads = next(u for u in units if u.name == "single_transformer_blocks.1.attn")
    keep[single_heads.key][:] = False
    g = torch.Generator().manual_seed(0)
    n, length = 16, 4
    f64 = {"dtype": torch.float64}
    inp = {
        "hidden_states": torch.randn(2, n, 4, generator=g, **f64),
        "encoder_hidden_states": torch.randn(2, length, 32, generator=g, **f64),
        "pooled_projections": torch.randn(2, 16, generator=g, **f64),
        "timestep": torch.tensor([0.5, 0.3], **f64),
        "img_ids": torch.zeros(n, 3, **f64), "txt_ids": torch.zeros(length, 3, **f64), "return_dict": False,
    }  # fmt: skip
    masked = MaskedModel(flux, units)
    with torch.no_grad():
        with masked, masked.use("keep", keep):
            gated = flux(**inp)[0]
        out = materialize(flux, units, keep)(**inp)[0]
    assert torch.allclose(out, gated, atol=1e-10)


def _flux_inputs():
    g = torch.Generator().manual_seed(0)
    n, length = 16, 4
    f64 = {"dtype": torch.float64}
    return {
        "hidden_states": torch.randn(2, n, 4, generator=g, **f64),
        "encoder_hidden_states": torch.randn(2, length, 32, generator=g, **f64),
        "pooled_projections": torch.randn(2, 16, generator=g, **f64),
        "timestep": torch.tensor([0.5, 0.3], **f64),
        "img_ids": torch.zeros(n, 3, **f64), "txt_ids": torch.zeros(length, 3, **f64), "return_dict": False,
    }  # fmt: skip


def test_flux_norm_modulation_gates_are_opt_in_and_equal_zeroed_rows():
    flux = tiny_flux().double().eval()
    assert all(u.kind != "flux_norm" for u in find_prunable_units(flux))
    units = find_prunable_units(flux, kinds=("heads", "ffn", "flux_single_mlp", "flux_norm"))
    norms = {u.name: u for u in units if u.kind == "flux_norm"}
    assert set(norms) == {
        "transformer_blocks.0.norm1", "transformer_blocks.0.norm1_context",
        "single_transformer_blocks.0.norm", "single_transformer_blocks.1.norm",
    }  # fmt: skip
    assert norms["transformer_blocks.0.norm1"].size == 6 * 32  # shift/scale/gate x (msa, mlp)
    assert norms["single_transformer_blocks.0.norm"].size == 3 * 32
    inp = _flux_inputs()
    masked = MaskedModel(flux, units, init_logit=50.0, noise_eps=0.0)
    with torch.no_grad():
        dense = flux(**inp)[0]
        with masked, masked.use("deterministic"):
            assert torch.equal(flux(**inp)[0], dense)  # saturated gates: dense bit-for-bit
    keep = select(random_scores(units, seed=3), 0.4, budget="units")
    # a gate of 0 on a modulation channel changes the output (it is not a no-op)
    only_norm = {u.key: torch.ones(u.size, dtype=torch.bool) for u in units}
    only_norm[norms["transformer_blocks.0.norm1"].key] = keep[
        norms["transformer_blocks.0.norm1"].key
    ]
    with torch.no_grad():
        with masked, masked.use("keep", only_norm):
            assert not torch.allclose(flux(**inp)[0], dense, atol=1e-6)
        with masked, masked.use("keep", keep):
            gated = flux(**inp)[0]
        pruned = materialize(flux, units, keep)
        out = pruned(**inp)[0]
    assert torch.allclose(out, gated, atol=1e-10)
    lin = pruned.get_submodule("single_transformer_blocks.1.norm.linear")
    dropped = ~keep[norms["single_transformer_blocks.1.norm"].key]
    assert lin.weight.shape == flux.single_transformer_blocks[1].norm.linear.weight.shape
    assert lin.weight[dropped].abs().sum() == 0
    assert lin.bias[dropped].abs().sum() == 0
    # the norm logits get gradients (away from saturation)
    masked = MaskedModel(flux, units, init_logit=0.0)
    with masked:
        masked.resample_noise(torch.Generator().manual_seed(0))
        flux(**inp)[0].pow(2).mean().backward()
    for u in norms.values():
        assert masked.logits[u.key].grad.abs().sum() > 0


def test_save_and_load_pruned_roundtrip(dit, tmp_path):
    from diffusers import DiTTransformer2DModel

    units = find_prunable_units(dit)
    keep = select(magnitude_scores(dit, units), 0.3, total_params=count_params(dit)["total"])
    pruned = materialize(dit, units, keep)
    save_pruned(pruned, units, keep, tmp_path / "m")
    loaded = load_pruned(DiTTransformer2DModel, tmp_path / "m").double()
    with torch.no_grad():
        assert torch.allclose(_dit_out(loaded), _dit_out(pruned), atol=1e-6)
    assert count_params(loaded)["total"] == count_params(pruned)["total"]
    with pytest.raises(OSError, match="not a pruned model"):
        load_pruned(DiTTransformer2DModel, tmp_path)


def test_select_budgets(make_dit):
    dit = make_dit(layers=2)
    units = find_prunable_units(dit)
    n_units = sum(u.size for u in units)
    scores = random_scores(units, seed=0)
    keep = select(scores, 0.25, budget="units")
    assert sum(int((~k).sum()) for k in keep.values()) == round(0.25 * n_units)
    pool = sum(u.size * u.params_per_unit for u in units)
    for sp in (0.1, 0.2, 0.37):
        keep = select(scores, sp)
        removed = sum(u.params_per_unit * int((~keep[u.key]).sum()) for u in units)
        target = round(sp * pool)
        assert removed <= target
        assert target - removed < min(u.params_per_unit for u in units)
    # local scope: the same fraction per module
    keep = select(scores, 0.5, scope="local", budget="units")
    for u in units:
        assert int((~keep[u.key]).sum()) == round(0.5 * u.size)
    # global scope removes the globally lowest scores
    keep = select(scores, 0.25, budget="units")
    flat = torch.cat([scores.logits[u.key] for u in units])
    kept = torch.cat([keep[u.key] for u in units])
    assert flat[~kept].max() <= flat[kept].min()
    # a budget that cannot be met exactly is refused when exact=True
    with pytest.raises(ValueError, match="exactly"):
        select(scores, 0.2, exact=True, total_params=pool + 1)
    with pytest.raises(ValueError, match="prunable"):
        select(scores, 0.9, total_params=count_params(dit)["total"] * 10)


def test_select_ties_are_deterministic(make_dit):
    dit = make_dit(layers=1)
    units = find_prunable_units(dit)
    flat = MaskScores({u.key: torch.zeros(u.size, dtype=torch.float64) for u in units}, units)
    keep = select(flat, 0.5, budget="units")
    again = select(flat, 0.5, budget="units")
    assert all(torch.equal(keep[k], again[k]) for k in keep)
    # ties go to module order then unit index: the first module's units go first
    assert not bool(keep[units[0].key].any())


def test_plain_torch_mlp_units():
    mlp = nn.Sequential(nn.Linear(5, 12), nn.GELU(), nn.Linear(12, 3)).double()
    unit = linear_pair_unit(mlp, "0", "2")
    assert unit.params_per_unit == 5 + 1 + 3
    keep = {unit.key: torch.arange(12) % 3 != 0}
    x = torch.randn(7, 5, dtype=torch.float64)
    masked = MaskedModel(mlp, [unit])
    with torch.no_grad(), masked, masked.use("keep", keep):
        gated = mlp(x)
    assert torch.allclose(materialize(mlp, [unit], keep)(x), gated, atol=1e-12)
    with pytest.raises(ValueError, match="no prunable units"):
        find_prunable_units(mlp)


def test_cfg_applies_one_mask_to_both_halves(dit):
    units = find_prunable_units(dit)
    fn = diffusers_model_fn(dit, guidance_scale=1.0)
    guided = diffusers_model_fn(dit, guidance_scale=3.0, null_cond=torch.tensor([10]))
    sampler = from_scheduler(__import__("diffusers").DDIMScheduler(), 4)
    masked = MaskedModel(dit, units, init_logit=0.5)
    z = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    y = torch.tensor([3, 5])
    with torch.no_grad(), masked:
        masked.resample_noise(torch.Generator().manual_seed(0))
        t = torch.full((2,), 500.0, dtype=torch.float64)
        c, u = fn(z, t, y), fn(z, t, torch.tensor([10, 10]))
        assert torch.allclose(guided(z, t, y), u + 3.0 * (c - u), atol=1e-10)
        assert sampler.sample(guided, z, y).shape == z.shape


def test_count_macs_of_a_linear_and_of_a_pruned_ffn(dit):
    lin = torch.nn.Linear(6, 4)
    assert count_macs(lin, torch.randn(5, 6)) == 5 * 6 * 4
    units = find_prunable_units(dit)
    ffn = units[1]
    keep = {v.key: torch.ones(v.size, dtype=torch.bool) for v in units}
    keep[ffn.key][:10] = False  # 10 hidden neurons of a GELU FFN fed by `tokens` tokens
    pruned = materialize(dit, units, keep)
    x = torch.randn(3, 1, 8, 8, dtype=torch.float64)
    t, y = torch.tensor([1, 2, 3]), torch.tensor([1, 4, 7])

    def run(m):
        return m(x, timestep=t, class_labels=y, return_dict=False)[0]

    d_in = dit.get_submodule(ffn.producers[0][0]).in_features
    d_out = dit.get_submodule(ffn.consumers[0][0]).out_features
    tokens = 3 * (8 // dit.config.patch_size) ** 2
    saved = count_macs(run, dit) - count_macs(run, pruned)
    assert saved == 10 * tokens * (d_in + d_out)
    with pytest.raises(TypeError, match="callable"):
        count_macs(3)
