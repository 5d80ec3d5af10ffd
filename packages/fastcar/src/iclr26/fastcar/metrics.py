"""Drift and redundancy measurements (spec §5.4): agreement, PSNR, TAS–change correlation."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["drift_slope", "frame_psnr", "spearman_per_layer", "token_agreement"]


def _np(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def token_agreement(
    tokens: torch.Tensor | np.ndarray, reference: torch.Tensor | np.ndarray
) -> float:
    """Fraction of positions where two ``(B, T)`` token arrays agree."""
    a, b = _np(tokens), _np(reference)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"tokens {a.shape} and reference {b.shape} must have one non-empty shape")
    return float((a == b).mean())


def frame_psnr(frames: np.ndarray, reference: np.ndarray, peak: float = 1.0) -> np.ndarray:
    """PSNR (dB) per frame index of ``(B, F, H, W)`` frames against the reference, averaged over
    the batch of per-video MSEs (identical frames count as 100 dB)."""
    a, b = np.asarray(frames, np.float64), np.asarray(reference, np.float64)
    if a.shape != b.shape or a.ndim != 4:
        raise ValueError(f"frames {a.shape} and reference {b.shape} must be equal (B, F, H, W)")
    mse = ((a - b) ** 2).mean(axis=(2, 3))
    psnr = np.where(mse > 0, 10 * np.log10(peak**2 / np.maximum(mse, 1e-20)), 100.0)
    return psnr.mean(0)


def drift_slope(per_frame_error: np.ndarray) -> float:
    """Least-squares slope of an error curve against the frame index (error per frame)."""
    e = np.asarray(per_frame_error, np.float64)
    if e.ndim != 1 or e.size < 2 or not np.isfinite(e).all():
        raise ValueError("per_frame_error must be a finite 1-D array with >= 2 frames")
    return float(np.polyfit(np.arange(e.size), e, 1)[0])


def spearman_per_layer(
    records: list[dict], score: str = "score", change: str = "change"
) -> list[float]:
    """Spearman correlation between a recorded score and the MLP-output change, per layer."""
    from scipy.stats import spearmanr

    out = []
    for r in records:
        if not r[score]:
            out.append(float("nan"))
            continue
        s = torch.cat(r[score]).numpy()
        c = torch.cat(r[change]).numpy()
        out.append(float(spearmanr(s, c).statistic))
    return out
