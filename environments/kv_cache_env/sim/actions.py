"""The agent's action vocabulary: `evict(seq_id)`, `compress(seq_id)`, `swap(seq_id)`, `noop()`.

Actions are plain values. `Simulator.apply` validates and carries them out; an invalid action is
an outcome (a one-line error naming what is valid, counted), never an exception. Policies and,
later, the LLM's tools build actions through `make_action`, so both go through one path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ActionKind = Literal["evict", "compress", "swap", "noop"]
ACTION_KINDS: tuple[ActionKind, ...] = ("evict", "compress", "swap", "noop")


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    seq_id: str | None = None
    """Target sequence; None only for noop."""

    def __str__(self) -> str:
        return f"{self.kind}({self.seq_id or ''})"


def evict(seq_id: str) -> Action:
    return Action("evict", seq_id)


def compress(seq_id: str) -> Action:
    return Action("compress", seq_id)


def swap(seq_id: str) -> Action:
    return Action("swap", seq_id)


def noop() -> Action:
    return Action("noop")


@dataclass(frozen=True, slots=True)
class ActionResult:
    ok: bool
    message: str
    """What happened, or for an invalid action, what was wrong and what is valid."""
    freed_blocks: int = 0
    """GPU blocks made available by the action."""

    def __str__(self) -> str:
        return self.message


def make_action(kind: str, seq_id: object = None) -> Action | str:
    """Build an action from loosely typed input (tool arguments, parsed text). Returns the
    action, or an error message when `kind` or `seq_id` is malformed."""
    if kind not in ACTION_KINDS:
        return f"unknown action {kind!r}; valid actions: {', '.join(ACTION_KINDS)}"
    if kind == "noop":
        return noop()
    if not isinstance(seq_id, str) or not seq_id.strip():
        return f'{kind} needs a seq_id string (e.g. {kind}(seq_id="r12")), got {seq_id!r}'
    return Action(kind, seq_id.strip())  # type: ignore[arg-type]
