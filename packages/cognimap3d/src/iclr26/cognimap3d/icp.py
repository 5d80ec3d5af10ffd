"""Iterative closest point on a kd-tree (pykdtree), used to verify a memory recall and to relocalise
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
from pykdtree.kdtree import KDTree
from scipy.spatial import cKDTree
from threadpoolctl import ThreadpoolController

from iclr26.cognimap3d.se3 import check_poses, exp_so3, umeyama
from iclr26.shared.optional import MissingDependencyError, import_optional
from iclr26.shared.validation import check_array, check_choice, check_int, check_range

__all__ = [
    "BACKENDS",
    "METHODS",
    "THREADED_QUERY_MIN",
    "IcpResult",
    "estimate_normals",
    "icp",
    "kdtree",
    "tree_points",
]

METHODS = ("point_to_point", "point_to_plane")
BACKENDS = ("scipy", "open3d", "small_gicp")
THREADED_QUERY_MIN = 4096
"""Searches of at least this many points are split over threads (fewer: the hand-off costs
more than it saves; after the first iterations ICP searches far fewer points)."""


def kdtree(points: np.ndarray) -> KDTree:
    """The search tree :func:`icp` and :func:`estimate_normals` use for a target cloud
    ``(M, 3)``: pykdtree's ``KDTree`` (float64; exact nearest neighbours, about twice as fast
    per query as scipy's cKDTree on scan-like clouds). Build it once per map and pass it as
    ``dst`` to every :func:`icp` call on that map. Its ``query(points, k,
    distance_upper_bound=)`` follows scipy's conventions (a missing neighbour has distance
    ``inf`` and index ``M``)."""
    check_array(points, "points", shape=(None, 3))
    return KDTree(np.ascontiguousarray(points, dtype=float))


def tree_points(tree: KDTree) -> np.ndarray:
    """The ``(M, 3)`` points of a :func:`kdtree` (a view; pykdtree keeps them flat)."""
    if not isinstance(tree, KDTree) or tree.ndim != 3:
        raise TypeError(f"tree must be a 3-D kdtree(points), got {type(tree).__name__}")
    return tree.data_pts.reshape(-1, 3)


def _as_tree(points, name: str) -> KDTree:
    """``points`` as a search tree: a :func:`kdtree` as is, a scipy cKDTree rebuilt from its
    points, an array validated and indexed."""
    if isinstance(points, KDTree):
        return points
    if isinstance(points, cKDTree):
        return KDTree(np.ascontiguousarray(points.data, dtype=float))
    check_array(points, name, shape=(None, 3))
    return kdtree(points)


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


def estimate_normals(points: np.ndarray | KDTree | cKDTree, k: int = 10) -> np.ndarray:
    """Unit normals ``(M, 3)``: the smallest-eigenvalue eigenvector of the covariance of each
    point's ``k`` nearest neighbours (itself included), as Open3D's ``estimate_normals``. The
    sign is arbitrary (point-to-plane residuals do not depend on it).

    Args:
        points: ``(M, 3)`` points, or a prebuilt :func:`kdtree` (or scipy ``cKDTree``) of them.
        k: neighbours per point, at least 3 and at most M.
    """
    tree = _as_tree(points, "points")
    check_int(k, "k", low=3)
    if k > tree.n:
        raise ValueError(f"k must be at most the number of points ({tree.n}), got {k}")
    pts = tree_points(tree)
    _, idx = tree.query(pts, k=k)
    nb = pts[idx.astype(np.intp)]
    nb = nb - nb.mean(axis=1, keepdims=True)
    cov = np.einsum("mki,mkj->mij", nb, nb)
    _, vecs = np.linalg.eigh(cov)
    return vecs[:, :, 0]


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@cache
def _threadpools() -> ThreadpoolController:
    """The BLAS and OpenMP runtimes (pykdtree's included, imported above). ICP holds them to
    one thread: its products are (N, 3) × (3, 3), which BLAS threads only slow down, and its
    searches are split over our own pool, which hands off cheaply and does not spin."""
    return ThreadpoolController()


def _single_omp_thread() -> None:
    # OpenMP's thread count is per calling thread: this pool thread keeps it (BLAS's limit is
    # process-wide, so it is set only for the duration of an icp call, never here)
    _threadpools().select(internal_api="openmp").limit(limits=1)


@cache
def _pool(n: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(n, thread_name_prefix="icp-query", initializer=_single_omp_thread)


def _query(tree: KDTree, pts: np.ndarray, k: int, bound: float, workers: int):
    """The ``k`` nearest neighbours within ``bound`` (``(d, idx)`` of shape ``(n, k)``, scipy's
    conventions; ``idx`` as intp). Searches of ``THREADED_QUERY_MIN`` points or more are split
    over ``workers`` threads (``-1``: every core): the caller searches one chunk and a
    persistent pool the others (the search releases the GIL). The result does not depend on
    the split."""
    pts = np.ascontiguousarray(pts)
    n_threads = _cores() if workers == -1 else workers
    if n_threads <= 1 or len(pts) < THREADED_QUERY_MIN:
        d, i = tree.query(pts, k=k, distance_upper_bound=bound)
    else:
        cuts = np.linspace(0, len(pts), n_threads + 1).astype(int)
        pool = _pool(n_threads - 1)
        futures = [pool.submit(tree.query, pts[a:b], k, 0.0, bound) for a, b in pairwise(cuts[1:])]
        parts = [tree.query(pts[: cuts[1]], k=k, distance_upper_bound=bound)]
        parts += [f.result() for f in futures]
        d = np.concatenate([p[0] for p in parts])
        i = np.concatenate([p[1] for p in parts])
    return d.reshape(len(pts), k), i.reshape(len(pts), k).astype(np.intp)


class _Nearest:
    """Exact nearest target point within ``max_corr`` of every source point, for a sequence of
    rigid or similarity motions of the source (ICP's correspondence step), searching the tree
    only when the cache cannot prove the answer.

    Each point keeps its last nearest target ``nn`` (if one lay within ``reach``) and ``lb``, a
    lower bound on its distance to every *other* target point (to all of them when it has no
    ``nn``). A search returns the two nearest within ``reach``: the first is ``nn``, the second
    distance (or ``reach``) is ``lb``. Moving a point by δ lowers ``lb`` by at most δ (triangle
    inequality). So when the exact distance to the cached ``nn`` is below ``lb``, ``nn`` is
    still the nearest; when ``lb`` exceeds ``max_corr`` and ``nn`` is no closer, the point has
    no target within ``max_corr``; only the remaining points are searched again. The answers
    are those of a full search at every step. A point without ``nn`` points at a sentinel
    target row far away (index M, pykdtree's "none found"), so its cached distance is huge."""

    def __init__(self, tree: KDTree, n: int, max_corr: float, workers: int):
        self.tree, self.max_corr, self.workers = tree, max_corr, workers
        pts = tree_points(tree)
        self.q = np.vstack((pts, np.full((1, 3), 1e100)))  # row M: the "none" sentinel
        self.reach = 2.0 * max_corr
        self.slack = 1e-9 * max_corr  # rounding of the bounds
        self.nn = np.full(n, len(pts), dtype=np.intp)
        self.lb = np.zeros(n)
        self.prev: np.ndarray | None = None

    def __call__(self, moved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(d, nn)``: distance to the nearest target point (``inf`` or huge beyond
        ``reach``) and its index (M when none), for the source points at ``moved`` ``(n, 3)``."""
        lb = self.lb
        if self.prev is not None:
            step = moved - self.prev
            lb -= np.sqrt(np.einsum("ij,ij->i", step, step)) + self.slack
        self.prev = moved
        diff = moved - self.q[self.nn]
        d = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        todo = np.flatnonzero((d >= lb) & (lb <= self.max_corr))
        if len(todo):
            dk, ik = _query(self.tree, moved[todo], 2, self.reach, self.workers)
            self.nn[todo] = ik[:, 0]
            lb[todo] = np.minimum(dk[:, 1], self.reach)
            d[todo] = dk[:, 0]
        return d, self.nn


def _fitness_rmse(d: np.ndarray, max_corr: float) -> tuple[float, float]:
    ok = d <= max_corr
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
    dst: np.ndarray | KDTree | cKDTree,
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
    searches of ``THREADED_QUERY_MIN`` points or more use ``workers`` threads (every core by
    default, as Open3D).
    Each point keeps its last nearest target point and a bound on its distance to all others,
    and is searched again only when the triangle inequality cannot prove its nearest target
    point (or that none lies within ``max_corr``), so the correspondences equal a full
    search's at every iteration.

    Args:
        src: ``(N, 3)`` points to move.
        dst: ``(M, 3)`` target points, or a prebuilt :func:`kdtree` of them (a scipy
            ``cKDTree`` is accepted and re-indexed).
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
            of fewer than ``THREADED_QUERY_MIN`` points run on the calling thread (a hand-off
            costs more). The result does not depend on it.
    """
    check_choice(method, "method", METHODS)
    check_choice(backend, "backend", BACKENDS)
    check_array(src, "src", shape=(None, 3))
    tree = _as_tree(dst, "dst")
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
    with _threadpools().limit(limits=1):
        if backend != "scipy":
            T, it, converged = _external(backend, method, src, tree, T, max_iter, max_corr, tol)
            d, _ = _query(tree, src @ T[:3, :3].T + T[:3, 3], 1, max_corr, workers)
            fitness, rmse = _fitness_rmse(d[:, 0], max_corr)
            return IcpResult(
                T=T, scale=1.0, fitness=fitness, rmse=rmse, n_iter=it, converged=converged
            )
        T, scale, it, converged, d = _icp_loop(
            src, tree, T, scale, max_iter, max_corr, with_scale, tol, trim, method,
            dst_normals, workers,
        )  # fmt: skip
    fitness, rmse = _fitness_rmse(d, max_corr)
    return IcpResult(
        T=T, scale=float(scale), fitness=fitness, rmse=rmse, n_iter=it, converged=converged
    )


def _icp_loop(src, tree, T, scale, max_iter, max_corr, with_scale, tol, trim, method, normals,
              workers):  # fmt: skip
    """The iterations of :func:`icp` on validated inputs: ``(T, scale, n_iter, converged, d)``
    with ``d`` the final nearest-neighbour distances (for fitness and RMSE)."""
    if method == "point_to_plane" and normals is None:
        normals = estimate_normals(tree)
    elif normals is not None:
        normals = np.asarray(normals, dtype=float)
    dst_pts = tree_points(tree)
    nearest = _Nearest(tree, len(src), max_corr, workers)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (reported as n_iter)
        moved = src @ T[:3, :3].T + T[:3, 3]
        d, nn_all = nearest(moved)
        sel = np.flatnonzero(d <= max_corr)
        if len(sel) < (6 if normals is not None else 3):
            break
        nn = nn_all[sel]
        if trim < 1.0:
            ds = d[sel]
            keep = ds <= np.quantile(ds, trim)
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
    d, _ = nearest(src @ T[:3, :3].T + T[:3, 3])
    return T, scale, it, converged, d


def _external(backend, method, src, tree, T, max_iter, max_corr, tol):
    """Run the registration in Open3D or small_gicp; (T, iterations, converged)."""
    dst = tree_points(tree)
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
