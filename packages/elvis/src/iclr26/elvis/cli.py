"""``iclr26-elvis``: re-rank a folder of database images for a folder of queries; reproduce; bench.

Only ``iclr26.shared`` loads at start-up; OpenCV and torch load inside the handlers, so
``--help``, ``--version`` and argument errors are instant. Every input is checked before the
long work: the folders and their images, the checkpoint (loaded first), the output file.
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

__all__ = ["main", "read_image"]

_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}


def _folder(text: str) -> Path:
    """An argparse ``type`` for an existing folder."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, expected a folder of images")
    return path


def _images(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in _SUFFIXES)
    if not files:
        raise ValueError(f"{folder} holds no images ({', '.join(sorted(_SUFFIXES))})")
    return files


def read_image(path: Path) -> Any:
    """Read ``path`` as a greyscale uint8 image; a ValueError naming the file if it cannot be
    decoded (OpenCV's own warnings are silenced so the user sees one line)."""
    import cv2
    import numpy as np

    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as err:
        raise OSError(f"{path}: cannot read it ({err.strerror or err})") from None
    previous = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        image = cv2.imdecode(data, cv2.IMREAD_GRAYSCALE) if data.size else None
    except cv2.error:
        image = None
    finally:
        cv2.utils.logging.setLogLevel(previous)
    if image is None or image.size == 0:
        raise ValueError(f"{path} is not a readable image (corrupt or unsupported format)")
    return image


def _rerank_setup(parser: argparse.ArgumentParser):
    parser.add_argument("queries", type=_folder, help="folder of query images")
    parser.add_argument("database", type=_folder, help="folder of database images")
    parser.add_argument(
        "--top-k", type=int_arg(1), default=100, help="shortlist size (capped at the database size)"
    )
    parser.add_argument(
        "--n-features", type=int_arg(1), default=600, help="SIFT keypoints kept per image"
    )
    parser.add_argument(
        "--temperature",
        type=float_arg(0.0, low_open=True),
        default=10.0,
        help="Sinkhorn temperature τ > 0 (the official value)",
    )
    parser.add_argument(
        "--lam",
        type=float_arg(0.0, 1.0),
        default=0.5,
        help="fusion weight λ of the global score, in [0, 1]",
    )
    parser.add_argument(
        "--checkpoint",
        type=existing_file,
        help="an official-format ELViS checkpoint (.pt) whose descriptors are 128-d like SIFT "
        "(default: the untrained OT + vote scorer)",
    )
    parser.add_argument("--show", type=int_arg(1), default=10, help="results listed per query")
    parser.add_argument(
        "--out", type=Path, help="write the ranking as JSON to this file (default: print it)"
    )

    def run(args: argparse.Namespace) -> int:
        if args.out is not None:
            prepare_output_file(args.out, "--out")
        qp, dp = _images(args.queries), _images(args.database)

        import torch

        from iclr26.elvis.features import extract_sift
        from iclr26.elvis.global_desc import VLAD
        from iclr26.elvis.model import ELViS, load_official_checkpoint
        from iclr26.elvis.rerank import rerank
        from iclr26.shared import dumps_json, write_json

        torch.set_num_threads(1)
        if args.checkpoint:  # before any feature extraction: a bad file fails in a second
            model = load_official_checkpoint(args.checkpoint, temperature=args.temperature)
            if model.in_dim != 128:
                raise ValueError(
                    f"checkpoint {args.checkpoint} expects {model.in_dim}-d descriptors; "
                    "this command extracts 128-d SIFT"
                )
        else:
            model = ELViS(128, temperature=args.temperature).init_untrained_(gain=0.7)
        queries = [read_image(p) for p in qp]  # every image is decoded before any scoring
        database = [read_image(p) for p in dp]
        qf = [extract_sift(img, args.n_features) for img in queries]
        df = [extract_sift(img, args.n_features) for img in database]
        vlad = VLAD(min(32, sum(len(f) for f in qf + df)), seed=0).fit(qf + df)
        sims = vlad.encode(qf) @ vlad.encode(df).T
        scores, order = rerank(
            sims, model.score, qf, df, top_k=min(args.top_k, len(dp)), lam=args.lam, t="auto"
        )
        result = {
            q.name: [
                {"image": dp[j].name, "score": float(s)}
                for j, s in zip(order[i, : args.show], scores[i, : args.show], strict=False)
            ]
            for i, q in enumerate(qp)
        }
        if args.out is not None:
            write_json(args.out, result)
        else:
            print(dumps_json(result))
        return 0

    return run


main = make_cli(
    "elvis",
    reproduce="iclr26.elvis.experiments:reproduce",
    bench="iclr26.elvis.experiments:bench",
    description="ELViS (ICLR 2026): similarity-space re-ranking from local descriptors.",
    commands={"rerank": ("re-rank database images for each query image", _rerank_setup)},
)
