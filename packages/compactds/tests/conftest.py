"""Shared fixtures: no network (only loopback), small stores built once per session."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from iclr26.compactds import Chunker, DatastoreBuilder, HashingEncoder, LSAEncoder
from iclr26.compactds.data import load_corpus
from iclr26.compactds.index import set_threads

set_threads(1)
_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_connect = socket.socket.connect


def _guarded_connect(self, address):
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in _LOOPBACK:
        raise RuntimeError(f"network access in tests is forbidden (tried {address!r})")
    return _connect(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


class VectorEncoder:
    """Maps the text "v<i>" to row i of a fixed matrix: builds stores over given vectors."""

    name = "vectors"

    def __init__(self, vectors: np.ndarray, tag: str = "v") -> None:
        self.vectors = np.asarray(vectors, np.float32)
        self.dim = self.vectors.shape[1]
        self.fingerprint = f"vectors-{tag}-{self.vectors.shape[0]}x{self.dim}"
        self.calls = 0

    def encode_passages(self, texts):
        self.calls += len(texts)
        return self.vectors[[int(t[1:]) for t in texts]]

    encode_queries = encode_passages


def vector_builder(path, vectors, **kw):
    """A builder over two sources "a" (first half) and "b" (second half) of ``vectors``."""
    enc = kw.pop("encoder", None) or VectorEncoder(vectors)
    kw.setdefault("threads", 1)
    b = DatastoreBuilder(path, enc, chunker=Chunker(5), **kw)
    b.add_source("a", [f"v{i}" for i in range(len(vectors) // 2)])
    b.add_source("b", [f"v{i}" for i in range(len(vectors) // 2, len(vectors))])
    return b


@pytest.fixture(scope="session")
def clustered():
    from iclr26.compactds.data import clustered_vectors

    return clustered_vectors(3000, 32, n_queries=50, seed=1)


@pytest.fixture(scope="session")
def text_corpus():
    """pydoc + numpy docstrings (no gensim needed)."""
    return load_corpus(sources=("pydoc", "numpy"))


@pytest.fixture(scope="session")
def lsa(text_corpus):
    texts = [t for docs in text_corpus.sources.values() for _, t in docs]
    return LSAEncoder(64, seed=0).fit(texts)


@pytest.fixture(scope="session")
def hashing():
    return HashingEncoder(64)


@pytest.fixture(scope="session")
def text_store(tmp_path_factory, text_corpus, lsa):
    """Real-text store, 64-word passages, float32 vectors, a deliberately coarse PQ (m=8, 4 bits)."""
    path = tmp_path_factory.mktemp("stores") / "text"
    b = DatastoreBuilder(path, lsa, chunker=Chunker(64), vector_dtype="float32", m=8, nbits=4,
                         threads=1, shard_size=1000)  # fmt: skip
    for name, docs in text_corpus.sources.items():
        b.add_source(name, docs)
    return b.build()


@pytest.fixture(scope="session")
def make_vector_builder():
    """``make_vector_builder(path, vectors, **builder_kwargs)`` -> DatastoreBuilder."""
    return vector_builder


@pytest.fixture(scope="session")
def vector_encoder_cls():
    return VectorEncoder


@contextlib.contextmanager
def _serving(app):
    """Run ``app`` with uvicorn on 127.0.0.1 (a free port) in a thread; yield an httpx client."""
    import httpx
    import uvicorn

    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not srv.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        port = srv.servers[0].sockets[0].getsockname()[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        srv.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def serving():
    """``with serving(app) as client:`` serves an ASGI app over a real loopback socket."""
    return _serving
