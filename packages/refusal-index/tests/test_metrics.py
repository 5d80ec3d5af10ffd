import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve
from sklearn.metrics import (
    brier_score_loss,
    f1_score,
    matthews_corrcoef,
    precision_score,
    recall_score,
    roc_auc_score,
)

from iclr26.refusal_index import (
    accuracy_given_attempted,
    aurc,
    auroc,
    brier,
    ece,
    peer_metrics,
    phi_coefficient,
    refusal_auroc_binary,
    refusal_f1,
    refusal_precision,
    refusal_recall,
    reliability,
    simpleqa_f_score,
)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    n = 3000
    conf = np.round(rng.beta(3, 2, n), 2)  # rounded: plenty of ties
    correct = rng.random(n) < conf
    refused = rng.random(n) < np.where(correct, 0.1, 0.4)
    return refused, ~correct, conf, correct


def test_threshold_metrics_match_scikit_learn(data):
    refused, wrong, _, _ = data
    assert refusal_precision(refused, wrong) == pytest.approx(precision_score(wrong, refused))
    assert refusal_recall(refused, wrong) == pytest.approx(recall_score(wrong, refused))
    assert refusal_f1(refused, wrong) == pytest.approx(f1_score(wrong, refused))
    assert refusal_auroc_binary(refused, wrong) == pytest.approx(roc_auc_score(wrong, refused))
    assert phi_coefficient(refused, wrong) == pytest.approx(matthews_corrcoef(wrong, refused))


def test_confidence_metrics_match_scikit_learn(data):
    _, _, conf, correct = data
    assert auroc(conf, correct) == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)
    assert brier(conf, correct) == pytest.approx(brier_score_loss(correct, conf))


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [5, 10, 15])
def test_ece_matches_calibration_curve(data, strategy, n_bins):
    _, _, conf, correct = data
    conf = conf.copy()
    conf[:5] = 1.0  # the edge case: confidence exactly 1 belongs to the top bin
    conf[5:8] = 0.0
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=n_bins, strategy=strategy)
    if strategy == "uniform":
        edges = np.linspace(0, 1, n_bins + 1)
    else:
        edges = np.percentile(conf, np.linspace(0, 100, n_bins + 1))
    counts = np.bincount(np.searchsorted(edges[1:-1], conf, side="left"), minlength=n_bins)
    counts = counts[counts > 0]
    reference = float(np.sum(counts / conf.size * np.abs(prob_true - prob_pred)))
    assert ece(conf, correct, n_bins=n_bins, strategy=strategy) == pytest.approx(
        reference, abs=1e-12
    )


def test_ece_closed_forms():
    assert ece(np.full(10, 0.7), np.array([1] * 7 + [0] * 3)) == pytest.approx(0.0, abs=1e-12)
    assert ece(np.ones(4), np.zeros(4)) == pytest.approx(1.0)  # conf = 1.0 is not dropped
    with pytest.raises(ValueError, match="confidence must lie in"):
        ece(np.array([1.2]), np.array([True]))


def brute_aurc(conf, correct):
    # average over random tie orders of the stepwise risk-coverage curve
    rng = np.random.default_rng(0)
    vals = []
    for _ in range(2000):
        order = np.lexsort((rng.random(conf.size), -conf))
        err = ~correct[order]
        vals.append(np.mean(np.cumsum(err) / np.arange(1, conf.size + 1)))
    return float(np.mean(vals))


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.1, 0.4, 0.5, 0.9]), st.booleans()), min_size=2, max_size=8
    )
)
def test_aurc_matches_brute_force_with_ties(pairs):
    conf = np.array([p[0] for p in pairs])
    correct = np.array([p[1] for p in pairs])
    assert aurc(conf, correct) == pytest.approx(brute_aurc(conf, correct), abs=0.02)


def test_aurc_without_ties_is_exact():
    conf = np.array([0.9, 0.8, 0.3, 0.2])
    correct = np.array([True, False, True, False])
    assert aurc(conf, correct) == pytest.approx(np.mean([0 / 1, 1 / 2, 1 / 3, 2 / 4]))


def test_simpleqa_scores_closed_form():
    refused = np.array([True, True, False, False, False, False])
    correct = np.array([False, False, True, True, True, False])
    assert accuracy_given_attempted(refused, correct) == pytest.approx(3 / 4)
    overall = 3 / 6
    assert simpleqa_f_score(refused, correct) == pytest.approx(
        2 * overall * 0.75 / (overall + 0.75)
    )
    assert reliability(refused, correct) == pytest.approx(5 / 6)


def test_undefined_metrics_are_nan_not_zero():
    none = np.zeros(5, dtype=bool)
    assert math.isnan(refusal_precision(none, np.ones(5, dtype=bool)))
    assert math.isnan(phi_coefficient(none, np.ones(5, dtype=bool)))
    assert math.isnan(auroc(np.ones(3) * 0.5, np.ones(3, dtype=bool)))
    assert math.isnan(accuracy_given_attempted(np.ones(3, dtype=bool), np.ones(3, dtype=bool)))


def test_peer_metrics_bundle_and_validation(data):
    refused, wrong, conf, _ = data
    out = peer_metrics(refused, wrong, confidence=conf)
    assert set(out) >= {"refusal_precision", "phi", "simpleqa_f", "ece", "aurc", "confidence_auroc"}
    with pytest.raises(ValueError, match="same length"):
        refusal_precision(refused, wrong[:-1])
    with pytest.raises(ValueError, match="booleans or 0/1"):
        phi_coefficient(np.array([2, 0]), np.array([1, 0]))
