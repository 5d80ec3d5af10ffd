"""``iclr26-ecodiff``: prune a diffusers DiT (or the toy), train the toy, reproduce, bench."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from iclr26.shared import existing_file, float_arg, int_arg, make_cli, prepare_output_dir

__all__ = ["main"]

log = logging.getLogger(__name__)


def _prune_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--model", default="toy-ddpm",
        help="'toy-ddpm', 'toy-flow', or a folder holding a class-conditional diffusers "
        "DiTTransformer2DModel (save_pretrained)",
    )  # fmt: skip
    parser.add_argument("--scheduler", choices=("ddim", "flow"), default=None,
                        help="sampler of a model folder (default: ddim; toys use their own)")  # fmt: skip
    parser.add_argument("--out", required=True, help="folder for the pruned model and scores")
    parser.add_argument("--sparsity", type=float_arg(0, 1, high_open=True), default=0.2,
                        help="fraction of all model parameters to remove")  # fmt: skip
    parser.add_argument("--steps", type=int_arg(1, 1000), default=10, help="sampling steps T")
    parser.add_argument("--calibration", type=int_arg(1), default=32,
                        help="calibration samples (fixed noise + random class)")  # fmt: skip
    parser.add_argument("--batch", type=int_arg(1), default=4, help="calibration batch size")
    parser.add_argument("--epochs", type=int_arg(1), default=3, help="mask-learning epochs")
    parser.add_argument(
        "--lr", type=float_arg(0, low_open=True), default=0.5, help="logit learning rate"
    )
    parser.add_argument("--beta", type=float_arg(0), default=1.0, help="regulariser weight")
    parser.add_argument(
        "--scope", choices=("global", "local"), default="global", help="selection scope"
    )
    parser.add_argument(
        "--resume", type=existing_file, help="gate logits (.safetensors) to start from"
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        out = Path(args.out)
        if out.exists() and any(out.iterdir()):
            raise ValueError(f"--out {out} exists and is not empty; nothing was overwritten")
        model_dir = None
        if args.model not in ("toy-ddpm", "toy-flow"):
            model_dir = Path(args.model)
            if not (model_dir / "config.json").is_file():
                raise ValueError(f"--model {args.model}: expected 'toy-ddpm', 'toy-flow' or a "
                                 "diffusers model folder with config.json")  # fmt: skip
        prepare_output_dir(out)
        import torch
        from safetensors.torch import load_file, save_file

        from iclr26.ecodiff.learn import EcoDiffConfig, learn_masks
        from iclr26.ecodiff.materialize import materialize, save_pruned
        from iclr26.ecodiff.sampler import from_scheduler
        from iclr26.ecodiff.select import MaskScores, count_params, select
        from iclr26.ecodiff.toy import load_toy, toy_scheduler
        from iclr26.ecodiff.units import find_prunable_units
        from iclr26.shared import write_json

        torch.set_num_threads(1)
        if model_dir is None:
            regime = args.model.removeprefix("toy-")
            model = load_toy(regime)
            n_classes = 10
            scheduler = toy_scheduler(regime)
        else:
            from diffusers import DiTTransformer2DModel

            try:
                model = DiTTransformer2DModel.from_pretrained(model_dir).eval()
            except (OSError, ValueError) as err:
                raise ValueError(
                    f"--model {model_dir}: cannot load a DiTTransformer2DModel ({err})"
                ) from None
            n_classes = int(model.config.num_embeds_ada_norm)
            scheduler = toy_scheduler("flow" if args.scheduler == "flow" else "ddpm")
        units = find_prunable_units(model)
        sampler = from_scheduler(scheduler, args.steps)
        gen = torch.Generator().manual_seed(args.seed)
        c, s = model.config.in_channels, model.config.sample_size
        cal = [
            (torch.randn(args.batch, c, s, s, generator=gen) * sampler.init_noise_sigma,
             torch.randint(0, n_classes, (args.batch,), generator=gen))
            for _ in range(-(-args.calibration // args.batch))
        ]  # fmt: skip
        init = None
        if args.resume is not None:
            try:
                init = MaskScores(load_file(str(args.resume)), units)
            except Exception as err:  # a user file: any parse failure is a user error
                raise ValueError(
                    f"--resume {args.resume}: not gate logits of this model ({err})"
                ) from None
        cfg = EcoDiffConfig(epochs=args.epochs, lr_attn=args.lr, lr_ffn=args.lr, beta=args.beta,
                            reg="l2", warmup=2, grad_accum=1, seed=args.seed)  # fmt: skip
        scores = learn_masks(model, sampler, cal, units=units, config=cfg, init_scores=init,
                             checkpoint_path=out / "gate_logits.safetensors",
                             progress=not args.no_progress)  # fmt: skip
        total = count_params(model)["total"]
        keep = select(scores, args.sparsity, scope=args.scope, total_params=total)
        pruned = materialize(model, units, keep)
        save_pruned(pruned, units, keep, out / "model")
        save_file(scores.to_state_dict(), str(out / "gate_logits.safetensors"))
        summary = {"model": args.model, "dense_params": total,
                   "pruned_params": count_params(pruned)["total"], "sparsity": args.sparsity,
                   "units_kept": {u.name + ":" + u.kind: int(keep[u.key].sum()) for u in units},
                   "history": scores.history}  # fmt: skip
        write_json(out / "summary.json", summary)
        print(f"pruned {args.model}: {total} -> {summary['pruned_params']} parameters; "
              f"wrote {out / 'model'}")  # fmt: skip
        return 0

    return run


def _train_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--regime", choices=("ddpm", "flow", "unet"), default="ddpm",
        help="DiT with DDPM or flow-matching objective, or the U-Net (DDPM)",
    )  # fmt: skip
    parser.add_argument("--steps", type=int_arg(1), default=None,
                        help="optimiser steps (default 2500 for the DiT, 600 for the U-Net)")  # fmt: skip
    parser.add_argument("--batch", type=int_arg(1), default=None,
                        help="batch size (default 64 for the DiT, 32 for the U-Net)")  # fmt: skip
    parser.add_argument(
        "--out", required=True,
        help="folder for toy_dit_<regime>.safetensors / toy_unet_ddpm.safetensors",
    )  # fmt: skip
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_dir(args.out)
        import torch

        from iclr26.ecodiff.toy import save_toy, save_toy_unet, train_toy, train_toy_unet

        torch.set_num_threads(1)
        if args.regime == "unet":
            unet, prompts = train_toy_unet(steps=args.steps or 600, batch_size=args.batch or 32,
                                           seed=args.seed, progress=not args.no_progress)  # fmt: skip
            print(f"wrote {save_toy_unet(unet, prompts, out)}")
            return 0
        model = train_toy(args.regime, steps=args.steps or 2500, batch_size=args.batch or 64,
                          seed=args.seed, progress=not args.no_progress)  # fmt: skip
        print(f"wrote {save_toy(model, args.regime, out)}")
        return 0

    return run


def _method_check_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--seeds", type=int_arg(1, 100), default=5,
                        help="number of seeds (0, 1, ..., N-1)")  # fmt: skip
    parser.add_argument("--calibration", type=int_arg(1, 10_000), default=32,
                        help="calibration samples per seed (batches of 4)")  # fmt: skip
    parser.add_argument("--epochs", type=int_arg(1, 1000), default=3,
                        help="mask-learning epochs (one update per calibration batch)")  # fmt: skip
    parser.add_argument("--steps", type=int_arg(1, 1000), default=10, help="DDIM steps T")
    parser.add_argument("--sparsity", type=float_arg(0, 1, low_open=True, high_open=True),
                        default=0.2, help="fraction of all parameters removed")  # fmt: skip
    parser.add_argument("--eval", type=int_arg(1, 100_000), default=128,
                        help="held-out (noise, class) pairs per seed")  # fmt: skip
    parser.add_argument("--out", default=None, help="optional folder for method_check.json")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        out = None if args.out is None else prepare_output_dir(args.out)
        import torch

        from iclr26.ecodiff.experiments import METHOD_CHECK_METHODS, method_check
        from iclr26.shared import write_json

        torch.set_num_threads(1)
        res = method_check(range(args.seeds), calibration=args.calibration, epochs=args.epochs,
                           steps=args.steps, sparsity=args.sparsity, n_eval=args.eval,
                           progress=not args.no_progress)  # fmt: skip
        st = res["settings"]
        print(f"method check: DDPM DiT, {st['sparsity']:.0%} of all parameters removed, "
              f"T = {st['steps']}, {st['calibration']} calibration samples, {res['updates']} "
              f"mask updates, {st['n_eval']} evaluation pairs; MSE of the final samples to the "
              "dense model's (lower is better)")  # fmt: skip
        print("seed  " + "  ".join(f"{m:>13}" for m in METHOD_CHECK_METHODS))
        for r in res["rows"]:
            print(f"{r['seed']:>4}  " + "  ".join(f"{r[m]:>13.4g}" for m in METHOD_CHECK_METHODS))
        print("mean  " + "  ".join(f"{res['mean'][m]:>13.4g}" for m in METHOD_CHECK_METHODS))
        n = res["n_seeds"]
        for m, w in res["wins"].items():
            print(f"EcoDiff below {m}: {w}/{n} seeds")
        if out is not None:
            write_json(out / "method_check.json", res)
            print(f"wrote {out / 'method_check.json'}")
        return 0

    return run


main = make_cli(
    "ecodiff",
    reproduce="iclr26.ecodiff.experiments:reproduce",
    bench="iclr26.ecodiff.experiments:bench",
    description="EcoDiff (ICLR 2026): learnable structured sparsity for diffusion/flow models.",
    commands={
        "prune": ("learn masks on a DiT (or the toy) and save the pruned model", _prune_setup),
        "train-toy": ("train the tiny digits DiT / U-Net shipped with the package", _train_setup),
        "method-check": (
            "the seeded method check: EcoDiff vs its local ablation, Taylor, magnitude and "
            "random pruning on the DiT, one row per seed",
            _method_check_setup,
        ),
    },
)
