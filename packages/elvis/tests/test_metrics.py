import math

import numpy as np
import pytest
import torch

from iclr26.elvis import (
    AMESLite,
    LocalFeatures,
    average_precision,
    fit,
    make_retrieval_set,
    mean_average_precision,
    revisited_ground_truth,
    revisited_map,
)


def test_revisited_map_hand_computed():
    order = np.arange(6)[None]
    pos = np.array([[True, False, True, False, False, False]])
    # standard AP: precision 1 at rank 1 and 2/3 at rank 3
    assert revisited_map(order, pos, ap="standard") == pytest.approx((1 + 2 / 3) / 2)
    # trapezoid: (1 + 1)/2 · 1/2 + (1/2 + 2/3)/2 · 1/2
    assert revisited_map(order, pos) == pytest.approx(0.5 + (0.5 + 2 / 3) / 4)
    # a positive ranked first alone: both definitions give 1
    assert revisited_map(order, np.eye(1, 6, 0, dtype=bool)) == pytest.approx(1.0)


def test_revisited_map_removes_junk():
    order = np.array([[4, 0, 5, 1, 2, 3]])
    pos = np.zeros((1, 6), bool)
    pos[0, [0, 1]] = True
    junk = np.zeros((1, 6), bool)
    junk[0, [4, 5]] = True
    # without junk the positives sit at ranks 2 and 4; removing the junk moves them to 1 and 2
    assert revisited_map(order, pos, junk) == pytest.approx(1.0)
    assert revisited_map(order, pos, junk, ap="standard") == pytest.approx(1.0)
    assert revisited_map(order, pos, ap="standard") == pytest.approx((1 / 2 + 2 / 4) / 2)
    # junk ranked anywhere gives the same value
    order2 = np.array([[0, 1, 2, 3, 4, 5]])
    assert revisited_map(order2, pos, junk) == pytest.approx(1.0)


def test_revisited_map_agrees_with_plain_map_without_junk():
    rng = np.random.default_rng(0)
    labels = rng.uniform(size=(7, 30)) < 0.2
    labels[:, 0] = True
    order = np.argsort(rng.normal(size=(7, 30)), axis=1)
    plain = mean_average_precision(order, labels)
    assert revisited_map(order, labels, ap="standard") == pytest.approx(plain)
    assert revisited_map(order, labels, np.zeros_like(labels), ap="standard") == pytest.approx(
        plain
    )
    # the trapezoid averages the precision before and at each hit: never above the standard AP
    assert revisited_map(order, labels) <= plain + 1e-12
    # queries without a positive are skipped, as in the revisited code
    labels2 = np.vstack([labels, np.zeros((1, 30), bool)])
    order2 = np.vstack([order, order[:1]])
    assert revisited_map(order2, labels2, ap="standard") == pytest.approx(plain)


def test_revisited_ground_truth_protocols():
    rel = np.array([[True, True, True, False], [False, False, True, True]])
    hard = np.array([False, True, True, False])
    pos, junk = revisited_ground_truth(rel, hard, "easy")
    np.testing.assert_array_equal(pos, [[1, 0, 0, 0], [0, 0, 0, 1]])
    np.testing.assert_array_equal(junk, [[0, 1, 1, 0], [0, 0, 1, 0]])
    pos, junk = revisited_ground_truth(rel, hard, "hard")
    np.testing.assert_array_equal(pos, [[0, 1, 1, 0], [0, 0, 1, 0]])
    np.testing.assert_array_equal(junk, [[1, 0, 0, 0], [0, 0, 0, 1]])
    pos, junk = revisited_ground_truth(rel, hard, "medium")
    np.testing.assert_array_equal(pos, rel)
    assert not junk.any()
    order = np.array([[1, 2, 0, 3], [2, 3, 0, 1]])  # hard positives first
    e = revisited_map(order, *revisited_ground_truth(rel, hard, "easy"))
    h = revisited_map(order, *revisited_ground_truth(rel, hard, "hard"))
    assert e == pytest.approx(1.0)
    assert h == pytest.approx(1.0)


def test_revisited_map_bad_input():
    order = np.arange(4)[None]
    pos = np.array([[True, False, False, False]])
    with pytest.raises(ValueError, match="disjoint"):
        revisited_map(order, pos, pos.copy())
    with pytest.raises(TypeError, match="positives must be a bool"):
        revisited_map(order, pos.astype(int))
    with pytest.raises(ValueError, match=r"\(Q, N\)"):
        revisited_map(order, pos[:, :3])
    with pytest.raises(ValueError, match="permutation"):
        revisited_map(np.array([[0, 0, 1, 2]]), pos)
    with pytest.raises(ValueError, match="at least one query"):
        revisited_map(order, np.zeros_like(pos))
    with pytest.raises(ValueError, match="ap must be"):
        revisited_map(order, pos, ap="11-point")
    with pytest.raises(ValueError, match="protocol"):
        revisited_ground_truth(pos, [False] * 4, "extreme")
    with pytest.raises(ValueError, match="hard"):
        revisited_ground_truth(pos, [False] * 3, "easy")
    assert average_precision([True]) == 1.0


def test_benchmark_difficulty_labels_are_balanced_and_seeded():
    a = make_retrieval_set(["coins", "page"], n_pos=3, n_distractors=2, seed=3)
    b = make_retrieval_set(["coins", "page"], n_pos=3, n_distractors=2, seed=3)
    np.testing.assert_array_equal(a.hard, b.hard)
    np.testing.assert_array_equal(a.database[0], b.database[0])
    assert a.hard.shape == (len(a.database),)
    assert not a.hard[~a.relevant.any(0)].any()  # distractors carry no difficulty
    for q in range(len(a.queries)):
        assert 1 <= int((a.relevant[q] & a.hard).sum()) <= 2  # both kinds per query
        assert int((a.relevant[q] & ~a.hard).sum()) >= 1
    pos, junk = a.revisited("easy")
    assert not (pos & a.hard).any()
    assert (junk == (a.relevant & a.hard)).all()
    labels = [make_retrieval_set(["coins"], n_pos=4, seed=s).hard for s in range(3)]
    assert all(int(lab.sum()) == 2 for lab in labels)


def _planted_pairs(n_pairs, seed, n=12, k=6, dim=16):
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n_pairs):
        x = rng.normal(size=(n, dim)).astype(np.float32)
        y = rng.normal(size=(n, dim)).astype(np.float32)
        if i % 2:  # positives: k near-duplicate descriptors
            y[:k] = x[:k] + 0.2 * rng.normal(size=(k, dim))
        pairs.append((LocalFeatures(x), LocalFeatures(y), i % 2))
    return pairs


def test_ames_lite_leaves_ln2_on_planted_matches():
    torch.manual_seed(0)
    pairs = _planted_pairs(400, 0)
    model = AMESLite(16, model_dim=32)
    hist = fit(model, pairs, epochs=10, batch_size=25, lr=3e-3, desc_variable_min=12, seed=0)
    assert np.mean(hist.loss[-16:]) < math.log(2) - 0.05
    assert hist.accuracy[-1] > 0.6
    # (on held-out planted pairs it is still near chance at this budget: it fits, it does not
    # yet generalise; the README reports this)


def test_ames_lite_padding_and_token_cap():
    torch.manual_seed(0)
    model = AMESLite(8, model_dim=16, max_tokens=5)
    q, d = torch.randn(1, 5, 8), torch.randn(1, 7, 8)
    with torch.no_grad():
        base = model.logits(q, d)
        # tokens beyond max_tokens are ignored; masked padding does not change the logit
        d_other_tail = torch.cat([d[:, :5], d[:, 5:] * 9], 1)
        np.testing.assert_allclose(model.logits(q, d_other_tail), base)
        padded = torch.cat([q[:, :3], torch.randn(1, 2, 8)], 1)
        mask = torch.tensor([[False, False, False, True, True]])
        np.testing.assert_allclose(
            model.logits(padded, d, mask, None), model.logits(q[:, :3], d), atol=1e-5
        )
    with pytest.raises(ValueError, match="max_tokens"):
        AMESLite(8, max_tokens=0)
