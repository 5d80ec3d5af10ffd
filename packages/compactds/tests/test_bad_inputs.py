"""Every function of the README's API table refuses bad input with a ValueError/TypeError (or a
StoreError / FileNotFoundError) that names the argument: wrong shape, wrong dtype (integers are
converted or refused, never truncated), NaN/inf, empty, out of range."""

import json
import subprocess
import sys

import numpy as np
import pytest

from iclr26.compactds import (
    Chunker,
    Datastore,
    DatastoreBuilder,
    Decontaminator,
    HashingEncoder,
    LSAEncoder,
    SentenceTransformerEncoder,
    ShardedDatastore,
    StoreError,
    auto_params,
    evaluate,
    format_prompt,
    from_compactds_jsonl,
    hit_at_k,
    ndcg_at_k,
    recall_at_k,
    to_compactds_jsonl,
)
from iclr26.compactds.server import bind, create_app


@pytest.fixture(scope="module")
def ctx(text_store, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    bad_jsonl = tmp / "bad.jsonl"
    bad_jsonl.write_text('{"ctxs": [1, 2]}\n')
    return {
        "store": text_store,
        "dim": text_store.dim,
        "sharded": ShardedDatastore([text_store]),
        "tmp": tmp,
        "bad_jsonl": bad_jsonl,
        "builder": lambda **kw: DatastoreBuilder(tmp / "b", HashingEncoder(16), **kw),
    }


def _q(c, rows=1, dim=None, fill=0.1, dtype=np.float32):
    return np.full((rows, c["dim"] if dim is None else dim), fill, dtype)


CASES = [
    # DatastoreBuilder
    ("builder encoder", lambda c: DatastoreBuilder(c["tmp"] / "x", object()), TypeError, "encoder"),
    ("builder shard_size 0", lambda c: c["builder"](shard_size=0), ValueError, "shard_size"),
    ("builder shard_size float", lambda c: c["builder"](shard_size=2.5), TypeError, "shard_size"),
    ("builder vector_dtype", lambda c: c["builder"](vector_dtype="int8"), ValueError, "vector_dtype"),
    ("builder train_frac nan", lambda c: c["builder"](train_frac=float("nan")), ValueError, "train_frac"),
    ("builder train_frac 0", lambda c: c["builder"](train_frac=0.0), ValueError, "train_frac"),
    ("builder seed -1", lambda c: c["builder"](seed=-1), ValueError, "seed"),
    ("builder source name", lambda c: c["builder"]().add_source("a b", ["x"]), ValueError, "source name"),
    ("builder source item", lambda c: c["builder"]().add_source("a", [3]), TypeError, "item 0"),
    ("builder jsonl missing", lambda c: c["builder"]().add_jsonl("a", c["tmp"] / "no.jsonl"),
     FileNotFoundError, "does not exist"),
    ("builder folder missing", lambda c: c["builder"]().add_text_folder("a", c["tmp"] / "no"),
     FileNotFoundError, "does not exist"),
    ("builder no sources", lambda c: c["builder"]().build(), ValueError, "no sources"),
    ("builder workers 0", lambda c: c["builder"]().add_source("a", ["x y"]).build(workers=0),
     ValueError, "workers"),
    # Datastore.open
    ("open missing", lambda c: Datastore.open(c["tmp"] / "none"), StoreError, "does not exist"),
    ("open verify", lambda c: Datastore.open(c["store"].root, verify="some"), ValueError, "verify"),
    # search
    ("search k 0", lambda c: c["store"].search("x", k=0), ValueError, "k must"),
    ("search k float", lambda c: c["store"].search("x", k=2.0), TypeError, "k must"),
    ("search K < k", lambda c: c["store"].search("x", k=5, K=4), ValueError, "K \\(candidates\\)"),
    ("search nprobe 0", lambda c: c["store"].search("x", nprobe=0), ValueError, "nprobe"),
    ("search nprobe float", lambda c: c["store"].search("x", nprobe=1.5), TypeError, "nprobe"),
    ("search nprobe bool", lambda c: c["store"].search("x", nprobe=True), TypeError, "nprobe"),
    ("search rerank", lambda c: c["store"].search("x", rerank="magic"), ValueError, "rerank"),
    ("search reencode alone", lambda c: c["store"].search("x", rerank="reencode"), ValueError, "reencoder"),
    ("search sources unknown", lambda c: c["store"].search("x", sources=["nope"]), ValueError, "sources"),
    ("search sources empty", lambda c: c["store"].search("x", sources=[]), ValueError, "sources"),
    ("search no queries", lambda c: c["store"].search([]), ValueError, "queries"),
    ("search blank query", lambda c: c["store"].search(["  "]), ValueError, "non-empty"),
    ("search not text", lambda c: c["store"].search(123), TypeError, "queries"),
    ("search vectors dim", lambda c: c["store"].search(_q(c, dim=c["dim"] + 1)), ValueError, "shape"),
    ("search vectors nan", lambda c: c["store"].search(_q(c, fill=np.nan)), ValueError, "finite"),
    # search_arrays
    ("arrays dim", lambda c: c["store"].search_arrays(_q(c, dim=c["dim"] - 1)), ValueError, "shape \\(n, 64\\)"),
    ("arrays 1-d", lambda c: c["store"].search_arrays(_q(c)[0]), ValueError, "shape"),
    ("arrays empty", lambda c: c["store"].search_arrays(_q(c, rows=0)), ValueError, "empty"),
    ("arrays nan", lambda c: c["store"].search_arrays(_q(c, fill=np.nan)), ValueError, "finite"),
    ("arrays inf", lambda c: c["store"].search_arrays(_q(c, fill=np.inf)), ValueError, "finite"),
    ("arrays complex", lambda c: c["store"].search_arrays(_q(c, dtype=np.complex64)), TypeError, "dtype"),
    ("arrays bool", lambda c: c["store"].search_arrays(_q(c, dtype=bool)), TypeError, "dtype"),
    ("arrays texts length", lambda c: c["store"].search_arrays(
        _q(c, rows=2), rerank="reencode", reencoder=HashingEncoder(8), query_texts=["a"]),
     ValueError, "query_texts"),
    # passage
    ("passage -1", lambda c: c["store"].passage(-1), ValueError, "id"),
    ("passage n", lambda c: c["store"].passage(c["store"].n), ValueError, "id"),
    ("passage float", lambda c: c["store"].passage(1.0), TypeError, "id"),
    # ShardedDatastore
    ("sharded empty", lambda c: ShardedDatastore([]), ValueError, "shards"),
    ("sharded not a store", lambda c: ShardedDatastore([object()]), TypeError, "shards\\[0\\]"),
    ("sharded one path", lambda c: ShardedDatastore.open(str(c["store"].root)), ValueError, "paths"),
    ("sharded workers", lambda c: ShardedDatastore([c["store"]], max_workers=0), ValueError, "max_workers"),
    ("sharded arrays dim", lambda c: c["sharded"].search_arrays(_q(c, dim=3)), ValueError, "shape"),
    ("sharded arrays nan", lambda c: c["sharded"].search_arrays(_q(c, fill=np.nan)), ValueError, "finite"),
    ("sharded nprobe 0", lambda c: c["sharded"].search_arrays(_q(c), nprobe=0), ValueError, "nprobe"),
    ("sharded passage", lambda c: c["sharded"].passage(-1), ValueError, "id"),
    # encoders
    ("hashing dim 1", lambda c: HashingEncoder(1), ValueError, "dim"),
    ("hashing dim float", lambda c: HashingEncoder(2.5), TypeError, "dim"),
    ("hashing one str", lambda c: HashingEncoder(8).encode_queries("text"), TypeError, "list of strings"),
    ("hashing non-str", lambda c: HashingEncoder(8).encode_passages([1]), TypeError, "strings"),
    ("lsa dim 0", lambda c: LSAEncoder(0), ValueError, "dim"),
    ("lsa fit empty", lambda c: LSAEncoder(8).fit([]), ValueError, "texts"),
    ("lsa unfitted", lambda c: LSAEncoder(8).encode_queries(["x"]), ValueError, "not fitted"),
    ("st not local", lambda c: SentenceTransformerEncoder(c["tmp"] / "no-model"), ValueError, "local model folder"),
    # Chunker, Decontaminator
    ("chunker words 0", lambda c: Chunker(0), ValueError, "words"),
    ("chunker keep_last", lambda c: Chunker(keep_last=1), TypeError, "keep_last"),
    ("chunker text", lambda c: Chunker().chunk(3), TypeError, "text"),
    ("decon n 0", lambda c: Decontaminator(["q"], n=0), ValueError, "n must"),
    ("decon jaccard", lambda c: Decontaminator(["q"], jaccard=1.5), ValueError, "jaccard"),
    ("decon queries", lambda c: Decontaminator([1]), TypeError, "queries"),
    # prompt and ctxs JSONL
    ("prompt question", lambda c: format_prompt("", []), ValueError, "question"),
    ("prompt k", lambda c: format_prompt("q", [], k=-1), ValueError, "k must"),
    ("prompt hits str", lambda c: format_prompt("q", "passage"), TypeError, "hits"),
    ("prompt hit type", lambda c: format_prompt("q", [3]), TypeError, "hits\\[0\\]"),
    ("prompt template", lambda c: format_prompt("q", [], template="{question}"), ValueError, "template"),
    ("prompt template key", lambda c: format_prompt("q", [], template="{passages}{question}{x}"),
     ValueError, "placeholder"),
    ("prompt max_words", lambda c: format_prompt("q", ["a b"], max_words=0), ValueError, "max_words"),
    ("ctxs lengths", lambda c: to_compactds_jsonl(c["tmp"] / "o.jsonl", [{}], []), ValueError, "result lists"),
    ("ctxs query type", lambda c: to_compactds_jsonl(c["tmp"] / "o.jsonl", ["q"], [[]]), TypeError, "queries\\[0\\]"),
    ("ctxs read missing", lambda c: list(from_compactds_jsonl(c["tmp"] / "none.jsonl")),
     FileNotFoundError, "does not exist"),
    ("ctxs read malformed", lambda c: list(from_compactds_jsonl(c["bad_jsonl"])), ValueError, "ctxs"),
    # evaluation
    ("evaluate ks 0", lambda c: evaluate(c["store"], ["x"], ks=[0]), ValueError, "ks"),
    ("evaluate relevant", lambda c: evaluate(c["store"], ["x"], relevant_docs=[{"a"}, {"b"}]),
     ValueError, "relevant_docs"),
    ("evaluate nprobe", lambda c: evaluate(c["store"], ["x"], nprobe=0), ValueError, "nprobe"),
    ("recall shapes", lambda c: recall_at_k(np.zeros((2, 3)), np.zeros((3, 3))), ValueError, "same number"),
    ("recall 1-d", lambda c: recall_at_k(np.zeros(3), np.zeros((1, 3))), ValueError, "found"),
    ("hit k 0", lambda c: hit_at_k([["a"]], [{"a"}], 0), ValueError, "k must"),
    ("ndcg empty", lambda c: ndcg_at_k([], [], 1), ValueError, "non-empty"),
    # auto_params
    ("auto n 0", lambda c: auto_params(0, 8), ValueError, "n must"),
    ("auto n float", lambda c: auto_params(1.5, 8), TypeError, "n must"),
    ("auto m divides", lambda c: auto_params(1000, 10, m=3), ValueError, "divide"),
    ("auto nbits", lambda c: auto_params(1000, 8, nbits=17), ValueError, "nbits"),
    ("auto nlist", lambda c: auto_params(100, 8, nlist=101), ValueError, "nlist"),
    # server
    ("app store", lambda c: create_app(object()), TypeError, "store"),
    ("app max_batch 0", lambda c: create_app(c["store"], max_batch=0), ValueError, "max_batch"),
    ("app max_k 0", lambda c: create_app(c["store"], max_k=0), ValueError, "max_k"),
    ("bind port", lambda c: bind("127.0.0.1", 70000), ValueError, "port"),
    ("bind port float", lambda c: bind("127.0.0.1", 80.5), TypeError, "port"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_refused_naming_the_argument(ctx, call, error, match):
    with pytest.raises(error, match=match):
        call(ctx)


def test_ray_build_refuses_a_non_builder():
    from iclr26.compactds.ray_build import build_with_ray

    with pytest.raises(TypeError, match="builder"):
        build_with_ray(object())


def test_integer_query_vectors_are_converted_not_truncated(text_store):
    rng = np.random.default_rng(0)
    ints = rng.integers(-5, 6, size=(3, text_store.dim))
    a = text_store.search_arrays(ints, k=5, K=50)
    b = text_store.search_arrays(ints.astype(np.float32), k=5, K=50)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_wrong_dimension_is_a_value_error_under_python_O(text_store, tmp_path):
    """Under ``python -O`` faiss's asserts are gone: the check must not be an assert."""
    code = (
        "import numpy as np\n"
        "from iclr26.compactds import Datastore, ShardedDatastore\n"
        f"s = Datastore.open({str(text_store.root)!r})\n"
        "for store in (s, ShardedDatastore([s])):\n"
        "    for q in (np.ones((2, s.dim - 1), np.float32), np.ones((2, s.dim + 7), np.float32)):\n"
        "        try:\n"
        "            store.search_arrays(q, k=3)\n"
        "        except ValueError as err:\n"
        "            print('ValueError', err)\n"
        "        else:\n"
        "            print('no error')\n"
    )
    run = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 4
    assert all(line.startswith("ValueError") and "shape (n, 64)" in line for line in lines), lines


def test_json_written_for_results_has_no_bare_nan(tmp_path, text_store):
    from iclr26.compactds.datastore import Hit

    out = tmp_path / "ctxs.jsonl"
    to_compactds_jsonl(
        out, [{"query": "q", "score": float("nan")}], [[Hit(1, "a", float("inf"), None)]]
    )
    row = json.loads(out.read_text())
    assert row["score"] is None
    assert row["ctxs"][0]["retrieval score"] is None  # inf -> null, never a bare Infinity
