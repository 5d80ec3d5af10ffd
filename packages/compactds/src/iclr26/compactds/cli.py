"""``iclr26-compactds``: build, search, serve and evaluate datastores; reproduce; bench."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from iclr26.compactds.builder import DatastoreBuilder, read_jsonl
from iclr26.compactds.chunking import Chunker
from iclr26.compactds.datastore import RERANK_MODES, Datastore
from iclr26.compactds.decontamination import Decontaminator
from iclr26.compactds.encoders import (
    HashingEncoder,
    LSAEncoder,
    MiniLMEncoder,
    SentenceTransformerEncoder,
)
from iclr26.compactds.experiments import bench, reproduce
from iclr26.shared import make_cli

__all__ = ["main"]


def _read_queries(path: Path) -> list[dict]:
    rows = read_jsonl(path, "query")
    if not rows:
        raise ValueError(f"{path} holds no queries")
    return rows


def _source_docs(src: Path):
    """(name, kind) of a source argument: a .jsonl file or a folder of .txt files."""
    if src.is_file() and src.suffix == ".jsonl":
        return src.stem, "jsonl"
    if src.is_dir():
        return src.name, "folder"
    raise ValueError(f"{src}: a source must be a .jsonl file or a folder of .txt files")


def _build_setup(parser: argparse.ArgumentParser):
    parser.add_argument(
        "sources", nargs="+", type=Path, help="JSONL files ('text' per line) or folders of .txt"
    )
    parser.add_argument("--out", type=Path, required=True, help="store directory")
    parser.add_argument("--encoder", default="hashing",
                        help="hashing | lsa | minilm | st:/path/to/local/model (default: hashing)")  # fmt: skip
    parser.add_argument(
        "--dim", type=int, default=384, help="dimension of hashing/LSA (default 384)"
    )
    parser.add_argument("--chunk-words", type=int, default=256)
    parser.add_argument(
        "--decontaminate", type=Path, help="JSONL of eval queries ('query') to remove"
    )
    parser.add_argument("--nlist", default="auto")
    parser.add_argument("--m", default="auto")
    parser.add_argument("--nbits", default="auto")
    parser.add_argument("--vector-dtype", default="float16", choices=("float16", "float32"))
    parser.add_argument("--shard-size", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="faiss threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")

    def run(args: argparse.Namespace) -> int:
        named = [_source_docs(s) for s in args.sources]
        kind = args.encoder
        if kind == "hashing":
            enc = HashingEncoder(args.dim, seed=args.seed)
        elif kind == "lsa":
            texts = []
            for src, (_, how) in zip(args.sources, named, strict=True):
                if how == "jsonl":
                    texts += [
                        json.loads(x)["text"]
                        for x in src.read_text(encoding="utf-8").splitlines()
                        if x.strip()
                    ]
                else:
                    texts += [p.read_text(encoding="utf-8") for p in sorted(src.rglob("*.txt"))]
            enc = LSAEncoder(args.dim, seed=args.seed).fit(
                [c for t in texts for c in Chunker(args.chunk_words).chunk(t)]
            )
        elif kind == "minilm":
            enc = MiniLMEncoder()
        elif kind.startswith("st:"):
            enc = SentenceTransformerEncoder(kind[3:])
        else:
            raise ValueError(f"--encoder must be hashing, lsa, minilm or st:PATH, got {kind!r}")
        deco = None
        if args.decontaminate:
            deco = Decontaminator([r["query"] for r in _read_queries(args.decontaminate)])
        conv = lambda v: v if v == "auto" else int(v)  # noqa: E731
        b = DatastoreBuilder(args.out, enc, chunker=Chunker(args.chunk_words), decontaminator=deco,
                             shard_size=args.shard_size, vector_dtype=args.vector_dtype, nlist=conv(args.nlist),
                             m=conv(args.m), nbits=conv(args.nbits), seed=args.seed, threads=args.threads,
                             overwrite=args.overwrite, progress=True)  # fmt: skip
        for src, (name, how) in zip(args.sources, named, strict=True):
            if how == "jsonl":
                b.add_jsonl(name, src)
            else:
                b.add_text_folder(name, src)
        store = b.build(workers=args.workers)
        print(json.dumps(store.stats(), indent=2))
        return 0

    return run


def _search_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", type=Path)
    parser.add_argument("-k", type=int, default=3, help="passages per query (default 3)")
    parser.add_argument(
        "-K", type=int, default=100, help="ANN candidates for the exact stage (default 100)"
    )
    parser.add_argument("--nprobe", type=int, default=None)
    parser.add_argument("--rerank", default="exact", choices=RERANK_MODES)
    parser.add_argument("--sources", nargs="*", default=None)


def _search_setup(parser: argparse.ArgumentParser):
    _search_args(parser)
    parser.add_argument("query", nargs="*", help="query text(s)")
    parser.add_argument("--queries", type=Path, help="JSONL of {'id', 'query'}")
    parser.add_argument("--out", type=Path, help="write compactds-eval ctxs JSONL here")
    parser.add_argument(
        "--prompt", action="store_true", help="print the RAG prompt instead of JSON"
    )

    def run(args: argparse.Namespace) -> int:
        from iclr26.compactds.prompt import format_prompt, to_compactds_jsonl

        store = Datastore.open(args.store)
        rows = (
            _read_queries(args.queries)
            if args.queries
            else [{"id": str(i), "query": q} for i, q in enumerate(args.query)]
        )
        if not rows:
            raise ValueError("give query text or --queries FILE")
        results = store.search([r["query"] for r in rows], k=args.k, K=args.K, nprobe=args.nprobe,
                               rerank=args.rerank, sources=args.sources)  # fmt: skip
        if args.out:
            to_compactds_jsonl(args.out, rows, results)
        for row, hits in zip(rows, results, strict=True):
            if args.prompt:
                print(format_prompt(row["query"], hits, k=args.k))
            else:
                print(json.dumps({**row, "hits": [asdict(h) for h in hits]}, ensure_ascii=False))
        return 0

    return run


def _eval_setup(parser: argparse.ArgumentParser):
    _search_args(parser)
    parser.add_argument("--queries", type=Path, required=True,
                        help="JSONL {'query', optional 'doc_ids': [...] relevant document ids}")  # fmt: skip
    parser.add_argument("--ks", default="1,10")

    def run(args: argparse.Namespace) -> int:
        from iclr26.compactds.evaluation import evaluate

        store = Datastore.open(args.store)
        rows = _read_queries(args.queries)
        rel = (
            [set(map(str, r["doc_ids"])) for r in rows]
            if all("doc_ids" in r for r in rows)
            else None
        )
        out = evaluate(store, [r["query"] for r in rows], relevant_docs=rel,
                       ks=[int(x) for x in args.ks.split(",")], K=args.K, nprobe=args.nprobe,
                       rerank=args.rerank, sources=args.sources)  # fmt: skip
        print(json.dumps(out, indent=2))
        return 0

    return run


def _serve_setup(parser: argparse.ArgumentParser):
    parser.add_argument("store", type=Path, nargs="+",
                        help="a store directory; several: shards served by one router")  # fmt: skip
    parser.add_argument("--host", default="127.0.0.1", help="default: loopback only")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-batch", type=int, default=64)

    def run(args: argparse.Namespace) -> int:
        from iclr26.compactds.server import serve

        if len(args.store) == 1:
            store = Datastore.open(args.store[0])
        else:
            from iclr26.compactds.sharding import ShardedDatastore

            store = ShardedDatastore.open(args.store)
        serve(store, host=args.host, port=args.port, max_batch=args.max_batch)
        return 0

    return run


main = make_cli(
    "compactds",
    reproduce=reproduce,
    bench=bench,
    description="CompactDS (ICLR 2026): multi-source RAG datastore, IVFPQ in RAM + exact search from disk.",
    commands={
        "build": (
            "build (or resume building) a datastore from JSONL files / text folders",
            _build_setup,
        ),
        "search": (
            "search a datastore (JSON lines, compactds-eval ctxs, or a RAG prompt)",
            _search_setup,
        ),
        "serve": ("HTTP search service (FastAPI; needs the [serve] extra)", _serve_setup),
        "eval": ("recall vs flat search, hit@k / nDCG@k, latency percentiles", _eval_setup),
    },
)
