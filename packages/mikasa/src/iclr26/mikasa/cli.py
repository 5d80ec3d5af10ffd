"""``iclr26-mikasa``: list tasks, play episodes, reproduce, bench."""

from __future__ import annotations

import argparse

from iclr26.shared import float_arg, int_arg, make_cli, prepare_output_file

__all__ = ["main"]

POLICIES = ("random", "memory", "memoryless", "state")


def _list_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--memory-type", choices=("object", "spatial", "sequential", "capacity"),
        help="only tasks with this memory type",
    )  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        from iclr26.mikasa.envs import CLASSIC_IDS
        from iclr26.mikasa.taxonomy import list_tasks, task_info

        print(f"{'id':42s} {'memory':20s} {'T':>4s} {'act':>4s} {'K':>3s} {'chance':>8s}")
        for env_id in list_tasks(args.memory_type):
            i = task_info(env_id)
            types = ",".join(m.value for m in i.memory_types)
            chance = "-" if i.chance_success is None else f"{i.chance_success:.4f}"
            print(f"{env_id:42s} {types:20s} {i.T:4d} {i.act_start:4d} {i.n_choices:3d} "
                  f"{chance:>8s}")  # fmt: skip
        if args.memory_type in (None, "object"):
            for env_id in CLASSIC_IDS:
                print(f"{env_id:42s} {'object':20s}   (native MIKASA-Base-style classic)")
        return 0

    return run


def _play_setup(parser: argparse.ArgumentParser):
    parser.add_argument("env_id", help="task id, e.g. MikasaLite/ShellGameTouch-v0 (see `list`)")
    parser.add_argument("--policy", choices=POLICIES, default="memory", help="who acts")
    parser.add_argument("--backend", choices=("kinematic", "mujoco"), default="kinematic",
                        help="simulation backend")  # fmt: skip
    parser.add_argument("--episodes", type=int_arg(1, 10_000), default=10, help="episodes to run")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--png", help="write a top-down picture strip of the first episode here")
    parser.add_argument("--gif", help="write an animated GIF of the first episode here (kinematic: "
                        "top view; mujoco: the overhead camera, needs MUJOCO_GL=egl or osmesa)")  # fmt: skip
    parser.add_argument("--fps", type=float_arg(0.1, 100.0), default=10.0, help="GIF frame rate")
    parser.add_argument("--size", type=int_arg(16, 256), default=160, help="GIF frame size (px)")

    def run(args: argparse.Namespace) -> int:
        png = prepare_output_file(args.png, "--png") if args.png else None
        if args.gif and not args.gif.lower().endswith(".gif"):
            raise ValueError(f"--gif {args.gif} must end in .gif")
        gif = prepare_output_file(args.gif, "--gif") if args.gif else None
        from iclr26.mikasa.tasks import get_spec

        spec = get_spec(args.env_id)  # unknown ids fail here, before any work
        import numpy as np

        from iclr26.mikasa.oracles import evaluate, make_oracle

        if args.policy == "random":
            rng = np.random.default_rng(args.seed)

            class _Random:
                obs_mode = "memory"

                def reset(self, n):
                    self.n = n

                def act(self, obs):
                    return rng.uniform(-1, 1, size=(len(obs), 3))

            policy = _Random()
        else:
            policy = make_oracle(args.policy, spec, seed=args.seed)
        r = evaluate(spec.env_id, policy, args.episodes, seed=args.seed, backend=args.backend)
        print(f"{spec.env_id} {args.policy} on {args.backend}: success at end "
              f"{r['success_at_end']:.3f}, success once {r['success_once']:.3f} "
              f"({args.episodes} episodes; chance "
              f"{'none' if spec.chance_success is None else f'{spec.chance_success:.4f}'})")  # fmt: skip
        if png is not None:
            from iclr26.mikasa.render import episode_strip

            episode_strip(spec.env_id, policy, seed=args.seed).savefig(png, dpi=100)
            print(f"wrote {png}")
        if gif is not None:
            from iclr26.mikasa.render import episode_frames, write_gif

            frames = episode_frames(
                spec.env_id, policy, seed=args.seed, backend=args.backend, size=args.size
            )
            write_gif(frames, gif, fps=args.fps)
            print(f"wrote {gif} ({len(frames)} frames)")
        return 0

    return run


def _collect_setup(parser: argparse.ArgumentParser):
    parser.add_argument("env_id", help="task id, e.g. MikasaLite/ShellGameTouch-v0 (see `list`)")
    parser.add_argument("--policy", choices=POLICIES[1:], default="memory",
                        help="which scripted oracle acts")  # fmt: skip
    parser.add_argument("--episodes", type=int_arg(1, 100_000), default=100, help="episodes")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0,
                        help="seed of the first episode (episode e uses seed + e)")  # fmt: skip
    parser.add_argument("--npz", help="save the episodes here (official field layout, .npz)")
    parser.add_argument("--minari-id", help="also write a Minari dataset with this id, e.g. "
                        "mikasa/ShellGameTouch-memory-v0 (extra [minari])")  # fmt: skip
    parser.add_argument("--minari-root", help="Minari datasets folder (default: "
                        "MINARI_DATASETS_PATH or ~/.minari)")  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        if not args.npz and not args.minari_id:
            raise ValueError("give --npz PATH and/or --minari-id ID: where to write the episodes")
        npz = prepare_output_file(args.npz, "--npz") if args.npz else None
        from iclr26.mikasa.tasks import get_spec

        spec = get_spec(args.env_id)
        if args.minari_id:
            from iclr26.mikasa.minari_export import check_dataset_id

            check_dataset_id(args.minari_id, args.minari_root)  # before any work
        from iclr26.mikasa.oracles import collect_demos

        demos = collect_demos(spec.env_id, args.policy, args.episodes, seed=args.seed, path=npz)
        success = demos["success"][:, -1].mean()
        print(f"{spec.env_id} {args.policy} oracle: {args.episodes} episodes x {spec.T} steps, "
              f"success at end {success:.3f}")  # fmt: skip
        if npz is not None:
            print(f"wrote {npz}")
        if args.minari_id:
            import warnings

            from iclr26.mikasa.minari_export import to_minari

            with warnings.catch_warnings():  # minari asks for a permalink, an email...
                warnings.simplefilter("ignore", UserWarning)
                ds = to_minari(
                    demos, args.minari_id, env_id=spec.env_id,
                    obs_mode="state" if args.policy == "state" else "memory", seed=args.seed,
                    root=args.minari_root, algorithm_name=f"{args.policy} oracle",
                )  # fmt: skip
            print(f"wrote Minari dataset {args.minari_id} ({ds.total_episodes} episodes, "
                  f"{ds.total_steps} steps)")  # fmt: skip
        return 0

    return run


E2_CHOICES = tuple(f"{p}:{m}" for p in ("mlp", "gru", "lstm", "transformer")
                   for m in ("memory", "state"))  # fmt: skip


def _ppo_setup(parser: argparse.ArgumentParser):
    from pathlib import Path

    parser.add_argument("--quick", action="store_true", help="30,000 steps per run, 32 envs")
    parser.add_argument("--steps", type=int_arg(1_000, 100_000_000),
                        help="environment steps per run (default 1,000,000)")  # fmt: skip
    parser.add_argument(
        "--variant", action="append", choices=E2_CHOICES, metavar="POLICY:OBS_MODE",
        help=f"run only these (repeatable; one of {', '.join(E2_CHOICES)}); default: "
        "mlp:state, mlp:memory, gru:memory, transformer:memory",
    )  # fmt: skip
    parser.add_argument("--seeds", type=int_arg(1, 100), default=1,
                        help="runs per variant, seeds SEED, SEED+1, ... (default 1)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("reports/mikasa/e2"), help="output folder")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        from iclr26.shared import prepare_output_dir

        out = prepare_output_dir(args.out)
        from iclr26.mikasa.experiments import ppo_experiment

        kw = {}
        if args.variant:
            kw["variants"] = tuple(tuple(v.split(":")) for v in dict.fromkeys(args.variant))
        report = ppo_experiment(
            quick=args.quick,
            seed=args.seed,
            progress=not args.no_progress,
            steps=args.steps,
            seeds=args.seeds,
            **kw,
        )
        report.finish()
        print(report.to_markdown(), flush=True)
        path = report.write(out)
        print(f"wrote {path} and report.json with figures")
        return 0

    return run


def _peers_setup(parser: argparse.ArgumentParser):
    from pathlib import Path

    parser.add_argument("--quick", action="store_true", help="100 demos, 50 evaluation episodes")
    parser.add_argument("--out", type=Path, default=Path("reports/mikasa/peers"),
                        help="output folder")  # fmt: skip
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        from iclr26.shared import import_optional, prepare_output_dir

        out = prepare_output_dir(args.out)
        for module in ("popgym", "minigrid"):
            import_optional(module, dist="iclr26-mikasa", extra="peers", purpose="peers")
        from iclr26.mikasa.experiments import peer_experiment

        report = peer_experiment(quick=args.quick, seed=args.seed, progress=not args.no_progress)
        report.finish()
        print(report.to_markdown(), flush=True)
        path = report.write(out)
        print(f"wrote {path} and report.json with figures")
        return 0

    return run


main = make_cli(
    "mikasa",
    reproduce="iclr26.mikasa.experiments:reproduce",
    bench="iclr26.mikasa.experiments:bench",
    description="MIKASA (ICLR 2026): memory-intensive tasks on MuJoCo and a batched numpy backend.",
    commands={
        "list": ("list the tasks with their memory types and timing", _list_setup),
        "play": ("run an oracle or random policy and report success", _play_setup),
        "collect": ("collect oracle episodes as .npz and/or a Minari dataset", _collect_setup),
        "peers": (
            "BC memory baselines on popgym RepeatPrevious and MiniGrid-MemoryS7",
            _peers_setup,
        ),
        "ppo": (
            "E2: train PPO (MLP state / MLP, GRU, transformer memory) and evaluate",
            _ppo_setup,
        ),
    },
)
