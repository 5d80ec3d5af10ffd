"""Spec test 4: tree validation (official rules plus cycles, two parents, dangling ids, id scheme)."""

import math

import pytest

from iclr26.analytica import Proof, Proposition, PropositionTree, TreeError


def P(pid, children=(), **kw):
    return Proposition(pid, f"sentence {pid}", children=list(children), **kw)


def good():
    return PropositionTree(
        [P("P0", ["P1", "P2"]), P("P1", ["P1.1", "P1.2"]), P("P2"), P("P1.1"), P("P1.2")]
    )


def test_structure_queries():
    t = good()
    assert t.root_id == "P0"
    assert t.leaves() == ["P1.1", "P1.2", "P2"]
    assert t.internal() == ["P1", "P0"]
    assert t.levels() == [["P1"], ["P0"]]
    assert t.ancestors("P1.2") == ["P1", "P0"]
    assert t.depth == 2


@pytest.mark.parametrize(
    ("nodes", "match"),
    [
        ([P("P0", ["P1"]), P("P1"), P("P1")], "used twice"),
        ([P("P0", ["P1"]), P("P1", ["P0"])], "no root"),
        ([P("P0", ["P1"]), P("P1"), P("P2")], "2 roots"),
        ([P("P0", ["P1", "P7"]), P("P1")], "dangling"),
        ([P("P0", ["P1", "P2"]), P("P1", ["P2"]), P("P2")], "two parents"),
        ([P("P0", ["P1"]), P("P1"), P("P2", ["P3"]), P("P3", ["P2"])], "not reachable"),
        ([P("P0", ["P1", "P1"]), P("P1")], "twice"),
        ([P("P0", ["P1.1"]), P("P1.1")], "must look like"),
        ([P("P0", ["P1"]), P("P1", ["P2"]), P("P2")], "must look like"),
        ([P("R", ["P1"]), P("P1")], "root id"),
        ([], "at least one"),
    ],
)
def test_invalid_trees_are_rejected(nodes, match):
    with pytest.raises(TreeError, match=match):
        PropositionTree(nodes)


def test_free_ids_when_not_strict():
    t = PropositionTree([P("q", ["a", "b"]), P("a"), P("b")], strict_ids=False)
    assert t.root_id == "q"


def test_expand_follows_the_official_rules_and_rolls_back():
    t = PropositionTree([P("P0")])
    assert t.expand("P0", {"P1": "x", "P2": "y"}) == ["P1", "P2"]
    with pytest.raises(TreeError, match="not in the tree"):
        t.expand("P9", {"P9.1": "z"})
    with pytest.raises(TreeError, match="already expanded"):
        t.expand("P0", {"P3": "z"})
    with pytest.raises(TreeError, match="already used"):
        t.expand("P1", {"P2": "z"})
    with pytest.raises(TreeError, match="must look like"):
        t.expand("P1", {"P1.1": "ok", "P2.1": "bad"})
    assert len(t) == 3
    assert t.get("P1").children == []
    t.expand("P1", {"P1.1": "a", "P1.2": "b"})
    assert t.leaves() == ["P1.1", "P1.2", "P2"]


def test_json_round_trip_keeps_everything():
    t = good()
    t.get("P2").proof = Proof(0.25, "because", "rates", {"k": 1})
    t.get("P0").synthesis = {"kind": "linear", "intercept": 0.0, "weights": {"P1": 0.5, "P2": 0.5}}
    back = PropositionTree.from_json(t.to_json())
    assert back.to_dict() == t.to_dict()
    with pytest.raises(ValueError, match="does not parse"):
        PropositionTree.from_json("{not json")


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan, math.inf])
def test_truth_values_outside_unit_interval_are_rejected(bad):
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Proof(bad)
    with pytest.raises(TypeError):
        Proof("0.5")


def test_render_shows_values_and_weights():
    t = good()
    for pid in t.leaves():
        t.get(pid).proof = Proof(0.5)
    t.get("P1").proof = Proof(0.5)
    t.get("P0").synthesis = {
        "kind": "linear",
        "intercept": 0.0,
        "weights": {"P1": 0.25, "P2": 0.75},
    }
    text = t.render()
    assert "P2 [0.500] β=+0.75" in text
    assert "P0 [  —  ]" in text
