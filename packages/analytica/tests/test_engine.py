"""Spec test 8: call counts, bounded concurrency, retries/timeouts, checkpoint resume, cache."""

import asyncio

import pytest

from iclr26.analytica import (
    Analytica,
    CallLedger,
    IncompleteAnalysis,
    LinearSynthesizer,
    MeanSynthesizer,
    Proof,
    Proposition,
    TemplateDecomposer,
    make_spr_world,
)


class Instrumented:
    """A grounder that sleeps, counts calls and the most calls in flight at once."""

    def __init__(self, delay=0.005, fail=(), hang_once=(), value=0.5):
        self.delay = delay
        self.fail = set(fail)
        self.hang_once = set(hang_once)
        self.value = value
        self.calls = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def ground(self, prop):
        self.calls.append(prop.pid)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if prop.pid in self.hang_once:
                self.hang_once.discard(prop.pid)
                await asyncio.sleep(30)
            await asyncio.sleep(self.delay)
            if prop.pid in self.fail:
                raise RuntimeError(f"tool failure on {prop.pid}")
            return Proof(self.value, f"proved {prop.pid}")
        finally:
            self.in_flight -= 1


def world_tree(depth=2, branching=3):
    return make_spr_world(1, depth=depth, branching=branching, seed=0).question_tree(0)


def test_calls_equal_leaves_and_internal_nodes():
    tree = world_tree(3)
    g, s = Instrumented(delay=0), MeanSynthesizer()
    engine = Analytica(None, g, s)
    out = engine.analyze_sync(tree)
    assert sorted(g.calls) == sorted(tree.leaves())
    assert s.calls == len(tree.internal()) == engine.stats.synth_calls
    assert out.root.p_true == pytest.approx(0.5)
    assert engine.ledger.count("ground") == len(tree.leaves())


@pytest.mark.parametrize("limit", [1, 4, 16])
def test_concurrency_limit_is_never_exceeded(limit):
    tree = world_tree(3)  # 27 leaves
    g = Instrumented(delay=0.01)
    engine = Analytica(None, g, MeanSynthesizer(), max_concurrency=limit)
    engine.analyze_sync(tree)
    assert g.max_in_flight == min(limit, 27)
    assert engine.stats.max_in_flight <= limit


def test_timeouts_and_transient_failures_are_retried_and_logged():
    tree = world_tree(2)
    leaves = tree.leaves()
    g = Instrumented(hang_once={leaves[0], leaves[1]})
    engine = Analytica(None, g, MeanSynthesizer(), timeout_s=0.2, retry_backoff=0.0)
    engine.analyze_sync(tree)
    failures = [e for e in engine.ledger.entries if not e.ok]
    assert sorted(e.tag for e in failures) == sorted(leaves[:2])
    assert all(e.error == "timed out" for e in failures)
    assert engine.stats.retries == 2


def test_failure_then_resume_from_checkpoint(tmp_path):
    tree = world_tree(2)
    bad = tree.leaves()[4]
    ledger_path = tmp_path / "ledger.jsonl"
    g1 = Instrumented(fail={bad})
    e1 = Analytica(
        None,
        g1,
        MeanSynthesizer(),
        max_retries=2,
        retry_backoff=0.0,
        checkpoint_dir=tmp_path / "ck",
        ledger=CallLedger(ledger_path),
    )
    with pytest.raises(IncompleteAnalysis) as info:
        e1.analyze_sync(tree)
    assert set(info.value.failed) >= {bad}
    assert g1.calls.count(bad) == 3  # first attempt + 2 retries
    n_entries = len(CallLedger(ledger_path))
    assert n_entries == len(e1.ledger.entries) > 0

    g2 = Instrumented()
    e2 = Analytica(
        None, g2, MeanSynthesizer(), checkpoint_dir=tmp_path / "ck", ledger=CallLedger(ledger_path)
    )
    out = e2.analyze_sync(tree)
    assert g2.calls == [bad]  # every other proof came from the checkpoint
    assert e2.stats.resumed >= len(tree.leaves()) - 1
    assert out.root.p_true == pytest.approx(0.5)
    assert len(CallLedger(ledger_path)) > n_entries  # nothing lost, history kept
    other = Proposition("P0", "A different question", date="2020-01-01")
    with pytest.raises(ValueError, match="another question"):
        Analytica(
            TemplateDecomposer({"sentence": "r", "children": [{"sentence": "a"}]}),
            g2,
            MeanSynthesizer(),
            checkpoint_dir=tmp_path / "ck",
        ).analyze_sync(other)


def test_on_disk_cache_skips_the_grounder(tmp_path):
    tree = world_tree(2)
    g = Instrumented(delay=0)
    Analytica(None, g, MeanSynthesizer(), cache_dir=tmp_path).analyze_sync(tree)
    g2 = Instrumented(delay=0, value=0.9)
    engine = Analytica(None, g2, MeanSynthesizer(), cache_dir=tmp_path)
    out = engine.analyze_sync(tree)
    assert g2.calls == []
    assert engine.stats.cache_hits == len(tree.leaves())
    assert out.root.p_true == pytest.approx(0.5)


def test_decomposer_path_and_linear_rule_storage():
    template = {"sentence": "root", "children": [{"sentence": "a {date}"}, {"sentence": "b"}]}
    rules = {"P0": {"intercept": 0.1, "weights": {"P1": 0.5, "P2": 0.25}}}
    engine = Analytica(
        TemplateDecomposer(template),
        Instrumented(delay=0, value=0.6),
        LinearSynthesizer(rules=rules),
    )
    out = engine.analyze_sync(Proposition("P0", "Will it rain?", date="2024-05-01"))
    assert out.get("P1").sentence == "a 2024-05-01"
    assert out.root.p_true == pytest.approx(0.1 + 0.75 * 0.6)
    assert out.root.synthesis["weights"] == {"P1": 0.5, "P2": 0.25}


def test_engine_validates_its_settings():
    for kw in ({"max_concurrency": 0}, {"max_retries": -1}, {"timeout_s": 0}, {"max_leaves": 1.5}):
        with pytest.raises(ValueError, match="must be"):
            Analytica(None, Instrumented(), MeanSynthesizer(), **kw)
    with pytest.raises(TypeError):
        Analytica(None, Instrumented(), MeanSynthesizer()).analyze_sync("a string")
