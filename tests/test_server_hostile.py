"""`serve-policy` (and `serve-model`'s front) against malformed and hostile clients over raw
sockets: every malformed request is answered with a 4xx JSON error, slow clients are cut off at
the configured deadlines, a body is never read past its limit, a client beyond the worker pool
gets 503 with Retry-After (which the hosted-model client honours), and ::1 works."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common import raw_http
from evals.servers.http_guard import MAX_BODY_BYTES, GuardedHTTPServer, proxy_handler
from evals.servers.policy_server import PolicyServer

runner = CliRunner()
FAST = {"header_timeout_s": 1.0, "body_timeout_s": 1.0}


@pytest.fixture(scope="module")
def server():
    with PolicyServer("lru", **FAST) as running:
        yield running


def _decoded(response: raw_http.Response | None):
    """(status, headers, JSON body) of a response, or None if the server closed the
    connection without answering."""
    return None if response is None else (response.status, response.headers, response.json())


def _exchange(port: int, data: bytes, *, host: str = "127.0.0.1", wait: float = 6.0):
    return _decoded(raw_http.exchange(port, data, host=host, wait=wait))


def _read_response(sock: socket.socket):
    return _decoded(raw_http.read_response(sock))


def _post(path: str, body: bytes, extra: str = "", length: str | None = None) -> bytes:
    return raw_http.request_bytes(path, body, extra=extra, length=length)


CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
GOOD_CHAT = {"model": "lru", "messages": [{"role": "user", "content": "hi"}]}


def _messages(**changes: object) -> bytes:
    body = {
        "model": "lru",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        **changes,
    }
    return json.dumps(body).encode()


MALFORMED: dict[str, tuple[bytes, int, str]] = {
    "deep-json": (_post(CHAT, b"[" * 100_000), 400, "nested more than 64 deep"),
    "deep-json-balanced": (
        _post(CHAT, b'{"messages": ' + b"[" * 200 + b"]" * 200 + b"}"),
        400,
        "nested more than 64 deep",
    ),
    "not-json": (_post(CHAT, b"{nope"), 400, "not JSON"),
    "not-utf8": (_post(CHAT, b'{"a": "\xff\xfe"}'), 400, "not UTF-8"),
    "array": (_post(CHAT, b"[1, 2]"), 400, "must be a JSON object"),
    "non-text-parts": (
        _post(
            CHAT,
            json.dumps(
                {"messages": [{"role": "user", "content": [{"type": "image_url", "text": 5}]}]}
            ).encode(),
        ),
        400,
        "parts must be objects with text",
    ),
    "parts-not-objects": (
        _post(CHAT, json.dumps({"messages": [{"role": "user", "content": [7]}]}).encode()),
        400,
        "parts must be objects with text",
    ),
    "message-not-object": (
        _post(CHAT, json.dumps({"messages": [5]}).encode()),
        400,
        "messages[0]: must be an object",
    ),
    "system-number": (_post(MESSAGES, _messages(system=5)), 400, "system: must be a string"),
    "content-null": (
        _post(MESSAGES, _messages(messages=[{"role": "user", "content": None}])),
        400,
        "messages.0.content: must be a string or a list",
    ),
    "length-abc": (_post(CHAT, b"{}", length="abc"), 400, "bad Content-Length"),
    "length-fraction": (_post(CHAT, b"{}", length="1.5"), 400, "bad Content-Length"),
    "length-negative": (_post(CHAT, b"{}", length="-1"), 400, "bad Content-Length"),
    "length-twice": (
        _post(CHAT, b"{}", extra="Content-Length: 3\r\n"),
        400,
        "bad Content-Length",
    ),
    "length-huge": (_post(CHAT, b"", length=str(10**12)), 413, "the limit is"),
    "length-missing": (_post(CHAT, b"", length=""), 411, "needs a Content-Length"),
    "chunked": (
        _post(CHAT, b"2\r\n{}\r\n0\r\n\r\n", extra="Transfer-Encoding: chunked\r\n", length=""),
        411,
        "no chunked bodies",
    ),
    "bad-request-line": (b"GARBAGE\r\n\r\n", 400, "Bad request"),
    "unknown-method": (b"PUT /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 405, "PUT"),
    "header-too-long": (
        b"GET /v1/models HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n",
        431,
        "",
    ),
    "no-route": (_post("/v1/nowhere", b"{}"), 404, "no route"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_every_malformed_request_gets_a_4xx_json_error(server, case):
    data, status, expected = MALFORMED[case]
    answer = _exchange(server.port, data)
    assert answer is not None, "answered, not dropped"
    got, headers, body = answer
    assert got == status, (got, body)
    assert headers["content-type"] == "application/json"
    assert expected in body["error"]["message"], body


def test_a_good_request_still_works(server):
    status, _, body = _exchange(server.port, _post(CHAT, json.dumps(GOOD_CHAT).encode()))
    assert status in (200, 400)  # "hi" is not an observation: a 400 saying so, as JSON
    assert isinstance(body, dict)
    status, _, body = _exchange(server.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and body["data"][0]["id"] == "lru"


def test_a_huge_body_is_refused_unread(server):
    with socket.socket() as sock:
        sock.settimeout(5)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(_post(CHAT, b"", length=str(256 << 20)))
        sock.sendall(b"x" * 65536)  # the start of the body; the rest never comes
        status, headers, body = _read_response(sock)
    assert status == 413 and headers.get("connection") == "close"
    assert str(MAX_BODY_BYTES) in body["error"]["message"]


def test_a_trickling_client_is_cut_off_at_the_header_deadline(server):
    started = time.monotonic()
    with socket.socket() as sock:
        sock.settimeout(10)
        sock.connect(("127.0.0.1", server.port))
        answer = None
        for byte in b"POST /v1/chat/completions HTTP/1.1\r\nHost: " + b"x" * 200:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.05)
            if time.monotonic() - started > 4:
                break
        try:
            answer = _read_response(sock)
        except OSError:
            answer = None
    elapsed = time.monotonic() - started
    assert elapsed < 3.5, f"held {elapsed:.1f}s past a 1 s header deadline"
    assert answer is None or answer[0] == 408


def test_a_stalled_body_is_answered_408(server):
    started = time.monotonic()
    with socket.socket() as sock:
        sock.settimeout(10)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(_post(CHAT, b'{"messa', length="100"))
        status, _, body = _read_response(sock)
    assert status == 408 and "too long" in body["error"]["message"]
    assert time.monotonic() - started < 3


def test_an_idle_keep_alive_connection_is_closed(server):
    with socket.socket() as sock:
        sock.settimeout(10)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_response(sock)[0] == 200
        started = time.monotonic()
        assert sock.recv(1024) == b"", "the server closes an idle connection"
        assert time.monotonic() - started < 3


def test_beyond_the_worker_pool_a_client_gets_503_with_retry_after():
    with PolicyServer("lru", max_connections=2, header_timeout_s=3, body_timeout_s=3) as small:
        idle = [socket.create_connection(("127.0.0.1", small.port)) for _ in range(2)]
        try:
            time.sleep(0.2)  # both accepted and holding a worker
            answer = _exchange(small.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        finally:
            for sock in idle:
                sock.close()
        assert answer is not None
        status, headers, body = answer
        assert status == 503 and headers["retry-after"] == "1"
        assert "busy" in body["error"]["message"] and small.refused >= 1


def test_the_hosted_model_client_honours_retry_after(tmp_path):
    """An eval against a one-worker server whose worker is held by an idle client until the
    server has refused the eval's client once: that attempt gets 503 + Retry-After, the SDK
    waits and retries, and the run completes."""
    with PolicyServer("lru", max_connections=1, header_timeout_s=120) as small:
        holder = socket.create_connection(("127.0.0.1", small.port))

        def release() -> None:
            deadline = time.monotonic() + 120
            while small.refused == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            holder.close()

        releaser = threading.Thread(target=release, daemon=True)
        releaser.start()
        args = ["eval", "-m", "lru", "--base-url", small.base_url, "-s", "easy", "-n", "1"]
        done = runner.invoke(app, [*args, "--steps", "2", "-c", "1", "-o", str(tmp_path / "run")])
        releaser.join()
        assert done.exit_code == 0, done.output
        assert small.refused >= 1
    (line,) = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert json.loads(line)["status"] == "ok"


def _has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6(), reason="this machine has no IPv6 loopback")
def test_ipv6_loopback_works():
    with PolicyServer("lru", host="::1") as six:
        assert six.base_url.startswith("http://[::1]:")
        status, _, body = _exchange(
            six.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", host="::1"
        )
    assert status == 200 and body["data"][0]["id"] == "lru"


def test_a_host_that_is_not_loopback_is_refused_before_binding():
    done = runner.invoke(app, ["serve-policy", "lru", "--host", "0.0.0.0"])
    assert done.exit_code == 2 and "loopback only" in done.output


def test_the_model_front_checks_requests_before_relaying():
    """`serve-model`'s front (here before a policy server standing in for llama.cpp's)."""
    with PolicyServer("lru") as upstream:
        front = GuardedHTTPServer(
            ("127.0.0.1", 0), proxy_handler(("127.0.0.1", upstream.port)), **FAST
        )
        thread = threading.Thread(target=front.serve_forever, daemon=True)
        thread.start()
        try:
            port = front.server_address[1]
            status, _, body = _exchange(port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status == 200 and body["data"][0]["id"] == "lru"
            for case in ("deep-json", "length-abc", "length-huge", "unknown-method"):
                data, expected_status, _ = MALFORMED[case]
                assert _exchange(port, data)[0] == expected_status
            served = upstream.requests
            _exchange(port, _post(CHAT, b"[" * 100_000))
            assert upstream.requests == served, "a refused request never reaches the model"
        finally:
            front.shutdown()
            front.server_close()
