"""Hostile results for `kvarena report`: overflowing numbers, huge and many names, markup and NUL
bytes, duplicate lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .harness import (
    Done,
    case,
    kvarena,
)


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
