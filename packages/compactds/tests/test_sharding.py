"""Sharded serving: a store split into shards answers as the whole store does, mismatched shards
are refused, and the HTTP service serves a sharded store."""

import numpy as np
import pytest

from iclr26.compactds import (
    Chunker,
    DatastoreBuilder,
    ShardedDatastore,
    StoreError,
    evaluate,
    format_prompt,
)
from iclr26.compactds.server import create_app


def _build(path, encoder, rows, source, **kw):
    b = DatastoreBuilder(path, encoder, chunker=Chunker(5), vector_dtype="float32", threads=1, **kw)
    b.add_source(source, [f"v{i}" for i in rows])
    return b.build()


@pytest.fixture(scope="module")
def stores(tmp_path_factory, clustered, make_vector_builder, vector_encoder_cls):
    base, _ = clustered
    root = tmp_path_factory.mktemp("shards")
    enc = vector_encoder_cls(base)
    whole = make_vector_builder(root / "whole", base, encoder=enc, vector_dtype="float32").build()
    half = len(base) // 2
    a = _build(root / "a", enc, range(half), "a")
    b = _build(root / "b", enc, range(half, len(base)), "b")
    # shard "b" first: the router's global ids differ from the whole store's
    sharded = ShardedDatastore.open([root / "b", root / "a"], encoder=enc)
    yield {"whole": whole, "a": a, "b": b, "sharded": sharded, "enc": enc, "root": root}
    sharded.close()


def _to_whole(sharded, whole_n, ids):
    """Sharded global id -> the whole store's id, via the passage text "v<row>"."""
    table = np.array([int(sharded.passage(g).text[1:]) for g in range(whole_n)])
    return np.where(ids >= 0, table[np.maximum(ids, 0)], -1)


def test_full_depth_sharded_search_equals_the_whole_store(stores, clustered):
    _, queries = clustered
    whole, sharded = stores["whole"], stores["sharded"]
    assert sharded.n == whole.n
    assert list(sharded.offsets) == [0, stores["b"].n, whole.n]
    want_ids, want_scores, _ = whole.search_arrays(
        queries, k=10, K=whole.n, nprobe=whole.nlist, rerank="exact"
    )
    ids, scores, _ = sharded.search_arrays(
        queries, k=10, K=whole.n, nprobe=sharded.nlist, rerank="exact"
    )
    np.testing.assert_array_equal(_to_whole(sharded, whole.n, ids), want_ids)
    np.testing.assert_allclose(scores, want_scores, atol=1e-6)
    # the merge needs both shards: some queries' top 10 mix ids from each
    from_b = ids < stores["b"].n
    assert from_b.any()
    assert (~from_b).any()


def test_hits_sources_and_prompt_match_the_whole_store(stores, clustered):
    _, queries = clustered
    whole, sharded = stores["whole"], stores["sharded"]
    kw = {"k": 5, "K": whole.n, "nprobe": whole.nlist}
    for got, want in zip(sharded.search(queries[:4], **kw), whole.search(queries[:4], **kw),
                         strict=True):  # fmt: skip
        assert [h.text for h in got] == [h.text for h in want]
        assert [h.source for h in got] == [h.source for h in want]
        np.testing.assert_allclose([h.score_exact for h in got], [h.score_exact for h in want],
                                   atol=1e-6)  # fmt: skip
        assert all(sharded.passage(h.id).text == h.text for h in got)
        assert format_prompt("q?", got, k=5) == format_prompt("q?", want, k=5)
    only_a = sharded.search(queries[:4], sources=["a"], **kw)
    want_a = whole.search(queries[:4], sources=["a"], **kw)
    assert [[h.text for h in r] for r in only_a] == [[h.text for h in r] for r in want_a]
    assert all(h.source == "a" for r in only_a for h in r)
    with pytest.raises(ValueError, match="sources must be"):
        sharded.search(queries[:1], sources=["nope"])
    # text queries are embedded once, by the shared encoder
    assert sharded.search("v7", k=1, K=50)[0][0].text == "v7"


def test_evaluate_takes_a_sharded_store_without_ann_recall(stores):
    sharded, whole = stores["sharded"], stores["whole"]
    queries = ["v3", "v2999", "v1600"]
    relevant = [{"a:3"}, {"b:1499"}, {"b:100"}]  # "<source>:<index in the source>"
    kw = {"relevant_docs": relevant, "ks": (1,), "K": 200, "ann_recall": False}
    got = evaluate(sharded, queries, **kw)
    assert got["hit@1"] == evaluate(whole, queries, **kw)["hit@1"] == 1.0
    assert got["stats"]["n_shards"] == 2
    with pytest.raises(ValueError, match="ann_recall=False"):
        evaluate(sharded, queries, ks=(1,))


def test_mismatched_shards_are_refused(stores, clustered, vector_encoder_cls):
    base, _ = clustered
    root = stores["root"]
    other = _build(root / "other", vector_encoder_cls(base, tag="w"), range(100), "c")
    with pytest.raises(StoreError, match=r"encoder\.fingerprint"):
        ShardedDatastore([stores["a"], other])
    narrow = _build(root / "narrow", vector_encoder_cls(base[:, :16]), range(300), "c")
    with pytest.raises(StoreError, match=r"shard 1 .* not be comparable"):
        ShardedDatastore([stores["a"], narrow])
    with pytest.raises(ValueError, match="at least one"):
        ShardedDatastore([])
    with pytest.raises(TypeError, match="Datastore"):
        ShardedDatastore([stores["a"], "b"])
    with pytest.raises(ValueError, match="non-empty list"):
        ShardedDatastore.open(root / "a")


def test_the_http_service_serves_a_sharded_store(stores, serving):
    sharded = stores["sharded"]
    app = create_app(sharded, max_batch=8, max_k=20, max_candidates=5000)
    with serving(app) as client:
        qs = ["v5", "v2500", "v1499"]
        body = {"queries": qs, "k": 5, "K": 3000, "nprobe": sharded.nlist}
        r = client.post("/search", json=body)
        assert r.status_code == 200, r.text
        got = [[h["text"] for h in row] for row in r.json()["results"]]
        assert got == [[h.text for h in row] for row in sharded.search(qs, k=5, K=3000,
                                                                      nprobe=sharded.nlist)]  # fmt: skip
        assert [row[0] for row in got] == qs  # each vector is its own nearest neighbour
        assert client.get(f"/passage/{sharded.n - 1}").json()["id"] == sharded.n - 1
        stats = client.get("/stats").json()
        assert stats["n_shards"] == 2
        assert stats["n"] == sharded.n
        bad = client.post("/search", json={"queries": ["v1"], "sources": ["nope"]})
        assert bad.status_code == 422
        assert "unknown sources" in bad.text
