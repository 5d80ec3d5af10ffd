"""Sharded serving: one router over several stores, each reranking its own candidates exactly
before a merge by exact score.

CompactDS serves its 1.9B-passage store from several nodes. Each node holds one shard's IVFPQ
codes in RAM and its full-precision vectors on local disk. PQ scores of different shards come
from different codebooks and are only roughly comparable, exact inner products are comparable.
So every shard runs its own ANN top-``K`` and exact rerank, and the router merges the per-shard
top-``k`` lists by exact score. With full-depth search on every shard the result equals that of
one store holding all the passages (a test checks it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import psutil

from iclr26.compactds.chunking import Passage
from iclr26.compactds.datastore import (
    Datastore,
    Searchable,
    check_depths,
    check_query_vectors,
    check_reencode,
    check_sources,
    resolve_nprobe,
)
from iclr26.compactds.encoders import Encoder
from iclr26.compactds.store import StoreError
from iclr26.shared import check_int

__all__ = ["ShardedDatastore"]

log = logging.getLogger(__name__)

#: meta.json entries every shard must share: they decide whether exact scores are comparable.
_MUST_MATCH = (
    ("encoder", "name"),
    ("encoder", "fingerprint"),
    ("encoder", "dim"),
    ("metric",),
    ("normalized",),
)


def _get(meta: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        meta = meta.get(key) if isinstance(meta, dict) else None
    return meta


class ShardedDatastore(Searchable):
    """Several stores searched as one: per-shard ANN + exact rerank, merged by exact score.

    Global ids are the shards' ids offset by the sizes of the shards before them (shard 0 keeps
    its ids). :meth:`search` has the signature and result type of :meth:`Datastore.search`, so
    :func:`~iclr26.compactds.format_prompt`, :func:`~iclr26.compactds.evaluate` (with
    ``ann_recall=False``) and the HTTP server take a sharded store as they take one store.

    Attributes:
        shards: the opened :class:`Datastore` of each shard.
        offsets: int64 ``(n_shards + 1,)``; shard ``s`` holds global ids
            ``offsets[s] .. offsets[s + 1] - 1``.
        sources: ``{name: [(first_id, end_id), ...]}`` global id ranges (a source may span
            several shards).
        n, dim: total passages and vector dimension.
    """

    def __init__(self, shards: Sequence[Datastore], *, max_workers: int | None = None) -> None:
        shards = list(shards)
        if not shards:
            raise ValueError("shards must hold at least one Datastore, got none")
        for i, shard in enumerate(shards):
            if not isinstance(shard, Datastore):
                raise TypeError(f"shards[{i}] must be a Datastore, got {type(shard).__name__}")
        first = shards[0].meta
        for i, shard in enumerate(shards[1:], start=1):
            for keys in _MUST_MATCH:
                a, b = _get(first, keys), _get(shard.meta, keys)
                if a != b:
                    raise StoreError(
                        f"shard {i} ({shard.root}) has {'.'.join(keys)} = {b!r}, shard 0 "
                        f"({shards[0].root}) has {a!r}: exact scores of the shards would not be "
                        "comparable. Build every shard with the same encoder."
                    )
            if shard.meta.get("chunking") != first.get("chunking"):
                log.warning("shard %d (%s) was chunked differently from shard 0", i, shard.root)
        self.shards = shards
        self.offsets = np.cumsum([0] + [s.n for s in shards]).astype(np.int64)
        self.n = int(self.offsets[-1])
        self.dim = shards[0].dim
        self.sources: dict[str, list[tuple[int, int]]] = {}
        for off, shard in zip(self.offsets[:-1], shards, strict=True):
            for name, (lo, hi) in shard.sources.items():
                self.sources.setdefault(name, []).append((int(off) + lo, int(off) + hi))
        workers = (
            len(shards) if max_workers is None else check_int(max_workers, "max_workers", low=1)
        )
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="shard")

    @classmethod
    def open(
        cls,
        paths: Sequence[str | os.PathLike[str]],
        *,
        encoder: Encoder | None = None,
        verify: str = "fast",
        max_workers: int | None = None,
    ) -> ShardedDatastore:
        """Open every shard with :meth:`Datastore.open` (same checks), then check that they
        share encoder name, fingerprint and dimension, metric and normalisation.

        Raises:
            StoreError: a shard fails its own checks, or the shards do not match.
        """
        if isinstance(paths, (str, os.PathLike)) or not len(paths):
            raise ValueError(f"paths must be a non-empty list of store directories, got {paths!r}")
        # Text queries are embedded once, by shard 0's encoder; the shards get vectors.
        shards = [Datastore.open(p, encoder=encoder, verify=verify) for p in paths]
        return cls(shards, max_workers=max_workers)

    def close(self) -> None:
        """Stop the router's thread pool."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> ShardedDatastore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def nlist(self) -> int:
        """The largest shard's inverted lists: the largest useful ``nprobe`` (each shard caps
        ``nprobe`` at its own ``nlist``)."""
        return max(s.nlist for s in self.shards)

    @property
    def encoder(self) -> Encoder:
        """The query encoder (shard 0's; every shard has the same fingerprint)."""
        return self.shards[0].encoder

    # ----------------------------------------------------------------- passages
    def _locate(self, pid: int) -> tuple[int, int]:
        pid = check_int(pid, "id", low=0, high=self.n - 1)
        s = int(np.searchsorted(self.offsets, pid, side="right")) - 1
        return s, pid - int(self.offsets[s])

    def passage(self, pid: int) -> Passage:
        """The passage with global id ``pid`` (its ``id`` is the global id)."""
        s, local = self._locate(pid)
        return replace(self.shards[s].passage(local), id=int(pid))

    def source_of(self, pid: int) -> str:
        s, local = self._locate(pid)
        return self.shards[s].source_of(local)

    # ------------------------------------------------------------------- search
    def embed_queries(
        self, queries: str | Sequence[str] | np.ndarray
    ) -> tuple[np.ndarray, list[str] | None]:
        """As :meth:`Datastore.embed_queries` (every shard shares one encoder)."""
        return self.shards[0].embed_queries(queries)

    def search_arrays(
        self,
        qvecs: np.ndarray,
        *,
        k: int = 3,
        K: int = 100,
        nprobe: int | None = None,
        rerank: str = "exact",
        sources: Sequence[str] | None = None,
        query_texts: Sequence[str] | None = None,
        reencoder: Encoder | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every shard's :meth:`Datastore.search_arrays` in the thread pool, then the top ``k``
        of the ``n_shards * k`` results by final score (exact, or the re-encoder's), ties broken
        by global id. ``K`` and ``nprobe`` apply per shard. ``rerank="none"`` merges PQ scores,
        which are only roughly comparable across shards.

        Returns:
            ``(ids, score_final, score_ann)``, each ``(nq, k)``; global ids, -1 / -inf where
            fewer than ``k`` results exist.
        """
        k, K = check_depths(k, K, rerank)
        if nprobe is not None:  # validated here; each shard caps it at its own nlist
            resolve_nprobe(nprobe, self.nlist)
        q = check_query_vectors(qvecs, self.dim)
        check_reencode(rerank, reencoder, query_texts, len(q))
        wanted = check_sources(sources, self.sources)
        jobs = []
        for s, shard in enumerate(self.shards):
            mine = None if wanted is None else [x for x in wanted if x in shard.sources]
            if mine == []:
                continue  # none of the requested sources lives on this shard
            jobs.append((s, self._pool.submit(
                shard.search_arrays, q, k=k, K=K, nprobe=nprobe, rerank=rerank, sources=mine,
                query_texts=query_texts, reencoder=reencoder)))  # fmt: skip
        parts = [(s, fut.result()) for s, fut in jobs]
        ids = np.concatenate(
            [np.where(i >= 0, i + self.offsets[s], -1) for s, (i, _, _) in parts], axis=1
        )
        final = np.concatenate([f for _, (_, f, _) in parts], axis=1)
        ann = np.concatenate([a for _, (_, _, a) in parts], axis=1)
        # missing results (-1, -inf) sort last: -final is +inf there
        order = np.lexsort((np.where(ids < 0, self.n, ids), -final), axis=1)[:, :k]
        return (np.take_along_axis(ids, order, 1), np.take_along_axis(final, order, 1),
                np.take_along_axis(ann, order, 1))  # fmt: skip

    # -------------------------------------------------------------------- stats
    def stats(self) -> dict[str, Any]:
        """Totals over the shards (passages, index bytes in RAM, bytes on disk) and each shard's
        :meth:`Datastore.stats`."""
        per = [s.stats() for s in self.shards]
        counts: dict[str, int] = {}
        for st in per:
            for name, c in st["counts"].items():
                counts[name] = counts.get(name, 0) + int(c)
        for st in per:
            st.pop("rss_bytes", None)
        return {
            "n": self.n,
            "dim": self.dim,
            "encoder": per[0]["encoder"],
            "n_shards": len(self.shards),
            "counts": counts,
            "index_ram_bytes": sum(st["index_ram_bytes"] for st in per),
            "offsets_ram_bytes": sum(st["offsets_ram_bytes"] for st in per),
            "disk_bytes": {"total": sum(st["disk_bytes"]["total"] for st in per)},
            "rss_bytes": int(psutil.Process().memory_info().rss),
            "shards": [{"path": str(s.root), **st} for s, st in zip(self.shards, per, strict=True)],
        }
