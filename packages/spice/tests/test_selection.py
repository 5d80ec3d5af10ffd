import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.spice import (
    FisherState,
    conflict_stats,
    describe,
    dpp_greedy,
    greedy_logdet,
    logdet_utility,
    spice,
    topk,
)


def rand_G(n=12, d=7, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


@pytest.mark.parametrize("space", ["primal", "kernel"])
def test_gains_follow_the_determinant_lemma_at_every_step(space):
    G = rand_G()
    state = FisherState(G, 0.7, space=space)
    for _ in range(6):
        F_S = logdet_utility(G[state.selected], 0.7)
        gains = state.gains_
        for i in range(G.shape[0]):
            if i in state.selected:
                assert gains[i] == -np.inf
            else:
                assert gains[i] == pytest.approx(
                    logdet_utility(G[[*state.selected, i]], 0.7) - F_S, abs=1e-10
                )
        state.add(int(np.argmax(gains)))
    assert state.logdet() == pytest.approx(logdet_utility(G[state.selected], 0.7))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 20), st.integers(1, 12), st.integers(0, 10_000))
def test_primal_and_kernel_pick_the_same_sequence(n, d, seed):
    G = rand_G(n, d, seed)
    k = min(n, 6)
    a = greedy_logdet(G, k, space="primal")
    b = greedy_logdet(G, k, space="kernel")
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.gains, b.gains, atol=1e-9)


def test_orthogonal_gradients_have_modular_gains():
    Q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(8, 8)))
    G = Q * np.array([3.0, 1.0, 2.5, 0.5, 2.0, 1.5, 0.2, 4.0])[:, None]
    sel = greedy_logdet(G, 5, alpha=0.5)
    expected = np.argsort(-np.linalg.norm(G, axis=1))[:5]
    np.testing.assert_array_equal(sel.indices, expected)
    np.testing.assert_allclose(sel.eps, 0.0, atol=1e-12)
    assert sel.logdet == pytest.approx(
        np.sum(np.log1p(0.5 * np.linalg.norm(G[expected], axis=1) ** 2))
    )


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_duplicate_and_antipodal_gain_closed_form(sign):
    g = np.array([1.0, 2.0, -0.5])
    G = np.stack([g, sign * g, np.array([0.0, 0.0, 1e-3])])
    state = FisherState(G, 0.3)
    state.add(0)
    a = 0.3 * g @ g
    assert state.gains_[1] == pytest.approx(math.log((1 + 2 * a) / (1 + a)), abs=1e-12)


def test_greedy_meets_the_one_minus_one_over_e_bound_and_lambda_zero_is_greedy():
    for seed in range(5):
        G = rand_G(12, 5, seed)
        best = max(logdet_utility(G[list(c)]) for c in itertools.combinations(range(12), 4))
        greedy = greedy_logdet(G, 4)
        assert greedy.logdet >= (1 - 1 / math.e) * best
        np.testing.assert_array_equal(spice(G, 4, conflict_penalty=0.0).indices, greedy.indices)


def test_penalty_semantics():
    rng = np.random.default_rng(3)
    G = rng.normal(size=(40, 6))
    sel = spice(G, 10, conflict_penalty=1e6)
    assert sel.penalties[0] == 0.0
    assert np.isnan(sel.cos_to_ref[0])
    chosen = list(sel.indices)
    for t in range(1, 10):
        mean = G[chosen[:t]].mean(axis=0)
        cos = G @ mean / (np.linalg.norm(G, axis=1) * np.linalg.norm(mean))
        remaining = np.setdiff1d(np.arange(40), chosen[:t])
        if (cos[remaining] >= 0).any():
            assert cos[chosen[t]] >= 0
    aligned = spice(np.abs(G), 5, conflict_penalty=10.0)  # all cosines positive: never penalised
    np.testing.assert_array_equal(aligned.penalties, 0.0)
    np.testing.assert_array_equal(aligned.indices, greedy_logdet(np.abs(G), 5).indices)


def test_spice_reference_options_and_relative_scale():
    G = rand_G(30, 5, 4)
    ref = -G[0]
    sel = spice(G, 5, conflict_penalty=100.0, reference=ref)
    cos0 = G[sel.indices[0]] @ ref
    assert cos0 >= 0 or (G @ ref < 0).all()
    assert spice(G, 5, reference="pool_mean").config["reference"] == "pool_mean"
    rel = spice(G, 5, penalty_scale="relative", conflict_penalty=1.0)
    assert rel.config["penalty_scale"] == "relative"


def test_official_diagonal_arithmetic_by_hand():
    G = np.array([[1.0, 2.0, 0.0, -1.0], [0.5, 0.0, 3.0, 1.0], [2.0, -1.0, 1.0, 0.0]])
    alpha = 0.5
    st_off = FisherState(G, alpha, mode="diag_official")
    st_diag = FisherState(G, alpha, mode="diag")
    np.testing.assert_allclose(st_off.gains_, np.log1p(alpha * (G**2).sum(axis=1)))
    st_off.add(0)
    st_diag.add(0)
    den_off = 1 + alpha * G[0] ** 4  # (|g|⊙g)² = g⁴
    den_diag = 1 + alpha * G[0] ** 2
    for state, den in ((st_off, den_off), (st_diag, den_diag)):
        expected = np.log1p(alpha * (G[1:] ** 2 / den).sum(axis=1))
        np.testing.assert_allclose(state.gains_[1:], expected, rtol=1e-12)


def test_topk_is_the_official_norm_ranking():
    G = rand_G(20, 4, 5)
    sel = topk(G, 6, alpha=2.0)
    np.testing.assert_array_equal(sel.indices, np.argsort(-np.log1p(2.0 * (G**2).sum(1)))[:6])


def test_halflife_rule():
    G = rand_G(30, 10, 6)
    assert not greedy_logdet(G, 10, halflife=0.0).stopped_early
    assert len(greedy_logdet(G, 10, halflife=1.0)) == 1
    sizes = [len(greedy_logdet(G, 10, halflife=t)) for t in (0.9, 0.7, 0.5, 0.3, 0.1)]
    assert sizes == sorted(sizes)
    assert len(topk(G, 10, halflife=1.0)) == 1
    assert len(topk(G, 10, halflife=0.0)) == 10


def test_permutation_and_scale_invariance():
    G = rand_G(25, 6, 7)
    perm = np.random.default_rng(8).permutation(25)
    a = spice(G, 8, conflict_penalty=0.3)
    b = spice(G[perm], 8, conflict_penalty=0.3)
    np.testing.assert_array_equal(perm[b.indices], a.indices)
    c = greedy_logdet(3.0 * G, 8, alpha=1.0 / 9.0)
    np.testing.assert_array_equal(c.indices, greedy_logdet(G, 8).indices)


def test_near_duplicates_never_give_nan_or_negative_gains():
    rng = np.random.default_rng(9)
    base = rng.normal(size=(5, 50))
    G = np.repeat(base, 20, axis=0) + 1e-12 * rng.normal(size=(100, 50))
    for space in ("primal", "kernel"):
        sel = greedy_logdet(G * 1e4, 30, space=space)
        assert np.isfinite(sel.gains).all()
        assert (sel.gains >= 0).all()
        assert len(set(sel.indices.tolist())) == 30


def test_dpp_greedy_and_describe_agree_with_exact_greedy():
    G = rand_G(40, 8, 10)
    greedy = greedy_logdet(G, 7)
    np.testing.assert_array_equal(dpp_greedy(G, 7), greedy.indices)
    d = describe(G, greedy.indices)
    np.testing.assert_allclose(d.gains, greedy.gains, atol=1e-10)
    assert d.logdet == pytest.approx(greedy.logdet)


def test_conflict_stats():
    G = np.array([[1.0, 0.1], [1.0, -0.1], [-0.2, 0.0]])  # mean (0.6, 0): the last is antipodal
    s = conflict_stats(G, [0, 1, 2])
    assert s["n_conflicts"] == 1
    assert s["conflict_ratio"] == pytest.approx(1 / 3)
    assert s["conflict_mean"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [(lambda: greedy_logdet(rand_G(5, 3), 6), ValueError, "larger than the pool"),
     (lambda: greedy_logdet(np.zeros((0, 3)), 1), ValueError, "must not be empty"),
     (lambda: spice(np.array([[np.nan, 1.0]]), 1), ValueError, "finite"),
     (lambda: greedy_logdet(np.ones(5), 1), ValueError, "2-dimensional"),
     (lambda: greedy_logdet(rand_G(), 3, alpha=-1.0), ValueError, "alpha"),
     (lambda: spice(rand_G(), 3, reference=np.ones(3)), ValueError, "reference must be"),
     (lambda: greedy_logdet(rand_G(), 3, mode="full"), ValueError, "mode must be one of"),
     (lambda: FisherState(rand_G()).add(99), ValueError, "outside the pool")],
)  # fmt: skip
def test_bad_input_is_rejected_clearly(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_torch_input_is_accepted():
    torch = pytest.importorskip("torch")
    G = rand_G(10, 4)
    np.testing.assert_array_equal(
        greedy_logdet(torch.tensor(G), 3).indices, greedy_logdet(G, 3).indices
    )
