import math
import warnings

import numpy as np
import pytest
from scipy.stats import spearmanr

from iclr26.refusal_index import (
    ESTIMATORS,
    LatentPropensityModel,
    RefusalIndexWarning,
    disattenuate,
    pearson_to_spearman,
    refusal_index_direct,
    refusal_index_from_rates,
    refusal_index_paired,
    refusal_precision,
    retest_reliability,
)

RATES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)


def test_rates_estimator_on_the_sheppard_case():
    result = refusal_index_from_rates(0.5, 0.5, 0.5 - 0.4, n=1000)  # p11 = 0.4
    rho = math.sin(2 * math.pi * 0.15)
    assert result.rho == pytest.approx(rho, abs=1e-9)
    assert result.ri == pytest.approx(pearson_to_spearman(rho), abs=1e-9)
    assert result.ci[0] < result.ri < result.ci[1]
    assert result.method == "rates"


def test_threshold_invariance_in_the_latent_model():
    model = LatentPropensityModel(20_000, 0.6, 0.4, seed=1)
    rng = np.random.default_rng(2)
    ri, precision = [], []
    for q in RATES:
        s = model.sample(q, rng)
        ri.append(refusal_index_from_rates(*s.rates, n=model.n_items).ri)
        precision.append(refusal_precision(s.refused, s.forced_wrong))
    assert np.std(ri) < 0.02
    assert abs(np.mean(ri) - model.true_ri()) < 0.02
    assert max(precision) - min(precision) > 0.2  # a threshold metric does drift


def test_paired_and_rates_agree_exactly_when_passes_are_consistent():
    s = LatentPropensityModel(3000, 0.5, 0.35, seed=3).sample(0.25, np.random.default_rng(4))
    rates = refusal_index_from_rates(*s.rates, n=3000)
    paired = refusal_index_paired(
        s.refused, ~s.forced_wrong, answered_correct=~s.forced_wrong, ci=None
    )
    assert paired.ri == pytest.approx(rates.ri, abs=1e-12)
    assert paired.warnings == ()


def test_inconsistent_passes_diverge_with_a_warning():
    rng = np.random.default_rng(5)
    s = LatentPropensityModel(3000, 0.5, 0.35, seed=3).sample(0.25, rng)
    answered_correct = ~s.forced_wrong ^ (rng.random(3000) < 0.1)  # 10 % flip between passes
    with pytest.warns(RefusalIndexWarning, match="changed correctness between passes"):
        paired = refusal_index_paired(
            s.refused, ~s.forced_wrong, answered_correct=answered_correct, ci=None
        )
    w = float((~s.refused & ~answered_correct).mean())
    rates = refusal_index_from_rates(s.rates[0], s.rates[1], w, n=3000)
    assert abs(paired.ri - rates.ri) > 0.01


def test_sign_reversed_and_random_refusals():
    model = LatentPropensityModel(5000, 0.7, 0.4, seed=6)
    rng = np.random.default_rng(7)
    s = model.sample(0.3, rng)
    easiest = model.v < np.quantile(model.v, 0.3)  # refuse what it knows best
    with pytest.warns(RefusalIndexWarning, match="continuity"):  # no refused question is wrong
        perverse = refusal_index_paired(easiest, ~s.forced_wrong, ci=None)
    assert perverse.ri < -0.5
    random_refusal = rng.random(5000) < 0.3
    chance = refusal_index_paired(random_refusal, ~s.forced_wrong, ci="delta")
    assert abs(chance.ri) < 3 * chance.se


def test_bootstrap_ci_is_seeded_and_close_to_delta():
    s = LatentPropensityModel(2000, 0.5, 0.4, seed=8).sample(0.3, np.random.default_rng(9))
    a = refusal_index_paired(s.refused, ~s.forced_wrong, seed=1)
    b = refusal_index_paired(s.refused, ~s.forced_wrong, seed=1)
    d = refusal_index_paired(s.refused, ~s.forced_wrong, ci="delta")
    assert a.ci == b.ci
    assert a.ci[0] < a.ri < a.ci[1]
    width_boot, width_delta = a.ci[1] - a.ci[0], d.ci[1] - d.ci[0]
    assert width_boot == pytest.approx(width_delta, rel=0.2)


def test_degenerate_rates_give_nan_with_reason():
    r = refusal_index_from_rates(0.0, 0.4, 0.4)
    assert math.isnan(r.ri)
    assert not r.ok
    assert "refusal rate is 0" in r.reason
    with pytest.warns(RefusalIndexWarning, match="continuity"):
        r = refusal_index_paired([True, True, False], [False, True, True], ci=None)
    assert r.ok
    r = refusal_index_paired([False, False, False], [False, True, True], ci=None)
    assert "refusal rate is 0" in r.reason


def test_infeasible_joint_rate_is_clipped_with_warning_or_refused():
    # w > p_e: more answered-wrong in pass B than wrong overall in pass A -> p11 < 0
    with pytest.warns(RefusalIndexWarning, match="outside the Fréchet bounds"):
        r = refusal_index_from_rates(0.2, 0.3, 0.35, n=100, correction=0)
    assert r.p11 == 0.0
    assert r.ri < 0
    assert math.isnan(refusal_index_from_rates(0.2, 0.3, 0.35, on_infeasible="nan").ri)
    with pytest.raises(ValueError, match="Fréchet"):
        refusal_index_from_rates(0.2, 0.3, 0.35, on_infeasible="raise")


def test_empty_cell_gets_continuity_correction():
    refused = np.array([True] * 10 + [False] * 90)
    correct = np.array([False] * 10 + [True] * 60 + [False] * 30)  # every refusal is wrong
    with pytest.warns(RefusalIndexWarning, match="continuity correction"):
        r = refusal_index_paired(refused, correct, ci="delta")
    assert 0.5 < r.ri < 1.0
    assert math.isfinite(r.se)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert refusal_index_paired(refused, correct, ci=None, correction=0).ri == 1.0


def test_input_validation():
    with pytest.raises(ValueError, match="same length"):
        refusal_index_paired([True, False], [True])
    with pytest.raises(ValueError, match="booleans or 0/1"):
        refusal_index_paired([0.5, 1.0], [True, False])
    with pytest.raises(ValueError, match="finite"):
        refusal_index_paired([np.nan, 1.0], [True, False])
    with pytest.raises(ValueError, match="refusal_rate must be in"):
        refusal_index_from_rates(1.2, 0.3, 0.1)
    with pytest.raises(ValueError, match="cannot exceed the answered share"):
        refusal_index_from_rates(0.8, 0.5, 0.3)
    with pytest.raises(ValueError, match="estimator must be one of"):
        refusal_index_from_rates(0.2, 0.3, 0.1, estimator="copula9")
    with pytest.raises(ValueError, match="ci must be one of"):
        refusal_index_paired([True, False], [True, False], ci="jackknife")


def test_estimator_switch_accepts_a_replacement_formula():
    def phi_estimator(q, pe, p11):
        return (p11 - q * pe) / np.sqrt(q * (1 - q) * pe * (1 - pe))

    r = refusal_index_from_rates(0.5, 0.5, 0.1, estimator=phi_estimator)
    assert r.ri == pytest.approx((0.4 - 0.25) / 0.25)
    assert r.estimator == "phi_estimator"
    assert math.isnan(r.rho)
    assert "tetrachoric" in ESTIMATORS


def test_direct_estimator_is_empirical_spearman():
    rng = np.random.default_rng(0)
    r, e = rng.random(500), rng.random(500)
    e = 0.5 * e + 0.5 * r
    res = refusal_index_direct(r, e)
    assert res.ri == pytest.approx(spearmanr(r, e).statistic)
    assert res.ci[0] < res.ri < res.ci[1]
    samples_r = (rng.random((4, 500)) < r).astype(float)
    samples_e = (rng.random((4, 500)) < e).astype(float)
    k = refusal_index_direct(samples_r, samples_e)
    assert k.ri == pytest.approx(spearmanr(samples_r.mean(0), samples_e.mean(0)).statistic)
    assert "constant" in refusal_index_direct(np.ones(10), e[:10]).reason
    with pytest.raises(ValueError, match="probabilities"):
        refusal_index_direct(r * 2, e)


def test_disattenuation_recovers_latent_correlation_under_noise():
    model = LatentPropensityModel(40_000, 0.6, 0.4, noise_refusal=0.7, noise_error=0.7, seed=11)
    rng = np.random.default_rng(12)
    runs = [model.sample(0.3, rng) for _ in range(2)]
    rho = refusal_index_from_rates(*runs[0].rates, n=model.n_items).rho
    assert pearson_to_spearman(rho) == pytest.approx(model.observable_ri(), abs=0.03)
    rel_r = retest_reliability(runs[0].refused, runs[1].refused)
    rel_e = retest_reliability(runs[0].forced_wrong, runs[1].forced_wrong)
    assert rel_r == pytest.approx(1 / (1 + 0.7**2), abs=0.04)
    assert disattenuate(rho, rel_r, rel_e) == pytest.approx(0.6, abs=0.05)
    with pytest.warns(RefusalIndexWarning, match="clipped"):
        assert disattenuate(0.9, 0.5, 0.5) == 1.0


@pytest.mark.slow
def test_bootstrap_ci_coverage():
    model_rho, covered, reps = 0.5, 0, 200
    rng = np.random.default_rng(13)
    truth = pearson_to_spearman(model_rho)
    for i in range(reps):
        s = LatentPropensityModel(1000, model_rho, 0.4, seed=100 + i).sample(0.3, rng)
        r = refusal_index_paired(s.refused, ~s.forced_wrong, ci_level=0.9, n_boot=500, seed=i)
        covered += r.ci[0] <= truth <= r.ci[1]
    assert 0.85 <= covered / reps <= 0.95


def test_ksample_estimator_is_spearman_of_the_sampled_probabilities():
    from scipy.stats import rankdata

    from iclr26.refusal_index import refusal_index_ksample
    from iclr26.refusal_index.estimators import _count_ranks

    rng = np.random.default_rng(0)
    counts = rng.integers(0, 6, size=(7, 50))
    assert np.array_equal(_count_ranks(counts, 6), rankdata(counts, axis=1))
    r = rng.random(300)
    e = np.clip(r + rng.normal(0, 0.3, 300), 0, 1)
    refused = rng.random((8, 300)) < r
    wrong = rng.random((5, 300)) < e
    res = refusal_index_ksample(refused, wrong, n_boot=300, seed=1)
    expected = spearmanr(refused.mean(axis=0), wrong.mean(axis=0)).statistic
    assert res.ri == pytest.approx(expected, abs=1e-12)
    assert res.method == "ksample"
    assert res.ci[0] < res.ri < res.ci[1]
    assert res == refusal_index_ksample(refused, wrong, n_boot=300, seed=1)  # seeded
    # as K grows the estimate approaches the RI of the definition, Spearman(r, e)
    truth = spearmanr(r, e).statistic
    big = refusal_index_ksample(rng.random((400, 300)) < r, rng.random((400, 300)) < e, ci=None)
    assert abs(big.ri - truth) < 0.03
    assert abs(big.ri - truth) < abs(res.ri - truth)
    # no information: constant refusals give NaN with a reason, not an error
    flat = refusal_index_ksample(np.zeros((3, 300), bool), wrong, ci=None)
    assert math.isnan(flat.ri)
    assert "same estimated refusal" in flat.reason
    # a reversed relationship is negative
    assert refusal_index_ksample(~refused, wrong, ci=None).ri == pytest.approx(-res.ri, abs=1e-12)
