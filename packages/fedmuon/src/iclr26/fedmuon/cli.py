"""``iclr26-fedmuon``: reproduce, bench, ``simulate`` one federated run, ``loopback`` on Flower.

Only argparse and the shared CLI load here; JAX, optax and flwr are imported inside the command
handlers, so ``--help``, ``--version`` and argument errors return at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from iclr26.shared import make_cli
from iclr26.shared.cli import float_arg, int_arg, prepare_output_dir

__all__ = ["main"]

PROBLEMS = ("counterexample", "least_squares", "digits_softmax", "digits_mlp")
# Copies of algorithms.ALGORITHMS and lmo.NS_COEFFS (a test keeps them equal) so that building
# the parser does not import JAX.
ALGORITHMS = (
    "fedmuon",
    "local_muon",
    "fedavg_sgd",
    "fedavg_adam",
    "scaffold",
    "fedprox",
    "fedadam",
)
COEFFS = ("cubic", "jordan")
#: clients of each problem when --clients is not given (the counterexample has exactly two)
DEFAULT_CLIENTS = {"counterexample": 2, "least_squares": 16, "digits_softmax": 16, "digits_mlp": 16}
MAX_CLIENTS = 512  # digits has 1437 training images; every client needs a few
SEED = int_arg(0, 2**32 - 1)


def flower_app_dir(text: str) -> Path:
    """An argparse ``type`` for a Flower App folder (``pyproject.toml`` naming both apps)."""
    from iclr26.fedmuon.deploy import check_app  # standard library only, no JAX

    try:
        return check_app(text)
    except (OSError, ValueError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _simulate_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--algo", choices=ALGORITHMS, default="fedmuon", help="algorithm to run")
    parser.add_argument("--problem", choices=PROBLEMS, default="digits_mlp", help="task")
    parser.add_argument(
        "--partition", choices=("dirichlet", "iid"), default="dirichlet", help="digits split"
    )
    parser.add_argument(
        "--beta", type=float_arg(0, low_open=True), default=0.1, help="Dirichlet concentration"
    )
    parser.add_argument("--rounds", type=int_arg(1, 10**6), default=100, help="rounds R")
    parser.add_argument(
        "--clients",
        type=int_arg(1, MAX_CLIENTS),
        default=None,
        help="n, the number of clients (default: 16; the counterexample has exactly 2)",
    )
    parser.add_argument(
        "--per-round",
        type=int_arg(1, MAX_CLIENTS),
        default=None,
        help="S, clients sampled per round, at most n (default: min(8, n))",
    )
    parser.add_argument("--local-steps", type=int_arg(1, 10**4), default=5, help="K")
    parser.add_argument(
        "--batch-size", type=int_arg(0, 10**6), default=32, help="0 = full local batch"
    )
    parser.add_argument("--lr", type=float_arg(0, low_open=True), default=0.05, help="η")
    parser.add_argument(
        "--lr-decay",
        choices=("constant", "sqrt"),
        default="constant",
        help="step-size schedule (sqrt: η/√(r+1))",
    )
    parser.add_argument(
        "--alpha",
        type=float_arg(0, 1, low_open=True),
        default=0.1,
        help="EMA weight on the new gradient",
    )
    parser.add_argument(
        "--ns-steps",
        type=int_arg(-1, 100),
        default=5,
        help="Newton–Schulz steps T; -1 = exact SVD polar factor",
    )
    parser.add_argument(
        "--coeffs", choices=COEFFS, default="jordan", help="Newton–Schulz coefficients"
    )
    parser.add_argument(
        "--eval-every", type=int_arg(1, 10**6), default=10, help="rounds between evaluations"
    )
    parser.add_argument("--seed", type=SEED, default=0, help="random seed")
    parser.add_argument("--json", action="store_true", help="print the history as JSON")

    def run(args: argparse.Namespace) -> int:
        # cross-option checks, before anything heavy is imported
        n = DEFAULT_CLIENTS[args.problem] if args.clients is None else args.clients
        if args.problem == "counterexample" and n != 2:
            raise ValueError(f"--clients {n}: the counterexample has exactly 2 clients")
        s = min(8, n) if args.per_round is None else args.per_round
        if s > n:
            raise ValueError(f"--per-round {s} exceeds the number of clients (--clients {n})")

        from iclr26.fedmuon.algorithms import FedConfig
        from iclr26.fedmuon.lmo import LMOSpec
        from iclr26.fedmuon.problems import counterexample, digits, least_squares
        from iclr26.fedmuon.simulate import run_problem
        from iclr26.shared import dumps_json

        if args.problem == "counterexample":
            problem = counterexample()
        elif args.problem == "least_squares":
            problem = least_squares(n_clients=n, seed=args.seed)
        else:
            problem = digits(
                args.problem.split("_")[1], n_clients=n, partition=args.partition,
                beta=args.beta, seed=args.seed,
            )  # fmt: skip
        cfg = FedConfig(
            n_clients=n, clients_per_round=s, local_steps=args.local_steps,
            batch_size=None if args.batch_size == 0 or args.problem == "counterexample" else args.batch_size,
            rounds=args.rounds, lr=args.lr, lr_decay=args.lr_decay, alpha=args.alpha,
            lmo=LMOSpec(ns_steps=None if args.ns_steps < 0 else args.ns_steps, coeffs=args.coeffs),
        )  # fmt: skip
        h = run_problem(args.algo, problem, cfg, seed=args.seed, eval_every=args.eval_every,
                        show_progress=not args.json)  # fmt: skip
        rows = [
            {"round": int(r), "loss": float(h.loss[i]), "grad_fro": float(h.grad_fro[i]),
             "grad_nuc": float(h.grad_nuc[i]), **{k: float(v[i]) for k, v in h.metrics.items()}}
            for i, r in enumerate(h.rounds)
        ]  # fmt: skip
        if args.json:
            print(
                dumps_json(
                    {"algo": args.algo, "problem": problem.name, "history": rows}, indent=None
                )
            )
        else:
            names = list(rows[0])
            print(" ".join(f"{c:>10}" for c in names))
            for row in rows:
                print(
                    " ".join(f"{row[c]:>10}" if c == "round" else f"{row[c]:>10.4g}" for c in names)
                )
            print(
                f"{h.bytes_per_round / 1024:.1f} KiB per round; first round (compile) {h.compile_time:.2f} s"
            )
        return 0

    return run


def _loopback_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--nodes", type=int_arg(1, 32), default=2, help="SuperNodes to start")
    parser.add_argument("--rounds", type=int_arg(1, 10**4), default=3, help="rounds to run")
    parser.add_argument("--seed", type=SEED, default=0, help="seed of the demo App")
    parser.add_argument(
        "--app",
        type=flower_app_dir,
        default=None,
        help="your own Flower App folder (default: the FedMuon demo App)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep logs and state here (default: temp)"
    )
    parser.add_argument(
        "--jax-cache",
        type=Path,
        default=None,
        help="JAX compilation cache folder shared by the ClientApp processes; reuse it across "
        "runs to skip compiling (default: a folder in the work folder)",
    )
    parser.add_argument(
        "--no-jax-cache",
        action="store_true",
        help="compile in every ClientApp process (Flower starts one per round)",
    )
    parser.add_argument(
        "--timeout",
        type=float_arg(0, low_open=True),
        default=600.0,
        help="seconds allowed for flwr run",
    )

    def run(args: argparse.Namespace) -> int:
        from iclr26.shared import import_optional

        import_optional("flwr", dist="iclr26-fedmuon", extra="flower", purpose="loopback")
        if args.workdir is not None:
            prepare_output_dir(args.workdir, "--workdir")
        if args.jax_cache is not None:
            if args.no_jax_cache:
                raise ValueError("--jax-cache and --no-jax-cache exclude each other")
            prepare_output_dir(args.jax_cache, "--jax-cache")
        from iclr26.fedmuon.deploy import LoopbackDeployment, simulate_demo, write_demo_app

        cache = False if args.no_jax_cache else args.jax_cache
        result = None
        with LoopbackDeployment(
            nodes=args.nodes, workdir=args.workdir, compilation_cache=cache
        ) as dep:
            print(f"SuperLink on 127.0.0.1:{dep.port}, {args.nodes} SuperNodes", flush=True)
            if args.app is None:
                app = write_demo_app(dep.workdir / "app", rounds=args.rounds, nodes=args.nodes,
                                     seed=args.seed)  # fmt: skip
                config = None
            else:
                app, config = args.app, {"num-server-rounds": args.rounds}
            try:
                result = dep.run(app, run_config=config, timeout=args.timeout)
            except KeyboardInterrupt:
                done = dep.last_rounds()
                if done:  # what finished before Ctrl-C is not lost
                    print(f"interrupted after {len(done)} round(s):", file=sys.stderr)
                    for row in done:
                        print("  ".join(f"{k} {v:.4g}" for k, v in row.items()), file=sys.stderr)
                raise
        if result.returncode != 0:
            print(result.output[-4000:], file=sys.stderr)
            print(f"flwr run failed with exit status {result.returncode}", file=sys.stderr)
            return 1
        if args.app is None:
            simulated, ms = simulate_demo(len(result.rounds), args.nodes, seed=args.seed)
            for row, loss in zip(result.rounds, simulated, strict=False):
                row["simulated train_loss"] = loss
        for row in result.rounds:
            print("  ".join(f"{k} {v:.4g}" for k, v in row.items()))
        print(f"flwr run took {result.wall_s:.1f} s")
        if args.workdir:
            print(f"logs of the SuperLink, the SuperNodes and flwr run are in {args.workdir}")
        if args.app is None:
            print(f"the same rounds in the single-process simulator: {ms:.2f} ms per round")
        return 0

    return run


main = make_cli(
    "fedmuon",
    reproduce="iclr26.fedmuon.experiments:reproduce",
    bench="iclr26.fedmuon.experiments:bench",
    description="FedMuon (Takezawa et al., ICLR 2026, arXiv 2509.26337): bias-corrected federated Muon.",
    commands={
        "simulate": ("run one simulated federated training", _simulate_setup),
        "loopback": (
            "run FedMuon on a Flower deployment on 127.0.0.1 (extra flower)",
            _loopback_setup,
        ),
    },
)
