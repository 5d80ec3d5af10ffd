import numpy as np
import psutil

from iclr26.compactds import Chunker, Datastore, DatastoreBuilder
from iclr26.compactds.evaluation import hit_at_k


def test_opening_a_store_does_not_load_the_vectors_into_ram(tmp_path, make_vector_builder):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((60_000, 384)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    make_vector_builder(tmp_path / "big", base, nlist=16, m=8, nbits=4, train_min=2000,
                        shard_size=20_000).build()  # fmt: skip
    del base
    vec_bytes = (tmp_path / "big" / "vectors.f16").stat().st_size
    assert vec_bytes == 60_000 * 384 * 2
    proc = psutil.Process()

    def anon() -> int:  # private memory; mapped file pages are reclaimable page cache
        info = proc.memory_info()
        return info.rss - info.shared

    rss0, anon0 = proc.memory_info().rss, anon()
    store = Datastore.open(tmp_path / "big", verify="fast", rebuild_encoder=False)
    assert proc.memory_info().rss - rss0 < 0.3 * vec_bytes  # opening reads no vectors
    q = np.asarray(store.vectors[:20], np.float32)
    ids, _, _ = store.search_arrays(q, k=5, K=100, nprobe=4)
    # Searching faults in file pages around the K rows it reads (how many is up to the kernel's
    # fault-around and folio sizes), but copies only those K rows into private memory.
    assert anon() - anon0 < 0.3 * vec_bytes, (anon() - anon0, vec_bytes)
    assert (ids >= 0).all()


def test_no_single_source_suffices(tmp_path, text_corpus, lsa):
    """The diversity effect on two sources: each single-source store misses the other family's queries;
    the combined store answers both about as well as the matching single-source store."""
    stores = {}
    for name in (("pydoc",), ("numpy",), ("pydoc", "numpy")):
        b = DatastoreBuilder(tmp_path / "-".join(name), lsa, chunker=Chunker(64), threads=1)
        for src in name:
            b.add_source(src, text_corpus.sources[src])
        stores[name] = b.build()
    hits = {}
    for key, store in stores.items():
        for fam in ("pydoc", "numpy"):
            qs = text_corpus.queries[fam][:60]
            res = store.search([q for q, _ in qs], k=10, K=100)
            docs = [[h.doc_id for h in row] for row in res]
            hits[key, fam] = hit_at_k(docs, [{d} for _, d in qs], 10)
    both = ("pydoc", "numpy")
    for fam in ("pydoc", "numpy"):
        other = ("numpy",) if fam == "pydoc" else ("pydoc",)
        assert hits[other, fam] == 0.0
        assert hits[both, fam] >= hits[(fam,), fam] - 0.1
        assert hits[both, fam] > 0.3
    mean = {key: np.mean([hits[key, f] for f in ("pydoc", "numpy")]) for key in stores}
    assert mean[both] > max(mean[("pydoc",)], mean[("numpy",)])
