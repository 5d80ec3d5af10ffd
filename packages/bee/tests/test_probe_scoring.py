"""Tests 1-3: probe invariants, score algebra, knee threshold."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.bee import (
    alignment,
    class_scores,
    concept_class_scores,
    discover,
    drift_scores,
    fit_probe,
    fit_probes,
    knee_threshold,
    make_geometric,
    max_gap,
)
from iclr26.bee.scoring import select_concepts

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def task():
    return make_geometric(600, 200, 200, d=32, rho=0.95, n_nuisance=40, seed=3)


def test_zero_steps_returns_normalised_anchors_and_zero_drift(task):
    anchors = task.anchors * 3.0
    r = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, anchors, max_epochs=0)
    np.testing.assert_allclose(r.W, task.anchors, atol=1e-6)
    np.testing.assert_allclose(r.W0, task.anchors, atol=1e-12)
    assert r.best_epoch == 0
    np.testing.assert_allclose(drift_scores(r.W, r.W0, task.concept_emb), 0, atol=1e-6)


def test_rows_unit_norm_after_every_step_and_probe_moves(task):
    seen = []

    def spy(W):  # called at every step with the current parameter, after the last renorm
        seen.append(W.detach().norm(dim=-1).numpy().copy())
        return W.sum() * 0.0

    r = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors,
                  batch_size=128, max_epochs=3, patience=5, extra_loss=spy)  # fmt: skip
    assert len(seen) == 3 * 5
    np.testing.assert_allclose(np.array(seen), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(r.W, axis=1), 1.0, atol=1e-6)
    assert np.abs(r.W - r.W0).max() > 1e-4


def test_without_renormalisation_rows_leave_the_sphere(task):
    r = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors,
                  renormalize=False, max_epochs=20, patience=20, lr=1e-2)  # fmt: skip
    assert np.abs(np.linalg.norm(r.W, axis=1) - 1).max() > 1e-3


def test_logit_scale_is_frozen_and_changes_the_fit(task):
    kw = {"max_epochs": 3, "patience": 5, "batch_size": 128}
    a = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors, **kw)
    b = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors,
                  logit_scale=10.0, **kw)  # fmt: skip
    assert a.logit_scale == 100.0
    assert b.logit_scale == 10.0
    assert not np.allclose(a.W, b.W)


def test_batched_probes_match_single_probe(task):
    single = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors,
                       max_epochs=4, patience=10)  # fmt: skip
    flipped = 1 - task.train.y
    batch = fit_probes(task.train.X, np.stack([task.train.y, flipped]), task.val.X,
                       np.stack([task.val.y, 1 - task.val.y]), task.anchors,
                       max_epochs=4, patience=10)  # fmt: skip
    np.testing.assert_allclose(batch.W[0], single.W, atol=1e-5)
    assert not np.allclose(batch.W[1], single.W)


def test_batched_probes_with_early_stopping_match_single_fits(task):
    """Probes that stop early leave the batch; the others train on exactly as alone."""
    rng = np.random.default_rng(0)
    Y = np.stack([task.train.y, rng.permutation(task.train.y), task.train.y])
    Yv = np.stack([task.val.y, rng.permutation(task.val.y), task.val.y])
    sw = np.stack([np.ones(len(task.train.y)), np.ones(len(task.train.y)),
                   rng.multinomial(len(task.train.y), np.full(len(task.train.y), 1 / 600))])  # fmt: skip
    kw = {"max_epochs": 40, "patience": 2, "batch_size": 256, "lr": 1e-3}
    batch = fit_probes(task.train.X, Y, task.val.X, Yv, task.anchors, sample_weight=sw, **kw)
    assert len(set(batch.best_epoch.tolist())) > 1  # probes stopped at different epochs
    for b in range(3):
        one = fit_probes(task.train.X, Y[b : b + 1], task.val.X, Yv[b : b + 1], task.anchors,
                         sample_weight=sw[b : b + 1], **kw)  # fmt: skip
        assert one.best_epoch[0] == batch.best_epoch[b]
        np.testing.assert_allclose(batch.W[b], one.W[0], atol=1e-5)


def test_seed_reproducible(task):
    kw = {"max_epochs": 3, "batch_size": 100}
    a = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors, **kw)
    b = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors, **kw)
    np.testing.assert_array_equal(a.W, b.W)


unit_rows = st.integers(2, 5).flatmap(
    lambda C: st.tuples(st.just(C), st.integers(1, 12), st.integers(2, 8), st.integers(0, 10**6))
)


@settings(max_examples=40, deadline=None)
@given(unit_rows)
def test_score_algebra(params):
    C, K, d, seed = params
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((C, d))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    E = rng.standard_normal((K, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    A = alignment(W, E)
    S = class_scores(A)
    assert (S >= 0).all()
    assert (S <= 2 + 1e-12).all()
    np.testing.assert_allclose(S[np.argmin(A, axis=0), np.arange(K)], 0, atol=1e-12)
    np.testing.assert_allclose(S.max(axis=0), max_gap(A), atol=1e-12)
    shift = rng.standard_normal(d)
    np.testing.assert_allclose(class_scores(alignment(W + shift, E)), S, atol=1e-10)
    # brute force
    for c in range(C):
        for k in range(K):
            assert S[c, k] == pytest.approx(W[c] @ E[k] - min(W[j] @ E[k] for j in range(C)))
    for chunk in (1, 3, K + 5):  # fused block-wise path, blocks that do and do not divide K
        np.testing.assert_allclose(concept_class_scores(W, E, chunk=chunk), S, atol=1e-12)
    W0 = rng.standard_normal((C, d))
    D = drift_scores(W, W0, E)
    np.testing.assert_allclose(D, class_scores(alignment(W - W0, E)), atol=1e-12)
    np.testing.assert_allclose(drift_scores(W0, W0, E), 0, atol=1e-12)


def test_knee_on_l_curve_and_official_index():
    curve = np.r_[np.full(10, 1.0), np.full(90, 0.1)]
    value, idx = knee_threshold(curve)
    assert abs(idx - 10) <= 2
    assert idx == 12  # the official rule keeps 13 concepts here (read off the official code)
    assert value == curve[idx]


def test_knee_edge_cases():
    assert knee_threshold([]) == (np.inf, -1)
    line = np.linspace(1, 0, 50)
    assert knee_threshold(line) == (pytest.approx(line[2]), 2)
    for n in range(1, 6):
        s = np.linspace(1, 0.5, n)
        v, i = knee_threshold(s)
        assert i == min(2, n - 1)
        assert v == s[i]
    with pytest.raises(ValueError, match="descending"):
        knee_threshold([0.1, 0.5, 0.2])


def test_knee_finds_a_sharp_drop_inside_noise():
    rng = np.random.default_rng(0)
    curve = np.sort(np.r_[rng.uniform(0.8, 1.0, 6), rng.uniform(0.0, 0.05, 60)])[::-1]
    _, idx = knee_threshold(curve)
    assert 4 <= idx <= 9


def test_selection_modes_and_ties():
    s = np.array([0.5, 0.9, 0.5, 0.0, 0.1])
    assert select_concepts(s, ("top", 3)).tolist() == [1, 0, 2]  # ties: by index
    assert select_concepts(s, 0.5).tolist() == [1, 0, 2]
    with pytest.raises(ValueError, match="top"):
        select_concepts(s, ("best", 2))


def test_discover_returns_scores_and_z(task):
    r = fit_probe(task.train.X, task.train.y, task.val.X, task.val.y, task.anchors)
    z = np.arange(2 * len(task.concepts), dtype=float).reshape(2, -1)
    out = discover(r.W, task.concepts, task.concept_emb, mode="drift", W0=r.W0,
                   class_names=task.class_names, threshold=("top", 5), z=z)  # fmt: skip
    assert list(out) == task.class_names
    first = out["class_1"][0]
    k = task.concepts.index(first.concept)
    assert first.rank == 1
    assert first.z == z[1, k]
    assert [c.score for c in out["class_1"]] == sorted([c.score for c in out["class_1"]])[::-1]
