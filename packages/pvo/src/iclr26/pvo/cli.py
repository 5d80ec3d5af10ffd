"""``iclr26-pvo``: train an agent on a generated or imported dataset, reproduce, bench."""

from __future__ import annotations

import argparse
from pathlib import Path

from iclr26.shared import existing_file, int_arg, make_cli, prepare_output_file, write_json

__all__ = ["main"]

ALGOS = ("pvo", "iql", "oracle_iql", "ipl", "xql", "xql_va", "td3bc", "td3bc_va", "cpl", "bc")


def _train_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--algo", choices=ALGOS, default="pvo", help="agent to train")
    parser.add_argument(
        "--dataset",
        choices=("expert", "medium", "medium_replay", "random", "mixed"),
        default="medium_replay",
        help="generated Pendulum dataset",
    )
    parser.add_argument(
        "--minari",
        metavar="ID_OR_FOLDER",
        help="train on a local minari dataset (an id or its folder) instead of --dataset",
    )
    parser.add_argument(
        "--episode-length",
        type=int_arg(1),
        help="with --minari: crop episodes to this length (shorter ones are dropped)",
    )
    parser.add_argument("--episodes", type=int_arg(1), default=100, help="episodes in the dataset")
    parser.add_argument(
        "--reward",
        choices=("dense", "sparse"),
        default="sparse",
        help="hidden reward the teacher sees",
    )
    parser.add_argument(
        "--prefs",
        type=existing_file,
        help="labelled pairs as an IPL/PT-style .npz (instead of a teacher)",
    )
    parser.add_argument(
        "--pairs", type=int_arg(2), default=100, help="preference budget M for the teacher"
    )
    parser.add_argument("--steps", type=int_arg(1), default=20000, help="update steps per seed")
    parser.add_argument(
        "--eval-every",
        type=int_arg(1),
        default=2000,
        help="steps between evaluations and checkpoints",
    )
    parser.add_argument(
        "--seeds", type=int_arg(1, 64), default=3, help="seeds trained together under vmap"
    )
    parser.add_argument(
        "--seed", type=int_arg(0, 2**31 - 1), default=0, help="data and first training seed"
    )
    parser.add_argument("--checkpoint", type=Path, help="resume from / save to this file")
    parser.add_argument("--out", type=Path, help="write the scores as JSON here (default: print)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    def run(args: argparse.Namespace) -> int:
        if args.steps % args.eval_every:
            raise ValueError(
                f"--steps ({args.steps}) must be a multiple of --eval-every ({args.eval_every})"
            )
        for option, path in (("--checkpoint", args.checkpoint), ("--out", args.out)):
            if path is not None:
                prepare_output_file(path, option)
        from iclr26.pvo.agents import AgentConfig
        from iclr26.pvo.data import load_minari, load_npz_pairs, make_dataset
        from iclr26.pvo.envs import hidden_reward
        from iclr26.pvo.segments import label_pairs, sample_segment_pairs
        from iclr26.pvo.train import train_offline

        if args.minari:
            ds = load_minari(args.minari, episode_length=args.episode_length)
        else:
            ds = make_dataset(args.dataset, args.episodes, seed=args.seed)
        prefs = load_npz_pairs(args.prefs) if args.prefs else None
        if prefs is None:
            pairs = sample_segment_pairs(ds.obs, ds.act, args.pairs, seed=args.seed + 1)
            prefs = label_pairs(
                pairs, lambda o, a: hidden_reward(o, a, args.reward), seed=args.seed + 2
            )
        res = train_offline(
            AgentConfig(algo=args.algo, hidden=(64, 64)), ds, prefs, steps=args.steps,
            eval_every=args.eval_every, seeds=[args.seed + i for i in range(args.seeds)],
            reward=args.reward, checkpoint=args.checkpoint, progress=not args.no_progress,
        )  # fmt: skip
        payload = {"algo": args.algo, "eval_steps": res.eval_steps, "scores": res.scores,
                   "final": res.final_scores, "resumed_from": res.resumed_from,
                   "steps_per_second": res.steps_per_second}  # fmt: skip
        if args.out:
            write_json(args.out, payload)
            print(f"wrote {args.out}")
        else:
            from iclr26.shared import dumps_json

            print(dumps_json(payload))
        return 0

    return run


main = make_cli(
    "pvo",
    reproduce="iclr26.pvo.experiments:reproduce",
    bench="iclr26.pvo.experiments:bench",
    description="Offline preference-based value optimisation (PVO, ICLR 2026) in JAX.",
    commands={
        "train": (
            "train an agent on generated Pendulum data or your .npz preferences",
            _train_setup,
        )
    },
)
