"""Hostile clients of `kvarena serve-policy` over raw sockets: huge bodies, slow clients, idle
keep-alive, IPv6."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from evals.common.raw_http import exchange, read_response, request_bytes

from .harness import (
    ROOT,
    case,
    kvarena,
    one_line_error,
)


class _Server:
    """`kvarena serve-policy lru` in a subprocess on a free port."""

    def __init__(self, *extra: str, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family) as probe:
            probe.bind((host, 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "evals.cli", "serve-policy", "lru", "--port", str(self.port),
             "--host", host, *extra],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((host, self.port)):
                return
            time.sleep(0.1)
        raise RuntimeError("serve-policy did not start")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def threads(self) -> int:
        return len(list(Path(f"/proc/{self.process.pid}/task").iterdir()))

    def close(self) -> str:
        self.process.send_signal(signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err


def _post(body: bytes, length: str | None = None, path: str = "/v1/chat/completions") -> bytes:
    return request_bytes(path, body, length=length)


def _server_case(name: str, data: bytes, status: int) -> None:
    def run(tmp: Path) -> tuple[str, str]:
        server = _Server()
        try:
            verdict, detail = _judge(server.port, data, status)
        finally:
            err = server.close()
        if "Traceback" in err:
            return "crash", "the server printed a traceback"
        return verdict, detail

    case("serve-policy", name)(run)


def _judge(port: int, data: bytes, status: int) -> tuple[str, str]:
    try:
        answer = exchange(port, data)
    except TimeoutError:
        return "hang", "no answer in 10s"
    if answer is None:
        return "crash", "connection dropped without a response"
    got, body = answer.status, answer.body
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return "crash", f"{got} without a JSON error"
    if got != status:
        return "crash", f"{got}: {message[:80]}"
    return "clean", f"{got}: {message[:90]}"


def _messages(**changes: Any) -> bytes:
    body = {"model": "lru", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    return json.dumps({**body, **changes}).encode()


_server_case("deeply nested JSON", _post(b"[" * 100_000), 400)
_server_case(
    "non-text content parts",
    _post(json.dumps({"messages": [{"role": "user", "content": [{"type": "image"}]}]}).encode()),
    400,
)
_server_case("Messages system: 5", _post(_messages(system=5), path="/v1/messages"), 400)
_server_case(
    "Messages content: null",
    _post(_messages(messages=[{"role": "user", "content": None}]), path="/v1/messages"),
    400,
)
_server_case("Content-Length: abc", _post(b"{}", length="abc"), 400)
_server_case("Content-Length: 1.5", _post(b"{}", length="1.5"), 400)
_server_case("Content-Length: 10^12", _post(b"", length=str(10**12)), 413)
_server_case("Content-Length: -1", _post(b"{}", length="-1"), 400)


@case("serve-policy", "a 256 MiB body")
def _server_big_body(tmp: Path) -> tuple[str, str]:
    server = _Server()
    try:
        before = server.rss_mb()
        with socket.socket() as sock:
            sock.settimeout(20)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(_post(b"", length=str(256 << 20)))
            sent = 0
            with contextlib.suppress(OSError):
                chunk = b"x" * (1 << 20)
                while sent < 256 << 20:
                    sock.sendall(chunk)
                    sent += len(chunk)
            reply = b""
            with contextlib.suppress(OSError):
                reply = sock.recv(4096)
        growth = server.rss_mb() - before
        if not reply.startswith(b"HTTP/1.1 413"):
            return "crash", f"answered {reply[:20]!r}"
        if growth > 32:
            return "leak", f"RSS grew {growth:.0f} MB"
        return "clean", f"413 after {sent >> 20} MiB sent; RSS +{growth:.0f} MB"
    finally:
        server.close()


@case("serve-policy", "80 slow clients")
def _server_slow_clients(tmp: Path) -> tuple[str, str]:
    server = _Server("--header-timeout", "2")
    clients: list[socket.socket] = []
    try:
        for _ in range(80):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n")
            clients.append(sock)
        time.sleep(0.5)
        busy = server.threads()
        time.sleep(3)  # past the header deadline
        closed = 0
        for sock in clients:
            sock.settimeout(1)
            with contextlib.suppress(OSError):
                data = sock.recv(4096)
                closed += data == b"" or data.startswith(b"HTTP/1.1 408")
        answer = exchange(server.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        if closed < 80:
            return "leak", f"{80 - closed} slow clients still held after the deadline"
        if answer is None or answer[0] != 200:
            return "crash", "the server stopped answering"
        return "clean", f"all 80 cut at the 2 s header deadline ({busy} threads at peak)"
    finally:
        for sock in clients:
            sock.close()
        server.close()


@case("serve-policy", "idle keep-alive")
def _server_idle(tmp: Path) -> tuple[str, str]:
    server = _Server("--header-timeout", "2")
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.settimeout(10)
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            if read_response(sock) is None:
                return "crash", "no answer to the first request"
            started = time.monotonic()
            try:
                rest = sock.recv(1024)
            except TimeoutError:
                return "leak", "idle connection held past 10 s"
            waited = time.monotonic() - started
        return ("clean", f"closed after {waited:.1f}s idle") if rest == b"" else ("crash", "data")
    finally:
        server.close()


@case("serve-policy", "--host ::1")
def _server_ipv6(tmp: Path) -> tuple[str, str]:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        done = kvarena("serve-policy", "lru", "--host", "::1", "--port", "0", timeout=30)
        return one_line_error(done, "cannot listen there")
    server = _Server(host="::1")
    try:
        answer = exchange(server.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", host="::1")
        return ("clean", "answers on [::1]") if answer and answer[0] == 200 else ("crash", "no")
    finally:
        server.close()
