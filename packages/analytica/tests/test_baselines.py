"""Baselines and the LLM-driven logical / free-form synthesizers."""

import asyncio
import math

import numpy as np
import pytest

from iclr26.analytica import (
    BayesNetAggregator,
    CallableClient,
    LLMSynthesizer,
    LogicalSynthesizer,
    LogisticLeaves,
    Proof,
    Proposition,
    PropositionTree,
    SelfConsistency,
    SimulatedJudge,
    SimulatedLLM,
    Vanilla,
    aggregate,
    logit_mean,
)


def test_logit_mean_by_hand():
    p = [0.9, 0.5, 0.2]
    z = np.mean([math.log(9), 0.0, math.log(0.25)])
    assert logit_mean(p) == pytest.approx(1 / (1 + math.exp(-z)))
    assert logit_mean(p, shrink=0.0) == pytest.approx(0.5)
    assert aggregate(p, "median") == 0.5
    assert aggregate(p, "mean") == pytest.approx(1.6 / 3)


def test_vanilla_and_self_consistency_through_the_llm_path():
    client = CallableClient(SimulatedLLM({"It rains": 0.7}))
    prop = Proposition("P0", "It rains", date="2024-01-01")
    assert asyncio.run(Vanilla(client).estimate(prop)).p_true == 0.7
    sc = SelfConsistency(Vanilla(client), k=4, agg="logit_mean")
    proof = asyncio.run(sc.estimate(prop))
    assert proof.p_true == pytest.approx(0.7)
    assert client.calls == 5


def test_self_consistency_reduces_noise_but_not_bias():
    judge = SimulatedJudge(lambda p: 0.5, bias_sd=0.2, noise_sd=0.1, seed=0, world_seed=1)
    prop = Proposition("P0", "x", date="q1")
    ks = [asyncio.run(SelfConsistency(judge, k=50).estimate(prop)).p_true for _ in range(5)]
    assert np.std(ks) < 0.03  # the noise averages out ...
    assert abs(np.mean(ks) - (0.5 + judge.bias(prop))) < 0.03  # ... the bias stays


def proven():
    t = PropositionTree.from_spec(
        {"sentence": "r", "children": [{"sentence": "a"}, {"sentence": "b"}]}
    )
    t.get("P1").proof, t.get("P2").proof = Proof(0.8), Proof(0.4)
    return t


def test_llm_logical_and_freeform_synthesizers():
    client = CallableClient(SimulatedLLM({}))
    proof = asyncio.run(LogicalSynthesizer(client).synthesize(proven(), "P0"))
    assert proof.p_true == pytest.approx(0.32)
    assert proof.meta["rule"]["formula"] == "P1 AND P2"
    free = asyncio.run(LLMSynthesizer(client).synthesize(proven(), "P0"))
    assert free.p_true == pytest.approx(0.6)


@pytest.mark.slow  # scikit-learn and pgmpy imports alone take ~20 s on a busy 2-core machine
def test_logistic_and_bayes_net_learn_a_clear_signal():
    rng = np.random.default_rng(0)
    tree = PropositionTree.from_spec(
        {"sentence": "r", "children": [{"sentence": "a"}, {"sentence": "b"}]}
    )
    samples, x, y = [], [], []
    for _ in range(300):
        a, b = rng.random(), rng.random()
        out = int(rng.random() < (0.9 if a > 0.5 else 0.1))
        samples.append({"P1": a, "P2": b, "P0": out})
        x.append([a, b])
        y.append(out)
    lr = LogisticLeaves().fit(np.array(x), np.array(y))
    p = lr.predict_proba(np.array([[0.9, 0.5], [0.1, 0.5]]))
    assert p[0] > 0.7 > 0.3 > p[1]
    pytest.importorskip("pgmpy")
    bn = BayesNetAggregator(tree).fit(samples)
    assert bn.predict({"P1": 0.9, "P2": 0.2}) == pytest.approx(0.9, abs=0.07)
    assert bn.predict({"P1": 0.1, "P2": 0.8}) == pytest.approx(0.1, abs=0.07)
