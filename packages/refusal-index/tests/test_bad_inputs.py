"""Every function of the README API table refuses bad input with a ValueError/TypeError naming
the argument: wrong shape, wrong dtype (integers converted exactly or refused, never truncated),
NaN/inf, empty input, out-of-range values."""

import math

import numpy as np
import pytest

import iclr26.refusal_index as ri
from iclr26.refusal_index import (
    AliasGrader,
    CallableClient,
    FactMemorizer,
    Item,
    LatentPropensityModel,
    OpenAICompatibleClient,
    RefusalDetector,
    TwoPassEvaluator,
)

B = np.array([True, False, True, False, True, False])  # six good flags
B2 = np.array([True, True, False, False, True, False])
C = np.array([0.9, 0.2, 0.6, 0.4, 0.8, 0.1])
K = np.array([[1, 0, 1, 0, 1, 0], [1, 1, 0, 0, 1, 0]], dtype=bool)
NAN6 = np.array([0.1, np.nan, 0.3, 0.4, 0.5, 0.6])
INF6 = np.array([0.1, np.inf, 0.3, 0.4, 0.5, 0.6])
STR6 = np.array(list("abcdef"))
EMPTY = np.array([], dtype=bool)

FLAG_FUNCTIONS = [
    ri.refusal_precision,
    ri.refusal_recall,
    ri.refusal_f1,
    ri.refusal_auroc_binary,
    ri.phi_coefficient,
    ri.accuracy_given_attempted,
    ri.simpleqa_f_score,
    ri.reliability,
    ri.peer_metrics,
    ri.retest_reliability,
]
CONFIDENCE_FUNCTIONS = [ri.auroc, ri.ece, ri.brier, ri.aurc]

CASES = [
    # (call, exception, message fragment)
    *[
        case
        for fn in FLAG_FUNCTIONS
        for case in (
            (lambda fn=fn: fn(B, B2[:4]), ValueError, "same length"),
            (lambda fn=fn: fn(B.reshape(2, 3), B2.reshape(2, 3)), ValueError, "1-dimensional"),
            (lambda fn=fn: fn(EMPTY, EMPTY), ValueError, "empty"),
            (lambda fn=fn: fn(NAN6, B2), ValueError, "NaN"),
            (lambda fn=fn: fn(np.array([0, 1, 2, 0, 1, 0]), B2), ValueError, "0/1"),
            (lambda fn=fn: fn(np.array([0.5, 1, 0, 0, 1, 0]), B2), ValueError, "0/1"),
            (lambda fn=fn: fn(STR6, B2), ValueError, "0/1"),
        )
    ],
    *[
        case
        for fn in CONFIDENCE_FUNCTIONS
        for case in (
            (lambda fn=fn: fn(C[:4], B), ValueError, "same length"),
            (lambda fn=fn: fn(C.reshape(2, 3), B.reshape(2, 3)), ValueError, "1-dimensional"),
            (lambda fn=fn: fn(np.array([]), EMPTY), ValueError, "empty"),
            (lambda fn=fn: fn(NAN6, B), ValueError, "NaN"),
            (lambda fn=fn: fn(INF6, B), ValueError, "inf"),
            (lambda fn=fn: fn(STR6, B), TypeError, "real numbers"),
        )
    ],
    (lambda: ri.ece(C * 2, B), ValueError, "confidence must lie in"),
    (lambda: ri.brier(-C, B), ValueError, "confidence must lie in"),
    (lambda: ri.ece(C, B, n_bins=0), ValueError, "n_bins"),
    (lambda: ri.ece(C, B, n_bins=2.5), TypeError, "n_bins"),
    (lambda: ri.ece(C, B, strategy="equal"), ValueError, "strategy"),
    # tetrachoric
    (lambda: ri.bvn_upper(0.0, 0.0, 1.5), ValueError, "rho"),
    (lambda: ri.bvn_upper(np.nan, 0.0, 0.5), ValueError, "a contains NaN"),
    (lambda: ri.bvn_upper("x", 0.0, 0.5), TypeError, "a must be real numbers"),
    (lambda: ri.bvn_density(0.0, np.nan, 0.5), ValueError, "b contains NaN"),
    (lambda: ri.bvn_density(0.0, 0.0, -2.0), ValueError, "rho"),
    (lambda: ri.tetrachoric(1.2, 0.5, 0.3), ValueError, "p_row"),
    (lambda: ri.tetrachoric(0.5, np.nan, 0.3), ValueError, "p_col contains NaN"),
    (lambda: ri.tetrachoric(0.5, 0.5, -0.1), ValueError, "p_11"),
    (lambda: ri.tetrachoric(0.5, 0.5, "a"), TypeError, "p_11"),
    (lambda: ri.pearson_to_spearman(1.5), ValueError, "rho"),
    (lambda: ri.pearson_to_spearman(np.nan), ValueError, "rho contains NaN"),
    (lambda: ri.spearman_to_pearson(-1.1), ValueError, "ri"),
    # estimators
    (lambda: ri.refusal_index_from_rates(1.2, 0.4, 0.1), ValueError, "refusal_rate"),
    (lambda: ri.refusal_index_from_rates(0.3, math.nan, 0.1), ValueError, "forced_error_rate"),
    (lambda: ri.refusal_index_from_rates(0.3, 0.4, -0.1), ValueError, "answered_wrong_rate"),
    (lambda: ri.refusal_index_from_rates(0.3, 0.4, 0.8), ValueError, "answered_wrong_rate"),
    (lambda: ri.refusal_index_from_rates("0.3", 0.4, 0.1), TypeError, "refusal_rate"),
    (lambda: ri.refusal_index_from_rates(0.3, 0.4, 0.1, n=0), ValueError, "n must"),
    (lambda: ri.refusal_index_from_rates(0.3, 0.4, 0.1, n=10.5), TypeError, "n must"),
    (lambda: ri.refusal_index_from_rates(0.3, 0.4, 0.1, ci_level=1.0), ValueError, "ci_level"),
    (lambda: ri.refusal_index_from_rates(0.3, 0.4, 0.1, estimator="x"), ValueError, "estimator"),
    (lambda: ri.refusal_index_paired(B, B2[:5]), ValueError, "same length"),
    (lambda: ri.refusal_index_paired(EMPTY, EMPTY), ValueError, "empty"),
    (lambda: ri.refusal_index_paired(NAN6, B2), ValueError, "NaN"),
    (lambda: ri.refusal_index_paired(B, B2, ci="fisher"), ValueError, "ci"),
    (lambda: ri.refusal_index_paired(B, B2, n_boot=5), ValueError, "n_boot"),
    (lambda: ri.refusal_index_paired(B, B2, answered_correct=B2[:3]), ValueError, "answered"),
    (lambda: ri.refusal_index_direct(C, C[:5]), ValueError, "same length"),
    (lambda: ri.refusal_index_direct(C * 2, C), ValueError, "probabilities"),
    (lambda: ri.refusal_index_direct(NAN6, C), ValueError, "NaN"),
    (lambda: ri.refusal_index_direct(np.array([]), np.array([])), ValueError, "empty"),
    (lambda: ri.refusal_index_direct(STR6, C), TypeError, "refusal_probs"),
    (lambda: ri.refusal_index_direct(C.reshape(1, 2, 3), C), ValueError, "(n,) or (K, n)"),
    (lambda: ri.refusal_index_ksample(B, K), ValueError, "(K, n)"),
    (lambda: ri.refusal_index_ksample(K[:1], K), ValueError, "K >= 2"),
    (lambda: ri.refusal_index_ksample(K, K[:, :4]), ValueError, "same questions"),
    (lambda: ri.refusal_index_ksample(K * 2, K), ValueError, "0/1"),
    (lambda: ri.refusal_index_ksample(K * 0.5, K), ValueError, "0/1"),
    (lambda: ri.refusal_index_ksample(np.where(K, np.nan, 0), K), ValueError, "NaN"),
    (lambda: ri.refusal_index_ksample(K.astype(str), K), TypeError, "refused"),
    (lambda: ri.refusal_index_ksample(np.zeros((2, 0), bool), K), ValueError, "empty"),
    (lambda: ri.refusal_index_ksample(K, K, n_boot=3), ValueError, "n_boot"),
    (lambda: ri.refusal_index_ksample(K, K, ci="delta"), ValueError, "ci"),
    (lambda: ri.refusal_index_ksample(K, K, seed=-1), ValueError, "seed"),
    (lambda: ri.retest_reliability(B, B2[:2]), ValueError, "same length"),
    (lambda: ri.disattenuate(1.5, 0.5, 0.5), ValueError, "rho"),
    (lambda: ri.disattenuate(0.5, 0.0, 0.5), ValueError, "rel_refusal"),
    (lambda: ri.disattenuate(0.5, 0.5, math.nan), ValueError, "rel_error"),
    # simulator and facts
    (lambda: LatentPropensityModel(3, 0.5, 0.4), ValueError, "n_items"),
    (lambda: LatentPropensityModel(100.0, 0.5, 0.4), TypeError, "n_items"),
    (lambda: LatentPropensityModel(100, 1.0, 0.4), ValueError, "rho"),
    (lambda: LatentPropensityModel(100, 0.5, 0.0), ValueError, "error_rate"),
    (lambda: LatentPropensityModel(100, 0.5, 0.4, noise_error=-1), ValueError, "noise_error"),
    (lambda: LatentPropensityModel(100, 0.5, 0.4).refusal_probs(1.0), ValueError, "refusal_rate"),
    (lambda: ri.make_model_zoo(1), ValueError, "n_models"),
    (lambda: ri.make_model_zoo(4, 0), ValueError, "n_datasets"),
    (lambda: ri.load_fact_table(("capital", "flag")), ValueError, "unknown relation"),
    (lambda: ri.load_fact_table("capital"), TypeError, "relations"),
    (lambda: ri.load_fact_table(()), ValueError, "relations"),
    (lambda: FactMemorizer(width=0).fit(None), ValueError, "width"),
    (lambda: FactMemorizer().threshold_for_rate(C, 1.0), ValueError, "refusal_rate"),
    (lambda: FactMemorizer().relation_proba(None, 0), ValueError, "not fitted"),
    # harness, detector, clients
    (lambda: Item("", "q?", ("a",)), ValueError, "non-empty id"),
    (lambda: Item("x", "q?", ("",)), ValueError, "non-empty answer"),
    (lambda: TwoPassEvaluator(object()), TypeError, "complete"),
    (lambda: TwoPassEvaluator(CallableClient(str), refusal_strength=9), ValueError, "refusal_str"),
    (lambda: TwoPassEvaluator(CallableClient(str), max_concurrency=0), ValueError, "max_concur"),
    (lambda: TwoPassEvaluator(CallableClient(str), samples=0), ValueError, "samples"),
    (lambda: TwoPassEvaluator(CallableClient(str), n_boot=1), ValueError, "n_boot"),
    (lambda: TwoPassEvaluator(CallableClient(str)).run([]), ValueError, "items"),
    (lambda: TwoPassEvaluator(CallableClient(str)).run(["q?"]), TypeError, "Item"),
    (lambda: ri.score_passes([Item("a", "q?", ("x",))], {}, {}), ValueError, "no record"),
    (lambda: RefusalDetector(languages=("xx",)), ValueError, "languages"),
    (lambda: OpenAICompatibleClient("localhost:8000", "m"), ValueError, "base_url"),
    (lambda: OpenAICompatibleClient("http://x", ""), ValueError, "model"),
    (lambda: OpenAICompatibleClient("http://x", "m", timeout=0), ValueError, "timeout"),
    (lambda: OpenAICompatibleClient("http://x", "m", max_retries=-1), ValueError, "max_retries"),
    (lambda: OpenAICompatibleClient("http://x", "m", retry_budget=1.5), TypeError, "retry_budget"),
    (lambda: OpenAICompatibleClient("http://x", "m", temperature=-1), ValueError, "temperature"),
    (lambda: OpenAICompatibleClient("http://x", "m", max_tokens=0), ValueError, "max_tokens"),
]


@pytest.mark.parametrize(("call", "exc", "fragment"), CASES)
def test_bad_input_is_refused_naming_the_problem(call, exc, fragment):
    with pytest.raises(exc, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_integer_inputs_are_converted_exactly_not_truncated():
    as_int = B.astype(np.int64)
    assert ri.refusal_precision(as_int, B2.astype(np.int8)) == ri.refusal_precision(B, B2)
    assert ri.bvn_upper(0, 0, 0) == pytest.approx(0.25)
    ks = ri.refusal_index_ksample(K.astype(np.int32), K.astype(np.uint8), ci=None)
    assert ks.ri == ri.refusal_index_ksample(K, K, ci=None).ri
    with pytest.raises(TypeError, match="n_items"):
        LatentPropensityModel(np.float64(100.0), 0.5, 0.4)
    assert ri.ece(np.array([1, 0, 1]), np.array([1, 0, 0])) == pytest.approx(1 / 3)


def test_every_public_name_is_reachable_lazily():
    for name in ri.__all__:
        assert getattr(ri, name) is not None


def test_ksample_client_must_sample():
    with pytest.raises(ValueError, match="temperature is 0"):
        TwoPassEvaluator(OpenAICompatibleClient("http://127.0.0.1:9/v1", "m"), samples=3)
    TwoPassEvaluator(
        OpenAICompatibleClient("http://127.0.0.1:9/v1", "m", temperature=0.7), samples=3
    )
    assert AliasGrader().grade("q", ("Paris",), "It is Paris.") is True
