"""``iclr26-refusal-index``: reproduce, bench, compute RI from pass files, evaluate an endpoint."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from iclr26.refusal_index.clients import OpenAICompatibleClient
from iclr26.refusal_index.estimators import refusal_index_from_rates, refusal_index_paired
from iclr26.refusal_index.experiments import bench, reproduce
from iclr26.refusal_index.harness import REFUSAL_PROMPTS, Item, TwoPassEvaluator
from iclr26.shared import make_cli

__all__ = ["main"]


def _read_jsonl(path: Path) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n}: not valid JSON ({err.msg})") from err
            if "id" not in row:
                raise ValueError(f"{path}:{n}: every line needs an 'id'")
            rows[str(row["id"])] = row
    if not rows:
        raise ValueError(f"{path} holds no records")
    return rows


def _flag(row: dict, key: str, path: Path) -> bool:
    value = row.get(key)
    if not isinstance(value, bool):
        raise ValueError(f"{path}: record {row['id']!r} needs a boolean {key!r}, got {value!r}")
    return value


def _compute_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--pass-a", type=Path, required=True, help="forced pass JSONL: {id, correct}"
    )
    parser.add_argument(
        "--pass-b",
        type=Path,
        required=True,
        help="refusal pass JSONL: {id, refused, correct (if answered)}",
    )
    parser.add_argument(
        "--rates-only", action="store_true", help="use only aggregate rates (unpaired)"
    )
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (paired)")
    parser.add_argument("--seed", type=int, default=0)

    def run(args: argparse.Namespace) -> int:
        a, b = _read_jsonl(args.pass_a), _read_jsonl(args.pass_b)
        ids = sorted(a.keys() & b.keys())
        if not ids:
            raise ValueError("the two pass files share no ids")
        refused = [_flag(b[i], "refused", args.pass_b) for i in ids]
        forced_correct = [_flag(a[i], "correct", args.pass_a) for i in ids]
        answered_correct = [
            forced_correct[k] if refused[k] else _flag(b[i], "correct", args.pass_b)
            for k, i in enumerate(ids)
        ]
        n = len(ids)
        if args.rates_only:
            w = sum(not r and not c for r, c in zip(refused, answered_correct, strict=True)) / n
            result = refusal_index_from_rates(sum(refused) / n, 1 - sum(forced_correct) / n, w, n)
        else:
            result = refusal_index_paired(
                refused,
                forced_correct,
                answered_correct=answered_correct,
                n_boot=args.n_boot,
                seed=args.seed,
            )
        print(json.dumps(asdict(result) | {"unmatched_ids": len(a.keys() ^ b.keys())}, indent=2))
        return 0

    return run


def _eval_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--base-url",
        required=True,
        help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1",
    )
    parser.add_argument("--model", required=True)
    parser.add_argument(
        "--items",
        type=Path,
        help="JSONL {id, question, answers}; default: the bundled country facts",
    )
    parser.add_argument("--strength", type=int, default=1, choices=range(len(REFUSAL_PROMPTS)))
    parser.add_argument(
        "--log", type=Path, required=True, help="JSONL log of responses (resumable)"
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--api-key")

    def run(args: argparse.Namespace) -> int:
        if args.items:
            items = [
                Item(str(r["id"]), r["question"], tuple(r["answers"]))
                for r in _read_jsonl(args.items).values()
            ]
        else:
            from iclr26.refusal_index.facts import load_fact_table

            items = load_fact_table().items()
        with OpenAICompatibleClient(args.base_url, args.model, api_key=args.api_key) as client:
            result = TwoPassEvaluator(
                client,
                refusal_strength=args.strength,
                max_concurrency=args.concurrency,
                log_path=args.log,
                progress=True,
            ).run(items)
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return 0

    return run


main = make_cli(
    "refusal-index",
    reproduce=reproduce,
    bench=bench,
    description="Refusal Index (ICLR 2026): knowledge-aware refusal of LLMs.",
    commands={
        "compute": ("RI from two pass files (JSONL)", _compute_setup),
        "eval": ("run both passes against an OpenAI-compatible endpoint", _eval_setup),
    },
)
