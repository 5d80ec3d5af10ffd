"""``iclr26-bee``: reproduce, bench, and ``discover`` (embeddings + labels + vocabulary -> ranked
spurious concepts with z-scores, a CSV and a plot).

Nothing heavy is imported at module import: ``--help`` and ``--version`` stay fast and torch-free.
"""

from __future__ import annotations

import argparse
import csv
import logging
from pathlib import Path
from typing import Any

from iclr26.shared import (
    existing_file,
    float_arg,
    int_arg,
    make_cli,
    prepare_output_dir,
)

__all__ = ["main"]

log = logging.getLogger(__name__)


def _read_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _read_ints(path: Path, name: str) -> Any:
    import numpy as np

    if path.suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
    else:
        lines = _read_lines(path)
        try:
            arr = np.array([float(x.split(",")[0]) for x in lines])
        except ValueError as err:
            raise ValueError(f"{path}: {name} must be one integer per line ({err})") from err
    return arr


def _discover_setup(parser: argparse.ArgumentParser):
    parser.add_argument("--embeddings", type=existing_file, required=True,
                        help="(n, d) sample embeddings, .npy or .parquet")  # fmt: skip
    parser.add_argument("--labels", type=existing_file, required=True,
                        help="n integer labels: .npy or a text file, one per line")  # fmt: skip
    parser.add_argument("--vocab", type=existing_file, required=True,
                        help="candidate concepts, one per line")  # fmt: skip
    parser.add_argument("--class-names", required=True,
                        help="comma-separated class names, in label order (their embeddings "
                        "initialise the probe)")  # fmt: skip
    parser.add_argument("--encoder", choices=("minilm", "precomputed"), default="minilm",
                        help="text encoder of class names and concepts (default minilm)")  # fmt: skip
    parser.add_argument("--concept-embeddings", type=existing_file,
                        help="with --encoder precomputed: (K, d) rows matching --vocab")  # fmt: skip
    parser.add_argument("--anchor-embeddings", type=existing_file,
                        help="with --encoder precomputed: (C, d) rows matching --class-names")  # fmt: skip
    parser.add_argument("--class-terms", type=existing_file,
                        help="words naming the classes (species, synonyms), one per line; "
                        "removed from the concepts together with the class names")  # fmt: skip
    parser.add_argument("--groups", type=existing_file,
                        help="n integer attribute labels, for --null groups")  # fmt: skip
    parser.add_argument("--null", choices=("permutation", "groups", "bootstrap", "none"),
                        default="permutation", help="null for the z-scores (default permutation)")  # fmt: skip
    parser.add_argument("--n-null", type=int_arg(low=1), default=20, help="null refits (20)")
    parser.add_argument("--val-fraction", type=float_arg(0, 1, low_open=True, high_open=True), default=0.2,
                        help="held-out fraction for early stopping (0.2)")  # fmt: skip
    parser.add_argument("--top", type=int_arg(low=1), default=20,
                        help="rows per class and mode in the CSV (20)")  # fmt: skip
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed (0)")
    parser.add_argument("--out", type=Path, default=Path("reports/bee/discover"),
                        help="output folder (concepts.csv, scores.png)")  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        import numpy as np

        prepare_output_dir(args.out)
        from iclr26.bee.encoders import load_embeddings
        from iclr26.bee.probe import as_labels
        from iclr26.bee.vocab import filter_class_terms

        names = [c.strip() for c in args.class_names.split(",") if c.strip()]
        if len(names) < 2:
            raise ValueError(f"--class-names needs at least 2 names, got {names}")
        X = load_embeddings(args.embeddings)
        y = as_labels(_read_ints(args.labels, "labels"), "labels", X.shape[0], len(names))
        if np.unique(y).size < 2:
            raise ValueError("labels hold a single class; BEE compares classes and needs >= 2")
        vocab = _read_lines(args.vocab)
        if not vocab:
            raise ValueError(f"--vocab {args.vocab} holds no concepts")
        terms = _read_lines(args.class_terms) if args.class_terms else []
        if args.encoder == "precomputed":
            if args.concept_embeddings is None or args.anchor_embeddings is None:
                raise ValueError("--encoder precomputed needs --concept-embeddings and "
                                 "--anchor-embeddings")  # fmt: skip
            E_all = load_embeddings(args.concept_embeddings)
            if E_all.shape[0] != len(vocab):
                raise ValueError(f"--concept-embeddings has {E_all.shape[0]} rows, --vocab "
                                 f"{len(vocab)} lines")  # fmt: skip
            A0 = load_embeddings(args.anchor_embeddings)
            if A0.shape[0] != len(names):
                raise ValueError(f"--anchor-embeddings has {A0.shape[0]} rows for "
                                 f"{len(names)} class names")  # fmt: skip
            # precomputed rows cannot be re-embedded: keep or drop each concept whole
            rows = [
                i for i, k in enumerate(vocab)
                if filter_class_terms([k], names, terms, keep="compound")
            ]  # fmt: skip
            concepts, E = [vocab[i] for i in rows], E_all[rows]
        else:
            concepts = filter_class_terms(vocab, names, terms, keep="attribute")
            E = A0 = None
        if not concepts:
            raise ValueError("every concept of --vocab was removed by the class-term filter")
        groups = None
        if args.null == "groups":
            if args.groups is None:
                raise ValueError("--null groups needs --groups")
            groups = as_labels(_read_ints(args.groups, "groups"), "groups", X.shape[0])
        if E is None:
            from iclr26.bee.encoders import MiniLMEncoder

            enc = MiniLMEncoder()
            if enc.dim != X.shape[1]:
                raise ValueError(f"the MiniLM encoder has dimension {enc.dim} but --embeddings "
                                 f"has {X.shape[1]}: embed data and concepts with one model")  # fmt: skip
            E, A0 = enc.encode(concepts), enc.encode(names)
        if E.shape[1] != X.shape[1] or A0.shape[1] != X.shape[1]:
            raise ValueError(f"concept/anchor embeddings have dimension {E.shape[1]}/"
                             f"{A0.shape[1]} but --embeddings has {X.shape[1]}")  # fmt: skip
        _discover_run(args, X, y, names, concepts, E, A0, groups)
        return 0

    return run


def _discover_run(args, X, y, names, concepts, E, A0, groups) -> None:
    import numpy as np

    from iclr26.bee.calibration import null_calibrate
    from iclr26.bee.probe import fit_probe
    from iclr26.bee.scoring import alignment, class_scores, drift_scores, select_concepts

    rng = np.random.default_rng(args.seed)
    perm = rng.permutation(len(y))
    n_val = max(2, round(args.val_fraction * len(y)))
    val, tr = perm[:n_val], perm[n_val:]
    res = fit_probe(X[tr], y[tr], X[val], y[val], A0, seed=args.seed)
    official = class_scores(alignment(res.W, E))
    drift = drift_scores(res.W, res.W0, E)
    z = None
    if args.null != "none":
        kw: dict[str, Any] = {}
        if args.null == "groups":
            kw = {"groups_train": groups[tr], "groups_val": groups[val]}
        z = null_calibrate(
            X[tr], y[tr], X[val], y[val], A0, E, null=args.null, n_null=args.n_null,
            n_boot=args.n_null, seed=args.seed, **kw,
        ).z  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "concepts.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["class", "mode", "rank", "concept", "score", "z", "above_knee"])
        for c, name in enumerate(names):
            for mode, M in (("official", official), ("drift", drift)):
                knee = set(select_concepts(M[c]).tolist())
                order = np.argsort(-M[c], kind="stable")[: args.top]
                for r, k in enumerate(order, 1):
                    zz = "" if z is None or mode != "drift" else f"{z[c, k]:.3f}"
                    w.writerow([name, mode, r, concepts[k], f"{M[c, k]:.6f}", zz, k in knee])
    _plot(args.out / "scores.png", names, concepts, official, drift, z)
    for c, name in enumerate(names):
        top = np.argsort(-drift[c], kind="stable")[:5]
        shown = ", ".join(concepts[k] + ("" if z is None else f" (z {z[c, k]:.1f})") for k in top)
        print(f"{name}: drift top-5: {shown}")
    print(f"wrote {path} and {args.out / 'scores.png'}")


def _plot(path: Path, names, concepts, official, drift, z) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = [("official", official), ("drift", drift)] + ([("z", z)] if z is not None else [])
    C = len(names)
    fig, axes = plt.subplots(C, len(panels), figsize=(4.5 * len(panels), 2.8 * C), squeeze=False)
    for c in range(C):
        for j, (title, M) in enumerate(panels):
            order = np.argsort(-M[c], kind="stable")[:15]
            ax = axes[c, j]
            ax.barh(range(len(order))[::-1], M[c, order])
            ax.set_yticks(range(len(order))[::-1])
            ax.set_yticklabels([concepts[k] for k in order], fontsize=7)
            ax.set_title(f"{names[c]}: {title}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


main = make_cli(
    "bee",
    reproduce="iclr26.bee.experiments:reproduce",
    bench="iclr26.bee.experiments:bench",
    description="BEE (ICLR 2026): spurious correlations from a linear probe's weights.",
    commands={
        "discover": (
            "rank the spurious concepts of labelled embeddings (CSV + plot)",
            _discover_setup,
        )
    },
)
