"""The hostile harness: every way of breaking kvarena that an attacker tried (hostile files,
servers, disks, clients, Gymnasium arguments, signals), run against this checkout, one row per
case, and the table surface × cases × clean × crashes × hangs × lost × leaks.

    uv run python scripts/hostile.py            # every case (a few minutes)
    uv run python scripts/hostile.py --only report --json out.json

A case is *clean* when it ends as documented (docs/failures.md): a one-line error with its exit
status, a 4xx JSON answer, a bounded wait, a refused symlink. Otherwise it counts as a
*crash* (a traceback, the "unexpected ... (a bug)" line, a dropped connection, a wrong exit
status), a *hang* (over its time bound), *lost* (a partial line, a run.json that does not say
what happened, a resume that does not finish, a truncated output file) or a *leak* (a secret in
a written file, a write outside the run directory, a process or thread that outlives its
bound). Real `kvarena` processes run the CLI cases; the server cases use raw sockets against
`kvarena serve-policy`. Cases that need root (a 64 KiB tmpfs) say "skipped" where it is
refused. Not run in CI (the tests hold the same cases, smaller).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from evals.common.raw_http import exchange, read_request, read_response, request_bytes, serve_raw

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-canary-7Hq2Zt9WmXv4Lp8Rk3Nd6Bf1Jc5Ys0Ga"
GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'


@dataclass
class Outcome:
    surface: str
    case: str
    verdict: str = "clean"
    """clean, crash, hang, lost, leak or skipped."""
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Done:
    rc: int | None
    out: str
    err: str
    seconds: float
    timed_out: bool = False


CASES: list[tuple[str, str, Callable[[Path], tuple[str, str]]]] = []


def case(surface: str, name: str) -> Callable[[Callable[[Path], tuple[str, str]]], Any]:
    def register(fn: Callable[[Path], tuple[str, str]]) -> Callable[[Path], tuple[str, str]]:
        CASES.append((surface, name, fn))
        return fn

    return register


def kvarena(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Done:
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "evals.cli", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as expired:
        return Done(None, str(expired.stdout or ""), str(expired.stderr or ""), timeout, True)
    return Done(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def one_line_error(done: Done, expected: str, status: int = 2) -> tuple[str, str]:
    """clean when `done` exited `status` with one `error:` line holding `expected`."""
    if done.timed_out:
        return "hang", f"no answer in {done.seconds:.0f}s"
    text = done.err.strip()
    if "Traceback" in text or "(a bug" in text:
        return "crash", text.splitlines()[-1][:160] if text else ""
    last = text.splitlines()[-1] if text else ""
    if done.rc != status or not last.startswith("error:") or expected not in text:
        return "crash", f"exit {done.rc}: {last[:160]}"
    return "clean", f"exit {status} in {done.seconds:.1f}s: {last[:110]}"


# --- 1. trace files --------------------------------------------------------------------------
def _trace_case(name: str, content: bytes, expected: str) -> None:
    def run(tmp: Path) -> tuple[str, str]:
        path = tmp / name
        path.write_bytes(content)
        done = kvarena("eval", "-p", "lru", "--trace", str(path), "-o", str(tmp / "o"), timeout=90)
        return one_line_error(done, expected)

    case("trace files", f"{name.split('.', 1)[0]}")(run)


def _bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\n" * (1 << 20)
    return b"".join(packer.compress(block) for _ in range(size >> 20)) + packer.flush()


_WHOLE = gzip.compress((GOOD * 40).encode(), mtime=0)
_trace_case("truncated.jsonl.gz", _WHOLE[:-30], "the compressed data ends early")
_trace_case("plain-named-gz.jsonl.gz", (GOOD * 4).encode(), "not a gzip file")
_trace_case("garbage-after-header.jsonl.gz", _WHOLE[:10] + bytes(range(256)) * 8, "corrupt gzip")
_trace_case(
    "binary-in-gzip.jsonl.gz",
    gzip.compress(GOOD.encode() + bytes(range(128, 256)) * 8, mtime=0),
    "not UTF-8 text",
)
_trace_case("deep-json.jsonl", b"[" * 100_000, "a line longer than 64 KiB")
_trace_case(
    "deep-json-short.jsonl",
    GOOD.replace("[1, 2]", "[" * 20_000 + "]" * 20_000).encode(),
    "nested too deep",
)
_trace_case("huge-integer.jsonl", GOOD.replace("600", "9" * 5000).encode(), "4,300 digits")
_trace_case("nan.jsonl", GOOD.replace('"timestamp": 0', '"timestamp": NaN').encode(), "finite")


@case("trace files", "gzip bomb (1 GB of newlines)")
def _gzip_bomb(tmp: Path) -> tuple[str, str]:
    path = tmp / "bomb.jsonl.gz"
    path.write_bytes(_bomb(1 << 30))
    # bounded: ~8 s on an idle 2-core machine (decompressing 1 GiB); 300 s allows a busy one
    done = kvarena("eval", "-p", "lru", "--trace", str(path), "-o", str(tmp / "o"), timeout=300)
    return one_line_error(done, "holds no requests")


@case("trace files", "gzip bomb (2 GB of newlines)")
def _gzip_bomb_over(tmp: Path) -> tuple[str, str]:
    path = tmp / "bomb2.jsonl.gz"
    path.write_bytes(_bomb(2 << 30))
    done = kvarena("eval", "-p", "lru", "--trace", str(path), "-o", str(tmp / "o"), timeout=300)
    return one_line_error(done, "more than 1 GiB decompressed")


# --- 2. report -------------------------------------------------------------------------------
def _result_line(**changes: Any) -> dict[str, Any]:
    from evals.serving.jobs import EpisodeJob, run_job
    from kv_cache_env.episodes import EpisodeSpec

    line = run_job(EpisodeJob("lru", EpisodeSpec("easy", 0, steps=3)))
    line.update(changes)
    return line


def _report(tmp: Path, lines: list[dict[str, Any]], *extra: str, timeout: float = 120) -> Done:
    from evals.common.results import dumps

    path = tmp / "results.jsonl"
    path.write_text("".join(dumps(line) + "\n" for line in lines))
    return kvarena("report", str(path), "-o", str(tmp / "rep"), *extra, timeout=timeout)


def _report_ok(done: Done, tmp: Path, bound_s: float) -> tuple[str, str]:
    if done.timed_out:
        return "hang", f"no report in {done.seconds:.0f}s"
    if "Traceback" in done.err or "(a bug" in done.err or done.rc not in (0, 2):
        return "crash", (done.err.strip().splitlines() or [""])[-1][:160]
    if done.rc == 0:
        html = tmp / "rep" / "index.html"
        if not html.exists() or not html.read_text().rstrip().endswith("</html>"):
            return "lost", "index.html missing or cut"
    if done.seconds > bound_s:
        return "hang", f"{done.seconds:.0f}s (bound {bound_s:.0f}s)"
    return "clean", f"exit {done.rc} in {done.seconds:.1f}s"


@case("report", "usage.input_tokens = 10**400 with --price-*")
def _report_overflow(tmp: Path) -> tuple[str, str]:
    line = _result_line(
        usage={"input_tokens": 10**400, "cached_input_tokens": 0, "output_tokens": 1}
    )
    done = _report(tmp, [line], "--price-in", "1", "--price-cached", "0.1", "--price-write", "2")
    return _report_ok(done, tmp, 60)


@case("report", "a 100 KB agent name")
def _report_long_name(tmp: Path) -> tuple[str, str]:
    return _report_ok(_report(tmp, [_result_line(agent="a" * 100_000)]), tmp, 60)


@case("report", "a 20 MB agent name")
def _report_huge_name(tmp: Path) -> tuple[str, str]:
    return _report_ok(_report(tmp, [_result_line(agent="a" * 20_000_000)], timeout=300), tmp, 60)


@case("report", "1,500 agents")
def _report_many_agents(tmp: Path) -> tuple[str, str]:
    base = _result_line()
    lines = [{**base, "agent": f"agent-{i:04d}"} for i in range(1500)]
    return _report_ok(_report(tmp, lines, timeout=300), tmp, 60)


@case("report", "300 scenarios")
def _report_many_scenarios(tmp: Path) -> tuple[str, str]:
    base = _result_line()
    lines = [{**base, "scenario": f"s{i:03d}"} for i in range(300)]
    return _report_ok(_report(tmp, lines, timeout=300), tmp, 60)


@case("report", "50 copies of one (scenario, agent, seed) line")
def _report_duplicates(tmp: Path) -> tuple[str, str]:
    done = _report(tmp, [_result_line()] * 50)
    verdict, detail = _report_ok(done, tmp, 60)
    if verdict != "clean":
        return verdict, detail
    board = (tmp / "rep" / "leaderboard.md").read_text() if done.rc == 0 else ""
    if done.rc == 0 and "| 50 |" in board:
        return "crash", "counted as n = 50"
    return "clean", detail + (" (refused)" if done.rc == 2 else " (counted once)")


@case("report", "markup in names (<script>, <img onerror>, |, newline)")
def _report_markup(tmp: Path) -> tuple[str, str]:
    names = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "a|b|c", "x\n# pwned"]
    base = _result_line()
    done = _report(tmp, [{**base, "agent": name} for name in names])
    verdict, detail = _report_ok(done, tmp, 60)
    if verdict != "clean" or done.rc != 0:
        return verdict, detail
    board = (tmp / "rep" / "leaderboard.md").read_text()
    html = (tmp / "rep" / "index.html").read_text()
    if "<script>alert" in board or "<img src" in board or "\n# pwned" in board:
        return "crash", "leaderboard.md not escaped"
    tables: list[set[int]] = []  # the cell counts of each table's rows
    previous = ""
    for line in board.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append(set())
            if line.startswith("| "):  # not the |---| line
                tables[-1].add(line.count(" | "))
        previous = line
    if any(len(counts) > 1 for counts in tables):
        return "crash", "a | adds cells"
    if "<script>alert" in html or "<img src=x" in html:
        return "crash", "index.html not escaped"
    return "clean", detail


@case("report", "a NUL byte in a name")
def _report_nul(tmp: Path) -> tuple[str, str]:
    done = _report(tmp, [_result_line(agent="a\x00b")])
    verdict, detail = _report_ok(done, tmp, 60)
    if verdict == "clean" and done.rc == 0 and "\x00" in (tmp / "rep" / "index.html").read_text():
        return "crash", "a NUL byte reaches index.html"
    return verdict, detail


# --- 3. disk full ----------------------------------------------------------------------------
@contextlib.contextmanager
def _tmpfs(where: Path, size: str):
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


EVAL_SMALL = ["eval", "-p", "lru,fifo", "-s", "easy,medium", "-n", "10", "-j", "1"]


@case("disk full", "eval on a 64 KiB tmpfs, then resume")
def _disk_full_eval(tmp: Path) -> tuple[str, str]:
    with _tmpfs(tmp / "disk", "64k") as mounted:
        if not mounted:
            return "skipped", "mounting a tmpfs is not allowed here"
        out = tmp / "disk" / "run"
        done = kvarena(*EVAL_SMALL, "-o", str(out))
        verdict, detail = one_line_error(done, "No space left on device (ENOSPC)", status=1)
        if verdict != "clean":
            return verdict, detail
        data = (out / "results.jsonl").read_bytes()
        info = json.loads((out / "run.json").read_text())
        if data and not data.endswith(b"\n"):
            return "lost", "results.jsonl ends in a partial line"
        if info.get("status") != "error" or "ENOSPC" not in str(info.get("error")):
            return "lost", f"run.json says {info.get('status')!r}"
        subprocess.run(["mount", "-o", "remount,size=8m", str(tmp / "disk")], check=True)
        resumed = kvarena(*EVAL_SMALL, "-o", str(out), "--resume")
        if resumed.rc != 0 or (out / "results.jsonl").read_bytes().count(b"\n") != 40:
            return "lost", f"resume exit {resumed.rc}"
        kept = data.count(b"\n")
        return "clean", f"{kept} lines kept, run.json error, resume finished"


@case("disk full", "report onto a full tmpfs")
def _disk_full_report(tmp: Path) -> tuple[str, str]:
    run = tmp / "run"
    if kvarena(*EVAL_SMALL[:5], "-n", "2", "-o", str(run)).rc != 0:
        return "crash", "the run to report failed"
    with _tmpfs(tmp / "disk", "16k") as mounted:
        if not mounted:
            return "skipped", "mounting a tmpfs is not allowed here"
        (tmp / "disk" / "filler").write_bytes(b"x" * 12_000)
        done = kvarena("report", str(run), "-o", str(tmp / "disk" / "rep"))
        verdict, detail = one_line_error(done, "No space left on device", status=1)
        if verdict != "clean":
            return verdict, detail
        for name in ("index.html", "leaderboard.md"):
            if (tmp / "disk" / "rep" / name).exists():
                return "lost", f"a partial {name} was left"
        return "clean", detail


# --- 4. serve-policy -------------------------------------------------------------------------
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


# --- 5. hosted clients -----------------------------------------------------------------------
def _raw_server(respond: Callable[[socket.socket, int], None]) -> tuple[socket.socket, int]:
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

    listener, port = _raw_server(respond)
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

    listener, port = _raw_server(respond)
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

    listener, port = _raw_server(respond)
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


# --- 6. Gymnasium ----------------------------------------------------------------------------
def _expect_value_error(fn: Callable[[], Any]) -> tuple[str, str]:
    try:
        fn()
    except ValueError as error:
        return "clean", f"ValueError: {str(error)[:90]}"
    except Exception as error:  # any other exception is the crash counted
        return "crash", f"{type(error).__name__}: {error}"[:120]
    return "crash", "accepted"


@case("Gymnasium", "ServingTurns-v0 action 0.5")
def _gym_half(tmp: Path) -> tuple[str, str]:
    import numpy as np

    from kv_cache_env.rl.gym import ServingTurnsEnv

    env = ServingTurnsEnv(scenario="hard")
    env.reset(seed=0)
    return _expect_value_error(lambda: env.step(np.full(env.max_slots, 0.5)))


@case("Gymnasium", "vector env action 0.5")
def _gym_vector_half(tmp: Path) -> tuple[str, str]:
    import numpy as np

    from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv

    envs = ServingTurnsVectorEnv(2, scenario="hard")
    envs.reset(seed=0)
    try:
        return _expect_value_error(lambda: envs.step(np.full((2, envs.max_slots), 0.5)))
    finally:
        envs.close()


@case("Gymnasium", "a failed reset, then reset()")
def _gym_poison(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    env = ServingEnv(scenario="easy")
    env.reset(seed=0)
    verdict, detail = _expect_value_error(lambda: env.reset(options={"scenario": "nope"}))
    if verdict != "clean":
        return verdict, detail
    try:
        env.reset()
    except Exception as error:
        return "lost", f"the next reset fails: {error}"[:120]
    return "clean", "the failed reset stored nothing"


@case("Gymnasium", "weights NaN")
def _gym_nan_weights(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    return _expect_value_error(lambda: ServingEnv(weights={"failure_penalty": float("nan")}))


@case("Gymnasium", "unknown weights")
def _gym_unknown_weights(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    return _expect_value_error(lambda: ServingEnv(weights={"speed": 1.0}))


@case("Gymnasium", "steps = 10**7")
def _gym_steps(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    started = time.monotonic()
    verdict, detail = _expect_value_error(lambda: ServingEnv(steps=10**7).reset(seed=0))
    if time.monotonic() - started > 5:
        return "hang", f"{time.monotonic() - started:.0f}s"
    return verdict, detail


@case("Gymnasium", "--steps 10**7 on the CLI")
def _cli_steps(tmp: Path) -> tuple[str, str]:
    done = kvarena("eval", "-p", "lru", "-s", "easy", "--steps", str(10**7), "-o", str(tmp / "o"))
    return one_line_error(done, "--steps: must be between 1 and 10000")


# --- 7. files and secrets --------------------------------------------------------------------
EVAL_TINY = ["eval", "-p", "lru", "-s", "easy", "-n", "2", "--steps", "3", "-j", "1"]


@case("files and secrets", "a dangling results.jsonl symlink")
def _link_results(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    out.mkdir()
    (out / "results.jsonl").symlink_to(tmp / "outside.jsonl")
    done = kvarena(*EVAL_TINY, "-o", str(out))
    if (tmp / "outside.jsonl").exists():
        return "leak", "wrote outside --out"
    return one_line_error(done, "is a symbolic link")


@case("files and secrets", "a linked run.json.tmp")
def _link_tmp(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    out.mkdir()
    target = tmp / "precious"
    target.write_text("keep\n")
    (out / "run.json.tmp").symlink_to(target)
    done = kvarena(*EVAL_TINY, "-o", str(out))
    if target.read_text() != "keep\n":
        return "leak", "overwrote the link's target"
    return ("clean", "the link was never written") if done.rc == 0 else ("crash", done.err[-120:])


@case("files and secrets", "--resume onto a linked results.jsonl")
def _link_resume(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    if kvarena(*EVAL_TINY, "-o", str(out)).rc != 0:
        return "crash", "the first run failed"
    target = tmp / "precious"
    target.write_text("keep\n")
    (out / "results.jsonl").unlink()
    (out / "results.jsonl").symlink_to(target)
    done = kvarena(*EVAL_TINY, "-o", str(out), "--resume")
    if target.read_text() != "keep\n":
        return "leak", "overwrote the link's target"
    return one_line_error(done, "is a symbolic link")


def _leaks(root: Path, *texts: str) -> list[str]:
    pieces = {KEY[i : i + 8] for i in range(len(KEY) - 7)}
    found = [str(p) for p in root.rglob("*") if p.is_file() and any(
        piece in p.read_text(errors="replace") for piece in pieces)]  # fmt: skip
    found += [f"output {i}" for i, t in enumerate(texts) if any(piece in t for piece in pieces)]
    return found


class _EchoServer:
    """A chat endpoint that echoes the Authorization header: in a completion (first calls) and
    in a 401 (later ones)."""

    def __init__(self) -> None:
        from evals.servers.http_guard import GuardedHandler, GuardedHTTPServer

        served = {"n": 0}

        class Echo(GuardedHandler):
            def do_POST(self) -> None:
                if self.read_json() is None:
                    return
                served["n"] += 1
                auth = self.headers.get("Authorization", "")
                if served["n"] <= 2:
                    message = {"role": "assistant", "content": f"I saw {auth}"}
                    self.send_json(HTTPStatus.OK, {"choices": [{"index": 0, "message": message}]})
                else:
                    self.send_json(
                        HTTPStatus.UNAUTHORIZED,
                        {"error": {"message": f"Incorrect API key provided: {auth}"}},
                    )

        self.httpd = GuardedHTTPServer(("127.0.0.1", 0), Echo)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _secret_case(tmp: Path, base: str) -> tuple[str, str]:
    server = _EchoServer()
    try:
        out = tmp / "run"
        url = base.format(port=server.port)
        done = kvarena(
            "eval", "-m", "echo", "--base-url", url, "-s", "easy", "-n", "2", "--steps", "2",
            "-c", "1", "-o", str(out), env={"OPENAI_API_KEY": KEY},
        )  # fmt: skip
        report = kvarena("report", str(out), "-o", str(tmp / "rep"))
    finally:
        server.close()
    if done.rc not in (0, 3) or report.rc != 0:
        return "crash", f"exit {done.rc} / report {report.rc}: {done.err.strip()[-120:]}"
    leaked = _leaks(tmp, done.out, done.err, report.out, report.err)
    if leaked:
        return "leak", f"key found in {', '.join(leaked)[:120]}"
    files = sum(1 for p in tmp.rglob("*") if p.is_file())
    return "clean", f"key in none of {files} written files nor the output"


@case("files and secrets", "an endpoint echoing the key")
def _secret_echo(tmp: Path) -> tuple[str, str]:
    return _secret_case(tmp, "http://127.0.0.1:{port}/v1")


@case("files and secrets", "a key inside --base-url")
def _secret_url(tmp: Path) -> tuple[str, str]:
    return _secret_case(tmp, "http://user:" + KEY + "@127.0.0.1:{port}/v1?api_key=" + KEY)


# --- 8. runs ---------------------------------------------------------------------------------
def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@case("runs", "kill -9 of eval -j 2, 12 times")
def _kill9(tmp: Path) -> tuple[str, str]:
    survivors = 0
    for attempt in range(12):
        with (tmp / f"log{attempt}").open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "evals.cli", "eval", "-p", "lookahead", "-s", "hard",
                 "-n", "40", "-j", "2", "-o", str(tmp / f"run{attempt}")],
                cwd=ROOT, stdout=log, stderr=log,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(_children(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(process.pid)
        time.sleep(0.2 * (attempt % 4))  # kill at different moments of the run
        process.kill()
        process.wait()
        end = time.monotonic() + 5
        while any(_alive(w) for w in workers) and time.monotonic() < end:
            time.sleep(0.05)
        alive = [w for w in workers if _alive(w)]
        survivors += bool(alive)
        for worker in alive:
            with contextlib.suppress(OSError):
                os.kill(worker, signal.SIGKILL)
    if survivors:
        return "leak", f"workers outlived the parent by 5 s in {survivors} of 12 kills"
    return "clean", "no worker alive 5 s after any of 12 kills"


@case("runs", "SIGTERM during eval")
def _sigterm(tmp: Path) -> tuple[str, str]:
    out = tmp / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "evals.cli", "eval", "-p", "lookahead", "-s", "hard", "-n", "6",
         "-j", "1", "-o", str(out)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        results.exists() and results.read_bytes().count(b"\n") >= 1
    ):
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        return "hang", "SIGTERM did not stop the run in 30 s"
    info = json.loads((out / "run.json").read_text())
    if process.returncode != 143 or info.get("status") != "interrupted":
        return "lost", f"exit {process.returncode}, run.json {info.get('status')!r}"
    return "clean", "exit 143, run.json interrupted"


@case("runs", "every episode failed")
def _all_failed(tmp: Path) -> tuple[str, str]:
    done = kvarena(
        "eval", "-m", "x", "--base-url", "http://127.0.0.1:9/v1", "-s", "easy", "-n", "2",
        "--steps", "2", "--max-retries", "0", "--timeout", "2", "-o", str(tmp / "run"),
    )  # fmt: skip
    if done.rc != 3:
        return "crash", f"exit {done.rc}"
    return "clean", "exit 3 (finished, episodes failed)"


@case("runs", "-s ,")
def _empty_list(tmp: Path) -> tuple[str, str]:
    return one_line_error(kvarena("eval", "-s", ",", "-o", str(tmp / "o")), "the list is empty")


# --- the table -------------------------------------------------------------------------------
@dataclass
class Row:
    surface: str
    cases: int = 0
    counts: dict[str, int] = field(default_factory=dict)


COLUMNS = ("clean", "crash", "hang", "lost", "leak", "skipped")


def table(outcomes: list[Outcome]) -> str:
    rows: dict[str, Row] = {}
    for outcome in outcomes:
        row = rows.setdefault(outcome.surface, Row(outcome.surface))
        row.cases += 1
        row.counts[outcome.verdict] = row.counts.get(outcome.verdict, 0) + 1
    head = "| surface | cases | clean | crashes | hangs | lost | leaks | skipped |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    total = Row("all")
    for row in rows.values():
        total.cases += row.cases
        for column in COLUMNS:
            total.counts[column] = total.counts.get(column, 0) + row.counts.get(column, 0)
    for row in [*rows.values(), total]:
        cells = [str(row.counts.get(c, 0)) for c in COLUMNS]
        name = f"**{row.surface}**" if row is total else row.surface
        lines.append(f"| {name} | {row.cases} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases of surfaces whose name contains this")
    parser.add_argument("--json", help="write every outcome here")
    args = parser.parse_args()
    outcomes: list[Outcome] = []
    for surface, name, fn in CASES:
        if args.only and args.only not in surface:
            continue
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
            try:
                verdict, detail = fn(Path(folder))
            except Exception as error:  # the harness reports, never dies
                verdict, detail = "crash", f"harness: {type(error).__name__}: {error}"[:160]
        detail = " ".join(detail.split())
        outcome = Outcome(surface, name, verdict, detail, time.monotonic() - started)
        outcomes.append(outcome)
        print(f"{verdict:>7}  {surface} / {name}: {detail}", flush=True)
    print()
    print(table(outcomes))
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1) + "\n")
    if any(o.verdict in ("crash", "hang", "leak") for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
