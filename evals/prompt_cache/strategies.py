"""Where a request's `cache_control` breakpoints go: four strategies behind one small interface.

- `none`: no breakpoint (nothing is cached).
- `system`: one breakpoint on the system prompt (tool schemas + system are cached).
- `rolling`: one breakpoint on the last message, moved forward every request.
- `tiers`: the stability-tier design (`TierPlanner`): the fixed L0 content (tool schemas and
  system prompt), then whole past turns in L3 and active, one breakpoint at the end of each
  non-empty cached tier, at most four.
- `hybrid` (the hosted client's default, `HybridPlanner`): tiers for content that changes
  between requests, a rolling breakpoint for history that only grows.

A planner is stateful across the requests of one episode (the tier tracker counts stability per
turn), so make a fresh one per episode with `make_planner`. Plans are part indices into
`RequestShape.messages` (`requests.part_positions`; 0 = the system prompt; for requests of
string messages a part is a message).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, Protocol

from .layout import MAX_BREAKPOINTS, layout
from .requests import (
    RequestShape,
    message_blocks,
    message_text,
    message_tokens,
    part_count,
    part_positions,
    part_text,
    tools_text,
)
from .tiers import Item, StabilityTracker, TierConfig
from .tokens import estimate_tokens

Message = dict[str, Any]
Strategy = Literal["none", "system", "rolling", "tiers", "hybrid"]
STRATEGIES: tuple[Strategy, ...] = ("none", "system", "rolling", "tiers", "hybrid")
DEFAULT_STRATEGY: Strategy = "hybrid"
"""What the hosted client sends where the endpoint supports explicit caching."""
DESCRIPTIONS: dict[Strategy, str] = {
    "none": "none: no breakpoint",
    "system": "system: after the system prompt",
    "rolling": "rolling: on the last message",
    "tiers": "tiers: stability tiers",
    "hybrid": "hybrid: tiers + rolling",
}


class Planner(Protocol):
    def plan(self, shape: RequestShape, tools_tokens: int) -> list[int]:
        """Message indices that carry a breakpoint, ascending."""
        ...


class NoBreakpoints:
    def plan(self, shape: RequestShape, tools_tokens: int) -> list[int]:
        return []


class SystemBreakpoint:
    def plan(self, shape: RequestShape, tools_tokens: int) -> list[int]:
        return [0]


class RollingBreakpoint:
    def plan(self, shape: RequestShape, tools_tokens: int) -> list[int]:
        return [len(part_positions(shape.messages)) - 1]


class TierPlanner:
    """The stability-tier design applied to an eval conversation: history items are whole turns,
    keyed by a digest of their content (immutable, so a key never changes meaning).

    `windowed`: the conversation is sent through a sliding `history_turns` window, so the
    oldest turn leaves every request and any tier holding history changes every time: its
    breakpoint would write a prefix that is never read again. History then never graduates
    (the tier design's behaviour for `cache_target_tokens = 0`, applied to history only) and only
    the fixed L0 content is cached."""

    def __init__(self, config: TierConfig | None = None, *, windowed: bool = False) -> None:
        self.config = config or TierConfig()
        self.windowed = windowed
        self._tracker: StabilityTracker | None = None
        self._fixed_tokens = 0
        self.last_tiers: dict[str, str] = {}
        """Turn key -> tier after the latest request (for logs and tests)."""

    def plan(self, shape: RequestShape, tools_tokens: int) -> list[int]:
        if self._tracker is None:
            self._fixed_tokens = tools_tokens + message_tokens(shape.system)
            self._tracker = StabilityTracker(self.config)
        items: list[Item] = []
        last_index: dict[str, int] = {}
        index = 0
        for turn in shape.turns:
            text = "\n".join(message_text(m) for m in turn)
            key = "history:" + hashlib.sha256(text.encode()).hexdigest()[:20]
            items.append(Item(key, text, estimate_tokens(text)))
            index += sum(part_count(m) for m in turn)
            last_index[key] = index
        snapshot = self._tracker.update(() if self.windowed else items)
        tokens = {item.key: item.tokens for item in items}
        segments = layout(
            snapshot,
            tokens,
            self._fixed_tokens,
            cache_min_tokens=self.config.cache_min_tokens,
        )
        order = [key for segment in segments if segment.part == "history" for key in segment.keys]
        if not self.windowed and order != [item.key for item in items]:
            raise AssertionError("the tier layout reordered history turns (a tracker bug)")
        self.last_tiers = {
            key: segment.tier
            for segment in segments
            if segment.part == "history"
            for key in segment.keys
        }
        marks: list[int] = []
        for segment in segments:
            if not segment.breakpoint:
                continue
            marks.append(last_index[segment.keys[-1]] if segment.part == "history" else 0)
        return sorted(set(marks))


class HybridPlanner:
    """Tiers for content that changes, a rolling breakpoint for history that only grows.

    This departs from the tier design on purpose: there, history graduates to a cached tier
    only once more than `cache_target_tokens` of it wait in active, so on an eval conversation
    (append-only history) up to 1,536 tokens of recent turns are sent uncached on every
    request. Here history is cached as it grows, and the tier tracker is kept for content whose
    parts can change or leave between requests. `TierPlanner` keeps the design's rule. The plan
    of one request:

    1. L0: the fixed content (tool schemas + system prompt) carries a breakpoint when its tokens
       reach the provider minimum (`config.cache_min_tokens`).
    2. Changing content: when the request sends no past turns and its last message is split
       into parts (the context family's observation: stable message blocks, then one volatile
       block), every part but the last is a tracked item, in request order, of a
       `StabilityTracker` (history rules: an item keeps its place, a new or changed item
       demotes every later one, an item that leaves invalidates its tier; the oldest graduate
       to L3 past `cache_target_tokens`). The cached tier L3 gets a breakpoint at its end, as
       the tier design lays it out (`layout`: none below the minimum).
    3. Rolling: a breakpoint on the last part that the next request will send again unchanged:
       the end of the tracked parts in case 2 (what follows is volatile), else the request's
       last part when the next request extends this one (the whole history is sent, or the
       `history_turns` window is not yet full), else none (a full window drops its oldest turn
       next time, so nothing after the system prompt is sent twice). When this request extends
       the previous one, the previous rolling position also keeps a breakpoint (its prefix is
       in the cache), so the read never depends on the provider's 20-block lookback.
    4. Merge: at most `MAX_BREAKPOINTS`; past that the lowest tier's breakpoint goes first (its
       content is then cached with the tier above or by the rolling breakpoint), and every
       breakpoint whose prefix is under the minimum is dropped.
    """

    def __init__(
        self, config: TierConfig | None = None, *, history_turns: int | None = None
    ) -> None:
        self.config = config or TierConfig()
        self.history_turns = history_turns
        self._tracker: StabilityTracker | None = None
        self._previous: list[dict[str, object]] | None = None
        self._previous_roll: int | None = None
        self.last_tiers: dict[int, str] = {}
        """Part index -> tier of the tracked parts after the latest request (tests, logs)."""

    def plan(self, shape: RequestShape, tools_tokens: int) -> list[int]:
        messages = shape.messages
        ends = _part_token_ends(messages, tools_tokens)
        minimum = self.config.cache_min_tokens
        fixed = [0]
        tier_marks: list[int] = []
        roll: int | None = None
        last = len(ends) - 1
        tracked = not shape.turns and part_count(shape.current) > 1
        if tracked:
            first = last - part_count(shape.current) + 1  # first part of the observation
            tier_marks = self._tier_marks(shape.current, first, ends[first - 1])
            roll = last - 1
        elif self.history_turns is None or len(shape.turns) < self.history_turns:
            roll = last
        extends = self._previous is not None and _extends(messages, self._previous)
        anchor = self._previous_roll if extends and not tracked else None
        marks = sorted({*fixed, *tier_marks, *(m for m in (anchor, roll) if m is not None)})
        marks = [m for m in marks if ends[m] >= minimum]
        while len(marks) > MAX_BREAKPOINTS:
            lowest = max((m for m in marks if m in tier_marks and m != roll), default=None)
            marks.remove(lowest if lowest is not None else marks[1])
        self._previous = list(messages)
        self._previous_roll = roll
        return marks

    def _tier_marks(self, current: Message, first: int, prefix_tokens: int) -> list[int]:
        """Track the stable parts of the current message; breakpoints at the ends of the
        cached tiers (part indices)."""
        parts = [part_text(p) for p in current["content"][:-1]]
        if self._tracker is None:
            self._tracker = StabilityTracker(self.config)
        items: list[Item] = []
        seen: dict[str, int] = {}
        position: dict[str, int] = {}
        for offset, text in enumerate(parts):
            digest = hashlib.sha256(text.encode()).hexdigest()[:20]
            seen[digest] = seen.get(digest, 0) + 1
            key = f"history:{digest}:{seen[digest]}"
            items.append(Item(key, text, estimate_tokens(text)))
            position[key] = first + offset
        snapshot = self._tracker.update(items)
        segments = layout(
            snapshot,
            {item.key: item.tokens for item in items},
            prefix_tokens,
            cache_min_tokens=self.config.cache_min_tokens,
        )
        self.last_tiers = {
            position[key]: segment.tier for segment in segments for key in segment.keys
        }
        return [
            position[segment.keys[-1]]
            for segment in segments
            if segment.breakpoint and segment.part == "history"
        ]


def _part_token_ends(messages: list[Message], tools_tokens: int) -> list[int]:
    """Tokens of the request up to and including each part (the tool schemas first)."""
    ends: list[int] = []
    total = tools_tokens
    for message in messages:
        for blocks in message_blocks(message):
            total += sum(estimate_tokens(b) for b in blocks)
            ends.append(total)
    return ends


def _extends(messages: list[Message], previous: list[Message]) -> bool:
    """`messages` starts with every message of `previous`."""
    return len(messages) > len(previous) and messages[: len(previous)] == previous


def make_planner(
    strategy: Strategy,
    config: TierConfig | None = None,
    *,
    windowed: bool = False,
    history_turns: int | None = None,
) -> Planner:
    """A fresh planner for one episode. `windowed` (a `history_turns` window) matters to the
    tier planner only; the hybrid planner takes the window itself (`history_turns`, None = the
    whole history)."""
    if strategy == "none":
        return NoBreakpoints()
    if strategy == "system":
        return SystemBreakpoint()
    if strategy == "rolling":
        return RollingBreakpoint()
    if strategy == "tiers":
        return TierPlanner(config, windowed=windowed)
    if strategy == "hybrid":
        return HybridPlanner(config, history_turns=history_turns)
    raise ValueError(f"unknown prompt-cache strategy {strategy!r}; known: {', '.join(STRATEGIES)}")


def tools_tokens(tools: list[dict[str, object]]) -> int:
    return estimate_tokens(tools_text(tools))
