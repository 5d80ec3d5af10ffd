"""reproduce (spec §9, E1–E4) and bench (spec §11) on the synthetic multi-visit world."""

from __future__ import annotations

import os
import time

import numpy as np

from iclr26.cognimap3d.camera import backproject
from iclr26.cognimap3d.data import RevisitWorld, Sequence, make_visits
from iclr26.cognimap3d.icp_bench import icp_backend_rows, icp_clouds
from iclr26.cognimap3d.memory import MemoryBank
from iclr26.cognimap3d.metrics import ate, ghost_ratio, mask_iou, recon_metrics
from iclr26.cognimap3d.motion import STAGES, MotionCueConfig, MotionCueDetector
from iclr26.cognimap3d.pipeline import CogniMap3D, CogniMap3DConfig
from iclr26.cognimap3d.priors import NoisyOraclePrior
from iclr26.cognimap3d.se3 import umeyama
from iclr26.shared import Report, timeit

__all__ = ["bench", "reproduce"]

PKG = "iclr26-cognimap3d"
PYPOSE_MAX_NODES = 100
CLAIM = (
    "Recalling a verified static map on a revisit gives cross-visit poses and lowers trajectory "
    "error versus no memory, multi-stage motion cues beat a single threshold for dynamic masks, "
    "ICP verification rejects a look-alike scene, and masking removes ghost points from the map."
)


def _to_gt(ref_est: np.ndarray, ref_gt: np.ndarray):
    """The Sim(3) that aligns visit 0's estimate onto ground truth, as a pose mapper."""
    s, R, t = umeyama(ref_est[:, :3, 3], ref_gt[:, :3, 3])

    def apply(P: np.ndarray) -> np.ndarray:
        Q = P.copy()
        Q[:, :3, :3] = R @ P[:, :3, :3]
        Q[:, :3, 3] = s * P[:, :3, 3] @ R.T + t
        return Q

    def apply_pts(p: np.ndarray) -> np.ndarray:
        return s * p @ R.T + t

    return apply, apply_pts


def _gt_static_points(seqs: list[Sequence], stride: int = 2) -> np.ndarray:
    pts = []
    for seq in seqs:
        for t in range(0, len(seq), 3):
            X = backproject(seq.depth[t], seq.K)[::stride, ::stride]
            keep = ~seq.dyn_mask[t][::stride, ::stride]
            P = seq.poses[t]
            pts.append(X[keep] @ P[:3, :3].T + P[:3, 3])
    return np.concatenate(pts)


def _ghost_boxes(seq: Sequence) -> np.ndarray:
    b = seq.actor_boxes.reshape(-1, 2, 3).copy()
    b[:, 0, 2] = 0.05  # the floor under an actor is not a ghost
    return b


def _load() -> str:
    """The 1-minute load average (timings on a shared machine mean little without it)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:  # not available on this platform
        return "n/a"


def _pipeline_speed(visits, priors, rounds: int, seed: int) -> tuple[list[dict], dict]:
    """The full two-visit pipeline (motion cues included, priors precomputed) ``rounds`` times:
    per-module wall and CPU ms per frame, median [min, max] over the rounds, and the fps."""
    n = sum(len(v) for v in visits)
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for _ in range(rounds):
        system = CogniMap3D(
            CogniMap3DConfig(motion=MotionCueConfig(seed=seed)), NoisyOraclePrior(seed=seed)
        )
        res = [
            system.process_visit(v, i, priors=p)
            for i, (v, p) in enumerate(zip(visits, priors, strict=True))
        ]
        for key in res[-1].timings:
            if key == "prior":
                continue
            wall.setdefault(key, []).append(1e3 * sum(r.timings.get(key, 0) for r in res) / n)
            cpu.setdefault(key, []).append(1e3 * sum(r.cpu_timings.get(key, 0) for r in res) / n)
    wall["total"] = list(np.sum([wall[k] for k in list(wall)], axis=0))
    cpu["total"] = list(np.sum([cpu[k] for k in list(cpu)], axis=0))

    def spread(x):
        x = np.asarray(x)
        return f"{np.median(x):.1f} [{x.min():.1f}, {x.max():.1f}]"

    rows = [
        {"module": k, "wall ms / frame": spread(wall[k]), "CPU ms / frame": spread(cpu[k])}
        for k in wall
    ]
    fps = {
        "wall": 1e3 / np.asarray(wall["total"]),
        "cpu": 1e3 / np.asarray(cpu["total"]),
    }
    return rows, fps


def _run_two(cfg, prior, ref, seq, priors, masks, bank=None):
    system = CogniMap3D(cfg, prior, bank if bank is not None else MemoryBank())
    r0 = system.process_visit(ref, 0, priors=priors[0], masks=masks[0])
    r1 = system.process_visit(seq, 1, priors=priors[1], masks=masks[1])
    return system, r0, r1


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """E1 motion masks, E2 poses across visits (+ look-alike false recall), E3 mapping, E4
    timings, and (full run) a prior-noise sweep; see the package README."""
    frames = 36 if quick else 90
    noises = (1.0, 4.0) if quick else (1.0, 2.0, 4.0, 6.0)
    report = Report(
        PKG,
        "reproduce",
        CLAIM,
        seed=seed,
        backends=["opencv-python-headless", "scipy", "pykdtree"],
        config={"quick": quick, "frames_per_visit": frames, "noise_levels": list(noises)},
    )
    world = RevisitWorld(seed=seed)
    visits = make_visits(world, 2, frames)
    look = make_visits(world.lookalike(seed), 1, frames)[0]
    det = MotionCueDetector(MotionCueConfig(seed=seed))
    cfg = CogniMap3DConfig()

    # ---- E1: motion masks per stage (noise level 1)
    prior1 = NoisyOraclePrior(seed=seed)
    t0 = time.perf_counter()
    pri = [prior1(v) for v in visits]
    stages = [det.detect_sequence(v, p) for v, p in zip(visits, pri, strict=True)]
    t_cues = (time.perf_counter() - t0) / sum(len(v) for v in visits)
    names = {
        "single": "(a) single threshold τ=0.35 (MonST3R)",
        "gmm": "(b) + global-mean-move, adaptive τ",
        "vote": "(c) + multi-pair voting",
        "depth": "(d) + depth cue",
        "final": "(e) + region snapping",
    }
    rows = []
    for s in STAGES:
        ious = [mask_iou(st[s], v.dyn_mask) for st, v in zip(stages, visits, strict=True)]
        fpr = [
            float((st[s] & ~v.dyn_mask).sum() / (~v.dyn_mask).sum())
            for st, v in zip(stages, visits, strict=True)
        ]
        rows.append(
            {
                "stage": names[s],
                "IoU visit 0": ious[0],
                "IoU visit 1": ious[1],
                "IoU (pooled)": mask_iou(
                    np.concatenate([st[s] for st in stages]),
                    np.concatenate([v.dyn_mask for v in visits]),
                ),
                "false-positive rate": float(np.mean(fpr)),
            }
        )
    if not quick:
        det_p = MotionCueDetector(MotionCueConfig(seed=seed, temporal_propagation=True))
        stp = [det_p.detect_sequence(v, p)["final"] for v, p in zip(visits, pri, strict=True)]
        rows.append(
            {
                "stage": "(f) + temporal propagation",
                "IoU visit 0": mask_iou(stp[0], visits[0].dyn_mask),
                "IoU visit 1": mask_iou(stp[1], visits[1].dyn_mask),
                "IoU (pooled)": mask_iou(
                    np.concatenate(stp), np.concatenate([v.dyn_mask for v in visits])
                ),
                "false-positive rate": float(
                    np.mean(
                        [
                            (m & ~v.dyn_mask).sum() / (~v.dyn_mask).sum()
                            for m, v in zip(stp, visits, strict=True)
                        ]
                    )
                ),
            }
        )
    report.add_table("E1 — dynamic-mask IoU by stage (DIS flow, noisy-oracle priors)", rows)
    iou_single, iou_final = rows[0]["IoU (pooled)"], rows[4]["IoU (pooled)"]
    report.check(
        "E1: multi-stage cues beat the single threshold",
        iou_final > iou_single,
        f"pooled IoU {iou_final:.3f} vs {iou_single:.3f}",
    )
    report.metric("mask IoU (ours / single threshold)", f"{iou_final:.3f} / {iou_single:.3f}")
    masks = [st["final"] for st in stages]

    # ---- E2: poses across visits, per noise level
    e2_rows, sweep = [], []
    look_pri = None
    for noise in noises:
        prior = NoisyOraclePrior(seed=seed, rot_drift_deg=0.15 * noise, trans_drift=0.01 * noise)
        pr = pri if noise == 1.0 else [pri[0], prior(visits[1])]  # mapping visit stays at 1
        variants = {
            "prior only (no memory)": CogniMap3DConfig(use_memory=False),
            "memory recall, no pose graph": CogniMap3DConfig(optimize=False),
            "memory recall + pose graph (full)": cfg,
        }
        res = {}
        for name, c in variants.items():
            _, r0, r1 = _run_two(c, prior, visits[0], visits[1], pr, masks)
            to_gt, _ = _to_gt(r0.poses, visits[0].poses)
            cross = ate(to_gt(r1.poses), visits[1].poses, align="none") if r1.recalled else None
            res[name] = (r0, r1)
            e2_rows.append(
                {
                    "drift ×": noise,
                    "variant": name,
                    "recalled": r1.recalled,
                    "anchors": len(r1.anchors),
                    "visit-1 ATE sim3 (m)": ate(r1.poses, visits[1].poses),
                    "cross-visit error (m)": cross,
                }
            )
        sweep.append(
            (
                noise,
                e2_rows[-3]["visit-1 ATE sim3 (m)"],
                e2_rows[-1]["visit-1 ATE sim3 (m)"],
                e2_rows[-1]["cross-visit error (m)"],
            )
        )
        if noise == 1.0:
            full_sys_r = res["memory recall + pose graph (full)"]
            # look-alike false recall: memory of a different room with the same textures
            look_pri = prior(look)
            look_masks = det.detect_sequence(look, look_pri)["final"]
            for verify in (True, False):
                bank = MemoryBank(verify=verify)
                sysl = CogniMap3D(cfg, prior, bank)
                sysl.process_visit(look, 0, priors=look_pri, masks=look_masks)
                r1 = sysl.process_visit(visits[1], 1, priors=pr[1], masks=masks[1])
                e2_rows.append(
                    {
                        "drift ×": noise,
                        "variant": f"look-alike memory, ICP verification {'on' if verify else 'off'}",
                        "recalled": r1.recalled,
                        "anchors": len(r1.anchors),
                        "visit-1 ATE sim3 (m)": ate(r1.poses, visits[1].poses),
                        "cross-visit error (m)": None,
                    }
                )
    report.add_table(
        "E2 — revisit (visit-1) poses with and without memory, by the revisit prior's pose-drift multiplier (the mapping visit stays at 1) (ATE after Sim(3) alignment; cross-visit error: visit-1 poses mapped by visit 0's alignment, no re-alignment)",
        e2_rows,
    )
    base = {r["drift ×"]: r for r in e2_rows if r["variant"] == "prior only (no memory)"}
    full = {r["drift ×"]: r for r in e2_rows if r["variant"] == "memory recall + pose graph (full)"}
    lk = {r["variant"]: r for r in e2_rows if r["variant"].startswith("look-alike")}
    recalled_all = all(full[n]["recalled"] for n in noises)
    report.check(
        "E2: the stored scene is recalled and verified at every noise level",
        recalled_all,
        ", ".join(f"drift ×{n}: {'yes' if full[n]['recalled'] else 'no'}" for n in noises),
    )
    hi = max(noises)
    report.check(
        f"E2: memory lowers visit-1 ATE when the revisit prior drifts more (drift ×{hi})",
        full[hi]["visit-1 ATE sim3 (m)"] < base[hi]["visit-1 ATE sim3 (m)"],
        f"{full[hi]['visit-1 ATE sim3 (m)']:.3f} vs {base[hi]['visit-1 ATE sim3 (m)']:.3f} m",
    )
    report.check(
        "E2: memory lowers visit-1 ATE at equal drift (×1)",
        full[1.0]["visit-1 ATE sim3 (m)"] < base[1.0]["visit-1 ATE sim3 (m)"],
        f"{full[1.0]['visit-1 ATE sim3 (m)']:.3f} vs {base[1.0]['visit-1 ATE sim3 (m)']:.3f} m",
    )
    on, off = (
        lk["look-alike memory, ICP verification on"],
        lk["look-alike memory, ICP verification off"],
    )
    report.check(
        "E2: ICP verification rejects the look-alike scene (ATE unchanged)",
        (not on["recalled"])
        and abs(on["visit-1 ATE sim3 (m)"] - base[1.0]["visit-1 ATE sim3 (m)"]) < 1e-9,
        f"recalled: {on['recalled']}, ATE {on['visit-1 ATE sim3 (m)']:.3f} m",
    )
    report.check(
        "E2: without verification the false recall is accepted and raises visit-1 ATE",
        off["recalled"] and off["visit-1 ATE sim3 (m)"] > base[1.0]["visit-1 ATE sim3 (m)"],
        f"ATE {off['visit-1 ATE sim3 (m)']:.3f} vs {base[1.0]['visit-1 ATE sim3 (m)']:.3f} m",
    )
    report.metric(
        "visit-1 ATE drift ×1 (memory / none), m",
        f"{full[1.0]['visit-1 ATE sim3 (m)']:.3f} / {base[1.0]['visit-1 ATE sim3 (m)']:.3f}",
    )
    report.metric("cross-visit error drift ×1, m", full[1.0]["cross-visit error (m)"])

    # ---- E3: mapping and ghosts
    r0, r1 = full_sys_r
    _, to_gt_pts = _to_gt(r0.poses, visits[0].poses)
    gt_pts = _gt_static_points(visits)
    boxes = np.concatenate([_ghost_boxes(v) for v in visits])
    e3 = []
    e3_maps = []
    for label, mk in (
        ("motion cues (ours)", masks),
        ("no masking", [np.zeros_like(m) for m in masks]),
        ("ground-truth masks", [v.dyn_mask for v in visits]),
    ):
        _, a0, a1 = _run_two(cfg, prior1, visits[0], visits[1], pri, mk)
        _, tg = _to_gt(a0.poses, visits[0].poses)
        pts = tg(np.concatenate([a0.static_map, a1.static_map] if a1.recalled else [a0.static_map]))
        m = recon_metrics(pts, gt_pts, thresh=0.1)
        e3_maps.append((label, pts))
        e3.append(
            {
                "masks": label,
                "ghost ratio": ghost_ratio(pts, boxes, margin=0.05),
                "accuracy (m)": m["acc"],
                "completeness (m)": m["comp"],
                "F@0.1 m": m["fscore"],
                "map points": len(pts),
            }
        )
    report.add_table("E3 — fused static map of both visits vs ground-truth static geometry", e3)
    report.check(
        "E3: masking removes ghost points",
        e3[0]["ghost ratio"] < 0.5 * e3[1]["ghost ratio"],
        f"ghost ratio {e3[0]['ghost ratio']:.4f} vs {e3[1]['ghost ratio']:.4f} unmasked",
    )
    report.metric(
        "ghost ratio (ours / unmasked)", f"{e3[0]['ghost ratio']:.4f} / {e3[1]['ghost ratio']:.4f}"
    )

    # ---- E4: per-module timings of the full run (noise 1) and memory size
    system = CogniMap3D(cfg, prior1)
    t0, c0 = time.perf_counter(), time.process_time()
    q0 = system.process_visit(visits[0], 0, priors=pri[0])
    q1 = system.process_visit(visits[1], 1, priors=pri[1])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = len(visits[0]) + len(visits[1])
    e4 = [
        {
            "module": k,
            "wall ms / frame": 1000 * (q0.timings.get(k, 0) + q1.timings.get(k, 0)) / n,
            "CPU ms / frame": 1000 * (q0.cpu_timings.get(k, 0) + q1.cpu_timings.get(k, 0)) / n,
        }
        for k in q1.timings
        if k != "prior"
    ]
    wall -= q0.timings.get("prior", 0) + q1.timings.get("prior", 0)
    cpu -= q0.cpu_timings.get("prior", 0) + q1.cpu_timings.get("prior", 0)
    e4.append(
        {
            "module": "total (no prior)",
            "wall ms / frame": 1000 * wall / n,
            "CPU ms / frame": 1000 * cpu / n,
        }
    )
    load = _load()
    report.add_table(
        f"E4 — per-module time at {visits[0].rgb.shape[1]}×{visits[0].rgb.shape[2]} "
        f"(fps = {n / wall:.1f} wall, {n / cpu:.1f} on CPU time; load average {load}; "
        f"memory {system.memory.size_bytes / 1e6:.2f} MB)",
        e4,
    )
    report.metric("pipeline fps (64×80, 2 visits, wall)", n / wall)
    report.metric("pipeline fps (64×80, 2 visits, CPU time)", n / cpu)
    report.note(f"motion-cue stage alone: {1000 * t_cues:.1f} ms per frame (all stages computed).")
    report.note(
        "The priors are a noisy oracle standing in for VGGT (metric scale); DIS optical flow stands in for RAFT; hand-crafted descriptors stand in for DINOv2/PointNet++; connected components stand in for SAM2."
    )

    # ---- figures
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    to_gt, to_gt_pts = _to_gt(r0.poses, visits[0].poses)
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.5))
    mp = to_gt_pts(np.concatenate([r0.static_map, r1.static_map]))
    sel = mp[:, 2] > 0.1
    ax[0].scatter(mp[sel, 0], mp[sel, 1], s=0.2, c="0.7")
    for P, lab, st in (
        (visits[0].poses, "visit 0 GT", "k-"),
        (visits[1].poses, "visit 1 GT", "k--"),
        (to_gt(r0.poses), "visit 0 est.", "C0-"),
        (to_gt(r1.poses), "visit 1 est. (recalled)", "C1-"),
    ):
        ax[0].plot(P[:, 0, 3], P[:, 1, 3], st, label=lab, lw=1.2)
    ax[0].set_aspect("equal")
    ax[0].set_title("trajectories and static map (top view, metres)")
    ax[0].legend(fontsize=7)
    ns = [s[0] for s in sweep]
    ax[1].plot(ns, [s[1] for s in sweep], "o-", label="no memory")
    ax[1].plot(ns, [s[2] for s in sweep], "s-", label="memory + pose graph")
    ax[1].plot(
        ns,
        [np.nan if s[3] is None else s[3] for s in sweep],
        "^--",
        label="cross-visit error (memory)",
    )
    ax[1].set_xlabel("revisit pose-drift multiplier (mapping visit: 1)")
    ax[1].set_ylabel("visit-1 error (m)")
    ax[1].legend(fontsize=8)
    ax[1].set_title("where memory helps")
    report.add_figure("trajectories", fig)
    fig2, ax2 = plt.subplots(2, 4, figsize=(10, 4))
    t_show = [i for i in range(len(visits[0])) if visits[0].dyn_mask[i].mean() > 0.05][:4] or [
        0,
        1,
        2,
        3,
    ]
    for c, t in enumerate(t_show[:4]):
        ax2[0, c].imshow(visits[0].rgb[t])
        ax2[0, c].contour(visits[0].dyn_mask[t], levels=[0.5], colors="w", linewidths=0.8)
        ax2[1, c].imshow(masks[0][t], cmap="gray")
        ax2[0, c].set_title(f"frame {t}", fontsize=8)
        for a in ax2[:, c]:
            a.axis("off")
    fig2.suptitle("top: frames with GT actor outline; bottom: our dynamic masks")
    report.add_figure("masks", fig2)
    fig3, ax3 = plt.subplots(1, 2, figsize=(9, 4.2), sharex=True, sharey=True)
    lo, hi = boxes[:, 0] - 0.05, boxes[:, 1] + 0.05
    for a, (label, pts) in zip(ax3, e3_maps[:2], strict=True):
        ghost = np.all((pts[:, None] >= lo[None]) & (pts[:, None] <= hi[None]), axis=2).any(1)
        a.scatter(pts[~ghost, 0], pts[~ghost, 1], s=0.3, c=pts[~ghost, 2], cmap="viridis")
        a.scatter(pts[ghost, 0], pts[ghost, 1], s=2, c="red", label="inside an actor's path")
        a.set_title(f"{label}: {ghost.mean():.1%} ghost points", fontsize=9)
        a.set_aspect("equal")
        a.set_xlabel("x (m)")
    ax3[0].set_ylabel("y (m)")
    ax3[0].legend(fontsize=8, loc="lower left", markerscale=4)
    fig3.suptitle("E3 — fused static map of both visits, top view (colour: height)")
    report.add_figure("map", fig3)
    return report


def bench(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """Motion masks vs single threshold vs flow magnitude; pose-graph backends; ICP backends
    (ours, Open3D and small_gicp where installed); the full pipeline vs no memory and the
    concatenated-sequence workaround."""
    from iclr26.cognimap3d.flow import ego_flow
    from iclr26.cognimap3d.graph import PoseGraph
    from iclr26.cognimap3d.motion import single_threshold_mask
    from iclr26.cognimap3d.se3 import exp_se3, invert

    report = Report(
        PKG,
        "bench",
        "Our motion masks, numpy pose graph, ICP and memory recall against the alternatives a user would pick, side by side.",
        seed=seed,
        backends=[
            "opencv-python-headless",
            "scipy",
            "pykdtree",
            "gtsam",
            "pypose",
            "open3d",
            "small_gicp",
        ],
        config={"quick": quick},
    )
    frames = 30 if quick else 60
    world = RevisitWorld(seed=seed)
    visits = make_visits(world, 2, frames)
    prior = NoisyOraclePrior(seed=seed)
    v, pr = visits[0], prior(visits[0])
    det = MotionCueDetector(MotionCueConfig(seed=seed))
    flows = det.flows(v)
    for t in range(len(v) - 1):
        flows(t, t + 1)
    rows = []
    t0 = time.perf_counter()
    ours = det.detect_sequence(v, pr, flows)["final"]
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = np.stack(
        [
            single_threshold_mask(
                flows(t, t + 1), ego_flow(pr.depth[t], v.K, pr.poses[t], pr.poses[t + 1])
            )
            for t in range(len(v) - 1)
        ]
    )
    t_single = time.perf_counter() - t0
    t0 = time.perf_counter()
    mag = np.stack(
        [
            single_threshold_mask(flows(t, t + 1), np.zeros((2, *v.depth.shape[1:])))
            for t in range(len(v) - 1)
        ]
    )
    t_mag = time.perf_counter() - t0
    gt = v.dyn_mask
    rows = [
        {
            "method": "multi-stage cues (ours)",
            "IoU": mask_iou(ours, gt),
            "fps (flows cached)": len(v) / t_ours,
        },
        {
            "method": "single threshold (MonST3R)",
            "IoU": mask_iou(single, gt[:-1]),
            "fps (flows cached)": (len(v) - 1) / t_single,
        },
        {
            "method": "flow magnitude",
            "IoU": mask_iou(mag, gt[:-1]),
            "fps (flows cached)": (len(v) - 1) / t_mag,
        },
    ]
    report.add_table("Motion masks on visit 0", rows)

    # the full pipeline's speed (spec target: >= 10 frames/s at 64x80 on 2 cores)
    speed_rows, fps = _pipeline_speed(
        visits, [prior(x) for x in visits], rounds=3 if quick else 5, seed=seed
    )
    load = _load()
    report.add_table(
        f"Full pipeline speed: two visits of {frames} frames at {v.rgb.shape[1]}×{v.rgb.shape[2]}, "
        f"priors precomputed, median [min, max] over {len(fps['wall'])} runs "
        f"(load average {load})",
        speed_rows,
    )
    report.check(
        "the full pipeline runs at >= 10 frames/s at 64×80 (spec target; on the process's CPU "
        "time, all threads, since wall time on a shared machine depends on its load)",
        bool(np.median(fps["cpu"]) >= 10),
        f"{np.median(fps['cpu']):.1f} frames/s on CPU time [{fps['cpu'].min():.1f}, "
        f"{fps['cpu'].max():.1f}]; wall clock {np.median(fps['wall']):.1f} "
        f"[{fps['wall'].min():.1f}, {fps['wall'].max():.1f}] at load average {load}",
    )
    report.metric("pipeline fps (CPU time)", float(np.median(fps["cpu"])))
    report.metric("pipeline fps (wall)", float(np.median(fps["wall"])))

    # pose graphs: numpy LM vs gtsam LM
    g_rows = []
    try:
        import gtsam  # noqa: F401

        have_gtsam = True
    except ImportError:
        have_gtsam = False
    try:
        import pypose  # noqa: F401

        have_pypose = True
    except ImportError:
        have_pypose = False
    for n in (100, 1000) if quick else (100, 500, 1000, 2000):
        rng = np.random.default_rng(seed)
        gtp = [np.eye(4)]
        for _ in range(n - 1):
            gtp.append(gtp[-1] @ exp_se3(np.r_[rng.normal(0, 0.05, 3), rng.normal(0, 0.3, 3)]))
        g = PoseGraph()
        sig = np.r_[[0.01] * 3, [0.05] * 3]
        g.add_prior(0, gtp[0], np.full(6, 1e-3))
        init = {0: np.eye(4)}
        for i in range(n - 1):
            Z = invert(gtp[i]) @ gtp[i + 1] @ exp_se3(rng.normal(0, 1, 6) * sig)
            g.add_between(i, i + 1, Z, sig)
            init[i + 1] = init[i] @ Z
        for k in range(n // 10, n, n // 10):
            g.add_pose_anchor(k, gtp[k], np.full(6, 0.05))
        tn = timeit(
            lambda g=g, init=init: g.optimize(init, "numpy"), repeats=3 if n <= 500 else 1, warmup=0
        )
        row = {
            "nodes": n,
            "numpy LM (s)": tn.median,
            "numpy cost": g.cost(g.optimize(init, "numpy")),
        }
        if have_gtsam:
            tg = timeit(
                lambda g=g, init=init: g.optimize(init, "gtsam"),
                repeats=3 if n <= 500 else 1,
                warmup=1,
            )
            row |= {
                "gtsam LM (s)": tg.median,
                "gtsam cost": g.cost(g.optimize(init, "gtsam")),
                "numpy / gtsam time": tn.median / tg.median,
            }
        if have_pypose and n <= PYPOSE_MAX_NODES:
            import torch

            # thread count set explicitly (the conventions ask it): one, as the numpy LM
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                if not g_rows:  # torch/pypose start-up, untimed
                    g.optimize(init, "pypose", max_iters=1)
                t0 = time.perf_counter()
                opt = g.optimize(init, "pypose")
                row |= {"pypose LM (s)": time.perf_counter() - t0, "pypose cost": g.cost(opt)}
            finally:
                torch.set_num_threads(threads)
        g_rows.append(row)
    report.add_table(
        "Pose-graph backends (odometry chain + 10 % anchors; median of repeats"
        + (
            f"; pypose on one torch thread, only up to {PYPOSE_MAX_NODES} nodes: its LM "
            "builds dense Jacobians)"
            if have_pypose
            else "; pypose not installed)"
        ),
        g_rows,
    )

    # ICP backends on one relocalisation problem (visit 1's first frame onto visit 0's map)
    src, dst, T_true = icp_clouds(visits[0], visits[1], seed=seed)
    i_rows, i_times = icp_backend_rows(src, dst, T_true, rounds=5 if quick else 9)
    report.add_table(
        f"ICP backends: {len(src)} revisit points onto a {len(dst)}-point map, max_corr 0.25 m, "
        "≤ 50 iterations; time end to end from arrays (search tree and normals included), "
        "interleaved rounds, each the fastest of 2 calls",
        i_rows,
    )
    ours_p2p = "numpy + pykdtree (ours) point-to-point"
    if "Open3D point-to-point" in i_times:
        ratio = np.array(i_times[ours_p2p]) / np.array(i_times["Open3D point-to-point"])
        report.check(
            "ICP at least as fast as Open3D's point-to-point ICP on the same clouds (spec target)",
            bool(np.median(ratio) <= 1.0),
            f"ours / Open3D wall time per round {np.median(ratio):.2f} [{ratio.min():.2f}, "
            f"{ratio.max():.2f}] at load average {_load()}",
        )
        report.metric("ICP time ours / Open3D (point-to-point)", float(np.median(ratio)))
    else:
        report.note(
            "Open3D is not installed, so the ICP speed target was not measured "
            "(pip install open3d; its wheels need the system library libusb-1.0)."
        )

    # full pipeline vs no memory vs the concatenated workaround
    pri = [prior(x) for x in visits]
    masks = [det.detect_sequence(x, p)["final"] for x, p in zip(visits, pri, strict=True)]
    p_rows = []
    for name, c in (
        ("no memory", CogniMap3DConfig(use_memory=False)),
        ("memory recall (ours)", CogniMap3DConfig()),
    ):
        t0 = time.perf_counter()
        _, r0, r1 = _run_two(c, prior, visits[0], visits[1], pri, masks)
        dt = time.perf_counter() - t0
        to_gt, _ = _to_gt(r0.poses, visits[0].poses)
        p_rows.append(
            {
                "method": name,
                "visit-1 ATE (m)": ate(r1.poses, visits[1].poses),
                "cross-visit error (m)": ate(to_gt(r1.poses), visits[1].poses, align="none")
                if r1.recalled
                else None,
                "wall (s, masks cached)": dt,
            }
        )
    # CUT3R-style workaround: one sequence, visit 1 appended to visit 0, no memory
    cat = Sequence(
        rgb=np.concatenate([x.rgb for x in visits]),
        depth=np.concatenate([x.depth for x in visits]),
        K=visits[0].K,
        times=np.r_[visits[0].times, visits[1].times + visits[0].times[-1] + 1.0],
        poses=np.concatenate([x.poses for x in visits]),
        dyn_mask=np.concatenate([x.dyn_mask for x in visits]),
        name="concat",
    )
    t0 = time.perf_counter()
    pc = prior(cat)
    dt = time.perf_counter() - t0
    n0 = len(visits[0])
    est1 = pc.poses[n0:]
    to_gt, _ = _to_gt(pc.poses[:n0], visits[0].poses)
    p_rows.append(
        {
            "method": "concatenated visits, no memory (CUT3R workaround)",
            "visit-1 ATE (m)": ate(est1, visits[1].poses),
            "cross-visit error (m)": ate(to_gt(est1), visits[1].poses, align="none"),
            "wall (s, masks cached)": dt,
        }
    )
    report.add_table("Full pipeline on two visits", p_rows)
    report.note(
        "The concatenated run chains visit 1 onto visit 0 through the prior's odometry across the cut, which a real video network cannot do either (the cut is a teleport); it is an optimistic stand-in."
    )
    report.check(
        "ours has the best mask IoU",
        rows[0]["IoU"] >= max(r["IoU"] for r in rows[1:]),
        f"{rows[0]['IoU']:.3f}",
    )
    if have_gtsam:
        at1k = next(r for r in g_rows if r["nodes"] == 1000)
        report.check(
            "numpy LM within 3× of gtsam's time on a 1,000-node graph (spec target)",
            at1k["numpy / gtsam time"] <= 3,
            f"ratio {at1k['numpy / gtsam time']:.1f}×; same final cost to "
            f"{abs(at1k['numpy cost'] - at1k['gtsam cost']):.1e}",
        )
        report.metric("numpy / gtsam time, 1000 nodes", at1k["numpy / gtsam time"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(
        [r["nodes"] for r in g_rows], [r["numpy LM (s)"] for r in g_rows], "o-", label="numpy LM"
    )
    if have_gtsam:
        ax.plot(
            [r["nodes"] for r in g_rows],
            [r["gtsam LM (s)"] for r in g_rows],
            "s-",
            label="gtsam LM",
        )
    pp_rows = [r for r in g_rows if "pypose LM (s)" in r]
    if pp_rows:
        ax.plot(
            [r["nodes"] for r in pp_rows],
            [r["pypose LM (s)"] for r in pp_rows],
            "^",
            label="pypose LM",
        )
    ax.set_xlabel("pose-graph nodes")
    ax.set_ylabel("seconds")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend()
    report.add_figure("pose_graph_backends", fig)
    return report
