"""The minimal RAG prompt (top-k passages before the question) and the compactds-eval ``ctxs``
JSONL interchange format."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iclr26.compactds.datastore import Hit
from iclr26.shared import check_int, dumps_json, read_jsonl

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
    if max_words is not None:
        max_words = check_int(max_words, "max_words", low=1)
    if (
        not isinstance(template, str)
        or "{passages}" not in template
        or "{question}" not in template
    ):
        raise ValueError("template must be a string containing {passages} and {question}")
    if isinstance(hits, str) or not isinstance(hits, Sequence):
        raise TypeError(f"hits must be a list of Hit or str, got {type(hits).__name__}")
    texts = []
    for i, h in enumerate(list(hits)[:k]):
        if not isinstance(h, str | Hit):
            raise TypeError(f"hits[{i}] must be a Hit or a str, got {type(h).__name__}")
        text = h if isinstance(h, str) else h.text
        if max_words is not None:
            text = " ".join(text.split()[:max_words])
        texts.append(text)
    try:
        return template.format(passages=separator.join(texts), question=question).strip()
    except (KeyError, IndexError) as err:
        raise ValueError(
            f"template has a placeholder other than {{passages}} and {{question}}: {err}"
        ) from None


def to_compactds_jsonl(
    path: str | os.PathLike[str],
    queries: Sequence[dict[str, Any]],
    results: Sequence[Sequence[Hit]],
) -> None:
    """Write retrieval results as compactds-eval JSONL: one line per query with its fields
    (``"query"``, ``"id"``...) and ``ctxs: [{"retrieval text", "retrieval score", ...}]``."""
    if len(queries) != len(results):
        raise ValueError(f"{len(queries)} queries but {len(results)} result lists")
    for i, q in enumerate(queries):
        if not isinstance(q, dict):
            raise TypeError(f"queries[{i}] must be a dict of fields, got {type(q).__name__}")
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, expected a file path")
    # written under a temporary name and renamed: a failure never leaves half a file
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
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
            f.write(dumps_json({**q, "ctxs": ctxs}, indent=None) + "\n")
    os.replace(tmp, path)


def from_compactds_jsonl(
    path: str | os.PathLike[str],
) -> Iterable[tuple[dict[str, Any], list[Hit]]]:
    """Read compactds-eval JSONL back: ``(query_fields, hits)`` per line. Missing ids are -1.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a line is not JSON or has no ``ctxs`` list (file and line named).
    """
    for n, row in enumerate(read_jsonl(path, required=("ctxs",)), 1):
        ctxs = row.pop("ctxs")
        if not isinstance(ctxs, list) or not all(isinstance(c, dict) for c in ctxs):
            raise ValueError(f"{path}: record {n}: 'ctxs' must be a list of objects")
        try:
            hits = [
                Hit(
                    int(c.get("id", -1)),
                    str(c.get("source", "")),
                    float(c.get("retrieval score ann", c.get("retrieval score", 0.0))),
                    float(c["retrieval score"]) if c.get("retrieval score") is not None else None,
                    str(c.get("retrieval text", "")),
                    str(c.get("doc_id", "")),
                )
                for c in ctxs
            ]
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: record {n}: a ctx has a malformed field ({err})") from None
        yield row, hits
