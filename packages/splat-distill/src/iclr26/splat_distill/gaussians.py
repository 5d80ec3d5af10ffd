"""3D Gaussians carrying feature vectors, and pixel-aligned lifting from depth (the MVSplat stand-in).

The paper lifts teacher features onto the Gaussians a frozen feed-forward reconstructor (MVSplat)
predicts, one per context pixel: mean ``μ = o + d·r`` on the pixel ray, covariance proportional to
the pixel footprint at depth ``d`` (Sec. 3.2 and ``gaussian_adapter.py`` of the official code).
Without MVSplat weights, :func:`pixel_aligned_gaussians` builds the same kind of Gaussians from a
given depth map (ground truth, noisy, or predicted).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from iclr26.splat_distill.geometry import Camera, check_tensor, unproject_depth

__all__ = ["Gaussians", "build_covariance", "pixel_aligned_gaussians", "quat_to_rotmat"]


@dataclass(frozen=True)
class Gaussians:
    """N feature Gaussians: ``means`` [N,3], ``covs`` [N,3,3] (world), ``opacities`` [N] in [0, 1],
    ``features`` [N,C].

    Validated on construction: shapes agree, finite values, symmetric positive-definite covariances
    (a Cholesky factorisation must succeed), opacities inside [0, 1]. N = 0 is allowed (renders a
    zero image).
    """

    means: Tensor
    covs: Tensor
    opacities: Tensor
    features: Tensor

    def __post_init__(self) -> None:
        check_tensor(self.means, "means", (None, 3))
        n = self.means.shape[0]
        check_tensor(self.covs, "covs", (n, 3, 3))
        check_tensor(self.opacities, "opacities", (n,))
        check_tensor(self.features, "features", (n, None))
        if n and ((self.opacities < 0).any() or (self.opacities > 1).any()):
            raise ValueError("opacities must lie in [0, 1]")
        if n:
            c = self.covs.detach()
            if (c - c.transpose(1, 2)).abs().max() > 1e-5 * max(1.0, float(c.abs().max())):
                raise ValueError("covs must be symmetric")
            _, info = torch.linalg.cholesky_ex(c.double())
            if (info != 0).any():
                bad = int((info != 0).nonzero()[0])
                raise ValueError(f"covs must be positive definite (covs[{bad}] is not)")

    def __len__(self) -> int:
        return self.means.shape[0]

    @staticmethod
    def concat(parts: list[Gaussians]) -> Gaussians:
        """Concatenate Gaussian sets (e.g. the ones lifted from each context view)."""
        if not parts:
            raise ValueError("parts must be a non-empty list of Gaussians")
        return Gaussians(
            torch.cat([p.means for p in parts]),
            torch.cat([p.covs for p in parts]),
            torch.cat([p.opacities for p in parts]),
            torch.cat([p.features for p in parts]),
        )

    def with_features(self, features: Tensor) -> Gaussians:
        """The same geometry carrying other features [N, C']."""
        return Gaussians(self.means, self.covs, self.opacities, features)


def quat_to_rotmat(quats: Tensor) -> Tensor:
    """Unit quaternions ``(w, x, y, z)`` [N,4] (normalised here) → rotation matrices [N,3,3]."""
    check_tensor(quats, "quats", (None, 4))
    norm = quats.norm(dim=-1, keepdim=True)
    if (norm < 1e-12).any():
        raise ValueError("quats must be non-zero")
    w, x, y, z = (quats / norm).unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(-1, 3, 3)  # fmt: skip


def build_covariance(scales: Tensor, quats: Tensor) -> Tensor:
    """``Σ = R S Sᵀ Rᵀ`` [N,3,3] from positive ``scales`` [N,3] and quaternions [N,4] (3DGS)."""
    check_tensor(scales, "scales", (None, 3))
    check_tensor(quats, "quats", (scales.shape[0], 4))
    if (scales <= 0).any():
        raise ValueError("scales must be positive")
    M = quat_to_rotmat(quats) * scales[:, None, :]
    return M @ M.transpose(1, 2)


def pixel_aligned_gaussians(
    depth: Tensor,
    cam: Camera,
    features: Tensor,
    *,
    scale_px: float = 0.75,
    opacity: float = 0.95,
    normals: Tensor | None = None,
    flatten: float = 0.2,
    stride: int = 1,
) -> Gaussians:
    """One Gaussian per pixel (or per ``stride × stride`` block) on its ray at the given depth.

    Args:
        depth: camera-z depth [H, W] (> 0) of ``cam``'s image.
        cam: the camera the depth and features belong to.
        features: per-pixel features [C, H, W] attached one-to-one to the Gaussians (the
            paper's ``b v c h w → b (v h w) c``); with ``stride > 1`` they are average-pooled and
            depth is sampled at the block centres.
        scale_px: world standard deviation in pixels of footprint: ``σ = scale_px · stride · d / f``
            (MVSplat predicts ``σ ∝ d × pixel size``; this fixes the factor).
        opacity: opacity of every Gaussian.
        normals: optional world normals [H, W, 3]; the Gaussian is then flattened along the
            normal (a surfel) with std ``flatten · σ`` normal to the surface.
        flatten: see ``normals``; in (0, 1].
        stride: pixel subsampling (integer ≥ 1 dividing H and W).

    Returns:
        :class:`Gaussians` with N = (H/stride)·(W/stride).
    """
    check_tensor(depth, "depth", (cam.height, cam.width))
    if (depth <= 0).any():
        raise ValueError("depth must be positive everywhere")
    if not isinstance(features, Tensor) or features.ndim != 3:
        raise ValueError(
            f"features must be a [C, H, W] tensor, got {getattr(features, 'shape', features)}"
        )
    if tuple(features.shape[1:]) != tuple(depth.shape):
        raise ValueError(
            f"features spatial size {tuple(features.shape[1:])} does not match depth {tuple(depth.shape)}"
        )
    check_tensor(features, "features", (None, None, None))
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be an int ≥ 1, got {stride!r}")
    H, W = depth.shape
    if H % stride or W % stride:
        raise ValueError(f"stride {stride} must divide the image size {H}×{W}")
    if not 0 < opacity <= 1:
        raise ValueError(f"opacity must be in (0, 1], got {opacity}")
    if not scale_px > 0:
        raise ValueError(f"scale_px must be positive, got {scale_px}")
    if not 0 < flatten <= 1:
        raise ValueError(f"flatten must be in (0, 1], got {flatten}")
    X = unproject_depth(depth, cam)  # [H, W, 3]
    if stride > 1:
        off = stride // 2
        X = X[off::stride, off::stride]
        d = depth[off::stride, off::stride]
        feats = F.avg_pool2d(features[None], stride)[0]
        if normals is not None:
            check_tensor(normals, "normals", (H, W, 3))
            normals = normals[off::stride, off::stride]
    else:
        d, feats = depth, features
        if normals is not None:
            check_tensor(normals, "normals", (H, W, 3))
    f = 0.5 * (cam.K[0, 0] + cam.K[1, 1]).to(depth.dtype)
    sigma = (scale_px * stride * d / f).reshape(-1)
    n = sigma.shape[0]
    eye = torch.eye(3, dtype=depth.dtype, device=depth.device).expand(n, 3, 3)
    if normals is None:
        covs = sigma[:, None, None] ** 2 * eye
    else:
        nrm = torch.nn.functional.normalize(normals.reshape(-1, 3).to(depth.dtype), dim=-1)
        nn_t = nrm[:, :, None] * nrm[:, None, :]
        covs = sigma[:, None, None] ** 2 * (eye - (1 - flatten**2) * nn_t)
    covs = 0.5 * (covs + covs.transpose(1, 2))
    return Gaussians(
        X.reshape(-1, 3),
        covs,
        torch.full((n,), float(opacity), dtype=depth.dtype, device=depth.device),
        feats.reshape(feats.shape[0], -1).T,
    )
