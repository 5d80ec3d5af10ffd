"""Building a datastore: ingest → chunk → decontaminate → embed (sharded, resumable) → train
IVFPQ on a sample → add → write the store atomically.

An interrupted build leaves ``<store>/build/`` with every shard finished so far (each shard's
passages and vectors are renamed into place before its ``.done.json`` marker). Running the same
build again skips finished shards, so no passage is embedded twice or lost, and the resulting
store is byte-identical to an uninterrupted build.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from iclr26.compactds.chunking import Chunker
from iclr26.compactds.decontamination import Decontaminator
from iclr26.compactds.encoders import Encoder, save_encoder
from iclr26.compactds.index import auto_params, set_threads, train_ivfpq
from iclr26.compactds.store import (
    META,
    SCHEMA_VERSION,
    VECTOR_DTYPES,
    StoreError,
    atomic_replace,
    atomic_write_bytes,
    atomic_write_text,
    file_record,
)
from iclr26.shared import check_choice, check_int, check_range, read_jsonl
from iclr26.shared import progress as progress_bar

__all__ = ["DatastoreBuilder"]

log = logging.getLogger(__name__)
_SOURCE_NAME = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
#: What a store directory (complete, or an interrupted build) may hold; see ``store.py``.
_STORE_ENTRIES = frozenset(
    {META, "build", "ann", "passages", "encoder.json", "encoder.npz", "sources.json",
     "offsets.npy", "file_ids.npy", *VECTOR_DTYPES.values()}
)  # fmt: skip
#: How to discard what is at the store path, for the library and the command line.
OVERWRITE_HINT = "pass overwrite=True (command line: --overwrite)"


@dataclass(frozen=True)
class Shard:
    """One unit of build work: consecutive passages of one source, ids from ``first_id``."""

    key: str
    source: str
    first_id: int
    items: list[tuple[str, str]]  # (doc_id, text)

    def digest(self) -> str:
        h = hashlib.sha256()
        for doc_id, text in self.items:
            h.update(doc_id.encode() + b"\0" + text.encode() + b"\0")
        return h.hexdigest()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"faiss": faiss.__version__, "numpy": np.__version__}
    try:
        out["iclr26-compactds"] = version("iclr26-compactds")
    except PackageNotFoundError:
        out["iclr26-compactds"] = "unknown"
    return out


def write_shard(encoder: Encoder, batch_size: int, shard: Shard, work: Path) -> None:
    """Embed one shard and write its passages, vectors and done-marker (in that order) into
    ``work``; the unit of work of every build path (threads, Ray actors)."""
    texts = [t for _, t in shard.items]
    parts = [
        encoder.encode_passages(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)
    ]
    vecs = np.concatenate(parts).astype(np.float32)
    if vecs.shape != (len(texts), encoder.dim):
        raise ValueError(
            f"encoder returned shape {vecs.shape}, expected ({len(texts)}, {encoder.dim})"
        )
    lines, offsets, pos = [], [], 0
    for j, (doc_id, text) in enumerate(shard.items):
        rec = {"id": shard.first_id + j, "source": shard.source, "doc_id": doc_id, "text": text}
        line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
        offsets.append(pos)
        pos += len(line)
        lines.append(line)
    buf = io.BytesIO()
    np.savez(buf, vectors=vecs, offsets=np.asarray(offsets, np.uint64))
    atomic_write_bytes(work / f"{shard.key}.jsonl", b"".join(lines))
    atomic_write_bytes(work / f"{shard.key}.npz", buf.getvalue())
    done = {"n": len(texts), "first_id": shard.first_id, "digest": shard.digest()}
    atomic_write_text(work / f"{shard.key}.done.json", json.dumps(done))


def read_records(path: str | os.PathLike[str], field: str) -> list[dict]:
    """The JSON objects of a JSONL file (``iclr26.shared.read_jsonl``), each required to carry a
    string ``field``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a line is not a JSON object, lacks ``field`` or it is not a string (the file
            and line are named), or the file holds no records.
    """
    rows = read_jsonl(path, required=(field,))
    for n, row in enumerate(rows, 1):
        if not isinstance(row[field], str):
            raise ValueError(
                f"{path}: record {n}: {field!r} must be a string, got {type(row[field]).__name__}"
            )
    return rows


class DatastoreBuilder:
    """Build a CompactDS-style datastore directory.

    Args:
        path: the store directory (created).
        encoder: an :class:`~iclr26.compactds.encoders.Encoder` (fitted, for LSA).
        chunker: word chunker (default ``Chunker(256)``, the paper's 256-word passages).
        decontaminator: drops passages leaking eval queries (default: none).
        shard_size: passages per resumable shard (default 4096).
        vector_dtype: ``"float16"`` (default, half the disk) or ``"float32"`` for the full
            vectors read by the exact stage.
        nlist, m, nbits: IVFPQ shape, ``"auto"`` by default (see
            :func:`~iclr26.compactds.index.auto_params`).
        train_frac: fraction of vectors used to train the index (default 0.05, CompactDS's
            ~5 %), but at least ``train_min`` (default 20,000) or all of them.
        batch_size: passages per encoder call (default 256).
        seed: seed of the training sample and k-means.
        threads: faiss OpenMP threads (``None``: faiss's default).
        overwrite: remove what is at ``path`` first: a complete store, or an interrupted or
            failed build (a folder holding other files is never removed).
        progress: show progress bars (embedding, then writing the vectors and adding them to
            the index).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        encoder: Encoder,
        *,
        chunker: Chunker | None = None,
        decontaminator: Decontaminator | None = None,
        shard_size: int = 4096,
        vector_dtype: str = "float16",
        nlist: int | str = "auto",
        m: int | str = "auto",
        nbits: int | str = "auto",
        train_frac: float = 0.05,
        train_min: int = 20_000,
        batch_size: int = 256,
        seed: int = 0,
        threads: int | None = None,
        overwrite: bool = False,
        progress: bool = False,
    ) -> None:
        for attr in ("encode_passages", "encode_queries", "fingerprint", "dim"):
            if not hasattr(encoder, attr):
                raise TypeError(f"encoder must implement the Encoder protocol (missing {attr!r})")
        self.path = Path(path)
        self.encoder = encoder
        self.chunker = chunker or Chunker()
        self.decontaminator = decontaminator
        self.shard_size = check_int(shard_size, "shard_size", low=1)
        self.vector_dtype = check_choice(vector_dtype, "vector_dtype", tuple(VECTOR_DTYPES))
        for name, value in (("nlist", nlist), ("m", m), ("nbits", nbits)):
            if value != "auto":
                check_int(value, name, low=1)
        self.nlist, self.m, self.nbits = nlist, m, nbits
        self.train_frac = check_range(
            train_frac, "train_frac", low=0.0, high=1.0, low_inclusive=False
        )
        self.train_min = check_int(train_min, "train_min", low=1)
        self.batch_size = check_int(batch_size, "batch_size", low=1)
        self.seed = check_int(seed, "seed", low=0)
        self.threads = threads
        self.overwrite = bool(overwrite)
        self.progress = bool(progress)
        self._sources: dict[str, list[tuple[str, str]]] = {}

    # ----------------------------------------------------------------- ingestion
    def add_source(self, name: str, docs: Iterable[Any]) -> DatastoreBuilder:
        """Add a source: an iterable of texts, ``(doc_id, text)`` pairs or dicts with ``"text"``
        (and optional ``"id"``). Sources get contiguous id ranges in the order they are added."""
        if not isinstance(name, str) or not name or set(name) - _SOURCE_NAME:
            raise ValueError(f"source name must be a non-empty [A-Za-z0-9_.] string, got {name!r}")
        if name in self._sources:
            raise ValueError(f"source {name!r} was already added")
        items: list[tuple[str, str]] = []
        for i, doc in enumerate(docs):
            if isinstance(doc, str):
                items.append((f"{name}:{i}", doc))
            elif isinstance(doc, tuple) and len(doc) == 2:
                items.append((str(doc[0]), str(doc[1])))
            elif isinstance(doc, dict) and isinstance(doc.get("text"), str):
                items.append((str(doc.get("id", f"{name}:{i}")), doc["text"]))
            else:
                raise TypeError(
                    f"source {name!r} item {i}: expected a str, (doc_id, text) or a dict with a "
                    f"'text' string, got {type(doc).__name__}"
                )
        self._sources[name] = items
        return self

    def add_jsonl(self, name: str, path: str | os.PathLike[str]) -> DatastoreBuilder:
        """Add a JSONL file whose lines carry ``"text"`` (and optionally ``"id"``)."""
        return self.add_source(name, read_records(path, "text"))

    def add_text_folder(
        self, name: str, folder: str | os.PathLike[str], pattern: str = "*.txt"
    ) -> DatastoreBuilder:
        """Add every file matching ``pattern`` under ``folder`` (recursive) as one document."""
        if not Path(folder).is_dir():
            raise FileNotFoundError(f"{folder} does not exist or is not a folder")
        files = sorted(Path(folder).rglob(pattern))
        if not files:
            raise ValueError(f"no files matching {pattern!r} under {folder}")
        return self.add_source(
            name, [(str(p.relative_to(folder)), p.read_text(encoding="utf-8")) for p in files]
        )

    # --------------------------------------------------------------------- build
    def _plan(self) -> list[Shard]:
        shards: list[Shard] = []
        next_id = 0
        for source, docs in self._sources.items():
            kept = [
                (doc_id, text)
                for doc_id, text in self.chunker.chunk_documents(docs)
                if self.decontaminator is None or self.decontaminator.keep(text)
            ]
            for k in range(math.ceil(len(kept) / self.shard_size)):
                items = kept[k * self.shard_size : (k + 1) * self.shard_size]
                shards.append(Shard(f"{source}-{k:05d}", source, next_id, items))
                next_id += len(items)
        return shards

    def _config(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "encoder": {
                "name": self.encoder.name,
                "fingerprint": self.encoder.fingerprint,
                "dim": int(self.encoder.dim),
            },
            "chunking": self.chunker.config(),
            "decontamination": None
            if self.decontaminator is None
            else self.decontaminator.config(),
            "shard_size": self.shard_size,
            "sources": {name: len(docs) for name, docs in self._sources.items()},
        }

    def _encode_shard(self, shard: Shard, work: Path) -> None:
        write_shard(self.encoder, self.batch_size, shard, work)

    def _is_done(self, shard: Shard, work: Path) -> bool:
        marker = work / f"{shard.key}.done.json"
        if not marker.is_file():
            return False
        try:
            done = json.loads(marker.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return False  # a torn marker: embed the shard again
        if done != {"n": len(shard.items), "first_id": shard.first_id, "digest": shard.digest()}:
            raise StoreError(
                f"shard {shard.key} of the interrupted build at {self.path} holds other passages "
                f"than the sources given now; {OVERWRITE_HINT} to discard the interrupted build"
            )
        return True

    def _n_train(self, n: int) -> int:
        return min(n, max(self.train_min, math.ceil(self.train_frac * n)))

    def _clear_target(self) -> None:
        """Refuse or clear what is already at ``path``, before anything is written.

        ``overwrite`` removes a complete store, an interrupted or failed build, or their
        leftovers; it never removes a folder that holds anything else.
        """
        path = self.path
        if path.exists() and not path.is_dir():
            raise StoreError(f"{path} is an existing file, expected a store directory")
        if not path.is_dir():
            return
        entries = [e.name for e in path.iterdir()]
        foreign = sorted(e for e in entries if e not in _STORE_ENTRIES and not e.startswith("."))
        if foreign:
            raise StoreError(
                f"{path} holds files that are not part of a datastore ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}); build into a new or empty folder"
            )
        if self.overwrite and entries:
            log.info("removing the store or build at %s (overwrite)", path)
            shutil.rmtree(path)
        elif (path / META).exists():
            raise StoreError(f"{path} already holds a datastore; {OVERWRITE_HINT} to replace it")

    def prepare_build(self) -> tuple[Path, list[Shard], list[Shard]]:
        """Checks, the build folder and its config, the shard plan, and the shards still to do.

        The first half of :meth:`build`, public for distributed builders.

        Nothing is written before the sources are known to produce passages, so a failed or
        empty build leaves no folder behind that would block the next try.
        """
        if not self._sources:
            raise ValueError("no sources: call add_source() before build()")
        set_threads(self.threads)
        shards = self._plan()
        if not shards:
            raise ValueError("the sources produced no passages (empty texts or all decontaminated)")
        n = sum(len(s.items) for s in shards)
        # IVFPQ parameters that cannot work fail now, not after the embedding
        auto_params(n, int(self.encoder.dim), n_train=self._n_train(n), nlist=self.nlist,
                    m=self.m, nbits=self.nbits)  # fmt: skip
        self._clear_target()
        work = self.path / "build"
        config = json.loads(json.dumps(self._config()))
        cfg_path = work / "config.json"
        if cfg_path.is_file():
            try:
                old = json.loads(cfg_path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                old = None
            if old != config:
                finished = len(list(work.glob("*.done.json")))
                if finished:
                    raise StoreError(
                        f"{self.path} holds an interrupted build with other settings (encoder, "
                        f"chunking or sources) and {finished} finished shard(s); "
                        f"{OVERWRITE_HINT} to discard it, or build into another folder"
                    )
                log.info("%s: replacing a failed build that finished no shard", self.path)
                shutil.rmtree(work)
        work.mkdir(parents=True, exist_ok=True)
        if not cfg_path.is_file():
            atomic_write_text(cfg_path, json.dumps(config, indent=2))
        todo = [s for s in shards if not self._is_done(s, work)]
        if len(todo) < len(shards):
            log.info(
                "resuming the build in %s: %d of %d shards (%d of %d passages) already embedded",
                self.path, len(shards) - len(todo), len(shards),
                sum(len(s.items) for s in shards) - sum(len(s.items) for s in todo),
                sum(len(s.items) for s in shards),
            )  # fmt: skip
        return work, shards, todo

    def build(
        self,
        *,
        workers: int = 1,
        on_shard: Callable[[str], None] | None = None,
        trained_index: Any | None = None,
    ):
        """Run (or resume) the build and return the opened :class:`~iclr26.compactds.Datastore`.

        Args:
            workers: threads that embed shards and add them to copies of the trained index,
                merged in shard order (results identical to ``workers=1``).
            on_shard: called with each finished shard's key (progress hooks, tests that
                interrupt a build).
            trained_index: a trained, empty faiss IVF index to reuse (the shared-trained-index
                pattern of a distributed build); default: train one on a sample.
        """
        from iclr26.compactds.datastore import Datastore

        workers = check_int(workers, "workers", low=1)
        work, shards, todo = self.prepare_build()
        bar = progress_bar(enabled=self.progress, total=sum(len(s.items) for s in todo),
                           desc="embed", unit="passage")  # fmt: skip
        with bar:
            if workers == 1:
                for shard in todo:
                    self._encode_shard(shard, work)
                    bar.update(len(shard.items))
                    if on_shard is not None:
                        on_shard(shard.key)
            else:
                pool = ThreadPoolExecutor(max_workers=workers)
                try:
                    futures = [pool.submit(self._encode_shard, s, work) for s in todo]
                    for shard, fut in zip(todo, futures, strict=True):
                        fut.result()
                        bar.update(len(shard.items))
                        if on_shard is not None:
                            on_shard(shard.key)
                finally:
                    # on an error, do not start shards that were not running yet
                    pool.shutdown(wait=True, cancel_futures=True)
        self.finalize_build(shards, work, workers, trained_index)
        return Datastore.open(self.path, encoder=self.encoder)

    def finalize_build(self, shards: list[Shard], work: Path, workers: int, trained: Any) -> None:
        """Assemble encoded shards into the store (vectors, passages, index, meta.json last).

        The second half of :meth:`build`, public for distributed builders
        (:func:`~iclr26.compactds.ray_build.build_with_ray`) that encode the shards elsewhere.
        """
        root = self.path
        dim = int(self.encoder.dim)
        n = sum(len(s.items) for s in shards)
        dtype = np.dtype(self.vector_dtype)
        vec_name = VECTOR_DTYPES[self.vector_dtype]
        # 1. vectors + passages + offsets, shard by shard
        (root / "passages").mkdir(exist_ok=True)
        tmp_vec = root / f".{vec_name}.tmp-{os.getpid()}"
        offsets = np.empty(n, np.uint64)
        file_ids = np.empty(n, np.uint32)
        files: list[str] = []
        start = time.perf_counter()
        with (
            tmp_vec.open("wb") as fv,
            progress_bar(
                enabled=self.progress, total=n, desc="write vectors", unit="passage"
            ) as bar,
        ):
            for fid, s in enumerate(shards):
                with np.load(work / f"{s.key}.npz") as z:
                    fv.write(np.ascontiguousarray(z["vectors"].astype(dtype)).tobytes())
                    offsets[s.first_id : s.first_id + len(s.items)] = z["offsets"]
                file_ids[s.first_id : s.first_id + len(s.items)] = fid
                rel = f"passages/{s.key}.jsonl"
                shutil.copyfile(work / f"{s.key}.jsonl", root / f".{s.key}.tmp")
                atomic_replace(root / f".{s.key}.tmp", root / rel)
                files.append(rel)
                bar.update(len(s.items))
        atomic_replace(tmp_vec, root / vec_name)
        vectors = np.memmap(root / vec_name, dtype=dtype, mode="r", shape=(n, dim))
        # 2. train on a seeded sample, add shard by shard (copies of the trained index per worker)
        n_train = self._n_train(n)
        rng = np.random.default_rng(self.seed)
        sample = np.sort(rng.choice(n, size=n_train, replace=False))
        if trained is None:
            params = auto_params(
                n, dim, n_train=n_train, nlist=self.nlist, m=self.m, nbits=self.nbits
            )
            log.info(
                "training the IVFPQ (nlist %d, m %d, %d bits) on %d of %d vectors",
                params.nlist, params.m, params.nbits, n_train, n,
            )  # fmt: skip
            t0 = time.perf_counter()
            index = train_ivfpq(np.asarray(vectors[sample], np.float32), params, seed=self.seed)
            log.info("trained in %.1f s", time.perf_counter() - t0)
        else:
            if not trained.is_trained or trained.ntotal != 0 or trained.d != dim:
                raise ValueError(
                    "trained_index must be a trained, empty faiss index of the encoder's dim"
                )
            index = faiss.clone_index(trained)
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        params_d = {"nlist": int(ivf.nlist), "m": int(ivf.pq.M), "nbits": int(ivf.pq.nbits)}

        add_bar = progress_bar(enabled=self.progress, total=n, desc="add to index", unit="vector")
        lock = threading.Lock()

        def add(group: list[Shard]) -> Any:
            part = faiss.clone_index(index)
            for s in group:
                rows = np.asarray(vectors[s.first_id : s.first_id + len(s.items)], np.float32)
                part.add_with_ids(
                    rows, np.arange(s.first_id, s.first_id + len(s.items), dtype=np.int64)
                )
                with lock:
                    add_bar.update(len(s.items))
            return part

        with add_bar:
            if workers == 1:
                index = add(shards)
            else:
                # contiguous groups so merging in group order keeps every list in id order
                size = math.ceil(len(shards) / workers)
                groups = [shards[i : i + size] for i in range(0, len(shards), size)]
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    parts = list(pool.map(add, groups))
                index = parts[0]
                for part in parts[1:]:
                    index.merge_from(part, 0)
        tmp_index = root / "ann" / f".index.faiss.tmp-{os.getpid()}"
        tmp_index.parent.mkdir(exist_ok=True)
        faiss.write_index(index, str(tmp_index))
        atomic_replace(tmp_index, root / "ann" / "index.faiss")
        # 3. small files, then meta.json last
        buf = io.BytesIO()
        np.save(buf, offsets)
        atomic_write_bytes(root / "offsets.npy", buf.getvalue())
        buf = io.BytesIO()
        np.save(buf, file_ids)
        atomic_write_bytes(root / "file_ids.npy", buf.getvalue())
        ranges: dict[str, list[int]] = {}
        for s in shards:
            lo, _hi = ranges.get(s.source, [s.first_id, s.first_id])
            ranges[s.source] = [lo, s.first_id + len(s.items)]
        atomic_write_text(root / "sources.json", json.dumps(ranges, indent=2))
        save_encoder(self.encoder, root)
        rels = [vec_name, "ann/index.faiss", "offsets.npy", "file_ids.npy", "sources.json",
                "encoder.json", *files]  # fmt: skip
        if (root / "encoder.npz").is_file():
            rels.append("encoder.npz")
        meta = {
            "schema_version": SCHEMA_VERSION,
            "encoder": {
                "name": self.encoder.name,
                "fingerprint": self.encoder.fingerprint,
                "dim": dim,
            },
            "metric": "inner_product",
            "normalized": True,
            "vector_dtype": self.vector_dtype,
            "vector_file": vec_name,
            "n": n,
            "index": {"type": "IVFPQ", **params_d, "n_train": n_train, "seed": self.seed},
            "chunking": self.chunker.config(),
            "decontamination": None
            if self.decontaminator is None
            else self.decontaminator.config(),
            "counts": {src: hi - lo for src, (lo, hi) in ranges.items()},
            "passage_files": files,
            "versions": _versions(),
            "files": {rel: file_record(root, rel) for rel in rels},
        }
        atomic_write_text(root / META, json.dumps(meta, indent=2))
        shutil.rmtree(work)
        log.info(
            "wrote the index and files of %d passages in %.1f s", n, time.perf_counter() - start
        )
