import math

import pytest
import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import eager_attention_forward

from iclr26.fastcar import FrameLayout, ReplayConfig, enable_fastcar, temporal_attention_score


def test_layout_arithmetic():
    lay = FrameLayout(4, 3)
    assert [lay.frame(i) for i in range(3, 12)] == [0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert [lay.slot(i) for i in range(3, 12)] == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    assert lay.frame(2) == -1
    assert lay.slot(0) == -1
    assert lay.predecessor(6) is None  # frame 0
    assert lay.predecessor(7) == 3
    assert lay.predecessor(11) == 7
    assert lay.num_frames(3 + 8) == 2
    with pytest.raises(ValueError, match="whole frames"):
        lay.num_frames(3 + 9)
    with pytest.raises(ValueError, match="prefix_len"):
        FrameLayout(4).frame(5)
    assert FrameLayout(4).frame(9, prefix_len=5) == 1


def test_tas_gqa_mapping_and_reductions():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 4, 8, generator=g)
    k = torch.randn(3, 2, 8, generator=g)
    brute = torch.stack(
        [torch.stack([q[b, h] @ k[b, h // 2] for h in range(4)]) for b in range(3)]
    ) / math.sqrt(8)
    torch.testing.assert_close(temporal_attention_score(q, k), brute.mean(1))
    torch.testing.assert_close(temporal_attention_score(q, k, head_reduce="max"), brute.amax(1))
    torch.testing.assert_close(
        temporal_attention_score(q, k, scale=1 / math.sqrt(128)), brute.mean(1) * math.sqrt(8 / 128)
    )


_CAPTURED: list = []


def _capture_attention(module, query, key, value, attention_mask, **kwargs):
    if query.shape[2] == 1:
        _CAPTURED.append((module.layer_idx, query.clone(), key.clone()))
    return eager_attention_forward(module, query, key, value, attention_mask, **kwargs)


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize("score", ["post_rope", "reference"])
def test_tas_equals_the_attention_logit(kv_heads, score, make_llama):
    """The recorded score equals q·k[i-N] computed from the attention's own (captured) q and k."""
    AttentionInterface.register("fastcar_capture", _capture_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register("fastcar_capture", ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    m = make_llama(kv_heads=kv_heads, layers=2)
    m.set_attn_implementation("fastcar_capture")
    n, p = 4, 3
    pre_q: dict = {}
    hooks = [
        layer.self_attn.q_proj.register_forward_hook(
            lambda mod, a, out, li=li: pre_q.__setitem__(li, out.detach().clone())
        )
        for li, layer in enumerate(m.model.layers)
    ]
    cfg = ReplayConfig(FrameLayout(n, p), score=score)
    ids = torch.randint(1, 40, (2, p), generator=torch.Generator().manual_seed(1))
    _CAPTURED.clear()
    with enable_fastcar(m, cfg) as h, h.recording():
        cache = None
        x = ids
        got = {0: [], 1: []}
        want = {0: [], 1: []}
        for step in range(3 * n):
            out = m(input_ids=x, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            i = p + step - 1  # absolute position of the token fed at this step (step >= 1)
            x = out.logits[:, -1:].argmax(-1)
            if step == 0:
                _CAPTURED.clear()
                continue
            for li, q, k in _CAPTURED:
                if (i - p) // n < 1:
                    continue
                if score == "reference":
                    q = pre_q[li].view(2, 1, -1, q.shape[-1]).transpose(1, 2)
                kk = k[:, :, i - n].repeat_interleave(4 // kv_heads, dim=1)
                want[li].append((q[:, :, 0] * kk).sum(-1).mean(1) * q.shape[-1] ** -0.5)
            _CAPTURED.clear()
        for li in range(2):
            got[li] = h.state.records[li]["score"]
    for h_ in hooks:
        h_.remove()
    for li in range(2):
        assert len(got[li]) == len(want[li]) > 0
        torch.testing.assert_close(
            torch.stack(got[li]), torch.stack(want[li]), rtol=1e-5, atol=1e-5
        )
