"""``iclr26-lifrseg``: simulate a dataset, train, predict at any time, reproduce, bench."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from iclr26.shared import (
    existing_file,
    float_arg,
    int_arg,
    make_cli,
    prepare_output_dir,
    prepare_output_file,
)

__all__ = ["main"]

log = logging.getLogger(__name__)


def _dt_list(text: str) -> list[float]:
    parse = float_arg(0.0)
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected comma-separated seconds, got {text!r}")
    return [parse(p) for p in parts]


_dt_list.__name__ = "seconds list"


def _simulate_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--out", required=True, help="folder to write seq_XXX/{events.h5, frames.npz, frame.png}"
    )
    parser.add_argument(
        "--sequences", type=int_arg(1, 10000), default=4, help="number of sequences"
    )
    parser.add_argument(
        "--duration", type=float_arg(0.1, 60.0), default=1.0, help="seconds per sequence"
    )
    parser.add_argument(
        "--size", type=int_arg(32, 512), default=64, help="image height = width (multiple of 32)"
    )
    parser.add_argument(
        "--night", action="store_true", help="degraded 'night' RGB frames and more noise events"
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        if args.size % 32:
            raise ValueError(f"--size must be a multiple of 32, got {args.size}")
        out = prepare_output_dir(args.out)
        from iclr26.lifrseg.data import make_split, save_sequences

        seqs = make_split(
            args.sequences, seed=args.seed, duration_s=args.duration, size=args.size,
            night=args.night, progress=not args.no_progress,
        )  # fmt: skip
        dirs = save_sequences(seqs, out)
        n_ev = sum(len(s.events) for s in seqs)
        print(f"wrote {len(dirs)} sequences ({n_ev} events) to {out}")
        return 0

    return run


def _train_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--data", help="folder written by `simulate` (default: generate --sequences fresh ones)"
    )
    parser.add_argument(
        "--sequences",
        type=int_arg(1, 10000),
        default=8,
        help="sequences to generate without --data",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="checkpoint folder; stages already saved there are skipped (resume)",
    )
    parser.add_argument(
        "--seg-steps", type=int_arg(1), default=400, help="segmenter training steps"
    )
    parser.add_argument("--flow-steps", type=int_arg(1), default=200, help="flow pretraining steps")
    parser.add_argument("--steps", type=int_arg(1), default=150, help="LiFR-Seg end-to-end steps")
    parser.add_argument(
        "--dt",
        type=_dt_list,
        default=[0.01, 0.05, 0.1, 0.2],
        help="query δt (s), comma-separated, increasing",
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        if args.data is not None and not Path(args.data).is_dir():
            raise OSError(f"--data {args.data!r} is not a folder")
        if sorted(args.dt) != args.dt:
            raise ValueError(f"--dt must be increasing, got {args.dt}")
        out = prepare_output_dir(args.out)
        import torch

        from iclr26.lifrseg.data import AnytimeSegDataset, load_sequences, make_split
        from iclr26.lifrseg.lifrseg import LiFRSeg, LiFRSegConfig
        from iclr26.lifrseg.models import Segmenter
        from iclr26.lifrseg.train import (
            TrainConfig,
            fit_flow,
            fit_lifrseg,
            fit_segmenter,
            save_lifrseg,
        )

        torch.set_num_threads(1)
        progress = not args.no_progress
        seqs = (
            load_sequences(args.data)
            if args.data
            else make_split(args.sequences, seed=args.seed, progress=progress)
        )
        ds = AnytimeSegDataset(seqs, args.dt)
        seg = Segmenter(4)
        fit_segmenter(
            seg,
            seqs,
            TrainConfig(args.seg_steps, 8, seed=args.seed, progress=progress),
            checkpoint=out / "segmenter.safetensors",
        )
        model = LiFRSeg(LiFRSegConfig(), seg)
        fit_flow(
            model.flownet,
            ds,
            TrainConfig(args.flow_steps, 4, seed=args.seed, progress=progress),
            checkpoint=out / "flow.safetensors",
        )
        fit_lifrseg(
            model,
            ds,
            TrainConfig(args.steps, 4, lr=1e-4, seed=args.seed, progress=progress),
            segmenter_lr_factor=1.0,
            checkpoint=out / "lifrseg_stage3.safetensors",
        )
        save_lifrseg(model, out / "lifrseg.safetensors")
        print(f"wrote {out / 'lifrseg.safetensors'}")
        return 0

    return run


def _pretrain_flow_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--out", required=True, help="safetensors file to write (e.g. eraft_lite.safetensors)"
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--steps", type=int_arg(1), default=400, help="training steps")
    parser.add_argument(
        "--sequences", type=int_arg(1, 10000), default=8, help="SHF-Shapes sequences to render"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out")
        from iclr26.lifrseg.train import pretrain_flow

        pretrain_flow(
            seed=args.seed, steps=args.steps, sequences=args.sequences, out=out,
            progress=not args.no_progress,
        )  # fmt: skip
        print(f"wrote {out}")
        return 0

    return run


def _predict_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--checkpoint", type=existing_file, required=True, help="lifrseg.safetensors from `train`"
    )
    parser.add_argument(
        "--image", type=existing_file, required=True, help="the RGB frame at --t-frame (PNG/JPEG)"
    )
    parser.add_argument(
        "--events", type=existing_file, required=True, help="DSEC-layout HDF5 events file"
    )
    parser.add_argument(
        "--t-frame", type=float_arg(0.0), required=True, help="time of the RGB frame (s)"
    )
    parser.add_argument(
        "--dt",
        type=_dt_list,
        default=[0.05],
        help="query offsets δt after the frame (s), comma-separated",
    )
    parser.add_argument(
        "--out", required=True, help="output PNG (one row of colour-coded maps, one per δt)"
    )

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out")
        if sorted(args.dt) != args.dt:
            raise ValueError(f"--dt must be increasing, got {args.dt}")
        import numpy as np
        import torch
        from skimage.io import imread, imsave

        from iclr26.lifrseg.events import read_dsec_h5
        from iclr26.lifrseg.train import load_lifrseg

        torch.set_num_threads(1)
        model = load_lifrseg(args.checkpoint)
        try:
            img = imread(args.image)
        except (ValueError, OSError) as err:
            raise ValueError(f"--image {args.image} is not a readable image ({err})") from None
        if img.ndim == 3 and img.shape[-1] == 4:
            img = img[..., :3]
        if img.ndim != 3 or img.shape[-1] != 3:
            raise ValueError(f"--image must be an RGB image, got shape {img.shape}")
        h, w = img.shape[:2]
        if h % 32 or w % 32:
            raise ValueError(f"--image height and width must be multiples of 32, got {h}x{w}")
        ev = read_dsec_h5(args.events, 0.0, args.t_frame + max(args.dt) + 1e-6)
        if len(ev) and (ev.x.max() >= w or ev.y.max() >= h):
            raise ValueError(f"--events has coordinates outside the {h}x{w} image")
        image = torch.from_numpy(img.astype(np.float32) / 255.0).permute(2, 0, 1)
        times = [args.t_frame + d for d in args.dt]
        logits = model.predict_anytime(image, ev, args.t_frame, times)
        palette = np.array(
            [
                [40, 40, 40],
                [230, 80, 60],
                [60, 170, 230],
                [240, 210, 60],
                [150, 90, 200],
                [90, 200, 120],
            ],
            dtype=np.uint8,
        )
        maps = [lg.argmax(0).numpy() % len(palette) for lg in logits]
        imsave(out, np.concatenate([palette[m] for m in maps], axis=1), check_contrast=False)
        for d, m in zip(args.dt, maps, strict=True):
            counts = np.bincount(m.ravel(), minlength=model.config.num_classes)
            print(f"δt={d:g}s: pixels per class {counts.tolist()}")
        print(f"wrote {out}")
        return 0

    return run


main = make_cli(
    "lifrseg",
    reproduce="iclr26.lifrseg.experiments:reproduce",
    bench="iclr26.lifrseg.experiments:bench",
    description="LiFR-Seg (ICLR 2026): anytime interframe semantic segmentation from events.",
    commands={
        "simulate": (
            "write an SHF-Shapes dataset (events.h5 in DSEC layout, frames, labels)",
            _simulate_setup,
        ),
        "train": ("train the segmenter, the flow network and LiFR-Seg (resumable)", _train_setup),
        "pretrain-flow": (
            "pretrain E-RAFT-lite on analytic flow (the defaults retrain the shipped weights)",
            _pretrain_flow_setup,
        ),
        "predict": (
            "segment at frame time + δt from an RGB frame and an events file",
            _predict_setup,
        ),
    },
)
