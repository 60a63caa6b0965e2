"""Hostile endpoints for the hosted-model clients: a huge retry-after, a trickled body, a body over
the limit."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

from evals.common.raw_http import read_request, serve_raw

from .harness import (
    case,
    kvarena,
)


def raw_server(respond: Callable[[socket.socket, int], None]) -> tuple[socket.socket, int]:
    """A raw server that reads each request whole, then calls `respond(conn, n)` (n counts
    the requests so far, from 1)."""
    count = {"n": 0}

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            if read_request(conn) is None:
                return
            count["n"] += 1
            respond(conn, count["n"])

    return serve_raw(serve)


def _reply(conn: socket.socket, status: str, body: bytes, headers: str = "") -> None:
    conn.sendall(
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


_ANTHROPIC_OK = json.dumps(
    {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "x",
        "content": [{"type": "text", "text": "noop"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
).encode()


@case("hosted clients", "Anthropic 429 with retry-after: 999999")
def _client_retry_after(tmp: Path) -> tuple[str, str]:
    def respond(conn: socket.socket, n: int) -> None:
        if n == 1:
            error = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
            _reply(conn, "429 Too Many Requests", error, "retry-after: 999999\r\n")
        else:
            _reply(conn, "200 OK", _ANTHROPIC_OK)

    listener, port = raw_server(respond)
    try:
        done = kvarena(
            "eval", "-m", "x", "--api", "anthropic", "--base-url", f"http://127.0.0.1:{port}",
            "-s", "easy", "-n", "1", "--steps", "2", "-o", str(tmp / "run"), timeout=150,
        )  # fmt: skip
    finally:
        listener.close()
    if done.timed_out:
        return "hang", "still waiting after 150 s"
    if done.rc != 0:
        return "crash", f"exit {done.rc}: {done.err.strip()[-160:]}"
    return "clean", f"waited the 60 s cap, finished in {done.seconds:.0f}s"


@case("hosted clients", "a body trickled 1 byte / 0.5 s under --timeout 5")
def _client_trickle(tmp: Path) -> tuple[str, str]:
    def respond(conn: socket.socket, n: int) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
        )
        for _ in range(400):
            conn.sendall(b" ")
            time.sleep(0.5)

    listener, port = raw_server(respond)
    try:
        done = kvarena(
            "eval", "-m", "x", "--api", "anthropic", "--base-url", f"http://127.0.0.1:{port}",
            "-s", "easy", "-n", "1", "--steps", "2", "--timeout", "5", "--max-retries", "0",
            "-o", str(tmp / "run"), timeout=120,
        )  # fmt: skip
    finally:
        listener.close()
    if done.timed_out:
        return "hang", "over 120 s"
    lines = (tmp / "run" / "results.jsonl").read_text().splitlines()
    error = json.loads(lines[0])["error"] if lines else ""
    if done.rc != 3 or "within 5 s" not in (error or ""):
        return "crash", f"exit {done.rc}: {error}"
    return "clean", f"attempt cut at 5 s; run {done.seconds:.0f}s (was 85 s an attempt)"


@case("hosted clients", "a 64 MiB body (limit 4 MiB)")
def _client_big_body(tmp: Path) -> tuple[str, str]:
    sent = {"bytes": 0}

    def respond(conn: socket.socket, n: int) -> None:
        size = 64 << 20
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
        )
        conn.sendall(head.encode())
        chunk = b" " * (1 << 20)
        with contextlib.suppress(OSError):
            for _ in range(64):
                conn.sendall(chunk)
                sent["bytes"] += len(chunk)

    listener, port = raw_server(respond)
    try:
        done = kvarena(
            "eval", "-m", "x", "--base-url", f"http://127.0.0.1:{port}/v1", "-s", "easy",
            "-n", "1", "--steps", "2", "--max-retries", "0", "-o", str(tmp / "run"), timeout=120,
        )  # fmt: skip
    finally:
        listener.close()
    lines = (tmp / "run" / "results.jsonl").read_text().splitlines() if done.rc else []
    error = json.loads(lines[0])["error"] if lines else ""
    if done.rc != 3 or "over 4194304 bytes" not in (error or ""):
        return "crash", f"exit {done.rc}: {error}"
    if sent["bytes"] > 24 << 20:
        return "leak", f"the client read {sent['bytes'] >> 20} MiB"
    return "clean", f"refused after ~{sent['bytes'] >> 20} MiB sent (socket buffers)"
