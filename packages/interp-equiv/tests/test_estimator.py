"""Spec tests 2 (asymmetry), 3 (type-I and power) and 7 (the official statistic)."""

import math

import numpy as np
import pytest

from iclr26.interp_equiv import (
    equivalence_test,
    permutation_test,
    point_test,
    post_intervention,
    selectivity_matrix,
    similarity_matrix,
)


def _mix(z, rng, width, noise=0.1):
    """A random linear read-out of latents plus noise: one 'implementation'."""
    return z @ rng.standard_normal((z.shape[1], width)) + noise * rng.standard_normal(
        (z.shape[0], width)
    )


def _asymmetry_groups(seed=0, n=300, m=4):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6))
    poor = np.c_[np.sin(2 * x[:, 0]), x[:, 1] ** 2]  # low-dimensional nonlinear function of x
    rich = np.c_[x, poor]  # contains poor linearly
    # each rich implementation also carries private features no other model can predict, so rich
    # models predict each other worse than they predict the poor ones (spec §5.2, lesson 3)
    rich_g = [np.c_[_mix(rich, rng, 16, 0.05), rng.standard_normal((n, 8))] for _ in range(m)]
    return rich_g, [_mix(poor, rng, 16, 0.05) for _ in range(m)]


def test_asymmetry_fixture_and_order_independent_symmetric_test():
    rich, poor = _asymmetry_groups()
    S = similarity_matrix([rich[0], poor[0]])
    assert S[0, 1] > 0.9  # rich predicts poor (containment)
    assert S[1, 0] < 0.6  # poor does not predict rich
    one_rich = equivalence_test(rich, poor, symmetric=False, n_boot=20)
    one_poor = equivalence_test(poor, rich, symmetric=False, n_boot=20)
    assert one_rich.equivalent
    assert not one_poor.equivalent
    for g1, g2 in [(rich, poor), (poor, rich)]:
        res = equivalence_test(g1, g2, n_boot=20)
        assert not res.equivalent
    a, b = equivalence_test(rich, poor, n_boot=20), equivalence_test(poor, rich, n_boot=20)
    assert {a.reject_12, a.reject_21} == {b.reject_12, b.reject_21} == {False, True}


def _calibration_groups(rng, different, n=200, m=4):
    z = rng.standard_normal((n, 4))
    z2 = np.c_[z[:, :2], np.abs(z[:, 2:]) - z[:, :2] ** 2] if different else z
    return [_mix(z, rng, 12) for _ in range(m)], [_mix(z2, rng, 12) for _ in range(m)]


def test_type_one_error_and_power():
    null_rejects, alt_rejects = [], []
    for rep in range(50):
        rng = np.random.default_rng(100 + rep)
        g1, g2 = _calibration_groups(rng, different=False)
        null_rejects.append(not equivalence_test(g1, g2, n_boot=10, seed=rep).equivalent)
        g1, g2 = _calibration_groups(rng, different=True)
        alt_rejects.append(not equivalence_test(g1, g2, n_boot=10, seed=rep).equivalent)
    assert np.mean(null_rejects) <= 0.10
    assert np.mean(alt_rejects) >= 0.80


def _table_measure(table):
    """A similarity looked up by the ids stored in each fixture representation's first cell."""

    def sim(X, Y):
        return table[int(X[0, 0]), int(Y[0, 0])]

    return sim


def _ids(*ids):
    return [np.full((6, 1), float(i)) for i in ids]


def test_point_test_reproduces_the_hand_computed_statistic():
    # groups of 3 with known ρ: within group 1 = 0.9, group 1 -> group 2 = 0.5 except for model 3
    table = {(i, j): 0.9 for i in range(3) for j in range(3)}
    table.update({(i, j): (0.95 if j == 3 else 0.5) for i in range(3) for j in range(3, 6)})
    table.update({(i, j): 0.7 for i in range(3, 6) for j in range(6)})
    sim = _table_measure(table)
    g1, g2 = _ids(0, 1, 2), _ids(3, 4, 5)
    res = point_test(g1, g2, measure=sim, n=20, seed=5)
    k_is_3 = np.isclose(res.alternative, 0.95)
    assert np.all(res.null == 0.9)
    p = float(np.mean(~k_is_3))  # hand count: the null wins unless model 3 was drawn
    assert res.p == pytest.approx(p)
    assert res.reject == (p - 1.96 * math.sqrt(p * (1 - p)) / math.sqrt(20) > 0.5)
    # all alternatives lose: p = 1, the official test rejects; all win: p = 0, it does not
    assert point_test(g1, _ids(4, 5), measure=sim, n=20).reject
    assert not point_test(_ids(3, 4), g1, measure=sim, n=20).reject  # 0.7 vs 0.7: no strict win
    # with replacement a group of one can be tested (the official code allows i == j)
    assert point_test(_ids(0), _ids(4), measure=sim, n=5).p == 1.0
    with pytest.raises(ValueError, match="at least 2"):
        point_test(_ids(0), _ids(4), measure=sim, replace=False)


def test_permutation_test_and_selectivity_grid():
    rng = np.random.default_rng(7)
    z = rng.standard_normal((200, 4))
    za = np.c_[z[:, :2], np.sin(3 * z[:, 2:])]
    groups = {
        "a": [_mix(z, rng, 10) for _ in range(4)],
        "b": [_mix(za, rng, 10) for _ in range(4)],
    }
    res = permutation_test(groups["a"], groups["b"], measure="cka")
    assert res.exhaustive
    assert res.n_perm == math.comb(8, 4)
    assert res.reject
    assert res.p_value <= 2 / 70
    sel = selectivity_matrix(groups, method="symmetric", n_boot=20)
    assert sel.rates[0, 0] <= 0.1
    assert sel.rates[1, 1] <= 0.1
    assert sel.rates[0, 1] >= 0.8
    assert sel.rates[1, 0] >= 0.8
    small = {"a": groups["a"], "tiny": groups["b"][:2]}
    with pytest.warns(UserWarning, match="not comparable"):
        sel = selectivity_matrix(small, method="symmetric", n_boot=5)
    assert np.isnan(sel.rates[1, 1])
    assert np.isfinite(sel.rates[0, 0])


def test_estimator_input_errors():
    rng = np.random.default_rng(0)
    g = [rng.standard_normal((50, 3)) for _ in range(3)]
    with pytest.raises(ValueError, match=r"same number of rows|same inputs"):
        equivalence_test(g, [rng.standard_normal((40, 3))] * 3)
    with pytest.raises(ValueError, match="too few samples"):
        equivalence_test([x[:6] for x in g], [x[:6] for x in g[::-1]])
    with pytest.raises(ValueError, match="NaN"):
        equivalence_test(g, [np.full((50, 3), np.nan)] * 3)
    with pytest.raises(TypeError, match="list of representations"):
        equivalence_test(g[0], g)
    with pytest.raises(ValueError, match="measure"):
        equivalence_test(g, g[::-1], measure="euclid")


def test_post_intervention_counts_trials_where_patching_moved_away():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((120, 3))
    g1 = [_mix(z, rng, 6) for _ in range(3)]
    g2 = [_mix(z, rng, 6) for _ in range(3)]
    assert post_intervention(g1, g1, g2) == 0.0  # nothing moved: never strictly closer
    scrambled = [rng.standard_normal((120, 6)) for _ in range(3)]
    assert post_intervention(g1, scrambled, g2) == 1.0
    with pytest.raises(ValueError, match="pair with G1"):
        post_intervention(g1, scrambled[:2], g2)
