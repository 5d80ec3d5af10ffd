"""Tiny-scale versions of the headline claims on the shipped trained toy."""

import math

import numpy as np
import pytest
import torch

from iclr26.fastcar import (
    FrameLayout,
    ReplayConfig,
    TinyARVideoLM,
    calibrate,
    calibrate_thresholds,
    load_toy,
    record,
    spearman_per_layer,
)  # fmt: skip
from iclr26.fastcar.toy import decode_frames, toy_prompts


@pytest.fixture(scope="module")
def toy():
    return load_toy()


def test_shipped_toy_is_small_and_matches_the_native_model(toy):
    n = sum(p.numel() for p in toy.model.parameters())
    assert n < 1_000_000
    nat = TinyARVideoLM.from_hf(toy.model)
    p = toy_prompts(toy, 2, 2, seed=0)
    from iclr26.fastcar import generate_video

    k = toy.preset.codebook_size
    hf_tokens, _ = generate_video(
        toy.model, p.prefix, 2 * toy.vocab.tokens_per_frame, allowed_vocab=k
    )
    n = 2 * toy.vocab.tokens_per_frame
    assert torch.equal(nat.decode(p.prefix, n, allowed_vocab=k).tokens, hf_tokens)


@pytest.mark.xfail(
    raises=AssertionError,
    strict=True,
    reason="finding: on the shipped toy TAS is not negatively correlated with the MLP-output "
    "change (reproduce E1 reports it); strict, so the test fails if the claim starts holding",
)
def test_tas_predicts_small_mlp_change(toy):
    """E1 at tiny scale: TAS is negatively rank-correlated with the relative MLP-output change."""
    nat = TinyARVideoLM.from_hf(toy.model)
    n = toy.vocab.tokens_per_frame
    p = toy_prompts(toy, 4, 4, seed=7)
    st = record(
        nat, p.prefix, 4 * n, ReplayConfig(FrameLayout(n, 5)), allowed_vocab=64, noise_seed=3
    )
    rho = spearman_per_layer(st.records)
    assert np.mean(rho) < -0.2, rho


def test_calibrated_rate_is_reached_on_recorded_scores():
    s = np.random.default_rng(0).normal(size=1000)
    for r in (0.0, 0.25, 0.5, 0.9, 1.0):
        (tau,) = calibrate_thresholds([s], r)
        assert abs((s > tau).mean() - r) <= 1e-3
    taus = [calibrate_thresholds([s], r)[0] for r in (0.1, 0.3, 0.6)]
    assert taus == sorted(taus, reverse=True)
    assert calibrate_thresholds([s], 0.0) == [math.inf]


@pytest.mark.slow
@pytest.mark.xfail(
    raises=AssertionError,
    strict=True,
    reason="finding: on the shipped toy TAS does not beat random at equal 40 % replay "
    "in 4 of 5 seeds (reproduce E3 at 0.4 agrees); strict: fails if the claim starts holding",
)
def test_tas_drifts_less_than_random_at_equal_rate(toy):
    """Spec §5.5 method check: at 40 % replay TAS beats random in >= 4 of 5 seeds (32 videos)."""
    nat = TinyARVideoLM.from_hf(toy.model)
    n = toy.vocab.tokens_per_frame
    lay = FrameLayout(n, 5)
    wins = 0
    for seed in range(5):
        ev, cal = toy_prompts(toy, 32, 8, 100 + seed), toy_prompts(toy, 16, 8, 200 + seed)
        dense = decode_frames(toy, nat.decode(ev.prefix, 8 * n, allowed_vocab=64).tokens, 8)
        tas = ReplayConfig(lay, seed=seed)
        tas.thresholds = calibrate(nat, cal.prefix, 8 * n, tas, 0.4, allowed_vocab=64)
        res = nat.decode(ev.prefix, 8 * n, replay=tas, allowed_vocab=64)
        # random at TAS's live per-layer rate: equal replay rate, only the choice differs
        live = res.state.stats.per_layer()  # NaN: a layer calibration disabled
        rnd = ReplayConfig(lay, decision="random", seed=seed,
                           thresholds=[math.inf if math.isnan(r) else 1 - r for r in live])  # fmt: skip
        out = nat.decode(ev.prefix, 8 * n, replay=rnd, allowed_vocab=64).tokens
        err = {
            d: float(((decode_frames(toy, t, 8) - dense) ** 2).mean())
            for d, t in (("tas", res.tokens), ("random", out))
        }
        wins += err["tas"] < err["random"]
    assert wins >= 4


def test_bench_model_has_llama_2_7b_proportions():
    """The timing model keeps the paper's premise: the MLP holds LLaMA-2-7B's share of weight
    MACs (3 d d_ff vs 4 d^2: 66.8 %), head dim 128 as VILA-U."""
    from iclr26.fastcar import BENCH_PRESET, decode_macs

    p = BENCH_PRESET
    ours = decode_macs(p.hidden_size, p.intermediate_size, p.num_heads, p.num_kv_heads, 0)
    seven_b = decode_macs(4096, 11008, 32, 32, 0)
    assert ours["mlp_share_weights"] == pytest.approx(seven_b["mlp_share_weights"], abs=1e-9)
    assert p.hidden_size // p.num_heads == 128


def test_mlp_row_cost_table():
    from iclr26.fastcar import mlp_row_cost

    torch.manual_seed(0)
    nat = TinyARVideoLM(40, 32, 2, 4, 2, 64, 64)
    rows = mlp_row_cost(nat, 8, repeats=2, calls=2)
    assert [r["rows"] for r in rows] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert rows[-1]["cost_vs_full"] == 1.0
    assert all(r["cost_vs_full"] > 0 and r["ms_per_call"] > 0 for r in rows)
