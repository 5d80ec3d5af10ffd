"""``iclr26-fedmuon``: reproduce, bench, ``simulate`` one federated run, ``loopback`` on Flower."""

from __future__ import annotations

import argparse
import json

from iclr26.fedmuon.algorithms import ALGORITHMS, FedConfig
from iclr26.fedmuon.experiments import bench, reproduce
from iclr26.fedmuon.lmo import NS_COEFFS, LMOSpec
from iclr26.fedmuon.problems import counterexample, digits, least_squares
from iclr26.fedmuon.simulate import run_problem
from iclr26.shared import make_cli

__all__ = ["main"]

PROBLEMS = ("counterexample", "least_squares", "digits_softmax", "digits_mlp")


def _simulate_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--algo", choices=ALGORITHMS, default="fedmuon")
    parser.add_argument("--problem", choices=PROBLEMS, default="digits_mlp")
    parser.add_argument("--partition", choices=("dirichlet", "iid"), default="dirichlet")
    parser.add_argument("--beta", type=float, default=0.1, help="Dirichlet concentration")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--clients", type=int, default=16, help="n")
    parser.add_argument("--per-round", type=int, default=8, help="S, clients sampled per round")
    parser.add_argument("--local-steps", type=int, default=5, help="K")
    parser.add_argument("--batch-size", type=int, default=32, help="0 = full local batch")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--lr-decay", choices=("constant", "sqrt"), default="constant")
    parser.add_argument("--alpha", type=float, default=0.1, help="EMA weight on the new gradient")
    parser.add_argument("--ns-steps", type=int, default=5, help="-1 = exact SVD polar factor")
    parser.add_argument("--coeffs", choices=sorted(NS_COEFFS), default="jordan")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the history as JSON")

    def run(args: argparse.Namespace) -> int:
        if args.problem == "counterexample":
            problem = counterexample()
        elif args.problem == "least_squares":
            problem = least_squares(n_clients=args.clients, seed=args.seed)
        else:
            problem = digits(
                args.problem.split("_")[1], n_clients=args.clients, partition=args.partition,
                beta=args.beta, seed=args.seed,
            )  # fmt: skip
        n = problem.clients.n_clients
        cfg = FedConfig(
            n_clients=n, clients_per_round=min(args.per_round, n), local_steps=args.local_steps,
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
            print(json.dumps({"algo": args.algo, "problem": problem.name, "history": rows}))
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
    parser.add_argument("--nodes", type=int, default=2, help="SuperNodes to start")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--app", default=None, help="your own Flower App folder (default: the FedMuon demo app)"
    )
    parser.add_argument("--workdir", default=None, help="keep logs and state here (default: temp)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for flwr run")

    def run(args: argparse.Namespace) -> int:
        from iclr26.fedmuon.deploy import (
            LoopbackDeployment,
            check_app,
            simulate_demo,
            write_demo_app,
        )

        if args.app is not None:
            check_app(args.app)  # before any process starts
        with LoopbackDeployment(nodes=args.nodes, workdir=args.workdir) as dep:
            print(f"SuperLink on 127.0.0.1:{dep.port}, {args.nodes} SuperNodes", flush=True)
            if args.app is None:
                app = write_demo_app(dep.workdir / "app", rounds=args.rounds, nodes=args.nodes,
                                     seed=args.seed)  # fmt: skip
                result = dep.run(app, timeout=args.timeout)
            else:
                result = dep.run(args.app, run_config={"num-server-rounds": args.rounds},
                                 timeout=args.timeout)  # fmt: skip
        if result.returncode != 0:
            print(result.output[-4000:])
            print(f"flwr run failed with exit status {result.returncode}")
            return 1
        if args.app is None:
            simulated, ms = simulate_demo(len(result.rounds), args.nodes, seed=args.seed)
            for row, loss in zip(result.rounds, simulated, strict=False):
                row["simulated train_loss"] = loss
        for row in result.rounds:
            print("  ".join(f"{k} {v:.4g}" for k, v in row.items()))
        print(f"flwr run took {result.wall_s:.1f} s")
        if args.workdir:
            print(f"logs of the SuperLink and SuperNodes are in {args.workdir}")
        if args.app is None:
            print(f"the same rounds in the single-process simulator: {ms:.2f} ms per round")
        return 0

    return run


main = make_cli(
    "fedmuon",
    reproduce=reproduce,
    bench=bench,
    description="FedMuon (Takezawa et al., ICLR 2026, arXiv 2509.26337): bias-corrected federated Muon.",
    commands={
        "simulate": ("run one simulated federated training", _simulate_setup),
        "loopback": (
            "run FedMuon on a Flower deployment on 127.0.0.1 (extra flower)",
            _loopback_setup,
        ),
    },
)
