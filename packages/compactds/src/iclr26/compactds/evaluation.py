"""Retrieval-side evaluation: ANN recall against exact flat search, hit@k / nDCG@k on query
families, latency percentiles, RAM and disk bytes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr26.shared import check_array, check_int

__all__ = ["evaluate", "exact_topk", "hit_at_k", "ndcg_at_k", "recall_at_k"]


def exact_topk(
    vectors: np.ndarray, queries: np.ndarray, k: int, *, block: int = 65_536
) -> np.ndarray:
    """Brute-force inner-product top-``k`` ids ``(nq, k)`` over ``vectors`` ``(n, d)`` (float16 or
    float32, memmap fine), ties broken by lower id; reads ``vectors`` in blocks."""
    k = check_int(k, "k", low=1)
    q = np.asarray(queries, np.float32)
    n = vectors.shape[0]
    best_s = np.full((len(q), 0), -np.inf, np.float32)
    best_i = np.zeros((len(q), 0), np.int64)
    for lo in range(0, n, block):
        s = np.asarray(vectors[lo : lo + block], np.float32) @ q.T
        s = s.T
        ids = np.broadcast_to(np.arange(lo, lo + s.shape[1]), s.shape)
        best_s = np.concatenate([best_s, s], axis=1)
        best_i = np.concatenate([best_i, ids], axis=1)
        keep = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
        best_s = np.take_along_axis(best_s, keep, 1)
        best_i = np.take_along_axis(best_i, keep, 1)
    return best_i


def recall_at_k(found: np.ndarray, truth: np.ndarray, k: int | None = None) -> float:
    """Mean over queries of ``|found[:k] ∩ truth[:k]| / k`` (ANN recall@k vs exact search).

    Args:
        found, truth: int arrays ``(nq, >=k)`` of ids (``-1`` = missing).
    """
    found, truth = np.asarray(found), np.asarray(truth)
    check_array(found, "found", ndim=2)
    check_array(truth, "truth", ndim=2)
    if len(found) != len(truth):
        raise ValueError(
            f"found and truth need the same number of queries, got {len(found)}, {len(truth)}"
        )
    k = (
        truth.shape[1]
        if k is None
        else check_int(k, "k", low=1, high=min(found.shape[1], truth.shape[1]))
    )
    return float(
        np.mean(
            [len(set(f[:k]) & set(t[:k]) - {-1}) / k for f, t in zip(found, truth, strict=True)]
        )
    )


def hit_at_k(ranked: Sequence[Sequence[Any]], relevant: Sequence[set[Any]], k: int) -> float:
    """Fraction of queries with at least one relevant item among the top ``k``."""
    k = check_int(k, "k", low=1)
    if len(ranked) != len(relevant) or not ranked:
        raise ValueError("ranked and relevant must be non-empty and of the same length")
    return float(
        np.mean([any(x in rel for x in r[:k]) for r, rel in zip(ranked, relevant, strict=True)])
    )


def ndcg_at_k(ranked: Sequence[Sequence[Any]], relevant: Sequence[set[Any]], k: int) -> float:
    """Binary-relevance nDCG@k, averaged over queries (a relevant item counts once)."""
    k = check_int(k, "k", low=1)
    if len(ranked) != len(relevant) or not ranked:
        raise ValueError("ranked and relevant must be non-empty and of the same length")
    scores = []
    for r, rel in zip(ranked, relevant, strict=True):
        seen, dcg = set(), 0.0
        for i, x in enumerate(r[:k]):
            if x in rel and x not in seen:
                dcg += 1.0 / np.log2(i + 2)
                seen.add(x)
        ideal = sum(1.0 / np.log2(i + 2) for i in range(min(k, len(rel))))
        scores.append(dcg / ideal if ideal else 0.0)
    return float(np.mean(scores))


def evaluate(
    store: Any,
    queries: Sequence[str] | np.ndarray,
    *,
    relevant_docs: Sequence[set[str]] | None = None,
    ks: Sequence[int] = (1, 10),
    K: int = 100,
    nprobe: int | None = None,
    rerank: str = "exact",
    sources: Sequence[str] | None = None,
    ann_recall: bool = True,
) -> dict[str, Any]:
    """Evaluate a :class:`~iclr26.compactds.Datastore` on queries.

    Args:
        store: the opened datastore, or a ``ShardedDatastore`` with ``ann_recall=False``.
        queries: text queries or float32 query vectors ``(nq, dim)``.
        relevant_docs: per query, the set of relevant ``doc_id`` values (hit@k, nDCG@k at the
            document level); ``None`` skips them.
        ks: cut-offs.
        K, nprobe, rerank, sources: search settings.
        ann_recall: also compute recall@k against exact flat search over the stored vectors.

    Returns:
        ``{"recall@k", "hit@k", "ndcg@k", "latency_ms": {"p50", "p95", "p99"}, "stats"}``.
    """
    ks = [check_int(k, "ks", low=1) for k in ks]
    qvecs, _ = store.embed_queries(queries)
    kmax = max(ks)
    lat = []
    ids = np.empty((len(qvecs), kmax), np.int64)
    for r in range(len(qvecs)):
        t0 = time.perf_counter()
        ids[r], _, _ = (a[0] for a in store.search_arrays(
            qvecs[r : r + 1], k=kmax, K=max(K, kmax), nprobe=nprobe, rerank=rerank, sources=sources))  # fmt: skip
        lat.append(time.perf_counter() - t0)
    out: dict[str, Any] = {}
    if ann_recall:
        if not hasattr(store, "vectors"):
            raise ValueError(
                "ann_recall=True needs one store's vector file; pass ann_recall=False for a "
                "ShardedDatastore (or evaluate each shard)"
            )
        if sources is None:
            truth = exact_topk(store.vectors, qvecs, kmax)
        else:
            ranges = [np.arange(*store.sources[s]) for s in sources]
            allowed = np.concatenate(ranges)
            truth = allowed[exact_topk(store.vectors[allowed], qvecs, kmax)]
        for k in ks:
            out[f"recall@{k}"] = recall_at_k(ids, truth, k)
    if relevant_docs is not None:
        if len(relevant_docs) != len(qvecs):
            raise ValueError("relevant_docs needs one set per query")
        docs = [[store.passage(int(i)).doc_id if i >= 0 else None for i in row] for row in ids]
        for k in ks:
            out[f"hit@{k}"] = hit_at_k(docs, relevant_docs, k)
            out[f"ndcg@{k}"] = ndcg_at_k(docs, relevant_docs, k)
    ms = np.asarray(lat) * 1e3
    out["latency_ms"] = {f"p{p}": float(np.percentile(ms, p)) for p in (50, 95, 99)}
    out["stats"] = store.stats()
    return out
