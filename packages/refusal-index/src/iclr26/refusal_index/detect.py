"""Deciding what a response is: a refusal, an answer (graded right or wrong), or unscorable.

Refusal detection is where real evaluations go wrong (missed declines scored as hallucinations,
empty outputs scored as wrong). :class:`RefusalDetector` is auditable: plain phrase lists per
language that a user can read and extend, an ``unscorable`` class for empty or truncated
output (never "wrong"), and an optional judge that overrides the phrases.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from iclr26.refusal_index.clients import ChatClient

__all__ = [
    "DEFAULT_PHRASES",
    "AliasGrader",
    "Detection",
    "ExactMatchGrader",
    "Grader",
    "JudgeGrader",
    "RefusalDetector",
    "normalize_answer",
]

#: Canonical refusal phrasings per language (matched case- and accent-insensitively).
DEFAULT_PHRASES: dict[str, tuple[str, ...]] = {
    "en": (
        "i don't know", "i do not know", "i dont know", "i'm not sure", "i am not sure",
        "i'm not certain", "i am not certain", "not confident", "no idea", "i cannot answer",
        "i can't answer", "i am unable to", "i'm unable to", "unable to answer", "unable to provide",
        "i cannot provide", "i can't provide", "i don't have enough information",
        "i do not have enough information", "i don't have information", "i do not have information",
        "i don't have access", "cannot determine", "can't determine", "i'd rather not guess",
        "i won't guess", "i cannot say", "i can't say", "not able to answer", "unknown to me",
        "i'm sorry, but i", "i apologize, but i", "i don't have that information", "idk",
    ),
    "de": ("ich weiß es nicht", "ich weiss es nicht", "weiß ich nicht", "keine ahnung",
           "ich bin mir nicht sicher", "kann ich nicht beantworten"),
    "fr": ("je ne sais pas", "je ne suis pas sûr", "je ne suis pas sure", "aucune idée",
           "je ne peux pas répondre", "je l'ignore"),
    "es": ("no lo sé", "no sé", "no estoy seguro", "no estoy segura", "no puedo responder",
           "no tengo idea"),
    "it": ("non lo so", "non sono sicuro", "non sono sicura", "non posso rispondere"),
    "pt": ("não sei", "não tenho certeza", "não posso responder", "não faço ideia"),
    "nl": ("ik weet het niet", "geen idee", "ik ben niet zeker"),
    "ru": ("я не знаю", "не уверен", "не уверена", "не могу ответить"),
    "zh": ("我不知道", "不确定", "无法回答", "我不清楚", "不知道"),
    "ja": ("わかりません", "分かりません", "知りません", "答えられません"),
    "ko": ("모르겠습니다", "잘 모르겠", "모릅니다"),
}  # fmt: skip

# A hedge followed by an answer is an attempt, not a refusal ("I'm not sure, but I think Paris").
_HEDGED_ANSWER = re.compile(
    r"\b(but|however)\b.{0,40}\b(i think|i believe|probably|my best guess|likely)\b"
)
_THINK = re.compile(r"<think>.*?(</think>|$)", flags=re.S | re.I)

Label = Literal["refused", "answered", "unscorable"]


@dataclass(frozen=True)
class Detection:
    """What a response is, and why (``reason`` names the matched phrase or the unscorable cause)."""

    label: Label
    reason: str = ""


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text.casefold()).strip()


class RefusalDetector:
    """Phrase-based refusal detector with an unscorable class and an optional judge.

    Args:
        phrases: language -> phrases; defaults to :data:`DEFAULT_PHRASES`.
        languages: which languages to use (``None`` = all in ``phrases``).
        judge: optional ``judge(question, response) -> "refused" | "answered" | None``; a non-None
            verdict overrides the phrases (e.g. an LLM judge on the user's own endpoint).
    """

    def __init__(
        self,
        phrases: Mapping[str, Sequence[str]] | None = None,
        languages: Sequence[str] | None = None,
        judge: Callable[[str, str], str | None] | None = None,
    ) -> None:
        table = dict(DEFAULT_PHRASES if phrases is None else phrases)
        if languages is not None:
            missing = [lang for lang in languages if lang not in table]
            if missing:
                raise ValueError(f"no phrases for languages {missing}; known: {sorted(table)}")
            table = {lang: table[lang] for lang in languages}
        self.phrases = {lang: tuple(_fold(p) for p in ps) for lang, ps in table.items()}
        self.judge = judge
        words = [re.escape(p) for ps in self.phrases.values() for p in ps]
        # Latin-script phrases must match whole words; CJK phrases have no word boundaries.
        self._pattern = re.compile(
            "|".join(
                rf"(?<!\w){w}(?!\w)" if w[:1].isascii() else w
                for w in sorted(words, key=len, reverse=True)
            )
        )

    def detect(
        self, response: str | None, *, question: str = "", finish_reason: str | None = None
    ) -> Detection:
        """Classify one response.

        Empty output (also after stripping ``<think>`` blocks) and output cut by the token limit
        (``finish_reason == "length"``) are ``unscorable``.
        """
        if response is None or not response.strip():
            return Detection("unscorable", "empty")
        visible = _THINK.sub("", response).strip()
        if not visible:
            return Detection("unscorable", "empty after reasoning")
        if finish_reason == "length":
            return Detection("unscorable", "truncated")
        if self.judge is not None:
            verdict = self.judge(question, visible)
            if verdict in ("refused", "answered"):
                return Detection(verdict, "judge")
            if verdict is not None:
                raise ValueError(
                    f"judge must return 'refused', 'answered' or None, got {verdict!r}"
                )
        folded = _fold(visible)
        match = self._pattern.search(folded)
        if match and not _HEDGED_ANSWER.search(folded[match.end() :]):
            return Detection("refused", match.group(0))
        return Detection("answered")


_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD/SimpleQA-style normalisation: casefold, strip accents, punctuation and articles."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    return re.sub(r"\s+", " ", _ARTICLES.sub(" ", text)).strip()


class Grader(Protocol):
    """Grades an answered response: True correct, False incorrect, None not attempted."""

    def grade(self, question: str, answers: Sequence[str], response: str) -> bool | None: ...


class ExactMatchGrader:
    """Correct iff the normalised response equals a normalised gold answer or alias."""

    def grade(self, question: str, answers: Sequence[str], response: str) -> bool | None:
        got = normalize_answer(_THINK.sub("", response))
        return any(got == normalize_answer(a) for a in answers if a)


class AliasGrader:
    """Correct iff a normalised gold answer or alias appears as whole words in the response
    ("The capital is Paris." matches "Paris"; "Parisian" does not)."""

    def grade(self, question: str, answers: Sequence[str], response: str) -> bool | None:
        got = f" {normalize_answer(_THINK.sub('', response))} "
        return any(f" {normalize_answer(a)} " in got for a in answers if normalize_answer(a))


JUDGE_TEMPLATE = """You grade answers to factual questions.
Question: {question}
Gold answer(s): {answers}
Predicted answer: {response}
Reply with exactly one word: CORRECT if the prediction states a gold answer, INCORRECT if it
states something else, NOT_ATTEMPTED if it declines or does not commit to an answer."""


class JudgeGrader:
    """SimpleQA-style LLM judge on any :class:`ChatClient` (CORRECT / INCORRECT / NOT_ATTEMPTED)."""

    def __init__(self, client: ChatClient, template: str = JUDGE_TEMPLATE) -> None:
        self.client = client
        self.template = template

    def grade(self, question: str, answers: Sequence[str], response: str) -> bool | None:
        prompt = self.template.format(
            question=question, answers=" | ".join(answers), response=response
        )
        verdict = self.client.complete([{"role": "user", "content": prompt}]).text.strip().upper()
        for word, value in (("NOT_ATTEMPTED", None), ("INCORRECT", False), ("CORRECT", True)):
            if word in verdict:
                return value
        raise ValueError(
            f"judge reply is not CORRECT, INCORRECT or NOT_ATTEMPTED: {verdict[:80]!r}"
        )
