"""``iclr26-elvis``: re-rank a folder of database images for a folder of queries; reproduce; bench."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cv2
import torch

from iclr26.elvis.experiments import bench, reproduce
from iclr26.elvis.features import extract_sift
from iclr26.elvis.global_desc import VLAD
from iclr26.elvis.model import ELViS, load_official_checkpoint
from iclr26.elvis.rerank import rerank
from iclr26.shared import make_cli

__all__ = ["main"]

_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}


def _images(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in _SUFFIXES)
    if not files:
        raise ValueError(f"{folder} holds no images ({', '.join(sorted(_SUFFIXES))})")
    return files


def _rerank_setup(parser: argparse.ArgumentParser):
    parser.add_argument("queries", type=Path, help="folder of query images")
    parser.add_argument("database", type=Path, help="folder of database images")
    parser.add_argument("--top-k", type=int, default=100, help="shortlist size (capped at N)")
    parser.add_argument("--n-features", type=int, default=600)
    parser.add_argument("--temperature", type=float, default=10.0)
    parser.add_argument("--lam", type=float, default=0.5)
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help="an official-format ELViS checkpoint (.pt; its descriptors must be SIFT-sized to match)",
    )
    parser.add_argument("--show", type=int, default=10, help="results listed per query")
    parser.add_argument("--out", type=Path, help="write the ranking as JSON here (default: print)")

    def run(args: argparse.Namespace) -> int:
        torch.set_num_threads(1)
        qp, dp = _images(args.queries), _images(args.database)
        read = lambda p: cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)  # noqa: E731
        qf = [extract_sift(read(p), args.n_features) for p in qp]
        df = [extract_sift(read(p), args.n_features) for p in dp]
        vlad = VLAD(min(32, sum(len(f) for f in qf + df)), seed=0).fit(qf + df)
        sims = vlad.encode(qf) @ vlad.encode(df).T
        if args.checkpoint:
            model = load_official_checkpoint(args.checkpoint, temperature=args.temperature)
        else:
            model = ELViS(128, temperature=args.temperature).init_untrained_(gain=0.7)
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
        text = json.dumps(result, indent=2)
        if args.out:
            args.out.write_text(text + "\n")
        else:
            print(text)
        return 0

    return run


main = make_cli(
    "elvis",
    reproduce=reproduce,
    bench=bench,
    description="ELViS (ICLR 2026): similarity-space re-ranking from local descriptors.",
    commands={"rerank": ("re-rank database images for each query image", _rerank_setup)},
)
