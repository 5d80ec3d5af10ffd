"""The HTTP service over a real socket on 127.0.0.1: endpoints, validation, bounded concurrent load."""

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from iclr26.compactds.server import create_app


@pytest.fixture(scope="module")
def server(text_store, serving):
    with serving(create_app(text_store, max_batch=8, max_k=20, max_candidates=500)) as client:
        yield client


def test_health_stats_and_passage(server, text_store):
    assert server.get("/health").json() == {"status": "ok", "n": text_store.n}
    stats = server.get("/stats").json()
    assert stats["n"] == text_store.n
    assert stats["index"]["m"] == 8
    p = server.get("/passage/5").json()
    assert p["text"] == text_store.passage(5).text
    assert server.get(f"/passage/{text_store.n}").status_code == 404


def test_search_matches_the_library(server, text_store, text_corpus):
    qs = [q for q, _ in text_corpus.queries["numpy"][:3]]
    r = server.post("/search", json={"queries": qs, "k": 4, "K": 60, "nprobe": 16})
    assert r.status_code == 200, r.text
    got = [[h["id"] for h in row] for row in r.json()["results"]]
    want = [[h.id for h in row] for row in text_store.search(qs, k=4, K=60, nprobe=16)]
    assert got == want
    only = server.post("/search", json={"queries": qs[:1], "sources": ["pydoc"]}).json()["results"][
        0
    ]
    assert {h["source"] for h in only} == {"pydoc"}


@pytest.mark.parametrize(
    ("body", "needle"),
    [({"queries": []}, "at least 1"), ({"queries": ["  "]}, "non-empty"), ({"queries": ["x"] * 9}, "at most 8"),
     ({"queries": ["x"], "k": 0}, "greater than or equal"), ({"queries": ["x"], "k": 21}, "less than or equal"),
     ({"queries": ["x"], "K": 501}, "less than or equal"), ({"queries": ["x"], "k": 10, "K": 5}, "K (candidates)"),
     ({"queries": ["x"], "nprobe": 0}, "greater than or equal"), ({"queries": ["x"], "rerank": "magic"}, "rerank"),
     ({"queries": ["x"], "k": 2.5}, "valid integer"), ({"queries": ["x"], "k": True}, "valid integer"),
     ({"queries": ["x"], "nprobe": "8"}, "valid integer"), ({"queries": ["x"], "K": None}, "valid integer"),
     ({"queries": ["x"], "sources": ["nope"]}, "unknown sources"), ({"query": "x"}, "queries")],
)  # fmt: skip
def test_bad_requests_get_4xx_with_a_message(server, body, needle):
    r = server.post("/search", json=body)
    assert 400 <= r.status_code < 500
    assert needle in r.text


def test_bounded_concurrent_load_reports_latency(server, text_corpus):
    qs = [q for fam in text_corpus.queries.values() for q, _ in fam][:48]

    def one(q):
        t0 = time.perf_counter()
        r = server.post("/search", json={"queries": [q], "k": 3, "K": 100})
        return r.status_code, time.perf_counter() - t0, r.json()["results"][0][0]["id"]

    serial = [one(q)[2] for q in qs[:8]]
    with ThreadPoolExecutor(8) as pool:
        out = list(pool.map(one, qs))
    assert all(code == 200 for code, _, _ in out)
    assert [top for _, _, top in out[:8]] == serial  # same answers under concurrency
    ms = np.array([dt for _, dt, _ in out]) * 1e3
    p50, p99 = np.percentile(ms, [50, 99])
    print(f"48 requests, 8 concurrent: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    assert p99 < 10_000


@pytest.mark.parametrize("body", ['{"queries": ["x"], "k": NaN}', '{"queries": ["x"], "K": Infinity}',
                                  '{"queries": ["x"], "nprobe": -Infinity}', '{"queries": [NaN]}'])  # fmt: skip
def test_nan_and_infinity_are_a_422_not_a_500(server, body):
    r = server.post("/search", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "NaN" not in r.text
    assert "Infinity" not in r.text
    assert r.json()["detail"]


def test_nprobe_above_nlist_is_capped_as_in_the_library(server, text_store):
    q = "sort an array along an axis"
    r = server.post("/search", json={"queries": [q], "k": 4, "K": 60, "nprobe": 10**6})
    assert r.status_code == 200, r.text
    want = [h.id for h in text_store.search(q, k=4, K=60, nprobe=text_store.nlist)[0]]
    assert [h["id"] for h in r.json()["results"][0]] == want


def test_the_readme_curl_example_works_on_a_small_store(
    tmp_path, serving, clustered, make_vector_builder
):
    store = make_vector_builder(tmp_path / "small", clustered[0][:400]).build()
    assert store.nlist < 32  # the README's "nprobe": 32 is more lists than this store has
    with serving(create_app(store)) as client:
        r = client.post("/search", json={"queries": ["v3"], "k": 3, "K": 100, "nprobe": 32})
        assert r.status_code == 200, r.text
        assert r.json()["results"][0][0]["id"] == 3
