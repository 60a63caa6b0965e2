"""The hostile harness: every way of breaking kvarena that an attacker tried (hostile files,
servers, disks, clients, Gymnasium arguments, signals), run against this checkout, one row per
case, and the table surface × cases × clean × crashes × hangs × lost × leaks.

    uv run python scripts/hostile.py            # every case (a few minutes)
    uv run python scripts/hostile.py --only report --json out.json
    uv run python scripts/hostile.py --fast     # the fast part (the test suite runs it)

A case is *clean* when it ends as documented (docs/failures.md): a one-line error with its exit
status, a 4xx JSON answer, a bounded wait, a refused symlink. Otherwise it counts as a
*crash* (a traceback, the "unexpected ... (a bug)" line, a dropped connection, a wrong exit
status), a *hang* (over its time bound), *lost* (a partial line, a run.json that does not say
what happened, a resume that does not finish, a truncated output file) or a *leak* (a secret in
a written file, a write outside the run directory, a process or thread that outlives its
bound). Real `kvarena` processes run the CLI cases; the server cases use raw sockets against
`kvarena serve-policy`. Cases that need root (a 64 KiB tmpfs) say "skipped" where it is
refused. Cases marked fast (seconds each: bad input refused at the edge, Gymnasium arguments)
are the harness's fast part, which `tests/test_hostile_harness.py` runs case by case; the rest
(bombs, full disks, slow servers, kills) run here only.
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


Verdict = tuple[str, str]
CaseFn = Callable[[Path], Verdict]


@dataclass(frozen=True)
class Case:
    surface: str
    name: str
    fn: CaseFn
    fast: bool = False
    """Part of the fast part the test suite runs (a few seconds at most)."""


CASES: list[Case] = []


def case(surface: str, name: str, *, fast: bool = False) -> Callable[[CaseFn], CaseFn]:
    def register(fn: CaseFn) -> CaseFn:
        CASES.append(Case(surface, name, fn, fast))
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

    case("trace files", f"{name.split('.', 1)[0]}", fast=True)(run)


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


@case("Gymnasium", "ServingTurns-v0 action 0.5", fast=True)
def _gym_half(tmp: Path) -> tuple[str, str]:
    import numpy as np

    from kv_cache_env.rl.gym import ServingTurnsEnv

    env = ServingTurnsEnv(scenario="hard")
    env.reset(seed=0)
    return _expect_value_error(lambda: env.step(np.full(env.max_slots, 0.5)))


@case("Gymnasium", "vector env action 0.5", fast=True)
def _gym_vector_half(tmp: Path) -> tuple[str, str]:
    import numpy as np

    from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv

    envs = ServingTurnsVectorEnv(2, scenario="hard")
    envs.reset(seed=0)
    try:
        return _expect_value_error(lambda: envs.step(np.full((2, envs.max_slots), 0.5)))
    finally:
        envs.close()


@case("Gymnasium", "a failed reset, then reset()", fast=True)
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


@case("Gymnasium", "weights NaN", fast=True)
def _gym_nan_weights(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    return _expect_value_error(lambda: ServingEnv(weights={"failure_penalty": float("nan")}))


@case("Gymnasium", "unknown weights", fast=True)
def _gym_unknown_weights(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    return _expect_value_error(lambda: ServingEnv(weights={"speed": 1.0}))


@case("Gymnasium", "steps = 10**7", fast=True)
def _gym_steps(tmp: Path) -> tuple[str, str]:
    from kv_cache_env.rl.gym import ServingEnv

    started = time.monotonic()
    verdict, detail = _expect_value_error(lambda: ServingEnv(steps=10**7).reset(seed=0))
    if time.monotonic() - started > 5:
        return "hang", f"{time.monotonic() - started:.0f}s"
    return verdict, detail


@case("Gymnasium", "--steps 10**7 on the CLI", fast=True)
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
    """Files under `root` and texts holding any 8 consecutive characters of KEY, in any case."""
    pieces = {KEY[i : i + 8].lower() for i in range(len(KEY) - 7)}
    found = [str(p) for p in root.rglob("*") if p.is_file() and any(
        piece in p.read_text(errors="replace").lower() for piece in pieces)]  # fmt: skip
    found += [
        f"output {i}" for i, t in enumerate(texts) if any(piece in t.lower() for piece in pieces)
    ]
    return found


class _EchoServer:
    """A chat endpoint that echoes the Authorization header: in a completion (first calls) and
    in a 401 (later ones)."""

    def __init__(self, upper: bool = False) -> None:
        from evals.servers.http_guard import GuardedHandler, GuardedHTTPServer

        served = {"n": 0}

        class Echo(GuardedHandler):
            def do_POST(self) -> None:
                if self.read_json() is None:
                    return
                served["n"] += 1
                auth = self.headers.get("Authorization", "")
                auth = auth.upper() if upper else auth
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


def _secret_case(tmp: Path, base: str, upper: bool = False) -> tuple[str, str]:
    server = _EchoServer(upper)
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


@case("runs", "-s ,", fast=True)
def _empty_list(tmp: Path) -> tuple[str, str]:
    return one_line_error(kvarena("eval", "-s", ",", "-o", str(tmp / "o")), "the list is empty")


# --- 9. numbers and names out of range ---------------------------------------------------------
LONG = "t" * 300
"""A path component longer than any file system's NAME_MAX (255 bytes)."""
HUGE_INT = "1" + "0" * 5000
"""An integer of 5,001 digits: past Python's 4,300-digit string conversion limit."""
EVAL_ONE = ["eval", "-p", "lru", "-s", "easy", "-n", "1", "-j", "1"]
CONTEXT_ONE = ["context-eval", "-p", "noop", "-l", "easy", "-n", "1"]
REPLAY = ["cache-replay", ".", "--price-in", "1", "--price-cached", "1", "--price-write", "1"]


def _edge_case(surface: str, name: str, args: list[str], expected: str) -> None:
    """A command that must stop at the edge: exit 2, one `error:` line holding `expected`,
    nothing written under the case's folder."""

    def run(tmp: Path) -> Verdict:
        given = [str(tmp / "o") if a == "OUT" else a.replace("TMP", str(tmp)) for a in args]
        if given[0] in ("eval", "context-eval") and "-o" not in given:
            given += ["-o", str(tmp / "o")]
        verdict, detail = one_line_error(kvarena(*given, timeout=60), expected)
        if verdict == "clean" and (tmp / "o").exists():
            return "lost", "it wrote --out before refusing"
        return verdict, detail

    case(surface, name, fast=True)(run)


_NUMBERS = [
    ("eval --weights 10**400", [*EVAL_ONE, "--weights", '{"latency_penalty": 1' + "0" * 400 + "}"],
     "--weights: a number of 401 characters (at most 400"),
    ("eval --weights 10**39", [*EVAL_ONE, "--weights", '{"latency_penalty": 1' + "0" * 39 + "}"],
     "--weights: latency_penalty must be finite and at most 1e+06"),
    ("eval --weights a 5,000-digit integer",
     [*EVAL_ONE, "--weights", '{"latency_penalty": ' + HUGE_INT + "}"],
     "--weights: a number of 5,001 characters"),
    ("eval --weights a 5,000-digit fraction",
     [*EVAL_ONE, "--weights", '{"latency_penalty": 0.' + "3" * 5000 + "}"],
     "--weights: a number of 5,002 characters"),
    ("context-eval --weights oom_penalty 10**400",
     [*CONTEXT_ONE, "--weights", '{"oom_penalty": 1' + "0" * 400 + "}"],
     "--weights: a number of 401 characters"),
    ("context-eval --weights oom_penalty 5,000 digits",
     [*CONTEXT_ONE, "--weights", '{"oom_penalty": ' + HUGE_INT + "}"],
     "--weights: a number of 5,001 characters"),
    ("--weights naming a component twice",
     [*EVAL_ONE, "--weights", '{"latency_penalty": 1, "latency_penalty": 2}'],
     "--weights: 'latency_penalty' is given twice"),
    ("context-eval --weights naming a component twice",
     [*CONTEXT_ONE, "--weights", '{"oom_penalty": 1, "oom_penalty": 2}'],
     "--weights: 'oom_penalty' is given twice"),
    ("--weights of 100,000 characters",
     [*EVAL_ONE, "--weights", '{"latency_penalty": 1' + " " * 100_000 + "}"],
     "--weights: 100,022 characters of JSON (at most 10,000)"),
    ("-s easy, (an empty item)", ["eval", "-p", "lru", "-s", "easy,", "-n", "1"],
     "--scenario 'easy,': an empty item"),
    ("-p lru,,fifo (an empty item)", ["eval", "-p", "lru,,fifo", "-s", "easy", "-n", "1"],
     "--policy 'lru,,fifo': an empty item"),
    ("context-eval -l ,easy", ["context-eval", "-p", "noop", "-l", ",easy", "-n", "1"],
     "--level ',easy': an empty item"),
    ("--seed 2^62 -n 2 (past the maximum)",
     ["eval", "-p", "lru", "-s", "easy", "-n", "2", "--seed", str(2**62)],
     "--seed: the last episode's seed (--seed + episodes - 1 = 4611686018427387905)"),
    ("context-eval --seed 2^62 -n 5",
     ["context-eval", "-p", "noop", "-l", "easy", "-n", "5", "--seed", str(2**62)],
     "--seed: the last episode's seed"),
    ("context-eval --timeout nan", [*CONTEXT_ONE, "--timeout", "nan"],
     "--timeout: must be a finite number"),
    ("context-eval --max-retries 10**6", [*CONTEXT_ONE, "--max-retries", "1000000"],
     "--max-retries: must be between 0 and 20"),
    ("bench -n 10**11", ["bench", "-n", str(10**11), "--no-speed"],
     "--episodes: must be between 1 and 100000"),
    ("bench --speed-episodes 10**9", ["bench", "--speed-episodes", str(10**9)],
     "--speed-episodes: must be between 1 and 100000"),
    ("validate -n 10**12", ["validate", "-n", str(10**12)],
     "--episodes: must be between 1 and 100000"),
    ("serve-policy --header-timeout nan", ["serve-policy", "lru", "--header-timeout", "nan"],
     "--header-timeout: must be a finite number"),
    ("cache-replay --price-in nan", ["cache-replay", ".", "--price-in", "nan", "--price-cached",
     "1", "--price-write", "1"], "--price-in: must be a finite number"),
    ("cache-replay --cache-min-tokens 10**20", [*REPLAY, "--cache-min-tokens", str(10**20)],
     "--cache-min-tokens: must be between 0 and 1048576"),
    ("report --price-in 1e400", ["report", "TMP", "--price-in", "1e400", "--price-cached", "1",
     "--price-write", "1"], "--price-in: must be a finite number, got inf"),
]  # fmt: skip
for _name, _args, _expected in _NUMBERS:
    _edge_case("numbers and names", _name, _args, _expected)


@case("numbers and names", "-p lru,lru -s easy,easy (repeats run once)", fast=True)
def _repeated_names(tmp: Path) -> Verdict:
    out = tmp / "run"
    done = kvarena("eval", "-p", "lru,lru", "-s", "easy,easy", "-n", "1", "--steps", "2",
                   "-j", "1", "-o", str(out), timeout=60)  # fmt: skip
    if done.timed_out or done.rc != 0 or "Traceback" in done.err:
        return ("hang", "no answer") if done.timed_out else ("crash", f"exit {done.rc}")
    lines = (out / "results.jsonl").read_text().splitlines()
    if len(lines) != 1:
        return "crash", f"{len(lines)} lines for one (scenario, agent, seed)"
    if "more than once; run once" not in " ".join(done.err.split()):
        return "crash", "no note about the repeat"
    return "clean", "one run, with a note"


# --- 10. paths too long or too deep ------------------------------------------------------------
_PATHS = [
    ("eval --trace <300 chars>.jsonl", ["eval", "-p", "lru", "-n", "1", "-j", "1", "--trace",
     f"{LONG}.jsonl"], "--trace"),
    ("eval -o DIR/<300 chars>", [*EVAL_ONE, "-o", f"TMP/{LONG}"], "--out"),
    ("eval -o 70 folders deep", [*EVAL_ONE, "-o", "TMP/" + "/".join(["d"] * 70)], "--out"),
    ("eval -o a 6,000-byte path", [*EVAL_ONE, "-o", "TMP/" + "/".join(["dd"] * 2000)], "--out"),
    ("context-eval -o DIR/<300 chars>", [*CONTEXT_ONE, "-o", f"TMP/{LONG}"], "--out"),
    ("context-eval --reader hf:<300 chars>", [*CONTEXT_ONE, "--reader", f"hf:TMP/{LONG}"],
     "--reader"),
    ("report DIR/<300 chars>", ["report", f"TMP/{LONG}"], "RUNS"),
    ("report -o DIR/<300 chars>", ["report", "TMP", "-o", f"TMP/{LONG}"], "--out"),
    ("report --dataset DIR/<300 chars>", ["report", "TMP", "--dataset", f"TMP/{LONG}"],
     "--dataset"),
    ("bench --trace <300 chars>", ["bench", "--no-speed", "--trace", f"TMP/{LONG}.jsonl"],
     "--trace"),
    ("serve-model local:<300 chars>.gguf", ["serve-model", f"local:TMP/{LONG}.gguf"], "MODEL"),
    ("cache-replay <300 chars>", ["cache-replay", f"TMP/{LONG}", *REPLAY[2:]], "TRANSCRIPTS"),
]  # fmt: skip
for _name, _args, _option in _PATHS:
    _edge_case("paths", _name, _args, f"{_option} ")


@case("paths", "every path refusal says 'name too long'", fast=True)
def _name_too_long_wording(tmp: Path) -> Verdict:
    done = kvarena(*EVAL_ONE, "-o", str(tmp / LONG), timeout=60)
    return one_line_error(done, "name too long (a component of 300 bytes; at most 255)")


# --- 11. resume across versions ----------------------------------------------------------------
def _edit_lines(path: Path, indices: tuple[int, ...], **changes: Any) -> None:
    lines = path.read_text().splitlines()
    for i in indices:
        line = json.loads(lines[i])
        line.update(changes)
        lines[i] = json.dumps(line, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")


def _resume_case(args: list[str], edit: dict[str, Any], dropped: int) -> CaseFn:
    def run(tmp: Path) -> Verdict:
        out = tmp / "run"
        if kvarena(*args, "-o", str(out), timeout=120).rc != 0:
            return "crash", "the first run failed"
        whole = (out / "results.jsonl").read_bytes()
        _edit_lines(out / "results.jsonl", (0, 2), **edit)
        done = kvarena(*args, "-o", str(out), "--resume", timeout=120)
        if done.rc != 0 or "Traceback" in done.err:
            return "crash", f"resume exit {done.rc}: {done.err.strip()[-120:]}"
        if (out / "results.jsonl").read_bytes() != whole:
            return "lost", "the resumed file differs from the undisturbed run"
        said = f"dropped {dropped} line(s) of another schema or suite version"
        if said not in " ".join(done.err.split()):
            return "crash", "the resume did not say how many lines it dropped"
        report = kvarena("report", str(out), "-o", str(tmp / "rep"), timeout=120)
        if report.rc != 0:
            return "crash", f"report refused the resumed run: {report.err.strip()[-120:]}"
        return "clean", f"{said}; rerun byte-identically; report accepts it"

    return run


SERVING_RUN = ["eval", "-p", "lru,fifo", "-s", "easy", "-n", "2", "--steps", "3", "-j", "1"]
CONTEXT_RUN = ["context-eval", "-p", "noop", "-l", "easy", "-n", "3"]
case("resume", "eval --resume over 2 lines of suite version 2")(
    _resume_case(SERVING_RUN, {"suite_version": "2"}, 2)
)
case("resume", "eval --resume over 2 lines of schema version 2")(
    _resume_case(SERVING_RUN, {"schema_version": 2}, 2)
)
case("resume", "context-eval --resume over 2 lines of another suite version")(
    _resume_case(CONTEXT_RUN, {"suite_version": "0"}, 2)
)


# --- 12. API keys ------------------------------------------------------------------------------
def _key_case(family: str, key: str, expected: str) -> CaseFn:
    def run(tmp: Path) -> Verdict:
        where = ["-s", "easy"] if family == "eval" else ["-l", "easy"]
        done = kvarena(
            family, "-m", "x", "--base-url", "http://192.0.2.1:9/v1", *where, "-n", "1",
            "-o", str(tmp / "o"), env={"OPENAI_API_KEY": key}, timeout=60,
        )  # fmt: skip
        verdict, detail = one_line_error(done, expected)
        if key[:8] in done.err or key[:8] in done.out:
            return "leak", "the refusal shows the key"
        return verdict, detail

    return run


for _family in ("eval", "context-eval"):
    case("API keys", f"{_family}: a key with non-ASCII characters", fast=True)(
        _key_case(_family, "sk-abcdéfghijklmnop", "OPENAI_API_KEY: the API key holds character")
    )
    case("API keys", f"{_family}: a key with CRLF", fast=True)(
        _key_case(_family, "sk-abcdefgh\r\nX-Evil: 1", "the API key holds a line break")
    )


@case("API keys", "an endpoint echoing the key upper-cased")
def _secret_upper(tmp: Path) -> Verdict:
    return _secret_case(tmp, "http://127.0.0.1:{port}/v1", upper=True)


# --- 13. context family ------------------------------------------------------------------------
@case("context family", "context-eval against a stream that never ends, --timeout 2")
def _context_stall(tmp: Path) -> Verdict:
    def stall(conn: socket.socket, n: int) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9999\r\n\r\n"
        conn.sendall(head + b"{")
        with contextlib.suppress(OSError):
            for _ in range(600):
                time.sleep(0.5)
                conn.sendall(b" ")

    listener, port = _raw_server(stall)
    try:
        done = kvarena(
            "context-eval", "-m", "fake", "--base-url", f"http://127.0.0.1:{port}/v1", "-l",
            "easy", "-n", "5", "--timeout", "2", "--max-retries", "1", "-o", str(tmp / "run"),
            timeout=120,
        )  # fmt: skip
    finally:
        listener.close()
    if done.timed_out:
        return "hang", f"no end in {done.seconds:.0f}s"
    if done.rc != 3:
        return "crash", f"exit {done.rc}: {done.err.strip()[-120:]}"
    if done.seconds > 60:
        return "hang", f"{done.seconds:.0f}s for 5 episodes (bound 60 s)"
    return "clean", f"5 episodes failed by the deadline in {done.seconds:.0f}s (was 176 s)"


@case("context family", "20 recall queries of 4,000 characters", fast=True)
def _long_recall(tmp: Path) -> Verdict:
    from kv_context_env.generator.conversation import generate_conversation
    from kv_context_env.llm.agent import call_context_tool
    from kv_context_env.sim.episode import ContextEpisode
    from model_client.model_output import ToolCall

    started = time.monotonic()
    with ContextEpisode(generate_conversation(0, "easy"), archive_dir=tmp) as episode:
        answers = []
        while not episode.done:
            for i in range(20):
                query = json.dumps({"query": (f"q{i} word " * 1000)[:4000]})
                answers.append(call_context_tool(episode, ToolCall(str(i), "recall", query)))
            episode.enforce()
            episode.step(answer="" if episode.pending_question else None)
        record = episode.record()
    took = time.monotonic() - started
    if any(not a.startswith("error: a recall query of 4,000 characters") for a in answers):
        return "crash", f"a long query was searched: {answers[0][:80]}"
    if record.invalid_actions != len(answers):
        return "crash", f"{record.invalid_actions} of {len(answers)} counted invalid"
    if took > 20:
        return "hang", f"{took:.0f}s"
    return "clean", f"{len(answers)} refused and counted; the episode went on ({took:.1f}s)"


def _context_disk_case(on_tmpdir: bool) -> CaseFn:
    def run(tmp: Path) -> Verdict:
        args = ["context-eval", "-p", "noop,sliding-window", "-l", "easy", "-n", "2"]
        clean = kvarena(*args, "-o", str(tmp / "clean"), timeout=120)
        if clean.rc != 0:
            return "crash", "the undisturbed run failed"
        with _tmpfs(tmp / "disk", "64k") as mounted:
            if not mounted:
                return "skipped", "mounting a tmpfs is not allowed here"
            out = tmp / "run" if on_tmpdir else tmp / "disk" / "run"
            env = {"TMPDIR": str(tmp / "disk")} if on_tmpdir else None
            done = kvarena(*args, "-o", str(out), env=env, timeout=120)
            verdict, detail = one_line_error(done, "cannot write", status=1)
            if verdict != "clean":
                return verdict, detail
            data = (out / "results.jsonl").read_bytes()
            if data and not data.endswith(b"\n"):
                return "lost", "results.jsonl ends in a partial line"
            info = json.loads((out / "run.json").read_text())
            if info.get("status") != "error":
                return "lost", f"run.json says {info.get('status')!r}"
            if not on_tmpdir:
                subprocess.run(["mount", "-o", "remount,size=8m", str(tmp / "disk")], check=True)
            resumed = kvarena(*args, "-o", str(out), "--resume", timeout=120)
            if resumed.rc != 0:
                return "lost", f"resume exit {resumed.rc}: {resumed.err.strip()[-100:]}"
            reference = (tmp / "clean" / "results.jsonl").read_bytes()
            if (out / "results.jsonl").read_bytes() != reference:
                return "lost", "the resumed results differ from an undisturbed run"
            return "clean", f"{detail[:70]}; resume finished byte-identically"

    return run


case("disk full", "context-eval with TMPDIR on a 64 KiB tmpfs, then resume")(
    _context_disk_case(on_tmpdir=True)
)
case("disk full", "context-eval -o on a full tmpfs, then resume")(
    _context_disk_case(on_tmpdir=False)
)


# --- 14. Gymnasium arguments -------------------------------------------------------------------
def _gym(build: Callable[[], Any], bound_s: float = 5.0) -> Verdict:
    started = time.monotonic()
    verdict, detail = _expect_value_error(build)
    took = time.monotonic() - started
    return ("hang", f"{took:.0f}s") if took > bound_s else (verdict, detail)


def _gym_env(**kwargs: Any) -> Any:
    from kv_cache_env.rl.gym import ServingEnv

    return ServingEnv(**{"scenario": "easy", **kwargs})


_GYM: list[tuple[str, Callable[[], Any]]] = [
    ("weights latency_penalty 10**400", lambda: _gym_env(weights={"latency_penalty": 10**400})),
    ("weights as a list of pairs", lambda: _gym_env(weights=[("latency_penalty", 1.0)])),
    ("max_slots = 10**8 (gym.make, reset)", lambda: _gym_make(max_slots=10**8)),
    ("max_slots = 2.5", lambda: _gym_env(max_slots=2.5)),
    ("steps = True", lambda: _gym_env(steps=True)),
    ("max_calls_per_turn = 10**9", lambda: _gym_env(max_calls_per_turn=10**9)),
    ("seed_range = (5, 5)", lambda: _gym_env(seed_range=(5, 5))),
    ("reset(options=[('seed', 1)])", lambda: _gym_env().reset(options=[("seed", 1)])),
    ("reset(seed=True)", lambda: _gym_env().reset(seed=True)),
    ("reset(options={'seed': 2**64})", lambda: _gym_env().reset(options={"seed": 2**64})),
    ("vector num_envs = True", lambda: _gym_vector(True)),
    ("vector reset(seed=[1, True])", lambda: _gym_vector(2).reset(seed=[1, True])),
]


def _gym_make(**kwargs: Any) -> Any:
    import gymnasium

    import kv_cache_env.rl.gym  # noqa: F401 - registers the envs

    env = gymnasium.make("kvcache/Serving-v0", **{"scenario": "easy", "steps": 3, **kwargs})
    return env.reset(seed=0)


def _gym_vector(num_envs: Any) -> Any:
    from kv_cache_env.rl.gym_vector import ServingTurnsVectorEnv

    return ServingTurnsVectorEnv(num_envs, scenario="easy")


for _name, _build in _GYM:
    case("Gymnasium", _name, fast=True)(lambda tmp, build=_build: _gym(build))


# --- 15. trace size ----------------------------------------------------------------------------
def _tiled_trace(path: Path, requests: int) -> None:
    """A Mooncake-format gzip trace of `requests` lines: the built-in conversation trace tiled
    (timestamps shifted a copy's span, hash ids offset per copy)."""
    from kv_cache_env.traces.trace_data import resolve_trace

    with gzip.open(resolve_trace("mooncake-conversation"), "rt") as source:
        rows = [json.loads(line) for line in source if line.strip()]
    span = rows[-1]["timestamp"] + 1000
    top = max(max(r["hash_ids"] or [0]) for r in rows) + 1
    with gzip.open(path, "wt", compresslevel=1) as out:
        for k in range(requests):
            copy, row = divmod(k, len(rows))
            r = rows[row]
            hashes = [h + copy * top for h in r["hash_ids"]]
            out.write(json.dumps({**r, "timestamp": r["timestamp"] + copy * span,
                                  "hash_ids": hashes}) + "\n")  # fmt: skip


_PEAK = (  # VmHWM, not ru_maxrss: that keeps the forking parent's peak across exec
    "import atexit, sys\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('peak_rss_kb', line.split()[1], file=sys.stderr)\n"
    "atexit.register(peak)\n"
    "from evals.cli import app\n"
    "sys.argv = ['kvarena', *sys.argv[1:]]\n"
    "app()\n"
)


def _peak_rss_mb(args: list[str], timeout: float) -> tuple[Done, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _PEAK, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)  # fmt: skip
    peak = [line for line in done.stderr.splitlines() if line.startswith("peak_rss_kb")]
    result = Done(done.returncode, done.stdout, done.stderr, time.monotonic() - started)
    return result, (int(peak[-1].split()[1]) / 1024 if peak else float("nan"))


@case("trace files", "replay memory per request (20,000 and 80,000 requests)")
def _replay_memory(tmp: Path) -> Verdict:
    from kv_cache_env.limits import MAX_TRACE_REQUESTS

    peaks = {}
    for n in (20_000, 80_000):
        _tiled_trace(tmp / f"t{n}.jsonl.gz", n)
        done, peaks[n] = _peak_rss_mb(
            ["eval", "-p", "lru", "--trace", str(tmp / f"t{n}.jsonl.gz"), "--full", "-j", "1",
             "-o", str(tmp / f"run{n}")], timeout=300,
        )  # fmt: skip
        if done.rc != 0:
            return "crash", f"the replay of {n:,} requests failed: {done.err.strip()[-100:]}"
    per_request_kb = (peaks[80_000] - peaks[20_000]) * 1024 / 60_000
    at_limit_gb = (peaks[20_000] + per_request_kb * (MAX_TRACE_REQUESTS - 20_000) / 1024) / 1024
    detail = (
        f"peak RSS {peaks[20_000]:.0f} MB / {peaks[80_000]:.0f} MB: {per_request_kb:.2f} KB a "
        f"request; ~{at_limit_gb:.1f} GB at the {MAX_TRACE_REQUESTS:,}-request limit"
    )
    return ("leak", detail) if per_request_kb > 4 else ("clean", detail)


@case("trace files", "a trace of 500,001 requests (one over the limit)")
def _trace_over_limit(tmp: Path) -> Verdict:
    from kv_cache_env.limits import MAX_TRACE_REQUESTS

    path = tmp / "big.jsonl.gz"
    line = '{"timestamp": %d, "input_length": 600, "output_length": 5, "hash_ids": [%d, %d]}\n'
    with gzip.open(path, "wt", compresslevel=1) as out:
        for i in range(MAX_TRACE_REQUESTS + 1):
            out.write(line % (i, 2 * i, 2 * i + 1))
    done = kvarena("eval", "-p", "lru", "--trace", str(path), "-o", str(tmp / "o"), timeout=300)
    return one_line_error(done, f"more than {MAX_TRACE_REQUESTS:,} requests")


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


def run_case(one: Case, folder: Path) -> Outcome:
    """One case in `folder` (an empty directory); never raises."""
    started = time.monotonic()
    try:
        verdict, detail = one.fn(folder)
    except Exception as error:  # the harness reports, never dies
        verdict, detail = "crash", f"harness: {type(error).__name__}: {error}"[:160]
    detail = " ".join(detail.split())
    return Outcome(one.surface, one.name, verdict, detail, time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases of surfaces whose name contains this")
    parser.add_argument("--fast", action="store_true", help="run the fast part only")
    parser.add_argument("--json", help="write every outcome here")
    args = parser.parse_args()
    outcomes: list[Outcome] = []
    for one in CASES:
        if (args.only and args.only not in one.surface) or (args.fast and not one.fast):
            continue
        with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
            outcome = run_case(one, Path(folder))
        outcomes.append(outcome)
        print(f"{outcome.verdict:>7}  {one.surface} / {one.name}: {outcome.detail}", flush=True)
    print()
    print(table(outcomes))
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1) + "\n")
    if any(o.verdict in ("crash", "hang", "leak") for o in outcomes):
        sys.exit(1)


if __name__ == "__main__":
    main()
