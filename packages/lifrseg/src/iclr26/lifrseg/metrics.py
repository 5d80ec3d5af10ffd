"""Segmentation metrics: confusion matrix and mean IoU (classes absent from both the ground
truth and the prediction are excluded from the mean)."""

from __future__ import annotations

import torch

__all__ = ["confusion_matrix", "mean_iou"]


def _check(pred: torch.Tensor, target: torch.Tensor, num_classes: int) -> None:
    for name, v in (("pred", pred), ("target", target)):
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(v).__name__}")
        if v.is_floating_point() or v.is_complex() or v.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer class ids, got {v.dtype}")
    if pred.shape != target.shape:
        raise ValueError(
            f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ in shape"
        )
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")


def confusion_matrix(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int = 255
) -> torch.Tensor:
    """``C[i, j]`` = number of pixels of true class ``i`` predicted as ``j`` (int64)."""
    _check(pred, target, num_classes)
    p, t = pred.reshape(-1).long(), target.reshape(-1).long()
    keep = t != ignore_index
    p, t = p[keep], t[keep]
    if ((p < 0) | (p >= num_classes)).any() or ((t < 0) | (t >= num_classes)).any():
        raise ValueError(f"class ids must lie in [0, {num_classes}) (or be ignore_index in target)")
    return torch.bincount(t * num_classes + p, minlength=num_classes**2).view(
        num_classes, num_classes
    )


def mean_iou(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int = 255
) -> tuple[float, torch.Tensor]:
    """``(mIoU, per-class IoU)``; IoU is NaN for a class absent from both, excluded from the mean."""
    cm = confusion_matrix(pred, target, num_classes, ignore_index).double()
    inter = cm.diag()
    union = cm.sum(0) + cm.sum(1) - inter
    iou = torch.where(union > 0, inter / union.clamp_min(1), torch.full_like(inter, float("nan")))
    present = union > 0
    miou = float(iou[present].mean()) if present.any() else float("nan")
    return miou, iou
