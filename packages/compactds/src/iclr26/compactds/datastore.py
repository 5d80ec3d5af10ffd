"""Opening and searching a datastore: ANN top-K in RAM, then the exact stage over the K
candidates only.

``rerank="exact"`` reads the K candidates' full-precision rows from the memory-mapped vector
file and scores them with a real dot product (the classic IVFPQ refine, with the vectors on disk
instead of in RAM). ``rerank="reencode"`` re-embeds the query and the candidate *texts* with a
second encoder (what the released CompactDS does with GRIT-7B, ``src/exact_rerank.py``).
``rerank="none"`` returns the ANN order and PQ scores.
"""

from __future__ import annotations

import json
import mmap
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import psutil

from iclr26.compactds.chunking import Passage
from iclr26.compactds.encoders import Encoder, load_encoder
from iclr26.compactds.store import StoreError, read_meta, verify_files
from iclr26.shared import check_array, check_choice, check_int

__all__ = ["Datastore", "Hit", "Searchable", "exact_scores", "resolve_nprobe"]

RERANK_MODES = ("exact", "reencode", "none")
#: ``nprobe`` when none is given: ``min(DEFAULT_NPROBE, nlist)`` (CompactDS: 256 of 65,536).
DEFAULT_NPROBE = 32


def resolve_nprobe(nprobe: int | None, nlist: int) -> int:
    """The one ``nprobe`` rule of the Python API, the command line and the HTTP service.

    ``None`` means ``min(32, nlist)``; otherwise ``nprobe`` must be an integer >= 1, and a value
    above ``nlist`` visits every inverted list, i.e. it is capped at ``nlist`` (so a request
    written for a large store also runs on a small one).

    Raises:
        TypeError: ``nprobe`` is not an integer (a float or bool is refused, not truncated).
        ValueError: ``nprobe`` < 1.
    """
    if nprobe is None:
        return min(DEFAULT_NPROBE, nlist)
    return min(check_int(nprobe, "nprobe", low=1), nlist)


def check_query_vectors(qvecs: Any, dim: int, name: str = "qvecs") -> np.ndarray:
    """``qvecs`` as a C-contiguous float32 ``(n, dim)`` array, or a clear error.

    Integers are converted; booleans, complex numbers, NaN/inf, an empty batch or another
    dimension are refused (faiss would otherwise assert, or under ``python -O`` read past the
    buffer).
    """
    q = np.asarray(qvecs) if not isinstance(qvecs, np.ndarray) else qvecs
    if q.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers (float or int), got dtype {q.dtype}")
    if q.ndim != 2 or q.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n, {dim}) for this store, got {q.shape}")
    check_array(q, name, ndim=2)  # non-empty, finite
    return np.ascontiguousarray(q, dtype=np.float32)


def check_depths(k: int, K: int, rerank: str) -> tuple[int, int]:
    """Validate ``k`` results out of ``K`` candidates and the rerank mode; returns ``(k, K)``."""
    k = check_int(k, "k", low=1)
    K = check_int(K, "K", low=1)
    if k > K:
        raise ValueError(f"K (candidates) must be >= k, got K={K}, k={k}")
    check_choice(rerank, "rerank", RERANK_MODES)
    return k, K


def check_reencode(
    rerank: str, reencoder: Encoder | None, query_texts: Sequence[str] | None, nq: int
) -> None:
    """``rerank="reencode"`` needs a re-encoder and one query text per query vector."""
    if rerank != "reencode":
        return
    if reencoder is None or query_texts is None:
        raise ValueError("rerank='reencode' needs a reencoder and text queries")
    if isinstance(query_texts, str) or len(query_texts) != nq:
        raise ValueError(
            f"query_texts must hold one string per query vector ({nq}), got "
            f"{1 if isinstance(query_texts, str) else len(query_texts)}"
        )


def check_sources(
    sources: str | Sequence[str] | None, known: Mapping[str, Any]
) -> list[str] | None:
    """``sources`` as a list of names from ``known`` (``None`` = all), or ``ValueError``."""
    if sources is None:
        return None
    wanted = [sources] if isinstance(sources, str) else list(sources)
    if not wanted or any(s not in known for s in wanted):
        raise ValueError(f"sources must be a non-empty subset of {sorted(known)}, got {sources}")
    return wanted


def exact_scores(vectors: Any, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Exact inner products ``vectors[ids] @ query`` reading only the ``len(ids)`` rows.

    Args:
        vectors: ``(n, d)`` array or ``np.memmap`` (float16/float32).
        ids: int64 ``(K,)`` candidate ids (no -1).
        query: float32 ``(d,)``.

    Returns:
        float32 ``(K,)`` scores in the order of ``ids``.
    """
    order = np.argsort(ids)  # sorted reads are sequential on disk
    rows = np.asarray(vectors[ids[order]], np.float32)
    scores = np.empty(len(ids), np.float32)
    scores[order] = rows @ query
    return scores


@dataclass(frozen=True)
class Hit:
    """One search result.

    Attributes:
        id: global passage id.
        source: the passage's source.
        score_ann: inner product estimated by the IVFPQ codes.
        score_exact: exact score of the final stage (full-vector dot product for ``"exact"``,
            re-encoder cosine for ``"reencode"``); ``None`` for ``rerank="none"``.
        text: passage text (``""`` when searched with ``with_text=False``).
        doc_id: id of the source document.
    """

    id: int
    source: str
    score_ann: float
    score_exact: float | None
    text: str = ""
    doc_id: str = ""

    @property
    def score(self) -> float:
        """The score the hit was ranked by."""
        return self.score_ann if self.score_exact is None else self.score_exact


class Searchable:
    """``search`` on top of ``embed_queries``, ``search_arrays``, ``passage`` and ``source_of``:
    shared by :class:`Datastore` and :class:`~iclr26.compactds.sharding.ShardedDatastore`."""

    def search(
        self,
        queries: str | Sequence[str] | np.ndarray,
        *,
        k: int = 3,
        K: int = 100,
        nprobe: int | None = None,
        rerank: str = "exact",
        reencoder: Encoder | None = None,
        sources: Sequence[str] | None = None,
        with_text: bool = True,
    ) -> list[list[Hit]]:
        """Search the store.

        Args:
            queries: a string, a list of strings (embedded with the store's encoder) or a float32
                array ``(n, dim)`` of query vectors.
            k: passages returned per query (default 3, CompactDS's prompt depth).
            K: ANN candidates passed to the exact stage (default 100; CompactDS keeps 1,000).
            nprobe: inverted lists visited: an integer >= 1, capped at the store's ``nlist``
                (default ``min(32, nlist)``; CompactDS: 256 of 65,536). See
                :func:`resolve_nprobe`.
            rerank: ``"exact"`` (default), ``"reencode"`` or ``"none"``.
            reencoder: the second encoder for ``"reencode"``.
            sources: restrict to these sources (per-source filtering).
            with_text: read each hit's text from disk (default True).

        Returns:
            One list of :class:`Hit` per query, best first.
        """
        qvecs, texts = self.embed_queries(queries)
        ids, final, ann = self.search_arrays(
            qvecs, k=k, K=K, nprobe=nprobe, rerank=rerank, sources=sources,
            query_texts=texts, reencoder=reencoder,
        )  # fmt: skip
        out = []
        for r in range(len(ids)):
            hits = []
            for j in range(ids.shape[1]):
                pid = int(ids[r, j])
                if pid < 0:
                    continue
                p = self.passage(pid) if with_text else None
                hits.append(
                    Hit(
                        pid,
                        p.source if p else self.source_of(pid),
                        float(ann[r, j]),
                        None if rerank == "none" else float(final[r, j]),
                        p.text if p else "",
                        p.doc_id if p else "",
                    )
                )
            out.append(hits)
        return out


class Datastore(Searchable):
    """A built store, opened read-only. Use :meth:`open`.

    Attributes:
        meta: the parsed ``meta.json``.
        index: the faiss IVFPQ index (in RAM).
        vectors: ``np.memmap`` of shape ``(n, dim)`` (float16 or float32), row = id.
        sources: ``{name: (first_id, end_id)}``.
    """

    def __init__(self, root: Path, meta: dict[str, Any], encoder: Encoder | None) -> None:
        self.root = root
        self.meta = meta
        self._encoder = encoder
        self._encoder_lock = threading.Lock()
        self.n = int(meta["n"])
        self.dim = int(meta["encoder"]["dim"])
        self.index = faiss.read_index(str(root / "ann" / "index.faiss"))
        if self.index.ntotal != self.n or self.index.d != self.dim:
            raise StoreError(
                f"{root}: the index holds {self.index.ntotal} vectors of dim {self.index.d}, the "
                f"metadata says {self.n} of dim {self.dim}"
            )
        self.ivf = faiss.downcast_index(faiss.extract_index_ivf(self.index))
        self.vectors = np.memmap(
            root / meta["vector_file"], dtype=np.dtype(meta["vector_dtype"]), mode="r",
            shape=(self.n, self.dim),
        )  # fmt: skip
        # Random row reads: no kernel readahead around each faulted row (cold stores on disk).
        raw_map = getattr(self.vectors, "_mmap", None)
        if raw_map is not None and hasattr(mmap, "MADV_RANDOM"):
            raw_map.madvise(mmap.MADV_RANDOM)
        self.offsets = np.load(root / "offsets.npy")
        self.file_ids = np.load(root / "file_ids.npy")
        if len(self.offsets) != self.n or len(self.file_ids) != self.n:
            raise StoreError(f"{root}: offsets/file_ids do not have {self.n} entries")
        self.sources = {
            k: (int(a), int(b))
            for k, (a, b) in json.loads((root / "sources.json").read_text()).items()
        }
        self._files = [root / f for f in meta["passage_files"]]

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        encoder: Encoder | None = None,
        verify: str = "fast",
        rebuild_encoder: bool = True,
    ) -> Datastore:
        """Open a store after checking its schema, files and encoder.

        Args:
            path: the store directory.
            encoder: the encoder for text queries; its fingerprint and dimension must equal the
                store's. Default: rebuilt from ``encoder.json`` on the first text query.
            verify: ``"fast"`` (default: sizes of every file, sha256 of the small ones and of
                the index up to 256 MiB), ``"full"`` (sha256 of everything, reads the whole
                store) or ``"none"``.
            rebuild_encoder: allow rebuilding the encoder from the store (default True).

        Raises:
            StoreError: missing/incomplete store, other schema, truncated or corrupted file,
                or an encoder that does not match.
        """
        check_choice(verify, "verify", ("fast", "full", "none"))
        root = Path(path)
        meta = read_meta(root)
        verify_files(root, meta.get("files", {}), verify)
        if encoder is not None:
            want = meta["encoder"]
            if int(encoder.dim) != int(want["dim"]):
                raise StoreError(
                    f"{root} was built with {want['dim']}-d vectors ({want['name']}); the encoder "
                    f"{encoder.name} produces {encoder.dim}-d vectors"
                )
            if encoder.fingerprint != want["fingerprint"]:
                raise StoreError(
                    f"{root} was built with encoder {want['name']} (fingerprint "
                    f"{want['fingerprint']}); {encoder.name} has fingerprint {encoder.fingerprint}"
                )
        store = cls(root, meta, encoder)
        store._may_load_encoder = rebuild_encoder
        return store

    @property
    def nlist(self) -> int:
        """Inverted lists of the IVFPQ: the largest useful ``nprobe``."""
        return int(self.ivf.nlist)

    @property
    def encoder(self) -> Encoder:
        """The store's encoder (rebuilt from the store on first use if none was given)."""
        with self._encoder_lock:
            if self._encoder is None:
                if not getattr(self, "_may_load_encoder", True):
                    raise ValueError("this store was opened without an encoder; pass encoder=")
                self._encoder = load_encoder(self.root)
            return self._encoder

    # ----------------------------------------------------------------- passages
    def passage(self, pid: int) -> Passage:
        """The passage with global id ``pid``, read from its shard file by byte offset."""
        pid = check_int(pid, "id", low=0, high=self.n - 1)
        with self._files[int(self.file_ids[pid])].open("rb") as f:
            f.seek(int(self.offsets[pid]))
            line = f.readline()
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise StoreError(f"{self.root}: passage {pid} is unreadable (corrupted shard)") from err
        if rec.get("id") != pid:
            raise StoreError(f"{self.root}: offset of passage {pid} points at id {rec.get('id')}")
        return Passage(pid, rec["source"], rec["doc_id"], rec["text"])

    def source_of(self, pid: int) -> str:
        for name, (lo, hi) in self.sources.items():
            if lo <= pid < hi:
                return name
        raise ValueError(f"id {pid} is in no source")

    # ------------------------------------------------------------------- search
    def embed_queries(
        self, queries: str | Sequence[str] | np.ndarray
    ) -> tuple[np.ndarray, list[str] | None]:
        """Query vectors (validated float32, one row per query) and the query texts (None when
        vectors were given), embedded with the store's encoder."""
        if isinstance(queries, str):
            queries = [queries]
        if hasattr(queries, "shape") and hasattr(queries, "dtype"):
            return check_query_vectors(queries, self.dim, "queries"), None
        if not isinstance(queries, Sequence):
            raise TypeError(
                "queries must be a string, a list of strings or a float32 (n, dim) array, got "
                f"{type(queries).__name__}"
            )
        texts = list(queries)
        if not texts:
            raise ValueError("queries must not be empty")
        for t in texts:
            if not isinstance(t, str) or not t.strip():
                raise ValueError(f"every query must be a non-empty string, got {t!r}")
        return np.ascontiguousarray(self.encoder.encode_queries(texts), np.float32), texts

    def _params(self, nprobe: int, sources: Sequence[str] | None) -> tuple[Any, Any]:
        params = faiss.SearchParametersIVF()
        params.nprobe = nprobe
        keep = None
        sources = check_sources(sources, self.sources)
        if sources is not None:
            ids = np.concatenate([np.arange(*self.sources[s], dtype=np.int64) for s in sources])
            sel = faiss.IDSelectorBatch(ids)
            params.sel = sel
            keep = (sel, ids)  # the caller keeps the selector and its ids alive during the search
        return params, keep

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
        """Vector-level search: returns ``(ids, score_final, score_ann)``, each ``(nq, k)``.

        Args:
            qvecs: float32 ``(nq, dim)`` query vectors (integers are converted; another
                dimension, NaN/inf or an empty batch raise ``ValueError``).
            k, K, rerank, sources: as :meth:`search`.
            nprobe: see :func:`resolve_nprobe` (``None``: ``min(32, nlist)``; above ``nlist``:
                capped at ``nlist``).
            query_texts, reencoder: the query strings (one per row) and the second encoder
                of ``rerank="reencode"``.

        Missing results (fewer than ``k`` candidates) have id -1 and score -inf.
        """
        k, K = check_depths(k, K, rerank)
        nprobe = resolve_nprobe(nprobe, self.nlist)
        q = check_query_vectors(qvecs, self.dim)
        check_reencode(rerank, reencoder, query_texts, len(q))
        depth = k if rerank == "none" else K
        params, _keep = self._params(nprobe, sources)
        d_ann, i_ann = self.index.search(q, depth, params=params)
        nq = q.shape[0]
        ids = np.full((nq, k), -1, np.int64)
        final = np.full((nq, k), -np.inf, np.float32)
        ann = np.full((nq, k), -np.inf, np.float32)
        for r in range(nq):
            valid = i_ann[r] >= 0
            cand, cand_ann = i_ann[r][valid], d_ann[r][valid]
            if rerank == "none":
                scores = cand_ann
            elif rerank == "exact":
                scores = exact_scores(self.vectors, cand, q[r])
            else:
                texts = [self.passage(int(c)).text for c in cand]
                qv = reencoder.encode_queries([query_texts[r]])[0]
                scores = (
                    (reencoder.encode_passages(texts) @ qv).astype(np.float32)
                    if texts
                    else np.zeros(0, np.float32)
                )
            # ties broken by id so results are deterministic
            top = np.lexsort((cand, -scores))[:k]
            m = len(top)
            ids[r, :m], final[r, :m], ann[r, :m] = cand[top], scores[top], cand_ann[top]
        return ids, final, ann

    # -------------------------------------------------------------------- stats
    def stats(self) -> dict[str, Any]:
        """Sizes: index bytes in RAM, bytes on disk per part, counts, IVFPQ shape, process RSS."""
        files = self.meta.get("files", {})
        disk = {
            "vectors": files.get(self.meta["vector_file"], {}).get("bytes", 0),
            "index": files.get("ann/index.faiss", {}).get("bytes", 0),
            "passages": sum(v["bytes"] for k, v in files.items() if k.startswith("passages/")),
        }
        return {
            "n": self.n,
            "dim": self.dim,
            "encoder": self.meta["encoder"]["name"],
            "vector_dtype": self.meta["vector_dtype"],
            "index": self.meta["index"],
            "counts": self.meta["counts"],
            "index_ram_bytes": int(faiss.serialize_index(self.index).nbytes),
            "offsets_ram_bytes": int(self.offsets.nbytes + self.file_ids.nbytes),
            "disk_bytes": {**disk, "total": sum(v["bytes"] for v in files.values())},
            "rss_bytes": int(psutil.Process().memory_info().rss),
        }
