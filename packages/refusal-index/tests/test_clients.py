"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 (no other network)."""

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from iclr26.refusal_index import (
    CallableClient,
    ClientError,
    Completion,
    OpenAICompatibleClient,
    ScriptedClient,
)


class Stub:
    """A scripted server: each request pops the next (status, body, delay, headers)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers["Content-Length"])
                stub.requests.append(
                    (self.path, dict(self.headers), json.loads(self.rfile.read(length)))
                )
                status, body, delay, headers = (
                    stub.script.pop(0) if stub.script else (500, "gone", 0, {})
                )
                time.sleep(delay)
                payload = body if isinstance(body, str) else json.dumps(body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload.encode())))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def ok(text, finish="stop"):
    return (
        200,
        {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": finish}]},
        0,
        {},
    )


def test_success_sends_openai_request_and_parses_reply():
    with Stub([ok("Paris")]) as stub:
        with OpenAICompatibleClient(stub.url, "tiny", api_key="k", max_tokens=8) as client:
            reply = client.complete([{"role": "user", "content": "Capital of France?"}])
    assert reply == Completion("Paris", "stop")
    path, headers, body = stub.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer k"
    assert body["model"] == "tiny"
    assert body["max_tokens"] == 8
    assert body["messages"] == [{"role": "user", "content": "Capital of France?"}]


def test_retries_429_and_5xx_then_succeeds_honouring_retry_after():
    script = [
        (429, "slow down", 0, {"Retry-After": "0"}),
        (503, "busy", 0, {}),
        ok("Lima", "length"),
    ]
    with Stub(script) as stub, OpenAICompatibleClient(stub.url, "m", backoff=0.01) as client:
        reply = client.complete([{"role": "user", "content": "q"}])
    assert reply == Completion("Lima", "length")
    assert len(stub.requests) == 3
    assert client.requests_sent == 3


def test_gives_up_after_max_retries():
    with (
        Stub([(500, "err", 0, {})] * 5) as stub,
        OpenAICompatibleClient(stub.url, "m", max_retries=2, backoff=0.01) as c,
    ):
        with pytest.raises(ClientError, match="no usable reply after 3 attempts"):
            c.complete([{"role": "user", "content": "q"}])
    assert len(stub.requests) == 3


def test_timeout_is_retried_then_reported():
    with (
        Stub([(200, "{}", 0.5, {})] * 2) as stub,
        OpenAICompatibleClient(stub.url, "m", timeout=0.1, max_retries=1, backoff=0.01) as c,
    ):
        with pytest.raises(ClientError, match="no usable reply"):
            c.complete([{"role": "user", "content": "q"}])
    assert len(stub.requests) == 2


@pytest.mark.parametrize(
    ("script", "message"),
    [([(200, "not json{", 0, {})], "malformed JSON"),
     ([(200, {"choices": []}, 0, {})], r"no choices\[0\]"),
     ([(400, "bad request: unknown model", 0, {})], "answered 400: bad request")],
)  # fmt: skip
def test_bad_replies_raise_clear_errors_without_retrying(script, message):
    with Stub(script) as stub, OpenAICompatibleClient(stub.url, "m", backoff=0.01) as c:
        with pytest.raises(ClientError, match=message):
            c.complete([{"role": "user", "content": "q"}])
    assert len(stub.requests) == 1


def test_connection_refused_is_retried_then_reported():
    with Stub([]) as stub:
        url = stub.url
    with (
        OpenAICompatibleClient(url, "m", max_retries=1, backoff=0.01) as c,
        pytest.raises(ClientError),
    ):
        c.complete([{"role": "user", "content": "q"}])


def test_constructor_validation():
    with pytest.raises(ValueError, match="base_url must start with"):
        OpenAICompatibleClient("127.0.0.1:8000", "m")
    with pytest.raises(ValueError, match="timeout"):
        OpenAICompatibleClient("http://x", "m", timeout=0)


def test_callable_and_scripted_clients():
    assert CallableClient(lambda m: "x").complete([]) == Completion("x")
    scripted = ScriptedClient({"q1": ["a", "b"], "q2": "c"})
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "q1"}]
    assert [scripted.complete(msgs).text for _ in range(3)] == ["a", "b", "b"]
    with pytest.raises(KeyError, match="no scripted response for 'q3'"):
        scripted.complete([{"role": "user", "content": "q3"}])


def test_eval_command_runs_both_passes_against_a_local_server(tmp_path, capsys):
    from iclr26.refusal_index.cli import main

    items = tmp_path / "items.jsonl"
    items.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"Q{i}?", "answers": [f"a{i}"]}) + "\n"
            for i in range(6)
        )
    )
    # forced pass: right on q0-q2, wrong on q3-q5; refusal pass: refuses q3, q4 and q1
    forced = [ok(f"a{i}") if i < 3 else ok("nope") for i in range(6)]
    refusal = [
        ok("I don't know") if i in (1, 3, 4) else ok(f"a{i}" if i < 3 else "nope") for i in range(6)
    ]
    with Stub(forced + refusal) as stub:
        log = tmp_path / "log.jsonl"
        argv = [
            "eval",
            "--base-url",
            stub.url,
            "--model",
            "m",
            "--items",
            str(items),
            "--log",
            str(log),
            "--concurrency",
            "1",
        ]
        assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_scored"] == 6
    assert out["ri"]["refusal_rate"] == pytest.approx(0.5)
    assert out["ri"]["error_rate"] == pytest.approx(0.5)
    assert out["peers"]["refusal_precision"] == pytest.approx(2 / 3)
    assert len(log.read_text().splitlines()) == 12
