"""Word chunking of documents into passages (CompactDS §3: 256 whitespace words, keep the tail)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from iclr26.shared import check_int

__all__ = ["Chunker", "Passage"]


@dataclass(frozen=True)
class Passage:
    """One retrievable unit of a datastore.

    Attributes:
        id: global passage id (row of the vector file, id in the ANN index).
        source: name of the source the passage came from (``"wiki"``, ``"pydoc"``...).
        doc_id: id of the document it was cut from.
        text: the passage text (whitespace-normalised words joined by single spaces).
    """

    id: int
    source: str
    doc_id: str
    text: str


class Chunker:
    """Split text on whitespace into chunks of ``words`` words.

    CompactDS (``split_data_into_chunks``, ``chunk_size: 256``, ``keep_last_chunk: true``) cuts
    256-word chunks and keeps the shorter final one. ``min_words`` drops chunks shorter than that
    (the optional ``min_chunk_sz``; 0 keeps all, the released default [verify]).

    Args:
        words: words per chunk (default 256, the paper's value).
        min_words: drop chunks with fewer words (default 0).
        keep_last: keep the shorter final chunk of a document (default True).
    """

    def __init__(self, words: int = 256, *, min_words: int = 0, keep_last: bool = True) -> None:
        self.words = check_int(words, "words", low=1)
        self.min_words = check_int(min_words, "min_words", low=0)
        if not isinstance(keep_last, bool):
            raise TypeError(f"keep_last must be a bool, got {type(keep_last).__name__}")
        self.keep_last = keep_last

    def config(self) -> dict[str, int | bool]:
        """The settings, as recorded in a store's metadata."""
        return {"words": self.words, "min_words": self.min_words, "keep_last": self.keep_last}

    def chunk(self, text: str) -> list[str]:
        """Chunks of one document, in order. Word count is preserved when ``keep_last``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        tokens = text.split()
        out = []
        for start in range(0, len(tokens), self.words):
            piece = tokens[start : start + self.words]
            if len(piece) < self.words and not self.keep_last:
                break
            if len(piece) < max(self.min_words, 1):
                continue
            out.append(" ".join(piece))
        return out

    def chunk_documents(self, docs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
        """``(doc_id, chunk_text)`` for every chunk of every ``(doc_id, text)`` document."""
        for doc_id, text in docs:
            for piece in self.chunk(text):
                yield doc_id, piece
