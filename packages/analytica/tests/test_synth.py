"""Spec tests 1–3: linear-synthesis arithmetic and rejection rules, logical synthesis vs brute
force, operator precedence; the fitted synthesizer keeps the official bounds."""

import asyncio
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.analytica import (
    FittedLinearSynthesizer,
    LinearSynthesizer,
    LogicalSynthesizer,
    Proof,
    PropositionTree,
    ScriptedClient,
    SynthesisRejected,
    apply_rule,
    check_linear_answer,
    enumerate_probability,
    evaluate_formula,
    parse_formula,
)
from iclr26.analytica.clients import ParseFailure

CHILD = {"P1": 0.8, "P2": 0.3, "P3": 0.5}


def answer(b0=0.05, coefs=None, p=None):
    coefs = coefs or {"P1": 0.5, "P2": -0.2, "P3": 0.3}
    if p is None:
        p = b0 + sum(coefs[c] * CHILD.get(c, 0.0) for c in coefs)
    return {"intercept": b0, "coefficients": coefs, "p_true": p}


def test_linear_recomputes_the_weighted_sum():
    rule = check_linear_answer(answer(), CHILD)
    assert rule["p_true"] == pytest.approx(0.05 + 0.4 - 0.06 + 0.15)
    assert rule["weights"] == {"P1": 0.5, "P2": -0.2, "P3": 0.3}


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (answer(coefs={"P1": 0.5, "P2": 0.2}), "no coefficient"),
        (answer(coefs={"P1": 0.5, "P2": 0.2, "P3": 0.1, "P9": 0.1}), "unknown ids"),
        (answer(b0=0.15), "intercept"),
        (answer(b0=-0.11), "intercept"),
        (answer(coefs={"P1": 1.0, "P2": 0.5, "P3": 0.5}), "outside"),
        (answer(coefs={"P1": -0.5, "P2": -0.2, "P3": 0.1}), "outside \\[0, 1\\]"),
        (answer(p=0.9), "differs"),
        ({"intercept": 0.0, "coefficients": {"P1": "a", "P2": 0, "P3": 0}, "p_true": 0}, "numbers"),
        ({"coefficients": {"P1": math.nan, "P2": 0, "P3": 0}, "p_true": 0}, "finite"),
    ],
)
def test_linear_rejections(bad, match):
    with pytest.raises(SynthesisRejected, match=match):
        check_linear_answer(bad, CHILD)


def test_linear_tolerance_is_002_and_bounds_are_configurable():
    base = answer()
    ok = {**base, "p_true": base["p_true"] + 0.019}
    assert check_linear_answer(ok, CHILD)["p_true"] == pytest.approx(base["p_true"])
    with pytest.raises(SynthesisRejected):
        check_linear_answer({**base, "p_true": base["p_true"] + 0.021}, CHILD)
    big = answer(coefs={"P1": 1.2, "P2": -0.5, "P3": 0.0})
    with pytest.raises(SynthesisRejected, match="outside"):
        check_linear_answer(big, CHILD)
    # coef_bounds=None reproduces the official parser, which does not bound the betas.
    assert check_linear_answer(big, CHILD, coef_bounds=None)["p_true"] == pytest.approx(
        0.05 + 0.96 - 0.15
    )


def test_project_mode_clips_instead_of_rejecting():
    low = answer(coefs={"P1": -0.5, "P2": -0.2, "P3": 0.1})
    rule = check_linear_answer(low, CHILD, mode="project", tol=None)
    assert rule["p_true"] == 0.0


def tree3():
    return PropositionTree.from_spec(
        {"sentence": "root", "children": [{"sentence": "a"}, {"sentence": "b"}, {"sentence": "c"}]}
    )


def proven3():
    t = tree3()
    for pid, v in CHILD.items():
        t.get(pid).proof = Proof(v)
    return t


def test_llm_linear_synthesizer_repairs_then_accepts():
    import json

    bad = json.dumps(answer(b0=0.3))
    good = json.dumps(answer())
    client = ScriptedClient([bad, "no json here", good])
    proof = asyncio.run(LinearSynthesizer(client).synthesize(proven3(), "P0"))
    assert proof.p_true == pytest.approx(answer()["p_true"])
    assert len(client.calls) == 3
    # the second request carries the rejection message of the first answer
    assert "exceeds 0.1" in client.calls[1][-1]["content"]


def test_llm_linear_synthesizer_gives_up_after_max_repairs():
    import json

    client = ScriptedClient([json.dumps(answer(b0=0.3))] * 10)
    with pytest.raises(ParseFailure):
        asyncio.run(LinearSynthesizer(client, max_repairs=2).synthesize(proven3(), "P0"))
    assert len(client.calls) == 3


# ----------------------------------------------------------------------------- logic


@st.composite
def read_once(draw):
    n = draw(st.integers(1, 6))
    names = [f"P{i}" for i in range(1, n + 1)]
    names = draw(st.permutations(names))

    def build(vars_):
        if len(vars_) == 1:
            leaf = vars_[0]
            return f"NOT {leaf}" if draw(st.booleans()) else leaf
        cut = draw(st.integers(1, len(vars_) - 1))
        op = draw(st.sampled_from(["AND", "OR"]))
        expr = f"({build(vars_[:cut])} {op} {build(vars_[cut:])})"
        return f"NOT {expr}" if draw(st.booleans()) else expr

    probs = {v: draw(st.floats(0, 1)) for v in names}
    return build(list(names)), probs


@settings(max_examples=150, deadline=None)
@given(read_once())
def test_logic_equals_enumeration_for_read_once_formulas(case):
    formula, probs = case
    assert evaluate_formula(formula, probs) == pytest.approx(
        enumerate_probability(formula, probs), abs=1e-12
    )


def test_repeated_variable_gap_is_documented():
    p = 0.6
    assert evaluate_formula("P1 AND P1", {"P1": p}) == pytest.approx(p * p)
    assert enumerate_probability("P1 AND P1", {"P1": p}) == pytest.approx(p)


def test_precedence_not_and_or():
    assert parse_formula("NOT a AND b OR c") == (
        "OR",
        ("AND", ("NOT", ("VAR", "a")), ("VAR", "b")),
        ("VAR", "c"),
    )
    probs = {"a": 0.3, "b": 0.6, "c": 0.2}
    for bits in itertools.product((0.0, 1.0), repeat=3):
        world = dict(zip("abc", bits, strict=True))
        expect = float(((not world["a"]) and world["b"]) or world["c"])
        assert evaluate_formula("NOT a AND b OR c", world) == expect
    assert evaluate_formula("NOT NOT a", probs) == pytest.approx(0.3)
    assert evaluate_formula("a IMPLIES b", probs) == pytest.approx(1 - 0.3 + 0.3 * 0.6)


def test_maximal_munch_and_unknown_tokens():
    probs = {"P1": 0.5, "P10": 0.2}
    assert evaluate_formula("P10", probs) == 0.2  # not "P1" followed by "0"
    for bad in ("P1 XOR P10", "P1 & P10", "P1 AND", "(P1 OR P10", "P1 P10", ")"):
        with pytest.raises(ValueError, match=r"token|ends early|missing|unexpected"):
            evaluate_formula(bad, probs)


def test_logical_synthesizer_requires_every_child():
    with pytest.raises(SynthesisRejected, match="missing"):
        LogicalSynthesizer.check("P1 AND P2", CHILD, 1.0)
    proof = asyncio.run(
        LogicalSynthesizer(
            formulas={"P0": "(P1 OR P2) AND NOT P3 AND PA"}, assumption=0.9
        ).synthesize(proven3(), "P0")
    )
    assert proof.p_true == pytest.approx((0.8 + 0.3 - 0.24) * 0.5 * 0.9)
    assert apply_rule(proof.meta["rule"], CHILD)["p_true"] == pytest.approx(proof.p_true)


# ----------------------------------------------------------------------------- fitted
@pytest.mark.parametrize("method", ["bls", "huber"])
def test_fitted_linear_recovers_a_feasible_rule_and_keeps_bounds(method):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(400, 3))
    y = 0.05 + x @ np.array([0.5, -0.2, 0.4]) + rng.normal(0, 0.02, 400)
    b0, beta = FittedLinearSynthesizer(method).fit_xy(x, y)
    assert b0 == pytest.approx(0.05, abs=0.02)
    np.testing.assert_allclose(beta, [0.5, -0.2, 0.4], atol=0.02)
    # an infeasible truth (intercept 0.4) is fitted at the bound, never beyond
    b0, beta = FittedLinearSynthesizer(method).fit_xy(x, 0.4 + 0.1 * x[:, 0])
    assert abs(b0) <= 0.1 + 1e-9
    assert np.all(np.abs(beta) <= 1 + 1e-9)


def test_fitted_tree_rules_apply():
    t = tree3()
    rng = np.random.default_rng(1)
    samples = []
    for _ in range(50):
        v = rng.uniform(size=3)
        samples.append(
            {"P1": v[0], "P2": v[1], "P3": v[2], "P0": 0.3 * v[0] + 0.3 * v[1] + 0.3 * v[2]}
        )
    syn = FittedLinearSynthesizer("bls").fit(t, samples)
    np.testing.assert_allclose(
        list(syn.rules_["P0"]["weights"].values()), [0.3, 0.3, 0.3], atol=1e-6
    )
    proof = asyncio.run(syn.synthesize(proven3(), "P0"))
    assert proof.p_true == pytest.approx(0.3 * 1.6, abs=1e-6)
