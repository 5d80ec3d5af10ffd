"""Spec tests 1-3 and 7: the GI estimator, H algebra, sampler geometry, rank extremes."""

import math

import pytest
import torch

from iclr26.git_bo import (
    Embedded,
    active_subspace,
    captured_fraction,
    gradient_outer_product,
    random_subspace,
    sample_subspace,
)


def _exact_grads(problem, n, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, problem.dim, generator=g, dtype=torch.float64).requires_grad_(True)
    (G,) = torch.autograd.grad(problem.evaluate(X).sum(), X)
    return G


@pytest.mark.parametrize("fn", ["ackley", "levy"])
def test_estimator_recovers_known_subspace(fn):
    p = Embedded(fn, dim=200, d_eff=10, seed=3)
    H = gradient_outer_product(_exact_grads(p, 1000, 0))
    sub = active_subspace(H, rank=10)
    assert captured_fraction(p.true_basis, sub.basis) >= 0.99
    assert sub.eigengap > 100
    # r = 15 still holds the whole subspace; a random 15-dim basis holds ~15/200
    assert captured_fraction(p.true_basis, active_subspace(H, rank=15).basis) >= 0.99
    assert captured_fraction(p.true_basis, random_subspace(200, 15, seed=1)) < 0.25


def test_wrong_wiring_fails_recovery():
    # the smallest eigenvectors, or G G^T instead of G^T G, would not find the subspace
    p = Embedded("ackley", dim=60, d_eff=4, seed=0)
    G = _exact_grads(p, 300, 1)
    _evals, evecs = torch.linalg.eigh(G.T @ G)
    assert captured_fraction(p.true_basis, evecs[:, :4]) < 0.1
    assert captured_fraction(p.true_basis, active_subspace(G.T @ G, rank=4).basis) > 0.99


def test_h_algebra():
    g = torch.Generator().manual_seed(0)
    G = torch.randn(50, 7, generator=g, dtype=torch.float64)
    H = gradient_outer_product(G)
    assert torch.allclose(H, H.T)
    assert torch.linalg.eigvalsh(H).min() > -1e-12
    assert math.isclose(float(torch.trace(H)), float(G.pow(2).sum(1).mean()), rel_tol=1e-12)
    assert torch.allclose(gradient_outer_product(3.0 * G), 9.0 * H)
    perm = torch.randperm(50, generator=g)
    assert torch.allclose(gradient_outer_product(G[perm]), H)
    w = torch.rand(50, generator=g, dtype=torch.float64)
    Hw = gradient_outer_product(G, w)
    assert torch.allclose(Hw, (G * w[:, None]).T @ G / 50)


def test_energy_rank_and_eigen_order():
    H = torch.diag(torch.tensor([1.0, 10.0, 0.0, 100.0], dtype=torch.float64))
    sub = active_subspace(H, rank=1)
    assert torch.allclose(
        sub.basis.abs().squeeze(), torch.tensor([0, 0, 0, 1.0], dtype=torch.float64)
    )
    assert sub.eigenvalues.tolist() == [100.0, 10.0, 1.0, 0.0]
    assert active_subspace(H, rank=None, energy=0.9).rank == 1
    assert active_subspace(H, rank=None, energy=0.995).rank == 3
    assert active_subspace(H, rank=50).rank == 4  # capped at D
    assert math.isinf(active_subspace(H, rank=4).eigengap)


def test_sampler_geometry_and_seed():
    D, r = 30, 4
    U = random_subspace(D, r, seed=2)
    x0 = torch.full((D,), 0.5, dtype=torch.float64)
    X = sample_subspace(x0, U, 500, scale=0.05, seed=7)
    assert X.shape == (500, D)
    assert X.dtype == torch.float64
    resid = (X - x0) - ((X - x0) @ U) @ U.T
    assert float(resid.norm(dim=1).max()) < 1e-10
    alpha = (X - x0) @ U
    assert float(alpha.abs().max()) <= 0.05 + 1e-12
    assert torch.equal(X, sample_subspace(x0, U, 500, scale=0.05, seed=7))
    assert not torch.equal(X, sample_subspace(x0, U, 500, scale=0.05, seed=8))
    Xs = sample_subspace(x0, U, 64, scale=0.05, method="sobol", seed=1)
    assert float(((Xs - x0) - ((Xs - x0) @ U) @ U.T).norm(dim=1).max()) < 1e-10


def test_sampler_clips_to_box():
    D = 20
    U = torch.eye(D, dtype=torch.float64)  # r = D
    x0 = torch.full((D,), 0.9, dtype=torch.float64)
    X = sample_subspace(x0, U, 2000, scale=5.0, seed=0)
    assert float(X.min()) >= 0.0
    assert float(X.max()) <= 1.0
    # at s = 5 about 86-90% of coordinates are clipped to a bound (errata: not random search)
    clipped = ((X == 0.0) | (X == 1.0)).double().mean()
    assert 0.8 < float(clipped) < 0.95
    lo, hi = torch.zeros(D) - 1, torch.ones(D) * 2
    X2 = sample_subspace(x0, U, 100, scale=5.0, lower=lo, upper=hi, seed=0)
    assert float(X2.min()) >= -1
    assert float(X2.max()) <= 2


def test_rank_zero_is_an_error():
    H = torch.eye(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="rank"):
        active_subspace(H, rank=0)
