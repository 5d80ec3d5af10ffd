import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.elvis import (
    OFFICIAL_KEY_MAP,
    ELViS,
    LocalFeatures,
    dustbin_transport,
    extract_sift,
    load_image,
    load_official_checkpoint,
    stereo_pair,
    sum_max_similarity,
)


def _model(in_dim=16, **kw):
    return ELViS(
        in_dim, model_dim=in_dim, temperature=kw.pop("temperature", 10.0), **kw
    ).init_untrained_(gain=0.7)


def _rand(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), i=st.integers(0, 5))
def test_raising_a_gain_never_increases_its_best_mass(seed, i):
    g = torch.Generator().manual_seed(seed)
    sim = torch.rand(1, 6, 5, generator=g, dtype=torch.float64) * 2 - 1
    zq = torch.zeros(1, 6, dtype=torch.float64)
    zd = torch.zeros(1, 5, dtype=torch.float64)
    best = []
    for z in np.linspace(-0.95, 0.95, 20):
        zq[0, i] = z
        plan = dustbin_transport(sim, zq, zd, 1.0, temperature=10.0, n_iters=50)
        best.append(float(plan[0, i].max()))
    assert all(b1 <= b0 + 1e-9 for b0, b1 in itertools.pairwise(best))
    smax = float(sim[0, i].max())
    above = [b for z, b in zip(np.linspace(-0.95, 0.95, 20), best, strict=True) if z > smax + 0.1]
    if len(above) >= 2:
        assert above[-1] < above[0]


def test_burstiness_one_to_one_pressure():
    x = _rand((30, 16), 0)
    model = _model()
    q = LocalFeatures(x.numpy())
    scores, naive = [], []
    for k in range(1, 21):
        y = torch.cat([x, x[:1].repeat(k - 1, 1)]) if k > 1 else x
        d = LocalFeatures(y.numpy())
        scores.append(float(model.score([q], [d])[0]))
        naive.append(float(sum_max_similarity([q], [d], threshold=0.99)[0]))
    assert scores[-1] - scores[0] <= 2.0  # sub-linear: at most ~2 votes more
    assert naive[-1] - naive[0] == pytest.approx(19.0)  # naive counting grows linearly


def test_permutation_padding_and_scale_invariance():
    model = _model()
    q, d = _rand((1, 12, 16), 1), _rand((1, 9, 16), 2)
    base = model(q, d)
    perm = model(q[:, torch.randperm(12)], d[:, torch.randperm(9)])
    torch.testing.assert_close(perm, base, atol=1e-5, rtol=0)
    qp = torch.cat([q, 100 * _rand((1, 4, 16), 3)], 1)
    qm = torch.tensor([[False] * 12 + [True] * 4])
    torch.testing.assert_close(model(qp, d, qm, None), base, atol=1e-5, rtol=0)
    torch.testing.assert_close(model(3.0 * q, 0.5 * d), base, atol=1e-4, rtol=0)


@torch.no_grad()
def test_symmetry_at_convergence_only_approximate_at_ten_iterations():
    q, d = _rand((1, 12, 16), 4), _rand((1, 9, 16), 5)
    d[:, :5] = q[:, :5] + 0.05 * _rand((1, 5, 16), 6)
    model = _model(n_iters=200)
    assert abs(float(model(q, d)) - float(model(d, q))) < 1e-3
    model.n_iters = 10
    assert abs(float(model(q, d)) - float(model(d, q))) < 0.05 * float(model(q, d))


def test_identity_dominance_and_the_real_stereo_pair():
    model = ELViS(128).init_untrained_(gain=0.7)
    imgs = [load_image(n, 320) for n in ("camera", "coins", "text", "brick")]
    feats = [extract_sift(im, 200) for im in imgs]
    x = feats[0]
    self_score = float(model.score([x], [x])[0])
    assert self_score > float(model.score([x] * 3, feats[1:]).max())
    left, right = (extract_sift(im, 200) for im in stereo_pair(320))
    pair = float(model.score([left], [right])[0])
    assert pair > float(model.score([left] * 4, feats).max())


def _numpy_forward(state, q, d, tau, iters):
    def ln(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w + b

    gelu = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    st_ = {k: v.double().numpy() for k, v in state.items()}

    def embed(x):
        h = ln(
            x @ st_["remap_local.0.weight"].T + st_["remap_local.0.bias"],
            st_["remap_local.1.weight"],
            st_["remap_local.1.bias"],
        )
        return h / np.linalg.norm(h, axis=1, keepdims=True)

    def gain(x):
        h = gelu(x @ st_["dust_bin_mlp.0.weight"].T + st_["dust_bin_mlp.0.bias"])
        return np.tanh(h @ st_["dust_bin_mlp.2.weight"].T + st_["dust_bin_mlp.2.bias"])[:, 0]

    def vote(r):
        h = ln(
            r[:, None] @ st_["f.0.weight"].T + st_["f.0.bias"], st_["f.1.weight"], st_["f.1.bias"]
        )
        return sig(gelu(h) @ st_["f.3.weight"].T + st_["f.3.bias"])[:, 0]

    xq, xd = embed(q), embed(d)
    m, n = len(q), len(d)
    sbar = np.zeros((m + 1, n + 1))
    sbar[:m, :n], sbar[:m, n], sbar[m, :n], sbar[m, n] = (
        xq @ xd.T,
        gain(xq),
        gain(xd),
        st_["dust_bin"],
    )
    big = tau * sbar
    la = np.log(np.r_[np.full(m, 1 / (m + n)), n / (m + n)])
    lb = np.log(np.r_[np.full(n, 1 / (m + n)), m / (m + n)])
    u, v = np.zeros(m + 1), np.zeros(n + 1)
    lse = lambda a, ax: a.max(ax) + np.log(np.exp(a - a.max(ax, keepdims=True)).sum(ax))  # noqa: E731
    for _ in range(iters):
        u = la - lse(big + v[None], 1)
        v = lb - lse(big + u[:, None], 0)
    p = np.exp(big + u[:, None] + v[None])[:m, :n] * (m + n)
    return vote(p.max(1)).sum() + vote(p.max(0)).sum()


def test_official_checkpoint_key_mapping(tmp_path):
    g = torch.Generator().manual_seed(7)
    shapes = {
        "remap_local.0.weight": (8, 24), "remap_local.0.bias": (8,), "remap_local.1.weight": (8,),
        "remap_local.1.bias": (8,), "dust_bin": (), "dust_bin_mlp.0.weight": (8, 8),
        "dust_bin_mlp.0.bias": (8,), "dust_bin_mlp.2.weight": (1, 8), "dust_bin_mlp.2.bias": (1,),
        "f.0.weight": (16, 1), "f.0.bias": (16,), "f.1.weight": (16,), "f.1.bias": (16,),
        "f.3.weight": (1, 16), "f.3.bias": (1,), "g.0.weight": (64, 1), "g.0.bias": (64,),
        "g.2.weight": (1, 64), "g.2.bias": (1,),
    }  # fmt: skip
    assert set(shapes) == set(OFFICIAL_KEY_MAP)
    state = {k: torch.randn(s, generator=g) * 0.5 for k, s in shapes.items()}
    path = tmp_path / "elvis.pt"
    torch.save({"state": state}, path)
    model = load_official_checkpoint(path, temperature=10.0, n_iters=10)
    q, d = _rand((11, 24), 8), _rand((7, 24), 9)
    got = float(model(q[None], d[None]))
    want = _numpy_forward(state, q.double().numpy(), d.double().numpy(), 10.0, 10)
    assert got == pytest.approx(want, abs=1e-4)
    with pytest.raises(ValueError, match="lacks official"):
        load_official_checkpoint({"state": {"dust_bin": torch.tensor(1.0)}})


def test_explain_reports_the_forward_score():
    model = _model()
    q, d = _rand((10, 16), 10), _rand((8, 16), 11)
    ex = model.explain(q, d)
    assert ex.plan.shape == (10, 8)
    assert ex.row_votes.shape == (10,)
    assert ex.score == pytest.approx(float(model(q[None], d[None])), abs=1e-5)
    assert ex.score == pytest.approx(ex.row_votes.sum() + ex.col_votes.sum(), abs=1e-4)


def test_bad_inputs_raise_clear_errors():
    model = _model()
    q = _rand((1, 5, 16), 0)
    with pytest.raises(ValueError, match="dims differ"):
        model(q, _rand((1, 5, 8), 1))
    with pytest.raises(ValueError, match="empty"):
        model(q, torch.zeros(1, 0, 16))
    bad = q.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model(bad, q)
    with pytest.raises(ValueError, match="q_mask must have shape"):
        model(q, q, torch.zeros(1, 4, dtype=torch.bool), None)
    with pytest.raises(ValueError, match="masks every descriptor"):
        model(q, q, torch.ones(1, 5, dtype=torch.bool), None)
    with pytest.raises(ValueError, match="in_dim"):
        model(_rand((1, 5, 8), 1), _rand((1, 5, 8), 2))
    with pytest.raises(ValueError, match="NaN"):
        LocalFeatures(np.full((3, 4), np.nan))
    with pytest.raises(ValueError, match="at least one"):
        LocalFeatures(np.zeros((0, 4)))
    with pytest.raises(ValueError, match="domain"):
        ELViS(16, domain="fft")
