"""The HTTP search service (``[serve]`` extra: FastAPI + uvicorn), loopback by default.

Serves one :class:`~iclr26.compactds.Datastore` or a
:class:`~iclr26.compactds.ShardedDatastore`. Endpoints: ``POST /search``, ``GET /passage/{id}``,
``GET /stats``, ``GET /health``. Inputs are validated (422 with a message): empty query, too
many queries, ``k``/``K`` out of bounds or not integers (``NaN``, ``3.5``, ``true``), ``nprobe``
below 1, unknown source or rerank mode. ``nprobe`` follows the one rule of the library and the
command line (:func:`~iclr26.compactds.datastore.resolve_nprobe`): above the store's ``nlist`` it
is capped at ``nlist``. Handlers are synchronous and run in the server's thread pool; faiss
searches are read-only and pass ``nprobe`` per call, so concurrent requests are safe.
"""

# No ``from __future__ import annotations`` here: FastAPI must see the request model class itself
# (it is defined inside create_app) to read it from the body.

import logging
import socket
from dataclasses import asdict
from typing import Annotated, Any

from iclr26.compactds.datastore import RERANK_MODES, Datastore
from iclr26.compactds.sharding import ShardedDatastore
from iclr26.shared import check_int, import_optional, to_jsonable

__all__ = ["bind", "create_app", "serve", "url_of"]

log = logging.getLogger(__name__)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _need(module: str) -> Any:
    return import_optional(module, dist="iclr26-compactds", extra="serve", purpose="the server")


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
        max_batch: most queries per request (>= 1).
        max_k: largest ``k``; ``max_candidates``: largest ``K`` (both >= 1).
        max_query_chars: longest accepted query (>= 1).

    Raises:
        ValueError: a bound below 1, or a store whose encoder cannot be rebuilt (pass one to
            :meth:`Datastore.open`): the service takes text queries.
    """
    if not isinstance(store, Datastore | ShardedDatastore):
        raise TypeError(
            f"store must be a Datastore or ShardedDatastore, got {type(store).__name__}"
        )
    max_batch = check_int(max_batch, "max_batch", low=1)
    max_k = check_int(max_k, "max_k", low=1)
    max_candidates = check_int(max_candidates, "max_candidates", low=1)
    max_query_chars = check_int(max_query_chars, "max_query_chars", low=1)
    store.encoder  # noqa: B018 -- text queries need it: load it now, not in the first request
    fastapi = _need("fastapi")
    pydantic = _need("pydantic")
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, Field, StrictInt, field_validator

    del fastapi, pydantic  # imported above only to name the extra when missing

    class SearchRequest(BaseModel):
        queries: list[str] = Field(min_length=1, max_length=max_batch)
        # Strict: 3.0, 3.5, true, "3" and NaN are refused, never truncated or coerced.
        k: Annotated[StrictInt, Field(ge=1, le=max_k)] = 3
        K: Annotated[StrictInt, Field(ge=1, le=max_candidates)] = 100
        nprobe: Annotated[StrictInt, Field(ge=1)] | None = None
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

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # The errors echo the offending input; a NaN or inf there must not turn a 422 into a
        # 500 (JSON has no NaN), so the body goes through the RFC 8259 converter.
        return JSONResponse(status_code=422, content={"detail": to_jsonable(exc.errors())})

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "n": store.n}

    @app.get("/stats")
    def stats() -> dict[str, Any]:
        return to_jsonable(store.stats())

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
        return to_jsonable({"results": [[asdict(h) for h in hits] for hits in results]})

    return app


def bind(host: str = "127.0.0.1", port: int = 8000) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: a free port), for :func:`serve`.

    Binding first lets a command line fail in a second (port in use, unknown host) before it
    loads a store.

    Raises:
        ValueError: ``port`` outside [0, 65535].
        OSError: the address cannot be bound; the message names it.
    """
    port = check_int(port, "port", low=0, high=65535)
    if not isinstance(host, str) or not host:
        raise ValueError(f"host must be a non-empty string, got {host!r}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as err:
        raise OSError(f"cannot serve on host {host!r}: {err.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise OSError(f"cannot serve on {host}:{port}: {err.strerror}") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(
    store: Datastore | ShardedDatastore,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    sock: socket.socket | None = None,
    access_log: bool = True,
    **kwargs: Any,
) -> None:
    """Run the service with uvicorn until interrupted (loopback by default).

    Args:
        store: what to serve (see :func:`create_app`, which takes ``**kwargs``).
        host, port: where to listen, unless ``sock`` (from :func:`bind`) is given.
        access_log: log each request (and uvicorn's start-up lines) at info level; ``False``
            logs warnings and errors only.
    """
    uvicorn = _need("uvicorn")
    app = create_app(store, **kwargs)
    if sock is None:
        sock = bind(host, port)
    host = sock.getsockname()[0]
    if host not in _LOOPBACK:
        log.warning("serving on %s: the store is reachable from other machines", host)
    config = uvicorn.Config(
        app, log_level="info" if access_log else "warning", access_log=bool(access_log)
    )
    uvicorn.Server(config).run(sockets=[sock])
