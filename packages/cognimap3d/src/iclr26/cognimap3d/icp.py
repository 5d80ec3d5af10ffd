"""Iterative closest point (point-to-point, SE(3) or Sim(3)) with scipy's cKDTree, used to
verify a memory recall and to relocalise (spec §4.3). Fitness (fraction of source points with a
target neighbour within ``max_corr``) and inlier RMSE follow Open3D's definitions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from iclr26.cognimap3d.se3 import check_poses, umeyama
from iclr26.shared.validation import check_array, check_int, check_range

__all__ = ["IcpResult", "icp"]


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


def icp(
    src: np.ndarray,
    dst: np.ndarray | cKDTree,
    T_init: np.ndarray | None = None,
    max_iter: int = 30,
    max_corr: float = 0.2,
    with_scale: bool = False,
    tol: float = 1e-5,
    trim: float = 1.0,
) -> IcpResult:
    """Point-to-point ICP: alternate nearest neighbours within ``max_corr`` and the closed-form
    Umeyama/Kabsch update, from ``T_init``.

    Args:
        src: ``(N, 3)`` points to move.
        dst: ``(M, 3)`` target points, or a prebuilt ``scipy.spatial.cKDTree`` of them.
        T_init: initial 4×4 rigid transform (identity by default); with ``with_scale`` it may
            be a similarity (scale times a rotation).
        max_iter: iteration cap.
        max_corr: correspondence distance (metres of the target frame).
        with_scale: estimate a similarity (Sim(3)), for priors with unknown scale.
        tol: stop when the transform changes by less than this.
        trim: keep this fraction of the closest correspondences per iteration (1 = all).
    """
    check_array(src, "src", shape=(None, 3))
    tree = dst if isinstance(dst, cKDTree) else None
    if tree is None:
        check_array(dst, "dst", shape=(None, 3))
        tree = cKDTree(np.asarray(dst, dtype=float))
    check_int(max_iter, "max_iter", low=1)
    check_range(max_corr, "max_corr", low=0, low_inclusive=False)
    check_range(trim, "trim", low=0, high=1, low_inclusive=False)
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
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (reported as n_iter)
        moved = src @ T[:3, :3].T + T[:3, 3]
        d, idx = tree.query(moved, distance_upper_bound=max_corr)
        ok = np.isfinite(d)
        if ok.sum() < 3:
            break
        if trim < 1.0:
            ok &= d <= np.quantile(d[ok], trim)
        s, R, t = umeyama(src[ok], tree.data[idx[ok]], with_scale=with_scale)
        T_new = np.eye(4)
        T_new[:3, :3] = s * R
        T_new[:3, 3] = t
        delta = np.abs(T_new - T).max()
        T, scale = T_new, s
        if delta < tol:
            converged = True
            break
    moved = src @ T[:3, :3].T + T[:3, 3]
    d, _ = tree.query(moved, distance_upper_bound=max_corr)
    ok = np.isfinite(d)
    fitness = float(ok.mean())
    rmse = float(np.sqrt(np.mean(d[ok] ** 2))) if ok.any() else float("inf")
    return IcpResult(
        T=T, scale=float(scale), fitness=fitness, rmse=rmse, n_iter=it, converged=converged
    )
