import numpy as np
import pytest

from iclr26.compactds import (
    Hit,
    format_prompt,
    from_compactds_jsonl,
    hit_at_k,
    ndcg_at_k,
    recall_at_k,
    to_compactds_jsonl,
)
from iclr26.compactds.evaluation import evaluate, exact_topk

HITS = [Hit(3, "wiki", 0.5, 0.9, "first passage words here", "d1"),
        Hit(7, "news", 0.6, 0.8, "second passage", "d2"),
        Hit(1, "wiki", 0.1, 0.7, "third", "d3"), Hit(2, "wiki", 0.1, 0.6, "fourth", "d4")]  # fmt: skip


def test_prompt_puts_top_k_passages_before_the_question():
    p = format_prompt("Why?", HITS, k=3, max_words=2)
    assert p == "first passage\n\nsecond passage\n\nthird\n\nWhy?"
    assert (
        format_prompt("Q", ["a", "b"], k=1, template="Context: {passages}\nQ: {question}")
        == "Context: a\nQ: Q"
    )
    with pytest.raises(ValueError, match="question"):
        format_prompt(" ", HITS)
    with pytest.raises(ValueError, match="template"):
        format_prompt("Q", HITS, template="{question}")


def test_compactds_eval_jsonl_round_trip(tmp_path):
    path = tmp_path / "r.jsonl"
    to_compactds_jsonl(path, [{"id": "q1", "query": "Why?"}], [HITS])
    ((q, hits),) = list(from_compactds_jsonl(path))
    assert q == {"id": "q1", "query": "Why?"}
    assert hits == HITS
    import json

    ctx = json.loads(path.read_text())["ctxs"][0]
    assert ctx["retrieval text"] == HITS[0].text
    assert ctx["retrieval score"] == HITS[0].score_exact


def test_metrics_closed_forms():
    assert recall_at_k(
        np.array([[1, 2, 3], [4, 5, 6]]), np.array([[3, 2, 9], [7, 8, 9]]), 3
    ) == pytest.approx(1 / 3)
    assert hit_at_k([["a", "b"], ["c", "d"]], [{"b"}, {"x"}], 2) == 0.5
    assert hit_at_k([["a", "b"]], [{"b"}], 1) == 0.0
    assert ndcg_at_k([["x", "a"]], [{"a"}], 2) == pytest.approx(1 / np.log2(3))
    assert ndcg_at_k([["a", "a"]], [{"a"}], 2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same"):
        hit_at_k([["a"]], [], 1)


def test_exact_topk_matches_numpy_across_blocks():
    rng = np.random.default_rng(0)
    v, q = rng.normal(size=(1000, 8)).astype(np.float32), rng.normal(size=(5, 8)).astype(np.float32)
    np.testing.assert_array_equal(
        exact_topk(v, q, 7, block=128), np.argsort(-(q @ v.T), axis=1)[:, :7]
    )


def test_evaluate_reports_recall_hits_latency_and_sizes(text_store, text_corpus):
    qs = text_corpus.queries["pydoc"][:20]
    out = evaluate(
        text_store, [q for q, _ in qs], relevant_docs=[{d} for _, d in qs], ks=(1, 10), K=100
    )
    assert 0.9 <= out["recall@10"] <= 1.0
    assert out["hit@10"] >= 0.5
    assert out["hit@10"] >= out["hit@1"]
    assert out["latency_ms"]["p99"] >= out["latency_ms"]["p50"] > 0
    st = out["stats"]
    assert st["index_ram_bytes"] < st["disk_bytes"]["vectors"]
    filtered = evaluate(text_store, [q for q, _ in qs], sources=["pydoc"], ks=(10,))
    assert filtered["recall@10"] >= 0.9
