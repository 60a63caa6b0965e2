"""Numbers, names and paths out of range on the command line: each refused at the edge with one
line."""

from __future__ import annotations

from pathlib import Path

from .harness import (
    Verdict,
    case,
    kvarena,
    one_line_error,
)

LONG = "t" * 300
"""A path component longer than any file system's NAME_MAX (255 bytes)."""
HUGE_INT = "1" + "0" * 5000
"""An integer of 5,001 digits: past Python's 4,300-digit string conversion limit."""
EVAL_ONE = ["eval", "-p", "lru", "-s", "easy", "-n", "1", "-j", "1"]
CONTEXT_ONE = ["context-eval", "-p", "noop", "-l", "easy", "-n", "1"]
REPLAY = ["cache-replay", ".", "--price-in", "1", "--price-cached", "1", "--price-write", "1"]


def edge_case(surface: str, name: str, args: list[str], expected: str) -> None:
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
    edge_case("numbers and names", _name, _args, _expected)


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
    edge_case("paths", _name, _args, f"{_option} ")


@case("paths", "every path refusal says 'name too long'", fast=True)
def _name_too_long_wording(tmp: Path) -> Verdict:
    done = kvarena(*EVAL_ONE, "-o", str(tmp / LONG), timeout=60)
    return one_line_error(done, "name too long (a component of 300 bytes; at most 255)")
