"""Iterative closest point with scipy's cKDTree, used to verify a memory recall and to relocalise
(spec §4.3): point-to-point (SE(3) or Sim(3), closed-form Umeyama/Kabsch updates) and
point-to-plane (Gauss–Newton on the linearised plane residuals, target normals from PCA of
nearest neighbours). Optional backends run the same registration in Open3D or small_gicp, for
users who have them and for the benchmark. Fitness (fraction of source points with a target
neighbour within ``max_corr``) and inlier RMSE follow Open3D's definitions and are always measured
here, so every backend reports them alike."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

import numpy as np
from scipy.spatial import cKDTree

from iclr26.cognimap3d.se3 import check_poses, exp_so3, umeyama
from iclr26.shared.optional import MissingDependencyError, import_optional
from iclr26.shared.validation import check_array, check_choice, check_int, check_range

__all__ = ["BACKENDS", "METHODS", "IcpResult", "estimate_normals", "icp", "kdtree"]

METHODS = ("point_to_point", "point_to_plane")
BACKENDS = ("scipy", "open3d", "small_gicp")
_THREADED_QUERY_MIN = 1024


def kdtree(points: np.ndarray) -> cKDTree:
    """The search tree :func:`icp` builds for a target cloud ``(M, 3)``: scipy's cKDTree with
    sliding-midpoint splits and no node compaction, which builds about twice as fast as the
    default median splits and queries no slower on scan-like clouds. Build it once per map and
    pass it as ``dst`` to every :func:`icp` call on that map."""
    check_array(points, "points", shape=(None, 3))
    return cKDTree(np.asarray(points, dtype=float), balanced_tree=False, compact_nodes=False)


@dataclass(frozen=True)
class IcpResult:
    """Result of :func:`icp`: ``T`` maps source to target (4×4; with scale in the rotation block
    when ``with_scale``), ``scale``, ``fitness`` in [0, 1], inlier ``rmse``, iterations run."""

    T: np.ndarray
    scale: float
    fitness: float
    rmse: float
    n_iter: int
    converged: bool


def estimate_normals(points: np.ndarray | cKDTree, k: int = 10) -> np.ndarray:
    """Unit normals ``(M, 3)``: the smallest-eigenvalue eigenvector of the covariance of each
    point's ``k`` nearest neighbours (itself included), as Open3D's ``estimate_normals``. The
    sign is arbitrary (point-to-plane residuals do not depend on it).

    Args:
        points: ``(M, 3)`` points, or a prebuilt ``scipy.spatial.cKDTree`` of them.
        k: neighbours per point, at least 3 and at most M.
    """
    tree = points if isinstance(points, cKDTree) else None
    if tree is None:
        check_array(points, "points", shape=(None, 3))
        tree = kdtree(points)
    check_int(k, "k", low=3)
    if k > tree.n:
        raise ValueError(f"k must be at most the number of points ({tree.n}), got {k}")
    _, idx = tree.query(tree.data, k=k, workers=-1)
    nb = tree.data[idx]
    nb = nb - nb.mean(axis=1, keepdims=True)
    cov = np.einsum("mki,mkj->mij", nb, nb)
    _, vecs = np.linalg.eigh(cov)
    return vecs[:, :, 0]


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@cache
def _pool(n: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(n, thread_name_prefix="icp-query")


def _query(tree: cKDTree, pts: np.ndarray, bound: float, workers: int):
    """Nearest neighbours within ``bound`` (``(d, idx)``, scipy's conventions). Searches of
    ``_THREADED_QUERY_MIN`` points or more are split over ``workers`` threads (``-1``: every
    core): the caller searches one chunk and a persistent pool the others (cKDTree releases the
    GIL), which costs far less per call than scipy's ``workers=``, which starts new threads
    every call. The result does not depend on the split."""
    n_threads = _cores() if workers == -1 else workers
    if n_threads <= 1 or len(pts) < _THREADED_QUERY_MIN:
        return tree.query(pts, distance_upper_bound=bound)
    cuts = np.linspace(0, len(pts), n_threads + 1).astype(int)
    pool = _pool(n_threads - 1)
    futures = [pool.submit(tree.query, pts[a:b], 1, 0.0, 2.0, bound) for a, b in pairwise(cuts[1:])]
    parts = [tree.query(pts[: cuts[1]], distance_upper_bound=bound)]
    parts += [f.result() for f in futures]
    return np.concatenate([d for d, _ in parts]), np.concatenate([i for _, i in parts])


def _fitness_rmse(src: np.ndarray, tree: cKDTree, T: np.ndarray, max_corr: float, workers: int):
    moved = src @ T[:3, :3].T + T[:3, 3]
    d, _ = _query(tree, moved, max_corr, workers)
    ok = np.isfinite(d)
    fitness = float(ok.mean())
    rmse = float(np.sqrt(np.mean(d[ok] ** 2))) if ok.any() else float("inf")
    return fitness, rmse


def _plane_step(p: np.ndarray, q: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Gauss–Newton increment (4×4, left-multiplied) minimising Σ (n·(R p + t − q))² linearised
    at R = I, t = 0: rows [p × n, n] · [ω, t] = −n·(p − q)."""
    J = np.hstack((np.cross(p, n), n))
    r = np.einsum("ij,ij->i", n, p - q)
    x, *_ = np.linalg.lstsq(J, -r, rcond=None)
    dT = np.eye(4)
    dT[:3, :3] = exp_so3(x[:3])
    dT[:3, 3] = x[3:]
    return dT


def icp(
    src: np.ndarray,
    dst: np.ndarray | cKDTree,
    T_init: np.ndarray | None = None,
    max_iter: int = 30,
    max_corr: float = 0.2,
    with_scale: bool = False,
    tol: float = 1e-5,
    trim: float = 1.0,
    *,
    method: str = "point_to_point",
    dst_normals: np.ndarray | None = None,
    backend: str = "scipy",
    workers: int = -1,
) -> IcpResult:
    """ICP: alternate nearest neighbours within ``max_corr`` and a transform update, from
    ``T_init``. ``point_to_point`` takes the closed-form Umeyama/Kabsch update (Sim(3) with
    ``with_scale``); ``point_to_plane`` a Gauss–Newton step on the distances to the target's
    tangent planes (rigid only), which converges in fewer iterations on surfaces. Neighbour
    searches of 1,024 points or more use ``workers`` threads (every core by default, as Open3D).
    Points are searched again only when the triangle inequality cannot rule out a target point
    within ``max_corr`` since their last search, so the correspondences equal a full search's.

    Args:
        src: ``(N, 3)`` points to move.
        dst: ``(M, 3)`` target points, or a prebuilt ``scipy.spatial.cKDTree`` of them.
        T_init: initial 4×4 rigid transform (identity by default); with ``with_scale`` it may
            be a similarity (scale times a rotation).
        max_iter: iteration cap.
        max_corr: correspondence distance (metres of the target frame).
        with_scale: estimate a similarity (Sim(3)), for priors with unknown scale
            (``point_to_point`` only).
        tol: stop when the transform changes by less than this (max absolute entry change).
        trim: keep this fraction of the closest correspondences per iteration (1 = all).
        method: ``"point_to_point"`` or ``"point_to_plane"``.
        dst_normals: ``(M, 3)`` target normals for ``point_to_plane``; estimated with
            :func:`estimate_normals` when omitted.
        backend: ``"scipy"`` (this module), or ``"open3d"`` / ``"small_gicp"`` when installed
            (same method; ``with_scale`` and ``trim`` only with ``"scipy"``; their own stopping
            rules, given ``tol``). Fitness and RMSE are measured here for every backend.
        workers: threads of the neighbour searches (``-1``: every core, as Open3D); searches
            of fewer than 1,024 points run on the calling thread (a hand-off costs more). The
            result does not depend on it.
    """
    check_choice(method, "method", METHODS)
    check_choice(backend, "backend", BACKENDS)
    check_array(src, "src", shape=(None, 3))
    tree = dst if isinstance(dst, cKDTree) else None
    if tree is None:
        check_array(dst, "dst", shape=(None, 3))
        tree = kdtree(dst)
    check_int(max_iter, "max_iter", low=1)
    check_int(workers, "workers", low=-1)
    if workers == 0:
        raise ValueError("workers must be -1 (all cores) or a positive count, got 0")
    check_range(max_corr, "max_corr", low=0, low_inclusive=False)
    check_range(trim, "trim", low=0, high=1, low_inclusive=False)
    check_range(tol, "tol", low=0)
    if method == "point_to_plane" and with_scale:
        raise ValueError("with_scale needs method='point_to_point' (point-to-plane is rigid)")
    if backend != "scipy" and (with_scale or trim < 1.0):
        raise ValueError(f"with_scale and trim < 1 need backend='scipy', got backend={backend!r}")
    if dst_normals is not None:
        check_array(dst_normals, "dst_normals", shape=(tree.n, 3))
        if method != "point_to_plane":
            raise ValueError("dst_normals is used only with method='point_to_plane'")
    src = np.asarray(src, dtype=float)
    if len(src) < 3:
        raise ValueError(f"src must hold at least 3 points, got {len(src)}")
    if T_init is None:
        T, scale = np.eye(4), 1.0
    else:
        check_array(T_init, "T_init", shape=(4, 4))
        T = np.asarray(T_init, dtype=float).copy()
        scale = float(np.cbrt(np.linalg.det(T[:3, :3]))) if with_scale else 1.0
        if not scale > 0:
            raise ValueError("T_init must have a positive-determinant rotation block")
        rigid = T.copy()
        rigid[:3, :3] /= scale
        check_poses(rigid, "T_init", batch=False)
    if backend != "scipy":
        T, it, converged = _external(backend, method, src, tree, T, max_iter, max_corr, tol)
        fitness, rmse = _fitness_rmse(src, tree, T, max_corr, workers)
        return IcpResult(T=T, scale=1.0, fitness=fitness, rmse=rmse, n_iter=it, converged=converged)
    normals = None
    if method == "point_to_plane":
        normals = estimate_normals(tree) if dst_normals is None else np.asarray(dst_normals, float)
    dst_pts = tree.data
    n_src = len(src)
    # Exact pruning of the neighbour searches: ``lb`` is a lower bound on each point's distance
    # to the target. A search up to ``reach`` either finds the distance or proves it exceeds
    # ``reach``; moving the point by δ lowers the bound by at most δ (triangle inequality), so
    # a point is searched again only once its bound falls to ``max_corr``. The inliers are the
    # same as a full search's every iteration; points far off the map are skipped.
    reach = 2.0 * max_corr
    lb = np.zeros(n_src)
    moved_prev = None
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (reported as n_iter)
        moved = src @ T[:3, :3].T + T[:3, 3]
        if moved_prev is not None:
            step = moved - moved_prev
            lb -= np.sqrt(np.einsum("ij,ij->i", step, step))
        moved_prev = moved
        act = np.flatnonzero(lb <= max_corr * (1 + 1e-9))
        d, nn = _query(tree, moved[act], reach, workers)
        lb[act] = np.minimum(d, reach)
        inl = d <= max_corr
        sel, nn, d = act[inl], nn[inl], d[inl]
        if len(sel) < (6 if normals is not None else 3):
            break
        if trim < 1.0:
            keep = d <= np.quantile(d, trim)
            sel, nn = sel[keep], nn[keep]
        if normals is None:
            s, R, t = umeyama(src[sel], dst_pts[nn], with_scale=with_scale, check_input=False)
            T_new = np.eye(4)
            T_new[:3, :3] = s * R
            T_new[:3, 3] = t
        else:
            s = 1.0
            T_new = _plane_step(moved[sel], dst_pts[nn], normals[nn]) @ T
        delta = np.abs(T_new - T).max()
        T, scale = T_new, s
        if delta < tol:
            converged = True
            break
    fitness, rmse = _fitness_rmse(src, tree, T, max_corr, workers)
    return IcpResult(
        T=T, scale=float(scale), fitness=fitness, rmse=rmse, n_iter=it, converged=converged
    )


def _external(backend, method, src, tree, T, max_iter, max_corr, tol):
    """Run the registration in Open3D or small_gicp; (T, iterations, converged)."""
    dst = tree.data
    if backend == "open3d":
        try:  # not an extra: Open3D's wheels need system libraries (libusb) that pip cannot add
            import open3d as o3d
        except ImportError as err:
            raise MissingDependencyError(
                f"icp(backend='open3d') needs 'open3d', which cannot be imported ({err}): "
                "pip install open3d"
            ) from err
        reg = o3d.pipelines.registration
        source = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(src))
        target = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(dst)))
        if method == "point_to_plane":
            target.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(10))
            est = reg.TransformationEstimationPointToPlane()
        else:
            est = reg.TransformationEstimationPointToPoint()
        crit = reg.ICPConvergenceCriteria(
            relative_fitness=tol, relative_rmse=tol, max_iteration=max_iter
        )
        res = reg.registration_icp(source, target, max_corr, T, est, crit)
        return np.asarray(res.transformation, dtype=float).copy(), max_iter, True
    sg = import_optional(
        "small_gicp", dist="iclr26-cognimap3d", extra="small-gicp",
        purpose="icp(backend='small_gicp')",
    )  # fmt: skip
    target = sg.PointCloud(np.asarray(dst, dtype=float))
    source = sg.PointCloud(src)
    target_tree = sg.KdTree(target, num_threads=1)
    if method == "point_to_plane":
        sg.estimate_normals(target, target_tree, num_neighbors=10, num_threads=1)
    res = sg.align(
        target, source, target_tree, init_T_target_source=T,
        registration_type="PLANE_ICP" if method == "point_to_plane" else "ICP",
        max_correspondence_distance=max_corr, num_threads=1, max_iterations=max_iter,
        rotation_epsilon=tol, translation_epsilon=tol,
    )  # fmt: skip
    return (
        np.asarray(res.T_target_source, dtype=float).copy(),
        int(res.iterations),
        bool(res.converged),
    )
