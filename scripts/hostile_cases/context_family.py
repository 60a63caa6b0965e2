"""The context family: a stream that never ends, long recall queries, its archive on a full disk."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
from pathlib import Path

from .disk_full import tmpfs
from .harness import (
    CaseFn,
    Verdict,
    case,
    kvarena,
    one_line_error,
)
from .hosted_clients import raw_server


@case("context family", "context-eval against a stream that never ends, --timeout 2")
def _context_stall(tmp: Path) -> Verdict:
    def stall(conn: socket.socket, n: int) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9999\r\n\r\n"
        conn.sendall(head + b"{")
        with contextlib.suppress(OSError):
            for _ in range(600):
                time.sleep(0.5)
                conn.sendall(b" ")

    listener, port = raw_server(stall)
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
        with tmpfs(tmp / "disk", "64k") as mounted:
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
