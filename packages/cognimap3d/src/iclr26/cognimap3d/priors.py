"""Depth and pose priors (spec §4.1). The paper takes them from VGGT; here a
:class:`NoisyOraclePrior` degrades ground truth the way a feed-forward network errs (unknown
per-sequence scale, per-pixel noise, edge bleeding, drifting integrated poses and a pose bias
that grows with the fraction of moving pixels). A real network plugs in through
:class:`PriorProvider`: any callable ``prior(seq) -> Priors``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.ndimage import gaussian_filter, median_filter

from iclr26.cognimap3d.data import Sequence
from iclr26.cognimap3d.se3 import check_poses, exp_se3, invert
from iclr26.shared.validation import check_array, check_int, check_range

__all__ = ["NoisyOraclePrior", "PriorProvider", "Priors"]


@dataclass
class Priors:
    """Per-frame priors of one sequence, in the prior's own (scaled) frame.

    Attributes:
        depth: ``(T, H, W)`` > 0.
        poses: ``(T, 4, 4)`` camera-to-world.
        K: ``(3, 3)``.
        conf: ``(T, H, W)`` confidence in [0, 1].
    """

    depth: np.ndarray
    poses: np.ndarray
    K: np.ndarray
    conf: np.ndarray

    def validate(self, n: int | None = None) -> Priors:
        """Check shapes and values (and length ``n`` if given); returns self."""
        check_array(self.depth, "depth", ndim=3)
        if np.any(self.depth <= 0):
            raise ValueError("prior depth must be > 0")
        t = len(self.depth)
        check_poses(self.poses, "poses", batch=True)
        check_array(self.conf, "conf", shape=self.depth.shape)
        if len(self.poses) != t:
            raise ValueError(f"poses must have {t} entries, got {len(self.poses)}")
        if n is not None and t != n:
            raise ValueError(f"priors cover {t} frames, the sequence has {n}")
        return self


@runtime_checkable
class PriorProvider(Protocol):
    """Anything that turns a :class:`Sequence` into :class:`Priors` (a VGGT wrapper, say)."""

    def __call__(self, seq: Sequence) -> Priors: ...


class NoisyOraclePrior:
    """Ground truth degraded like a feed-forward depth/pose network (spec §8).

    Args:
        depth_rel_noise: relative depth noise (std), mostly spatially smooth (a Gaussian-filtered
            field, σ = 4 px) plus a white part, as feed-forward depth errors are.
        depth_scale: range of the unknown per-sequence scale (depth and translations); (1, 1)
            by default, i.e. metric priors (spec: (0.7, 1.3) for an up-to-scale network).
        rot_drift_deg: per-frame rotation noise of the relative motion (deg, std per axis).
        trans_drift: per-frame translation noise of the relative motion (m, std per axis).
        dyn_pose_bias: extra per-frame pose error, in units of the drift, times the fraction of
            moving pixels (a network fooled by large movers).
        noise: global multiplier of all noise terms (sweeps).
        seed: random seed; the sequence's index in ``seq.meta['visit']`` is mixed in.
    """

    def __init__(
        self,
        depth_rel_noise: float = 0.03,
        depth_scale: tuple[float, float] = (1.0, 1.0),
        rot_drift_deg: float = 0.15,
        trans_drift: float = 0.01,
        dyn_pose_bias: float = 0.5,
        noise: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.depth_rel_noise = check_range(depth_rel_noise, "depth_rel_noise", low=0)
        lo, hi = depth_scale
        check_range(lo, "depth_scale[0]", low=0, low_inclusive=False)
        check_range(hi, "depth_scale[1]", low=lo)
        self.depth_scale = (float(lo), float(hi))
        self.rot_drift_deg = check_range(rot_drift_deg, "rot_drift_deg", low=0)
        self.trans_drift = check_range(trans_drift, "trans_drift", low=0)
        self.dyn_pose_bias = check_range(dyn_pose_bias, "dyn_pose_bias", low=0)
        self.noise = check_range(noise, "noise", low=0)
        self.seed = check_int(seed, "seed", low=0)

    def __call__(self, seq: Sequence) -> Priors:
        if seq.poses is None:
            raise ValueError("NoisyOraclePrior needs ground-truth poses in the sequence")
        seq.validate()
        rng = np.random.default_rng([self.seed, int(seq.meta.get("visit", 0)), 17])
        n = len(seq)
        s = rng.uniform(*self.depth_scale)
        gt = seq.depth
        # network depth errors are spatially smooth: a low-pass random field (σ = 4 px) carries
        # most of the error, a white component the rest
        smooth = gaussian_filter(rng.standard_normal(gt.shape), sigma=(0, 4, 4))
        smooth /= smooth.std() + 1e-12
        white = rng.standard_normal(gt.shape)
        rel = self.noise * self.depth_rel_noise * (0.9 * smooth + 0.3 * white)
        depth = s * gt * (1 + rel)
        # edge bleeding: a 3×3 median smears depth across discontinuities
        edges = np.zeros(gt.shape, bool)
        rel = np.abs(np.diff(gt, axis=2)) / gt[:, :, 1:]
        edges[:, :, 1:] |= rel > 0.1
        edges[:, :, :-1] |= rel > 0.1
        depth = np.where(edges, median_filter(depth, size=(1, 3, 3)), depth)
        depth = np.maximum(depth, 1e-3)
        conf = np.where(edges, 0.3, 1.0)
        dyn = seq.dyn_mask.mean(axis=(1, 2)) if seq.dyn_mask is not None else np.zeros(n)
        bias_dir = rng.standard_normal(6)
        bias_dir /= np.linalg.norm(bias_dir)
        rel_gt = invert(seq.poses[:-1]) @ seq.poses[1:]
        sig = np.r_[np.full(3, np.radians(self.rot_drift_deg)), np.full(3, self.trans_drift)]
        poses = np.empty_like(seq.poses)
        poses[0] = np.eye(4)
        for t in range(1, n):
            xi = (
                self.noise
                * sig
                * (rng.standard_normal(6) + self.dyn_pose_bias * 4 * dyn[t] * bias_dir)
            )
            step = rel_gt[t - 1] @ exp_se3(xi)
            step[:3, 3] *= s
            poses[t] = poses[t - 1] @ step
        return Priors(depth=depth, poses=poses, K=seq.K.copy(), conf=conf)
