"""The CogniMap3D-style pipeline (spec §4): priors → motion cues → static keyframes → memory
retrieval with voting → ICP verification and relocalisation → pose graph with relocalisation
anchors → memory update. One call per visit; the memory persists across visits."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from iclr26.cognimap3d.camera import backproject, median_depth
from iclr26.cognimap3d.data import Sequence
from iclr26.cognimap3d.graph import PoseGraph
from iclr26.cognimap3d.memory import Keyframe, MemoryBank, descriptor_2d, descriptor_3d
from iclr26.cognimap3d.motion import MotionCueConfig, MotionCueDetector
from iclr26.cognimap3d.priors import PriorProvider, Priors
from iclr26.cognimap3d.se3 import invert
from iclr26.shared.progress import progress as _progress
from iclr26.shared.validation import check_choice, check_int, check_range

__all__ = ["CogniMap3D", "CogniMap3DConfig", "VisitResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CogniMap3DConfig:
    """Pipeline settings (our reconstruction; the paper's values are not public).

    Attributes:
        masking: ``"cues"`` (multi-stage motion cues), ``"none"`` (keep every pixel) or ``"gt"``
            (ground-truth masks, an oracle upper bound).
        motion: settings of the motion cues.
        keyframe_stride: every n-th frame is a keyframe.
        point_stride: pixel subsampling of keyframe clouds.
        local_window: keyframes whose clouds form the query cloud of a verification.
        estimate_scale: verify with Sim(3) ICP for priors of unknown scale (off by default:
            on our planar rooms Sim(3) ICP from a keyframe guess often locks onto a wrong scale).
        reloc_every: relocalise every n-th keyframe after a recall (per-keyframe ICP anchors).
        use_memory: query and update the memory.
        optimize: run the pose graph (else the prior poses are mapped by the recall transform).
        backend: pose-graph backend, ``"numpy"`` or ``"gtsam"``.
        odo_sigmas: odometry sigmas (rad, rad, rad, m, m, m).
        anchor_sigma_floor: smallest anchor sigma (m; rad for rotations); scaled up by the ICP RMSE.
        robust: kernel of the anchors and landmark terms (``"huber"``, ``"cauchy"`` or ``None``).
        landmarks: static-landmark terms per accepted relocalisation (recalled memory points
            matched to the keyframe's points, spec §4.4's optional term; 0 = anchors only).
    """

    masking: str = "cues"
    motion: MotionCueConfig = field(default_factory=MotionCueConfig)
    keyframe_stride: int = 3
    point_stride: int = 2
    local_window: int = 3
    estimate_scale: bool = False
    reloc_every: int = 2
    use_memory: bool = True
    optimize: bool = True
    backend: str = "numpy"
    odo_sigmas: tuple[float, ...] = (0.005, 0.005, 0.005, 0.02, 0.02, 0.02)
    anchor_sigma_floor: float = 0.03
    robust: str | None = "huber"
    landmarks: int = 0

    def __post_init__(self) -> None:
        check_choice(self.masking, "masking", ("cues", "none", "gt"))
        check_int(self.keyframe_stride, "keyframe_stride", low=1)
        check_int(self.point_stride, "point_stride", low=1)
        check_int(self.local_window, "local_window", low=1)
        check_int(self.reloc_every, "reloc_every", low=1)
        check_choice(self.backend, "backend", ("numpy", "gtsam"))
        check_choice(self.robust, "robust", (None, "huber", "cauchy"))
        check_range(self.anchor_sigma_floor, "anchor_sigma_floor", low=0, low_inclusive=False)
        check_int(self.landmarks, "landmarks", low=0)
        if len(self.odo_sigmas) != 6 or min(self.odo_sigmas) <= 0:
            raise ValueError("odo_sigmas must be 6 positive numbers")


@dataclass
class VisitResult:
    """Output of one visit.

    Attributes:
        poses: ``(T, 4, 4)`` camera-to-world, in the recalled scene's frame (and scale) when a
            recall was accepted, else in the visit's own prior frame.
        depths: ``(T, H, W)`` prior depth, rescaled into the scene's scale after a recall.
        dyn_masks: ``(T, H, W)`` bool.
        static_map: ``(N, 3)`` static points of this visit (same frame as ``poses``).
        static_colors: ``(N, 3)``.
        scene_id: the memory scene this visit was merged into (new or recalled).
        recalled: whether a stored scene was recalled and verified.
        recalls: one record per verification attempt (keyframe, scene, fitness, rmse, accepted).
        anchors: keyframes that got a relocalisation anchor.
        scale: scale applied to the priors (1 without recall).
        timings: wall-clock seconds per module.
        cpu_timings: CPU seconds of this process per module (all threads): what the module
            costs regardless of other load on the machine.
    """

    poses: np.ndarray
    depths: np.ndarray
    dyn_masks: np.ndarray
    static_map: np.ndarray
    static_colors: np.ndarray
    scene_id: int | None
    recalled: bool
    recalls: list[dict]
    anchors: list[int]
    scale: float
    timings: dict[str, float]
    cpu_timings: dict[str, float] = field(default_factory=dict)


class _Clock:
    """Wall-clock and process CPU seconds accumulated per module."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @staticmethod
    def start() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def add(self, key: str, start: tuple[float, float]) -> None:
        self.wall[key] = self.wall.get(key, 0.0) + time.perf_counter() - start[0]
        self.cpu[key] = self.cpu.get(key, 0.0) + time.process_time() - start[1]

    def touch(self, key: str) -> None:
        self.wall.setdefault(key, 0.0)
        self.cpu.setdefault(key, 0.0)


def _sim(T: np.ndarray) -> tuple[float, np.ndarray]:
    s = float(np.cbrt(np.linalg.det(T[:3, :3])))
    R = T.copy()
    R[:3, :3] /= s
    return s, R


class CogniMap3D:
    """Process visits one after another with a persistent :class:`MemoryBank`.

    Args:
        config: pipeline settings.
        prior: a :class:`PriorProvider` (``prior(seq) -> Priors``).
        memory: the memory bank (a new one if ``None``).
    """

    def __init__(
        self,
        config: CogniMap3DConfig | None = None,
        prior: PriorProvider | None = None,
        memory: MemoryBank | None = None,
    ) -> None:
        if config is not None and not isinstance(config, CogniMap3DConfig):
            raise TypeError(f"config must be a CogniMap3DConfig, got {type(config).__name__}")
        if prior is None or not callable(prior):
            raise TypeError("prior must be a callable PriorProvider (seq -> Priors)")
        if memory is not None and not isinstance(memory, MemoryBank):
            raise TypeError(f"memory must be a MemoryBank, got {type(memory).__name__}")
        self.config = config or CogniMap3DConfig()
        self.prior = prior
        self.memory = memory if memory is not None else MemoryBank()
        self.detector = MotionCueDetector(self.config.motion)

    def _static_cloud(self, depth, K, mask, rgb, conf):
        st = self.config.point_stride
        # a 3×3 median removes most per-pixel prior noise before ICP and fusion
        pts = backproject(median_depth(depth), K)[::st, ::st]
        keep = ~mask[::st, ::st] & (conf[::st, ::st] > 0.5) & (depth[::st, ::st] > 0)
        return pts[keep], rgb[::st, ::st][keep]

    def process_visit(
        self,
        seq: Sequence,
        visit_id: int = 0,
        priors: Priors | None = None,
        masks: np.ndarray | None = None,
        progress: bool = False,
    ) -> VisitResult:
        """Run the pipeline on one visit and update the memory (spec §4).

        Args:
            seq: the visit's frames.
            visit_id: recorded in the memory (``last_seen``, keyframes).
            priors: precomputed priors (default: ``self.prior(seq)``).
            masks: precomputed dynamic masks ``(T, H, W)`` bool (default: per ``config.masking``).
            progress: show a progress bar over the motion cues.
        """
        check_int(visit_id, "visit_id", low=0)
        if not isinstance(seq, Sequence):
            raise TypeError(f"seq must be a Sequence, got {type(seq).__name__}")
        seq.validate()
        if len(seq) < 3:
            raise ValueError(f"a visit needs at least 3 frames, got {len(seq)}")
        cfg, bank = self.config, self.memory
        clock = _Clock()
        t0 = clock.start()
        if priors is None:
            priors = self.prior(seq)
        if not isinstance(priors, Priors):
            raise TypeError(f"prior must return Priors, got {type(priors).__name__}")
        priors.validate(len(seq))
        clock.add("prior", t0)

        t0 = clock.start()
        if masks is not None:
            masks = np.asarray(masks)
            if masks.shape != seq.depth.shape or masks.dtype != bool:
                raise ValueError(f"masks must be a bool array of shape {seq.depth.shape}")
        elif cfg.masking == "cues":
            flows = self.detector.flows(seq)
            masks = []
            prev = None
            for t in _progress(
                range(len(seq)), enabled=progress, desc=f"visit {visit_id}: motion cues"
            ):
                prev = self.detector.detect(seq, priors, t, flows, prev)
                masks.append(prev)
            masks = np.stack(masks)
            clock.add("flow+cues", t0)
        elif cfg.masking == "gt":
            if seq.dyn_mask is None:
                raise ValueError("masking='gt' needs ground-truth dynamic masks")
            masks = seq.dyn_mask.astype(bool)
        else:
            masks = np.zeros(seq.depth.shape, bool)

        t0 = clock.start()
        kf_idx = list(range(0, len(seq), cfg.keyframe_stride))
        clouds, colors, d2, d3, meds = {}, {}, {}, {}, {}
        for k in kf_idx:
            p, c = self._static_cloud(
                priors.depth[k], priors.K, masks[k], seq.rgb[k], priors.conf[k]
            )
            if len(p) < 10:
                p, c = self._static_cloud(
                    priors.depth[k], priors.K, np.zeros_like(masks[k]), seq.rgb[k], priors.conf[k]
                )
            clouds[k], colors[k] = p, c
            d2[k] = descriptor_2d(seq.rgb[k])
            d3[k] = descriptor_3d(p)
            meds[k] = float(np.median(p[:, 2]))
        clock.add("descriptors", t0)

        P = priors.poses
        M = None  # similarity visit frame -> scene frame
        scene = None
        recalls: list[dict] = []
        if cfg.use_memory and bank.scenes:
            bank.reset_votes()
            for n, k in enumerate(kf_idx):
                ta = clock.start()
                sid, hits = bank.propose(d2[k], d3[k])
                clock.add("retrieval", ta)
                if sid is None:
                    continue
                ta = clock.start()
                window = kf_idx[max(0, n - cfg.local_window + 1) : n + 1]
                local = np.concatenate([clouds[j] @ P[j][:3, :3].T + P[j][:3, 3] for j in window])
                best = None
                for _sid, hk, _ in [h for h in hits if h[0] == sid][:1]:
                    kf = bank.scenes[sid].keyframes[hk]
                    s0 = kf.median_depth / max(meds[k], 1e-9) if cfg.estimate_scale else 1.0
                    S = np.eye(4)
                    S[:3, :3] *= s0
                    res = bank.verify(
                        local,
                        sid,
                        kf.pose @ S @ invert(P[k]),
                        with_scale=cfg.estimate_scale,
                        max_iter=20,
                    )
                    recalls.append(
                        {
                            "keyframe": k,
                            "scene": sid,
                            "fitness": res.fitness,
                            "rmse": res.rmse,
                            "accepted": res.accepted,
                        }
                    )
                    if best is None or res.fitness > best.fitness:
                        best = res
                clock.add("icp", ta)
                if best is not None and best.accepted:
                    M, scene = best.T, sid
                    log.info(
                        "visit %d: recalled scene %d at keyframe %d (fitness %.2f)",
                        visit_id,
                        sid,
                        k,
                        best.fitness,
                    )
                    break
        clock.touch("retrieval")

        scale = 1.0
        anchors: list[int] = []
        depths = priors.depth
        if M is not None:
            scale, Mr = _sim(M)
            Pm = P.copy()
            Pm[:, :3, 3] *= scale
            Pm = Mr @ Pm
            depths = priors.depth * scale
            ta = clock.start()
            graph = PoseGraph()
            sig = np.asarray(cfg.odo_sigmas, dtype=float)
            for t in range(len(seq) - 1):
                Z = invert(Pm[t]) @ Pm[t + 1]
                graph.add_between(t, t + 1, Z, sig)
            for k in kf_idx[:: cfg.reloc_every]:
                pts = clouds[k] * scale
                res = bank.verify(pts, scene, Pm[k], with_scale=False, max_iter=20)
                recalls.append(
                    {
                        "keyframe": k,
                        "scene": scene,
                        "fitness": res.fitness,
                        "rmse": res.rmse,
                        "accepted": res.accepted,
                        "anchor": True,
                    }
                )
                if res.accepted:
                    s_a = max(cfg.anchor_sigma_floor, res.rmse)
                    graph.add_pose_anchor(
                        k, res.T, np.r_[np.full(3, s_a / 2.0), np.full(3, s_a)], robust=cfg.robust
                    )
                    anchors.append(k)
                    if cfg.landmarks:
                        p_w, q_c = bank.correspondences(pts, scene, res.T, cfg.landmarks)
                        if len(p_w):
                            graph.add_landmarks(k, p_w, q_c, s_a, robust=cfg.robust)
            clock.add("icp", ta)
            ta = clock.start()
            if cfg.optimize and anchors:
                opt = graph.optimize({t: Pm[t] for t in range(len(seq))}, backend=cfg.backend)
                poses = np.stack([opt[t] for t in range(len(seq))])
            else:
                poses = Pm
            clock.add("graph", ta)
        else:
            poses = P.copy()
            clock.touch("graph")
        clock.touch("icp")

        t0 = clock.start()
        pts_w, cols_w, new_kfs = [], [], []
        for k in kf_idx:
            pc = clouds[k] * scale
            pts_w.append(pc @ poses[k][:3, :3].T + poses[k][:3, 3])
            cols_w.append(colors[k])
            new_kfs.append(Keyframe(poses[k].copy(), d2[k], d3[k], meds[k] * scale, visit_id))
        static_map = np.concatenate(pts_w)
        static_colors = np.concatenate(cols_w)
        if cfg.use_memory:
            if scene is not None:
                bank.update(scene, static_map, static_colors, new_kfs, visit_id)
                sid_out = scene
            else:
                sid_out = bank.store(static_map, static_colors, new_kfs, visit_id)
        else:
            sid_out = None
        clock.add("memory_update", t0)
        return VisitResult(
            poses=poses,
            depths=depths,
            dyn_masks=masks,
            static_map=static_map,
            static_colors=static_colors,
            scene_id=sid_out,
            recalled=M is not None,
            recalls=recalls,
            anchors=anchors,
            scale=scale,
            timings=clock.wall,
            cpu_timings=clock.cpu,
        )
