"""``iclr26-analytica``: reproduce, bench, analyze a proposition with an LLM server, render, what-if.

Heavy modules (pandas, scipy, httpx, matplotlib) are imported inside the handlers so ``--help``
and ``--version`` stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from iclr26.shared import existing_file, float_arg, int_arg, make_cli, prepare_output_dir

__all__ = ["main"]


def _iso_date(text: str) -> str:
    import datetime as dt

    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, got {text!r}") from None


def _url(text: str) -> str:
    if not re.match(r"^https?://", text):
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL, got {text!r}")
    return text


def _assignment(text: str) -> tuple[str, float]:
    pid, sep, value = text.partition("=")
    try:
        p = float(value)
    except ValueError:
        p = float("nan")
    if not sep or not pid or not 0.0 <= p <= 1.0:
        raise argparse.ArgumentTypeError(
            f"--set takes PID=VALUE with VALUE in [0, 1], got {text!r}"
        )
    return pid, p


def _analyze_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "proposition", help='the root proposition, e.g. "The S&P 500 rises over the next year"'
    )
    parser.add_argument(
        "--base-url",
        type=_url,
        required=True,
        help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1",
    )
    parser.add_argument("--model", required=True, help="model name the server expects")
    parser.add_argument(
        "--api-key", default=None, help="bearer token (default: $OPENAI_API_KEY if set)"
    )
    parser.add_argument(
        "--date", type=_iso_date, default=None, help="query date YYYY-MM-DD (default: today)"
    )
    parser.add_argument(
        "--context", default=None, help="context given to every agent (default: none)"
    )
    parser.add_argument(
        "--synthesis",
        choices=("linear", "logical", "freeform"),
        default="linear",
        help="how parents are computed: constrained linear (the paper's), probabilistic logic, or a free-form LLM judgement",
    )
    parser.add_argument(
        "--grounder",
        choices=("llm", "notebook"),
        default="llm",
        help="notebook needs the [notebook] extra",
    )
    parser.add_argument(
        "--max-leaves",
        type=int_arg(1),
        default=10,
        help="stop decomposing at this many leaves (official default: 10)",
    )
    parser.add_argument(
        "--concurrency",
        type=int_arg(1),
        default=20,
        help="nodes proven at once (official default: 20)",
    )
    parser.add_argument(
        "--timeout",
        type=float_arg(0, low_open=True),
        default=120.0,
        help="seconds per HTTP request",
    )
    parser.add_argument(
        "--max-retries",
        type=int_arg(0),
        default=5,
        help="HTTP retries per request (backoff 0.5 s, doubling)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("analytica-run"),
        help="folder for tree.json, tree.png, ledger.jsonl and the checkpoint (a rerun resumes)",
    )

    def run(args: argparse.Namespace) -> int:
        import asyncio
        import datetime as dt

        from iclr26.analytica.clients import (
            CallLedger,
            ClientError,
            OpenAICompatibleClient,
            ParseFailure,
        )
        from iclr26.analytica.decompose import LLMDecomposer
        from iclr26.analytica.engine import Analytica, IncompleteAnalysis
        from iclr26.analytica.ground import LLMGrounder, NotebookGrounder
        from iclr26.analytica.plot import plot_tree
        from iclr26.analytica.synth import LinearSynthesizer, LLMSynthesizer, LogicalSynthesizer
        from iclr26.analytica.tree import Proposition

        out = prepare_output_dir(args.out)
        ledger = CallLedger(out / "ledger.jsonl")
        client = OpenAICompatibleClient(
            args.base_url,
            args.model,
            api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
            timeout=args.timeout,
            max_retries=args.max_retries,
            ledger=ledger,
        )
        grounder: Any = (
            LLMGrounder(client, ledger=ledger)
            if args.grounder == "llm"
            else NotebookGrounder(client, workdir=out / "notebooks")
        )
        synth: Any = {
            "linear": lambda: LinearSynthesizer(client, ledger=ledger),
            "logical": lambda: LogicalSynthesizer(client, ledger=ledger),
            "freeform": lambda: LLMSynthesizer(client, ledger=ledger),
        }[args.synthesis]()
        engine = Analytica(
            LLMDecomposer(client, ledger=ledger),
            grounder,
            synth,
            max_concurrency=args.concurrency,
            max_leaves=args.max_leaves,
            ledger=ledger,
            checkpoint_dir=out / "checkpoint",
        )
        root = Proposition(
            "P0", args.proposition, args.context or "", args.date or dt.date.today().isoformat()
        )

        async def go():
            try:
                return await engine.analyze(root)
            finally:
                await client.aclose()

        try:
            tree = asyncio.run(go())
        except IncompleteAnalysis as err:
            raise ValueError(
                f"{err}; rerun the same command to resume from {out / 'checkpoint'}"
            ) from None
        except (ClientError, ParseFailure) as err:
            raise ValueError(f"decomposition failed: {err}") from None
        (out / "tree.json").write_text(tree.to_json(indent=1))
        fig = plot_tree(tree, title=args.proposition)
        fig.savefig(out / "tree.png", dpi=120, bbox_inches="tight")
        print(tree.render())
        print(json.dumps({"p_true": tree.root.p_true, "calls": ledger.summary()}, indent=1))
        print(f"wrote {out / 'tree.json'}, {out / 'tree.png'} and {out / 'ledger.jsonl'}")
        return 0

    return run


def _load_tree(path: Path):
    from iclr26.analytica.tree import PropositionTree

    return PropositionTree.from_json(path.read_text(encoding="utf-8"))


def _render_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "tree",
        type=existing_file,
        help="tree.json written by `analyze` or PropositionTree.to_json()",
    )
    parser.add_argument("--png", type=Path, default=None, help="also draw it into this PNG file")

    def run(args: argparse.Namespace) -> int:
        tree = _load_tree(args.tree)
        print(tree.render())
        if args.png is not None:
            if args.png.is_dir():
                raise ValueError(f"--png {args.png} is a folder")
            from iclr26.analytica.plot import plot_tree

            plot_tree(tree).savefig(args.png, dpi=120, bbox_inches="tight")
            print(f"wrote {args.png}")
        return 0

    return run


def _whatif_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "tree", type=existing_file, help="a proven tree.json with stored linear/logical rules"
    )
    parser.add_argument(
        "--set",
        type=_assignment,
        action="append",
        required=True,
        metavar="PID=VALUE",
        help="override a node (repeatable)",
    )

    def run(args: argparse.Namespace) -> int:
        from iclr26.analytica.whatif import scenario, sensitivities

        tree = _load_tree(args.tree)
        try:
            sc = scenario(tree, dict(args.set))
        except KeyError as err:
            raise ValueError(str(err).strip("'\"")) from None
        sens = sensitivities(tree)
        for pid in [*sc.overrides, *sc.recomputed]:
            print(
                f"{pid}: {tree.get(pid).p_true:.4f} -> {sc.value(pid):.4f}  (∂root/∂{pid} = {sens[pid]:+.4f})"
            )
        return 0

    return run


main = make_cli(
    "analytica",
    reproduce="iclr26.analytica.experiments:reproduce",
    bench="iclr26.analytica.experiments:bench",
    description="Analytica (ICLR 2026): soft propositional reasoning — decompose, ground, synthesise, what-if.",
    commands={
        "analyze": ("analyse a proposition with an OpenAI-compatible LLM server", _analyze_setup),
        "render": ("print (and draw) a proposition tree from JSON", _render_setup),
        "whatif": ("edit nodes of a proven tree and show the new root", _whatif_setup),
    },
)
