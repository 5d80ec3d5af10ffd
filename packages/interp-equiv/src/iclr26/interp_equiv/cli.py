"""``iclr26-interp-equiv``: compare two groups of implementations; reproduce; bench.

Heavy modules (torch, the experiments) are imported inside the handlers so that ``--help`` and
``--version`` stay fast.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from iclr26.shared import float_arg, int_arg, make_cli

__all__ = ["main"]

_METHODS = ("symmetric", "point", "permutation")
_MEASURES = ("predictivity", "cka", "cka_biased", "procrustes", "svcca")


def _folder(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such folder: {text}")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a folder: {text}")
    return path


def _load_group(folder: Path, n_probe: int, seed: int):
    """Representations of a folder: saved arrays, or saved implementations run on a probe set."""
    from safetensors import safe_open

    from iclr26.interp_equiv.data import probe_inputs
    from iclr26.interp_equiv.iit import gate, load_implementation
    from iclr26.interp_equiv.reprs import load_representations, representations

    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".safetensors"))
    if not files:
        raise ValueError(f"{folder} holds no .npy or .safetensors files")
    models = []
    for f in files:
        if f.suffix == ".safetensors":
            with safe_open(str(f), framework="np") as h:
                if "kind" in (h.metadata() or {}):
                    models.append(f)
    if not models:
        reps = load_representations(folder)
        return list(reps.values()), list(reps), []
    if len(models) != len(files):
        raise ValueError(f"{folder} mixes saved implementations and saved representations")
    impls = [load_implementation(f) for f in models]
    kept, rejected = gate(impls)
    notes = [f"{models[impls.index(i)].name}: not comparable ({why})" for i, why in rejected]
    if not kept:
        return [], [], notes
    probe, _ = probe_inputs(kept[0].task, n_probe, seed)
    return (
        [representations(i.model, probe) for i in kept],
        [models[impls.index(i)].stem for i in kept],
        notes,
    )


def _compare_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "group1",
        type=_folder,
        help="folder of representations (.npy/.safetensors) or saved implementations",
    )
    parser.add_argument("group2", type=_folder, help="the other group, same probe inputs")
    parser.add_argument(
        "--measure", choices=_MEASURES, default="predictivity",
        help="similarity of two representations (default: the official ridge predictivity)",
    )  # fmt: skip
    parser.add_argument(
        "--method", choices=_METHODS, default="symmetric",
        help="decision: both directions (default), the official one-directional point test, "
        "or a group-label permutation test",
    )  # fmt: skip
    parser.add_argument("--n", type=int_arg(1), default=20, help="trials per point test")
    parser.add_argument("--n-boot", type=int_arg(1), default=40, help="bootstrap repetitions")
    parser.add_argument("--n-perm", type=int_arg(1), default=1000, help="label permutations")
    parser.add_argument(
        "--n-probe", type=int_arg(5), default=1000, help="probe inputs for saved implementations"
    )
    parser.add_argument(
        "--margin", type=float_arg(0.0, 1.0), default=None,
        help="ε of the trials (default 0.01 symmetric, 0 point)",
    )  # fmt: skip
    parser.add_argument(
        "--seed", type=int_arg(0, 2**32 - 1), default=0,
        help="seeds the trial draws, the ridge split and the probe set (default: 0)",
    )  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        from iclr26.interp_equiv.estimator import equivalence_test, permutation_test

        g1, names1, notes1 = _load_group(args.group1, args.n_probe, args.seed)
        g2, names2, notes2 = _load_group(args.group2, args.n_probe, args.seed)
        for note in notes1 + notes2:
            print(note)
        if len(g1) < 2 or len(g2) < 2:
            print(json.dumps({"comparable": False, "reason": "each group needs >= 2 usable implementations",
                              "group1": names1, "group2": names2}))  # fmt: skip
            return 1
        if args.method == "permutation":
            r = permutation_test(g1, g2, measure=args.measure, n_perm=args.n_perm, seed=args.seed)
            out = {"statistic": r.statistic, "p_value": r.p_value, "equivalent": not r.reject}
        else:
            r = equivalence_test(
                g1, g2, measure=args.measure, n=args.n, n_boot=args.n_boot,
                symmetric=args.method == "symmetric", replace=args.method == "point", seed=args.seed,
                margin=(0.01 if args.method == "symmetric" else 0.0) if args.margin is None else args.margin,
            )  # fmt: skip
            out = {
                k: getattr(r, k)
                for k in ("rate_12", "rate_21", "within_1", "within_2", "between", "equivalent")
            }
            out = {k: (None if isinstance(v, float) and v != v else v) for k, v in out.items()}
        out.update({"comparable": True, "method": args.method, "measure": args.measure,
                    "group1": names1, "group2": names2})  # fmt: skip
        print(json.dumps(out, indent=2))
        return 0

    return run


# the same names as experiments.SPEED_KERNELS (not imported here: that module loads torch)
_SPEED_KERNELS = ("cka", "ridge", "permutation")


def _kernels_arg(value: str) -> tuple[str, ...]:
    names = tuple(k.strip() for k in value.split(",") if k.strip())
    bad = [k for k in names if k not in _SPEED_KERNELS]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated subset of {','.join(_SPEED_KERNELS)}, got {value!r}"
        )
    return names


def _speed_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--rounds", type=int_arg(1), default=5,
        help="interleaved rounds of ours vs the peer per kernel (default: 5)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="data seed")
    parser.add_argument(
        "--kernels", type=_kernels_arg, default=_SPEED_KERNELS,
        help="comma-separated subset of cka,ridge,permutation (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--no-gram-peer", action="store_true",
        help="skip the n × n Gram CKA peer (≈ 200 GFLOP per call, the slowest by far)",
    )  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        import os

        from iclr26.interp_equiv.experiments import speed_rows

        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        rows, _ = speed_rows(
            rounds=args.rounds, seed=args.seed, kernels=args.kernels,
            gram_peer=not args.no_gram_peer,
        )  # fmt: skip
        keys = list(rows[0])
        print(f"load average at start: {load:.1f}")
        print("| " + " | ".join(keys) + " |")
        print("|" + "---|" * len(keys))
        for r in rows:
            cells = [
                (f"{v:.4g}" if isinstance(v, float) else str(v)).replace("|", "\\|")
                for v in r.values()
            ]
            print("| " + " | ".join(cells) + " |")
        return 0

    return run


main = make_cli(
    "interp-equiv",
    reproduce="iclr26.interp_equiv.experiments:reproduce",
    bench="iclr26.interp_equiv.experiments:bench",
    description="Interpretive equivalence (ICLR 2026): do two groups of models share an algorithm?",
    commands={
        "compare": (
            "test whether two groups of implementations are interpretively equivalent",
            _compare_setup,
        ),
        "speed": (
            "time the similarity kernels at the speed targets' shapes against the peers "
            "(the first table of bench)",
            _speed_setup,
        ),
    },
)
