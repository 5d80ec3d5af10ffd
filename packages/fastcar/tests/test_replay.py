import math

import pytest
import torch
from torch import nn

from iclr26.fastcar import (
    FrameLayout,
    ReplayConfig,
    TinyARVideoLM,
    calibrate,
    enable_fastcar,
    generate_video,
)  # fmt: skip

pytestmark = pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated")
N, P = 4, 3


def _prefix(b, seed=1, vocab=40):
    return torch.randint(1, vocab, (b, P), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("batch", [1, 4])
def test_disabled_is_bit_identical_hf_and_native(batch, make_llama):
    m = make_llama()
    ids = _prefix(batch)
    ref_t, ref_l = generate_video(m, ids, 3 * N, keep_logits=True)
    nat = TinyARVideoLM.from_hf(m)
    nref = nat.decode(ids, 3 * N, keep_logits=True)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=math.inf)
    with enable_fastcar(m, cfg) as h:
        t, lg = generate_video(m, ids, 3 * N, keep_logits=True)
        assert sum(h.stats.rows_total) > 0
        assert sum(h.stats.rows_replayed) == 0
    assert torch.equal(t, ref_t)
    assert torch.equal(lg, ref_l)
    r = nat.decode(ids, 3 * N, keep_logits=True, replay=cfg)
    assert torch.equal(r.tokens, nref.tokens)
    assert torch.equal(r.logits, nref.logits)
    # the native model is the same network as the HF one
    assert torch.equal(nref.tokens, ref_t)
    torch.testing.assert_close(nref.logits, ref_l, rtol=1e-4, atol=1e-5)
    # disable() restores the original modules
    assert all(type(layer.mlp).__name__ == "LlamaMLP" for layer in m.model.layers)


class PositionStub(nn.Module):
    """An MLP whose output encodes the absolute position it was called for (channel 0)."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock
        self.calls: list[int] = []

    def forward(self, x):
        _b, t, _d = x.shape
        pos = torch.arange(self.clock[0], self.clock[0] + t, dtype=x.dtype)
        self.calls.extend(range(self.clock[0], self.clock[0] + t))
        y = torch.zeros_like(x)
        y[..., 0] = 1e-3 * pos
        return y


@pytest.mark.parametrize("max_chain", [None, 1])
def test_forced_replay_uses_the_same_slot_of_the_previous_frame(max_chain, make_llama):
    m = make_llama()
    clock = [0]

    def tick(mod, args, kw):
        cache = kw.get("cache", kw.get("past_key_values"))
        clock[0] = cache.get_seq_length() if cache is not None else 0

    m.model.register_forward_pre_hook(tick, with_kwargs=True)
    stubs = [PositionStub(clock) for _ in m.model.layers]
    for layer, s in zip(m.model.layers, stubs, strict=False):
        layer.mlp = s
    seen: dict = {}
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=-math.inf, max_chain=max_chain)
    with enable_fastcar(m, cfg) as h:
        for li, layer in enumerate(m.model.layers):
            layer.mlp.register_forward_hook(
                lambda mod, a, out, li=li: seen.setdefault(li, []).append(
                    (clock[0] + out.shape[1] - 1, out[0, -1, 0])
                )
            )
        generate_video(m, _prefix(2), 4 * N)
        for li in range(len(stubs)):
            for pos, val in seen[li]:
                if pos < P + N:
                    expect = pos  # frame 0: computed
                elif max_chain is None:
                    expect = P + (pos - P) % N  # chained replays reach back to frame 0
                else:  # alternate: compute, replay, compute, ...
                    f = (pos - P) // N
                    expect = pos if f % 2 == 0 else pos - N
                assert val.item() == pytest.approx(1e-3 * expect), (li, pos)
        # real skipping: replayed positions never entered the MLP
        decode_calls = [c for c in stubs[0].calls if c >= P]
        if max_chain is None:
            assert max(decode_calls) < P + N
        rows = h.stats
        assert rows.rows_computed[0] + rows.rows_replayed[0] == rows.rows_total[0]


def test_native_forced_replay_and_skipping(make_llama):
    nat = TinyARVideoLM.from_hf(make_llama())
    counts = []
    for layer in nat.model.layers:
        inner = layer.mlp
        layer.mlp = _Counter(inner, counts)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=-math.inf)
    r = nat.decode(_prefix(3), 4 * N, replay=cfg)
    st = r.state.stats
    # decode rows entering the MLPs: only frame-0 tokens fed after the prefill (N steps x 3 rows);
    # frames 1..3 feed 3N - 1 tokens (the last generated token is never fed back)
    assert sum(c for c in counts if c == 3) == 3 * N * len(nat.model.layers)
    assert st.rows_replayed == [3 * (3 * N - 1)] * len(nat.model.layers)


class _Counter(nn.Module):
    def __init__(self, inner, counts):
        super().__init__()
        self.inner, self.counts = inner, counts

    def forward(self, x):
        self.counts.append(x.shape[0] * x.shape[1])
        return self.inner(x)


def test_rows_entering_the_mlp_match_the_replay_rate(make_llama):
    m = make_llama()
    counts: list[int] = []
    for layer in m.model.layers:
        layer.mlp = _Counter(layer.mlp, counts)
    cfg = ReplayConfig(FrameLayout(N, P))
    ids = _prefix(4)
    cfg.thresholds = calibrate(m, ids, 4 * N, cfg, 0.5)
    counts.clear()
    with enable_fastcar(m, cfg) as h:
        generate_video(m, ids, 4 * N)
        st = h.stats
    decode_rows = sum(c for c in counts if c <= 4)  # prefill call has 4 * P rows
    assert 0 < sum(st.rows_replayed) < sum(st.rows_total)
    assert decode_rows == sum(st.rows_total) - sum(st.rows_replayed)
    assert 0.2 < st.eligible_replay_rate() < 0.8


def test_state_is_bounded_in_the_number_of_frames(make_llama):
    nat = TinyARVideoLM.from_hf(make_llama())
    sizes = []
    for frames in (2, 6):
        r = nat.decode(
            _prefix(2), frames * N, replay=ReplayConfig(FrameLayout(N, P), thresholds=0.0)
        )
        sizes.append(r.state.buffer_bytes())
    assert sizes[0] == sizes[1] > 0


def test_batch_independence(make_llama):
    m = make_llama()
    ids = _prefix(4, seed=3)
    cfg = ReplayConfig(FrameLayout(N, P))
    cfg.thresholds = calibrate(m, ids, 4 * N, cfg, 0.5)
    with enable_fastcar(m, cfg) as h:
        batch, lb = generate_video(m, ids, 4 * N, keep_logits=True)
        assert sum(h.stats.rows_replayed) > 0
        for b in range(4):
            one, l1 = generate_video(m, ids[b : b + 1], 4 * N, keep_logits=True)
            assert torch.equal(one[0], batch[b])
            torch.testing.assert_close(l1[0], lb[b], rtol=1e-5, atol=1e-5)


def test_reset_between_videos_and_monotone_rate(make_llama):
    m = make_llama()
    a, b = _prefix(2, seed=5), _prefix(2, seed=6)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=-math.inf)
    with enable_fastcar(m, cfg) as h:
        generate_video(m, a, 3 * N)
        second, _ = generate_video(m, b, 3 * N)  # a fresh prefill resets the ring buffers
    with enable_fastcar(m, cfg):
        fresh, _ = generate_video(m, b, 3 * N)
    assert torch.equal(second, fresh)
    # after replaying, +inf thresholds give the dense result again
    dense, _ = generate_video(m, b, 3 * N)
    with enable_fastcar(m, cfg) as h:
        generate_video(m, a, 3 * N)
        h.set_thresholds(math.inf)
        h.reset()
        again, _ = generate_video(m, b, 3 * N)
    assert torch.equal(again, dense)
    # the replay rate does not increase with the threshold (recorded scores)
    rates = []
    for tau in (-1.0, -0.1, 0.0, 0.1, 1.0):
        cfg = ReplayConfig(FrameLayout(N, P), thresholds=tau)
        with enable_fastcar(m, cfg) as h:
            generate_video(m, a, 3 * N)
            rates.append(h.stats.eligible_replay_rate())
    assert rates == sorted(rates, reverse=True)
    assert rates[0] > rates[-1]


def test_decision_rules_share_the_plumbing(make_llama):
    nat = TinyARVideoLM.from_hf(make_llama())
    lay = FrameLayout(N, P)
    ids = _prefix(4)
    for decision in ("random", "input_diff", "oracle"):
        cfg = ReplayConfig(lay, decision=decision, seed=1)
        cfg.thresholds = 0.5 if decision == "random" else calibrate(nat, ids, 4 * N, cfg, 0.5)
        st = nat.decode(ids, 4 * N, replay=cfg).state.stats
        assert 0.15 < st.eligible_replay_rate() < 0.85, decision
        if decision == "oracle":  # computes every MLP: no saving
            assert st.rows_computed == st.rows_total
        else:
            assert [
                c + r for c, r in zip(st.rows_computed, st.rows_replayed, strict=False)
            ] == st.rows_total
    st = nat.decode(ids, 4 * N, replay=ReplayConfig(lay, decision="always", thresholds=0.0)).state
    assert st.stats.eligible_replay_rate() == 1.0


@pytest.mark.parametrize("padding", [{1: 4, 2: 4, 3: 4, 5: 6}, dict.fromkeys(range(1, 8), 8)])
def test_row_padding_changes_the_gemm_shape_not_the_outputs(padding, make_llama):
    """Padded kept rows (copies of a kept row, outputs dropped) give the unpadded decode, the
    padded rows are counted apart, and the MLP sees rows_computed + rows_padded decode rows."""
    nat = TinyARVideoLM.from_hf(make_llama())
    ids = _prefix(8, seed=3)
    base = ReplayConfig(FrameLayout(N, P), thresholds=0.5, decision="random", seed=2)
    ref = nat.decode(ids, 4 * N, replay=base, keep_logits=True)
    counts = []
    for layer in nat.model.layers:
        layer.mlp = _Counter(layer.mlp, counts)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=0.5, decision="random", seed=2,
                       row_padding=padding)  # fmt: skip
    r = nat.decode(ids, 4 * N, replay=cfg, keep_logits=True)
    assert torch.equal(r.tokens, ref.tokens)
    torch.testing.assert_close(r.logits, ref.logits, rtol=1e-5, atol=1e-5)
    st, st0 = r.state.stats, ref.state.stats
    assert st.rows_computed == st0.rows_computed
    assert st.rows_replayed == st0.rows_replayed
    assert sum(st.rows_padded) > 0
    assert sum(st0.rows_padded) == 0
    prefill = 8 * P * len(nat.model.layers)
    assert sum(counts) - prefill == sum(st.rows_computed) + sum(st.rows_padded)


def test_row_padding_from_costs_picks_the_cheapest_larger_shape():
    from iclr26.fastcar import row_padding_from_costs

    cost = {1: 0.2, 2: 0.3, 3: 0.5, 4: 0.45, 5: 0.9, 6: 0.6, 7: 0.62, 8: 1.0}
    table = [{"rows": k, "cost_vs_full": c} for k, c in cost.items()]
    # 3 -> 4 (0.45 < 0.95 * 0.5), 5 -> 6; 7 and 6 are not beaten by a larger count
    assert row_padding_from_costs(table) == {3: 4, 5: 6}
    # a tolerance of 20 % keeps 3 rows (0.45 is only 10 % cheaper)
    assert row_padding_from_costs(table, tolerance=0.2) == {5: 6}


def test_hf_static_cache_replays_like_the_native_decoder(make_llama):
    """The hooks read the predecessor key by absolute position, so HF's static KV cache (keys
    preallocated to the full length) replays exactly as the dynamic one and the native model."""
    m = make_llama()
    ids = _prefix(4, seed=5)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=0.0)
    ref = TinyARVideoLM.from_hf(m).decode(ids, 3 * N, replay=cfg)
    with torch.inference_mode(), enable_fastcar(m, cfg) as h:
        out = m.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=3 * N,
            min_new_tokens=3 * N, do_sample=False, pad_token_id=0, eos_token_id=None,
            use_cache=True, cache_implementation="static",
        )  # fmt: skip
        assert h.stats.rows_replayed == ref.state.stats.rows_replayed
    assert sum(ref.state.stats.rows_replayed) > 0
    assert torch.equal(out, ref.tokens)


def test_preallocated_cache_decodes_and_replays_exactly_like_the_dynamic_cache(make_llama):
    """``cache_implementation="preallocated"`` writes keys and values into buffers instead of
    concatenating: tokens and logits equal the dynamic cache's bit for bit densely, and with
    replay the tokens and decisions equal the native decoder's; a cache that outgrows its
    capacity grows without losing a position, a crop rewrites in place, and beam reordering /
    batch selection keep the cache a view of its (reindexed) buffers."""
    from iclr26.fastcar import preallocated_cache

    m = make_llama()
    ids = _prefix(4, seed=5)
    dense, logits = generate_video(m, ids, 3 * N, keep_logits=True)
    pre, pre_logits = generate_video(m, ids, 3 * N, keep_logits=True,
                                     cache_implementation="preallocated")  # fmt: skip
    assert torch.equal(pre, dense)
    assert torch.equal(pre_logits, logits)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=0.0)
    ref = TinyARVideoLM.from_hf(m).decode(ids, 3 * N, replay=cfg)
    with enable_fastcar(m, cfg) as h:
        out, _ = generate_video(m, ids, 3 * N, cache_implementation="preallocated")
        assert h.stats.rows_replayed == ref.state.stats.rows_replayed
    assert sum(ref.state.stats.rows_replayed) > 0
    assert torch.equal(out, ref.tokens)
    # capacity 2 for a 5-token prompt + 3 steps: grows (doubling) and still matches
    with torch.inference_mode():
        cache = preallocated_cache(2)
        seq = ids
        for _ in range(3):
            o = m(seq if cache.get_seq_length() == 0 else seq[:, -1:], cache=cache, use_cache=True)
            seq = torch.cat((seq, o.logits[:, -1:].argmax(-1)), 1)
        assert torch.equal(seq, dense[:, : P + 3])
        layer = cache.layers[0]
        assert layer.keys.shape[-2] == P + 2
        assert layer.buffers[0].shape[-2] >= P + 2
        full = layer.keys.clone()
        cache.crop(-1)  # drop the last position, then append it again
        m(seq[:, -2:-1], cache=cache, use_cache=True)
        torch.testing.assert_close(layer.keys, full, rtol=0, atol=0)
        order = torch.tensor([2, 0, 3, 1])
        cache.reorder_cache(order)
        assert torch.equal(layer.keys, full[order])
        assert layer.keys.data_ptr() == layer.buffers[0].data_ptr()  # still a view
        cache.batch_select_indices(torch.tensor([1, 3]))
        assert layer.values.shape[0] == 2
        assert torch.equal(layer.keys, full[order][[1, 3]])
        # generate writes into the buffers it was given
        given = preallocated_cache(P + N)
        m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=N, min_new_tokens=N,
                   do_sample=False, pad_token_id=0, eos_token_id=None, cache=given)  # fmt: skip
        assert given.layers[0].buffers[0].shape[-2] == P + N
        assert given.get_seq_length() == P + N - 1
    with pytest.raises(ValueError, match="capacity"):
        preallocated_cache(0)


def test_time_split_measures_the_mlp_share_of_hf_and_native_decoding(make_llama):
    """E0 on both backends: the MLPs are swapped out for the second run and restored after."""
    from iclr26.fastcar.experiments import time_split

    m = make_llama()
    ids = _prefix(2, seed=1)
    mlps = [layer.mlp for layer in m.model.layers]
    for model in (m, TinyARVideoLM.from_hf(m)):
        sp = time_split(model, ids, 2 * N, repeats=1)
        assert 0.0 <= sp["f_mlp"] < 1.0
        assert sp["dense_ms_per_token"] > 0
    assert [layer.mlp for layer in m.model.layers] == mlps
    sp = time_split(m, ids, 2 * N, repeats=1, cache_implementation="preallocated")
    assert sp["batch"] == 2
    with pytest.raises(ValueError, match="repeats"):
        time_split(m, ids, 2 * N, repeats=0)
    with pytest.raises(ValueError, match="HF models only"):
        time_split(TinyARVideoLM.from_hf(m), ids, 2 * N, cache_implementation="static")


def test_packed_mlp_is_the_same_function_dense_and_under_replay(make_llama):
    """``PackedMLP`` (fused gate/up weight, oneDNN pre-packed on CPU float32) computes the SwiGLU
    MLP it packs; a packed HF model and a packed native model decode the same tokens as the
    unpacked ones, densely and with replay (the replay wrapper sees the packed MLP's rows)."""
    from iclr26.fastcar import PackedMLP, pack_mlps

    m = make_llama()
    mlp = m.model.layers[0].mlp
    x = torch.randn(7, 1, m.config.hidden_size, generator=torch.Generator().manual_seed(3))
    for onednn in (True, False):
        pm = PackedMLP(mlp, batch_hint=4, onednn=onednn)
        for rows in (1, 3, 7):
            torch.testing.assert_close(pm(x[:rows]), mlp(x[:rows]), rtol=1e-5, atol=1e-6)
        assert pm(x[:, 0]).shape == (7, m.config.hidden_size)  # any leading shape
    ids = _prefix(4, seed=5)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=0.0)
    native = TinyARVideoLM.from_hf(m)
    ref_dense = native.decode(ids, 3 * N, keep_logits=True)
    ref = native.decode(ids, 3 * N, replay=cfg, keep_logits=True)
    dense_hf, _ = generate_video(m, ids, 3 * N)
    pack_mlps(native, batch_hint=4)
    pack_mlps(m, batch_hint=4)
    assert isinstance(native.model.layers[1].mlp, PackedMLP)
    assert isinstance(m.model.layers[1].mlp, PackedMLP)
    assert set(TinyARVideoLM.from_hf(m).state_dict()) == set(native.state_dict())  # same keys
    out_dense = native.decode(ids, 3 * N, keep_logits=True)
    out = native.decode(ids, 3 * N, replay=cfg, keep_logits=True)
    assert torch.equal(out_dense.tokens, ref_dense.tokens)
    torch.testing.assert_close(out_dense.logits, ref_dense.logits, rtol=1e-4, atol=1e-5)
    assert torch.equal(out.tokens, ref.tokens)
    assert out.state.stats.rows_replayed == ref.state.stats.rows_replayed
    assert sum(ref.state.stats.rows_replayed) > 0
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-4, atol=1e-5)
    with enable_fastcar(m, cfg) as h:
        hf_tokens, _ = generate_video(m, ids, 3 * N, cache_implementation="static")
        assert h.stats.rows_replayed == ref.state.stats.rows_replayed
    assert torch.equal(hf_tokens, ref.tokens)
    assert torch.equal(generate_video(m, ids, 3 * N)[0], dense_hf)


def _state_in_frame_2(b=4, d=6, heads=2, head_dim=4, tau=0.0, **kw):
    """A ReplayState at a decode step of frame 2 with seeded ring buffers, plus a (q, keys) pair."""
    from iclr26.fastcar import ReplayState

    st = ReplayState(ReplayConfig(FrameLayout(N, P), thresholds=tau, **kw), 1)
    g = torch.Generator().manual_seed(0)
    st.begin_step(0, P + 2 * N)
    st.begin_step(P + 2 * N + 1, 1)  # frame 2, slot 1
    x = torch.randn(b, 1, d, generator=g)
    st._ensure_buffers(0, b, d, x)
    st.out_buf[0].normal_(generator=g)
    q = torch.randn(b, heads, head_dim, generator=g)
    keys = torch.randn(b, heads, P + 3 * N, head_dim, generator=g)
    return st, x, q, keys


@pytest.mark.parametrize("max_chain", [None, 2])
def test_replay_decision_is_elementwise_with_nan_and_ties(max_chain):
    # the step reads one max() to the host to skip the elementwise test when no row can replay;
    # a NaN score (max propagates it) and a score equal to tau must still decide row by row
    st, x, _q, _k = _state_in_frame_2(tau=0.0, max_chain=max_chain)
    pred = st.out_buf[0][:, 1].clone()
    st.pending[0] = torch.tensor([math.nan, 5.0, 0.0, 0.5])
    calls = []

    def inner(v):
        calls.append(v.shape[0])
        return v * 2.0

    y = st.mlp_forward(0, inner, x)
    assert calls == [2]  # rows 0 (NaN) and 2 (score == tau) run the MLP
    assert st.stats.rows_replayed == [2]
    assert st.stats.rows_computed == [2]
    assert torch.equal(y[[1, 3], 0], pred[[1, 3]])
    assert torch.equal(y[[0, 2], 0], x[[0, 2], 0] * 2.0)
    assert torch.equal(st.out_buf[0][:, 1], y[:, 0])
    if max_chain is not None:
        assert st.chain[0][:, 1].tolist() == [0, 1, 0, 1]
    # no score above tau: every row runs the MLP, the buffer takes its output
    st.begin_step(P + 2 * N + 2, 1)
    st.pending[0] = torch.tensor([-1.0, -2.0, 0.0, -math.inf])
    calls.clear()
    y = st.mlp_forward(0, inner, x)
    assert calls == [4]
    assert st.stats.rows_replayed == [2]
    assert torch.equal(y, x * 2.0)
    assert torch.equal(st.out_buf[0][:, 2], y[:, 0])


@pytest.mark.parametrize("padding", [None, {1: 3, 2: 3}])
def test_mlp_time_in_decode_times_every_decode_call_by_its_rows(padding, make_llama):
    from iclr26.fastcar import mlp_time_in_decode

    nat = TinyARVideoLM.from_hf(make_llama())
    mlps = [layer.mlp for layer in nat.model.layers]
    ids = _prefix(3)
    cfg = ReplayConfig(FrameLayout(N, P), thresholds=0.0, row_padding=padding)
    table = mlp_time_in_decode(nat, ids, 4 * N, cfg)
    assert [layer.mlp for layer in nat.model.layers] == mlps  # the MLPs are restored
    st = nat.decode(ids, 4 * N, replay=ReplayConfig(FrameLayout(N, P), thresholds=0.0,
                                                    row_padding=padding)).state.stats  # fmt: skip
    assert 0 < sum(st.rows_replayed) < sum(st.rows_total)
    # every decode-step call is timed once, under the number of rows it ran on
    assert sum(r["rows"] * r["calls"] for r in table) == sum(st.rows_computed) + sum(st.rows_padded)
    full = [r for r in table if r["rows"] == 3]
    assert full[0]["cost_vs_full"] == 1.0
    assert full[0]["calls"] >= N * len(mlps)  # frame 0 runs every row
    assert len({r["mlp_time_saved"] for r in table}) == 1
    assert table[0]["mlp_time_saved"] < 1.0
