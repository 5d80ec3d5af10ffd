"""A local OpenAI-compatible stand-in server on 127.0.0.1, with injectable faults.

It answers ``POST /v1/chat/completions`` with whatever ``responder(messages)`` returns, after
``latency_s``. Faults (``"429"``, ``"500"``, ``"drop"`` — close the connection without a reply,
``"hang"`` — sleep ``hang_s`` before replying, ``"garbage"`` — a non-JSON body) are injected either
from a fixed script (one entry per request, in arrival order; ``None`` = answer normally) or at
random with a seeded rate. It is what the tests and ``bench`` use instead of a real LLM server.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAULTS", "LoopbackChatServer"]

FAULTS = ("429", "500", "drop", "hang", "garbage")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


class LoopbackChatServer:
    """Context manager serving a chat-completions endpoint on a free 127.0.0.1 port.

    Args:
        responder: ``messages -> reply text`` (the simulated model).
        latency_s: seconds before each normal reply.
        script: faults per request in arrival order (``None`` entries answer normally).
        fault_rate: probability of a random fault per request after the script is used up.
        faults: which faults the random injection draws from.
        hang_s: how long a ``"hang"`` fault sleeps.
        seed: seed of the random fault injection.

    Attributes:
        url: the base URL to give a client (``http://127.0.0.1:<port>/v1``).
        requests: number of requests received; ``served``: normal replies; ``max_in_flight``:
            the most requests handled at once.
    """

    def __init__(
        self,
        responder: Callable[[list[Mapping[str, str]]], str],
        *,
        latency_s: float = 0.0,
        script: Sequence[str | None] = (),
        fault_rate: float = 0.0,
        faults: Sequence[str] = ("429", "500", "drop"),
        hang_s: float = 5.0,
        seed: int = 0,
    ) -> None:
        if not callable(responder):
            raise TypeError("responder must be callable")
        for f in [*script, *faults]:
            if f is not None and f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; known: {FAULTS}")
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be in [0, 1], got {fault_rate}")
        self.responder = responder
        self.latency_s = float(latency_s)
        self.script = list(script)
        self.fault_rate = fault_rate
        self.faults = list(faults)
        self.hang_s = float(hang_s)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.requests = 0
        self.served = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def _next_fault(self) -> str | None:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.script:
                return self.script.pop(0)
            if self.fault_rate and self._rng.random() < self.fault_rate:
                return self._rng.choice(self.faults)
            return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each reply waits ~40 ms for a delayed ACK

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                fault = server._next_fault()
                try:
                    self._answer(raw, fault)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, raw: bytes, fault: str | None) -> None:
                if fault == "drop":
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if fault == "hang":
                    time.sleep(server.hang_s)
                if fault in ("429", "500"):
                    self._send(
                        int(fault),
                        json.dumps({"error": {"message": "injected"}}),
                        {"Retry-After": "0"},
                    )
                    return
                if fault == "garbage":
                    self._send(200, "<html>not json</html>")
                    return
                time.sleep(server.latency_s)
                try:
                    body = json.loads(raw)
                    text = server.responder(body["messages"])
                except Exception as err:
                    self._send(
                        400, json.dumps({"error": {"message": f"{type(err).__name__}: {err}"}})
                    )
                    return
                with server._lock:
                    server.served += 1
                payload: dict[str, Any] = {
                    "id": f"loopback-{server.served}",
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": sum(
                            len(m.get("content", "").split()) for m in body["messages"]
                        ),
                        "completion_tokens": len(text.split()),
                    },
                }
                self._send(200, json.dumps(payload))

            def _send(
                self, status: int, text: str, headers: Mapping[str, str] | None = None
            ) -> None:
                data = text.encode()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> LoopbackChatServer:
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._server = None
