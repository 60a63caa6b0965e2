"""`kvarena cache-replay`: replay recorded eval transcripts request by request through each
breakpoint strategy and a model of the provider's cache, and compare what each would cost.

The requests are rebuilt exactly as the agent loop sent them (`kv_cache_env.llm.agent_loop`, or
`kv_context_env.llm.agent` for `kvarena context-eval --model` transcripts, which record
`history_turns` 0 and the context tools): the system prompt, the last `history_turns` turns (all
when the transcript says none), then the current observation; the tool schemas lead every
request. Episodes are replayed in file order through
one provider cache per strategy, as an eval's back-to-back episodes share an account's cache
(the system prompt cached by one episode is read by the next). No network.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kv_cache_env.bounded_read import TRANSCRIPT_LIMITS, FileReadError, read_json
from kv_cache_env.llm.tools import tool_schemas

from .provider import CacheUsage, Prices, ProviderCache
from .requests import Message, RequestShape, request_units, split_request
from .strategies import STRATEGIES, Planner, Strategy, make_planner, tools_tokens
from .tiers import TierConfig


class TranscriptError(ValueError):
    """A file that is not an eval transcript."""


@dataclass(frozen=True, slots=True)
class Transcript:
    path: Path
    messages: list[Message]
    history_turns: int | None
    tools: list[dict[str, Any]]


def find_transcripts(paths: Iterable[Path]) -> list[Path]:
    """Files as given; directories searched recursively for `*.json`, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.json") if p.name != "run.json"))
        elif path.exists():
            found.append(path)
        else:
            raise TranscriptError(f"{path}: no such file or directory")
    if not found:
        raise TranscriptError("no transcripts found (expected *.json files from kvarena eval)")
    return found


def load_transcript(path: Path) -> Transcript:
    try:
        data = read_json(path, TRANSCRIPT_LIMITS)
    except FileReadError as error:
        raise TranscriptError(str(error)) from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TranscriptError(f"{path}: not an eval transcript (no 'messages' list)")
    if "history_turns" not in data:
        raise TranscriptError(
            f"{path}: no 'history_turns' (not a transcript of `kvarena eval --model` or "
            "`kvarena context-eval --model`, or one written before it was recorded): its "
            "requests cannot be rebuilt"
        )
    history = data["history_turns"]
    if history is not None and (not isinstance(history, int) or history < 0):
        raise TranscriptError(f"{path}: bad history_turns {history!r}")
    tools = data.get("tools") or tool_schemas()
    return Transcript(path, data["messages"], history, list(tools))


def requests_of(transcript: Transcript) -> Iterator[RequestShape]:
    """Each request the episode sent, in order."""
    messages = transcript.messages
    if len(messages) < 2 or messages[0].get("role") != "system":
        raise TranscriptError(f"{transcript.path}: a transcript starts with the system prompt")
    # Cut the whole conversation into turns: a turn starts at each user message.
    whole = split_request([*messages, {"role": "user", "content": ""}])
    turns = whole.turns
    for k, turn in enumerate(turns):
        start = 0 if transcript.history_turns is None else max(0, k - transcript.history_turns)
        yield RequestShape(whole.system, turns[start:k], turn[0])


@dataclass
class StrategyTotals:
    strategy: Strategy
    requests: int = 0
    uncached: int = 0
    read: int = 0
    written: int = 0
    breakpoints: int = 0
    honoured: int = 0
    cost: float = 0.0
    per_episode: list[float] = field(default_factory=list)

    def add(self, usage: CacheUsage, prices: Prices) -> None:
        self.requests += 1
        self.uncached += usage.uncached
        self.read += usage.read
        self.written += usage.written
        self.breakpoints += usage.breakpoints
        self.honoured += usage.honoured
        self.cost += prices.cost(usage)

    @property
    def input_tokens(self) -> int:
        return self.uncached + self.read + self.written

    @property
    def cached_fraction(self) -> float:
        return self.read / self.input_tokens if self.input_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "uncached_tokens": self.uncached,
            "cache_read_tokens": self.read,
            "cache_write_tokens": self.written,
            "cached_fraction": round(self.cached_fraction, 4),
            "breakpoints_per_request": round(self.breakpoints / max(1, self.requests), 3),
            "honoured_per_request": round(self.honoured / max(1, self.requests), 3),
            "cost": round(self.cost, 6),
        }


def bill_request(
    shape: RequestShape,
    tools: Sequence[dict[str, Any]],
    planner: Planner,
    cache: ProviderCache,
    tool_tokens: int,
) -> CacheUsage:
    """One request's input as the provider bills it: `planner` places its breakpoints (as the
    hosted client would), `cache` serves it. `tool_tokens`: `strategies.tools_tokens(tools)`."""
    marks = planner.plan(shape, tool_tokens)
    units, part_ends = request_units(shape.messages, tools)
    return cache.serve(units, [part_ends[m] for m in marks])


def replay(
    transcripts: Sequence[Transcript],
    prices: Prices,
    *,
    config: TierConfig | None = None,
    strategies: Sequence[Strategy] = STRATEGIES,
) -> list[StrategyTotals]:
    config = config or TierConfig()
    totals: list[StrategyTotals] = []
    for strategy in strategies:
        cache = ProviderCache(min_tokens=config.cache_min_tokens)
        row = StrategyTotals(strategy)
        for transcript in transcripts:
            planner = make_planner(
                strategy,
                config,
                windowed=transcript.history_turns is not None,
                history_turns=transcript.history_turns,
            )
            before = row.cost
            tool_tokens = tools_tokens(transcript.tools)
            for shape in requests_of(transcript):
                row.add(bill_request(shape, transcript.tools, planner, cache, tool_tokens), prices)
            row.per_episode.append(row.cost - before)
        totals.append(row)
    return totals
