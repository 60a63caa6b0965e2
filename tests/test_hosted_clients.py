"""The hosted-model clients against hostile endpoints: a canary key never reaches a written
file (an endpoint that echoes it, a key inside --base-url), one deadline bounds a whole attempt
(a server trickling bytes), bodies are read no further than the limit (a large body, a gzip
bomb), and Retry-After is capped for both SDKs."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from http import HTTPStatus
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common import hosted_client, raw_http
from evals.common.secrets import REDACTED, forget_secrets, register_secret, scrub
from evals.servers.http_guard import GuardedHandler, GuardedHTTPServer, proxy_handler
from evals.servers.policy_server import PolicyServer

runner = CliRunner()
KEY = "sk-canary-7Hq2Zt9WmXv4Lp8Rk3Nd6Bf1Jc5Ys0Ga"


def leaks(text: str, key: str = KEY) -> list[str]:
    """Every 8-character piece of `key` found in `text`."""
    return [key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8] in text]


@pytest.fixture(autouse=True)
def _no_secrets_left():
    yield
    forget_secrets()


def test_scrub_removes_every_piece_of_a_key_and_url_secrets():
    register_secret(KEY)
    text = (
        f"auth {KEY} / half {KEY[5:20]} / tail {KEY[-9:]} / short {KEY[:7]} / "
        "see https://user:hunter22@example.com/v1?api_key=abc&x=1#frag and http://ok.example/v1"
    )
    out = scrub(text)
    assert not leaks(out)
    assert out.count(REDACTED) == 5
    assert "hunter22" not in out and "api_key=abc" not in out
    assert "example.com/v1?" in out and "http://ok.example/v1" in out
    assert f"short {KEY[:7]}" in out  # pieces under 8 characters are ordinary text


class _Echo(GuardedHandler):
    """An endpoint that echoes the caller's key: in a reply (first requests) and in an
    authentication error (the rest)."""

    served = 0

    def do_POST(self) -> None:
        body = self.read_json()
        if body is None:
            return
        type(self).served += 1
        auth = self.headers.get("Authorization", "")
        if type(self).served <= 2:
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "evict", "arguments": json.dumps({"seq_id": auth})},
            }
            message = {"role": "assistant", "content": f"I saw {auth}", "tool_calls": [call]}
            answer = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
            self.send_json(HTTPStatus.OK, answer)
            return
        error = {"error": {"message": f"Incorrect API key provided: {auth}", "code": 401}}
        self.send_json(HTTPStatus.UNAUTHORIZED, error)


def _serve(handler: type[GuardedHandler]) -> tuple[GuardedHTTPServer, int]:
    server = GuardedHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def test_a_canary_key_is_in_no_written_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    _Echo.served = 0
    server, port = _serve(_Echo)
    out, report = tmp_path / "run", tmp_path / "report"
    base = f"http://user:{KEY}@127.0.0.1:{port}/v1?api_key={KEY}"
    try:
        args = ["eval", "-m", "echo", "--base-url", base, "-s", "easy", "-n", "2"]
        done = runner.invoke(app, [*args, "--steps", "2", "-c", "1", "-o", str(out)])
        assert done.exit_code == 3, done.output  # the second episode fails (401, key echoed)
        reported = runner.invoke(app, ["report", str(out), "-o", str(report)])
        assert reported.exit_code == 0, reported.output
    finally:
        server.shutdown()
        server.server_close()
    assert _Echo.served >= 3
    files = [p for p in (*out.rglob("*"), *report.rglob("*")) if p.is_file()]
    assert len(files) >= 5 and any("transcripts" in str(p) for p in files)
    for path in files:
        assert not leaks(path.read_text(errors="replace")), path
    assert not leaks(done.output) and not leaks(reported.output)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert "Incorrect API key provided" in results[1]["error"] and REDACTED in results[1]["error"]
    assert REDACTED in json.loads((out / "run.json").read_text())["arguments"]["base_url"]
    # the written base URL is what a resume compares: it goes on
    resumed = runner.invoke(app, [*args, "--steps", "2", "-c", "1", "-o", str(out), "--resume"])
    assert "differs" not in resumed.output


def _trickler(body_size: int, every_s: float) -> tuple[socket.socket, int]:
    """A raw server that answers every request with a 200 whose body trickles one byte every
    `every_s` seconds."""

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            if raw_http.read_request(conn) is None:
                return
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {body_size}\r\n\r\n"
            ).encode()
            conn.sendall(head)
            for _ in range(body_size):
                conn.sendall(b" ")
                time.sleep(every_s)

    return raw_http.serve_raw(serve)


def test_one_deadline_bounds_a_whole_attempt(tmp_path):
    listener, port = _trickler(body_size=400, every_s=0.2)  # 80 s of trickle per attempt
    try:
        args = ["eval", "-m", "x", "--base-url", f"http://127.0.0.1:{port}/v1", "-s", "easy"]
        started = time.monotonic()
        done = runner.invoke(
            app,
            [*args, "-n", "1", "--steps", "2", "--timeout", "1", "--max-retries", "1", "-o",
             str(tmp_path / "run")],
        )  # fmt: skip
        elapsed = time.monotonic() - started
    finally:
        listener.close()
    assert done.exit_code == 3, done.output
    (line,) = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    error = json.loads(line)["error"]
    assert "APITimeoutError" in error and "within 1 s" in error, error
    assert elapsed < 30, f"two 1 s attempts took {elapsed:.0f} s"


class _Big(GuardedHandler):
    """Answers with a body over the response limit: plain, or as a gzip bomb."""

    gzip_bomb = False

    def do_POST(self) -> None:
        if self.read_json() is None:
            return
        filler = b'{"choices": [], "pad": "' + b"x" * (6 << 20) + b'"}'
        if type(self).gzip_bomb:
            packed = gzip.compress(filler, mtime=0)
            headers = {"Content-Encoding": "gzip"}
            self.send_json(HTTPStatus.OK, None, packed, headers=headers)
        else:
            self.send_json(HTTPStatus.OK, None, filler)


@pytest.mark.parametrize("bomb", [False, True])
def test_a_body_over_the_limit_is_refused(tmp_path, bomb):
    _Big.gzip_bomb = bomb
    server, port = _serve(_Big)
    try:
        args = ["eval", "-m", "x", "--base-url", f"http://127.0.0.1:{port}/v1", "-s", "easy"]
        done = runner.invoke(
            app, [*args, "-n", "1", "--steps", "2", "--max-retries", "0", "-o", str(tmp_path)]
        )
    finally:
        server.shutdown()
        server.server_close()
    assert done.exit_code == 3, done.output
    (line,) = (tmp_path / "results.jsonl").read_text().splitlines()
    error = json.loads(line)["error"]
    assert "ResponseRefused" in error and "over 4194304 bytes" in error, error


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "999999"}, "60"),
        ({"retry-after": "2"}, "2"),
        ({"retry-after-ms": "1500"}, "2"),
        ({"retry-after-ms": "nan"}, "60"),
        ({"retry-after-ms": "inf", "retry-after": "1"}, "60"),
        ({"retry-after": "Fri, 31 Dec 2100 23:59:59 GMT"}, "60"),
        ({"retry-after": "-5"}, "0"),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_capped(headers, expected):
    capped = hosted_client.capped_retry_after(headers)
    assert (capped or {}).get("retry-after") == expected
    if capped is not None:
        assert float(capped["retry-after-ms"]) <= hosted_client.MAX_RETRY_AFTER_S * 1000


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_both_sdks_wait_no_longer_than_the_cap(tmp_path, monkeypatch, api):
    """A 429 asking for 999,999 s, then answers from the policy server: the run waits the cap
    (shrunk here to 0.2 s), not 11 days."""
    monkeypatch.setattr(hosted_client, "MAX_RETRY_AFTER_S", 0.2)
    with PolicyServer("lru") as upstream:
        relay = proxy_handler(("127.0.0.1", upstream.port))
        asked = {"n": 0}

        class SlowDown(relay):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                asked["n"] += 1
                if asked["n"] == 1:
                    if self.read_json() is None:
                        return
                    self.send_json(
                        HTTPStatus.TOO_MANY_REQUESTS,
                        {"type": "error", "error": {"type": "rate_limit_error", "message": "x"}},
                        headers={"retry-after": "999999"},
                    )
                    return
                super().do_POST()

        front, port = _serve(SlowDown)
        base = f"http://127.0.0.1:{port}" + ("/v1" if api == "openai" else "")
        try:
            args = ["eval", "-m", "lru", "--api", api, "--base-url", base, "-s", "easy"]
            started = time.monotonic()
            done = runner.invoke(
                app, [*args, "-n", "1", "--steps", "2", "-o", str(tmp_path / "run")]
            )
            elapsed = time.monotonic() - started
        finally:
            front.shutdown()
            front.server_close()
    assert done.exit_code == 0, done.output
    assert asked["n"] >= 2 and elapsed < 60


def test_written_files_are_scrubbed_even_without_a_model(tmp_path):
    """The scrubber sits under every writer: a registered secret in any result text is gone."""
    from evals.common.durable import LineLog, write_atomic

    register_secret(KEY)
    write_atomic(tmp_path / "a.json", json.dumps({"e": f"boom {KEY}"}))
    log = LineLog(tmp_path / "b.jsonl")
    log.append(json.dumps({"e": f"x{KEY[3:30]}y"}))
    log.close()
    for name in ("a.json", "b.jsonl"):
        assert not leaks(Path(tmp_path / name).read_text())
