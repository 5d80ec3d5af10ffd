"""Outputs: PLY point clouds, TUM-format trajectories and a top-view trajectory plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr26.shared.validation import check_array

__all__ = ["save_ply", "trajectory_figure", "write_tum_poses"]


def save_ply(path: str | Path, points: np.ndarray, colors: np.ndarray | None = None) -> Path:
    """Write an ASCII PLY of ``points`` ``(N, 3)`` with optional colours in [0, 1]."""
    check_array(points, "points", shape=(None, 3), nonempty=False)
    p = np.asarray(points, dtype=float)
    c = (
        np.zeros_like(p)
        if colors is None
        else np.asarray(check_array(colors, "colors", shape=p.shape, nonempty=False), dtype=float)
    )
    c8 = (np.clip(c, 0, 1) * 255).round().astype(int)
    header = f"ply\nformat ascii 1.0\nelement vertex {len(p)}\nproperty float x\nproperty float y\nproperty float z\nproperty uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n"
    body = "\n".join(
        f"{a:.5f} {b:.5f} {z:.5f} {r} {g} {bl}" for (a, b, z), (r, g, bl) in zip(p, c8, strict=True)
    )
    path = Path(path)
    path.write_text(header + body + ("\n" if len(p) else ""))
    return path


def write_tum_poses(path: str | Path, times: np.ndarray, poses: np.ndarray) -> Path:
    """Write ``timestamp tx ty tz qx qy qz qw`` lines (TUM / evo format)."""
    from scipy.spatial.transform import Rotation

    q = Rotation.from_matrix(np.asarray(poses)[:, :3, :3]).as_quat()
    lines = [
        f"{t:.6f} " + " ".join(f"{v:.9f}" for v in [*P[:3, 3], *qq])
        for t, P, qq in zip(times, poses, q, strict=True)
    ]
    path = Path(path)
    path.write_text("# timestamp tx ty tz qx qy qz qw\n" + "\n".join(lines) + "\n")
    return path


def trajectory_figure(
    est: list[np.ndarray],
    gt: list[np.ndarray | None] | None = None,
    points: np.ndarray | None = None,
):
    """Top view (x, y) of estimated trajectories (and ground truth, and map points)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    if points is not None and len(points):
        sel = points[:: max(1, len(points) // 20000)]
        ax.scatter(sel[:, 0], sel[:, 1], s=0.2, c="0.75")
    for v, P in enumerate(est):
        ax.plot(P[:, 0, 3], P[:, 1, 3], "-", label=f"visit {v} estimate")
    for v, G in enumerate(gt or []):
        if G is not None:
            ax.plot(
                G[:, 0, 3], G[:, 1, 3], "k--", lw=0.8, label=f"visit {v} ground truth (own frame)"
            )
    ax.set_aspect("equal")
    ax.legend(fontsize=7)
    ax.set_title("trajectories (top view)")
    return fig
