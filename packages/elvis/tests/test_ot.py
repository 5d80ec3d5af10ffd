import numpy as np
import ot
import pytest
import torch

from iclr26.elvis import dustbin_transport


def _problem(seed=0, bsz=2, m=7, n=5):
    g = torch.Generator().manual_seed(seed)
    sim = torch.rand(bsz, m, n, generator=g, dtype=torch.float64) * 2 - 1
    zq = torch.rand(bsz, m, generator=g, dtype=torch.float64) * 1.6 - 0.8
    zd = torch.rand(bsz, n, generator=g, dtype=torch.float64) * 1.6 - 0.8
    return sim, zq, zd


@pytest.mark.parametrize("domain", ["log", "exp"])
def test_marginals_converge(domain):
    sim, zq, zd = _problem()
    m, n = sim.shape[1:]
    plan = dustbin_transport(
        sim, zq, zd, 0.7, temperature=5.0, n_iters=500, domain=domain, return_full=True
    )
    a = np.r_[np.full(m, 1 / (m + n)), n / (m + n)]
    b = np.r_[np.full(n, 1 / (m + n)), m / (m + n)]
    for p in plan.numpy():
        np.testing.assert_allclose(p.sum(1), a, atol=1e-4)
        np.testing.assert_allclose(p.sum(0), b, atol=1e-4)


def test_matches_pot_sinkhorn():
    sim, zq, zd = _problem(seed=3, bsz=1)
    m, n = sim.shape[1:]
    tau = 4.0
    plan = dustbin_transport(sim, zq, zd, 1.0, temperature=tau, n_iters=2000, return_full=True)[0]
    sbar = np.zeros((m + 1, n + 1))
    sbar[:m, :n], sbar[:m, n], sbar[m, :n], sbar[m, n] = sim[0], zq[0], zd[0], 1.0
    a = np.r_[np.full(m, 1 / (m + n)), n / (m + n)]
    b = np.r_[np.full(n, 1 / (m + n)), m / (m + n)]
    ref = ot.sinkhorn(a, b, -sbar, reg=1 / tau, numItermax=20000, stopThr=1e-13)
    np.testing.assert_allclose(plan.numpy(), ref, atol=1e-4)


@pytest.mark.parametrize("tau", [10.0, 30.0])
def test_log_and_exp_domains_agree_with_masks(tau):
    sim, zq, zd = (x.float() for x in _problem(seed=1, bsz=3, m=9, n=6))
    qm = torch.zeros(3, 9, dtype=torch.bool)
    dm = torch.zeros(3, 6, dtype=torch.bool)
    qm[0, 6:], dm[1, 4:] = True, True
    kw = {"temperature": tau, "n_iters": 10, "row_mask": qm, "col_mask": dm}
    p_log = dustbin_transport(sim, zq, zd, 1.0, domain="log", **kw)
    p_exp = dustbin_transport(sim, zq, zd, 1.0, domain="exp", **kw)
    np.testing.assert_allclose(p_log.numpy(), p_exp.numpy(), atol=1e-5, rtol=1e-4)
    assert (p_log[0, 6:] == 0).all()
    assert (p_log[1, :, 4:] == 0).all()


def test_padding_is_exactly_ignored():
    sim, zq, zd = _problem(seed=2, bsz=1, m=6, n=5)
    ref = dustbin_transport(sim, zq, zd, 1.0, temperature=10.0)
    pad_sim = torch.nn.functional.pad(sim, (0, 3, 0, 2), value=0.9)
    pad_zq = torch.nn.functional.pad(zq, (0, 2), value=-0.5)
    pad_zd = torch.nn.functional.pad(zd, (0, 3), value=0.3)
    qm = torch.tensor([[False] * 6 + [True] * 2])
    dm = torch.tensor([[False] * 5 + [True] * 3])
    got = dustbin_transport(
        pad_sim, pad_zq, pad_zd, 1.0, temperature=10.0, row_mask=qm, col_mask=dm
    )
    np.testing.assert_allclose(got[0, :6, :5].numpy(), ref[0].numpy(), atol=1e-10)


def test_gradients_are_finite_with_padding():
    sim, zq, zd = (x.float() for x in _problem(seed=4, bsz=2, m=5, n=4))
    sim.requires_grad_(True)
    qm = torch.tensor([[False] * 3 + [True] * 2, [False] * 5])
    out = dustbin_transport(sim, zq, zd, 1.0, temperature=10.0, row_mask=qm).sum()
    out.backward()
    assert torch.isfinite(sim.grad).all()
