import json

import numpy as np
import pytest

from iclr26.spice import (
    facility_location,
    kcenter_greedy,
    less_cosine,
    random_subset,
    stream_select,
    topk_norm,
    tracin_dot,
)

DATA = [{"id": i, "x": float(i)} for i in range(95)]
FEATS = np.random.default_rng(0).normal(size=(95, 6))


def grad_fn(examples):
    return FEATS[[e["id"] for e in examples]]


def test_stream_selects_budget_per_pool_and_logs_official_fields(tmp_path):
    log = tmp_path / "selected_data.jsonl"
    seen = []
    result = stream_select(
        DATA,
        grad_fn,
        pool_size=20,
        budget=0.1,
        log_path=log,
        on_selected=lambda ex, sel: seen.append(len(ex)),
    )
    assert [len(p.selected) for p in result.pools] == [
        2,
        2,
        2,
        2,
        2,
    ]  # last pool of 15 -> round(1.5) = 2
    assert seen == [2] * 5
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert set(records[0]) == {"step", "epoch", "pool_index", "global_index", "data", "gain"}
    assert [r["global_index"] for r in records] == result.selected
    assert all(DATA[r["global_index"]] == r["data"] for r in records)
    assert result.cumulative_information > 0


def test_stream_resumes_and_replays_to_the_same_selection(tmp_path):
    full = stream_select(DATA, grad_fn, pool_size=20, budget=0.2, seed=3, epochs=2)
    log = tmp_path / "log.jsonl"
    calls = []

    def crashing_grad_fn(examples):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("killed")
        return grad_fn(examples)

    with pytest.raises(RuntimeError):
        stream_select(
            DATA, crashing_grad_fn, pool_size=20, budget=0.2, seed=3, epochs=2, log_path=log
        )
    with log.open("a") as f:
        f.write('{"step": 3, "epoch": 0, "pool_in')  # a pool cut mid-write
    replayed = []
    calls.clear()
    resumed = stream_select(
        DATA, grad_fn, pool_size=20, budget=0.2, seed=3, epochs=2, log_path=log,
        on_selected=lambda ex, sel: replayed.append(sel is None),
    )  # fmt: skip
    assert resumed.selected == full.selected
    assert replayed[:3] == [True, True, True]
    assert sum(p.resumed for p in resumed.pools) == 3
    assert len(log.read_text().splitlines()) == len(full.selected)


def test_stream_selector_choices_and_validation():
    a = stream_select(DATA, grad_fn, pool_size=50, budget=0.1, selector="topk")
    b = stream_select(
        DATA,
        grad_fn,
        pool_size=50,
        budget=0.1,
        selector="greedy",
        selector_kwargs={"mode": "diag_official"},
    )
    assert len(a.selected) == len(b.selected) == 5 + 4
    with pytest.raises(ValueError, match="budget"):
        stream_select(DATA, grad_fn, budget=0.0)
    with pytest.raises(ValueError, match="data must not be empty"):
        stream_select([], grad_fn)
    with pytest.raises(ValueError, match="grad_fn returned"):
        stream_select(DATA, lambda ex: FEATS[:3], pool_size=10)


def test_baselines():
    G = FEATS
    assert sorted(random_subset(95, 10, seed=1)) == sorted(random_subset(95, 10, seed=1))
    assert len(set(random_subset(95, 95).tolist())) == 95
    np.testing.assert_array_equal(topk_norm(G, 3), np.argsort(-np.linalg.norm(G, axis=1))[:3])
    target = G[:2]
    assert sorted(less_cosine(G, target, 2)) == [0, 1]  # each target is its own best match
    assert tracin_dot(G, target, 1)[0] == int(np.argmax(G @ target.mean(axis=0)))
    with pytest.raises(ValueError, match="G_target must have 6 columns"):
        less_cosine(G, np.ones((2, 3)), 2)


def test_kcenter_covers_clusters_and_facility_location_is_greedy_optimal_on_tiny_input():
    rng = np.random.default_rng(2)
    centers = np.array([[10.0, 0], [-10, 0], [0, 10], [0, -10]])
    X = np.concatenate([c + rng.normal(size=(10, 2)) for c in centers])
    picks = kcenter_greedy(X, 4, seed=0)
    assert sorted({int(p) // 10 for p in picks}) == [0, 1, 2, 3]
    fl = facility_location(X, 4)
    assert sorted({int(p) // 10 for p in fl}) == [0, 1, 2, 3]
