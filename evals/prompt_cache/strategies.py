"""Where a request's `cache_control` breakpoints go: four strategies behind one small interface.

- `none`: no breakpoint (nothing is cached).
- `system`: one breakpoint on the system prompt (tool schemas + system are cached).
- `rolling`: one breakpoint on the last message, moved forward every request.
- `tiers`: seed 002's stability tiers (`TierPlanner`): the fixed L0 content (tool schemas and
  system prompt), then whole past turns in L0–L3 and active, one breakpoint at the end of each
  non-empty cached tier, at most four.

A planner is stateful across the requests of one episode (the tier tracker counts stability per
turn), so make a fresh one per episode with `make_planner`. Plans are message indices into
`RequestShape.messages` (0 = the system prompt).
"""

from __future__ import annotations

import hashlib
from typing import Literal, Protocol

from .layout import layout
from .requests import RequestShape, message_text, message_tokens, tools_text
from .tiers import Item, StabilityTracker, TierConfig
from .tokens import estimate_tokens

Strategy = Literal["none", "system", "rolling", "tiers"]
STRATEGIES: tuple[Strategy, ...] = ("none", "system", "rolling", "tiers")
DESCRIPTIONS: dict[Strategy, str] = {
    "none": "(a) none",
    "system": "(b) system",
    "rolling": "(c) rolling",
    "tiers": "(d) tiers",
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
        return [len(shape.messages) - 1]


class TierPlanner:
    """Seed 002's tier manager applied to an eval conversation: history items are whole turns,
    keyed by a digest of their content (immutable, so a key never changes meaning).

    `windowed`: the conversation is sent through a sliding `history_turns` window, so the
    oldest turn leaves every request and any tier holding history changes every time: its
    breakpoint would write a prefix that is never read again. History then never graduates
    (the seed's behaviour for `cache_target_tokens = 0`, applied to history only) and only the
    fixed L0 content is cached."""

    def __init__(self, config: TierConfig | None = None, *, windowed: bool = False) -> None:
        self.config = config or TierConfig()
        self.windowed = windowed
        self._tracker: StabilityTracker | None = None
        self._fixed_tokens = 0
        self.last_tiers: dict[str, str] = {}
        """Turn key -> tier after the latest request (for logs and tests)."""

    def plan(self, shape: RequestShape, tools_tokens: int) -> list[int]:
        if self._tracker is None:
            fixed = message_text(shape.system)
            self._fixed_tokens = tools_tokens + message_tokens(shape.system)
            self._tracker = StabilityTracker(
                self.config, fixed_l0=(Item("system", fixed, self._fixed_tokens),)
            )
        items: list[Item] = []
        last_index: dict[str, int] = {}
        index = 0
        for turn in shape.turns:
            text = "\n".join(message_text(m) for m in turn)
            key = "history:" + hashlib.sha256(text.encode()).hexdigest()[:20]
            items.append(Item(key, text, estimate_tokens(text)))
            index += len(turn)
            last_index[key] = index
        snapshot = self._tracker.update(history=() if self.windowed else items)
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


def make_planner(
    strategy: Strategy, config: TierConfig | None = None, *, windowed: bool = False
) -> Planner:
    """A fresh planner for one episode; `windowed` (a `history_turns` window) matters to the
    tier planner only."""
    if strategy == "none":
        return NoBreakpoints()
    if strategy == "system":
        return SystemBreakpoint()
    if strategy == "rolling":
        return RollingBreakpoint()
    if strategy == "tiers":
        return TierPlanner(config, windowed=windowed)
    raise ValueError(f"unknown prompt-cache strategy {strategy!r}; known: {', '.join(STRATEGIES)}")


def tools_tokens(tools: list[dict[str, object]]) -> int:
    return estimate_tokens(tools_text(tools))
