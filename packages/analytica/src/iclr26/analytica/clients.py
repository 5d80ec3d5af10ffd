"""LLM clients for the three agent roles (analyzer, prover, synthesizer) and the call ledger.

:class:`OpenAICompatibleClient` speaks ``POST {base_url}/chat/completions`` (vLLM, llama.cpp
server, Ollama, OpenAI) over ``httpx`` asynchronously, retrying 429/5xx responses, timeouts and
dropped connections with exponential backoff; every attempt lands in a :class:`CallLedger`.
:func:`complete_json` is the official "parse or retry the dialog" loop: an answer that does not
parse or breaks a rule is sent back with the error, at most ``max_repairs`` times.
:class:`ScriptedClient` and :class:`CallableClient` drive the same code path offline.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import httpx

__all__ = [
    "CallLedger",
    "CallableClient",
    "ChatClient",
    "ClientError",
    "Completion",
    "LedgerEntry",
    "OpenAICompatibleClient",
    "ParseFailure",
    "ScriptedClient",
    "complete_json",
    "extract_json",
]

log = logging.getLogger(__name__)

Messages = Sequence[Mapping[str, str]]
T = TypeVar("T")


@dataclass(frozen=True)
class Completion:
    """A model reply: text, why generation stopped, and token counts when the server reports them."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class ChatClient(Protocol):
    """Anything that turns a chat (``[{"role": ..., "content": ...}, ...]``) into a reply."""

    async def complete(self, messages: Messages, *, tag: str = "") -> Completion: ...


class ClientError(RuntimeError):
    """The server gave no usable reply (bad status, malformed body, retries exhausted)."""


class ParseFailure(RuntimeError):
    """The model's answers kept failing the parser after ``max_repairs`` repair rounds."""


@dataclass
class LedgerEntry:
    """One attempt: what (``kind``: ``http``, ``ground``, ``synthesize``…), for which node, outcome."""

    kind: str
    tag: str
    attempt: int
    ok: bool
    latency_s: float
    error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    time: float = field(default_factory=time.time)


class CallLedger:
    """Thread- and task-safe record of every call attempt, its latency, tokens and cost.

    Args:
        path: optional JSONL file; each entry is appended as it is recorded (so a crash or
            Ctrl-C loses nothing that was recorded) and an existing file is loaded on creation,
            so a resumed run keeps the history of the interrupted one.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self._lock = threading.Lock()
        self.entries: list[LedgerEntry] = []
        self.path = None if path is None else Path(path)
        if self.path is not None and self.path.exists():
            for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if line.strip():
                    try:
                        self.entries.append(LedgerEntry(**json.loads(line)))
                    except (json.JSONDecodeError, TypeError) as err:
                        raise ValueError(f"{self.path}:{n}: not a ledger entry ({err})") from err

    def record(self, entry: LedgerEntry) -> None:
        with self._lock:
            self.entries.append(entry)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(asdict(entry)) + "\n")

    def __len__(self) -> int:
        return len(self.entries)

    def count(self, kind: str | None = None, *, ok: bool | None = None) -> int:
        return sum(
            1
            for e in self.entries
            if (kind is None or e.kind == kind) and (ok is None or e.ok == ok)
        )

    def summary(self) -> dict[str, Any]:
        """Totals per kind: attempts, failures, tokens, cost and summed latency."""
        out: dict[str, Any] = {}
        for e in self.entries:
            s = out.setdefault(
                e.kind,
                {"attempts": 0, "failures": 0, "tokens": 0, "cost": 0.0, "latency_s": 0.0},
            )
            s["attempts"] += 1
            s["failures"] += not e.ok
            s["tokens"] += e.prompt_tokens + e.completion_tokens
            s["cost"] += e.cost
            s["latency_s"] += e.latency_s
        return out


class OpenAICompatibleClient:
    """Async client for ``POST {base_url}/chat/completions``.

    Retries 429 and 5xx responses, timeouts, connection errors and dropped connections with
    exponential backoff (honouring ``Retry-After`` up to 30 s); any other 4xx or a malformed body
    raises :class:`ClientError` at once with the status and the start of the body. Each attempt is
    recorded in ``ledger`` (kind ``"http"``). Official defaults: temperature 0.1.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        model: model name sent in the request.
        api_key: bearer token, if the server wants one.
        timeout: seconds per request.
        max_retries: retries after the first attempt.
        backoff: first retry delay in seconds, doubled each retry.
        temperature, max_tokens: sampling parameters; ``extra`` adds other body fields
            (e.g. ``{"response_format": {"type": "json_object"}}``).
        ledger: where attempts are recorded (a fresh one by default).
        price_per_1k_tokens: ``(prompt, completion)`` prices for the ledger's cost column.
        transport: an ``httpx.AsyncBaseTransport`` (tests may pass a mock transport).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        temperature: float = 0.1,
        max_tokens: int = 2048,
        extra: Mapping[str, Any] | None = None,
        ledger: CallLedger | None = None,
        price_per_1k_tokens: tuple[float, float] = (0.0, 0.0),
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ValueError("model must be a non-empty string")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer ≥ 0, got {max_retries!r}")
        if not backoff >= 0:
            raise ValueError(f"backoff must be ≥ 0, got {backoff!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.body = {"temperature": temperature, "max_tokens": max_tokens, **dict(extra or {})}
        self.ledger = ledger if ledger is not None else CallLedger()
        self.price = price_per_1k_tokens
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            # A client is bound to the loop it was created in; asyncio.run() makes a new loop.
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                timeout=self.timeout,
                headers=headers,
                transport=self._transport,
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and not self._client.is_closed:
            await self._client.aclose()
        self._client = None

    async def complete(self, messages: Messages, *, tag: str = "") -> Completion:
        """One chat completion; retries transient failures, raises :class:`ClientError` after."""
        body = {"model": self.model, "messages": [dict(m) for m in messages], **self.body}
        delay = self.backoff
        last = ""
        for attempt in range(self.max_retries + 1):
            start = time.perf_counter()
            retry_after = None
            try:
                response = await self._http().post(self.url, json=body)
                if response.status_code == 429 or response.status_code >= 500:
                    last = f"HTTP {response.status_code}: {response.text[:200]!r}"
                    retry_after = _retry_after(response)
                elif response.status_code >= 400:
                    msg = f"HTTP {response.status_code} from {self.url}: {response.text[:300]!r}"
                    self._record(tag, attempt, False, start, msg)
                    raise ClientError(msg)
                else:
                    completion = _parse(response)
                    self._record(tag, attempt, True, start, "", completion)
                    return completion
            except (httpx.TimeoutException, httpx.TransportError) as err:
                last = f"{type(err).__name__}: {err}"
            self._record(tag, attempt, False, start, last)
            if attempt < self.max_retries:
                wait = delay if retry_after is None else min(retry_after, 30.0)
                log.info("retrying %s after %s (%.2fs)", tag or self.url, last, wait)
                await asyncio.sleep(wait)
                delay *= 2
        raise ClientError(
            f"{self.url}: no usable reply after {self.max_retries + 1} attempts ({last})"
        )

    def _record(
        self,
        tag: str,
        attempt: int,
        ok: bool,
        start: float,
        error: str,
        completion: Completion | None = None,
    ) -> None:
        pt = completion.prompt_tokens if completion else 0
        ct = completion.completion_tokens if completion else 0
        cost = (pt * self.price[0] + ct * self.price[1]) / 1000.0
        self.ledger.record(
            LedgerEntry("http", tag, attempt, ok, time.perf_counter() - start, error, pt, ct, cost)
        )


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _parse(response: httpx.Response) -> Completion:
    try:
        data = response.json()
        choice = data["choices"][0]
        text = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise ClientError(
            f"malformed chat-completions body ({type(err).__name__}): {response.text[:200]!r}"
        ) from None
    if not isinstance(text, str):
        raise ClientError(f"message content must be a string, got {type(text).__name__}")
    usage = data.get("usage") or {}
    return Completion(
        text,
        choice.get("finish_reason"),
        int(usage.get("prompt_tokens", 0) or 0),
        int(usage.get("completion_tokens", 0) or 0),
    )


class CallableClient:
    """Wraps ``fn(messages) -> str | Completion`` (sync or async) as a :class:`ChatClient`."""

    def __init__(self, fn: Callable[[Messages], Any]) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable")
        self.fn = fn
        self.calls = 0

    async def complete(self, messages: Messages, *, tag: str = "") -> Completion:
        self.calls += 1
        out = self.fn(messages)
        if isinstance(out, Awaitable):
            out = await out
        return out if isinstance(out, Completion) else Completion(str(out), "stop")


class ScriptedClient:
    """Replies from a list, in order (tests): each call pops the next reply; exhausted → error."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, str]]] = []

    async def complete(self, messages: Messages, *, tag: str = "") -> Completion:
        self.calls.append([dict(m) for m in messages])
        if not self.replies:
            raise ClientError("scripted client has no replies left")
        return Completion(self.replies.pop(0), "stop")


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str) -> Any:
    """The JSON value in a model reply: a fenced ```json block, else the first balanced object
    or array. Raises ``ValueError`` naming what was wrong."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            candidates.append(text[i:])
            break
    for cand in candidates:
        cand = cand.strip()
        try:
            value, _ = decoder.raw_decode(cand)
            return value
        except json.JSONDecodeError:
            continue
    raise ValueError(f"no JSON object found in the reply: {text[:120]!r}")


async def complete_json(
    client: ChatClient,
    messages: Messages,
    parse: Callable[[str], T],
    *,
    max_repairs: int = 3,
    tag: str = "",
    ledger: CallLedger | None = None,
    kind: str = "parse",
) -> T:
    """Ask, parse, and on a parser error send the error back and ask again (bounded).

    ``parse(text)`` returns the parsed value or raises ``ValueError``/``TypeError``/``KeyError``
    explaining what to fix. After ``max_repairs`` rejected repairs a :class:`ParseFailure` is
    raised; every rejection is recorded in ``ledger`` (kind ``kind``).
    """
    dialog = [dict(m) for m in messages]
    for attempt in range(max_repairs + 1):
        start = time.perf_counter()
        reply = await client.complete(dialog, tag=tag)
        try:
            value = parse(reply.text)
        except (ValueError, TypeError, KeyError) as err:
            msg = f"{type(err).__name__}: {err}"
            if ledger is not None:
                ledger.record(
                    LedgerEntry(kind, tag, attempt, False, time.perf_counter() - start, msg)
                )
            dialog += [
                {"role": "assistant", "content": reply.text},
                {
                    "role": "user",
                    "content": f"Your answer was rejected: {msg}. Reply again, following the "
                    "required format exactly.",
                },
            ]
            continue
        if ledger is not None:
            ledger.record(LedgerEntry(kind, tag, attempt, True, time.perf_counter() - start))
        return value
    raise ParseFailure(f"{tag or 'answer'}: still unparseable after {max_repairs} repairs ({msg})")
