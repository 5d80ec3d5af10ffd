"""The ICP benchmark of ``bench``: every installed backend on the same clouds from the synthetic
world, timed end to end from arrays (each builds its own search tree and normals)."""

from __future__ import annotations

import time

import numpy as np

from iclr26.cognimap3d.camera import backproject
from iclr26.cognimap3d.data import Sequence
from iclr26.cognimap3d.icp import icp
from iclr26.cognimap3d.se3 import exp_se3, invert, log_so3

__all__ = ["icp_backend_rows", "icp_clouds"]

_CANDIDATES = (
    ("scipy", "point_to_point", "numpy + pykdtree (ours)"),
    ("scipy", "point_to_plane", "numpy + pykdtree (ours)"),
    ("open3d", "point_to_point", "Open3D"),
    ("open3d", "point_to_plane", "Open3D"),
    ("small_gicp", "point_to_point", "small_gicp"),
    ("small_gicp", "point_to_plane", "small_gicp"),
)


def _world_points(seq: Sequence, frames: range, stride: int) -> np.ndarray:
    pts = []
    for t in frames:
        X = backproject(seq.depth[t], seq.K)[::stride, ::stride]
        keep = ~seq.dyn_mask[t][::stride, ::stride]
        P = seq.poses[t]
        pts.append(X[keep] @ P[:3, :3].T + P[:3, 3])
    return np.concatenate(pts)


def icp_clouds(ref: Sequence, revisit: Sequence, seed: int = 0):
    """A relocalisation problem: the static map of ``ref`` (every 3rd frame, stride 2) and the
    static points of the revisit's first frame moved by a seeded 3°–5°, 5–10 cm perturbation.
    Returns ``(src, dst, T_true)`` with ``dst ≈ T_true · src``."""
    rng = np.random.default_rng(seed)
    dst = _world_points(ref, range(0, len(ref), 3), 2)
    pts = _world_points(revisit, range(1), 1)
    axis = rng.normal(size=3)
    direction = rng.normal(size=3)
    xi = np.r_[
        axis / np.linalg.norm(axis) * np.radians(rng.uniform(3, 5)),
        direction / np.linalg.norm(direction) * rng.uniform(0.05, 0.10),
    ]
    T_true = exp_se3(xi)
    src = (pts - T_true[:3, 3]) @ T_true[:3, :3]  # T_true maps src back onto the map
    return src, dst, T_true


def _available(backend: str) -> bool:
    if backend == "scipy":
        return True
    try:
        __import__(backend)
    except ImportError:
        return False
    return True


def icp_backend_rows(
    src: np.ndarray, dst: np.ndarray, T_true: np.ndarray, *, rounds: int, max_corr: float = 0.25
) -> tuple[list[dict], dict[str, list[float]]]:
    """Time every installed backend/method in ``rounds`` interleaved rounds (each the fastest of
    two calls; wall clock, and the process CPU time summed over threads); errors and fitness of
    the last call. Returns the table rows and, per row label, the per-round wall seconds (for
    within-round ratios)."""
    cands = [c for c in _CANDIDATES if _available(c[0])]
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    results = {}
    for _ in range(rounds):
        for backend, method, lib in cands:
            label = f"{lib} {method.replace('_', '-')}"
            best, best_cpu = np.inf, np.inf
            for _ in range(2):
                t0, c0 = time.perf_counter(), time.process_time()
                res = icp(src, dst, max_iter=50, max_corr=max_corr, method=method, backend=backend)
                best = min(best, time.perf_counter() - t0)
                best_cpu = min(best_cpu, time.process_time() - c0)
            times.setdefault(label, []).append(best)
            cpu.setdefault(label, []).append(best_cpu)
            results[label] = res
    rows = []
    for label, res in results.items():
        err = invert(T_true) @ res.T
        t, c = np.array(times[label]), np.array(cpu[label])
        rows.append(
            {
                "backend / method": label,
                "wall ms median [min, max]": f"{1e3 * np.median(t):.1f} [{1e3 * t.min():.1f}, "
                f"{1e3 * t.max():.1f}]",
                "CPU ms (all threads)": f"{1e3 * np.median(c):.1f}",
                "rotation error (°)": float(np.degrees(np.linalg.norm(log_so3(err[:3, :3])))),
                "translation error (mm)": float(1e3 * np.linalg.norm(err[:3, 3])),
                "fitness": res.fitness,
                "inlier RMSE (mm)": 1e3 * res.rmse,
                "iterations": res.n_iter,
            }
        )
    return rows, times
