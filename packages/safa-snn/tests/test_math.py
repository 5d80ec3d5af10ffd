import math

import numpy as np
import pytest
import torch
from torch import nn

from iclr26.safa_snn import (
    LIF,
    CosineClassifier,
    class_means,
    count_sops,
    energy_joules,
    subspace_project,
    teen_calibrate,
    training_energy,
    zo_gradient,
)
from iclr26.safa_snn.energy import E_AC, E_MAC, ann_twin_energy


def test_zo_gradient_unbiased_on_quadratic():
    # Spec test 4: Gaussian smoothing leaves the gradient of a quadratic unchanged.
    g = torch.Generator().manual_seed(0)
    d = 4
    M = torch.randn(d, d, generator=g, dtype=torch.float64)
    A = M @ M.T + torch.eye(d, dtype=torch.float64)
    b = torch.randn(d, generator=g, dtype=torch.float64)
    x = torch.randn(d, generator=g, dtype=torch.float64)

    def f(v):
        return 0.5 * v @ A @ v + b @ v

    true = A @ x + b
    draws = torch.stack([zo_gradient(f, x, 0.5, 1, generator=g) for _ in range(4000)])
    mean, se = draws.mean(0), draws.std(0) / math.sqrt(len(draws))
    assert torch.all((mean - true).abs() < 4 * se)
    # variance shrinks as 1/b
    v1 = draws.var(0).sum()
    v10 = torch.stack([zo_gradient(f, x, 0.5, 10, generator=g) for _ in range(1000)]).var(0).sum()
    assert 0.06 < float(v10 / v1) < 0.16


def _bases(seed=0, nb=4, d=10):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(nb, d, generator=g, dtype=torch.float64), torch.randn(
        3, d, generator=g, dtype=torch.float64
    )


def test_subspace_projection_algebra():
    # Spec test 7
    B, C = _bases()
    Bn, Cn = nn.functional.normalize(B, dim=1), nn.functional.normalize(C, dim=1)
    G = Bn.T @ torch.linalg.pinv(Bn @ Bn.T) @ Bn
    torch.testing.assert_close(G, G.T)
    torch.testing.assert_close(G @ G, G)
    torch.testing.assert_close(subspace_project(C, B, 0.0), Cn)
    P = subspace_project(C, B, 1.0)
    torch.testing.assert_close(P, nn.functional.normalize(Cn @ G, dim=1))
    torch.testing.assert_close(P @ G, P)  # lies in span(B̃): projecting again changes nothing
    # a prototype orthogonal to span(B̃) is unchanged
    q, _ = torch.linalg.qr(torch.cat([B.T, torch.randn(10, 1, dtype=torch.float64)], 1))
    orth = q[:, -1:].T
    torch.testing.assert_close(subspace_project(orth, B, 0.4), orth / orth.norm())
    # α mixes: the result for α=0.3 is normalize(0.7 C̃ + 0.3 C̃G)
    torch.testing.assert_close(
        subspace_project(C, B, 0.3), nn.functional.normalize(0.7 * Cn + 0.3 * Cn @ G, dim=1)
    )
    # rank-deficient base (duplicated prototypes) gives no NaN and the same projector
    Bdup = torch.cat([B, B[:2]])
    assert torch.isfinite(subspace_project(C, Bdup, 0.5)).all()
    torch.testing.assert_close(subspace_project(C, Bdup, 0.5), subspace_project(C, B, 0.5))


def test_teen_calibrate_formula():
    B, C = _bases(1)
    Bn, Cn = nn.functional.normalize(B, dim=1), nn.functional.normalize(C, dim=1)
    w = torch.softmax(16 * Cn @ Bn.T, dim=1)
    expect = nn.functional.normalize(0.5 * Cn + 0.5 * w @ Bn, dim=1)
    torch.testing.assert_close(teen_calibrate(C, B), expect)


def test_class_means_match_numpy():
    # Spec test 8
    rng = np.random.default_rng(0)
    f = rng.normal(size=(50, 6)).astype(np.float32)
    y = rng.integers(0, 4, size=50)
    got = class_means(torch.from_numpy(f), torch.from_numpy(y), [3, 0, 2])
    expect = np.stack([f[y == c].mean(0) for c in (3, 0, 2)])
    np.testing.assert_allclose(got.numpy(), expect, rtol=1e-6)


def test_cosine_classifier_keeps_old_rows_and_averages_time():
    head = CosineClassifier(3, temperature=16.0)
    head.add_classes(torch.eye(3)[:2])
    old = head.weight.detach().clone()
    head.add_classes(torch.tensor([[0.0, 0.0, 2.0]]))
    assert torch.equal(head.weight.detach()[:2], old)
    feats = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])  # [1, T=2, 3]
    torch.testing.assert_close(head(feats), torch.tensor([[8.0, 0.0, 8.0]]))


class _TwoLayer(nn.Module):
    """Linear(2→3) on analogue input, then LIF, then Linear(3→2) fed by spikes."""

    def __init__(self):
        super().__init__()
        self.T = 2
        self.fc1 = nn.Linear(2, 3, bias=False)
        self.lif = LIF(3)
        self.fc2 = nn.Linear(3, 2, bias=False)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
            self.fc2.weight.fill_(1.0)

    def forward(self, x):
        return self.fc2(self.lif(self.fc1(x.unsqueeze(1).expand(-1, self.T, -1))))


def test_energy_counter_hand_count():
    # Spec test 11: input [1, 0] → fc1 = [2, 0, 1] per step: channel 0 spikes at both steps
    # (2 > 1), channel 2 never (1 is not > 1; u = 1 then 1.5 → spikes at step 2).
    net = _TwoLayer()
    x = torch.tensor([[1.0, 0.0]])
    rep = count_sops(net, x)
    spikes = net.lif(net.fc1(x.unsqueeze(1).expand(-1, 2, -1)))
    n_spikes = float(spikes.detach().sum())
    assert n_spikes == 3.0  # ch0 at t=1,2 and ch2 at t=2
    assert rep.macs == 2 * 2 * 3  # encoding layer: T × 2 × 3 MACs
    assert rep.sops == n_spikes * 2  # spikes × fan-out
    assert energy_joules(rep) == pytest.approx(E_MAC * 12 + E_AC * 6)
    assert training_energy(rep, 2.0) == pytest.approx(energy_joules(rep) + 2 * E_MAC * (12 + 12))
    assert ann_twin_energy(rep) == pytest.approx(E_MAC * (6 + 6))
    # all-zero input: no SOPs beyond the encoding MACs
    zero = count_sops(net, torch.zeros(3, 2))
    assert zero.sops == 0
    assert zero.macs == 12


def test_energy_counter_conv_matches_dense_rate():
    conv = nn.Conv2d(2, 4, 3, padding=1)
    g = torch.Generator().manual_seed(0)
    s = (torch.rand(5, 2, 6, 6, generator=g) < 0.3).float()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            return self.conv(x)

    rep = count_sops(Net(), s, encoding_layers=0)
    # exact count: each spike reaches out_channels × (3×3 positions inside the padded map)
    ones = torch.ones(1, 2, 3, 3)
    reach = nn.functional.conv2d(s, ones, padding=1).sum() * 4
    assert rep.sops * 5 == pytest.approx(float(reach))
    dense = 5 * 4 * 36 * 18
    assert rep.layers[0].dense_macs == dense
    # with uniform spikes, r · MAC overcounts exactly by the zero-padded border:
    # per input pixel the reach is 9 inside, 6 on edges, 4 in corners (mean 256/36 of 9)
    uniform = count_sops(Net(), torch.ones(1, 2, 6, 6), encoding_layers=0)
    assert uniform.sops == pytest.approx(4 * 2 * 256)
    # for a linear layer the counter equals the dense recomputation r · MAC exactly
    lin = nn.Linear(20, 7)

    class Lin(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def forward(self, x):
            return self.lin(x)

    sp = (torch.rand(6, 3, 20, generator=g) < 0.25).float()
    rl = count_sops(Lin(), sp, encoding_layers=0)
    assert rl.sops * 6 == pytest.approx(float(sp.mean()) * rl.layers[0].dense_macs)


def test_bad_inputs_math():
    B, C = _bases()
    with pytest.raises(ValueError, match="alpha"):
        subspace_project(C, B, 1.5)
    with pytest.raises(ValueError, match="new"):
        subspace_project(C[:, :3], B, 0.1)
    with pytest.raises(ValueError, match="NaN"):
        subspace_project(torch.full_like(C, float("nan")), B, 0.1)
    with pytest.raises(ValueError, match="no samples"):
        class_means(torch.rand(4, 2), torch.tensor([0, 0, 1, 1]), [2])
    with pytest.raises(ValueError, match="delta"):
        zo_gradient(lambda v: v.sum(), torch.zeros(2), delta=0)
    with pytest.raises(ValueError, match="finite"):
        zo_gradient(lambda v: v.sum(), torch.tensor([float("inf")]))
    with pytest.raises(ValueError, match="no classes"):
        CosineClassifier(3)(torch.rand(2, 3))
    with pytest.raises(ValueError, match="NaN"):
        count_sops(_TwoLayer(), torch.tensor([[float("nan"), 0.0]]))
