"""Optical flow: ego-flow induced by depth and camera motion (spec §4.2 stage 1), observed flow
(OpenCV DIS or Farnebäck standing in for RAFT, or noisy ground truth) and the forward–backward
consistency check used to mask occlusions."""

from __future__ import annotations

import numpy as np

from iclr26.cognimap3d.camera import backproject, check_depth, check_intrinsics, pixel_grid, project
from iclr26.cognimap3d.se3 import check_poses, invert
from iclr26.shared.validation import check_array, check_choice, check_range

__all__ = ["ego_flow", "fb_consistency", "gray_u8", "observed_flow", "warp_depth"]

METHODS = ("dis", "farneback", "gt_noise")


def ego_flow(
    depth: np.ndarray, K: np.ndarray, T_w_src: np.ndarray, T_w_dst: np.ndarray
) -> np.ndarray:
    """Flow ``(2, H, W)`` explained by camera motion alone (spec §4.2 stage 1):
    ``X = D(u) K⁻¹ ũ``, ``u' = π(K T_dst⁻¹ T_src X)``, ``F_ego = u' − u``.

    Args:
        depth: ``(H, W)`` camera-z depth of the source frame, > 0.
        K: ``(3, 3)`` intrinsics.
        T_w_src: camera-to-world pose ``(4, 4)`` of the source frame.
        T_w_dst: camera-to-world pose ``(4, 4)`` of the destination frame, or a batch
            ``(P, 4, 4)`` of destinations: then the flows are ``(P, 2, H, W)``, computed from one
            validation and one back-projection (the motion cues' multi-pair voting).
    """
    uv, _ = warp_depth(depth, K, T_w_src, T_w_dst)
    h, w = np.shape(depth)
    return uv - pixel_grid(h, w)[:2]


def warp_depth(
    depth: np.ndarray, K: np.ndarray, T_w_src: np.ndarray, T_w_dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where each source pixel lands in the destination frame: pixel positions ``(2, H, W)`` and
    the depths it would have there ``(H, W)`` (the depth-consistency cue, spec §4.2 stage 5).

    With a batch of destinations ``T_w_dst (P, 4, 4)`` the outputs are ``(P, 2, H, W)`` and
    ``(P, H, W)`` (inputs validated and back-projected once for all pairs)."""
    d = check_depth(depth)
    K = check_intrinsics(K)
    Ts = check_poses(T_w_src, "T_w_src", batch=False)
    Td = check_poses(T_w_dst, "T_w_dst")
    rel = invert(Td) @ Ts
    h, w = d.shape
    X = backproject(d, K).reshape(-1, 3)
    Xr = X @ np.swapaxes(rel[..., :3, :3], -1, -2) + rel[..., None, :3, 3]
    uv, z = project(Xr, K)
    uv = np.swapaxes(uv, -1, -2).reshape(*uv.shape[:-2], 2, h, w)
    return uv, z.reshape(*z.shape[:-1], h, w)


def _gray8(img: np.ndarray, name: str) -> np.ndarray:
    check_array(img, name)
    a = np.asarray(img)
    if a.ndim == 2 and a.dtype == np.uint8:
        return a
    if a.ndim == 3:
        if a.shape[2] != 3:
            raise ValueError(f"{name} must be (H, W) or (H, W, 3), got {a.shape}")
        a = a.astype(float) @ np.array([0.299, 0.587, 0.114])
    elif a.ndim != 2:
        raise ValueError(f"{name} must be (H, W) or (H, W, 3), got {a.shape}")
    a = np.asarray(a, dtype=float)
    if a.max() <= 1.0 + 1e-6:
        a = a * 255.0
    return np.clip(a, 0, 255).round().astype(np.uint8)


def gray_u8(img: np.ndarray) -> np.ndarray:
    """``(H, W)`` ``uint8`` luma (ITU-R 601 weights) of an ``(H, W, 3)`` RGB image in [0, 1] or
    [0, 255] (or of a gray image): the input :func:`observed_flow` converts to. Convert each frame
    once when it takes part in several flow pairs."""
    return _gray8(img, "img")


def observed_flow(
    img0: np.ndarray,
    img1: np.ndarray,
    method: str = "dis",
    gt: np.ndarray | None = None,
    noise_px: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    """Observed optical flow ``(2, H, W)`` from ``img0`` to ``img1`` (RAFT in the paper).

    Args:
        img0, img1: ``(H, W, 3)`` RGB in [0, 1] or [0, 255], or ``(H, W)`` gray (``uint8``
            gray images are used as they are; :func:`gray_u8` converts once per frame).
        method: ``"dis"`` (OpenCV DIS, medium preset), ``"farneback"`` or ``"gt_noise"``
            (``gt`` plus Gaussian noise of ``noise_px``; for controlled experiments).
        gt: ground-truth flow ``(2, H, W)``, required by ``"gt_noise"``.
        noise_px: noise std in pixels for ``"gt_noise"``.
        seed: noise seed.
    """
    check_choice(method, "method", METHODS)
    check_range(noise_px, "noise_px", low=0)
    if method == "gt_noise":
        if gt is None:
            raise ValueError("method='gt_noise' needs gt")
        check_array(gt, "gt", ndim=3)
        g = np.asarray(gt, dtype=float)
        if g.shape[0] != 2:
            raise ValueError(f"gt must have shape (2, H, W), got {g.shape}")
        rng = np.random.default_rng(seed)
        return g + noise_px * rng.standard_normal(g.shape)
    import cv2

    a, b = _gray8(img0, "img0"), _gray8(img1, "img1")
    if a.shape != b.shape:
        raise ValueError(f"img0 and img1 must have the same size, got {a.shape} and {b.shape}")
    if method == "dis":
        # a fresh solver per pair (~0.1 ms): a reused DIS object can carry state from its
        # previous call into the next, which made the flow of a pair depend on call history
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        dis.setPatchSize(8)
        dis.setPatchStride(3)
        f = dis.calc(a, b, None)
    else:
        f = cv2.calcOpticalFlowFarneback(a, b, None, 0.5, 3, 9, 5, 5, 1.1, 0)
    return np.moveaxis(f.astype(float), -1, 0)


def fb_consistency(fw: np.ndarray, bw: np.ndarray, thresh_px: float = 3.0) -> np.ndarray:
    """Pixels whose forward flow is undone by the backward flow at its target,
    ``|F_fw(u) + F_bw(u + F_fw(u))| < thresh_px`` and that land inside the image (bool ``(H, W)``)."""
    check_array(fw, "fw", ndim=3)
    check_array(bw, "bw", shape=np.shape(fw))
    check_range(thresh_px, "thresh_px", low=0, low_inclusive=False)
    import cv2

    fw, bw = np.asarray(fw, dtype=float), np.asarray(bw, dtype=float)
    _, h, w = fw.shape
    tgt = (pixel_grid(h, w)[:2] + fw).astype(np.float32)
    # both channels in one remap of an (H, W, 2) image
    bw_hw2 = np.ascontiguousarray(np.moveaxis(bw, 0, -1), dtype=np.float32)
    bw_at = np.moveaxis(cv2.remap(bw_hw2, tgt[0], tgt[1], cv2.INTER_LINEAR), -1, 0)
    inside = (tgt[0] >= 0) & (tgt[0] <= w - 1) & (tgt[1] >= 0) & (tgt[1] <= h - 1)
    s = fw + bw_at
    return inside & (np.hypot(s[0], s[1]) < thresh_px)
