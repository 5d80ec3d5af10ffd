"""Cameras and multi-view geometry (OpenCV convention, pixel-unit intrinsics).

Conventions used everywhere in the package:

* camera frame: x right, y down, z forward (OpenCV); ``c2w`` maps camera to world coordinates,
  ``w2c`` is its inverse;
* intrinsics ``K`` are in pixels; :func:`normalize_K` / :func:`denormalize_K` convert to and from
  the normalised intrinsics used by MVSplat/pixelSplat (K divided by the image size);
* pixel centres: pixel ``(row i, col j)`` covers ``[j, j+1) × [i, i+1)`` and its centre is at
  continuous coordinates ``(u, v) = (j + 0.5, i + 0.5)`` (the gsplat convention; 3DGS puts
  centres at integers with ``cx = W/2 - 0.5``). :data:`PIXEL_CENTER` holds the offset;
* depth is the camera **z** coordinate, not the distance along the ray
  (:func:`ray_length_to_depth` converts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "PIXEL_CENTER",
    "Camera",
    "denormalize_K",
    "depth_to_ray_length",
    "look_at",
    "normalize_K",
    "pixel_grid",
    "project_points",
    "ray_length_to_depth",
    "relative_pose",
    "unproject_depth",
]

PIXEL_CENTER = 0.5


def check_tensor(x, name: str, shape: tuple[int | None, ...]) -> Tensor:
    """Return ``x`` if it is a finite floating-point tensor of ``shape`` (None = any size);
    otherwise raise TypeError/ValueError naming ``name``. Integer tensors are refused."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != len(shape) or any(
        s is not None and s != d for s, d in zip(shape, x.shape, strict=False)
    ):
        want = "×".join("*" if s is None else str(s) for s in shape)
        raise ValueError(f"{name} must have shape [{want}], got {list(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf")
    return x


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: pixel intrinsics ``K`` [3,3], pose ``c2w`` [4,4], image size.

    Validated on construction: finite float tensors of the right shape, positive focal lengths,
    a rigid rotation in ``c2w`` (orthonormal, det +1, tolerance 1e-3), integer size ≥ 1.
    """

    K: Tensor
    c2w: Tensor
    height: int
    width: int

    def __post_init__(self) -> None:
        check_tensor(self.K, "K", (3, 3))
        check_tensor(self.c2w, "c2w", (4, 4))
        for name in ("height", "width"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int, got {type(v).__name__}")
            if v < 1:
                raise ValueError(f"{name} must be ≥ 1, got {v}")
        if self.K[0, 0] <= 0 or self.K[1, 1] <= 0:
            raise ValueError("K must have positive focal lengths K[0,0], K[1,1]")
        if self.K[2, 2] != 1 or self.K[2, 0] != 0 or self.K[2, 1] != 0:
            raise ValueError("K's last row must be [0, 0, 1]")
        R = self.c2w[:3, :3].double()
        eye = torch.eye(3, dtype=R.dtype, device=R.device)
        if (R.T @ R - eye).abs().max() > 1e-3 or torch.det(R) < 0:
            raise ValueError("c2w[:3,:3] must be a rotation (orthonormal, det +1)")
        last = torch.tensor([0, 0, 0, 1.0], dtype=self.c2w.dtype, device=self.c2w.device)
        if (self.c2w[3] - last).abs().max() > 0:
            raise ValueError("c2w's last row must be [0, 0, 0, 1]")

    @property
    def w2c(self) -> Tensor:
        """World-to-camera [4,4], the exact rigid inverse of ``c2w``."""
        R = self.c2w[:3, :3]
        t = self.c2w[:3, 3]
        out = torch.eye(4, dtype=self.c2w.dtype, device=self.c2w.device)
        out[:3, :3] = R.T
        out[:3, 3] = -R.T @ t
        return out

    @property
    def center(self) -> Tensor:
        """Camera centre in world coordinates [3]."""
        return self.c2w[:3, 3]

    def to(self, device=None, dtype=None) -> Camera:
        """The same camera with tensors moved/cast."""
        return Camera(
            self.K.to(device=device, dtype=dtype),
            self.c2w.to(device=device, dtype=dtype),
            self.height,
            self.width,
        )

    def scaled(self, height: int, width: int) -> Camera:
        """The camera for the same view rendered at another resolution (same field of view)."""
        K = denormalize_K(normalize_K(self.K, self.height, self.width), height, width)
        return Camera(K, self.c2w, height, width)


def normalize_K(K: Tensor, height: int, width: int) -> Tensor:
    """Pixel intrinsics → normalised intrinsics (first row / width, second row / height)."""
    check_tensor(K, "K", (3, 3))
    out = K.clone()
    out[0] = out[0] / width
    out[1] = out[1] / height
    out[2] = torch.tensor([0.0, 0.0, 1.0], dtype=K.dtype, device=K.device)
    return out


def denormalize_K(K: Tensor, height: int, width: int) -> Tensor:
    """Normalised intrinsics → pixel intrinsics (inverse of :func:`normalize_K`)."""
    check_tensor(K, "K", (3, 3))
    out = K.clone()
    out[0] = out[0] * width
    out[1] = out[1] * height
    return out


def pixel_grid(height: int, width: int, *, device=None, dtype=torch.float32) -> Tensor:
    """Continuous coordinates ``(u, v)`` of every pixel centre, [H, W, 2]."""
    v, u = torch.meshgrid(
        torch.arange(height, device=device, dtype=dtype) + PIXEL_CENTER,
        torch.arange(width, device=device, dtype=dtype) + PIXEL_CENTER,
        indexing="ij",
    )
    return torch.stack([u, v], dim=-1)


def camera_dirs(cam: Camera) -> Tensor:
    """Camera-frame ray directions with z = 1 for every pixel, [H, W, 3]."""
    uv = pixel_grid(cam.height, cam.width, device=cam.K.device, dtype=cam.K.dtype)
    fx, fy, cx, cy = cam.K[0, 0], cam.K[1, 1], cam.K[0, 2], cam.K[1, 2]
    x = (uv[..., 0] - cx) / fx
    y = (uv[..., 1] - cy) / fy
    return torch.stack([x, y, torch.ones_like(x)], dim=-1)


def depth_to_ray_length(depth: Tensor, cam: Camera) -> Tensor:
    """Camera-z depth [H, W] → Euclidean distance from the camera centre along each ray."""
    check_tensor(depth, "depth", (cam.height, cam.width))
    return depth * camera_dirs(cam).to(depth.dtype).norm(dim=-1)


def ray_length_to_depth(length: Tensor, cam: Camera) -> Tensor:
    """Inverse of :func:`depth_to_ray_length`."""
    check_tensor(length, "length", (cam.height, cam.width))
    return length / camera_dirs(cam).to(length.dtype).norm(dim=-1)


def unproject_depth(depth: Tensor, cam: Camera) -> Tensor:
    """World points of every pixel centre, [H, W, 3], from camera-z ``depth`` [H, W]."""
    check_tensor(depth, "depth", (cam.height, cam.width))
    X_cam = camera_dirs(cam).to(depth.dtype) * depth[..., None]
    c2w = cam.c2w.to(depth.dtype)
    return X_cam @ c2w[:3, :3].T + c2w[:3, 3]


def project_points(X: Tensor, cam: Camera) -> tuple[Tensor, Tensor]:
    """World points [N, 3] → pixel coordinates ``uv`` [N, 2] and camera depth ``z`` [N].

    Points with z ≤ 0 get ``uv`` = NaN (they are behind the camera).
    """
    check_tensor(X, "X", (None, 3))
    w2c = cam.w2c.to(X.dtype)
    Xc = X @ w2c[:3, :3].T + w2c[:3, 3]
    z = Xc[:, 2]
    K = cam.K.to(X.dtype)
    zs = torch.where(z > 0, z, torch.full_like(z, float("nan")))
    u = K[0, 0] * Xc[:, 0] / zs + K[0, 2]
    v = K[1, 1] * Xc[:, 1] / zs + K[1, 2]
    return torch.stack([u, v], dim=-1), z


def relative_pose(cam_a: Camera, cam_b: Camera) -> Tensor:
    """Transform [4,4] taking camera-a coordinates to camera-b coordinates (``w2c_b @ c2w_a``)."""
    return cam_b.w2c @ cam_a.c2w


def look_at(eye: Tensor, target: Tensor, up: Tensor | None = None) -> Tensor:
    """OpenCV ``c2w`` [4,4] of a camera at ``eye`` looking at ``target`` (world up = +z)."""
    check_tensor(eye, "eye", (3,))
    check_tensor(target, "target", (3,))
    up = torch.tensor([0.0, 0.0, 1.0], dtype=eye.dtype, device=eye.device) if up is None else up
    fwd = target - eye
    if fwd.norm() < 1e-9:
        raise ValueError("eye and target coincide")
    fwd = fwd / fwd.norm()
    right = torch.linalg.cross(fwd, up)
    if right.norm() < 1e-6:
        raise ValueError("viewing direction is parallel to up")
    right = right / right.norm()
    down = torch.linalg.cross(fwd, right)
    c2w = torch.eye(4, dtype=eye.dtype, device=eye.device)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, down, fwd, eye
    return c2w


def intrinsics(height: int, width: int, fov_deg: float = 60.0, dtype=torch.float32) -> Tensor:
    """Pixel ``K`` of a centred pinhole camera with horizontal field of view ``fov_deg``."""
    f = 0.5 * width / math.tan(math.radians(fov_deg) / 2)
    return torch.tensor([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1.0]], dtype=dtype)
