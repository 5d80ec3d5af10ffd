"""Every function of the README's API table refuses bad input with an error naming the argument."""

import math

import numpy as np
import pytest
import torch

from iclr26.fastcar import (
    FrameLayout,
    PackedMLP,
    PatchTokenizer,
    ReplayConfig,
    TinyARVideoLM,
    VideoTokens,
    amdahl_bound,
    calibrate,
    calibrate_thresholds,
    drift_slope,
    enable_fastcar,
    frame_psnr,
    generate_video,
    mlp_row_cost,
    mlp_time_in_decode,
    moving_digits,
    pack_mlps,
    row_padding_from_costs,
    temporal_attention_score,
    token_agreement,
    tune_row_padding,
)  # fmt: skip

LAY = FrameLayout(4, 3)


def _native():
    torch.manual_seed(0)
    return TinyARVideoLM(40, 32, 2, 4, 2, 64, 64)


CASES = [
    (lambda m: FrameLayout(0), ValueError, "tokens_per_frame"),
    (lambda m: FrameLayout(4.0), TypeError, "tokens_per_frame"),
    (lambda m: FrameLayout(4, -1), ValueError, "prefix_len"),
    (lambda m: FrameLayout(4, 3).num_frames(10), ValueError, "whole frames"),
    (lambda m: ReplayConfig(LAY, thresholds=[0.0, math.nan]), ValueError, "NaN"),
    (lambda m: ReplayConfig(LAY, thresholds="1"), ValueError, "thresholds"),
    (lambda m: ReplayConfig(LAY, score="pre"), ValueError, "score"),
    (lambda m: ReplayConfig(LAY, decision="teacache"), ValueError, "decision"),
    (lambda m: ReplayConfig(LAY, protect_frames=0), ValueError, "protect_frames"),
    (lambda m: ReplayConfig(LAY, max_chain=0), ValueError, "max_chain"),
    (lambda m: ReplayConfig(4), TypeError, "layout"),
    (lambda m: enable_fastcar(m, ReplayConfig(LAY, thresholds=[0.0] * 3)), ValueError, "2 layers"),
    (lambda m: enable_fastcar(m, {"thresholds": 0}), TypeError, "cfg"),
    (lambda m: enable_fastcar(torch.nn.Linear(2, 2), ReplayConfig(LAY)), TypeError, "expected"),
    (lambda m: enable_fastcar("llama", ReplayConfig(LAY)), TypeError, "model"),
    (lambda m: generate_video(m, torch.ones(2, 3), 4), TypeError, "prefix"),
    (lambda m: generate_video(m, torch.ones(2, 3, dtype=torch.long), 0), ValueError, "num_tokens"),
    (lambda m: _native().decode(torch.ones(2, 3, dtype=torch.long), 5,
                                replay=ReplayConfig(LAY)), ValueError, "whole frames"),
    (lambda m: _native().decode(torch.ones(2, 3, dtype=torch.long), 8,
                                replay=ReplayConfig(FrameLayout(4, 2))), ValueError, "prefix_len"),
    (lambda m: _native().decode(torch.full((1, 3), 99), 4), ValueError, "prefix"),
    (lambda m: _native().decode(torch.ones(1, 3, dtype=torch.long), 100), ValueError, "max_positions"),
    (lambda m: TinyARVideoLM(40, 30, 2, 4, 2, 64, 64), ValueError, "hidden_size"),
    (lambda m: temporal_attention_score(torch.ones(2, 4, 8), torch.ones(2, 3, 8)), ValueError, "multiple"),
    (lambda m: temporal_attention_score(torch.ones(2, 8), torch.ones(2, 8)), ValueError, "query"),
    (lambda m: calibrate_thresholds([np.ones(5)], 1.5), ValueError, "target_rate"),
    (lambda m: calibrate_thresholds([np.ones(5)], [0.1, 0.2]), ValueError, "target_rate"),
    (lambda m: calibrate_thresholds([np.array([1.0, math.nan])], 0.5), ValueError, "finite"),
    (lambda m: calibrate_thresholds([], 0.5), ValueError, "scores"),
    (lambda m: calibrate(m, torch.ones(1, 3, dtype=torch.long), 8, ReplayConfig(LAY), -0.1),
     ValueError, "target_rate"),
    (lambda m: amdahl_bound(1.2, 0.5), ValueError, "mlp_fraction"),
    (lambda m: amdahl_bound(0.5, -0.5), ValueError, "replay_rate"),
    (lambda m: token_agreement(np.ones((2, 3)), np.ones((2, 4))), ValueError, "tokens"),
    (lambda m: frame_psnr(np.ones((1, 2, 4, 4)), np.ones((1, 2, 4))), ValueError, "frames"),
    (lambda m: drift_slope(np.array([1.0, math.inf])), ValueError, "per_frame_error"),
    (lambda m: moving_digits(0), ValueError, "num_videos"),
    (lambda m: PatchTokenizer(patch=0), ValueError, "patch"),
    (lambda m: PatchTokenizer().encode(np.zeros((16, 16))), ValueError, "not fitted"),
    (lambda m: VideoTokens().prefix([11], [0], [0], [0]), ValueError, "label"),
    (lambda m: ReplayConfig(LAY, row_padding=[(3, 4)]), TypeError, "row_padding"),
    (lambda m: ReplayConfig(LAY, row_padding={3: 4.0}), TypeError, "row_padding"),
    (lambda m: ReplayConfig(LAY, row_padding={3: 2}), ValueError, "row_padding"),
    (lambda m: row_padding_from_costs([]), ValueError, "costs"),
    (lambda m: row_padding_from_costs([{"rows": 1}]), ValueError, "costs"),
    (lambda m: row_padding_from_costs([{"rows": 1, "cost_vs_full": math.nan}]), ValueError,
     "costs"),
    (lambda m: row_padding_from_costs([{"rows": 1, "cost_vs_full": 1.0}], 1.0), ValueError,
     "tolerance"),
    (lambda m: tune_row_padding(m, 8), TypeError, "TinyARVideoLM"),
    (lambda m: tune_row_padding(_native(), 8, tolerance=-0.1), ValueError, "tolerance"),
    (lambda m: tune_row_padding(_native(), 0), ValueError, "batch"),
    (lambda m: mlp_row_cost(m, 8), TypeError, "TinyARVideoLM"),
    (lambda m: mlp_row_cost(_native(), 0), ValueError, "batch"),
    (lambda m: mlp_row_cost(_native(), 8, [2.5]), TypeError, "rows"),
    (lambda m: mlp_row_cost(_native(), 8, [9]), ValueError, "rows"),
    (lambda m: mlp_row_cost(_native(), 8, layer=2), ValueError, "layer"),
    (lambda m: mlp_row_cost(_native(), 8, repeats=0), ValueError, "repeats"),
    (lambda m: mlp_time_in_decode(m, torch.ones(2, 3, dtype=torch.long), 8, ReplayConfig(LAY)),
     TypeError, "TinyARVideoLM"),
    (lambda m: mlp_time_in_decode(_native(), torch.ones(2, 3, dtype=torch.long), 8, 0.5),
     TypeError, "replay"),
    (lambda m: mlp_time_in_decode(_native(), torch.ones(2, 3, dtype=torch.long), 1,
                                  ReplayConfig(LAY)), ValueError, "num_tokens"),
    (lambda m: PackedMLP(torch.nn.Linear(2, 2)), TypeError, "gate_proj"),
    (lambda m: PackedMLP(m.model.layers[0].mlp, batch_hint=0), ValueError, "batch_hint"),
    (lambda m: pack_mlps(torch.nn.Linear(2, 2)), TypeError, "expected"),
    (lambda m: generate_video(m, torch.ones(2, 3, dtype=torch.long), 4,
                              cache_implementation="paged"), ValueError, "cache_implementation"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "match"), CASES)
def test_bad_input(call, error, match, make_llama):
    with pytest.raises(error, match=match):
        call(make_llama())


def test_layout_must_match_the_model_and_no_padding(make_llama):
    m = make_llama()
    m.config.fastcar_tokens_per_frame = 16
    with pytest.raises(ValueError, match="tokens per frame"):
        enable_fastcar(m, ReplayConfig(LAY))
    del m.config.fastcar_tokens_per_frame
    with enable_fastcar(m, ReplayConfig(LAY, thresholds=0.0)):
        ids = torch.ones(2, 3, dtype=torch.long)
        mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
        with pytest.raises(ValueError, match="padding"):
            m.generate(ids, attention_mask=mask, max_new_tokens=2, pad_token_id=0)
        with pytest.raises(ValueError, match="already enabled"):
            enable_fastcar(m, ReplayConfig(LAY))
