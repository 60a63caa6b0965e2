"""Difficulty levels of the conversation-context family: what a level's conversation holds
(turns, questions by kind, distractors, decoys, gaps) and the question kinds themselves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

QuestionLevel = Literal["direct", "distractor", "tool", "updated", "two_fact"]
QUESTION_LEVELS: tuple[QuestionLevel, ...] = (
    "direct",
    "distractor",
    "tool",
    "updated",
    "two_fact",
)


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """The knobs of one difficulty level. Probabilities are per question; a level whose
    probability for a kind is positive always has at least one question of that kind."""

    n_messages: int
    """Exact number of messages, the system message included."""
    n_turns: int
    """User→assistant turns; the other `n_messages - 1 - 2 * n_turns` messages are reasoning
    spans and tool outputs inside turns."""
    n_questions: int
    """Planted questions, each about distinct fact templates."""
    p_distractor: float
    """Chance that a same-template fact about another owner is stated before the question."""
    p_update: float
    """Chance that the fact is stated again later with a new value (the answer is the latest)."""
    p_tool_fact: float
    """Chance that the fact is a line inside a tool output rather than said in chat."""
    min_gap_turns: int
    """Fact→question distance: at least this many turns from the answer-bearing statement's turn
    to the question's turn (unless the question is a near one, `p_near`)."""
    max_blocks: int
    """Cache budget of an episode, in `BLOCK_SIZE`-token blocks: all statements (asked or not)
    take at least 1.5x of it on hard, more than it on medium, so keeping every fact-shaped
    sentence is not possible; the answer-bearing ones fit with room to spare."""
    n_decoys: int = 0
    """Statements of details nobody asks about (the user's and other people's)."""
    p_near: float = 0.0
    """Chance that a question is asked soon after its fact: within `near_turns` turns instead
    of at least `min_gap_turns` (what any recent window still holds)."""
    near_turns: int = 1
    p_two_fact: float = 0.0
    """Chance that a question asks two facts at once."""
    p_chitchat: float = 0.25
    """Chance that a turn carrying no planted item is small talk rather than topic chat."""
    p_entity: float = 0.6
    """Chance that a chat message carries a sentence with names, numbers, codes or dates."""
    p_attribute: float = 0.15
    """Chance that a chat message names some fact attribute without a value."""
    n_extra: int = field(init=False)
    """Derived: reasoning spans + tool outputs (`n_messages - 1 - 2 * n_turns`)."""

    def __post_init__(self) -> None:
        extra = self.n_messages - 1 - 2 * self.n_turns
        object.__setattr__(self, "n_extra", extra)
        if extra < self.n_questions:
            raise ValueError(f"n_messages={self.n_messages} leaves {extra} extra messages")
        for name in (
            "p_distractor",
            "p_update",
            "p_tool_fact",
            "p_chitchat",
            "p_two_fact",
            "p_entity",
            "p_attribute",
            "p_near",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1]")
        if self.n_questions < 1:
            raise ValueError("n_questions must be positive (and at most the template count)")
        if self.n_turns < 2 * self.n_questions + self.min_gap_turns + 2:
            raise ValueError(f"n_turns={self.n_turns} is too few for the questions and gap")
        if self.max_blocks < 1:
            raise ValueError("max_blocks must be positive")
        if self.n_decoys < 0:
            raise ValueError("n_decoys must not be negative")


LEVELS: Mapping[str, LevelSpec] = MappingProxyType(
    {
        # 40 messages, three direct questions, a few details nobody asks about.
        "easy": LevelSpec(
            n_messages=40,
            n_turns=16,
            n_questions=3,
            p_distractor=0.0,
            p_update=0.0,
            p_tool_fact=0.0,
            min_gap_turns=3,
            max_blocks=40,
            n_decoys=6,
            p_near=0.6,
        ),
        # 60 messages: distractors, an update, a fact in a tool output, a two-fact question;
        # statements take more blocks than the budget.
        "medium": LevelSpec(
            n_messages=60,
            n_turns=23,
            n_questions=4,
            p_distractor=0.5,
            p_update=0.25,
            p_tool_fact=0.25,
            min_gap_turns=4,
            max_blocks=46,
            n_decoys=30,
            p_two_fact=0.2,
            p_near=0.65,
        ),
        # 90 messages: everything, long distances; statements take >= 1.5x the budget.
        "hard": LevelSpec(
            n_messages=90,
            n_turns=33,
            n_questions=6,
            p_distractor=0.6,
            p_update=0.35,
            p_tool_fact=0.35,
            min_gap_turns=5,
            max_blocks=48,
            n_decoys=36,
            p_two_fact=0.25,
            p_near=0.6,
        ),
    }
)
"""The difficulty levels by name: easy | medium | hard."""
