"""Spec tests 4 and 8: autograd input gradients vs finite differences for every surrogate; the
TabPFN adapter never reaches the network; the PFN checkpoint loader and its calibration."""

import importlib
import math
import socket

import pytest
import torch

from iclr26.git_bo import (
    CheckpointMissing,
    GPSurrogate,
    InContextPFN,
    PFNSurrogate,
    RFFSurrogate,
    TabPFNSurrogate,
    load_pfn,
    sample_prior_batch,
    save_pfn,
)


def _data(n=25, D=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, D, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + X[:, 1] ** 2 - 0.5 * X[:, 2]
    Xq = 0.1 + 0.8 * torch.rand(5, D, generator=g, dtype=torch.float64)
    return X, y, Xq


def _fd_check(sur, Xq, h, rtol, atol):
    Xq = Xq.clone().requires_grad_(True)
    mean, var = sur.posterior(Xq)
    assert mean.shape == (5,)
    assert var.shape == (5,)
    assert bool((var > 0).all())
    (G,) = torch.autograd.grad(mean.sum(), Xq)
    fd = torch.zeros_like(G)
    with torch.no_grad():
        for d in range(Xq.shape[1]):
            e = torch.zeros_like(Xq)
            e[:, d] = h
            fd[:, d] = (sur.posterior(Xq + e)[0] - sur.posterior(Xq - e)[0]) / (2 * h)
    torch.testing.assert_close(G, fd, rtol=rtol, atol=atol)
    return G


def test_rff_gradients_match_finite_differences():
    X, y, Xq = _data()
    sur = RFFSurrogate(num_features=256, seed=1)
    sur.condition(X, y)
    G = _fd_check(sur, Xq, 1e-6, 1e-4, 1e-7)
    assert float(G.abs().max()) > 1e-3


def test_gp_gradients_match_finite_differences():
    X, y, Xq = _data()
    sur = GPSurrogate(maxiter=30)
    sur.condition(X, y)
    _fd_check(sur, Xq, 1e-6, 1e-4, 1e-7)
    # the posterior interpolates the data (small noise) and is in y's units
    with torch.no_grad():
        m, _ = sur.posterior(X[:5])
    assert float((m - y[:5]).abs().max()) < 0.1 * float(y.std())


@pytest.mark.parametrize("shipped", [False, True])
def test_pfn_gradients_match_finite_differences(shipped):
    X, y, Xq = _data()
    model = None if shipped else InContextPFN(max_dim=16, d_model=32, layers=2, ff=64)
    sur = PFNSurrogate(model=model)
    sur.condition(X, y)
    # float32 network: a larger step and tolerance
    _fd_check(sur, Xq, 1e-2, 5e-2, 5e-3 * float(y.std()))


def test_pfn_queries_do_not_interact():
    X, y, Xq = _data()
    sur = PFNSurrogate()
    sur.condition(X, y)
    m_all, v_all = sur.posterior(Xq)
    m_one, v_one = sur.posterior(Xq[2:3])
    assert torch.allclose(m_all[2:3], m_one, atol=1e-5)
    assert torch.allclose(v_all[2:3], v_one, atol=1e-5)


def test_shipped_pfn_is_calibrated_on_held_out_prior_samples():
    model = load_pfn()
    g = torch.Generator().manual_seed(12345)  # not the training seed
    nll_pfn, nll_prior, inside, total = 0.0, 0.0, 0, 0
    for _ in range(8):
        X, y, _ = sample_prior_batch(8, 80, max_dim=model.max_dim, generator=g, dims=(2, 64))
        n = 50
        mu, sd = y[:, :n].mean(1, keepdim=True), y[:, :n].std(1, keepdim=True)
        ys = (y - mu) / sd
        with torch.no_grad():
            m, v = model.moments(model(X[:, :n], ys[:, :n], X[:, n:]))
        t = ys[:, n:]
        nll_pfn += float((0.5 * torch.log(2 * math.pi * v) + 0.5 * (t - m) ** 2 / v).sum())
        nll_prior += float((0.5 * math.log(2 * math.pi) + 0.5 * t**2).sum())
        z = (t - m).abs() / v.sqrt()
        inside += int((z < 1.645).sum())
        total += t.numel()
    # its 90% intervals hold 90% of held-out points (calibrated)...
    assert 0.85 < inside / total < 0.95
    # ...and it uses its context: sharper than the context-free N(0, 1) (0.82x its NLL when
    # shipped; the 0.1.0-0.2.0 network, trained 2,500 steps, was no sharper: 1.001x)
    assert nll_pfn < 0.9 * nll_prior


def test_pfn_checkpoint_roundtrip_and_rejects(tmp_path):
    model = InContextPFN(max_dim=8, d_model=16, heads=2, layers=1, ff=32)
    path = save_pfn(model, tmp_path / "m.safetensors", note="test")
    back = load_pfn(path)
    for (k, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    with pytest.raises(FileNotFoundError):
        load_pfn(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a safetensors PFN"):
        load_pfn(junk)
    from safetensors.torch import save_file

    other = tmp_path / "other.safetensors"
    save_file({"w": torch.zeros(2)}, str(other))
    with pytest.raises(ValueError, match="not a PFN checkpoint"):
        load_pfn(other)
    sur = PFNSurrogate(model=model)
    with pytest.raises(ValueError, match=r"max_dim|features"):
        sur.condition(torch.rand(5, 9, dtype=torch.float64), torch.rand(5, dtype=torch.float64))


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    try:  # the hub client, if some dependency installed it, must not be asked either
        hub = importlib.import_module("huggingface_hub")
        monkeypatch.setattr(hub, "hf_hub_download", refuse)
    except ImportError:
        pass


def test_tabpfn_missing_checkpoint_is_clear_and_offline(tmp_path, monkeypatch, no_network):
    monkeypatch.delenv("TABPFN_MODEL_CACHE_DIR", raising=False)
    with pytest.raises(CheckpointMissing, match=r"tabpfn-v2-regressor\.ckpt"):
        TabPFNSurrogate()
    with pytest.raises(CheckpointMissing, match="does not exist"):
        TabPFNSurrogate(tmp_path / "nope.ckpt")
    monkeypatch.setenv("TABPFN_MODEL_CACHE_DIR", str(tmp_path))
    with pytest.raises(CheckpointMissing, match="never downloads"):
        TabPFNSurrogate()
    bad = tmp_path / "bad.ckpt"
    bad.write_text("hello")
    with pytest.raises(ValueError, match="not a torch checkpoint"):
        TabPFNSurrogate(bad)
    assert issubclass(CheckpointMissing, OSError)  # the CLI prints it as one line


@pytest.mark.skipif(
    "GITBO_TABPFN_CKPT" not in __import__("os").environ, reason="needs a local TabPFN checkpoint"
)
def test_tabpfn_gradients_match_finite_differences(no_network):
    import os

    X, y, Xq = _data()
    sur = TabPFNSurrogate(os.environ["GITBO_TABPFN_CKPT"])
    sur.condition(X, y)
    _fd_check(sur, Xq, 1e-2, 5e-2, 5e-3)


def test_tabpfn_adapter_with_a_checkpoint_never_opens_a_socket(tmp_path, monkeypatch, no_network):
    # a file that passes the checkpoint check: construction and conditioning stay offline (without
    # the `tabpfn` package conditioning is a clear MissingDependencyError; with it, junk weights
    # fail to load, offline); the refusal above would surface as an AssertionError
    import os

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    ckpt = tmp_path / "tabpfn-v2-regressor.ckpt"
    torch.save({"state_dict": {}}, ckpt)
    sur = TabPFNSurrogate(ckpt)
    X, y, _ = _data()
    with pytest.raises(Exception) as info:  # noqa: PT011 - any error but the socket's
        sur.condition(X, y)
    assert not isinstance(info.value, AssertionError), info.value
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def _reference_logits(model, x_ctx, y_ctx, x_q):
    # the network written with torch's own MultiheadAttention over (context + queries) tokens
    n = x_ctx.shape[1]
    h = torch.cat([model._encode(x_ctx) + model.y_enc(y_ctx.unsqueeze(-1)), model._encode(x_q)], 1)
    for layer in model.layers:
        ctx = h[:, :n]
        a, _ = layer.attn(h, ctx, ctx, need_weights=False)
        h = layer.n1(h + a)
        h = layer.n2(h + layer.ff(h))
    return model.head(h[:, n:])


def test_pfn_context_cache_is_the_same_network():
    torch.manual_seed(0)
    model = InContextPFN(max_dim=12, d_model=16, heads=2, layers=2, ff=32, n_buckets=10,
                         kernel_features=9).eval()  # fmt: skip
    g = torch.Generator().manual_seed(1)
    xc, yc = torch.rand(2, 15, 7, generator=g), torch.randn(2, 15, generator=g)
    xq = torch.rand(2, 11, 7, generator=g)
    with torch.no_grad():
        ref = _reference_logits(model, xc, yc, xq)
        torch.testing.assert_close(model(xc, yc, xq), ref, rtol=1e-5, atol=1e-5)
        cache = model.context_cache(xc, yc)
        # queries in chunks against one cache give the logits of all queries at once
        parts = [model.forward_cached(cache, q) for q in xq.split(4, dim=1)]
        torch.testing.assert_close(torch.cat(parts, 1), ref, rtol=1e-5, atol=1e-5)


def test_pfn_surrogate_chunks_and_gradients_agree():
    X, y, Xq = _data(n=20, D=5)
    whole = PFNSurrogate(chunk=4096)
    parts = PFNSurrogate(model=whole.model, chunk=2)
    for s in (whole, parts):
        s.condition(X, y)
    Xq = Xq.float().requires_grad_(True)
    m1, v1 = whole.posterior(Xq)
    m2, v2 = parts.posterior(Xq)
    torch.testing.assert_close(m1, m2)
    torch.testing.assert_close(v1, v2)
    # one backward pass of sum(mean) = every candidate's own gradient (queries do not interact)
    (g_all,) = torch.autograd.grad(m1.sum(), Xq)
    (g_0,) = torch.autograd.grad(whole.posterior(Xq[:1])[0].sum(), Xq)
    torch.testing.assert_close(g_all[0], g_0[0], rtol=1e-5, atol=1e-6)
    assert whole.dtype == torch.float32
