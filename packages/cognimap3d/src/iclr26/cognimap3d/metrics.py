"""Evaluation metrics with the protocols of the field: ATE/RPE (camera centres, Umeyama
alignment of the estimate onto ground truth), depth AbsRel/δ<1.25, reconstruction
accuracy/completeness/Chamfer/F-score, mask IoU and the ghost-point ratio."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from iclr26.cognimap3d.se3 import check_poses, invert, log_so3, umeyama
from iclr26.shared.validation import check_array, check_choice, check_int, check_range

__all__ = [
    "align_trajectory",
    "ate",
    "depth_metrics",
    "ghost_ratio",
    "mask_iou",
    "recon_metrics",
    "rpe",
]

ALIGN = ("sim3", "se3", "none")


def _pair(est: object, gt: object) -> tuple[np.ndarray, np.ndarray]:
    e = check_poses(est, "est", batch=True)
    g = check_poses(gt, "gt", batch=True)
    if e.shape != g.shape:
        raise ValueError(f"est and gt must have the same length, got {len(e)} and {len(g)}")
    return e, g


def align_trajectory(est: np.ndarray, gt: np.ndarray, align: str = "sim3") -> np.ndarray:
    """Camera centres ``(T, 3)`` of ``est`` after aligning them onto ``gt`` (Umeyama; ``"none"``
    leaves them)."""
    check_choice(align, "align", ALIGN)
    e, g = _pair(est, gt)
    pe, pg = e[:, :3, 3], g[:, :3, 3]
    if align == "none":
        return pe
    if len(pe) < 3:
        raise ValueError(f"alignment needs at least 3 poses, got {len(pe)}")
    s, R, t = umeyama(pe, pg, with_scale=align == "sim3")
    return s * pe @ R.T + t


def ate(est: np.ndarray, gt: np.ndarray, align: str = "sim3") -> float:
    """Absolute trajectory error: RMSE of camera centres after aligning ``est`` onto ``gt``.

    Args:
        est, gt: camera-to-world poses ``(T, 4, 4)``.
        align: ``"sim3"`` (monocular protocol), ``"se3"`` or ``"none"`` (cross-visit error).
    """
    aligned = align_trajectory(est, gt, align)
    g = np.asarray(gt, dtype=float)[:, :3, 3]
    return float(np.sqrt(np.mean(np.sum((aligned - g) ** 2, axis=1))))


def rpe(est: np.ndarray, gt: np.ndarray, delta: int = 1) -> tuple[float, float]:
    """Relative pose error over ``delta`` frames: (translation RMSE, rotation RMSE in degrees)."""
    e, g = _pair(est, gt)
    check_int(delta, "delta", low=1, high=max(1, len(e) - 1))
    if len(e) <= delta:
        raise ValueError(f"rpe needs more than delta={delta} poses, got {len(e)}")
    de = invert(e[:-delta]) @ e[delta:]
    dg = invert(g[:-delta]) @ g[delta:]
    err = invert(dg) @ de
    trans = np.sqrt(np.mean(np.sum(err[:, :3, 3] ** 2, axis=1)))
    rot = np.degrees(np.linalg.norm(log_so3(err[:, :3, :3]), axis=1))
    return float(trans), float(np.sqrt(np.mean(rot**2)))


def depth_metrics(
    pred: np.ndarray, gt: np.ndarray, mask: np.ndarray | None = None, align: str = "median"
) -> dict[str, float]:
    """AbsRel and δ<1.25 of a depth map; ``align="median"`` rescales ``pred`` by
    median(gt)/median(pred) over the mask (scale-invariant protocol), ``"none"`` does not."""
    check_choice(align, "align", ("median", "none"))
    check_array(pred, "pred", ndim=2, finite=False)
    check_array(gt, "gt", shape=np.shape(pred), finite=False)
    p, g = np.asarray(pred, dtype=float), np.asarray(gt, dtype=float)
    valid = np.isfinite(p) & np.isfinite(g) & (g > 0) & (p > 0)
    if mask is not None:
        check_array(mask, "mask", shape=p.shape)
        m = np.asarray(mask)
        if m.dtype != bool:
            raise TypeError(f"mask must be boolean, got dtype {m.dtype}")
        valid &= m
    if not valid.any():
        raise ValueError("no valid pixels: pred, gt and mask leave nothing to compare")
    p, g = p[valid], g[valid]
    if align == "median":
        p = p * np.median(g) / np.median(p)
    ratio = np.maximum(p / g, g / p)
    return {"abs_rel": float(np.mean(np.abs(p - g) / g)), "delta1": float(np.mean(ratio < 1.25))}


def recon_metrics(
    pred_pts: np.ndarray, gt_pts: np.ndarray, thresh: float = 0.05
) -> dict[str, float]:
    """Accuracy (mean pred→gt distance), completeness (mean gt→pred), Chamfer (their mean) and
    F-score at ``thresh``."""
    check_array(pred_pts, "pred_pts", shape=(None, 3))
    check_array(gt_pts, "gt_pts", shape=(None, 3))
    check_range(thresh, "thresh", low=0, low_inclusive=False)
    p, g = np.asarray(pred_pts, dtype=float), np.asarray(gt_pts, dtype=float)
    d_pg = cKDTree(g).query(p)[0]
    d_gp = cKDTree(p).query(g)[0]
    prec, rec = float(np.mean(d_pg < thresh)), float(np.mean(d_gp < thresh))
    f = 0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec)
    acc, comp = float(d_pg.mean()), float(d_gp.mean())
    return {"acc": acc, "comp": comp, "chamfer": (acc + comp) / 2, "fscore": f}


def mask_iou(pred: np.ndarray, gt: np.ndarray) -> float:
    """Intersection over union of two boolean masks (1.0 when both are empty)."""
    check_array(pred, "pred", finite=False)
    check_array(gt, "gt", shape=np.shape(pred), finite=False)
    p, g = np.asarray(pred), np.asarray(gt)
    if p.dtype != bool or g.dtype != bool:
        raise TypeError(f"pred and gt must be boolean, got {p.dtype} and {g.dtype}")
    union = np.logical_or(p, g).sum()
    return 1.0 if union == 0 else float(np.logical_and(p, g).sum() / union)


def ghost_ratio(points: np.ndarray, boxes: np.ndarray, margin: float = 0.0) -> float:
    """Fraction of map points inside any of the axis-aligned boxes ``(B, 2, 3)`` (lo, hi) swept
    by moving actors: points that a static map should not contain."""
    check_array(points, "points", shape=(None, 3))
    p = np.asarray(points, dtype=float)
    b = np.asarray(boxes, dtype=float).reshape(-1, 2, 3)
    if len(b) == 0:
        return 0.0
    lo, hi = b[:, 0] - margin, b[:, 1] + margin
    inside = np.all((p[:, None] >= lo[None]) & (p[:, None] <= hi[None]), axis=2).any(axis=1)
    return float(inside.mean())
