import numpy as np
import pytest
import torch
import torch.nn.functional as F

from iclr26.lifrseg.data import AnytimeSegDataset, ShapesWorld, make_sequence
from iclr26.lifrseg.events import EventStream
from iclr26.lifrseg.lifrseg import LiFRSeg, LiFRSegConfig
from iclr26.lifrseg.losses import ohem_cross_entropy
from iclr26.lifrseg.metrics import confusion_matrix, mean_iou
from iclr26.lifrseg.models import MemoryBank, Segmenter, TemporalMemoryAttention
from iclr26.lifrseg.splat import softmax_splat
from iclr26.lifrseg.train import TrainConfig, fit_lifrseg, load_lifrseg, save_lifrseg


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    m = LiFRSeg(LiFRSegConfig(**kw)).eval()
    # random init: make the memory and refine paths non-trivial so the tests can fail
    with torch.no_grad():
        if m.memory_attn is not None:
            m.memory_attn.out.weight.normal_(0, 0.2)
        for r in m.refine or []:
            r.c2.weight.normal_(0, 0.05)
    return m


def _events(seed=0, n=4000, size=64, t1=0.3):
    rng = np.random.default_rng(seed)
    return EventStream(
        rng.integers(0, size, n),
        rng.integers(0, size, n),
        np.sort(rng.random(n) * t1),
        rng.choice([-1, 1], n),
    )


def test_causality_and_anytime_identity():
    m = _model()
    img = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(0))
    ev = _events()
    t, q = 0.1, 0.15
    base = m.predict_anytime(img, ev, t, [q])[0]
    # perturb events after the query time: bit-identical output
    late = ev.t >= q
    p2 = ev.p.copy()
    p2[late] *= -1
    x2 = ev.x.copy()
    x2[late] = (x2[late] + 7) % 64
    same = m.predict_anytime(img, EventStream(x2, ev.y, ev.t, p2), t, [q])[0]
    assert torch.equal(base, same)
    # perturb events inside (t, t + δt]: the output changes
    mid = (ev.t >= t) & (ev.t < q)
    p3 = ev.p.copy()
    p3[mid] *= -1
    x3 = ev.x.copy()
    x3[mid] = (x3[mid] + 11) % 64
    diff = m.predict_anytime(img, EventStream(x3, ev.y, ev.t, p3), t, [q])[0]
    assert not torch.allclose(base, diff)
    # δt = 0 with memory off: exactly the segmenter on I_t
    zero = m.predict_anytime(img, ev, t, [t], use_memory=False)[0]
    with torch.no_grad():
        direct = m.segmenter(img[None])[0]
    torch.testing.assert_close(
        zero, direct, atol=1e-6, rtol=0
    )  # same ops; float summation order only
    assert torch.equal(zero.argmax(0), direct.argmax(0))
    with pytest.raises(ValueError, match="before the RGB frame"):
        m.predict_anytime(img, ev, t, [t - 0.01])


def test_score_map_ignores_corrupted_flow():
    g = torch.Generator().manual_seed(0)
    feat = torch.rand(1, 4, 32, 32, generator=g)
    true_flow = torch.zeros(1, 2, 32, 32)
    true_flow[:, 0, 8:16, 8:16] = 4.0  # an object moving right
    reference = softmax_splat(feat, true_flow, None, "avg")
    bad = true_flow.clone()
    bad[:, 0, 20:28, :] = 1.5  # corrupted flow on a band: it lands on the object's path
    bad[:, 1, 20:28, :] = -10.0
    score = torch.full((1, 1, 32, 32), 20.0)
    score[..., 20:28, :] = -20.0
    keep = torch.ones(32, 32, dtype=torch.bool)
    keep[20:28] = False  # the band's own pixels become holes in both
    err_soft = (softmax_splat(feat, bad, score, "soft") - reference)[..., keep].abs().mean()
    err_avg = (softmax_splat(feat, bad, None, "avg") - reference)[..., keep].abs().mean()
    assert float(err_soft) < 1e-4
    assert float(err_avg) > 100 * float(err_soft) + 0.01


def test_memory_identity_permutation_fifo():
    att = TemporalMemoryAttention(16, heads=4)
    with torch.no_grad():
        att.out.weight.normal_(0, 0.3)
    f = torch.randn(2, 16, 3, 3)
    assert torch.equal(att(f, []), f)
    mem = [torch.randn(2, 16, 3, 3) for _ in range(2)]
    a = att(f, mem)
    assert not torch.allclose(a, f)
    # token permutation invariance (no age embedding): shuffle the memory tokens spatially
    perm = torch.randperm(9)
    mem_p = [m.flatten(2)[..., perm].view(2, 16, 3, 3) for m in mem[::-1]]
    torch.testing.assert_close(att(f, mem_p), a, atol=1e-5, rtol=1e-5)
    bank = MemoryBank(3)
    for i in range(5):
        bank.write(torch.full((1, 2, 1, 1), float(i)))
    assert [float(x.flatten()[0]) for x in bank.items()] == [2.0, 3.0, 4.0]


def test_model_memory_changes_later_queries_only():
    m = _model()
    img = torch.rand(3, 64, 64)
    ev = _events(3)
    with_mem = m.predict_anytime(img, ev, 0.1, [0.12, 0.2], use_memory=True)
    no_mem = m.predict_anytime(img, ev, 0.1, [0.12, 0.2], use_memory=False)
    assert torch.equal(with_mem[0], no_mem[0])  # first query: empty memory
    assert not torch.allclose(with_mem[1], no_mem[1])


def test_ohem():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, 8, 8, generator=g)
    target = torch.randint(0, 4, (2, 8, 8), generator=g)
    torch.testing.assert_close(
        ohem_cross_entropy(logits, target, thresh=1.0), F.cross_entropy(logits, target)
    )
    ign = target.clone()
    ign[:, :4] = 255
    changed = logits.clone()
    changed[:, :, :4] = 100 * torch.randn(2, 4, 4, 8, generator=g)
    assert torch.equal(
        ohem_cross_entropy(logits, ign, thresh=1.0), ohem_cross_entropy(changed, ign, thresh=1.0)
    )
    # all confident: exactly min_kept pixels (the least confident)
    conf = torch.full((1, 4, 4, 4), -10.0)
    tgt = torch.randint(0, 4, (1, 4, 4), generator=g)
    conf.scatter_(1, tgt[:, None], 10.0)
    conf[0, :, 0, 0] += torch.tensor([0.0, 1.0, 2.0, 3.0])  # a few slightly less confident pixels
    per = F.cross_entropy(conf, tgt, reduction="none").flatten()
    k = 5
    expect = per.sort(descending=True).values[:k].mean()
    torch.testing.assert_close(ohem_cross_entropy(conf, tgt, thresh=0.7, min_kept=k), expect)


def test_miou_hand_computed():
    target = torch.tensor([[0, 0, 1, 1], [2, 2, 1, 255]])
    pred = torch.tensor([[0, 1, 1, 1], [2, 0, 1, 3]])
    cm = confusion_matrix(pred, target, 5)
    assert cm[0, 0] == 1
    assert cm[0, 1] == 1
    assert cm[2, 0] == 1
    assert int(cm.sum()) == 7
    miou, iou = mean_iou(pred, target, 5)
    # class 0: 1/(2+2-1)=1/3, class 1: 3/4, class 2: 1/2, class 3: absent in GT but... (ignored pixel) -> NaN, class 4 absent
    assert iou[0] == pytest.approx(1 / 3)
    assert iou[1] == pytest.approx(3 / 4)
    assert iou[2] == pytest.approx(1 / 2)
    assert torch.isnan(iou[3])
    assert torch.isnan(iou[4])
    assert miou == pytest.approx((1 / 3 + 3 / 4 + 1 / 2) / 3)


def test_smoke_training_reduces_loss_and_checkpoint_roundtrip(tmp_path):
    world = ShapesWorld(64, 64, 3, seed=5)
    seq = make_sequence(world, 0.25, seed=5)
    ds = AnytimeSegDataset([seq], (0.025, 0.05), max_frames=2)
    torch.manual_seed(0)
    model = LiFRSeg(LiFRSegConfig(flow_iters=2), Segmenter(4))
    losses = fit_lifrseg(model, ds, TrainConfig(steps=25, batch_size=2, lr=3e-3, seed=0))
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    path = tmp_path / "m.safetensors"
    save_lifrseg(model, path)
    back = load_lifrseg(path)
    b = ds[0]
    with torch.no_grad():
        a = model(b["image"][None], b["ev_past"][None], b["ev_query"][:1])["logits"]
        c = back(b["image"][None], b["ev_past"][None], b["ev_query"][:1])["logits"]
    torch.testing.assert_close(a, c)
    # train_segmenter=False: the segmenter (weights and BatchNorm statistics) stays as it was
    before = {k: v.clone() for k, v in model.segmenter.state_dict().items()}
    refine = model.refine[0].c2.weight.clone()
    fit_lifrseg(model, ds, TrainConfig(steps=2, batch_size=2, seed=1), train_segmenter=False)
    after = model.segmenter.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not torch.equal(refine, model.refine[0].c2.weight)
    assert all(p.requires_grad for p in model.parameters())


def test_shipped_flow_weights_load_and_beat_zero_flow():
    """The shipped E-RAFT-lite (``pretrain_flow()`` defaults) loads, is small, and its flow is
    closer to the analytic flow than zero flow on a scene outside its pretraining split."""
    from iclr26.lifrseg.data import AnytimeSegDataset, collate_anytime, make_split
    from iclr26.lifrseg.losses import flow_epe
    from iclr26.lifrseg.train import (
        FLOW_PRETRAIN_DEFAULTS,
        load_pretrained_flow,
        pretrained_flow_path,
    )

    path = pretrained_flow_path()
    assert path.is_file()
    assert path.stat().st_size < 2 * 2**20
    import inspect

    from iclr26.lifrseg.train import pretrain_flow

    params = inspect.signature(pretrain_flow).parameters  # the defaults are the shipped run
    for k, v in FLOW_PRETRAIN_DEFAULTS.items():
        assert (list(params[k].default) if k == "deltas_s" else params[k].default) == v
    net, meta = load_pretrained_flow()
    assert {k: meta[k] for k in FLOW_PRETRAIN_DEFAULTS} == FLOW_PRETRAIN_DEFAULTS
    ds = AnytimeSegDataset(make_split(1, seed=10_000, duration_s=0.4), (0.05, 0.1))
    b = collate_anytime([ds[i] for i in range(len(ds))])
    with torch.no_grad():
        out = net(b["ev_past"].repeat_interleave(2, 0), b["ev_query"].flatten(0, 1))["flow"]
    gt = b["flow"].flatten(0, 1)
    assert float(flow_epe(out, gt)) < float(flow_epe(torch.zeros_like(gt), gt))


def test_flow_last_iteration_only_in_eval_is_the_same_flow():
    """RAFT's test mode: upsampling only the last iteration gives the same final flow."""
    from iclr26.lifrseg.models import ERaftLite

    torch.manual_seed(0)
    net = ERaftLite(5).eval()
    p, q = torch.randn(2, 5, 32, 32), torch.randn(2, 5, 32, 32)
    with torch.no_grad():
        full, last = net(p, q), net(p, q, all_iterations=False)
    assert len(full["flows"]) == net.iters
    assert len(last["flows"]) == 1
    torch.testing.assert_close(last["flow"], full["flow"])
    torch.testing.assert_close(last["features"], full["features"])
    m = _model()
    img = torch.rand(1, 3, 64, 64)
    ev = torch.randn(1, 5, 64, 64)
    with torch.no_grad():
        assert m(img, ev, ev)["flows"].shape[0] == 1
        assert m.train()(img, ev, ev)["flows"].shape[0] == m.config.flow_iters


def test_adamw_poly_equals_torch_adamw_with_lambda_lr():
    """The written-out AdamW + warm-up/poly schedule gives the same parameters as
    ``torch.optim.AdamW`` with ``LambdaLR`` (bit for bit on CPU), two groups, a frozen tensor."""
    from iclr26.lifrseg.train import AdamWPoly

    g = torch.Generator().manual_seed(0)
    init = [
        torch.randn(5, 3, generator=g),
        torch.randn(7, generator=g),
        torch.randn(2, generator=g),
    ]
    ours = [p.clone().requires_grad_(True) for p in init]
    ref = [p.clone().requires_grad_(True) for p in init]
    steps, lrs = 12, (1e-3, 1e-4)
    opt = AdamWPoly(
        [{"params": ours[:1], "lr": lrs[0]}, {"params": ours[1:], "lr": lrs[1]}],
        weight_decay=5e-3, steps=steps, warmup_frac=0.25,
    )  # fmt: skip
    topt = torch.optim.AdamW(
        [{"params": ref[:1], "lr": lrs[0]}, {"params": ref[1:], "lr": lrs[1]}], weight_decay=5e-3
    )
    sched = torch.optim.lr_scheduler.LambdaLR(topt, opt.factor)
    for t in range(steps):
        for ps in (ours, ref):
            loss = sum(((p - 0.1 * t) ** 2).sum() * (i + 1) for i, p in enumerate(ps[:2]))
            loss.backward()
        opt.step()
        topt.step()
        sched.step()
        opt.zero_grad()
        topt.zero_grad()
    for a, b in zip(ours, ref, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(ours[2], init[2])  # no gradient: untouched (as torch)
    assert opt.factor(0) == pytest.approx(1 / 3)
    assert opt.factor(steps) == 0.0


def test_frame_encoding_reused_across_queries_gives_the_same_outputs():
    """encode_frame once per frame, then every query with frame=: the same logits, flow and
    score as recomputing the frame's features and the past grid's flow features per query,
    for feature and image propagation, with the memory written along the chain."""
    m = _model()
    for p in m.parameters():  # non-trivial RefineNet / memory outputs
        p.data.add_(0.05 * torch.randn_like(p))
    torch.manual_seed(1)
    img, past = torch.rand(2, 3, 64, 64), torch.randn(2, 5, 64, 64)
    queries = [torch.randn(2, 5, 64, 64) for _ in range(3)]
    queries[1][1] = 0  # an empty window: the anytime identity must survive the cache
    for variant in (m, m.variant(propagate="image", use_memory=False)):
        with torch.no_grad():
            frame = variant.encode_frame(img, past)
            assert (frame.features is None) == (variant.config.propagate == "image")
            mem_a, mem_b = MemoryBank(4), MemoryBank(4)
            for q in queries:
                a = variant(img, past, q, mem_a)
                b = variant(img, past, q, mem_b, frame=frame)
                for k in ("logits", "flow", "score"):
                    torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # predict_anytime uses the cache; the identity at δt = 0 holds
        seg = m.segmenter(img[:1])[0]
        ev = EventStream([3, 5], [4, 6], [0.01, 0.02], [1, -1], height=64, width=64)
        out = m.predict_anytime(img[0], ev, 0.05, [0.05])[0]
    torch.testing.assert_close(out, seg)


def test_flow_past_features_and_merged_gru_gates_match_the_formula():
    """ERaftLite with past_features=encode(ev_past) equals the uncached forward; the ConvGRU
    (update and reset gates in one convolution, the context's share computed once) equals the
    written-out RAFT ConvGRU z = σ(W_z[h, x]), r = σ(W_r[h, x]), q = tanh(W_q[r h, x]),
    h' = (1 − z) h + z q."""
    from iclr26.lifrseg.models import ERaftLite

    torch.manual_seed(0)
    net = ERaftLite(5).eval()
    p, q = torch.randn(2, 5, 32, 32), torch.randn(2, 5, 32, 32)
    with torch.no_grad():
        a = net(p, q, all_iterations=False)
        b = net(p, q, all_iterations=False, past_features=net.encode(p))
    torch.testing.assert_close(b["flow"], a["flow"], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(b["features"], a["features"], rtol=1e-4, atol=1e-5)
    gru = net.gru
    h, x = torch.randn(2, 32, 8, 8), torch.randn(2, 96, 8, 8)
    hx = torch.cat([h, x], 1)
    z = torch.sigmoid(F.conv2d(hx, gru.z.weight, gru.z.bias, padding=1))
    r = torch.sigmoid(F.conv2d(hx, gru.r.weight, gru.r.bias, padding=1))
    qq = torch.tanh(F.conv2d(torch.cat([r * h, x], 1), gru.q.weight, gru.q.bias, padding=1))
    ours = gru(h, x[:, :64], gru.context(x[:, 64:]))  # x = [motion (64), context (32)]
    torch.testing.assert_close(ours, (1 - z) * h + z * qq, rtol=1e-5, atol=1e-6)


def test_flow_first_iteration_motion_encoding_is_the_zero_flow_convolution():
    """The first GRU iteration starts from zero flow; its flow encoding (computed as relu(bias),
    without the 7x7 convolution) equals enc_flow applied to a zero field, in values and in the
    gradient that reaches enc_flow's bias."""
    from iclr26.lifrseg.models import ERaftLite

    torch.manual_seed(1)
    net = ERaftLite(5, iters=2)
    with torch.no_grad():
        net.enc_flow[0].bias.normal_()  # both signs, so the ReLU matters
    seen = []
    net.enc_out.register_forward_hook(lambda mod, inp, out: seen.append(inp[0]))
    p, q = torch.randn(2, 5, 32, 32), torch.randn(2, 5, 32, 32)
    net(p, q)["flow"].sum().backward()
    fl0 = seen[0][:, 64:96]  # enc_out's input is [corr encoding (64), flow encoding (32)]
    torch.testing.assert_close(fl0, net.enc_flow(torch.zeros(2, 2, 8, 8)), rtol=0, atol=0)
    g_short = net.enc_flow[0].bias.grad.clone()
    # the same loss with the convolution applied literally at the first iteration
    net.zero_grad()
    first = {"done": False}

    def literal(mod, inp):
        if first["done"]:
            return None
        first["done"] = True
        return (torch.cat([inp[0][:, :64], net.enc_flow(torch.zeros(2, 2, 8, 8))], 1),)

    net.enc_out.register_forward_pre_hook(literal)
    net(p, q)["flow"].sum().backward()
    torch.testing.assert_close(g_short, net.enc_flow[0].bias.grad, rtol=1e-5, atol=1e-6)


def test_flow_cache_equals_the_flow_network_and_refuses_changed_weights():
    """FlowCache: the stored flow and features equal a direct eval-mode call, a second call
    computes nothing, a query through the cache gives the same logits, a deep copy with equal
    weights may use it, changed weights or a training flow network are refused."""
    import copy

    from iclr26.lifrseg.lifrseg import FlowCache

    m = _model()
    torch.manual_seed(2)
    img, past = torch.rand(3, 3, 64, 64), torch.randn(3, 5, 64, 64)
    q = torch.randn(3, 5, 64, 64)
    q[2] = 0  # an empty window: not propagated, with or without the cache
    cache = FlowCache(m.flownet)
    with torch.no_grad():
        ref = m.flownet(past, q, all_iterations=False)
        got = cache(past[:2], q[:2])  # two computed here, the third in the next call
        assert (cache.misses, cache.hits) == (2, 0)
        got = cache(past, q)
        assert (cache.misses, cache.hits) == (3, 2)
        assert len(cache) == 3
        torch.testing.assert_close(got["flow"], ref["flow"], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(got["features"], ref["features"], rtol=1e-4, atol=1e-5)
        for variant in (m, copy.deepcopy(m), m.variant(propagate="logits", use_memory=False)):
            mem_a, mem_b = MemoryBank(4), MemoryBank(4)
            for _ in range(2):  # memory written along the chain
                a = variant(img, past, q, mem_a)
                b = variant(img, past, q, mem_b, flow_cache=cache)
                torch.testing.assert_close(b["logits"], a["logits"], rtol=1e-4, atol=1e-5)
                torch.testing.assert_close(b["score"], a["score"], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="fixed flow network"):
        m(img, past, q, flow_cache=cache)  # grad enabled, flow parameters require grad
    other = copy.deepcopy(m)
    with torch.no_grad():
        other.flownet.flow_head[-1].bias.add_(0.1)
        with pytest.raises(ValueError, match="other flow-network weights"):
            other(img, past, q, flow_cache=cache)
        m.flownet.flow_head[-1].bias.add_(0.1)  # in place on the snapshotted network itself
        with pytest.raises(ValueError, match="other flow-network weights"):
            m(img, past, q, flow_cache=cache)


def test_fit_lifrseg_with_flow_cache_trains_as_without():
    """The end-to-end stage with a FlowCache (frozen flow) and the frame's features shared by
    its queries follows the same losses as the uncached stage up to float rounding."""
    from iclr26.lifrseg.data import make_split
    from iclr26.lifrseg.lifrseg import FlowCache

    ds = AnytimeSegDataset(make_split(1, seed=3, duration_s=0.35), (0.01, 0.05))
    runs = []
    for cached in (False, True):
        model = _model()
        cache = FlowCache(model.flownet) if cached else None
        cfg = TrainConfig(steps=3, batch_size=2, lr=1e-3, seed=0)
        runs.append(fit_lifrseg(model, ds, cfg, flow_cache=cache))
        if cached:
            assert cache.misses <= 2 * len(ds)
            assert cache.hits > 0
    np.testing.assert_allclose(runs[1], runs[0], rtol=2e-3)
    m = _model()
    with pytest.raises(ValueError, match="freeze_flow"):
        fit_lifrseg(m, ds, TrainConfig(steps=1), freeze_flow=False, flow_cache=FlowCache(m.flownet))


def test_traced_inference_path_equals_the_eager_path():
    """The optimised path (frame encoding; flow, ScoreNet, splatting and RefineNet; decoder, as
    traced graphs) gives the eager path's logits, flow and score along a chain of queries with
    memory, with an empty query window in the batch (anytime identity), shares the model's
    parameters (a weight change after tracing is seen), and predict_anytime gives the same
    either way."""
    m = _model()
    for p in m.parameters():
        p.data.add_(0.05 * torch.randn_like(p))
    torch.manual_seed(3)
    img, past = torch.rand(2, 3, 64, 64), torch.randn(2, 5, 64, 64)
    queries = [torch.randn(2, 5, 64, 64) for _ in range(3)]
    queries[0][0] = 0  # an empty first window (memory still empty): the segmenter's output

    def chain(traced):
        frame = m.encode_frame(img, past, traced=traced)
        mem = MemoryBank(4)
        return [m(img, past, q, mem, frame=frame, traced=traced) for q in queries]

    with torch.inference_mode():
        for _ in range(2):  # before and after a weight change made after tracing
            ref, got = chain(False), chain(True)
            for a, b in zip(ref, got, strict=True):
                for k in ("logits", "flow", "score"):
                    torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5)
            seg = m.segmenter(img[:1])
            torch.testing.assert_close(got[0]["logits"][:1], seg, rtol=1e-4, atol=1e-5)
            m.flownet.flow_head[-1].bias.add_(0.5)
            m.scorenet.net[0].weight.mul_(1.5)
            m.refine[1].c2.weight.add_(0.1)
        with pytest.raises(ValueError, match="finite"):
            m(img, past, queries[0] * float("nan"), traced=True)
    ev = _events()
    a = m.predict_anytime(img[0], ev, 0.1, [0.1, 0.12, 0.2], traced=False)
    b = m.predict_anytime(img[0], ev, 0.1, [0.1, 0.12, 0.2])
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-5)


def _eraft_reference(net, ev_past, ev_query, iters):
    """E-RAFT-lite written out the plain way, module by module: both encoders run separately
    (the feature encoder on both grids), the ConvGRU on [h, motion, context] with three separate
    convolutions, the flow and mask heads as their own Sequentials, RAFT's lookup by grid_sample
    at every pyramid level."""
    f1, f2 = net.fnet.net(ev_past), net.fnet.net(ev_query)
    n, c, h, w = f1.shape
    corr = torch.einsum("nchw,ncij->nhwij", f1, f2).reshape(n * h * w, 1, h, w) / c**0.5
    pyramid = [corr] + [corr := F.avg_pool2d(corr, 2) for _ in range(net.levels - 1)]
    hc = net.cnet.net(ev_query)
    hid, ctx = torch.tanh(hc[:, : net.hidden]), torch.relu(hc[:, net.hidden :])
    ys, xs = torch.meshgrid(torch.arange(h * 1.0), torch.arange(w * 1.0), indexing="ij")
    coords0 = torch.stack([xs, ys])[None].expand(n, -1, -1, -1)
    r = torch.arange(-net.radius, net.radius + 1.0)
    dy, dx = torch.meshgrid(r, r, indexing="ij")
    flow, flows, g = torch.zeros(n, 2, h, w), [], net.gru
    for _ in range(iters):
        centre = (coords0 + flow).permute(0, 2, 3, 1).reshape(-1, 1, 1, 2)
        looked = []
        for lvl, cp in enumerate(pyramid):
            pts = centre / 2**lvl + torch.stack([dx, dy], -1)[None]
            hl, wl = cp.shape[-2:]
            grid = torch.stack([2 * pts[..., 0] / (wl - 1) - 1, 2 * pts[..., 1] / (hl - 1) - 1], -1)
            looked.append(F.grid_sample(cp, grid, align_corners=True).view(n, h, w, -1))
        cor = net.enc_corr(torch.cat(looked, -1).permute(0, 3, 1, 2))
        motion = torch.cat([net.enc_out(torch.cat([cor, net.enc_flow(flow)], 1)), flow], 1)
        x = torch.cat([motion, ctx], 1)
        z = torch.sigmoid(g.z(torch.cat([hid, x], 1)))
        rr = torch.sigmoid(g.r(torch.cat([hid, x], 1)))
        q = torch.tanh(g.q(torch.cat([rr * hid, x], 1)))
        hid = (1 - z) * hid + z * q
        flow = flow + net.flow_head(hid)
        flows.append(net._upsample(flow, 0.25 * net.mask_head(hid)))
    return flows, torch.cat([f2, hid, flow], 1)


def test_eraft_lite_equals_the_plain_reference_in_values_and_gradients():
    """The fused E-RAFT-lite (both encoders of the query grid in one pass, the context's share of
    the GRU computed once, the two heads' first convolutions stacked) computes the same flows,
    features and parameter gradients as the plain module-by-module network."""
    from iclr26.lifrseg.models import ERaftLite

    torch.manual_seed(3)
    net = ERaftLite(5, iters=3)
    with torch.no_grad():
        for p in net.parameters():  # non-trivial values everywhere (biases, norms included)
            p.add_(0.1 * torch.randn_like(p))
    p, q = torch.randn(2, 5, 32, 32), torch.randn(2, 5, 32, 32)
    out = net(p, q)
    ref_flows, ref_feat = _eraft_reference(net, p, q, 3)
    for a, b in zip(out["flows"], ref_flows, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["features"], ref_feat, rtol=1e-4, atol=1e-5)
    loss = sum((f**2).mean() for f in out["flows"]) + out["features"].square().mean()
    ours = torch.autograd.grad(loss, list(net.parameters()), allow_unused=True)
    loss_ref = sum((f**2).mean() for f in ref_flows) + ref_feat.square().mean()
    theirs = torch.autograd.grad(loss_ref, list(net.parameters()), allow_unused=True)
    for (name, _), a, b in zip(net.named_parameters(), ours, theirs, strict=True):
        assert (a is None) == (b is None), name
        if a is not None:
            # float rounding relative to the tensor's scale (the sums run in another order)
            tol = 1e-5 * float(b.abs().max())
            torch.testing.assert_close(a, b, rtol=1e-3, atol=tol, msg=name)
    with torch.no_grad():
        last = net.eval()(p, q, all_iterations=False)
    torch.testing.assert_close(last["flow"], ref_flows[-1], rtol=1e-4, atol=1e-5)
