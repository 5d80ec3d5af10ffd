"""The fast paths (batched warps, one-validation umeyama, pruned ICP searches, OpenCV median)
compute exactly what the plain per-pair / full-search formulas compute."""

import importlib

import numpy as np
import pytest
from scipy import ndimage
from scipy.spatial import cKDTree

from iclr26.cognimap3d import backproject, ego_flow, icp, umeyama
from iclr26.cognimap3d.camera import median_depth
from iclr26.cognimap3d.flow import gray_u8, observed_flow, warp_depth
from iclr26.cognimap3d.icp import kdtree, tree_points
from iclr26.cognimap3d.se3 import exp_se3, exp_so3

K = np.array([[60.0, 0.3, 39.5], [0, 58.0, 31.5], [0, 0, 1]])


def test_backproject_matches_inverse_intrinsics(rng):
    d = rng.uniform(0.5, 4.0, (12, 16))
    v, u = np.mgrid[0:12, 0:16]
    rays = np.linalg.solve(K, np.stack([u, v, np.ones_like(u)]).reshape(3, -1).astype(float))
    want = (rays * d.ravel()).T.reshape(12, 16, 3)
    np.testing.assert_allclose(backproject(d, K), want, rtol=1e-13, atol=1e-13)


def test_batched_warp_equals_per_pair(rng):
    d = rng.uniform(1.0, 5.0, (16, 20))
    src = exp_se3(rng.normal(0, 0.1, 6))
    dsts = np.stack([exp_se3(rng.normal(0, 0.1, 6)) for _ in range(4)])
    uv_b, z_b = warp_depth(d, K, src, dsts)
    fe_b = ego_flow(d, K, src, dsts)
    assert uv_b.shape == (4, 2, 16, 20)
    assert z_b.shape == (4, 16, 20)
    for p in range(4):
        uv, z = warp_depth(d, K, src, dsts[p])
        np.testing.assert_allclose(uv_b[p], uv, rtol=0, atol=1e-12)
        np.testing.assert_allclose(z_b[p], z, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fe_b[p], ego_flow(d, K, src, dsts[p]), rtol=0, atol=1e-12)
    # closed form for one pixel: the point X = d K⁻¹ ũ moved into the destination camera
    X = d[5, 7] * np.linalg.solve(K, [7.0, 5.0, 1.0])
    rel = np.linalg.inv(dsts[2]) @ src
    Y = rel[:3, :3] @ X + rel[:3, 3]
    np.testing.assert_allclose(uv_b[2, :, 5, 7], (K @ Y)[:2] / Y[2], atol=1e-10)
    np.testing.assert_allclose(z_b[2, 5, 7], Y[2], atol=1e-12)


def test_batched_warp_refuses_a_bad_pose_in_the_batch(rng):
    dsts = np.stack([np.eye(4), np.diag([1.0, 2.0, 1.0, 1.0])])
    with pytest.raises(ValueError, match="T_w_dst"):
        warp_depth(np.full((4, 5), 2.0), K, np.eye(4), dsts)


def test_median_depth_is_scipys_median_in_float32(rng):
    d = rng.uniform(0.5, 8.0, (17, 23))
    got = median_depth(d)
    np.testing.assert_array_equal(
        got, ndimage.median_filter(d.astype(np.float32), size=3).astype(float)
    )
    np.testing.assert_allclose(got, ndimage.median_filter(d, size=3), rtol=1e-7)
    with pytest.raises(ValueError, match="depth"):
        median_depth(np.zeros((4, 4)))


def test_gray_u8_is_what_observed_flow_uses(rng):
    a = rng.uniform(0, 1, (32, 40, 3))
    b = np.roll(a, 2, axis=1)
    g = gray_u8(a)
    assert g.dtype == np.uint8
    assert g.shape == (32, 40)
    want = np.clip((a @ [0.299, 0.587, 0.114]) * 255, 0, 255).round().astype(np.uint8)
    np.testing.assert_array_equal(g, want)
    np.testing.assert_array_equal(observed_flow(a, b), observed_flow(g, gray_u8(b)))


def test_umeyama_without_checks_equals_checked(rng):
    src = rng.normal(size=(200, 3)) + 50.0  # far from the origin: centred moments matter
    R = exp_so3(rng.normal(size=3))
    dst = 1.7 * src @ R.T + [1.0, -2.0, 3.0] + 1e-3 * rng.normal(size=src.shape)
    for scale in (True, False):
        a = umeyama(src, dst, with_scale=scale)
        b = umeyama(src, dst, with_scale=scale, check_input=False)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-12)
        np.testing.assert_allclose(a[1], b[1], atol=1e-12)
        np.testing.assert_allclose(a[2], b[2], atol=1e-9)


def _icp_full_search(src, dst, T, max_iter, max_corr, with_scale=False, trim=1.0):
    """Textbook point-to-point ICP: every point searched every iteration (scipy's cKDTree)."""
    tree = cKDTree(dst)
    for _ in range(max_iter):
        moved = src @ T[:3, :3].T + T[:3, 3]
        d, idx = tree.query(moved, distance_upper_bound=max_corr)
        ok = np.flatnonzero(np.isfinite(d))
        if trim < 1.0:
            ok = ok[d[ok] <= np.quantile(d[ok], trim)]
        s, R, t = umeyama(src[ok], dst[idx[ok]], with_scale=with_scale)
        T_new = np.eye(4)
        T_new[:3, :3], T_new[:3, 3] = s * R, t
        delta = np.abs(T_new - T).max()
        T = T_new
        if delta < 1e-5:
            break
    return T


def _partial_overlap(rng):
    # half of the source lies off the target, so the cache skips points
    g = np.stack(np.meshgrid(np.linspace(0, 2, 45), np.linspace(0, 2, 45)), -1).reshape(-1, 2)
    floor = np.c_[g, 0.1 * np.sin(3 * g[:, 0])]
    wall = np.c_[g[:, 0], np.zeros(len(g)), g[:, 1]]
    dst = np.concatenate([floor, wall]) + 0.002 * rng.normal(size=(2 * len(g), 3))
    shift = np.array([1.0, 0.0, 0.0])
    src = np.concatenate([floor[::3] + shift, wall[::3] + shift])
    T0 = exp_se3(np.r_[np.radians([2.0, -1.0, 3.0]), 0.03, -0.02, 0.04])
    return src, dst, T0


def test_cached_search_icp_equals_full_search_icp(rng, monkeypatch):
    src, dst, T0 = _partial_overlap(rng)
    res = icp(src, dst, T0, max_iter=40, max_corr=0.1)
    want = _icp_full_search(src, dst, T0, 40, 0.1)
    assert 0.3 < res.fitness < 0.9  # a real partial overlap
    np.testing.assert_allclose(res.T, want, atol=1e-10)
    # the same tree passed in (ours, or a scipy cKDTree), and searches on one thread or split
    # over three (threshold lowered so that the searches are split), give the same answer
    icp_module = importlib.import_module("iclr26.cognimap3d.icp")
    monkeypatch.setattr(icp_module, "THREADED_QUERY_MIN", 64)
    tree = kdtree(dst)
    np.testing.assert_allclose(icp(src, tree, T0, 40, 0.1, workers=1).T, want, atol=1e-10)
    np.testing.assert_allclose(icp(src, tree, T0, 40, 0.1, workers=3).T, want, atol=1e-10)
    np.testing.assert_allclose(icp(src, cKDTree(dst), T0, 40, 0.1).T, want, atol=1e-10)
    # Sim(3) and trimmed ICP take the same correspondences as their full-search versions
    sim = icp(src, dst, T0, max_iter=25, max_corr=0.1, with_scale=True)
    want_sim = _icp_full_search(src, dst, T0, 25, 0.1, with_scale=True)
    np.testing.assert_allclose(sim.T, want_sim, atol=1e-10)
    trimmed = icp(src, dst, T0, max_iter=25, max_corr=0.1, trim=0.8)
    np.testing.assert_allclose(
        trimmed.T, _icp_full_search(src, dst, T0, 25, 0.1, trim=0.8), atol=1e-10
    )


@pytest.mark.parametrize("max_iter", [1, 2, 3, 7, 20])
def test_cached_search_fitness_and_rmse_equal_a_full_search(rng, max_iter):
    # after any number of iterations the reported fitness and RMSE (from the cache) are a
    # full search's at the returned transform
    src, dst, T0 = _partial_overlap(rng)
    res = icp(src, dst, T0, max_iter=max_iter, max_corr=0.1)
    d, _ = cKDTree(dst).query(src @ res.T[:3, :3].T + res.T[:3, 3], distance_upper_bound=0.1)
    ok = np.isfinite(d)
    assert res.fitness == ok.mean()
    np.testing.assert_allclose(res.rmse, np.sqrt(np.mean(d[ok] ** 2)), rtol=1e-12)


def test_kdtree_finds_scipys_neighbours(rng):
    pts = rng.normal(size=(500, 3))
    q = rng.normal(size=(200, 3))
    tree = kdtree(pts)
    np.testing.assert_array_equal(tree_points(tree), pts)
    d, i = tree.query(q, k=2, distance_upper_bound=0.4)
    dw, iw = cKDTree(pts).query(q, k=2, distance_upper_bound=0.4)
    np.testing.assert_allclose(d, dw, rtol=1e-12)
    np.testing.assert_array_equal(i[np.isfinite(d)], iw[np.isfinite(dw)])
    assert np.all(i[~np.isfinite(d)] == len(pts))  # "none" is index M, as scipy's


def test_observed_flow_does_not_depend_on_call_history(rng):
    a = rng.uniform(0, 1, (32, 40, 3))
    b, c = np.roll(a, 2, axis=1), np.roll(a, -3, axis=0)
    first = observed_flow(a, b)
    observed_flow(a, c)
    np.testing.assert_array_equal(observed_flow(a, b), first)
    np.testing.assert_array_equal(observed_flow(a, b), first)


def test_icp_leaves_blas_and_openmp_thread_counts_as_they_were(rng, monkeypatch):
    from threadpoolctl import threadpool_info

    src, dst, T0 = _partial_overlap(rng)
    icp_module = importlib.import_module("iclr26.cognimap3d.icp")
    monkeypatch.setattr(icp_module, "THREADED_QUERY_MIN", 64)  # use the search pool too
    before = [(i["filepath"], i["num_threads"]) for i in threadpool_info()]
    icp(src, dst, T0, max_iter=5, max_corr=0.1, workers=2)
    assert [(i["filepath"], i["num_threads"]) for i in threadpool_info()] == before
