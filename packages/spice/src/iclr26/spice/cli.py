"""``iclr26-spice``: select from a gradient matrix, reproduce, bench."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from iclr26.shared import make_cli
from iclr26.spice.experiments import bench, reproduce
from iclr26.spice.select import greedy_logdet, spice, topk

__all__ = ["main"]


def _select_setup(parser: argparse.ArgumentParser):
    parser.add_argument("gradients", type=Path, help=".npy file holding an (n, d) gradient matrix")
    parser.add_argument("--k", type=int, help="number to select")
    parser.add_argument("--budget", type=float, help="share to select (instead of --k)")
    parser.add_argument("--selector", choices=("spice", "greedy", "topk"), default="spice")
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--conflict-penalty", type=float, default=0.1)
    parser.add_argument("--penalty-scale", choices=("raw", "relative"), default="raw")
    parser.add_argument("--mode", choices=("exact", "diag", "diag_official"), default="exact")
    parser.add_argument("--halflife", type=float)
    parser.add_argument(
        "--out", type=Path, help="write the selection as JSON here (default: print)"
    )

    def run(args: argparse.Namespace) -> int:
        G = np.load(args.gradients)
        if (args.k is None) == (args.budget is None):
            raise ValueError("give exactly one of --k and --budget")
        k = args.k if args.k is not None else max(1, round(args.budget * len(G)))
        if args.selector == "topk":
            sel = topk(G, k, alpha=args.alpha, halflife=args.halflife)
        elif args.selector == "greedy":
            sel = greedy_logdet(G, k, alpha=args.alpha, mode=args.mode, halflife=args.halflife)
        else:
            sel = spice(
                G, k, alpha=args.alpha, conflict_penalty=args.conflict_penalty,
                penalty_scale=args.penalty_scale, mode=args.mode, halflife=args.halflife,
            )  # fmt: skip
        payload = {
            "indices": sel.indices.tolist(), "gains": sel.gains.tolist(), "eps": sel.eps.tolist(),
            "logdet": sel.logdet, "stopped_early": sel.stopped_early, "config": sel.config,
        }  # fmt: skip
        text = json.dumps(payload, indent=2)
        if args.out:
            args.out.write_text(text + "\n")
        else:
            print(text)
        return 0

    return run


main = make_cli(
    "spice",
    reproduce=reproduce,
    bench=bench,
    description="SPICE (ICLR 2026): conflict-aware Fisher log-det data selection.",
    commands={"select": ("select rows of a gradient matrix (.npy)", _select_setup)},
)
