"""``reproduce`` and ``bench`` of LiFR-Seg at CPU scale on SHF-Shapes.

reproduce — spec §11: train a frame segmenter, E-RAFT-lite and LiFR-Seg on SHF-Shapes, then
evaluate every paradigm at δt after each 20 Hz RGB frame: the HFR oracle, LiFR-Seg (with and
without memory), feature warping without confidence, image warping, label warping, hold-last and
early fusion; the same models zero-shot on a "night" split with degraded RGB.

bench — ``softmax_splat`` vs ``grid_sample`` backward warping; ``voxel_grid`` vs the literal DSEC
loop (and tonic, when installed); flow EPE of E-RAFT-lite vs zero flow and OpenCV Farneback on
the LFR frames (non-causal reference); FLOPs and latency per query of every method.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt
import numpy as np
import torch

from iclr26.lifrseg.baselines import EarlyFusionSeg, HFROracle, HoldLast, LiFRMethod, anytime_curve
from iclr26.lifrseg.data import CLASSES, AnytimeSegDataset, collate_anytime, make_split
from iclr26.lifrseg.lifrseg import FlowCache, LiFRSeg, LiFRSegConfig
from iclr26.lifrseg.models import MemoryBank, Segmenter
from iclr26.lifrseg.train import (
    TrainConfig,
    fit_early_fusion,
    fit_lifrseg,
    fit_segmenter,
    load_pretrained_flow,
)
from iclr26.shared import Report
from iclr26.shared import progress as progress_bar

__all__ = ["bench", "reproduce", "run_seed"]

log = logging.getLogger(__name__)
PACKAGE = "iclr26-lifrseg"
BACKENDS = (
    "torch", "numpy", "scikit-image", "h5py", "opencv-python-headless", "tonic", "evlib", "polars",
)  # fmt: skip
CLAIM = (
    "Event-guided, confidence-weighted feature propagation segments at any time between RGB frames "
    "almost as well as an oracle that sees the target frame, beats feature warping without "
    "confidence, image and label warping and hold-last, memory helps at long gaps, and events beat "
    "degraded night RGB."
)
K = len(CLASSES)


def _settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "seeds": 1, "train_seqs": 6, "test_seqs": 2, "duration_s": 0.7,
            "deltas_s": (0.01, 0.05, 0.1, 0.2, 0.4), "seg_steps": 150, "lifr_steps": 25,
            "fusion_steps": 40, "separate_avg": False,
        }  # fmt: skip
    return {
        "seeds": 3, "train_seqs": 16, "test_seqs": 4, "duration_s": 1.0,
        "deltas_s": (0.01, 0.025, 0.05, 0.1, 0.2, 0.4), "seg_steps": 500, "lifr_steps": 120,
        "fusion_steps": 250, "separate_avg": True,
    }  # fmt: skip


def run_seed(seed: int, s: dict[str, Any], *, progress: bool = False) -> dict[str, Any]:
    """Train everything for one seed and evaluate every method; returns curves and examples."""
    torch.manual_seed(seed)
    dur = s["duration_s"]
    train = make_split(s["train_seqs"], seed=seed, duration_s=dur, progress=progress)
    test = make_split(s["test_seqs"], seed=seed + 10_000, duration_s=dur, progress=progress)
    night = make_split(
        s["test_seqs"], seed=seed + 10_000, duration_s=dur, night=True, progress=progress
    )
    deltas = s["deltas_s"]
    d_train, d_test, d_night = (AnytimeSegDataset(x, deltas) for x in (train, test, night))
    seg = Segmenter(K)
    fit_segmenter(seg, train, TrainConfig(s["seg_steps"], 8, seed=seed, progress=progress))
    model = LiFRSeg(LiFRSegConfig(num_classes=K), seg)
    # stage 2: the shipped E-RAFT-lite, pretrained on analytic flow of its own split (the paper
    # starts from a pretrained E-RAFT); `iclr26-lifrseg pretrain-flow` retrains it
    model.flownet.load_state_dict(load_pretrained_flow()[0].state_dict())
    flow_state = {k: v.clone() for k, v in model.flownet.state_dict().items()}
    # the flow network stays frozen from here on: every model below shares its weights, so each
    # (past grid, query grid) pair's flow is computed once for all training runs and methods
    flow_cache = FlowCache(model.flownet)
    seg_state = {k: v.clone() for k, v in seg.state_dict().items()}
    # the model before the end-to-end stage (segmenter as pretrained, flow pretrained, zero-init
    # residual branches): separates what the short end-to-end stage adds or costs
    before_e2e = copy.deepcopy(model)
    lifr_cfg = TrainConfig(s["lifr_steps"], 4, lr=1e-4, seed=seed, progress=progress)  # paper's lr
    fit_lifrseg(model, d_train, lifr_cfg, segmenter_lr_factor=1.0, flow_cache=flow_cache)
    # diagnostic: the same stage with the segmenter fixed (only ScoreNet, RefineNet, memory train)
    seg_fixed_model = copy.deepcopy(before_e2e)
    fit_lifrseg(seg_fixed_model, d_train, lifr_cfg, train_segmenter=False, flow_cache=flow_cache)
    if s["separate_avg"]:  # the "w/o ScoreNet" ablation trained on its own, same schedule
        seg_avg = Segmenter(K)
        seg_avg.load_state_dict(seg_state)
        avg_model = LiFRSeg(LiFRSegConfig(num_classes=K, use_score=False), seg_avg)
        avg_model.flownet.load_state_dict(flow_state)
        fit_lifrseg(avg_model, d_train, lifr_cfg, segmenter_lr_factor=1.0, flow_cache=flow_cache)
    else:  # quick: the same weights with the confidence ignored
        avg_model = model.variant(use_score=False)
    seg_frozen = Segmenter(K)
    seg_frozen.load_state_dict(seg_state)  # the frame segmenter before end-to-end training
    seg_frozen.eval()
    fusion = EarlyFusionSeg(K, model.config.num_bins)
    fit_early_fusion(
        fusion, d_train, TrainConfig(s["fusion_steps"], 4, seed=seed, progress=progress)
    )
    fc = {"flow_cache": flow_cache}
    methods = {
        "HFR oracle": HFROracle(seg_frozen),
        "LiFR-Seg": LiFRMethod(model, **fc),
        "LiFR-Seg w/o memory": LiFRMethod(model, use_memory=False, **fc),
        "LiFR-Seg with analytic flow (reference)": LiFRMethod(model, gt_flow=True, **fc),
        "LiFR-Seg before end-to-end training (reference)": LiFRMethod(before_e2e, **fc),
        "LiFR-Seg, segmenter fixed in end-to-end training (reference)": LiFRMethod(
            seg_fixed_model, **fc
        ),
        "feature warp w/o confidence": LiFRMethod(avg_model, **fc),
        # image and label warping segment with the frame segmenter, as the HFR oracle and
        # hold-last do (0.6.0 used LiFR-Seg's end-to-end fine-tuned segmenter for these two
        # baselines only): the flow and ScoreNet are LiFR-Seg's
        "image warp": LiFRMethod(
            model.variant(
                propagate="image", use_refine=False, use_memory=False, segmenter=seg_frozen
            ),
            **fc,
        ),
        "label warp": LiFRMethod(
            model.variant(
                propagate="logits", use_refine=False, use_memory=False, segmenter=seg_frozen
            ),
            **fc,
        ),
        "hold-last": HoldLast(seg_frozen),
        "early fusion": fusion,
    }
    curves, changed = _evaluate(methods, d_test)
    night_curves = {
        name: anytime_curve(methods[name], d_night, K)[1]
        for name in ("HFR oracle", "LiFR-Seg", "hold-last")
    }
    with torch.no_grad():
        batch = collate_anytime([d_test[0]])
        examples = {
            n: methods[n](batch)[0].argmax(1) for n in ("HFR oracle", "LiFR-Seg", "hold-last")
        }
    log.info("flow cache: %d pairs computed, %d reused", flow_cache.misses, flow_cache.hits)
    return {
        "deltas": list(deltas), "curves": curves, "night": night_curves, "changed": changed,
        "example": {"image": batch["image"][0], "label": batch["label"][0], "pred": examples},
    }  # fmt: skip


@torch.no_grad()
def _evaluate(
    methods: dict[str, Any], ds: AnytimeSegDataset, batch_size: int = 16
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """One pass over ``ds`` running every method once per batch: mIoU per δt (confusion matrices
    over the whole split, as :func:`anytime_curve`) and the pixel accuracy at the largest δt on
    pixels whose class changed since the frame (motion, disocclusion and emergence: where
    propagation must work)."""
    from iclr26.lifrseg.metrics import confusion_matrix

    for m in methods.values():
        for mod in (getattr(m, "model", None), getattr(m, "segmenter", None), m):
            if isinstance(mod, torch.nn.Module):
                mod.eval()
    k = len(ds.deltas)
    cms = {n: [torch.zeros(K, K, dtype=torch.long) for _ in range(k)] for n in methods}
    hits = dict.fromkeys(methods, 0)
    total = 0
    for i in range(0, len(ds), batch_size):
        b = collate_anytime([ds[j] for j in range(i, min(i + batch_size, len(ds)))])
        mask = b["label"][:, -1] != b["label_t"]
        total += int(mask.sum())
        for n, m in methods.items():
            pred = m(b).argmax(2)
            for q in range(k):
                cms[n][q] += confusion_matrix(pred[:, q], b["label"][:, q], K)
            hits[n] += int((pred[:, -1] == b["label"][:, -1])[mask].sum())
    curves = {}
    for n in methods:
        out = []
        for cm in cms[n]:
            union = cm.sum(0) + cm.sum(1) - cm.diag()
            present = union > 0
            out.append(float((cm.diag().double()[present] / union[present]).mean()))
        curves[n] = out
    return curves, {n: hits[n] / max(total, 1) for n in methods}


def _ms(v: list[float]) -> str:
    a = 100 * np.asarray(v, dtype=float)
    return f"{a.mean():.2f} ± {a.std(ddof=1):.2f}" if a.size > 1 else f"{a.mean():.2f}"


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """Spec §11 on SHF-Shapes (3 seeds; ``quick``: 1 seed, shorter training, 5 δt values)."""
    torch.set_num_threads(1)  # small ops: one thread is faster on a shared 2-core machine
    s = _settings(quick)
    seeds = [seed + i for i in range(s["seeds"])]
    flow_meta = load_pretrained_flow()[1]
    report = Report(
        PACKAGE,
        "reproduce",
        CLAIM,
        seed=seed,
        backends=BACKENDS,
        config={**s, "quick": quick, "seed_list": seeds, "size": 64, "flow_pretraining": flow_meta},
    )
    runs = [
        run_seed(sd, s, progress=progress)
        for sd in progress_bar(seeds, desc="seeds", enabled=progress)
    ]
    deltas = runs[0]["deltas"]
    names = list(runs[0]["curves"])
    per = {n: np.array([r["curves"][n] for r in runs]) for n in names}  # [seeds, K]
    rows = [
        {"method": n, **{f"δt={1000 * d:g} ms": _ms(per[n][:, j]) for j, d in enumerate(deltas)}}
        for n in names
    ]
    report.add_table(f"mIoU (%) on SHF-Shapes test, mean ± sd over {len(seeds)} seed(s)", rows)
    if len(seeds) > 1:  # the spread: is one seed an outlier, or do all move together?
        j50 = deltas.index(0.05)
        report.add_table(
            "mIoU (%) at δt=50 ms per seed",
            [
                {
                    "method": n,
                    **{f"seed {sd}": float(100 * per[n][i, j50]) for i, sd in enumerate(seeds)},
                }
                for n in names
            ],
        )
    night = {n: np.array([r["night"][n] for r in runs]) for n in runs[0]["night"]}
    report.add_table(
        "zero-shot 'night' split (degraded RGB, events from the clean scene): mIoU (%)",
        [
            {
                "method": n,
                **{f"δt={1000 * d:g} ms": _ms(night[n][:, j]) for j, d in enumerate(deltas)},
            }
            for n in night
        ],
    )
    report.add_table(
        f"pixel accuracy (%) at δt={1000 * deltas[-1]:g} ms on pixels whose class changed since the frame",
        [{"method": n, "accuracy": _ms([r["changed"][n] for r in runs])} for n in names],
    )
    j50 = deltas.index(0.05)
    m50 = {n: float(per[n][:, j50].mean()) for n in names}
    order = ["LiFR-Seg", "feature warp w/o confidence", "image warp", "label warp", "hold-last"]
    for a, b in itertools.pairwise(order):
        report.check(
            f"{a} > {b} at δt=50 ms", m50[a] > m50[b], f"{100 * m50[a]:.2f} vs {100 * m50[b]:.2f}"
        )
    gaps = [
        float(per["HFR oracle"][:, j].mean() - per["LiFR-Seg"][:, j].mean())
        for j, d in enumerate(deltas)
        if d <= 0.05
    ]
    report.check(
        "LiFR-Seg within 2 mIoU of the HFR oracle for δt <= 50 ms",
        max(gaps) <= 0.02,
        f"largest gap {100 * max(gaps):.2f} points",
    )
    jl = len(deltas) - 1
    mem_gain = float(per["LiFR-Seg"][:, jl].mean() - per["LiFR-Seg w/o memory"][:, jl].mean())
    report.check(
        f"memory adds >= 0.5 mIoU at δt={1000 * deltas[jl]:g} ms",
        mem_gain >= 0.005,
        f"{100 * mem_gain:+.2f} points",
    )
    night_gain = float(night["LiFR-Seg"].mean() - night["HFR oracle"].mean())
    report.check(
        "night: LiFR-Seg >= HFR oracle on degraded RGB (mean over δt)",
        night_gain >= 0,
        f"{100 * night_gain:+.2f} points",
    )
    report.metric("LiFR-Seg mIoU @50ms", round(100 * m50["LiFR-Seg"], 2))
    report.metric("HFR oracle mIoU @50ms", round(100 * m50["HFR oracle"], 2))
    report.metric("memory gain @max δt (points)", round(100 * mem_gain, 2))
    report.add_figure("anytime_curves", _curves_figure(deltas, per, night))
    report.add_figure("examples", _examples_figure(runs[0]["example"], deltas))
    report.note(
        "Scale: 64×64 synthetic SHF-Shapes, tiny models trained from scratch for minutes; orderings only, "
        "not the paper's DSEC numbers. Quick mode evaluates 'feature warp w/o confidence' with the LiFR-Seg "
        "weights and the confidence ignored; the default run trains it separately."
    )
    return report


def _curves_figure(deltas, per, night):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = 1000 * np.asarray(deltas)
    for n, v in per.items():
        axes[0].errorbar(x, 100 * v.mean(0), yerr=100 * v.std(0), marker="o", capsize=2, label=n)
    axes[0].set(
        xscale="log",
        xlabel="δt after the RGB frame (ms)",
        ylabel="mIoU (%)",
        title="SHF-Shapes test",
    )
    axes[0].legend(fontsize=7)
    for n, v in night.items():
        axes[1].errorbar(x, 100 * v.mean(0), yerr=100 * v.std(0), marker="o", capsize=2, label=n)
    axes[1].set(xscale="log", xlabel="δt (ms)", ylabel="mIoU (%)", title="night split (zero-shot)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _examples_figure(ex, deltas):
    preds = ex["pred"]
    rows = len(deltas)
    fig, axes = plt.subplots(rows, 5, figsize=(10, 2 * rows))
    axes = np.atleast_2d(axes)
    for r, d in enumerate(deltas):
        panels = [
            ("frame I_t", ex["image"].permute(1, 2, 0).numpy()),
            (f"GT t+{1000 * d:g} ms", ex["label"][r]),
        ]
        panels += [(n, preds[n][r]) for n in ("HFR oracle", "LiFR-Seg", "hold-last")]
        for c, (title, img) in enumerate(panels):
            ax = axes[r, c]
            ax.imshow(
                img if c == 0 else np.asarray(img),
                vmin=0,
                vmax=K - 1,
                cmap=None if c == 0 else "tab10",
                interpolation="nearest",
            )
            ax.set_title(title, fontsize=7)
            ax.axis("off")
    fig.tight_layout()
    return fig


# --- bench -------------------------------------------------------------------------------------


def _bench_splat(quick: bool) -> list[dict[str, Any]]:
    """``softmax_splat`` (soft) vs ``grid_sample`` backward warping on the same input, and the
    previous literal implementation (four corners, one ``index_add_``): the three are timed in
    interleaved rounds (so a load change on a shared machine hits all of them), and the ratio is
    taken per round; medians and spread (IQR / median) over the rounds."""
    import time

    from iclr26.lifrseg.splat import backward_warp, softmax_splat, splat_sum_reference

    def soft_reference(x, flow, metric):  # the 0.1.0 softmax_splat: one index_add_ splat
        m = torch.exp(metric.clamp(-20, 20) - metric.clamp(-20, 20).amax((1, 2, 3), True))
        out = splat_sum_reference(torch.cat([x * m, m], 1), flow)
        return out[:, :-1] / (out[:, -1:] + 1e-7)

    rows = []
    sizes = (64, 256) if quick else (64, 128, 256, 512)
    for size in sizes:
        for c in (16, 64) if quick else (16, 64, 128):
            g = torch.Generator().manual_seed(size + c)
            x = torch.randn(1, c, size, size, generator=g)
            flow = 3 * torch.randn(1, 2, size, size, generator=g)
            metric = torch.randn(1, 1, size, size, generator=g)
            fns = {
                "splat": lambda: softmax_splat(x, flow, metric),  # noqa: B023
                "ref": lambda: soft_reference(x, flow, metric),  # noqa: B023
                "grid": lambda: backward_warp(x, flow),  # noqa: B023
            }
            rounds = (7 if quick else 11) if size >= 256 else (15 if quick else 25)
            ts = {k: [] for k in fns}
            for f in fns.values():
                f()  # warm-up
            for _ in range(rounds):
                for k, f in fns.items():
                    t0 = time.perf_counter()
                    f()
                    ts[k].append(time.perf_counter() - t0)
            a = {k: np.asarray(v) for k, v in ts.items()}
            ratio = a["splat"] / a["grid"]
            q1, med, q3 = np.percentile(ratio, [25, 50, 75])
            rows.append({
                "size": f"{size}²", "C": c, "rounds": rounds,
                "softmax_splat ms": 1e3 * float(np.median(a["splat"])),
                "0.1.0 splat (index_add_) ms": 1e3 * float(np.median(a["ref"])),
                "grid_sample ms": 1e3 * float(np.median(a["grid"])),
                "splat / grid_sample": float(med),
                "ratio IQR": float(q3 - q1),
                "speed-up vs 0.1.0": float(np.median(a["ref"] / a["splat"])),
            })  # fmt: skip
    return rows


def _bench_voxel(quick: bool) -> tuple[list[dict[str, Any]], float]:
    """``voxel_grid`` vs the literal DSEC loop, tonic and evlib (when installed), timed in
    interleaved rounds; the peers are compared in their own time convention."""
    import time

    from iclr26.lifrseg.events import EventStream, voxel_grid, voxel_grid_reference

    n = 1_000_000  # the size, in both modes
    rng = np.random.default_rng(0)
    h, w, b = 480, 640, 15
    # whole microseconds (tonic and evlib store integer µs): every implementation sees the same times
    t = np.sort(rng.integers(0, 1_000_000, n)) * 1e-6
    ev = EventStream(rng.integers(0, w, n), rng.integers(0, h, n), t, rng.choice([-1, 1], n))
    fns = {
        "ours": lambda: voxel_grid(ev, b, h, w, time_ref="events"),
        "ref": lambda: voxel_grid_reference(ev, b, h, w),
        "ours_t": lambda: voxel_grid(ev, b, h, w, time_ref="tonic", normalize=False),
    }
    diff = float(
        (voxel_grid(ev, b, h, w, time_ref="events") - voxel_grid_reference(ev, b, h, w)).abs().max()
    )
    # tonic / evlib use t* = B(t - t_first)/(t_last - t_first) and no normalisation: compare
    # against our grid in that convention (time_ref="tonic", normalize=False)
    mine = fns["ours_t"]().double().numpy()
    arr = ev.to_structured()
    names = {
        "ours": "iclr26-lifrseg voxel_grid (float64 scatter-add, float32 out)",
        "ref": "DSEC VoxelGrid.convert (literal port)",
        "ours_t": "iclr26-lifrseg voxel_grid, time_ref='tonic', unnormalised",
    }
    try:
        from tonic.transforms import ToVoxelGrid  # optional peer ([tonic] extra)

        to_voxel = ToVoxelGrid(sensor_size=(w, h, 2), n_time_bins=b)
        # (ToVoxelGrid copies its input: the functional form rewrites the polarity in place)
        fns["tonic"] = lambda: to_voxel(arr)[:, 0]
        names["tonic"] = "tonic ToVoxelGrid"
    except ImportError as err:
        log.info("tonic skipped: %s", err)
    try:
        import evlib.representations as er  # optional peer ([evlib] extra)
        import polars as pl

        frame = pl.DataFrame({
            "t": arr["t"], "x": arr["x"].astype(np.int64), "y": arr["y"].astype(np.int64),
            "polarity": arr["p"].astype(np.int64),
        })  # fmt: skip
        fns["evlib"] = lambda: er.densify_voxel_grid(er.create_voxel_grid(frame, h, w, b), b, h, w)[
            :, 0
        ]
        names["evlib"] = "evlib create_voxel_grid + densify"
    except ImportError as err:
        log.info("evlib skipped: %s", err)
    out = {k: f() for k, f in fns.items()}  # warm-up and the values compared
    ts = {k: [] for k in fns}
    for _ in range(3 if quick else 5):  # interleaved rounds
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t0)
    ref_t = np.asarray(ts["ref"])
    peer_t = np.asarray(ts["tonic"]) if "tonic" in ts else None
    rows = []
    for k in fns:
        a = np.asarray(ts[k])
        d = float("nan")
        if k not in ("ours", "ref"):
            d = float(np.abs(np.asarray(out[k], dtype=np.float64) - mine).max())
        rows.append({
            "implementation": names[k], "events": n, "rounds": len(a),
            "ms": 1e3 * float(np.median(a)),
            "min ms": 1e3 * float(a.min()), "max ms": 1e3 * float(a.max()),
            "speed-up vs DSEC loop (per round, median)": float(np.median(ref_t / a)),
            "speed-up vs tonic (per round, median)": (
                float(np.median(peer_t / a)) if peer_t is not None else float("nan")
            ),
            "max |diff| vs ours (tonic convention)": d,
        })  # fmt: skip
    for name in ("tonic", "evlib"):
        if name not in fns:
            rows.append({
                "implementation": f"{name} (not installed: skipped)", "events": n, "rounds": 0,
                "ms": float("nan"), "min ms": float("nan"), "max ms": float("nan"),
                "speed-up vs DSEC loop (per round, median)": float("nan"),
                "speed-up vs tonic (per round, median)": float("nan"),
                "max |diff| vs ours (tonic convention)": float("nan"),
            })  # fmt: skip
    return rows, diff


def _farneback(prev: np.ndarray, nxt: np.ndarray) -> np.ndarray | None:
    try:
        import cv2
    except ImportError:
        return None
    g0 = (prev.mean(-1) * 255).astype(np.uint8)
    g1 = (nxt.mean(-1) * 255).astype(np.uint8)
    f = cv2.calcOpticalFlowFarneback(g0, g1, None, 0.5, 3, 9, 3, 5, 1.1, 0)
    return np.moveaxis(f, -1, 0)


def bench(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """Operators, representation, flow and per-query cost, side by side in one run."""
    torch.set_num_threads(1)
    report = Report(
        PACKAGE, "bench",
        "Pure-torch softmax splatting costs within 3x of grid_sample backward warping, the voxel grid "
        "is faster than the reference loop, E-RAFT-lite beats zero flow, and one anytime query of the "
        "full model at 64² runs under 20 ms on one core.",
        seed=seed, backends=BACKENDS, config={"quick": quick, "threads": 1},
    )  # fmt: skip
    rows = _bench_splat(quick)
    report.add_table("softmax_splat (soft) vs grid_sample backward warp, forward, one thread", rows)
    r256 = next(r for r in rows if r["size"] == "256²" and r["C"] == 64)["splat / grid_sample"]
    report.check(
        "softmax_splat at 256², C=64 within 3x of grid_sample", r256 <= 3.0, f"ratio {r256:.2f}"
    )
    vrows, diff = _bench_voxel(quick)
    report.add_table("voxel grid, 15 bins, 480×640", vrows)
    report.check("voxel_grid equals the DSEC loop (1e-5)", diff < 1e-5, f"max |diff| {diff:.2e}")
    sp = "speed-up vs DSEC loop (per round, median)"
    report.check("voxel_grid faster than the DSEC loop", vrows[0][sp] > 1, f"{vrows[0][sp]:.1f}x")
    peer = next((r for r in vrows if r["implementation"] == "tonic ToVoxelGrid"), None)
    if peer is not None:
        ours = vrows[2]
        speed = ours["speed-up vs tonic (per round, median)"]
        report.check(
            f"voxel_grid at least as fast as tonic's ToVoxelGrid ({ours['events']} events)",
            speed >= 1.0,
            f"{speed:.2f}x tonic per round; {ours['ms']:.0f} [{ours['min ms']:.0f}, "
            f"{ours['max ms']:.0f}] vs {peer['ms']:.0f} [{peer['min ms']:.0f}, "
            f"{peer['max ms']:.0f}] ms, median [min, max]",
        )
        d = peer["max |diff| vs ours (tonic convention)"]
        report.check(
            "voxel_grid(time_ref='tonic') equals tonic's grid (1e-6)", d < 1e-6, f"{d:.1e}"
        )
    # flow quality and per-query cost on SHF-Shapes
    deltas = (0.01, 0.05, 0.1, 0.2)
    train = make_split(4 if quick else 10, seed=seed, duration_s=0.5, progress=progress)
    test = make_split(2 if quick else 4, seed=seed + 10_000, duration_s=0.5, progress=progress)
    d_test = AnytimeSegDataset(test, deltas)
    seg = Segmenter(K)
    fit_segmenter(seg, train, TrainConfig(60 if quick else 300, 8, seed=seed, progress=progress))
    model = LiFRSeg(LiFRSegConfig(num_classes=K), seg)
    model.flownet.load_state_dict(load_pretrained_flow()[0].state_dict())  # what reproduce uses
    model.eval()
    from iclr26.lifrseg.splat import backward_warp

    epe = {
        "E-RAFT-lite (events)": [], "zero flow": [],
        "Farneback on RGB t, t+δt (non-causal)": [],
        "0.5 × E-RAFT-lite (diagnostic)": [], "−E-RAFT-lite (diagnostic: sign)": [],
        "E-RAFT-lite, x and y swapped (diagnostic)": [],
    }  # fmt: skip
    # sanity of the labels: backward-warping I_{t+δt} with the analytic flow must give I_t
    photo = {"analytic flow": [], "zero flow": [], "−analytic flow": []}
    # most pixels fire no event in a short query window: EPE split by pixels with / without
    # query events (summed end-point errors and pixel counts per δt, pooled over the split)
    by_px = {
        (f, where): np.zeros((len(deltas), 2))
        for f in ("E-RAFT-lite (events)", "zero flow") for where in ("with", "without")
    }  # fmt: skip
    with torch.no_grad():
        for i in range(len(d_test)):
            b = collate_anytime([d_test[i]])
            for q in range(len(deltas)):
                gt = b["flow"][:, q]
                out = model.flownet(b["ev_past"], b["ev_query"][:, q])["flow"]
                for name, f in (
                    ("E-RAFT-lite (events)", out), ("zero flow", torch.zeros_like(gt)),
                    ("0.5 × E-RAFT-lite (diagnostic)", 0.5 * out),
                    ("−E-RAFT-lite (diagnostic: sign)", -out),
                    ("E-RAFT-lite, x and y swapped (diagnostic)", out.flip(1)),
                ):  # fmt: skip
                    epe[name].append([q, float((f - gt).norm(dim=1).mean())])
                fired = b["ev_query"][:, q].abs().sum(1) > 0  # [N, H, W]
                for name, f in (("E-RAFT-lite (events)", out), ("zero flow", torch.zeros_like(gt))):
                    err = (f - gt).norm(dim=1)
                    for where, m in (("with", fired), ("without", ~fired)):
                        by_px[name, where][q] += (float(err[m].sum()), int(m.sum()))
                for name, f in (
                    ("analytic flow", gt), ("zero flow", torch.zeros_like(gt)),
                    ("−analytic flow", -gt),
                ):  # fmt: skip
                    warped = backward_warp(b["target_image"][:, q], f, padding_mode="border")
                    photo[name].append([q, float((warped - b["image"]).abs().mean())])
                fb = _farneback(
                    b["image"][0].permute(1, 2, 0).numpy(),
                    b["target_image"][0, q].permute(1, 2, 0).numpy(),
                )
                if fb is not None:
                    epe["Farneback on RGB t, t+δt (non-causal)"].append(
                        [q, float((torch.from_numpy(fb) - gt[0]).norm(dim=0).mean())]
                    )
    erows = []
    for name, vals in epe.items():
        if not vals:
            continue
        a = np.array(vals)
        erows.append(
            {
                "flow": name,
                **{
                    f"EPE δt={1000 * d:g} ms": float(a[a[:, 0] == j, 1].mean())
                    for j, d in enumerate(deltas)
                },
            }
        )
    report.add_table("flow end-point error (px) on SHF-Shapes test", erows)
    frac = by_px["zero flow", "with"][:, 1] / (
        by_px["zero flow", "with"][:, 1] + by_px["zero flow", "without"][:, 1]
    )
    report.add_table(
        "flow EPE (px) on SHF-Shapes test, split by pixels with / without events in the query window",
        [{"pixels": "share of pixels with query events",
          **{f"δt={1000 * d:g} ms": float(frac[j]) for j, d in enumerate(deltas)}}]
        + [
            {"pixels": f"{name}, pixels {where} query events",
             **{f"δt={1000 * d:g} ms": float(v[j, 0] / max(v[j, 1], 1)) for j, d in enumerate(deltas)}}
            for (name, where), v in by_px.items()
        ],
    )  # fmt: skip
    ev_ours, ev_zero = (
        float(by_px[n, "with"][:, 0].sum() / max(by_px[n, "with"][:, 1].sum(), 1))
        for n in ("E-RAFT-lite (events)", "zero flow")
    )
    prows = []
    for name, vals in photo.items():
        a = np.array(vals)
        prows.append({
            "flow": name,
            **{f"δt={1000 * d:g} ms": float(a[a[:, 0] == j, 1].mean()) for j, d in enumerate(deltas)},
        })  # fmt: skip
    report.add_table(
        "label sanity: mean |I_t − backward_warp(I_{t+δt}, flow)| on SHF-Shapes test (RGB in [0, 1])",
        prows,
    )
    e_ours = np.mean([v for _, v in epe["E-RAFT-lite (events)"]])
    e_zero = np.mean([v for _, v in epe["zero flow"]])
    report.check(
        "E-RAFT-lite EPE below zero flow", e_ours < e_zero, f"{e_ours:.2f} vs {e_zero:.2f} px"
    )
    report.check(
        "E-RAFT-lite EPE below zero flow on pixels with query events (pooled over δt)",
        ev_ours < ev_zero,
        f"{ev_ours:.3f} vs {ev_zero:.3f} px",
    )

    from torch.utils.flop_counter import FlopCounterMode

    fusion = EarlyFusionSeg(K, model.config.num_bins).eval()
    one = collate_anytime([d_test[0]])
    one = {
        k: v[:, :1] if v.ndim >= 2 and k in ("ev_query", "label", "target_image", "flow") else v
        for k, v in one.items()
    }
    with torch.inference_mode():
        frames = {
            tr: model.encode_frame(one["image"], one["ev_past"], traced=tr) for tr in (True, False)
        }

    def further(traced):  # a later query of the same frame: its encoding is reused
        def query(b):
            mem = MemoryBank(model.config.memory_len)
            return model(
                b["image"], b["ev_past"], b["ev_query"][:, 0], mem,
                frame=frames[traced], traced=traced,
            )["logits"]  # fmt: skip

        return query

    first, again = (
        "LiFR-Seg (full)",
        "LiFR-Seg (full), a further query of the frame (frame encoding reused)",
    )
    first_e, again_e = f"{first}, eager reference path", f"{again}, eager reference path"
    methods = {
        "HFR oracle (segment the frame)": HFROracle(seg),
        first: LiFRMethod(model, traced=True),
        again: further(True),
        first_e: LiFRMethod(model),
        again_e: further(False),
        "LiFR-Seg w/o ScoreNet": LiFRMethod(model.variant(use_score=False)),
        "image warp": LiFRMethod(
            model.variant(propagate="image", use_refine=False, use_memory=False)
        ),
        "hold-last": HoldLast(seg),
        "early fusion": fusion,
    }
    import time

    crows, flops, ts = [], {}, {n: [] for n in methods}
    cpu = {n: [] for n in methods}  # CPU time of this thread: what a shared machine inflates least
    load_before = _load()
    with torch.inference_mode():
        for name, m in methods.items():
            m(one)  # warm-up (builds the traced graphs outside the FLOP counter)
            fc = FlopCounterMode(display=False)
            with fc:
                m(one)
            flops[name] = fc.get_total_flops() / 1e9
        # interleaved rounds: a load change on the shared machine hits every method alike
        for _ in range(9 if quick else 25):
            for name, m in methods.items():
                t0, c0 = time.perf_counter(), time.thread_time()
                m(one)
                ts[name].append(time.perf_counter() - t0)
                cpu[name].append(time.thread_time() - c0)
    base = np.asarray(ts["HFR oracle (segment the frame)"])
    for name in methods:
        a = 1e3 * np.asarray(ts[name])
        q1, med, q3 = np.percentile(a, [25, 50, 75])
        crows.append({
            "method": name, "GFLOPs / query": flops[name], "rounds": len(a),
            "ms / query (1 thread, median)": float(med), "IQR ms": float(q3 - q1),
            "min ms": float(a.min()),
            "CPU ms / query (thread time, median)": float(1e3 * np.median(cpu[name])),
            "× HFR oracle (per round, median)": float(np.median(a / (1e3 * base))),
        })  # fmt: skip
    report.add_table("cost of one anytime query at 64×64 (batch 1)", crows)
    report.add_table(
        "where a frame's first query spends its time (eager path, torch.profiler, one thread)",
        _query_breakdown(model, one, 5 if quick else 20),
    )
    row = {r["method"]: r for r in crows}
    med, cpu_med = "ms / query (1 thread, median)", "CPU ms / query (thread time, median)"
    speed = {  # traced / eager, per round (the same load hits both)
        n: float(np.median(np.asarray(ts[n]) / np.asarray(ts[e])))
        for n, e in ((first, first_e), (again, again_e))
    }
    load_after = _load()
    for name, what in ((first, "a frame's first query"), (again, "a further query of the frame")):
        r = row[name]
        report.check(
            f"one LiFR-Seg query at 64² under 20 ms on one core ({what}, traced path)",
            r[med] < 20,
            f"median {r[med]:.1f} ms, fastest {r['min ms']:.1f} ms, CPU time {r[cpu_med]:.1f} ms; "
            f"{speed[name]:.2f}x the eager path's time per round (eager: median "
            f"{row[name + ', eager reference path'][med]:.1f} ms); {load_before} before, "
            f"{load_after} after",
        )
    fig, ax = plt.subplots(figsize=(6, 4))
    for c in sorted({r["C"] for r in rows}):
        rr = [r for r in rows if r["C"] == c]
        ax.plot(
            [r["size"] for r in rr],
            [r["splat / grid_sample"] for r in rr],
            marker="o",
            label=f"C={c}",
        )
    ax.axhline(3.0, ls="--", c="gray", label="3x target")
    ax.set(
        xlabel="image size",
        ylabel="softmax_splat / grid_sample time",
        title="forward warping cost ratio",
    )
    ax.legend()
    report.add_figure("splat_ratio", fig)
    report.note(
        f"Machine load at the end: {_load()}; timings are medians of repeats, one thread, ratios within one run."
    )
    return report


def _query_breakdown(model: LiFRSeg, one: dict[str, torch.Tensor], rounds: int) -> list[dict]:
    """Where one eager query's time goes, per module, from ``torch.profiler`` (one thread): each
    stage of :meth:`LiFRSeg.forward` called in order under a ``record_function`` label, for a
    frame's first query (the frame encoding included) with a full memory bank (4 earlier maps:
    the memory attention's largest cost)."""
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile, record_function

    from iclr26.lifrseg.splat import resize_flow, softmax_splat_with_coverage

    img, past, query = one["image"], one["ev_past"], one["ev_query"][:, 0]
    h, w = img.shape[-2:]
    deep = model.config.memory_level

    def run() -> None:
        with record_function("encoder (TinyMiT on I_t)"):
            feats = model.segmenter.features(img)
        with record_function("flow: encode the past grid"):
            past_f = model.flownet.encode(past)
        with record_function("flow: E-RAFT-lite on the query grid"):
            fl = model.flownet(past, query, all_iterations=False, past_features=past_f)
        with record_function("ScoreNet"):
            score = model.scorenet(fl["features"], (h, w))
        new = []
        for i, f in enumerate(feats):
            with record_function("softmax splat (4 scales)"):
                size = f.shape[-2:]
                metric = F.interpolate(score, size=size, mode="area") if size != (h, w) else score
                g, cover = softmax_splat_with_coverage(
                    f, resize_flow(fl["flow"], size), metric, model.config.splat_mode
                )
            with record_function("RefineNet (4 scales)"):
                g = model.refine[i](g, (cover < 1e-3).to(g.dtype))
            new.append(g)
        with record_function("temporal memory attention (4 maps)"):
            new[deep] = model.memory_attn(new[deep], [new[deep]] * model.config.memory_len)
        with record_function("all-MLP decoder"):
            model.segmenter.decode(new, (h, w))

    with torch.inference_mode():
        run()  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("whole query"):
            for _ in range(rounds):
                run()
    stats = {e.key: e.cpu_time_total / rounds / 1e3 for e in prof.key_averages()}
    total = stats.pop("whole query")
    names = [
        "encoder (TinyMiT on I_t)", "flow: encode the past grid",
        "flow: E-RAFT-lite on the query grid", "ScoreNet", "softmax splat (4 scales)",
        "RefineNet (4 scales)", "temporal memory attention (4 maps)", "all-MLP decoder",
    ]  # fmt: skip
    rows = [
        {"stage": n, "ms / query (profiler CPU time)": stats.get(n, 0.0),
         "share of the query": stats.get(n, 0.0) / total}
        for n in names
    ]  # fmt: skip
    rows.append({"stage": "whole query (profiled)", "ms / query (profiler CPU time)": total,
                 "share of the query": 1.0})  # fmt: skip
    return rows


def _load() -> str:
    try:
        import os

        return "load average " + ", ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"
