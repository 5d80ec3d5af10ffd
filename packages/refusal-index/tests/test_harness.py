import json

import numpy as np
import pytest

from iclr26.refusal_index import (
    FORCED_PROMPT,
    REFUSAL_PROMPTS,
    CallableClient,
    Completion,
    Item,
    TwoPassEvaluator,
)

pytestmark = pytest.mark.filterwarnings("ignore::iclr26.refusal_index.RefusalIndexWarning")

ITEMS = [Item(f"q{i}", f"Question {i}?", (f"answer{i}",)) for i in range(40)]


def oracle(known: set[int], truncate: frozenset[int] = frozenset()):
    """A model that knows some answers: forced, it guesses wrong on the rest; allowed, it refuses them."""

    def respond(messages):
        i = int(messages[-1]["content"].split()[1].rstrip("?"))
        if i in truncate:
            return Completion("answer", "length")
        if i in known:
            return f"The answer is answer{i}."
        if messages[0]["content"] == FORCED_PROMPT:
            return "wrong guess"
        return "I don't know." if i % 4 else "wrong guess"  # some overconfident errors

    return CallableClient(respond)


def test_two_pass_run_scores_refusals_errors_and_unscorable():
    known = set(range(0, 40, 2))
    result = TwoPassEvaluator(oracle(known, frozenset({1})), n_boot=200).run(ITEMS)
    assert result.excluded == {"q1": "forced pass: truncated"}
    assert len(result.item_ids) == 39
    refused = [result.refusal[i].label == "refused" for i in result.item_ids]
    assert sum(refused) == sum(1 for i in range(3, 40, 2) if i % 4)
    assert result.ri.refusal_rate == pytest.approx(sum(refused) / 39)
    assert result.ri.error_rate == pytest.approx(19 / 39)
    assert result.ri.ri > 0.9  # it only refuses what it gets wrong
    assert result.peers["refusal_precision"] == 1.0
    assert result.ri_rates.ri == pytest.approx(result.ri.ri, abs=1e-12)
    assert json.dumps(result.to_dict())


def test_log_resumes_without_asking_again(tmp_path):
    log = tmp_path / "log.jsonl"
    calls = []
    base = oracle(set(range(10)))

    def flaky(messages):
        calls.append(messages[-1]["content"])
        if len(calls) == 25 and not log.with_suffix(".crashed").exists():
            log.with_suffix(".crashed").touch()
            raise ConnectionError("server went away")
        return base.complete(messages)

    evaluator = TwoPassEvaluator(CallableClient(flaky), log_path=log, max_concurrency=1, n_boot=100)
    with pytest.raises(ConnectionError):
        evaluator.run(ITEMS)
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(logged) == 24
    with log.open("a") as f:
        f.write('{"item_id": "q39", "pass_na')  # a line cut by the crash
    calls.clear()
    result = evaluator.run(ITEMS)
    assert len(calls) == 80 - 24  # only what is missing is asked
    assert len(result.item_ids) == 40
    calls.clear()
    TwoPassEvaluator(CallableClient(flaky), log_path=log, n_boot=100).run(ITEMS)
    assert calls == []
    # a different refusal prompt is a different experiment: pass B is asked again
    TwoPassEvaluator(CallableClient(flaky), log_path=log, refusal_strength=3, n_boot=100).run(ITEMS)
    assert len(calls) == 40


def test_concurrency_gives_the_same_result_as_sequential():
    a = TwoPassEvaluator(oracle({1, 2, 3, 5, 8, 13, 21, 34}), max_concurrency=1, n_boot=100).run(
        ITEMS
    )
    b = TwoPassEvaluator(oracle({1, 2, 3, 5, 8, 13, 21, 34}), max_concurrency=8, n_boot=100).run(
        ITEMS
    )
    assert a.ri == b.ri


def test_validation():
    with pytest.raises(ValueError, match="item ids must be unique"):
        TwoPassEvaluator(oracle(set())).run([ITEMS[0], ITEMS[0]])
    with pytest.raises(ValueError, match="items must not be empty"):
        TwoPassEvaluator(oracle(set())).run([])
    with pytest.raises(ValueError, match="refusal_strength"):
        TwoPassEvaluator(oracle(set()), refusal_strength=len(REFUSAL_PROMPTS))
    with pytest.raises(TypeError, match="complete"):
        TwoPassEvaluator(object())
    with pytest.raises(ValueError, match="at least one non-empty answer"):
        Item("x", "q?", ())
    with pytest.raises(ValueError, match="no item was scorable"):
        TwoPassEvaluator(CallableClient(lambda m: "")).run(ITEMS[:3])


def test_refusal_prompts_sweep_the_refusal_rate_of_a_prompt_sensitive_model():
    rng = np.random.default_rng(0)
    confidence = {f"Question {i}?": c for i, c in enumerate(rng.random(40))}
    threshold = dict(zip(REFUSAL_PROMPTS, (0.1, 0.3, 0.5, 0.7), strict=True))

    def respond(messages):
        c = confidence[messages[-1]["content"]]
        system = messages[0]["content"]
        return "I don't know" if system in threshold and c < threshold[system] else "answer0"

    rates = [
        TwoPassEvaluator(CallableClient(respond), refusal_strength=s, n_boot=100)
        .run(ITEMS)
        .ri.refusal_rate
        for s in range(4)
    ]
    assert rates == sorted(rates)
    assert rates[-1] - rates[0] > 0.4


def test_k_samples_per_question_give_the_ksample_estimate_and_resume(tmp_path):
    rng = np.random.default_rng(0)
    know = {f"Question {i}?": p for i, p in enumerate(np.linspace(0.05, 0.95, 40))}
    lock = __import__("threading").Lock()

    def sampler(messages):  # knows question i with probability p_i, refuses when it does not
        question = messages[-1]["content"]
        i = int(question.split()[1].rstrip("?"))
        if i == 7:
            with lock:
                if rng.random() < 0.5:
                    return ""  # unscorable now and then: item 7 drops out of the K-sample RI
        with lock:
            knows = rng.random() < know[question]
        if knows:
            return f"answer{i}"
        return "wrong guess" if messages[0]["content"] == FORCED_PROMPT else "I don't know"

    log = tmp_path / "log.jsonl"
    ev = TwoPassEvaluator(CallableClient(sampler), samples=6, log_path=log, n_boot=200)
    result = ev.run(ITEMS)
    assert result.samples == 6
    assert result.to_dict()["calls"] == 2 * 6 * 40
    assert len(log.read_text().splitlines()) == 2 * 6 * 40
    assert result.ksample_excluded >= 1
    assert result.ri_ksample.method == "ksample"
    assert result.ri_ksample.ri > 0.5  # refusals follow the chance of being wrong
    assert result.ri_ksample.ci[0] < result.ri_ksample.ri < result.ri_ksample.ci[1]
    calls = []
    again = TwoPassEvaluator(
        CallableClient(lambda m: calls.append(m) or "x"), samples=6, log_path=log, n_boot=200
    ).run(ITEMS)
    assert calls == []  # everything resumed from the log
    assert again.ri_ksample == result.ri_ksample
