"""The minimal RAG prompt (top-k passages before the question) and the compactds-eval ``ctxs``
JSONL interchange format."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iclr26.compactds.datastore import Hit
from iclr26.shared import check_int

__all__ = ["DEFAULT_TEMPLATE", "format_prompt", "from_compactds_jsonl", "to_compactds_jsonl"]

#: Passages first, then the question (compactds-eval ``augment_method: "simple"``; exact wording
#: of the released template [verify]).
DEFAULT_TEMPLATE = "{passages}\n\n{question}"


def format_prompt(
    question: str,
    hits: Sequence[Hit | str],
    *,
    k: int = 3,
    template: str = DEFAULT_TEMPLATE,
    max_words: int | None = None,
    separator: str = "\n\n",
) -> str:
    """Build the minimal RAG prompt: the top ``k`` passages, then the question.

    Args:
        question: the question (non-empty).
        hits: ranked :class:`Hit` objects or passage strings (best first).
        k: passages used (default 3, CompactDS's ``concate_k``).
        template: contains ``{passages}`` and ``{question}``.
        max_words: truncate each passage to this many words (default: no truncation).
        separator: between passages.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    k = check_int(k, "k", low=0)
    if "{passages}" not in template or "{question}" not in template:
        raise ValueError("template must contain {passages} and {question}")
    texts = []
    for h in list(hits)[:k]:
        text = h if isinstance(h, str) else h.text
        if max_words is not None:
            text = " ".join(text.split()[: check_int(max_words, "max_words", low=1)])
        texts.append(text)
    return template.format(passages=separator.join(texts), question=question).strip()


def to_compactds_jsonl(
    path: str | os.PathLike[str],
    queries: Sequence[dict[str, Any]],
    results: Sequence[Sequence[Hit]],
) -> None:
    """Write retrieval results as compactds-eval JSONL: one line per query with its fields
    (``"query"``, ``"id"``...) and ``ctxs: [{"retrieval text", "retrieval score", ...}]``."""
    if len(queries) != len(results):
        raise ValueError(f"{len(queries)} queries but {len(results)} result lists")
    with Path(path).open("w", encoding="utf-8") as f:
        for q, hits in zip(queries, results, strict=True):
            ctxs = [
                {
                    "retrieval text": h.text,
                    "retrieval score": h.score,
                    "retrieval score ann": h.score_ann,
                    "id": h.id,
                    "source": h.source,
                    "doc_id": h.doc_id,
                }
                for h in hits
            ]
            f.write(json.dumps({**q, "ctxs": ctxs}, ensure_ascii=False) + "\n")


def from_compactds_jsonl(
    path: str | os.PathLike[str],
) -> Iterable[tuple[dict[str, Any], list[Hit]]]:
    """Read compactds-eval JSONL back: ``(query_fields, hits)`` per line. Missing ids are -1."""
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n}: not valid JSON ({err.msg})") from err
            ctxs = row.pop("ctxs", None)
            if not isinstance(ctxs, list):
                raise ValueError(f"{path}:{n}: needs a 'ctxs' list")
            hits = [
                Hit(
                    int(c.get("id", -1)),
                    str(c.get("source", "")),
                    float(c.get("retrieval score ann", c.get("retrieval score", 0.0))),
                    float(c["retrieval score"]) if "retrieval score" in c else None,
                    str(c.get("retrieval text", "")),
                    str(c.get("doc_id", "")),
                )
                for c in ctxs
            ]
            yield row, hits
