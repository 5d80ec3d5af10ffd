"""``iclr26-refusal-index``: reproduce, bench, compute RI from pass files, evaluate an endpoint.

Only the standard library and ``iclr26.shared`` are imported here: ``--help``, ``--version`` and
argument errors return at once. The handlers import NumPy, SciPy and httpx when they run.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from iclr26.shared import (
    dumps_json,
    existing_file,
    float_arg,
    int_arg,
    make_cli,
    prepare_output_file,
    read_jsonl,
)

__all__ = ["main"]

PROG = "iclr26-refusal-index"
#: Exit status of ``eval`` when the endpoint fails (unreachable, retries spent, bad replies).
EXIT_ENDPOINT = 1
#: Environment variable the API key is read from unless ``--api-key-env`` names another.
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
N_STRENGTHS = 4  # len(harness.REFUSAL_PROMPTS), kept here so --help imports nothing heavy

log = logging.getLogger(__name__)


def _by_id(rows: list[dict[str, Any]], path: Path) -> dict[str, dict[str, Any]]:
    """Index records by ``id``; a repeated id is an error that counts and names them."""
    counts = Counter(str(r["id"]) for r in rows)
    repeated = sorted(i for i, c in counts.items() if c > 1)
    if repeated:
        extra = sum(counts[i] - 1 for i in repeated)
        raise ValueError(
            f"{path}: {len(repeated)} ids appear more than once ({extra} extra records), e.g. "
            f"{', '.join(map(repr, repeated[:5]))}; each question must appear once per pass"
        )
    return {str(r["id"]): r for r in rows}


def _flag(row: dict, key: str, path: Path) -> bool:
    value = row.get(key)
    if not isinstance(value, bool):
        raise ValueError(f"{path}: record {row['id']!r} needs a boolean {key!r}, got {value!r}")
    return value


def _compute_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--pass-a",
        type=existing_file,
        required=True,
        help="forced-answer pass, JSONL with one {id, correct} per question",
    )
    parser.add_argument(
        "--pass-b",
        type=existing_file,
        required=True,
        help="refusal-allowed pass, JSONL with one {id, refused, correct (if answered)} per question",
    )
    parser.add_argument(
        "--rates-only",
        action="store_true",
        help="use only the aggregate rates (unpaired estimator) instead of per-question pairs",
    )
    parser.add_argument(
        "--max-unmatched",
        type=float_arg(0.0, 1.0),
        default=0.05,
        help="largest share of ids found in only one pass file before it is an error "
        "(a smaller share is a warning with counts)",
    )
    parser.add_argument(
        "--n-boot",
        type=int_arg(10, 1_000_000),
        default=1000,
        help="bootstrap resamples for the paired CI",
    )
    parser.add_argument(
        "--seed", type=int_arg(0, 2**32 - 1), default=0, help="seed of the bootstrap"
    )

    def run(args: argparse.Namespace) -> int:
        from dataclasses import asdict

        from iclr26.refusal_index.estimators import (
            refusal_index_from_rates,
            refusal_index_paired,
        )

        a = _by_id(read_jsonl(args.pass_a, required=("id",)), args.pass_a)
        b = _by_id(read_jsonl(args.pass_b, required=("id",)), args.pass_b)
        ids = sorted(a.keys() & b.keys())
        only_a, only_b = len(a.keys() - b.keys()), len(b.keys() - a.keys())
        union = len(a.keys() | b.keys())
        share = (only_a + only_b) / union
        if not ids:
            raise ValueError(
                f"{args.pass_a} and {args.pass_b} share no ids ({len(a)} and {len(b)} records)"
            )
        if only_a or only_b:
            message = (
                f"{only_a + only_b} of {union} ids ({share:.1%}) are in only one pass file "
                f"({only_a} only in --pass-a, {only_b} only in --pass-b); RI uses the "
                f"{len(ids)} shared ids"
            )
            if share > args.max_unmatched:
                raise ValueError(message + f", above --max-unmatched {args.max_unmatched:g}")
            warnings.warn(message, stacklevel=1)
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
        out = asdict(result) | {
            "unmatched_ids": only_a + only_b,
            "only_in_pass_a": only_a,
            "only_in_pass_b": only_b,
        }
        print(dumps_json(out))  # RFC 8259: a NaN estimate is printed as null
        return 0

    return run


def _items(path: Path | None) -> list:
    from iclr26.refusal_index.harness import Item

    if path is None:
        from iclr26.refusal_index.facts import load_fact_table

        return load_fact_table().items()
    rows = read_jsonl(path, required=("id", "question", "answers"))
    _by_id(rows, path)
    items = []
    for n, r in enumerate(rows, 1):
        if not isinstance(r["question"], str) or not r["question"].strip():
            raise ValueError(
                f"{path}: record {n} ({r['id']!r}): 'question' must be a non-empty string"
            )
        answers = r["answers"]
        if isinstance(answers, str) or not isinstance(answers, list):
            raise ValueError(
                f"{path}: record {n} ({r['id']!r}): 'answers' must be a list of strings"
            )
        try:
            items.append(Item(str(r["id"]), str(r["question"]), tuple(answers)))
        except ValueError as err:
            raise ValueError(f"{path}: record {n}: {err}") from None
    return items


def _eval_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "--base-url",
        required=True,
        help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1",
    )
    parser.add_argument("--model", required=True, help="model name sent with every request")
    parser.add_argument(
        "--items",
        type=existing_file,
        help="JSONL {id, question, answers: [...]} to ask; default: the bundled country facts",
    )
    parser.add_argument(
        "--strength",
        type=int_arg(0, N_STRENGTHS - 1),
        default=1,
        help="refusal prompt strength, 0 (refuse only with no idea) to 3 (refuse unless certain)",
    )
    parser.add_argument(
        "--log",
        type=Path,
        required=True,
        help="JSONL log, one line per answer as it arrives; rerun with the same log to resume",
    )
    parser.add_argument(
        "--samples",
        type=int_arg(1, 1000),
        default=1,
        help="answers per question and pass (K); K > 1 adds the K-sample RI and needs "
        "--temperature above 0",
    )
    parser.add_argument(
        "--temperature",
        type=float_arg(0.0, 2.0),
        default=None,
        help="sampling temperature (default: 0, or 1 with --samples above 1)",
    )
    parser.add_argument(
        "--max-tokens", type=int_arg(1, 1_000_000), default=256, help="longest answer, in tokens"
    )
    parser.add_argument(
        "--concurrency", type=int_arg(1, 256), default=4, help="requests in flight at once"
    )
    parser.add_argument(
        "--timeout",
        type=float_arg(0.0, None, low_open=True),
        default=60.0,
        help="seconds to wait for one reply",
    )
    parser.add_argument(
        "--max-retries",
        type=int_arg(0, 100),
        default=3,
        help="retries of one request (429, 5xx, timeout, connection error) before the run stops",
    )
    parser.add_argument(
        "--retry-budget",
        type=int_arg(0, None),
        default=20,
        help="retries allowed over the whole run; when spent the run stops (answers so far "
        "stay in the log)",
    )
    parser.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help=f"environment variable holding the API key (default: {DEFAULT_KEY_ENV} if set; "
        "none for local servers). Keys are never taken from the command line",
    )
    parser.add_argument(
        "--n-boot", type=int_arg(10, 1_000_000), default=1000, help="bootstrap resamples"
    )
    parser.add_argument(
        "--seed", type=int_arg(0, 2**32 - 1), default=0, help="seed of the bootstrap"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")

    def run(args: argparse.Namespace) -> int:
        # Everything a user can get wrong is checked before the first request.
        log_path = prepare_output_file(args.log, "--log")
        if not args.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"--base-url must start with http:// or https://, got {args.base_url!r}"
            )
        temperature = args.temperature
        if temperature is None:
            temperature = 1.0 if args.samples > 1 else 0.0
        if args.samples > 1 and temperature == 0.0:
            raise ValueError("--samples above 1 needs --temperature above 0 (else K equal answers)")
        key_env = args.api_key_env or DEFAULT_KEY_ENV
        api_key = os.environ.get(key_env) or None
        if args.api_key_env and api_key is None:
            raise ValueError(
                f"--api-key-env {args.api_key_env}: that environment variable is not set"
            )
        items = _items(args.items)

        from iclr26.refusal_index.clients import ClientError, OpenAICompatibleClient
        from iclr26.refusal_index.harness import TwoPassEvaluator

        client = OpenAICompatibleClient(
            args.base_url,
            args.model,
            api_key=api_key,
            timeout=args.timeout,
            max_retries=args.max_retries,
            retry_budget=args.retry_budget,
            temperature=temperature,
            max_tokens=args.max_tokens,
        )
        try:
            with client:
                result = TwoPassEvaluator(
                    client,
                    refusal_strength=args.strength,
                    max_concurrency=args.concurrency,
                    log_path=log_path,
                    samples=args.samples,
                    n_boot=args.n_boot,
                    seed=args.seed,
                    progress=not args.no_progress,
                ).run(items)
        except ClientError as err:
            print(
                f"{PROG}: error: {err} (answers so far are in {log_path}; rerun to resume)",
                file=sys.stderr,
            )
            return EXIT_ENDPOINT
        print(dumps_json(result.to_dict()))
        return 0

    return run


main = make_cli(
    "refusal-index",
    reproduce="iclr26.refusal_index.experiments:reproduce",
    bench="iclr26.refusal_index.experiments:bench",
    description="Refusal Index (ICLR 2026): knowledge-aware refusal of LLMs.",
    commands={
        "compute": ("RI from two pass files (JSONL)", _compute_setup),
        "eval": ("run both passes against an OpenAI-compatible endpoint", _eval_setup),
    },
)

if __name__ == "__main__":
    sys.exit(main())
