"""Spec §12 tests 1–3 and the rasteriser's gradients, backends and edge cases."""

import math

import pytest
import torch

from iclr26.splat_distill import (
    Camera,
    Gaussians,
    compositing_weights,
    intrinsics,
    pixel_grid,
    rasterize_features,
)


def _cam(side=32, dtype=torch.float32):
    return Camera(intrinsics(side, side, 60.0, dtype=dtype), torch.eye(4, dtype=dtype), side, side)


def _iso(means, sigma, opac, feats):
    n = means.shape[0]
    covs = (torch.as_tensor(sigma, dtype=means.dtype).reshape(-1, 1, 1) ** 2) * torch.eye(
        3, dtype=means.dtype
    )
    return Gaussians(
        means,
        covs.expand(n, 3, 3).clone(),
        torch.as_tensor(opac, dtype=means.dtype).reshape(n),
        feats,
    )


@pytest.mark.parametrize("z", [2.0, 5.0])
def test_single_gaussian_footprint_closed_form(z):
    cam = _cam()
    s, o = 0.08, 0.8
    g = _iso(torch.tensor([[0.0, 0.0, z]]), s, o, torch.ones(1, 1))
    r = rasterize_features(g, cam, backend="torch-dense", cutoff_sigma=None, t_min=0)
    f = cam.K[0, 0]
    d2 = ((pixel_grid(32, 32) - torch.tensor([16.0, 16.0])) ** 2).sum(-1)
    ref = o * torch.exp(-d2 / (2 * ((f * s / z) ** 2 + 0.3)))
    ref = torch.where(ref < 1 / 255, torch.zeros_like(ref), ref)  # Errata: the 1/255 cut
    torch.testing.assert_close(r["alpha"], ref, atol=1e-4, rtol=0)
    torch.testing.assert_close(r["features"][0], ref, atol=1e-4, rtol=0)
    assert r["alpha"].max() > 0.4  # the centre (a pixel corner) is really covered


def test_off_axis_covariance_matches_monte_carlo_projection():
    # 2D covariance of an off-axis anisotropic Gaussian vs the empirical covariance of its
    # projected samples (first order: small σ/z); eps2d = 0 so only the Jacobian is tested
    torch.manual_seed(0)
    cam = _cam(64, torch.float64)
    mu = torch.tensor([0.6, -0.4, 4.0], dtype=torch.float64)
    A = torch.tensor([[0.03, 0.01, 0.0], [0.0, 0.02, 0.01], [0.0, 0.0, 0.04]], dtype=torch.float64)
    cov = A @ A.T
    X = mu + torch.randn(400_000, 3, dtype=torch.float64) @ A.T
    K = cam.K
    uv = torch.stack(
        [K[0, 0] * X[:, 0] / X[:, 2] + K[0, 2], K[1, 1] * X[:, 1] / X[:, 2] + K[1, 2]], -1
    )
    emp = torch.cov(uv.T)
    from iclr26.splat_distill.raster import _project

    g = Gaussians(
        mu[None],
        cov[None],
        torch.ones(1, dtype=torch.float64) * 0.5,
        torch.ones(1, 1, dtype=torch.float64),
    )
    _, conic, *_ = _project(g, cam, 0.01, 100.0, 0.0)
    a, b, c = conic[0]
    cov2 = torch.linalg.inv(torch.stack([torch.stack([a, b]), torch.stack([b, c])]))
    torch.testing.assert_close(cov2, emp, rtol=0.05, atol=0.05)


def test_compositing_order_and_occlusion():
    cam = _cam(16)
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    means = torch.tensor([[0.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
    g = _iso(means, 0.5, torch.tensor([0.6, 0.7]), torch.stack([a, b]))
    r = rasterize_features(g, cam, backend="torch-dense", cutoff_sigma=None)
    w = compositing_weights(g, cam, cutoff_sigma=None)
    p = 8 * 16 + 8  # a central pixel
    g1 = 0.6 * math.exp(
        -0.5
        * float(((pixel_grid(16, 16).reshape(-1, 2)[p] - 8) ** 2).sum())
        / ((cam.K[0, 0] * 0.5 / 2) ** 2 + 0.3)
    )
    g2 = 0.7 * math.exp(
        -0.5
        * float(((pixel_grid(16, 16).reshape(-1, 2)[p] - 8) ** 2).sum())
        / ((cam.K[0, 0] * 0.5 / 3) ** 2 + 0.3)
    )
    want = a * g1 + b * g2 * (1 - g1)
    torch.testing.assert_close(r["features"][:, 8, 8], want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w[p], torch.tensor([g1, g2 * (1 - g1)]), atol=1e-5, rtol=1e-5)
    # swapping depths swaps the roles
    g_sw = _iso(means.flip(0), 0.5, torch.tensor([0.6, 0.7]), torch.stack([a, b]))
    r2 = rasterize_features(g_sw, cam, backend="torch-dense", cutoff_sigma=None)
    assert r2["features"][1, 8, 8] > r2["features"][0, 8, 8] * 0  # b is in front now
    front = r2["features"][:, 8, 8]
    assert front[1] > r["features"][1, 8, 8]
    assert front[0] < r["features"][0, 8, 8]
    # α ≥ 0.99 in front occludes the back to 1 %
    g_occ = _iso(means, 5.0, torch.tensor([1.0, 1.0]), torch.stack([a, b]))
    r3 = rasterize_features(g_occ, cam, backend="torch-dense", cutoff_sigma=None, t_min=0)
    torch.testing.assert_close(
        r3["features"][:, 8, 8], torch.tensor([0.99, 0.01 * 0.99]), atol=1e-4, rtol=0
    )


def test_linearity_and_constant_features():
    torch.manual_seed(1)
    N, C = 50, 4
    means = torch.randn(N, 3) * 0.5 + torch.tensor([0, 0, 3.0])
    f = torch.randn(N, C)
    g = _iso(means, 0.1, torch.rand(N) * 0.9, f)
    r = rasterize_features(g, _cam())
    r2 = rasterize_features(g.with_features(torch.cat([f, 2 * f], 1)), _cam())
    torch.testing.assert_close(r2["features"], torch.cat([r["features"], 2 * r["features"]]))
    rc = rasterize_features(g.with_features(torch.full((N, 2), 3.0)), _cam())
    torch.testing.assert_close(rc["features"], 3.0 * r["alpha"].expand(2, -1, -1))
    bg = torch.tensor([1.0, -1.0])
    rb = rasterize_features(g.with_features(torch.zeros(N, 2)), _cam(), background=bg)
    torch.testing.assert_close(rb["features"], (1 - r["alpha"]) * bg[:, None, None])


@pytest.mark.parametrize("tile", [8, 16])
def test_tiled_equals_dense(tile):
    torch.manual_seed(2)
    N = 300
    means = torch.randn(N, 3) * torch.tensor([1.0, 1.0, 0.5]) + torch.tensor([0, 0, 4.0])
    A = torch.randn(N, 3, 3) * 0.05
    covs = A @ A.transpose(1, 2) + 1e-3 * torch.eye(3)
    g = Gaussians(means, covs, torch.rand(N), torch.randn(N, 5))
    cam = Camera(intrinsics(40, 36), torch.eye(4), 40, 36)  # not a multiple of the tile
    d = rasterize_features(g, cam, backend="torch-dense", chunk=333)
    t = rasterize_features(g, cam, backend="torch-tiled", tile=tile)
    for k in ("features", "alpha", "depth"):
        torch.testing.assert_close(t[k], d[k], atol=2e-4, rtol=1e-4)
    w = compositing_weights(g, cam)
    torch.testing.assert_close(w @ g.features, d["features"].flatten(1).T, atol=1e-4, rtol=1e-4)


def test_block_culling_is_exact_with_uneven_tiles(monkeypatch):
    """Dense pixel blocks keep only the Gaussians whose cut-off box reaches them, and tiled blocks
    pad to their own largest count; both must equal the all-pairs compositing matrix, values and
    gradients, on a scene whose tiles hold very different numbers of Gaussians."""
    import iclr26.splat_distill.raster as raster

    torch.manual_seed(5)
    N = 400
    means = torch.randn(N, 3) * torch.tensor([0.15, 0.15, 0.3]) + torch.tensor([0.1, 0, 3.0])
    means[:60, :2] += torch.randn(60, 2)  # a sparse halo around a dense cluster
    A = torch.randn(N, 3, 3) * 0.03
    covs = A @ A.transpose(1, 2) + 1e-3 * torch.eye(3)
    feats = torch.randn(N, 4, requires_grad=True)
    g = Gaussians(means, covs, 0.1 + 0.8 * torch.rand(N), feats)
    cam = Camera(intrinsics(48, 40), torch.eye(4), 48, 40)
    monkeypatch.setattr(raster, "TILED_BLOCK_ENTRIES", 2048)  # many blocks of different widths
    ref = (compositing_weights(g, cam) @ feats).T.reshape(4, cam.height, cam.width)
    (g_ref,) = torch.autograd.grad(ref.square().sum(), feats)
    for backend, kw in (("torch-dense", {"chunk": 100}), ("torch-tiled", {"tile": 8})):
        out = rasterize_features(g, cam, backend=backend, **kw)["features"]
        torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)
        (g_out,) = torch.autograd.grad(out.square().sum(), feats)
        torch.testing.assert_close(g_out, g_ref, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("backend", ["torch-dense", "torch-tiled"])
def test_gradients_match_finite_differences(backend):
    torch.manual_seed(3)
    dt = torch.float64
    N = 6
    cam = _cam(12, dt)
    means = (
        torch.randn(N, 3, dtype=dt) * 0.2 + torch.tensor([0, 0, 2.5], dtype=dt)
    ).requires_grad_()
    L = torch.randn(N, 3, 3, dtype=dt) * 0.05
    covs = (L @ L.transpose(1, 2) + 0.01 * torch.eye(3, dtype=dt)).requires_grad_()
    opac = (0.3 + 0.5 * torch.rand(N, dtype=dt)).requires_grad_()
    feats = torch.randn(N, 2, dtype=dt).requires_grad_()

    def fn(m, c, o, f):
        c = 0.5 * (c + c.transpose(1, 2))
        r = rasterize_features(
            Gaussians(m, c, o, f), cam, backend=backend, alpha_min=0.0, t_min=0.0, tile=8
        )
        return r["features"].sum() + (r["alpha"] ** 2).sum()

    assert torch.autograd.gradcheck(fn, (means, covs, opac, feats), eps=1e-6, atol=1e-5, rtol=1e-3)


def test_empty_and_culled_sets_give_zero_images():
    cam = _cam(8)
    empty = Gaussians(torch.zeros(0, 3), torch.zeros(0, 3, 3), torch.zeros(0), torch.zeros(0, 5))
    for b in ("torch-dense", "torch-tiled"):
        r = rasterize_features(empty, cam, backend=b)
        assert r["features"].shape == (5, 8, 8)
        assert not r["features"].any()
        assert not r["alpha"].any()
    behind = _iso(torch.tensor([[0.0, 0.0, -2.0]]), 0.3, 0.9, torch.ones(1, 3))
    r = rasterize_features(behind, cam)
    assert not r["alpha"].any()
    assert torch.isfinite(r["depth"]).all()


def test_rendered_depth_is_alpha_normalised():
    g = _iso(torch.tensor([[0.0, 0.0, 3.0]]), 0.5, 0.5, torch.ones(1, 1))
    r = rasterize_features(g, _cam(8), backend="torch-dense")
    covered = r["alpha"] > 0
    torch.testing.assert_close(r["depth"][covered], torch.full_like(r["depth"][covered], 3.0))


def test_tile_lists_match_the_all_pairs_box_test():
    """Per-tile lists from the sorted (tile id, Gaussian) pairs equal the brute-force box-tile
    overlap, keep depth order inside each tile, and skip boxes off screen."""
    from iclr26.splat_distill.raster import _tile_intersections

    torch.manual_seed(7)
    M, H, W, tile = 200, 37, 50, 8
    c = torch.rand(M, 2) * torch.tensor([W + 30.0, H + 30.0]) - 15
    r = torch.rand(M, 2) * 12
    lo, hi = c - r, c + r
    gids, counts = _tile_intersections(lo, hi, H, W, tile)
    ntx, nty = -(-W // tile), -(-H // tile)
    starts = torch.cumsum(counts, 0) - counts
    for t in range(ntx * nty):
        j, i = t % ntx, t // ntx
        hit = (hi[:, 0] >= j * tile) & (lo[:, 0] < (j + 1) * tile)
        hit &= (hi[:, 1] >= i * tile) & (lo[:, 1] < (i + 1) * tile)
        got = gids[starts[t] : starts[t] + counts[t]]
        assert got.tolist() == hit.nonzero().squeeze(1).tolist()


def test_tiled_early_termination_is_exact(monkeypatch):
    """An opaque stack saturates every tile after a few chunks; the tiles leave early and the
    image (and gradients) equal the dense backend, which composites every Gaussian."""
    import iclr26.splat_distill.raster as raster

    monkeypatch.setattr(raster, "TILED_DEPTH_CHUNK", 8)
    torch.manual_seed(8)
    N = 200
    means = torch.randn(N, 3) * torch.tensor([0.05, 0.05, 0.3]) + torch.tensor([0.0, 0.0, 3.0])
    covs = (2.0**2 * torch.eye(3)).expand(N, 3, 3).clone()  # σ ≈ 9 px: covers the image
    feats = torch.randn(N, 3, requires_grad=True)
    g = Gaussians(means, covs, torch.full((N,), 0.9), feats)
    cam = _cam(16)
    calls = []
    real = raster._weights
    monkeypatch.setattr(
        raster, "_weights", lambda *a, **k: calls.append(a[1].shape) or real(*a, **k)
    )
    t = rasterize_features(g, cam, backend="torch-tiled", tile=4)
    composited = sum(s[0] * s[1] for s in calls[1:])
    d = rasterize_features(g, cam, backend="torch-dense")
    assert (d["alpha"] > 0.999).all()
    assert composited < 16 * N / 4  # most of the 16 tiles × 200 Gaussians were never visited
    for k in ("features", "alpha", "depth"):
        torch.testing.assert_close(t[k], d[k], atol=1e-5, rtol=1e-5)
    (gt,) = torch.autograd.grad(t["features"].square().sum(), feats)
    (gd,) = torch.autograd.grad(d["features"].square().sum(), feats)
    torch.testing.assert_close(gt, gd, atol=1e-5, rtol=1e-4)
