"""`eval` as a careless user drives it: bad outputs, Ctrl-C midway, dead, hanging and broken
endpoints. Every server here is bound to 127.0.0.1; nothing else is reached."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from iclr26.refusal_index.cli import main

N_ITEMS = 30


class Server:
    """Answers each question by its number: forced pass right on even questions, refusal pass
    refuses odd ones. ``mode`` breaks it: "hang", "500", "malformed", "flaky" (every other
    request is a 503), "auth" (401 without the right key)."""

    def __init__(self, mode="ok", delay=0.0, key=None):
        self.mode, self.delay, self.key = mode, delay, key
        self.times = []  # arrival time of each request
        self.answered = 0  # replies fully sent
        self.lock = threading.Lock()
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with srv.lock:
                    srv.times.append(time.monotonic())
                    count = len(srv.times)
                status, payload = 200, None
                if srv.mode == "hang":
                    time.sleep(5)
                elif srv.mode == "500" or (srv.mode == "flaky" and count % 2):
                    status, payload = (
                        (500 if srv.mode == "500" else 503),
                        "upstream exploded\nstack trace line",
                    )
                elif srv.mode == "malformed":
                    payload = "{not json"
                elif (
                    srv.mode == "auth" and self.headers.get("Authorization") != f"Bearer {srv.key}"
                ):
                    status, payload = 401, '{"error": "bad key"}'
                if payload is None:
                    time.sleep(srv.delay)
                    i = int(body["messages"][-1]["content"].split()[1].rstrip("?"))
                    forced = "Never refuse" in body["messages"][0]["content"]
                    text = f"a{i}" if i % 2 == 0 else ("wrong" if forced else "I don't know")
                    payload = json.dumps(
                        {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
                    )
                data = payload.encode()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    with srv.lock:
                        srv.answered += status == 200

            def log_message(self, *args):
                pass

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that hung up mid-request is expected here, not a test failure

        self.server = Quiet(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
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


@pytest.fixture
def items(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"Question {i}?", "answers": [f"a{i}"]}) + "\n"
            for i in range(N_ITEMS)
        )
    )
    return path


def eval_argv(url, items, log, *extra):
    return ["eval", "--base-url", url, "--model", "m", "--items", str(items), "--log", str(log),
            "--no-progress", *extra]  # fmt: skip


def dead_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: connections are refused


def test_log_folder_is_created_and_every_answer_logged(tmp_path, items, capsys):
    log = tmp_path / "new" / "deeper" / "log.jsonl"
    with Server() as srv:
        assert main(eval_argv(srv.url, items, log, "--n-boot", "50")) == 0
    assert len(srv.times) == 2 * N_ITEMS
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 2 * N_ITEMS
    out = json.loads(capsys.readouterr().out)
    assert out["n_scored"] == N_ITEMS
    assert out["ri"]["refusal_rate"] == pytest.approx(0.5)


@pytest.mark.parametrize("bad", ["folder", "parent_is_file"])
def test_unusable_log_fails_before_the_first_request(tmp_path, items, capsys, bad):
    if bad == "folder":
        log = tmp_path / "logs"
        log.mkdir()
    else:
        (tmp_path / "file").write_text("x")
        log = tmp_path / "file" / "log.jsonl"
    with Server() as srv:
        assert main(eval_argv(srv.url, items, log)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--log" in err[0]
    assert srv.times == []


def test_answers_are_logged_as_they_arrive_when_the_run_fails(tmp_path, items, capsys):
    """The server dies after a while: everything answered before is in the log, and the rerun
    asks only for the rest."""
    log = tmp_path / "log.jsonl"
    with Server(delay=0.01) as srv:
        url = srv.url

        def kill_after(n):
            while srv.answered < n:
                time.sleep(0.005)
            srv.mode = "500"

        killer = threading.Thread(target=kill_after, args=(12,), daemon=True)
        killer.start()
        code = main(eval_argv(url, items, log, "--concurrency", "1", "--max-retries", "1"))
        killer.join()
        answered = srv.answered
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "127.0.0.1" in err[0]
    assert "rerun to resume" in err[0]
    logged = len(log.read_text().splitlines())
    assert logged == answered >= 12
    with Server() as srv2:
        assert main(eval_argv(srv2.url, items, log, "--n-boot", "50")) == 0
    assert len(srv2.times) == 2 * N_ITEMS - logged


@pytest.mark.parametrize(
    ("mode", "extra", "fragment"),
    [("dead", ("--max-retries", "2"), "Connection refused"),
     ("hang", ("--timeout", "0.3", "--max-retries", "1"), "timed out"),
     ("500", ("--max-retries", "1"), "status 500: upstream exploded stack trace line"),
     ("malformed", (), "malformed JSON"),
     ("flaky", ("--retry-budget", "3", "--concurrency", "1"), "retry budget of 3 retries"),
     ("auth", (), "answered 401")],
)  # fmt: skip
def test_broken_endpoint_ends_the_run_in_one_line(tmp_path, items, capsys, mode, extra, fragment):
    log = tmp_path / "log.jsonl"
    start = time.monotonic()
    with Server(mode="ok" if mode == "dead" else mode, key="secret") as srv:
        url = srv.url if mode != "dead" else f"http://127.0.0.1:{dead_port()}/v1"
        code = main(eval_argv(url, items, log, *extra))
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1, err
    assert url in err[0]
    assert fragment in err[0]
    assert elapsed < 60  # generous: the machine is shared; the request count below is the bound
    # bounded: at most (retries + 1) attempts per worker, never one per question
    assert len(srv.times) <= 4 * 4 + 4


def test_api_key_comes_from_the_environment(tmp_path, items, capsys, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("MY_KEY", "secret")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Server(mode="auth", key="secret") as srv:
        assert (
            main(eval_argv(srv.url, items, log, "--api-key-env", "MY_KEY", "--n-boot", "50")) == 0
        )
        monkeypatch.setenv("OPENAI_API_KEY", "secret")
        assert main(eval_argv(srv.url, items, tmp_path / "log2.jsonl", "--n-boot", "50")) == 0
        n = len(srv.times)
        assert main(eval_argv(srv.url, items, log, "--api-key-env", "UNSET_KEY")) == 2
    assert "--api-key-env UNSET_KEY" in capsys.readouterr().err
    assert len(srv.times) == n


def test_ksample_eval_needs_temperature_and_reports_the_ksample_ri(tmp_path, items, capsys):
    log = tmp_path / "log.jsonl"
    with Server() as srv:
        assert main(eval_argv(srv.url, items, log, "--samples", "3", "--temperature", "0")) == 2
        assert "--temperature" in capsys.readouterr().err
        assert srv.times == []
        assert main(eval_argv(srv.url, items, log, "--samples", "3", "--n-boot", "50")) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(srv.times) == 2 * 3 * N_ITEMS == out["calls"]
    assert out["samples"] == 3
    # this server refuses exactly the questions it gets wrong: both estimators see RI = 1
    assert out["ri_ksample"]["ri"] == pytest.approx(1.0)
    assert out["ri_ksample"]["method"] == "ksample"
    records = [json.loads(x) for x in log.read_text().splitlines()]
    assert sorted({r["sample"] for r in records}) == [0, 1, 2]


def test_ctrl_c_stops_sending_keeps_answers_exits_130_and_resumes(tmp_path, items):
    log = tmp_path / "log.jsonl"
    # a shell without job control starts background jobs with SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: restore it, as an interactive terminal would
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from iclr26.refusal_index.cli import main; sys.exit(main())"
    )
    with Server(delay=0.1) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *eval_argv(srv.url, items, log, "--concurrency", "2")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 60
        while (
            not log.exists() or len(log.read_text().splitlines()) < 6
        ) and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        sent_at_signal = len(srv.times)
        _, err = proc.communicate(timeout=30)
        time.sleep(0.3)  # anything still scheduled would arrive now
        sent_total = len(srv.times)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err
    assert sent_total - sent_at_signal <= 2  # at most the requests already in flight
    logged = len(log.read_text().splitlines())
    assert 6 <= logged < 2 * N_ITEMS
    assert logged >= sent_total - 2  # every answer that arrived before the exit is kept
    with Server() as srv2:
        assert main(eval_argv(srv2.url, items, log, "--n-boot", "50")) == 0
    assert len(srv2.times) == 2 * N_ITEMS - logged


def test_resume_never_mixes_models_and_bad_items_fail_first(tmp_path, items, capsys, caplog):
    log = tmp_path / "log.jsonl"
    with Server() as srv:
        assert main(eval_argv(srv.url, items, log, "--n-boot", "50")) == 0
        argv = eval_argv(srv.url, items, log, "--n-boot", "50")
        argv[argv.index("m")] = "other-model"
        assert main(argv) == 0
        assert len(srv.times) == 4 * N_ITEMS  # the other model's answers were not reused
        assert "60 records are for another model than 'other-model'" in caplog.text
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"id": 1, "question": null, "answers": ["x"]}\n')
        n = len(srv.times)
        assert main(eval_argv(srv.url, bad, log)) == 2
        assert main(eval_argv("localhost:8000", items, log)) == 2
        assert len(srv.times) == n
    err = capsys.readouterr().err
    assert "'question' must be a non-empty string" in err
    assert "--base-url must start with http" in err


def test_a_file_that_is_not_a_log_is_never_appended_to(tmp_path, items, capsys):
    before = items.read_text()
    with Server() as srv:
        assert main(eval_argv(srv.url, items, items)) == 2  # --log pointed at the items file
    assert srv.times == []
    assert "does not look like an answer log" in capsys.readouterr().err
    assert items.read_text() == before
