"""``iclr26-fastcar``: decode with replay, calibrate thresholds, train the toy, reproduce, bench."""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path

from iclr26.shared import float_arg, int_arg, make_cli, prepare_output_dir, prepare_output_file

__all__ = ["main"]

DECISIONS = ("tas", "random", "input_diff", "oracle", "always")


def _thresholds(text: str) -> list[float] | float:
    """Comma-separated per-layer thresholds (``inf``/``none`` disables a layer) or one value."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part.lower() in ("none", "inf", "+inf"):
            out.append(math.inf)
            continue
        try:
            v = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected numbers or 'inf', got {part!r}") from None
        if math.isnan(v):
            raise argparse.ArgumentTypeError("thresholds must not be NaN")
        out.append(v)
    return out[0] if len(out) == 1 else out


def _model_dir(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a folder")
    if not (path / "toy.json").is_file() or not (path / "config.json").is_file():
        raise argparse.ArgumentTypeError(f"{text} is not a model folder saved by train-toy")
    return path


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=_model_dir, help="model folder from train-toy "
                        "(default: the toy shipped in the wheel)")  # fmt: skip
    parser.add_argument("--videos", type=int_arg(1, 4096), default=8, help="videos (one batch)")
    parser.add_argument("--frames", type=int_arg(2, 16), default=8, help="frames per video")
    parser.add_argument("--decision", choices=DECISIONS, default="tas", help="replay rule")
    parser.add_argument("--score", choices=("post_rope", "reference"), default="post_rope",
                        help="TAS query before (reference) or after RoPE")  # fmt: skip
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of "
                        "sampling with per-position noise fixed by --seed")  # fmt: skip


def _load(args):
    import torch

    from iclr26.fastcar.layout import FrameLayout
    from iclr26.fastcar.replay import ReplayConfig
    from iclr26.fastcar.toy import load_toy, toy_prompts

    torch.set_num_threads(1)
    toy = load_toy(args.model)
    prompts = toy_prompts(toy, args.videos, args.frames, args.seed)
    layout = FrameLayout(toy.vocab.tokens_per_frame, toy.vocab.prefix_len)
    cfg = ReplayConfig(layout, score=args.score, decision=args.decision, seed=args.seed)
    cfg.layer_thresholds(toy.preset.num_layers)
    return toy, prompts, cfg


def _calibrate_setup(parser: argparse.ArgumentParser):
    _common(parser)
    parser.add_argument("--rate", type=float_arg(0.0, 1.0), required=True,
                        help="target replay rate over eligible rows (frames >= 1)")  # fmt: skip
    parser.add_argument("--out", help="write the thresholds as JSON here")

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out") if args.out else None
        from iclr26.fastcar.calibrate import calibrate
        from iclr26.shared import dumps_json, write_json

        toy, prompts, cfg = _load(args)
        th = calibrate(toy.model, prompts.prefix, args.frames * toy.vocab.tokens_per_frame, cfg,
                       args.rate, allowed_vocab=toy.preset.codebook_size,
                       noise_seed=None if args.greedy else args.seed)  # fmt: skip
        payload = {"rate": args.rate, "decision": args.decision, "score": args.score,
                   "thresholds": th}  # fmt: skip
        print(dumps_json(payload))
        if out is not None:
            write_json(out, payload)
        return 0

    return run


def _decode_setup(parser: argparse.ArgumentParser):
    _common(parser)
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--thresholds", type=_thresholds, help="tau per layer, comma-separated, or one "
                   "value for all ('inf' disables)")  # fmt: skip
    g.add_argument(
        "--rate", type=float_arg(0.0, 1.0), help="calibrate thresholds to this rate first"
    )
    parser.add_argument("--backend", choices=("hf", "native"), default="hf",
                        help="transformers generate with hooks, or the native decoder")  # fmt: skip
    parser.add_argument("--out", default="fastcar-decode", help="output folder (frames.gif, "
                        "frames.png, replay.json)")  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_dir(args.out, "--out")
        import numpy as np
        from PIL import Image

        from iclr26.fastcar.calibrate import calibrate, decode
        from iclr26.fastcar.hf import enable_fastcar, generate_video
        from iclr26.fastcar.metrics import frame_psnr, token_agreement
        from iclr26.fastcar.models import TinyARVideoLM
        from iclr26.fastcar.toy import decode_frames
        from iclr26.shared import write_json

        toy, prompts, cfg = _load(args)
        n = toy.vocab.tokens_per_frame
        num_tokens = args.frames * n
        k = toy.preset.codebook_size
        model = toy.model if args.backend == "hf" else TinyARVideoLM.from_hf(toy.model)
        ns = None if args.greedy else args.seed
        if args.rate is not None:
            cfg.thresholds = calibrate(model, prompts.prefix, num_tokens, cfg, args.rate,
                                       allowed_vocab=k, noise_seed=ns)  # fmt: skip
        elif args.thresholds is not None:
            cfg.thresholds = args.thresholds
        thresholds = cfg.layer_thresholds(toy.preset.num_layers)
        dense, _ = decode(model, prompts.prefix, num_tokens, allowed_vocab=k, noise_seed=ns)
        if args.backend == "hf":
            with enable_fastcar(model, cfg) as h:
                tokens, _ = generate_video(model, prompts.prefix, num_tokens, allowed_vocab=k,
                                           noise_seed=ns)  # fmt: skip
                stats = h.stats
        else:
            r = model.decode(prompts.prefix, num_tokens, replay=cfg, allowed_vocab=k, noise_seed=ns)
            tokens, stats = r.tokens, r.state.stats
        frames = decode_frames(toy, tokens, args.frames)
        ref = decode_frames(toy, dense, args.frames)
        tiles = np.concatenate([np.concatenate(list(v), 1) for v in frames], 0)
        big = lambda a: Image.fromarray((np.clip(a, 0, 1) * 255).astype(np.uint8)).resize(  # noqa: E731
            (a.shape[1] * 4, a.shape[0] * 4), Image.NEAREST
        )
        big(tiles).save(out / "frames.png")
        gif = [big(np.concatenate(list(frames[:, f]), 1)) for f in range(args.frames)]
        gif[0].save(out / "frames.gif", save_all=True, append_images=gif[1:], duration=250, loop=0)
        p = toy.vocab.prefix_len
        payload = {
            "thresholds": thresholds, "decision": args.decision, "backend": args.backend,
            "replay_rate_eligible": stats.eligible_replay_rate(), "replay_rate_all": stats.replay_rate(),
            "per_layer_rate": stats.per_layer(), "rows_computed": stats.rows_computed,
            "token_agreement_vs_dense": token_agreement(tokens[:, p:], dense[:, p:]),
            "psnr_vs_dense_db": frame_psnr(frames, ref).tolist(),
        }  # fmt: skip
        write_json(out / "replay.json", payload)
        print(f"replay rate {payload['replay_rate_eligible']:.3f} (eligible), agreement with dense "
              f"{payload['token_agreement_vs_dense']:.3f}; wrote {out}/frames.gif, frames.png, "
              "replay.json")  # fmt: skip
        return 0

    return run


def _train_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--out", required=True, help="folder to write the model into")
    parser.add_argument("--videos", type=int_arg(1), default=1600, help="training clips")
    parser.add_argument("--epochs", type=int_arg(1), default=3, help="epochs")
    parser.add_argument("--batch-size", type=int_arg(1), default=8, help="clips per step")
    parser.add_argument("--lr", type=float_arg(0.0, 1.0), default=2e-3,
                        help="peak learning rate (one-cycle)")  # fmt: skip
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_dir(args.out, "--out")
        import torch

        from iclr26.fastcar.toy import save_toy, train_toy

        torch.set_num_threads(1)
        toy = train_toy(num_videos=args.videos, epochs=args.epochs, batch_size=args.batch_size,
                        lr=args.lr, seed=args.seed, progress=not args.no_progress)  # fmt: skip
        save_toy(toy, out)
        logging.getLogger(__name__).info("wrote %s", out)
        losses = ", ".join(f"{x:.3f}" for x in toy.train_log["epoch_loss"])
        print(f"wrote {out}; loss per epoch {losses}; same-slot token repeat "
              f"{toy.train_log['same_slot_repeat']:.3f}")  # fmt: skip
        return 0

    return run


main = make_cli(
    "fastcar",
    reproduce="iclr26.fastcar.experiments:reproduce",
    bench="iclr26.fastcar.experiments:bench",
    description="FastCar (ICLR 2026): MLP-output replay for faster autoregressive video decoding.",
    commands={
        "decode": ("decode token videos with MLP replay; frames as GIF/PNG + replay report",
                   _decode_setup),
        "calibrate": ("per-layer thresholds for a target replay rate", _calibrate_setup),
        "train-toy": ("train the moving-digits toy LLaMA and save it", _train_setup),
    },
)  # fmt: skip
