"""``iclr26-git-bo``: reproduce, bench, ``optimize`` (a Python objective or an embedded test
problem, with a resumable history) and ``train-pfn`` (the recipe of the shipped PFN).

Nothing heavy is imported at module import: ``--help`` and ``--version`` stay torch-free.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from iclr26.shared import (
    existing_file,
    float_arg,
    int_arg,
    make_cli,
    prepare_output_dir,
    prepare_output_file,
    write_json,
)

__all__ = ["main"]

# gpytorch's import-time deprecation notice says nothing to a user of this command
warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*", category=FutureWarning)

_FUNCTIONS = ("ackley", "rosenbrock", "levy", "styblinski-tang", "rover")
# LassoBench's synthetic problems (the dimension is the benchmark's: 60, 100, 300, 1000)
_LASSO = {"lasso-simple": ("synt_simple", 60), "lasso-medium": ("synt_medium", 100),
          "lasso-high": ("synt_high", 300), "lasso-hard": ("synt_hard", 1000)}  # fmt: skip
# MuJoCo linear-policy search (needs the [mujoco] extra): gymnasium id and D = actions x observations
_MUJOCO = {"mujoco-swimmer": ("Swimmer-v5", 16), "mujoco-hopper": ("Hopper-v5", 33),
           "mujoco-walker2d": ("Walker2d-v5", 102), "mujoco-halfcheetah": ("HalfCheetah-v5", 102),
           "mujoco-ant": ("Ant-v5", 840)}  # fmt: skip


def _optimize_setup(parser: argparse.ArgumentParser):
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--objective",
                      help="a Python function 'package.module:function' taking a (D,) NumPy array "
                      "and returning a number (minimised unless --maximize); the current folder "
                      "is importable")  # fmt: skip
    what.add_argument("--problem", choices=(*_FUNCTIONS, *_LASSO, "svm-digits", *_MUJOCO),
                      help="an embedded test problem on [0, 1]^D, the rover trajectory "
                      "problem (D = 2 x control points), or a LassoBench synthetic weighted-Lasso "
                      "problem (its own D: 60, 100, 300, 1000; --dim optional), or SVM hyperparameter "
                      "tuning on scikit-learn's digits (D = 66), or a linear policy on a MuJoCo "
                      "task (minus its return; Swimmer D = 16, Hopper 33, Walker2d and HalfCheetah "
                      "102, Ant 840; --seed seeds the episode), instead of --objective")  # fmt: skip
    parser.add_argument(
        "--dim", type=int_arg(low=1), help="dimension D (with --lower/--upper or --problem)"
    )
    parser.add_argument("--d-eff", type=int_arg(low=1), default=10,
                        help="effective dimension of --problem")  # fmt: skip
    parser.add_argument(
        "--lower", type=float_arg(), default=0.0, help="lower bound of every coordinate"
    )
    parser.add_argument(
        "--upper", type=float_arg(), default=1.0, help="upper bound of every coordinate"
    )
    parser.add_argument("--bounds", type=existing_file,
                        help="JSON file holding [[lower...], [upper...]] (overrides --dim/--lower/--upper)")  # fmt: skip
    parser.add_argument("--budget", type=int_arg(low=1), required=True,
                        help="total evaluations, initial design included")  # fmt: skip
    parser.add_argument("--surrogate", choices=("gp", "rff", "pfn", "tabpfn"), default="pfn",
                        help="surrogate: the shipped in-context PFN, a BoTorch GP, random Fourier "
                        "features, or TabPFN v2 from --tabpfn-ckpt")  # fmt: skip
    parser.add_argument("--tabpfn-ckpt", type=existing_file,
                        help="local TabPFN v2 regressor checkpoint (never downloaded)")  # fmt: skip
    parser.add_argument("--pfn-ckpt", type=existing_file,
                        help="a PFN checkpoint from train-pfn instead of the shipped one")  # fmt: skip
    parser.add_argument("--rank", type=int_arg(low=1), default=15, help="subspace rank r")
    parser.add_argument("--n-candidates", type=int_arg(low=1), default=1000,
                        help="candidates per iteration M")  # fmt: skip
    parser.add_argument("--scale", type=float_arg(0, None, low_open=True), default=0.2,
                        help="half-width s of the subspace box (unit-cube units)")  # fmt: skip
    parser.add_argument("--origin", choices=("mean", "best"), default="mean",
                        help="subspace origin: mean of the inputs (official code) or the incumbent")  # fmt: skip
    parser.add_argument("--acquisition", choices=("ucb", "ei", "ts"), default="ucb",
                        help="acquisition over the candidates")  # fmt: skip
    parser.add_argument(
        "--beta", type=float_arg(0), default=4.0, help="UCB beta (a = mu + sqrt(beta) sigma)"
    )
    parser.add_argument("--n-init", type=int_arg(low=1),
                        help="initial design size (default min(50, 2D))")  # fmt: skip
    parser.add_argument("--maximize", action="store_true", help="maximise instead of minimise")
    parser.add_argument("--nonfinite", choices=("error", "skip"), default="error",
                        help="NaN/inf objective values: stop with an error, or record and skip them")  # fmt: skip
    parser.add_argument("--history", type=Path,
                        help="JSONL history; an existing one is resumed (not re-evaluated)")  # fmt: skip
    parser.add_argument("--result", type=Path, help="write the best point and value as JSON here")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    def run(args: argparse.Namespace) -> int:
        if args.history is not None:
            prepare_output_file(args.history, "--history")
        if args.result is not None:
            prepare_output_file(args.result, "--result")
        if args.surrogate == "tabpfn" and args.tabpfn_ckpt is None:
            raise ValueError("--surrogate tabpfn needs --tabpfn-ckpt (a local checkpoint; nothing "
                             "is downloaded)")  # fmt: skip
        import numpy as np

        if args.problem in _LASSO:
            bench, d = _LASSO[args.problem]
            if args.dim is not None and args.dim != d:
                raise ValueError(f"--dim {args.dim}: {args.problem} has D = {d}")
            from iclr26.git_bo.problems import LassoSynthetic

            f = LassoSynthetic(bench)  # LassoBench's data seed (42); --seed seeds the optimiser
            bounds = f.bounds
        elif args.problem == "svm-digits":
            if args.dim is not None and args.dim != 66:
                raise ValueError(f"--dim {args.dim}: svm-digits has D = 66")
            from iclr26.git_bo.problems import SVMDigits

            f = SVMDigits(seed=args.seed)
            bounds = f.bounds
        elif args.problem in _MUJOCO:
            env, d = _MUJOCO[args.problem]
            if args.dim is not None and args.dim != d:
                raise ValueError(f"--dim {args.dim}: {args.problem} has D = {d}")
            from iclr26.git_bo.problems import MujocoPolicy

            f = MujocoPolicy(env, seed=args.seed)
            bounds = f.bounds
        elif args.problem is not None:
            if args.dim is None:
                raise ValueError("--problem needs --dim")
            if args.problem == "rover":
                if args.dim % 2 or args.dim < 8:
                    raise ValueError(f"--dim {args.dim}: rover needs an even D >= 8")
                from iclr26.git_bo.problems import Rover

                f = Rover(n_points=args.dim // 2, seed=args.seed)
            elif args.d_eff > args.dim:
                raise ValueError(f"--d-eff {args.d_eff} is larger than --dim {args.dim}")
            else:
                from iclr26.git_bo.problems import Embedded

                f = Embedded(args.problem, dim=args.dim, d_eff=args.d_eff, seed=args.seed)
            bounds = f.bounds
        else:
            from iclr26.git_bo.problems import load_objective

            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            f = load_objective(args.objective)
            if args.bounds is not None:
                try:
                    bounds = np.asarray(json.loads(args.bounds.read_text()), dtype=float)
                except (json.JSONDecodeError, TypeError, ValueError) as err:
                    raise ValueError(
                        f"--bounds {args.bounds}: not a JSON [[...], [...]] ({err})"
                    ) from err
            else:
                if args.dim is None:
                    raise ValueError("give --dim (with --lower/--upper) or --bounds")
                if args.lower >= args.upper:
                    raise ValueError(f"--lower {args.lower} must be below --upper {args.upper}")
                bounds = np.stack([np.full(args.dim, args.lower), np.full(args.dim, args.upper)])
        from iclr26.git_bo.optimizer import GITBO

        skw = {}
        if args.surrogate == "tabpfn":
            skw = {"model_path": args.tabpfn_ckpt}
        elif args.surrogate == "pfn" and args.pfn_ckpt is not None:
            skw = {"path": args.pfn_ckpt}
        opt = GITBO(bounds, args.surrogate, rank=args.rank, n_candidates=args.n_candidates,
                    scale=args.scale, origin=args.origin, acquisition=args.acquisition,
                    beta=args.beta, n_init=args.n_init, maximize=args.maximize,
                    nonfinite=args.nonfinite, seed=args.seed, surrogate_kwargs=skw)  # fmt: skip
        res = opt.run(f, args.budget, history=args.history, progress_bar=not args.no_progress)
        print(f"best value {res.best_y:.6g} after {res.n_evals} evaluations "
              f"(surrogate: {res.surrogate})")  # fmt: skip
        if args.result is not None:
            write_json(args.result, {"best_y": res.best_y, "best_x": res.best_x,
                                     "n_evals": res.n_evals, "surrogate": res.surrogate})  # fmt: skip
            print(f"wrote {args.result}")
        return 0

    return run


def _train_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--out", type=Path, required=True, help="checkpoint file to write (.safetensors)"
    )
    parser.add_argument("--steps", type=int_arg(low=1), default=2500, help="training steps")
    parser.add_argument("--batch", type=int_arg(low=1), default=16, help="prior datasets per step")
    parser.add_argument("--n-points", type=int_arg(low=4), default=128, help="points per dataset")
    parser.add_argument(
        "--max-dim", type=int_arg(low=1), default=512, help="largest input dimension"
    )
    parser.add_argument(
        "--lr", type=float_arg(0, None, low_open=True), default=1e-3, help="peak learning rate"
    )
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--init", type=existing_file, default=None,
                        help="continue training this PFN checkpoint (its sizes are kept; "
                        "--max-dim is then ignored)")  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    def run(args: argparse.Namespace) -> int:
        prepare_output_file(args.out, "--out")
        import torch

        from iclr26.git_bo.pfn import load_pfn, save_pfn, train_pfn

        torch.set_num_threads(1)
        init = None if args.init is None else load_pfn(args.init).train()
        if init is not None:
            for p in init.parameters():
                p.requires_grad_(True)
        model = train_pfn(steps=args.steps, batch=args.batch, n_points=args.n_points,
                          max_dim=args.max_dim, lr=args.lr, seed=args.seed, model=init,
                          progress_bar=not args.no_progress)  # fmt: skip
        save_pfn(model, args.out, steps=args.steps, batch=args.batch, n_points=args.n_points,
                 seed=args.seed, lr=args.lr, init=None if args.init is None else args.init.name,
                 recipe="iclr26-git-bo train-pfn")  # fmt: skip
        print(f"wrote {args.out}")
        return 0

    return run


# names of experiments.REAL_PROBLEMS, COMPARE_PROBLEMS and METHODS (kept here: --help imports no
# torch; a test checks they agree)
REAL_PROBLEM_NAMES = ("lasso-medium", "lasso-high", "svm-digits", "hopper")
COMPARE_PROBLEM_NAMES = (*REAL_PROBLEM_NAMES, "ackley")
METHOD_NAMES = ("random", "center", "center-box", "vanilla-bo", "turbo", "saasbo", "tpe", "gi-pfn-best",
                "gi-pfn-mean", "gi-pfn-randU", "pfn-full", "gi-rff-best", "gi-rff-mean",
                "gi-rff-randU", "gi-rff-best-s0.1", "gi-rff-best-s0.4", "gi-rff-mean-s0.4",
                "gi-gp-best")  # fmt: skip


def _names_arg(allowed: tuple[str, ...], what: str):
    def parse(text: str) -> list[str]:
        names = [t.strip() for t in text.split(",") if t.strip()]
        bad = [n for n in names if n not in allowed]
        if not names or bad:
            raise argparse.ArgumentTypeError(
                f"{what}: a comma-separated list of {', '.join(allowed)} (got {text!r})"
            )
        return names

    return parse


def _compare_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--problems", type=_names_arg(COMPARE_PROBLEM_NAMES, "--problems"),
                        default=list(REAL_PROBLEM_NAMES),
                        help=f"comma-separated, of {', '.join(COMPARE_PROBLEM_NAMES)} (default: "
                        "the real ones; ackley is the embedded Ackley of reproduce, D = 100, "
                        "reported as regret)")  # fmt: skip
    parser.add_argument("--methods", type=_names_arg(METHOD_NAMES, "--methods"),
                        default=["random", "center", "center-box", "tpe", "turbo", "gi-rff-best",
                                 "gi-rff-mean", "gi-pfn-best"],
                        help=f"comma-separated, of {', '.join(METHOD_NAMES)} (default: the "
                        "default reproduce's: random, center (the box centre, one evaluation), "
                        "center-box, tpe, turbo, gi-rff-best, gi-rff-mean, gi-pfn-best)")  # fmt: skip
    parser.add_argument("--budget", type=int_arg(low=3), default=50,
                        help="evaluations per run, initial design included")  # fmt: skip
    parser.add_argument("--n-init", type=int_arg(low=2), default=20, help="initial Sobol design")
    parser.add_argument("--seeds", type=int_arg(low=1), default=2, help="runs per method")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--out", type=Path, default=Path("reports/git-bo/compare"),
                        help="output folder")  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        if args.budget < args.n_init:
            raise ValueError(f"--budget {args.budget} is below --n-init {args.n_init}")
        out = prepare_output_dir(args.out)
        from iclr26.git_bo.experiments import compare

        report = compare(args.problems, args.methods, budget=args.budget, n_init=args.n_init,
                         seeds=args.seeds, seed=args.seed, progress=not args.no_progress)  # fmt: skip
        report.finish()
        print(report.to_markdown(), flush=True)
        path = report.write(out)
        print(f"wrote {path} and report.json with figures")
        return 0

    return run


main = make_cli(
    "git-bo",
    reproduce="iclr26.git_bo.experiments:reproduce",
    bench="iclr26.git_bo.experiments:bench",
    description="GIT-BO (ICLR 2026): gradient-informed subspace Bayesian optimisation.",
    commands={
        "optimize": ("minimise (or maximise) an objective with GIT-BO", _optimize_setup),
        "train-pfn": ("train the in-context PFN surrogate on GP prior samples", _train_setup),
        "compare": (
            "methods side by side on the real problems (Lasso, SVM, MuJoCo) or embedded Ackley",
            _compare_setup,
        ),
    },
)
