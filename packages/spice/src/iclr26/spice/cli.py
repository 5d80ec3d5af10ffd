"""``iclr26-spice``: select from a gradient matrix, reproduce, bench.

Only ``iclr26.shared`` (NumPy) loads at start-up; the selectors load inside the ``select``
handler and torch only inside ``reproduce`` and ``bench``, so ``--help``, ``--version`` and
argument errors are instant.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from iclr26.shared import (
    existing_file,
    float_arg,
    int_arg,
    make_cli,
    prepare_output_file,
)

__all__ = ["load_gradients", "main"]


def load_gradients(path: str | Path) -> Any:
    """Read an ``(n, d)`` real gradient matrix from a ``.npy`` file, never unpickling.

    Raises:
        OSError: the file does not exist or cannot be read.
        ValueError: it is not a NumPy ``.npy`` array, or not a 2-D finite real matrix with at
            least one row; the message names the file.
    """
    import numpy as np

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    try:
        with path.open("rb") as f:
            magic = f.read(6)
            f.seek(0)
            if magic != b"\x93NUMPY":
                kind = "a .npz archive" if magic[:2] == b"PK" else "not a NumPy .npy file"
                raise ValueError(
                    f"{path} is {kind}; expected an (n, d) matrix saved with numpy.save"
                )
            G = np.load(f, allow_pickle=False)
    except ValueError as err:
        if str(err).startswith(str(path)):
            raise
        # numpy says "pickled data" for object arrays; say what is wrong with the file instead
        raise ValueError(
            f"{path} does not hold a plain numeric array (object or corrupt .npy): {type(err).__name__}"
        ) from None
    except EOFError:
        raise ValueError(f"{path} is a truncated .npy file") from None
    if G.ndim != 2:
        raise ValueError(f"{path} holds an array of shape {G.shape}, expected (n, d)")
    if not (np.issubdtype(G.dtype, np.floating) or np.issubdtype(G.dtype, np.integer)):
        raise ValueError(f"{path} holds {G.dtype} values, expected real numbers")
    if G.shape[0] == 0 or G.shape[1] == 0:
        raise ValueError(f"{path} holds an empty matrix of shape {G.shape}")
    if not np.isfinite(G).all():
        raise ValueError(f"{path} holds NaN or inf values")
    return G


def _select_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "gradients", type=existing_file, help=".npy file holding an (n, d) gradient matrix"
    )
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--k", type=int_arg(1), help="number of rows to select")
    size.add_argument(
        "--budget",
        type=float_arg(0.0, 1.0, low_open=True),
        help="share of the rows to select, in (0, 1]: k = max(1, round(budget · n))",
    )
    parser.add_argument(
        "--selector",
        choices=("spice", "greedy", "topk"),
        default="spice",
        help="SPICE, plain log-det greedy, or the official top-k rule",
    )
    parser.add_argument(
        "--alpha",
        type=float_arg(0.0, low_open=True),
        default=1.0,
        help="Fisher regularisation α > 0",
    )
    parser.add_argument(
        "--conflict-penalty",
        type=float_arg(0.0),
        default=0.1,
        help="conflict penalty λ >= 0 (spice only)",
    )
    parser.add_argument(
        "--penalty-scale",
        choices=("raw", "relative"),
        default="raw",
        help="raw penalty (official) or scaled by the median current gain (spice only)",
    )
    parser.add_argument(
        "--mode",
        choices=("exact", "diag", "diag_official"),
        default="exact",
        help="exact log-det, diagonal, or the official diagonal arithmetic",
    )
    parser.add_argument(
        "--halflife",
        type=float_arg(0.0, 1.0),
        help="stop when the best gain falls below halflife × the first gain, in [0, 1]",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="write the selection as JSON to this file (default: print it)",
    )

    def run(args: argparse.Namespace) -> int:
        if args.out is not None:
            prepare_output_file(args.out, "--out")
        G = load_gradients(args.gradients)
        n = G.shape[0]
        if args.k is not None and args.k > n:
            raise ValueError(f"--k {args.k} is larger than the pool ({n} rows in {args.gradients})")
        k = args.k if args.k is not None else max(1, round(args.budget * n))

        from iclr26.shared import dumps_json, write_json
        from iclr26.spice.select import greedy_logdet, spice, topk

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
            "indices": sel.indices, "gains": sel.gains, "eps": sel.eps,
            "logdet": sel.logdet, "stopped_early": sel.stopped_early, "config": sel.config,
        }  # fmt: skip
        if args.out is not None:
            write_json(args.out, payload)
        else:
            print(dumps_json(payload))
        return 0

    return run


main = make_cli(
    "spice",
    reproduce="iclr26.spice.experiments:reproduce",
    bench="iclr26.spice.experiments:bench",
    description="SPICE (ICLR 2026): conflict-aware Fisher log-det data selection.",
    commands={"select": ("select rows of a gradient matrix (.npy)", _select_setup)},
)
