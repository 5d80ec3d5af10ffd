"""Spec test 5: what-if sensitivities equal the product of βs; only ancestors are recomputed."""

import asyncio

import numpy as np
import pytest

from iclr26.analytica import (
    LinearSynthesizer,
    Proof,
    PropositionTree,
    make_spr_world,
    recompute,
    resynthesize,
    scenario,
    sensitivities,
    sensitivity,
)


def proven_world(depth=3, seed=0):
    w = make_spr_world(1, depth=depth, branching=3, truth_range=(0.3, 0.7), seed=seed)
    t = w.question_tree(0)
    for j, pid in enumerate(t.leaves()):
        t.get(pid).proof = Proof(float(w.leaf_truth[0, j]))
    values = recompute(_with_rules(t, w))
    for pid, v in values.items():
        t.get(pid).proof = Proof(v)
    return t, w


def _with_rules(t, w):
    for node in w.tree:
        if node.children:
            t.get(node.pid).synthesis = node.synthesis
    return t


def test_finite_difference_equals_product_of_betas():
    t, w = proven_world()
    sens = sensitivities(t)
    weights = w.root_weights()
    for leaf in t.leaves():
        assert sens[leaf] == pytest.approx(weights[leaf], rel=1e-12)
        assert sensitivity(t, leaf, method="finite") == pytest.approx(weights[leaf], rel=1e-9)


def test_scenario_recomputes_ancestors_only_and_leaves_base_untouched():
    t, _ = proven_world()
    before = t.to_json()
    leaf = "P2.3.1"
    sc = scenario(t, {leaf: 0.95})
    assert sc.recomputed == ["P2.3", "P2", "P0"]
    assert t.to_json() == before
    full = recompute(t, {leaf: 0.95})
    assert sc.root == pytest.approx(full["P0"], abs=1e-12)
    assert sc.value("P1") == t.get("P1").p_true  # untouched branch read from the base


def test_resynthesize_calls_the_synthesizer_for_ancestors_only():
    t, w = proven_world()
    rules = {n.pid: n.synthesis for n in w.tree if n.children}
    syn = LinearSynthesizer(rules=rules, abs_intercept_max=None)
    new, order = asyncio.run(resynthesize(t, {"P1.2.2": 0.1}, syn))
    assert order == ["P1.2", "P1", "P0"]
    assert syn.calls == 3
    assert new.root.p_true == pytest.approx(scenario(t, {"P1.2.2": 0.1}).root, abs=1e-12)


def test_logical_sensitivity_is_the_multilinear_derivative():
    t = PropositionTree.from_spec(
        {"sentence": "r", "children": [{"sentence": "a"}, {"sentence": "b"}]}
    )
    t.get("P1").proof, t.get("P2").proof = Proof(0.3), Proof(0.6)
    t.get("P0").synthesis = {"kind": "logical", "formula": "P1 OR P2", "PA": 1.0}
    t.get("P0").proof = Proof(0.3 + 0.6 - 0.18)
    s = sensitivities(t)
    assert s["P1"] == pytest.approx(1 - 0.6)
    assert s["P2"] == pytest.approx(1 - 0.3)


def test_whatif_validates_overrides():
    t, _ = proven_world(depth=1)
    with pytest.raises(KeyError):
        scenario(t, {"P9": 0.5})
    with pytest.raises(ValueError, match="soft truth"):
        scenario(t, {"P1": 1.5})
    with pytest.raises(ValueError, match="non-empty"):
        scenario(t, {})
    assert np.isfinite(scenario(t, {"P1": 0.0}).root)
