"""``iclr26-splat-distill``: render, distill, probe, pretrain, reproduce, bench."""

from __future__ import annotations

import argparse
import logging

from iclr26.shared import existing_file, float_arg, int_arg, make_cli, prepare_output_file

__all__ = ["main"]

log = logging.getLogger(__name__)


def _load_tensors(path) -> dict:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises its own error types
        raise ValueError(f"{path} is not a readable safetensors file ({err})") from None


def _render_setup(parser: argparse.ArgumentParser):
    parser.add_argument("gaussians", type=existing_file,
                        help="safetensors with means [N,3], covs [N,3,3], opacities [N], features [N,C]")  # fmt: skip
    parser.add_argument("camera", type=existing_file, help="safetensors with K [3,3] and c2w [4,4]")
    parser.add_argument(
        "--height", type=int_arg(1, 4096), default=64, help="image height in pixels"
    )
    parser.add_argument("--width", type=int_arg(1, 4096), default=64, help="image width in pixels")
    parser.add_argument("--backend", choices=("torch-tiled", "torch-dense", "gsplat"), default="torch-tiled",
                        help="rasteriser backend")  # fmt: skip
    parser.add_argument(
        "--out", required=True, help="PNG to write (features: first 3 PCA components)"
    )

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from iclr26.splat_distill.experiments import pca_rgb
        from iclr26.splat_distill.gaussians import Gaussians
        from iclr26.splat_distill.geometry import Camera
        from iclr26.splat_distill.raster import rasterize_features

        gt = _load_tensors(args.gaussians)
        ct = _load_tensors(args.camera)
        for k in ("means", "covs", "opacities", "features"):
            if k not in gt:
                raise ValueError(f"{args.gaussians} lacks tensor {k!r}")
        for k in ("K", "c2w"):
            if k not in ct:
                raise ValueError(f"{args.camera} lacks tensor {k!r}")
        g = Gaussians(*(gt[k].float() for k in ("means", "covs", "opacities", "features")))
        cam = Camera(ct["K"].float(), ct["c2w"].float(), args.height, args.width)
        r = rasterize_features(g, cam, backend=args.backend)
        f = r["features"]
        img = f.permute(1, 2, 0).clamp(0, 1).numpy() if f.shape[0] == 3 else pca_rgb([f])[0]
        plt.imsave(out, img)
        print(f"wrote {out} ({f.shape[0]} channels, mean alpha {float(r['alpha'].mean()):.3f})")
        return 0

    return run


def _common_train(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenes", type=int_arg(1), default=24, help="procedural training scenes")
    parser.add_argument("--steps", type=int_arg(1), default=200, help="optimiser steps")
    parser.add_argument("--batch", type=int_arg(1), default=4, help="triplets per step")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _distill_setup(parser: argparse.ArgumentParser):
    _common_train(parser)
    parser.add_argument(
        "--lr", type=float_arg(0, None, low_open=True), default=1e-4, help="Adam learning rate"
    )
    parser.add_argument(
        "--blend-alpha", type=float_arg(0, 1), default=0.5, help="semantic blending α (1: off)"
    )
    parser.add_argument(
        "--upsample",
        choices=("mask_aware", "bilinear"),
        default="mask_aware",
        help="teacher feature upsampling",
    )
    parser.add_argument(
        "--target", choices=("novel", "context"), default="novel", help="supervised view"
    )
    parser.add_argument(
        "--loss", choices=("dino_ce", "cosine"), default="dino_ce", help="distillation loss"
    )
    parser.add_argument(
        "--ema", type=float_arg(0, 1), default=0.995, help="teacher EMA momentum (1: frozen)"
    )
    parser.add_argument(
        "--vfm", type=existing_file, help="starting backbone (default: the shipped 2D VFM)"
    )
    parser.add_argument(
        "--lora-rank", type=int_arg(0), default=0,
        help="0: full fine-tuning; r ≥ 1: LoRA adapters of rank r on qkv/proj (α = 8, dropout 0.1; "
        "the lora extra); the written backbone has them merged",
    )  # fmt: skip
    parser.add_argument(
        "--depth", choices=("oracle", "noisy", "learned"), default="oracle",
        help="context depth for the Gaussian lifting (noisy: 10%% log-depth noise; learned: the shipped depth net)",
    )  # fmt: skip
    parser.add_argument(
        "--resume", type=existing_file, help="checkpoint (.pt) written by a previous run"
    )
    parser.add_argument("--checkpoint", help="write a resumable checkpoint (.pt) here")
    parser.add_argument(
        "--out", required=True, help="student backbone as safetensors (TinyViT config in metadata)"
    )

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out")
        ckpt_path = (
            prepare_output_file(args.checkpoint, "--checkpoint") if args.checkpoint else None
        )
        import torch

        from iclr26.shared import progress as progress_bar
        from iclr26.splat_distill.data import make_dataset, triplet_batch
        from iclr26.splat_distill.distill import SnDConfig, SplatAndDistill
        from iclr26.splat_distill.models import load_pretrained_vfm, save_vfm

        torch.set_num_threads(1)
        vfm = load_pretrained_vfm(str(args.vfm) if args.vfm else None)
        cfg = SnDConfig(render_size=16, lift_stride=2, lr=args.lr, blend_alpha=args.blend_alpha,
                        upsample=args.upsample, target=args.target, loss=args.loss, ema_momentum=args.ema,
                        lora_rank=args.lora_rank, depth=args.depth)  # fmt: skip
        snd = SplatAndDistill(vfm, cfg, seed=args.seed)
        g = torch.Generator().manual_seed(args.seed)
        if args.resume:
            try:
                ckpt = torch.load(args.resume, map_location="cpu", weights_only=False)
            except Exception as err:
                raise ValueError(f"--resume {args.resume} is not a checkpoint ({err})") from None
            snd.load_checkpoint(ckpt)
            if "rng" in ckpt:
                g.set_state(ckpt["rng"])
        data = make_dataset(args.scenes, size=vfm.config["img_size"], seed=10_000 + args.seed)
        logs = {}
        for _ in progress_bar(
            range(snd.steps, args.steps), enabled=not args.no_progress, desc="SnD"
        ):
            _, logs = snd.training_step(triplet_batch(data, args.batch, generator=g))
        save_vfm(snd.backbone(), out, {"snd_steps": snd.steps, "lora_rank": args.lora_rank})
        if ckpt_path is not None:
            torch.save(snd.checkpoint() | {"rng": g.get_state()}, ckpt_path)
        print(f"{snd.steps} steps, last loss {logs.get('loss', float('nan')):.4f}; wrote {out}")
        return 0

    return run


def _probe_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--backbone", type=existing_file, help="TinyViT safetensors (default: the shipped 2D VFM)"
    )
    parser.add_argument("--scenes", type=int_arg(1), default=6, help="held-out test scenes")
    parser.add_argument(
        "--train-scenes", type=int_arg(1), default=16, help="scenes the probes are trained on"
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--out", help="write the metrics as JSON here")

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out") if args.out else None
        import torch

        from iclr26.shared import write_json
        from iclr26.splat_distill.data import make_dataset
        from iclr26.splat_distill.experiments import eval_pairs, evaluate
        from iclr26.splat_distill.models import load_pretrained_vfm

        torch.set_num_threads(1)
        model = load_pretrained_vfm(str(args.backbone) if args.backbone else None)
        size = model.config["img_size"]
        train = make_dataset(args.train_scenes, size=size, seed=10_000 + args.seed)
        test = make_dataset(args.scenes, size=size, seed=20_000 + args.seed)
        m = evaluate(model, train, test, eval_pairs(test, 100, args.seed), seed=args.seed)
        for k, v in m.items():
            print(f"{k}: {v:.4f}")
        if out is not None:
            write_json(out, m)
        return 0

    return run


def _pretrain_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--scenes", type=int_arg(1), default=48, help="procedural scenes (6 views each)"
    )
    parser.add_argument("--steps", type=int_arg(1), default=400, help="optimiser steps")
    parser.add_argument("--batch", type=int_arg(1), default=32, help="images per step")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument(
        "--out",
        required=True,
        help="safetensors to write (the shipped VFM: weights/vfm.safetensors)",
    )

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out")
        import torch

        from iclr26.splat_distill.data import make_dataset
        from iclr26.splat_distill.models import TinyViT, save_vfm
        from iclr26.splat_distill.pretrain import pretrain_2d

        torch.set_num_threads(1)
        data = make_dataset(args.scenes, size=32, seed=777)
        torch.manual_seed(args.seed)
        model = TinyViT(img_size=32, patch=4, dim=48, depth=3, heads=3)
        hist = pretrain_2d(model, data.rgb.flatten(0, 1), steps=args.steps, batch=args.batch, seed=args.seed,
                           progress=not args.no_progress)  # fmt: skip
        save_vfm(model, out, {"steps": args.steps})
        print(
            f"final loss {hist['loss'][-1]:.4f}, teacher entropy {hist['teacher_entropy'][-1]:.3f}; wrote {out}"
        )
        return 0

    return run


def _train_depth_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--scenes", type=int_arg(1), default=32, help="procedural training scenes (6 views each)"
    )
    parser.add_argument(
        "--test-scenes", type=int_arg(1), default=8, help="held-out scenes for the printed errors"
    )
    parser.add_argument("--steps", type=int_arg(1), default=800, help="optimiser steps")
    parser.add_argument("--batch", type=int_arg(1), default=16, help="images per step")
    parser.add_argument("--width", type=int_arg(4), default=8, help="channels at full resolution")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument(
        "--out",
        required=True,
        help="safetensors to write (the shipped depth net: weights/depth.safetensors)",
    )

    def run(args: argparse.Namespace) -> int:
        if args.width % 4:
            raise ValueError(f"--width must be a multiple of 4, got {args.width}")
        out = prepare_output_file(args.out, "--out")
        import torch

        from iclr26.splat_distill.data import make_dataset
        from iclr26.splat_distill.depth import (
            constant_depth_baseline,
            depth_errors,
            save_depth_net,
            train_depth_net,
        )

        torch.set_num_threads(1)
        train = make_dataset(
            args.scenes, size=32, seed=555 + args.seed, progress=not args.no_progress
        )
        test = make_dataset(args.test_scenes, size=32, seed=30_000 + args.seed)
        net, hist = train_depth_net(
            train.rgb.flatten(0, 1), train.depth.flatten(0, 1), steps=args.steps,
            batch=args.batch, width=args.width, seed=args.seed, progress=not args.no_progress,
        )  # fmt: skip
        with torch.no_grad():
            pred = net(test.rgb.flatten(0, 1))
        gt = test.depth.flatten(0, 1)
        e_net = depth_errors(pred, gt)
        e_const = depth_errors(constant_depth_baseline(train.depth, tuple(gt.shape)), gt)
        save_depth_net(net, out, {"steps": args.steps, "scenes": args.scenes, "seed": args.seed,
                                  "held_out": e_net, "constant": e_const})  # fmt: skip
        print(f"final train loss {hist['loss'][-1]:.4f}; held-out ({args.test_scenes} scenes):")
        for k in e_net:
            print(f"  {k}: depth net {e_net[k]:.4f}, constant depth {e_const[k]:.4f}")
        print(f"wrote {out}")
        return 0

    return run


main = make_cli(
    "splat-distill",
    reproduce="iclr26.splat_distill.experiments:reproduce",
    bench="iclr26.splat_distill.experiments:bench",
    description="Splat and Distill (ICLR 2026): 3D-aware feature distillation through Gaussian splatting.",
    commands={
        "render": ("render a Gaussians file into a camera (feature PCA or RGB PNG)", _render_setup),
        "distill": ("SnD fine-tuning of the shipped VFM on procedural scenes", _distill_setup),
        "probe": ("3D-awareness metrics of a backbone on procedural scenes", _probe_setup),
        "pretrain": ("retrain the shipped 2D-only VFM", _pretrain_setup),
        "train-depth": (
            "retrain the shipped monocular depth net (the learned lifter)",
            _train_depth_setup,
        ),
    },
)
