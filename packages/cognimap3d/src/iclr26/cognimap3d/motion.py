"""Multi-stage motion cues (spec §4.2): which pixels move on their own?

Stage 1 ego-flow from prior depth and poses; stage 2 observed flow; stage 3 the "global mean
move" correction (a robust affine fit of the residual field, removing the smooth image-wide
residual a pose-prior error produces); stage 4 adaptive (MAD) thresholds and voting over frame
pairs with forward–backward occlusion masking; stage 5 the depth-consistency cue (motion along
the viewing ray); stage 6 region snapping (connected components, hole filling) and temporal
propagation of the previous mask by the observed flow (SAM2's role in the paper).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from iclr26.cognimap3d.camera import median_depth, pixel_grid
from iclr26.cognimap3d.data import Sequence
from iclr26.cognimap3d.flow import METHODS, fb_consistency, gray_u8, observed_flow, warp_depth
from iclr26.cognimap3d.priors import Priors
from iclr26.shared.validation import check_choice, check_int, check_range

__all__ = ["FlowCache", "MotionCueConfig", "MotionCueDetector", "single_threshold_mask"]

STAGES = ("single", "gmm", "vote", "depth", "final")


@dataclass(frozen=True)
class MotionCueConfig:
    """Settings of the motion cues; values are our reconstruction unless noted.

    Attributes:
        tau_norm: min–max-normalised threshold of the single-threshold baseline (MonST3R: 0.35).
        tau_px: floor of the adaptive residual threshold in pixels.
        mad_k: threshold = max(tau_px, mad_k · 1.4826 · MAD(residual)).
        global_mean_move: subtract the robust global residual ("global mean move").
        gmm_model: ``"affine"`` (residual ≈ A·[u, v, 1]) or ``"median"`` (a constant vector).
        pair_offsets: neighbours t' = t + o used for voting.
        vote_min: pairs that must agree (capped by the number of valid pairs of a pixel); 3 of
            4 rejects the one-sided halo that occlusion leaves in the forward or backward pairs.
        fb_thresh_px: forward–backward consistency threshold (occlusions).
        depth_cue: use the depth-consistency cue.
        depth_rel_tol: floor of the relative depth-error threshold (adaptive like the flow).
        refine: ``"cc"`` (connected components + hole filling) or ``"none"``.
        min_region_px: components smaller than this are dropped.
        temporal_propagation: carry the previous mask forward by the flow where the current
            residual still exceeds ``hysteresis`` × its threshold. Off by default: on our
            synthetic visits it cost ~0.02–0.04 IoU (reproduce E1 reports it as its own row).
        flow_method: observed-flow backend (``"dis"``, ``"farneback"``, ``"gt_noise"``).
        flow_noise_px: noise of ``"gt_noise"``.
    """

    tau_norm: float = 0.35
    tau_px: float = 1.0
    mad_k: float = 3.0
    global_mean_move: bool = True
    gmm_model: str = "affine"
    pair_offsets: tuple[int, ...] = (-2, -1, 1, 2)
    vote_min: int = 3
    fb_thresh_px: float = 3.0
    depth_cue: bool = True
    depth_rel_tol: float = 0.05
    refine: str = "cc"
    min_region_px: int = 20
    temporal_propagation: bool = False
    hysteresis: float = 0.8
    flow_method: str = "dis"
    flow_noise_px: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        check_range(self.tau_norm, "tau_norm", low=0, high=1)
        check_range(self.tau_px, "tau_px", low=0)
        check_range(self.mad_k, "mad_k", low=0)
        check_choice(self.gmm_model, "gmm_model", ("affine", "median"))
        if not self.pair_offsets or any(
            isinstance(o, bool) or not isinstance(o, int | np.integer) or o == 0
            for o in self.pair_offsets
        ):
            raise ValueError(f"pair_offsets must be non-zero integers, got {self.pair_offsets}")
        check_int(self.vote_min, "vote_min", low=1, high=len(self.pair_offsets))
        check_range(self.fb_thresh_px, "fb_thresh_px", low=0, low_inclusive=False)
        check_range(self.depth_rel_tol, "depth_rel_tol", low=0, low_inclusive=False)
        check_choice(self.refine, "refine", ("cc", "none"))
        check_int(self.min_region_px, "min_region_px", low=0)
        check_range(self.hysteresis, "hysteresis", low=0)
        check_choice(self.flow_method, "flow_method", METHODS)
        check_range(self.flow_noise_px, "flow_noise_px", low=0)


@dataclass
class FlowCache:
    """Observed flows of a sequence, computed once per ordered frame pair."""

    seq: Sequence
    method: str = "dis"
    noise_px: float = 0.3
    seed: int = 0
    _flows: dict = field(default_factory=dict)
    _smooth: dict = field(default_factory=dict)
    _gray: dict = field(default_factory=dict)

    def smooth_depth(self, depth: np.ndarray, t: int) -> np.ndarray:
        """3×3 median of ``depth[t]`` (:func:`~iclr26.cognimap3d.camera.median_depth`; cached per
        depth array and frame)."""
        key = (id(depth), t)
        if key not in self._smooth:
            self._smooth[key] = median_depth(depth[t])
        return self._smooth[key]

    def gray(self, t: int) -> np.ndarray:
        """``uint8`` gray image of frame ``t`` (converted once, then shared by its flow pairs)."""
        if t not in self._gray:
            self._gray[t] = gray_u8(self.seq.rgb[t])
        return self._gray[t]

    def __call__(self, i: int, j: int) -> np.ndarray:
        key = (i, j)
        if key not in self._flows:
            gt = self.seq.gt_flow(i, j)[0] if self.method == "gt_noise" else None
            self._flows[key] = observed_flow(
                self.gray(i),
                self.gray(j),
                self.method,
                gt=gt,
                noise_px=self.noise_px,
                seed=self.seed * 1_000_003 + i * 1009 + j,
            )
        return self._flows[key]


def _mad_threshold(r: np.ndarray, valid: np.ndarray, floor: float, k: float) -> float:
    vals = r[valid] if valid.any() else r.ravel()
    med = np.median(vals)
    return max(floor, float(med + k * 1.4826 * np.median(np.abs(vals - med))))


@functools.lru_cache(maxsize=8)
def _design(h: int, w: int) -> np.ndarray:
    """Affine design ``(3, H·W)``: rows u/W, v/H, 1."""
    g = pixel_grid(h, w)
    A = np.stack([g[0].ravel() / w, g[1].ravel() / h, np.ones(h * w)])
    A.setflags(write=False)
    return A


def _global_move(e: np.ndarray, cand: np.ndarray, model: str) -> tuple[np.ndarray, np.ndarray]:
    """Robust global component of the residual field ``e (2, H, W)`` over candidate pixels, and
    the inlier pixels it was fitted on (the static reference for the adaptive threshold).

    Starts from the candidates with the smaller half of the raw residual, so up to ~50 % of
    moving pixels do not bias the fit, then refits on the best 60 %."""
    _, h, w = e.shape
    ef = e.reshape(2, -1)
    cf = cand.ravel()
    if np.count_nonzero(cf) < 10:
        cf = np.ones(h * w, bool)
    ci = np.flatnonzero(cf)
    r0 = np.hypot(ef[0], ef[1])
    sel = ci[r0[ci] <= np.median(r0[ci])]
    A = _design(h, w)
    for _ in range(2):
        if model == "median":
            coef = np.zeros((3, 2))
            coef[2] = np.median(ef[:, sel], axis=1)
        else:  # least squares through the 3×3 normal equations
            As = A[:, sel]
            coef = np.linalg.solve(As @ As.T + 1e-9 * np.eye(3), As @ ef[:, sel].T)
        g = coef.T @ A
        d = ef - g
        res = np.hypot(d[0], d[1])
        sel = ci[res[ci] <= np.quantile(res[ci], 0.6)]
    mask = np.zeros(h * w, bool)
    mask[sel] = True
    return g.reshape(2, h, w), mask.reshape(h, w)


def single_threshold_mask(
    flow_obs: np.ndarray, flow_ego: np.ndarray, tau_norm: float = 0.35
) -> np.ndarray:
    """MonST3R's recipe: ``‖F_obs − F_ego‖`` min–max normalised per frame, ``> tau_norm``.

    With ``flow_ego`` all zeros this is the flow-magnitude baseline.
    """
    r = np.linalg.norm(np.asarray(flow_obs) - np.asarray(flow_ego), axis=0)
    r = (r - r.min()) / (np.ptp(r) + 1e-9)
    return r > tau_norm


class MotionCueDetector:
    """Dynamic masks from priors and observed flow (spec §4.2); :meth:`stages` exposes every
    stage for ablations, :meth:`detect_sequence` runs the whole sequence with propagation."""

    def __init__(self, cfg: MotionCueConfig | None = None) -> None:
        if cfg is not None and not isinstance(cfg, MotionCueConfig):
            raise TypeError(f"cfg must be a MotionCueConfig, got {type(cfg).__name__}")
        self.cfg = cfg or MotionCueConfig()

    def flows(self, seq: Sequence) -> FlowCache:
        """A flow cache for ``seq`` with this detector's backend."""
        return FlowCache(seq, self.cfg.flow_method, self.cfg.flow_noise_px, self.cfg.seed)

    def stages(
        self,
        seq: Sequence,
        priors: Priors,
        t: int,
        flows: FlowCache,
        prev_mask: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """Masks of frame ``t`` after each stage: ``single`` (MonST3R threshold, one pair),
        ``gmm`` (+ global-mean-move + adaptive threshold, one pair), ``vote`` (+ multi-pair
        voting with occlusion masking), ``depth`` (+ depth cue), ``final`` (+ refinement and
        temporal propagation), plus ``score`` (the max normalised residual, float)."""
        cfg = self.cfg
        n = len(seq)
        check_int(t, "t", low=0, high=n - 1)
        offsets = [o for o in cfg.pair_offsets if 0 <= t + o < n]
        if not offsets:
            raise ValueError(f"frame {t} has no neighbour for pair_offsets {cfg.pair_offsets}")
        primary = min(offsets, key=lambda o: (abs(o), -o))
        D, P, K = priors.depth, priors.poses, priors.K
        h, w = D.shape[1:]
        votes = np.zeros((h, w), int)
        dvotes = np.zeros((h, w), int)
        nvalid = np.zeros((h, w), int)
        score = np.zeros((h, w))
        cand = ~prev_mask if prev_mask is not None else np.ones((h, w), bool)
        out: dict[str, np.ndarray] = {}
        js = [t + o for o in offsets]
        # one validation and one back-projection of frame t for all its pairs
        uv_all, _ = warp_depth(D[t], K, P[t], P[js])
        fe_all = uv_all - pixel_grid(h, w)[:2]
        if cfg.depth_cue:
            uvd_all, zd_all = warp_depth(flows.smooth_depth(D, t), K, P[t], P[js])
        for n_pair, (o, j) in enumerate(zip(offsets, js, strict=True)):
            fo = flows(t, j)
            fe = fe_all[n_pair]
            if o == primary:
                out["single"] = single_threshold_mask(fo, fe, cfg.tau_norm)
            valid = fb_consistency(fo, flows(j, t), cfg.fb_thresh_px)
            e = fo - fe
            ref = valid
            if cfg.global_mean_move:
                g, ref = _global_move(e, cand & valid, cfg.gmm_model)
                e = e - g
            r = np.hypot(e[0], e[1])
            thr = _mad_threshold(r, ref, cfg.tau_px, cfg.mad_k)
            dyn = (r > thr) & valid
            np.maximum(score, np.where(valid, r / thr, 0.0), out=score)
            if o == primary:
                out["gmm"] = r > thr
            votes += dyn
            nvalid += valid
            if cfg.depth_cue:
                uv, z = uvd_all[n_pair], zd_all[n_pair]
                ui = np.clip(np.round(uv[0]).astype(int), 0, w - 1)
                vi = np.clip(np.round(uv[1]).astype(int), 0, h - 1)
                zt = flows.smooth_depth(D, j)[vi, ui]
                rel = (z - zt) / zt
                rel = rel - np.median(rel[valid]) if valid.any() else rel
                rel = np.abs(rel)
                dthr = _mad_threshold(rel, valid, cfg.depth_rel_tol, cfg.mad_k)
                dvotes += (rel > dthr) & valid
        need = np.minimum(cfg.vote_min, np.maximum(nvalid, 1))
        out["vote"] = votes >= need
        mask = out["vote"] | (dvotes >= need) if cfg.depth_cue else out["vote"].copy()
        out["depth"] = mask
        if cfg.temporal_propagation and prev_mask is not None and t > 0:
            bw = flows(t, t - 1)
            v, u = np.mgrid[0:h, 0:w]
            us = np.clip(np.round(u + bw[0]).astype(int), 0, w - 1)
            vs = np.clip(np.round(v + bw[1]).astype(int), 0, h - 1)
            carried = prev_mask[vs, us]
            mask = mask | (carried & (score > cfg.hysteresis))
        if cfg.refine == "cc":
            mask = ndimage.binary_closing(mask, iterations=1)
            mask = ndimage.binary_fill_holes(mask)
            lab, k = ndimage.label(mask)
            if k:
                sizes = ndimage.sum(mask, lab, index=np.arange(1, k + 1))
                keep = np.r_[False, sizes >= cfg.min_region_px]
                mask = keep[lab]
        out["final"] = mask
        out["score"] = score
        return out

    def detect(
        self,
        seq: Sequence,
        priors: Priors,
        t: int,
        flows: FlowCache | None = None,
        prev_mask: np.ndarray | None = None,
    ) -> np.ndarray:
        """The dynamic mask ``(H, W)`` bool of frame ``t``."""
        flows = flows or self.flows(seq)
        return self.stages(seq, priors, t, flows, prev_mask)["final"]

    def detect_sequence(
        self, seq: Sequence, priors: Priors, flows: FlowCache | None = None
    ) -> dict[str, np.ndarray]:
        """Every stage for every frame, ``{stage: (T, H, W) bool}``, with temporal propagation."""
        priors.validate(len(seq))
        flows = flows or self.flows(seq)
        res: dict[str, list[np.ndarray]] = {s: [] for s in STAGES}
        prev = None
        for t in range(len(seq)):
            st = self.stages(seq, priors, t, flows, prev)
            for s in STAGES:
                res[s].append(st[s])
            prev = st["final"]
        return {s: np.stack(v) for s, v in res.items()}
