"""Spec §12 tests 4, 5 and 10: identity re-projection, cross-view geometry, camera conventions."""

import math

import pytest
import torch
import torch.nn.functional as F

from iclr26.splat_distill import (
    Camera,
    denormalize_K,
    depth_to_ray_length,
    intrinsics,
    look_at,
    normalize_K,
    orbit_cameras,
    pixel_aligned_gaussians,
    project_points,
    random_scene,
    rasterize_features,
    ray_length_to_depth,
    relative_pose,
    render_view,
    unproject_depth,
)  # fmt: skip


@pytest.fixture(scope="module")
def views():
    scene = random_scene(5)
    return [render_view(scene, c) for c in orbit_cameras(3, 32, seed=5, arc_deg=30)]


def test_normalize_K_round_trip():
    K = torch.tensor([[50.0, 0, 31.0], [0, 55.0, 20.0], [0, 0, 1]])
    Kn = normalize_K(K, 40, 64)
    assert Kn[0, 0] == pytest.approx(50 / 64)
    assert Kn[1, 2] == pytest.approx(0.5)
    torch.testing.assert_close(denormalize_K(Kn, 40, 64), K)


def test_c2w_w2c_inverse_and_relative_pose():
    c2w = look_at(torch.tensor([1.0, 2.0, 1.5]), torch.tensor([0.0, 0.0, 0.5]))
    cam = Camera(intrinsics(16, 16), c2w, 16, 16)
    torch.testing.assert_close(cam.w2c @ cam.c2w, torch.eye(4), atol=1e-6, rtol=0)
    cam2 = Camera(
        intrinsics(16, 16), look_at(torch.tensor([-1.0, 2.0, 1.0]), torch.zeros(3)), 16, 16
    )
    X = torch.tensor([0.3, -0.2, 0.4, 1.0])
    torch.testing.assert_close(
        relative_pose(cam, cam2) @ (cam.w2c @ X), cam2.w2c @ X, atol=1e-5, rtol=0
    )
    # OpenCV: the camera looks along +z of its frame, towards the target
    Xc = cam.w2c @ torch.tensor([0.0, 0.0, 0.5, 1.0])
    assert Xc[2] > 0
    assert abs(Xc[0]) < 1e-5
    assert abs(Xc[1]) < 1e-5


def test_depth_is_camera_z_not_ray_length():
    cam = Camera(intrinsics(9, 9, 90.0), torch.eye(4), 9, 9)
    depth = torch.full((9, 9), 2.0)
    X = unproject_depth(depth, cam)
    torch.testing.assert_close(X[..., 2], depth)  # every point on the plane z = 2
    length = depth_to_ray_length(depth, cam)
    torch.testing.assert_close(length, X.norm(dim=-1))
    assert length[0, 0] > length[4, 4] == pytest.approx(2.0)
    torch.testing.assert_close(ray_length_to_depth(length, cam), depth)


def test_unproject_project_round_trip_and_pixel_centres(views):
    v = views[0]
    X = unproject_depth(v.depth, v.cam).reshape(-1, 3)
    uv, z = project_points(X, v.cam)
    grid = torch.stack(
        torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="xy"), -1
    ).reshape(-1, 2)
    torch.testing.assert_close(
        uv, grid + 0.5, atol=1e-3, rtol=0
    )  # pixel (i, j) centre = (j+.5, i+.5)
    torch.testing.assert_close(z, v.depth.reshape(-1), atol=1e-4, rtol=1e-5)


def test_identity_reprojection(views):
    v = views[0]
    feats = torch.cat([v.rgb, v.depth[None] / 5])
    g = pixel_aligned_gaussians(v.depth, v.cam, feats, scale_px=0.2, opacity=0.99)
    # 3DGS's 0.3 px² low-pass dilation blurs by design; a small one makes the identity exact
    r = rasterize_features(g, v.cam, eps2d=0.05)
    inner = (slice(None), slice(2, -2), slice(2, -2))
    err = (r["features"] - feats)[inner].abs().mean() / feats[inner].abs().mean()
    assert err < 0.02
    assert (r["depth"] - v.depth)[2:-2, 2:-2].abs().median() < 1e-3 * v.depth.mean()


def test_cross_view_render_matches_backward_warp(views):
    a, b = views[0], views[1]
    feats = torch.cat([a.rgb, torch.sin(3 * unproject_depth(a.depth, a.cam)).permute(2, 0, 1)])
    g = pixel_aligned_gaussians(
        a.depth, a.cam, feats, scale_px=0.7, opacity=0.95, normals=a.normals
    )
    r = rasterize_features(g, b.cam)
    # backward warp: B's pixels → world with B's depth → A's image → sample A's features
    Xb = unproject_depth(b.depth, b.cam).reshape(-1, 3)
    uv, z = project_points(Xb, a.cam)
    uv = torch.nan_to_num(uv, nan=-10.0)
    ja, ia = uv[:, 0].long().clamp(0, 31), uv[:, 1].long().clamp(0, 31)
    inside = (uv[:, 0] >= 0) & (uv[:, 0] < 32) & (uv[:, 1] >= 0) & (uv[:, 1] < 32)
    visible = inside & ((a.depth[ia, ja] - z).abs() < 0.03 * z)
    grid = torch.stack([uv[:, 0] / 16 - 1, uv[:, 1] / 16 - 1], -1)
    warped = F.grid_sample(feats[None], grid[None, None], align_corners=False)[0, :, 0]
    rendered = r["features"].reshape(feats.shape[0], -1)
    ok = visible & (r["alpha"].reshape(-1) > 0.9)
    assert ok.sum() > 300
    cos = F.cosine_similarity(rendered[:, ok], warped[:, ok], dim=0)
    assert cos.median() > 0.95
    assert cos.mean() > 0.9
    assert math.isfinite(float(cos.mean()))
