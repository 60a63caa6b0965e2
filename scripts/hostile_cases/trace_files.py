"""Hostile trace files: gzip and zlib bombs, a trace over the request limit, and the replay's
memory per request."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
import zlib
from pathlib import Path

from .harness import (
    GOOD,
    ROOT,
    Done,
    Verdict,
    case,
    kvarena,
    one_line_error,
)


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


def _gzip_bomb(gib: int, expected: str) -> None:
    """A case: `eval` on a gzip trace of `gib` GiB of newlines, answered by `expected`."""

    @case("trace files", f"gzip bomb ({gib} GiB of newlines)")
    def _run(tmp: Path) -> tuple[str, str]:
        path = tmp / f"bomb{gib}.jsonl.gz"
        path.write_bytes(_bomb(gib << 30))
        # bounded: ~8 s a GiB on an idle 2-core machine; 300 s allows a busy one
        done = kvarena("eval", "-p", "lru", "--trace", str(path), "-o", str(tmp / "o"), timeout=300)
        return one_line_error(done, expected)


_gzip_bomb(1, "holds no requests")
_gzip_bomb(2, "more than 1 GiB decompressed")


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
