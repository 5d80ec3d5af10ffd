"""Pinhole camera helpers (OpenCV convention: x right, y down, z forward; depth = camera z)."""

from __future__ import annotations

import functools

import numpy as np

from iclr26.shared.validation import check_array

__all__ = [
    "backproject",
    "check_depth",
    "check_intrinsics",
    "intrinsics",
    "median_depth",
    "pixel_grid",
    "project",
]


def intrinsics(fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """The 3×3 matrix ``K`` from focal lengths and principal point (pixels)."""
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def check_intrinsics(K: object, name: str = "K") -> np.ndarray:
    """Validate a 3×3 pinhole ``K`` (finite, positive focal lengths, last row [0, 0, 1])."""
    check_array(K, name, shape=(3, 3))
    K = np.asarray(K, dtype=float)
    if K[0, 0] <= 0 or K[1, 1] <= 0 or np.any(np.abs(K[2] - [0, 0, 1]) > 1e-9):
        raise ValueError(f"{name} must be a pinhole matrix with fx, fy > 0 and last row [0, 0, 1]")
    if K[1, 0] != 0 or K[2, 0] != 0:
        raise ValueError(f"{name} must be upper triangular")
    return K


def check_depth(depth: object, name: str = "depth", *, allow_invalid: bool = False) -> np.ndarray:
    """Validate a depth map ``(H, W)``: finite and > 0, unless ``allow_invalid`` (then NaN/0 mark
    missing pixels, as in real RGB-D, and inf or negative values are still refused)."""
    check_array(depth, name, ndim=2, finite=False)
    d = np.asarray(depth, dtype=float)
    if allow_invalid:
        if np.any(np.isinf(d)) or np.any(d[np.isfinite(d)] < 0):
            raise ValueError(f"{name} must not contain inf or negative values")
        return d
    if not np.all(np.isfinite(d)):
        raise ValueError(f"{name} must be finite (NaN/inf found); mask invalid pixels first")
    if np.any(d <= 0):
        raise ValueError(f"{name} must be > 0 everywhere ({int((d <= 0).sum())} pixels are not)")
    return d


@functools.lru_cache(maxsize=16)
def _grid(h: int, w: int) -> np.ndarray:
    v, u = np.mgrid[0:h, 0:w].astype(float)
    g = np.stack([u, v, np.ones_like(u)])
    g.setflags(write=False)
    return g


def median_depth(depth: np.ndarray) -> np.ndarray:
    """3×3 median of a depth map ``(H, W)`` (edge pixels replicated, as
    ``scipy.ndimage.median_filter(depth, size=3)``), computed by OpenCV in float32: the result is
    that filter's output rounded to float32 (relative change ≤ 6e-8), returned as float64.
    ``depth`` must be finite and > 0."""
    import cv2

    d = check_depth(depth)
    return cv2.medianBlur(d.astype(np.float32), 3).astype(float)


def pixel_grid(h: int, w: int) -> np.ndarray:
    """Homogeneous pixel coordinates ``(3, H, W)`` of pixel centres (u = column, v = row).

    The array is cached per size and read-only; copy it before writing."""
    return _grid(int(h), int(w))


def backproject(depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Camera-frame points ``(H, W, 3)`` ``X = D(u) K⁻¹ ũ`` (spec §4.2, stage 1)."""
    d = check_depth(depth, allow_invalid=True)
    K = check_intrinsics(K)
    h, w = d.shape
    g = pixel_grid(h, w)
    # K⁻¹ ũ in closed form (K is upper triangular): y = (v − cy)/fy, x = (u − cx − s·y)/fx
    y = (g[1] - K[1, 2]) / K[1, 1]
    x = (g[0] - K[0, 2] - K[0, 1] * y) / K[0, 0]
    out = np.empty((*d.shape, 3))
    out[..., 0] = x * d
    out[..., 1] = y * d
    out[..., 2] = d
    return out


def project(points: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates ``(..., 2)`` and depths ``(...)`` of camera-frame points ``(..., 3)``."""
    K = check_intrinsics(K)
    p = np.asarray(points, dtype=float)
    z = p[..., 2]
    zs = np.where(np.abs(z) < 1e-12, 1e-12, z)
    u = K[0, 0] * p[..., 0] / zs + K[0, 1] * p[..., 1] / zs + K[0, 2]
    v = K[1, 1] * p[..., 1] / zs + K[1, 2]
    return np.stack([u, v], axis=-1), z
