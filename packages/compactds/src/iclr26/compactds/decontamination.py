"""Decontamination: drop passages that overlap an evaluation query (13-gram Jaccard > 0.7)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from iclr26.shared import check_int, check_range

__all__ = ["Decontaminator", "ngrams"]

_WORD = re.compile(r"\w+", re.UNICODE)


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """Set of lower-cased word ``n``-grams; a text shorter than ``n`` words gives one n-gram of
    all its words (so short queries can still match)."""
    words = _WORD.findall(text.lower())
    if not words:
        return set()
    if len(words) < n:
        return {tuple(words)}
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


class Decontaminator:
    """Remove passages that leak evaluation queries.

    CompactDS drops a passage when its 13-gram Jaccard similarity with an eval query is above 0.7
    (threshold from a third-party summary [verify]). A pure Jaccard test misses a long passage
    that *contains* a short question verbatim, so a second test (our addition, set
    ``containment=None`` to disable) also drops a passage holding at least ``containment`` of a
    query's n-grams.

    Args:
        queries: the evaluation queries (non-empty strings).
        n: n-gram length in words (default 13).
        jaccard: drop when Jaccard(passage, query) > this (default 0.7).
        containment: drop when |passage ∩ query| / |query| >= this (default 1.0: the whole query
            appears in the passage); ``None`` disables it.
    """

    def __init__(
        self,
        queries: Iterable[str],
        *,
        n: int = 13,
        jaccard: float = 0.7,
        containment: float | None = 1.0,
    ) -> None:
        self.n = check_int(n, "n", low=1)
        self.jaccard = check_range(jaccard, "jaccard", low=0.0, high=1.0)
        self.containment = (
            None
            if containment is None
            else check_range(containment, "containment", low=0.0, high=1.0, low_inclusive=False)
        )
        self._query_grams: list[set[tuple[str, ...]]] = []
        self._index: dict[tuple[str, ...], list[int]] = {}
        self._short: list[str] = []
        for q in queries:
            if not isinstance(q, str):
                raise TypeError(f"queries must be strings, got {type(q).__name__}")
            words = _WORD.findall(q.lower())
            if not words:
                continue
            if len(words) < self.n:  # too short for an n-gram: matched as a phrase
                self._short.append(" " + " ".join(words) + " ")
                continue
            grams = ngrams(q, self.n)
            qi = len(self._query_grams)
            self._query_grams.append(grams)
            for g in grams:
                self._index.setdefault(g, []).append(qi)
        self.removed = 0

    def config(self) -> dict[str, float | int | None]:
        """The settings, as recorded in a store's metadata."""
        return {
            "n": self.n,
            "jaccard": self.jaccard,
            "containment": self.containment,
            "queries": len(self._query_grams) + len(self._short),
        }

    def max_overlap(self, text: str) -> tuple[float, float]:
        """(highest Jaccard, highest containment) of ``text`` against any query.

        Queries shorter than ``n`` words are matched as whole phrases (containment 1 when the
        phrase occurs in ``text``)."""
        words = _WORD.findall(text.lower())
        if self._short:
            padded = " " + " ".join(words) + " "
            for phrase in self._short:
                if phrase in padded:
                    exact = len(phrase) == len(padded)
                    return (1.0 if exact else 0.0), 1.0
        grams = ngrams(text, self.n)
        hits: dict[int, int] = {}
        for g in grams:
            for qi in self._index.get(g, ()):
                hits[qi] = hits.get(qi, 0) + 1
        best_j = best_c = 0.0
        for qi, inter in hits.items():
            q = self._query_grams[qi]
            best_j = max(best_j, inter / (len(q) + len(grams) - inter))
            best_c = max(best_c, inter / len(q))
        return best_j, best_c

    def keep(self, text: str) -> bool:
        """True if ``text`` does not leak any query; counts removals in ``self.removed``."""
        j, c = self.max_overlap(text)
        drop = j > self.jaccard or (self.containment is not None and c >= self.containment)
        self.removed += drop
        return not drop
