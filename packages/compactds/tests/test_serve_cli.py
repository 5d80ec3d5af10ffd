"""``iclr26-compactds serve`` as a user runs it, on 127.0.0.1: the URL is printed at start, each
request is logged (``--quiet`` turns that off), Ctrl-C stops it, a busy port is one line."""

import signal
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from iclr26.compactds import Chunker, DatastoreBuilder, HashingEncoder
from iclr26.compactds.cli import main


def _docs(n=400):
    rng = np.random.default_rng(3)
    return [" ".join(rng.choice([f"w{i}" for i in range(500)], 20)) for _ in range(n)]


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "store"
    b = DatastoreBuilder(path, HashingEncoder(32), chunker=Chunker(50), threads=1)
    b.add_source("a", _docs()).build()
    return path


def _serve(store, *extra):
    code = "import sys; from iclr26.compactds.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", str(store), "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.readline()
    if not first:
        proc.wait(30)
        pytest.fail(f"serve exited: {proc.stderr.read()[-2000:]}")
    url = first.split(" at ")[1].split()[0]
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url + "/health", timeout=5)
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline, "server did not answer"
            time.sleep(0.1)
    return proc, first, url


def _stop(proc):
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out + err  # uvicorn's access log goes to stdout


def test_serve_prints_its_url_logs_requests_and_stops_on_ctrl_c(small_store):
    proc, first, url = _serve(small_store)
    try:
        assert first.startswith("serving 400 passages at http://127.0.0.1:")
        body = {"queries": [_docs()[7]], "k": 3, "K": 100, "nprobe": 32}  # the README's example
        r = httpx.post(url + "/search", json=body)
        assert r.status_code == 200
        assert r.json()["results"][0][0]["id"] == 7
        bad = httpx.post(url + "/search", content='{"queries": ["v1"], "k": NaN}',
                         headers={"content-type": "application/json"})  # fmt: skip
        assert bad.status_code == 422
    finally:
        code, err = _stop(proc)
    assert code in (0, 130), err
    assert '"POST /search HTTP/1.1" 200' in err  # the access log, at info level
    assert '"POST /search HTTP/1.1" 422' in err
    assert "Traceback" not in err


def test_serve_quiet_logs_no_requests(small_store):
    proc, _, url = _serve(small_store, "--quiet")
    try:
        assert httpx.get(url + "/stats").json()["n"] == 400
    finally:
        code, err = _stop(proc)
    assert code in (0, 130), err
    assert "GET /stats" not in err
    assert "Traceback" not in err


def test_busy_port_is_one_line_before_the_store_loads(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        # the store does not even exist: the port is checked first
        assert main(["serve", str(tmp_path / "no-store"), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"cannot serve on 127.0.0.1:{port}" in err


def test_invalid_port_is_a_parse_error_not_an_overflow(capsys):
    for port in ("65536", "99999999999", "-1"):
        with pytest.raises(SystemExit) as exc:
            main(["serve", "store", "--port", port])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "argument --port" in err
        assert "Traceback" not in err
