import pytest

from iclr26.refusal_index import (
    AliasGrader,
    Completion,
    ExactMatchGrader,
    JudgeGrader,
    RefusalDetector,
    normalize_answer,
)

REFUSALS = [
    "I don't know.",
    "I don’t know",  # curly apostrophe
    "I'm not sure about that.",
    "Sorry, I cannot answer that question with confidence.",
    "I do not have enough information to answer.",
    "Unfortunately I'm unable to provide that.",
    "IDK",
    "Ich weiß es nicht.",
    "Je ne sais pas.",
    "No lo sé.",
    "Non lo so",
    "Não sei.",
    "Я не знаю.",
    "我不知道。",
    "わかりません",
]

ANSWERS = [
    "Paris",
    "The capital of France is Paris.",
    "I'm not sure, but I think it is Paris.",  # hedged attempt
    "Known as 'Unknownia' in old maps",  # 'unknown' inside a word is no refusal
    "No, it is Lima.",
]


@pytest.mark.parametrize("text", REFUSALS)
def test_refusals_are_detected_in_many_languages(text):
    assert RefusalDetector().detect(text).label == "refused"


@pytest.mark.parametrize("text", ANSWERS)
def test_answers_are_not_refusals(text):
    assert RefusalDetector().detect(text).label == "answered"


@pytest.mark.parametrize(
    ("text", "finish", "reason"),
    [("", None, "empty"), ("   \n", None, "empty"), (None, None, "empty"),
     ("<think>long reasoning that ran out", None, "empty after reasoning"),
     ("The capital is Par", "length", "truncated")],
)  # fmt: skip
def test_empty_and_truncated_outputs_are_unscorable_never_wrong(text, finish, reason):
    d = RefusalDetector().detect(text, finish_reason=finish)
    assert (d.label, d.reason) == ("unscorable", reason)


def test_reasoning_is_stripped_before_matching():
    assert RefusalDetector().detect("<think>maybe Lima</think>I don't know.").label == "refused"


def test_language_selection_and_judge_override():
    en_only = RefusalDetector(languages=["en"])
    assert en_only.detect("Je ne sais pas.").label == "answered"
    with pytest.raises(ValueError, match="no phrases for languages"):
        RefusalDetector(languages=["xx"])
    judged = RefusalDetector(judge=lambda q, r: "refused" if "hmm" in r else None)
    assert judged.detect("hmm, Paris?").label == "refused"
    assert judged.detect("Paris").label == "answered"
    with pytest.raises(ValueError, match="judge must return"):
        RefusalDetector(judge=lambda q, r: "maybe").detect("Paris")


def test_graders():
    assert normalize_answer("  The Côte d'Ivoire! ") == "cote d ivoire"
    assert ExactMatchGrader().grade("q", ["Paris"], "paris.") is True
    assert ExactMatchGrader().grade("q", ["Paris"], "It is Paris") is False
    alias = AliasGrader()
    assert alias.grade("q", ["Paris", "Paname"], "The capital is Paris.") is True
    assert alias.grade("q", ["Paris"], "Parisian food") is False
    assert alias.grade("q", ["United States", "USA"], "the usa") is True


def test_judge_grader_parses_simpleqa_verdicts():
    verdicts = iter(["CORRECT", "INCORRECT", "NOT_ATTEMPTED", "banana"])

    class Judge:
        def complete(self, messages):
            assert "Gold answer(s): Paris" in messages[0]["content"]
            return Completion(next(verdicts))

    grader = JudgeGrader(Judge())
    assert grader.grade("capital?", ["Paris"], "Paris") is True
    assert grader.grade("capital?", ["Paris"], "Lyon") is False
    assert grader.grade("capital?", ["Paris"], "no idea") is None
    with pytest.raises(ValueError, match="judge reply"):
        grader.grade("capital?", ["Paris"], "x")
