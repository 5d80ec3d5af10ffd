"""The HTTP search service (``[serve]`` extra: FastAPI + uvicorn), loopback by default.

Serves one :class:`~iclr26.compactds.Datastore` or a
:class:`~iclr26.compactds.ShardedDatastore`. Endpoints: ``POST /search``, ``GET /passage/{id}``, ``GET /stats``, ``GET /health``. Inputs are
validated (4xx with a message): empty query, too many queries, ``k``/``K``/``nprobe`` out of
bounds, unknown source or rerank mode. Handlers are synchronous and run in the server's thread
pool; faiss searches are read-only and pass ``nprobe`` per call, so concurrent requests are safe.
"""

# No ``from __future__ import annotations`` here: FastAPI must see the request model class itself
# (it is defined inside create_app) to read it from the body.

import logging
from dataclasses import asdict
from typing import Any

from iclr26.compactds.datastore import RERANK_MODES, Datastore
from iclr26.compactds.sharding import ShardedDatastore

__all__ = ["create_app", "serve"]

log = logging.getLogger(__name__)


def create_app(
    store: Datastore | ShardedDatastore,
    *,
    max_batch: int = 64,
    max_k: int = 100,
    max_candidates: int = 10_000,
    max_query_chars: int = 10_000,
) -> Any:
    """A FastAPI app serving ``store``.

    Args:
        store: the opened datastore (its encoder is used for text queries), or a
            :class:`~iclr26.compactds.ShardedDatastore` routing each query to several shards.
        max_batch: most queries per request.
        max_k: largest ``k``; ``max_candidates``: largest ``K``.
        max_query_chars: longest accepted query.
    """
    try:
        from fastapi import FastAPI, HTTPException
        from pydantic import BaseModel, Field, field_validator
    except ImportError as err:
        raise ImportError("the server needs: pip install 'iclr26-compactds[serve]'") from err

    nlist = int(store.nlist)

    class SearchRequest(BaseModel):
        queries: list[str] = Field(min_length=1, max_length=max_batch)
        k: int = Field(3, ge=1, le=max_k)
        K: int = Field(100, ge=1, le=max_candidates)
        nprobe: int | None = Field(None, ge=1, le=nlist)
        rerank: str = "exact"
        sources: list[str] | None = None

        @field_validator("queries")
        @classmethod
        def _non_empty(cls, v: list[str]) -> list[str]:
            for q in v:
                if not q.strip():
                    raise ValueError("queries must be non-empty strings")
                if len(q) > max_query_chars:
                    raise ValueError(f"a query is longer than {max_query_chars} characters")
            return v

        @field_validator("rerank")
        @classmethod
        def _mode(cls, v: str) -> str:
            if v not in ("exact", "none"):
                raise ValueError(f"rerank must be 'exact' or 'none' over HTTP (of {RERANK_MODES})")
            return v

    app = FastAPI(title="iclr26-compactds", description="CompactDS datastore search")

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "n": store.n}

    @app.get("/stats")
    def stats() -> dict[str, Any]:
        return store.stats()

    @app.get("/passage/{pid}")
    def passage(pid: int) -> dict[str, Any]:
        if not 0 <= pid < store.n:
            raise HTTPException(404, f"passage id must be in [0, {store.n - 1}], got {pid}")
        return asdict(store.passage(pid))

    @app.post("/search")
    def search(req: SearchRequest) -> dict[str, Any]:
        if req.k > req.K:
            raise HTTPException(422, f"K (candidates) must be >= k, got K={req.K}, k={req.k}")
        if req.sources is not None:
            unknown = sorted(set(req.sources) - set(store.sources))
            if unknown or not req.sources:
                raise HTTPException(
                    422, f"unknown sources {unknown}; known: {sorted(store.sources)}"
                )
        results = store.search(req.queries, k=req.k, K=req.K, nprobe=req.nprobe, rerank=req.rerank,
                               sources=req.sources)  # fmt: skip
        return {"results": [[asdict(h) for h in hits] for hits in results]}

    return app


def serve(
    store: Datastore | ShardedDatastore, *, host: str = "127.0.0.1", port: int = 8000, **kwargs: Any
) -> None:
    """Run the service with uvicorn until interrupted (loopback by default)."""
    try:
        import uvicorn
    except ImportError as err:
        raise ImportError("the server needs: pip install 'iclr26-compactds[serve]'") from err
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving on %s: the store is reachable from other machines", host)
    uvicorn.run(create_app(store, **kwargs), host=host, port=port, log_level="warning")
