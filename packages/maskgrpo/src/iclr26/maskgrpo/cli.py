"""``iclr26-maskgrpo``: reproduce, bench, pretrain-toy, train."""

from __future__ import annotations

import argparse
import logging

from iclr26.shared import existing_file, float_arg, int_arg, make_cli, prepare_output_file

__all__ = ["main"]

TASK_NAMES = ("sort8", "add3", "sudoku4", "digits", "digits4")
ESTIMATOR_NAMES = ("maskgrpo", "d1", "uniform")


def _pretrain_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--task", choices=TASK_NAMES, required=True, help="generated task")
    parser.add_argument("--out", required=True, help="safetensors file to write")
    parser.add_argument(
        "--steps", type=int_arg(1), help="training steps (default: the shipped file's)"
    )
    parser.add_argument("--batch-size", type=int_arg(1), default=128, help="sequences per step")
    parser.add_argument(
        "--lr", type=float_arg(0, low_open=True), default=2e-3, help="AdamW learning rate"
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    def run(args: argparse.Namespace) -> int:
        out = prepare_output_file(args.out, "--out")
        import torch

        from iclr26.maskgrpo.data import PRETRAIN_DEFAULTS, TINY
        from iclr26.maskgrpo.policy import TinyMaskedDenoiser, save_denoiser
        from iclr26.maskgrpo.pretrain import pretrain_denoiser
        from iclr26.maskgrpo.tasks import get_task

        torch.set_num_threads(1)
        task = get_task(args.task)
        defaults = PRETRAIN_DEFAULTS[args.task]
        steps = args.steps or defaults["steps"]
        torch.manual_seed(args.seed)
        model = TinyMaskedDenoiser(
            task.vocab_size, task.prompt_len + task.completion_len, **TINY,
            mask_id=task.mask_id, pos_std=defaults["pos_std"],
        )  # fmt: skip
        losses = pretrain_denoiser(
            model, task, steps=steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
            progress=not args.no_progress,
        )  # fmt: skip
        save_denoiser(model, out)
        print(f"wrote {out} (final MDLM loss {losses[-1]:.4f} after {steps} steps)")
        return 0

    return run


def _train_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--task", choices=TASK_NAMES, default="sort8", help="generated task")
    parser.add_argument(
        "--init",
        type=existing_file,
        help="initial denoiser (safetensors); default: the shipped one",
    )
    parser.add_argument(
        "--estimator", choices=ESTIMATOR_NAMES, default="maskgrpo", help="importance estimator"
    )
    parser.add_argument(
        "--remask", choices=("ar_like", "random"), default="ar_like", help="MaskGRPO remask"
    )
    parser.add_argument("--steps", type=int_arg(1), default=100, help="GRPO steps in total")
    parser.add_argument("--prompts", type=int_arg(1), default=8, help="prompts per step")
    parser.add_argument("--generations", type=int_arg(2), default=8, help="rollouts per prompt (G)")
    parser.add_argument(
        "--iterations", type=int_arg(1), default=4, help="inner updates per step (M)"
    )
    parser.add_argument(
        "--min-mask-rate",
        type=float_arg(0, 1, low_open=True, high_open=True),
        default=0.6,
        help="t_min",
    )
    parser.add_argument(
        "--lr", type=float_arg(0, low_open=True), default=5e-5, help="learning rate"
    )
    parser.add_argument("--beta", type=float_arg(0), default=0.01, help="KL weight")
    parser.add_argument(
        "--epsilon", type=float_arg(0, low_open=True), default=0.2, help="clip range"
    )
    parser.add_argument(
        "--sampler",
        choices=("low_confidence", "emerge", "maskgit"),
        default="low_confidence",
        help="rollout sampler",
    )
    parser.add_argument(
        "--cfg-scale",
        type=float_arg(0),
        default=0.0,
        help="classifier-free guidance weight of emerge/maskgit rollouts (digits tasks)",
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument(
        "--eval-every",
        type=int_arg(0),
        default=10,
        help="held-out evaluation period (0: only at the end)",
    )
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint file (resumed from if it exists)"
    )
    parser.add_argument("--log", help="JSONL log of per-step metrics (appended)")
    parser.add_argument("--save", help="also write the final policy as safetensors here")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    def run(args: argparse.Namespace) -> int:
        ck = prepare_output_file(args.checkpoint, "--checkpoint")
        log_path = prepare_output_file(args.log, "--log") if args.log else None
        save = prepare_output_file(args.save, "--save") if args.save else None
        import torch

        from iclr26.maskgrpo.data import load_pretrained
        from iclr26.maskgrpo.experiments import EVAL_SEED
        from iclr26.maskgrpo.policy import load_denoiser, save_denoiser
        from iclr26.maskgrpo.tasks import get_task
        from iclr26.maskgrpo.trainer import MaskGRPOConfig, MaskGRPOTrainer

        torch.set_num_threads(1)
        task = get_task(args.task)
        policy = load_denoiser(args.init) if args.init else load_pretrained(args.task)
        cfg = MaskGRPOConfig(
            num_generations=args.generations, num_iterations=args.iterations,
            estimator=args.estimator, remask=args.remask, min_mask_rate=args.min_mask_rate,
            learning_rate=args.lr, beta=args.beta, epsilon=args.epsilon, sampler=args.sampler,
            cfg_scale=args.cfg_scale, seed=args.seed,
        )  # fmt: skip
        tr = MaskGRPOTrainer(policy, task, cfg)
        if ck.exists():
            logging.getLogger(__name__).warning(
                "resuming from %s at step %d", ck, tr.load_checkpoint(ck)
            )
        ev = task.sample_prompts(128, EVAL_SEED)
        hist = tr.train(
            args.steps, args.prompts, eval_prompts=ev, eval_every=args.eval_every or args.steps,
            log_path=log_path, checkpoint_path=ck, checkpoint_every=10, progress=not args.no_progress,
        )  # fmt: skip
        for rec in hist:
            if "eval" in rec:
                print(
                    f"step {rec['step'] + 1}: train reward {rec['reward']:.3f}, held-out success {rec['eval']:.3f}"
                )
        if save is not None:
            save_denoiser(policy, save)
        print(f"checkpoint at step {tr.step_count}: {ck}")
        return 0

    return run


main = make_cli(
    "maskgrpo",
    reproduce="iclr26.maskgrpo.experiments:reproduce",
    bench="iclr26.maskgrpo.experiments:bench",
    description="MaskGRPO (ICLR 2026): GRPO for masked discrete diffusion models.",
    commands={
        "pretrain-toy": (
            "pre-train a tiny denoiser on a generated task (MDLM loss)",
            _pretrain_setup,
        ),
        "train": ("GRPO-train a denoiser on a generated task (checkpoints, resumes)", _train_setup),
    },
)
