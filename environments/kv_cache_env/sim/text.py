"""The compact text form of an `Observation`, and its exact inverse.

`render(obs)` is what an LLM reads; `parse(render(obs)) == obs` for every observation, so a policy
served behind an HTTP chat endpoint decides from the text exactly as it would in-process.
Format (one header line, one table, an optional candidates line; the header is one line, shown
wrapped here):

    turn 3/15 | block 16 | gpu 812/1024 used 79.3% cached 40 free 172 | cpu 0/512 |
        link 42/step backlog 0 | queue 3 oldest 2/5 head 96 demand 250 preempted 1
    seq type phase prio kv tokens rate priv shared frees prog last loc xfer pause paused
    r12 context decode 0.62 fp16 1840 40 99 16 99 0.41 2 gpu 0 - 0
    r9 system idle 0.81 fp16 2210 35 120 32 120 0.30 -1 gpu 0 human 3
    candidates: r7=0.90 r3=0.85
"""

from __future__ import annotations

import re

from .observation import Candidate, EntryView, Observation, QueueView
from .types import BlockType, PauseKind, Phase, Quantization

TABLE_HEADER = (
    "seq type phase prio kv tokens rate priv shared frees prog last loc xfer pause paused"
)
_COLUMNS = len(TABLE_HEADER.split())

_HEADER = re.compile(
    r"turn (?P<turn>-?\d+)/(?P<turns>\d+) \| block (?P<block_size>\d+) \| "
    r"gpu (?P<used>\d+)/(?P<capacity>\d+) used [\d.]+% "
    r"cached (?P<cached>\d+) free -?\d+ \| cpu (?P<cpu_used>\d+)/(?P<cpu_capacity>\d+) \| "
    r"link (?:none|(?P<link>\d+)/step backlog (?P<backlog>\d+)) \| "
    r"queue (?P<waiting>\d+) oldest (?P<oldest>\d+)/(?P<max_wait>\d+) head (?P<head>\d+) "
    r"demand (?P<demand>\d+) "
    r"preempted (?P<preempted>\d+)$"
)


def render(obs: Observation) -> str:
    q = obs.queue
    lines = [
        f"turn {obs.turn}/{obs.turns} | block {obs.block_size} | "
        f"gpu {obs.used}/{obs.capacity} used {obs.usage:.1%} "
        f"cached {obs.cached} free {obs.free} | cpu {obs.cpu_used}/{obs.cpu_capacity} | "
        f"link {f'{obs.link}/step backlog {obs.backlog}' if obs.link else 'none'} | "
        f"queue {q.waiting} oldest {q.oldest_wait}/{obs.max_wait} head {q.head_blocks} "
        f"demand {q.demand_blocks} "
        f"preempted {q.preempted}",
        TABLE_HEADER,
    ]
    lines.extend(
        f"{e.seq_id} {e.block_type} {e.phase} {e.priority:.2f} {e.quantization} {e.tokens} "
        f"{e.rate} {e.private_blocks} {e.shared_blocks} {e.frees} {e.progress:.2f} {e.last_access} "
        f"{'cpu' if e.swapped else 'gpu'} {e.moving} {e.pause or '-'} {e.paused_for}"
        for e in obs.entries
    )
    if obs.candidates is not None:
        shown = " ".join(f"{c.seq_id}={c.score:.2f}" for c in obs.candidates) or "none"
        lines.append(f"candidates: {shown}")
    return "\n".join(lines)


def parse(text: str) -> Observation:
    """Rebuild the observation from its rendering (lines before its header, such as a step
    summary, are skipped); ValueError names the offending line."""
    all_lines = text.strip().splitlines()
    start = next((i for i, line in enumerate(all_lines) if _HEADER.match(line.strip())), None)
    if start is None:
        raise ValueError("no observation header ('turn t/T | block ...') in the text")
    lines = all_lines[start:]
    header = _HEADER.match(lines[0].strip())
    assert header is not None
    if len(lines) < 2 or lines[1].strip() != TABLE_HEADER:
        shown = lines[1] if len(lines) > 1 else ""
        raise ValueError(f"line {start + 2} is not the table header: {shown!r}")
    h = {k: int(v or 0) for k, v in header.groupdict().items()}
    entries = []
    candidates: tuple[Candidate, ...] | None = None
    for number, line in enumerate(lines[2:], start=start + 3):
        line = line.strip()
        if line.startswith("candidates:"):
            candidates = _parse_candidates(line, number)
            continue
        fields = line.split()
        if len(fields) != _COLUMNS:
            raise ValueError(
                f"line {number}: expected {_COLUMNS} columns, got {len(fields)}: {line!r}"
            )
        try:
            entries.append(
                EntryView(
                    seq_id=fields[0],
                    block_type=BlockType(fields[1]),
                    phase=Phase(fields[2]),
                    priority=float(fields[3]),
                    quantization=Quantization(fields[4]),
                    tokens=int(fields[5]),
                    rate=int(fields[6]),
                    private_blocks=int(fields[7]),
                    shared_blocks=int(fields[8]),
                    frees=int(fields[9]),
                    progress=float(fields[10]),
                    last_access=int(fields[11]),
                    swapped=_location(fields[12]),
                    moving=int(fields[13]),
                    pause=None if fields[14] == "-" else PauseKind(fields[14]),
                    paused_for=int(fields[15]),
                )
            )
        except ValueError as error:
            raise ValueError(f"line {number}: {error}: {line!r}") from None
    return Observation(
        turn=h["turn"],
        turns=h["turns"],
        block_size=h["block_size"],
        capacity=h["capacity"],
        used=h["used"],
        cached=h["cached"],
        cpu_used=h["cpu_used"],
        cpu_capacity=h["cpu_capacity"],
        link=h["link"],
        backlog=h["backlog"],
        max_wait=h["max_wait"],
        queue=QueueView(h["waiting"], h["oldest"], h["head"], h["demand"], h["preempted"]),
        entries=tuple(entries),
        candidates=candidates,
    )


def _location(field: str) -> bool:
    if field not in ("gpu", "cpu"):
        raise ValueError(f"location must be gpu or cpu, got {field!r}")
    return field == "cpu"


def _parse_candidates(line: str, number: int) -> tuple[Candidate, ...]:
    body = line.removeprefix("candidates:").strip()
    if body == "none":
        return ()
    out = []
    for item in body.split():
        seq_id, sep, score = item.partition("=")
        if not sep:
            raise ValueError(f"line {number}: candidate {item!r} is not id=score")
        out.append(Candidate(seq_id, float(score)))
    return tuple(out)


def approx_tokens(text: str) -> int:
    """Token estimate used in reports: 4 characters ~ 1 token."""
    return -(-len(text) // 4)
