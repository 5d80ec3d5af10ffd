"""The store on disk: offsets round trip, resume after a crash, sharded build, corruption and
metadata guards."""

import json
import shutil

import numpy as np
import pytest

from iclr26.compactds import Chunker, Datastore, DatastoreBuilder, HashingEncoder, StoreError


class Crash(Exception):
    pass


def _files(root):
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _docs(n=40, words=90, seed=0):
    rng = np.random.default_rng(seed)
    vocab = [f"t{i}" for i in range(400)]
    return [" ".join(rng.choice(vocab, words)) for _ in range(n)]


def _builder(path, enc, **kw):
    b = DatastoreBuilder(path, enc, chunker=Chunker(20), shard_size=25, threads=1, **kw)
    b.add_source("alpha", _docs(seed=1)).add_source("beta", _docs(seed=2))
    return b


def test_offsets_round_trip_across_shards_and_sources(tmp_path, hashing):
    s = _builder(tmp_path / "s", hashing).build()
    expected = [t for src in (1, 2) for d in _docs(seed=src) for t in Chunker(20).chunk(d)]
    assert s.n == len(expected)
    assert len(s.meta["passage_files"]) > 4
    for pid in np.random.default_rng(0).choice(s.n, 40, replace=False):
        p = s.passage(int(pid))
        assert p.text == expected[pid]
        assert p.source == ("alpha" if pid < s.sources["alpha"][1] else "beta")
    # the stored vector is the embedding of exactly that text
    np.testing.assert_allclose(
        np.asarray(s.vectors[7], np.float32), hashing.encode_passages([expected[7]])[0], atol=1e-3
    )
    assert s.meta["counts"] == {"alpha": s.sources["alpha"][1], "beta": s.n - s.sources["alpha"][1]}


class CountingEncoder(HashingEncoder):
    def __init__(self):
        super().__init__(64)
        self.encoded = 0

    def encode_passages(self, texts):
        self.encoded += len(texts)
        return super().encode_passages(texts)


def test_interrupted_build_resumes_to_the_same_store(tmp_path):
    ref = _builder(tmp_path / "ref", HashingEncoder(64)).build()

    def crash_after_three(key, seen=[]):  # noqa: B006
        seen.append(key)
        if len(seen) == 3:
            raise Crash(key)

    with pytest.raises(Crash):
        _builder(tmp_path / "run", HashingEncoder(64)).build(on_shard=crash_after_three)
    with pytest.raises(StoreError, match="interrupted build"):
        Datastore.open(tmp_path / "run")
    enc = CountingEncoder()
    resumed = _builder(tmp_path / "run", enc).build()
    assert enc.encoded == ref.n - 3 * 25  # finished shards were not embedded again
    assert _files(tmp_path / "ref") == _files(tmp_path / "run")  # byte-identical store
    assert resumed.n == ref.n


def test_resume_with_other_sources_is_refused(tmp_path):
    def crash(key):
        raise Crash(key)

    with pytest.raises(Crash):
        _builder(tmp_path / "s", HashingEncoder(64)).build(on_shard=crash)
    other = DatastoreBuilder(tmp_path / "s", HashingEncoder(64), chunker=Chunker(20), shard_size=25)
    other.add_source("alpha", _docs(seed=9))
    other.add_source("beta", _docs(seed=2))
    with pytest.raises(StoreError, match="other"):
        other.build()


def test_existing_store_is_not_overwritten_by_accident(tmp_path, hashing):
    _builder(tmp_path / "s", hashing).build()
    with pytest.raises(StoreError, match="overwrite"):
        _builder(tmp_path / "s", hashing).build()
    assert _builder(tmp_path / "s", hashing, overwrite=True).build().n > 0


def test_sharded_build_with_three_workers_equals_single_worker(
    tmp_path, clustered, make_vector_builder
):
    base, queries = clustered
    one = make_vector_builder(tmp_path / "one", base[:1500], shard_size=200).build(workers=1)
    three = make_vector_builder(tmp_path / "three", base[:1500], shard_size=200).build(
        workers=3, trained_index=None
    )
    for rerank in ("none", "exact"):
        a = one.search_arrays(queries, k=10, K=50, nprobe=4, rerank=rerank)
        b = three.search_arrays(queries, k=10, K=50, nprobe=4, rerank=rerank)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    # a shared trained index gives the same store too
    import faiss

    trained = faiss.clone_index(one.index)
    trained.reset()
    shared = make_vector_builder(tmp_path / "shared", base[:1500], shard_size=200).build(
        workers=3, trained_index=trained
    )
    np.testing.assert_array_equal(
        shared.search_arrays(queries, k=10, nprobe=4, rerank="none")[0],
        one.search_arrays(queries, k=10, nprobe=4, rerank="none")[0],
    )


@pytest.fixture
def built(tmp_path, hashing):
    _builder(tmp_path / "s", hashing).build()
    return tmp_path / "s"


@pytest.mark.parametrize(
    "rel", ["vectors.f16", "ann/index.faiss", "offsets.npy", "passages/beta-00001.jsonl"]
)
def test_truncated_file_is_detected_on_open(built, rel):
    path = built / rel
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(StoreError, match="truncated"):
        Datastore.open(built)


@pytest.mark.parametrize(("rel", "verify"), [("ann/index.faiss", "fast"), ("offsets.npy", "fast"),
                                             ("vectors.f16", "full")])  # fmt: skip
def test_flipped_byte_is_detected_on_open(built, rel, verify):
    path = built / rel
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="corrupted"):
        Datastore.open(built, verify=verify)


def test_missing_file_and_broken_meta_are_detected(built):
    shutil.copy(built / "meta.json", built / "meta.bak")
    (built / "sources.json").unlink()
    with pytest.raises(StoreError, match="missing"):
        Datastore.open(built)
    (built / "meta.json").write_text("{not json")
    with pytest.raises(StoreError, match="corrupted"):
        Datastore.open(built)
    with pytest.raises(StoreError, match="does not exist"):
        Datastore.open(built / "nowhere")


def test_metadata_guard_refuses_other_encoder_dim_or_schema(built):
    with pytest.raises(StoreError, match="fingerprint"):
        Datastore.open(built, encoder=HashingEncoder(64, seed=1))
    with pytest.raises(StoreError, match="128-d"):
        Datastore.open(built, encoder=HashingEncoder(128))
    assert Datastore.open(built, encoder=HashingEncoder(64)).n > 0
    meta = json.loads((built / "meta.json").read_text())
    meta["schema_version"] = 99
    (built / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match="schema"):
        Datastore.open(built)


def test_encoder_is_rebuilt_from_the_store(built, lsa, tmp_path, text_corpus):
    s = Datastore.open(built)  # no encoder given: rebuilt from encoder.json on first text query
    assert s.search("t1 t2 t3", k=2)[0][0].text
    assert s.encoder.fingerprint == HashingEncoder(64).fingerprint
    b = DatastoreBuilder(tmp_path / "lsa", lsa, chunker=Chunker(64), threads=1)
    b.add_source("pydoc", text_corpus.sources["pydoc"][:30])
    b.build()
    reopened = Datastore.open(tmp_path / "lsa")
    assert reopened.encoder.fingerprint == lsa.fingerprint


def test_meta_without_a_needed_entry_is_a_store_error(built):
    meta = json.loads((built / "meta.json").read_text())
    del meta["vector_file"]
    (built / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match="missing vector_file"):
        Datastore.open(built)
    (built / "meta.json").write_text("[1, 2]")
    with pytest.raises(StoreError, match="JSON object"):
        Datastore.open(built)
