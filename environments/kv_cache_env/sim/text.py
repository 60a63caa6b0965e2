"""The compact text form of an `Observation`, and its exact inverse.

`render(obs)` is what an LLM reads; `parse(render(obs)) == obs` for every observation, so a policy
served behind an HTTP chat endpoint decides from the text exactly as it would in-process.
Format (one header line, one table, a line of waiting requests when any wait, an optional
candidates line; the header is one line, shown wrapped here):

    turn 3/15 | scenario hard | block 16 | step 1s prefill 8192/step | gpu 812/1024 used 79.3%
        cached 40 free 172 | cpu 0/512 | link 42/step backlog 0 | arrivals 7 in 5 steps | queue 2
        oldest 2/5 head 96 demand 250 preempted 1
    seq type phase prio kv tokens rate priv shared frees out max last loc xfer pause paused
        n pace left
    r12 context decode 0.62 fp16 1840 40 99 16 99 95 512 2 gpu 0 - 0 1 0.80 2
    r9 system idle 0.81 fp16 2210 35 120 32 120 180 512 -1 gpu 0 tts 3 2 1.31 4
    waiting: r31:96 r33:154
    candidates: r7=0.90 r3=0.85
"""

from __future__ import annotations

import re

from .catalogue import TREND_STEPS
from .observation import Candidate, EntryView, Observation, QueueView
from .vocabulary import BlockType, PauseKind, Phase, Quantization

TABLE_HEADER = (
    "seq type phase prio kv tokens rate priv shared frees out max last loc xfer pause paused "
    "n pace left"
)
_COLUMNS = len(TABLE_HEADER.split())

_HEADER = re.compile(
    r"turn (?P<turn>-?\d+)/(?P<turns>\d+) \| scenario (?P<scenario>.+?) \| "
    r"block (?P<block_size>\d+) \| "
    r"step (?P<step_seconds>[\d.]+)s prefill (?P<prefill>\d+)/step \| "
    r"gpu (?P<used>\d+)/(?P<capacity>\d+) used [\d.]+% "
    r"cached (?P<cached>\d+) free -?\d+ \| cpu (?P<cpu_used>\d+)/(?P<cpu_capacity>\d+) \| "
    r"link (?:none|(?P<link>\d+)/step backlog (?P<backlog>\d+)) \| "
    r"arrivals (?P<arrivals>\d+) in \d+ steps \| "
    r"queue (?P<waiting>\d+) oldest (?P<oldest>\d+)/(?P<max_wait>\d+) head (?P<head>\d+) "
    r"demand (?P<demand>\d+) "
    r"preempted (?P<preempted>\d+)$"
)


def render(obs: Observation) -> str:
    q = obs.queue
    lines = [
        f"turn {obs.turn}/{obs.turns} | scenario {obs.scenario} | block {obs.block_size} | "
        f"step {obs.step_seconds:g}s prefill {obs.prefill}/step | "
        f"gpu {obs.used}/{obs.capacity} used {obs.usage:.1%} "
        f"cached {obs.cached} free {obs.free} | cpu {obs.cpu_used}/{obs.cpu_capacity} | "
        f"link {f'{obs.link}/step backlog {obs.backlog}' if obs.link else 'none'} | "
        f"arrivals {obs.arrivals} in {TREND_STEPS} steps | "
        f"queue {q.waiting} oldest {q.oldest_wait}/{obs.max_wait} head {q.head_blocks} "
        f"demand {q.demand_blocks} "
        f"preempted {q.preempted}",
        TABLE_HEADER,
    ]
    lines.extend(
        f"{e.seq_id} {e.block_type} {e.phase} {e.priority:.2f} {e.quantization} {e.tokens} "
        f"{e.rate} {e.private_blocks} {e.shared_blocks} {e.frees} {e.out} {e.budget} "
        f"{e.last_access} {'cpu' if e.swapped else 'gpu'} {e.moving} {e.pause or '-'} "
        f"{e.paused_for} {e.pauses} {e.pace:.2f} {'?' if e.left < 0 else e.left}"
        for e in obs.entries
    )
    if q.waiting:
        lines.append("waiting: " + " ".join(f"{seq_id}:{need}" for seq_id, need in q.needs))
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
        raise ValueError("no observation header ('turn t/T | scenario NAME | ...') in the text")
    lines = all_lines[start:]
    header = _HEADER.match(lines[0].strip())
    assert header is not None
    if len(lines) < 2 or lines[1].strip() != TABLE_HEADER:
        shown = lines[1] if len(lines) > 1 else ""
        raise ValueError(f"line {start + 2} is not the table header: {shown!r}")
    groups = header.groupdict()
    step_seconds = float(groups.pop("step_seconds"))
    scenario = groups.pop("scenario")
    h = {k: int(v or 0) for k, v in groups.items()}
    entries = []
    candidates: tuple[Candidate, ...] | None = None
    needs: tuple[tuple[str, int], ...] = ()
    for number, line in enumerate(lines[2:], start=start + 3):
        line = line.strip()
        if line.startswith("candidates:"):
            candidates = _parse_candidates(line, number)
            continue
        if line.startswith("waiting:"):
            needs = _parse_needs(line, number)
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
                    out=int(fields[10]),
                    budget=int(fields[11]),
                    last_access=int(fields[12]),
                    swapped=_location(fields[13]),
                    moving=int(fields[14]),
                    pause=None if fields[15] == "-" else PauseKind(fields[15]),
                    paused_for=int(fields[16]),
                    pauses=int(fields[17]),
                    pace=float(fields[18]),
                    left=-1 if fields[19] == "?" else int(fields[19]),
                )
            )
        except ValueError as error:
            raise ValueError(f"line {number}: {error}: {line!r}") from None
    return Observation(
        turn=h["turn"],
        turns=h["turns"],
        block_size=h["block_size"],
        step_seconds=step_seconds,
        prefill=h["prefill"],
        capacity=h["capacity"],
        used=h["used"],
        cached=h["cached"],
        cpu_used=h["cpu_used"],
        cpu_capacity=h["cpu_capacity"],
        link=h["link"],
        backlog=h["backlog"],
        arrivals=h["arrivals"],
        max_wait=h["max_wait"],
        queue=QueueView(h["waiting"], h["oldest"], h["head"], h["demand"], h["preempted"], needs),
        entries=tuple(entries),
        candidates=candidates,
        scenario=scenario,
    )


def _location(field: str) -> bool:
    if field not in ("gpu", "cpu"):
        raise ValueError(f"location must be gpu or cpu, got {field!r}")
    return field == "cpu"


def _parse_needs(line: str, number: int) -> tuple[tuple[str, int], ...]:
    out = []
    for item in line.removeprefix("waiting:").split():
        seq_id, sep, need = item.partition(":")
        if not sep or not need.isdigit():
            raise ValueError(f"line {number}: waiting request {item!r} is not id:blocks")
        out.append((seq_id, int(need)))
    return tuple(out)


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
