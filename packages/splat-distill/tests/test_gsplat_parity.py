"""Spec §12 test 12: parity with gsplat.rasterization — needs CUDA and gsplat, skipped otherwise."""

import pytest
import torch

from iclr26.splat_distill import Camera, Gaussians, intrinsics, rasterize_features

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="gsplat parity needs a CUDA GPU"
)


def test_gsplat_parity():
    pytest.importorskip("gsplat")
    torch.manual_seed(0)
    dev = "cuda"
    N, C = 500, 16
    means = (torch.randn(N, 3) * torch.tensor([1.0, 1.0, 0.5]) + torch.tensor([0, 0, 4.0])).to(dev)
    A = torch.randn(N, 3, 3, device=dev) * 0.05
    covs = A @ A.transpose(1, 2) + 1e-3 * torch.eye(3, device=dev)
    g = Gaussians(means, covs, torch.rand(N, device=dev) * 0.9, torch.randn(N, C, device=dev))
    cam = Camera(intrinsics(48, 64).to(dev), torch.eye(4, device=dev), 48, 64)
    ours = rasterize_features(g, cam, backend="torch-dense", cutoff_sigma=None)
    ref = rasterize_features(g, cam, backend="gsplat")
    assert (ours["features"] - ref["features"]).abs().max() < 1e-3
    assert (ours["alpha"] - ref["alpha"]).abs().max() < 1e-3
