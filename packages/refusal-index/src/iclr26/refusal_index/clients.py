"""Chat clients the evaluation harness can drive: any OpenAI-compatible server, a Python
callable, or a script of canned responses."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import httpx

from iclr26.shared import check_int, check_range

__all__ = [
    "CallableClient",
    "ChatClient",
    "ClientError",
    "Completion",
    "OpenAICompatibleClient",
    "ScriptedClient",
]

log = logging.getLogger(__name__)

Messages = Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class Completion:
    """A model's reply: its text and why generation stopped (``"length"`` = truncated)."""

    text: str
    finish_reason: str | None = None


@runtime_checkable
class ChatClient(Protocol):
    """Anything that turns a chat (``[{"role": ..., "content": ...}, ...]``) into a reply."""

    def complete(self, messages: Messages) -> Completion: ...


class ClientError(RuntimeError):
    """The server could not give a usable reply (bad status, malformed body, retries exhausted).

    The message is one line and names the endpoint.
    """


class OpenAICompatibleClient:
    """Client for ``POST {base_url}/chat/completions`` (vLLM, llama.cpp server, Ollama, OpenAI).

    Retries 429 and 5xx responses, timeouts and connection errors with exponential backoff
    (honouring ``Retry-After`` up to 30 s); any other 4xx and malformed JSON raise
    :class:`ClientError` at once with the status and the start of the body. Retries are bounded
    twice: ``max_retries`` per request and ``retry_budget`` over the client's whole life (one
    evaluation run), so a dead or failing endpoint ends the run in seconds instead of retrying
    every question. Thread-safe.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        model: model name sent in the request.
        api_key: sent as a bearer token when given (the CLI reads it from an environment
            variable, never from the command line).
        timeout: seconds per request.
        max_retries: retries after the first attempt of one request.
        retry_budget: retries allowed over all requests of this client; ``None``: unbounded.
        backoff: first retry delay in seconds, doubled each retry.
        temperature, max_tokens: sampling parameters; ``extra`` adds any other body fields.
        transport: an ``httpx`` transport (tests use a mock transport).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        retry_budget: int | None = 20,
        backoff: float = 0.5,
        temperature: float = 0.0,
        max_tokens: int = 256,
        extra: Mapping[str, Any] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        check_range(timeout, "timeout", low=0.0, low_inclusive=False)
        check_int(max_retries, "max_retries", low=0)
        if retry_budget is not None:
            check_int(retry_budget, "retry_budget", low=0)
        check_range(backoff, "backoff", low=0.0)
        check_range(temperature, "temperature", low=0.0)
        check_int(max_tokens, "max_tokens", low=1)
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_retries = max_retries
        self.retry_budget = retry_budget
        self.retries_used = 0
        self.temperature = float(temperature)
        self.backoff = backoff
        self.body = {
            "model": model,
            "temperature": temperature,
            "max_tokens": max_tokens,
            **(extra or {}),
        }
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=timeout, headers=headers, transport=transport)
        self.requests_sent = 0
        self._lock = threading.Lock()

    def complete(self, messages: Messages) -> Completion:
        """Send one chat and return the first choice."""
        body = {**self.body, "messages": [dict(m) for m in messages]}
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    exhausted = (
                        self.retry_budget is not None and self.retries_used >= self.retry_budget
                    )
                    self.retries_used += not exhausted
                if exhausted:
                    raise ClientError(
                        f"{self.url}: retry budget of {self.retry_budget} retries for this run "
                        f"is used up; last error: {_one_line(last)}"
                    ) from last
                delay = self.backoff * 2 ** (attempt - 1)
                retry_after = getattr(last, "retry_after", None)
                time.sleep(min(retry_after, 30.0) if retry_after is not None else delay)
            with self._lock:
                self.requests_sent += 1
            try:
                response = self._http.post(self.url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as err:
                last = err
                log.info("request to %s failed (%s); attempt %d", self.url, err, attempt + 1)
                continue
            if response.status_code == 429 or response.status_code >= 500:
                last = _RetryableStatus(response)
                log.info("%s answered %d; attempt %d", self.url, response.status_code, attempt + 1)
                continue
            if response.status_code >= 400:
                raise ClientError(
                    f"{self.url} answered {response.status_code}: {_one_line(response.text)}"
                )
            return _parse(response)
        raise ClientError(
            f"{self.url}: no usable reply after {self.max_retries + 1} attempts: {_one_line(last)}"
        ) from last

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> OpenAICompatibleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _RetryableStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"status {response.status_code}: {response.text[:120]}")
        header = response.headers.get("retry-after")
        try:
            self.retry_after: float | None = float(header) if header is not None else None
        except ValueError:
            self.retry_after = None


def _one_line(obj: object, limit: int = 200) -> str:
    """``str(obj)`` on one line, cut to ``limit`` characters (server bodies can be pages long)."""
    text = " ".join(str(obj).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse(response: httpx.Response) -> Completion:
    try:
        data = response.json()
    except ValueError as err:
        raise ClientError(
            f"malformed JSON from {response.url}: {_one_line(repr(response.text))}"
        ) from err
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"]
    except (KeyError, IndexError, TypeError) as err:
        raise ClientError(
            f"reply from {response.url} has no choices[0].message.content: {_one_line(data)}"
        ) from err
    return Completion(text if isinstance(text, str) else "", choice.get("finish_reason"))


class CallableClient:
    """Wrap ``fn(messages) -> str | Completion`` (a local model, a function under test)."""

    def __init__(self, fn: Callable[[Messages], str | Completion]) -> None:
        self.fn = fn

    def complete(self, messages: Messages) -> Completion:
        out = self.fn(messages)
        return out if isinstance(out, Completion) else Completion(str(out))


class ScriptedClient:
    """Canned replies keyed by the last user message: a string, or a list consumed in order.

    Unknown questions raise ``KeyError`` naming the question. Thread-safe.
    """

    def __init__(self, responses: Mapping[str, str | Sequence[str]]) -> None:
        self._responses = {
            k: ([v] if isinstance(v, str) else list(v)) for k, v in responses.items()
        }
        self._lock = threading.Lock()
        self.calls: list[Messages] = []

    def complete(self, messages: Messages) -> Completion:
        question = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        with self._lock:
            self.calls.append(messages)
            if question not in self._responses:
                raise KeyError(f"no scripted response for {question!r}")
            queue = self._responses[question]
            text = queue.pop(0) if len(queue) > 1 else queue[0]
        return Completion(text)
