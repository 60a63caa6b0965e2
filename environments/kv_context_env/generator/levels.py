"""Difficulty levels of the conversation-context family: how long a conversation runs, how
many subjects and facts it holds, how facts are asked about (soon after they are said, or days
later after a plan or reminder), how noisy the signals of need are, and the cache budget.

Kinds of fact (`plan.FactRole`):
- `later`: asked one or more times, days after it was said; before each ask the conversation
  usually says so (a plan, a reminder, a to-do, a calendar line, "I'll need it again on
  Friday"), with probability `p_signal` per ask, naming the day and part of the day of need
  (a neighbouring part with probability `p_day_noise`);
- `soon`: asked within the day (`soon_turns`, 1-8 turns; a detail from an e-mail the user asks
  about right away or that evening), usually announced ("I'll need the gate code in a bit");
- `aside`: never asked; now and then it gets a signal anyway (`p_false_signal`: plans change),
  and otherwise it is mostly talked about near its statement with no time of need
  (`p_aside_mention`), so that being talked about says nothing by itself.

Where things sit carries no answer: a first signal falls before or after its statement alike
(`cue_turns`), for needed facts and asides; a subject is closed ("the plumber is all sorted
now") once nothing more of it is asked, whether it was ever needed or not (`p_close`); a value
changes before an ask (`p_update`) or with no ask to come (`p_idle_update`); a repeated ask's
"again" sentence comes before or after the question (`p_again_first`), and a question's
message may carry small talk on either side (`p_question_filler`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """The knobs of one level. Probabilities in [0, 1]; turns count user→assistant turns."""

    n_turns: int
    """User→assistant turns (each one user message, then reasoning, tool outputs, a reply)."""
    n_subjects: int
    """Subjects the user deals with (each with 2-3 stated properties: the facts), at most as
    many as the chosen threads hold."""
    n_threads: int
    """Threads of life the subjects come from (home, travel, work, ...). With the subjects,
    this sets how many facts are said: on medium and hard, more than the budget can keep for
    as long as a `soon` ask may reach back (`load.fresh_load`), so keeping the newest facts
    loses most `soon` asks and only knowing which fresh facts are needed keeps them."""
    max_blocks: int
    """Cache budget in 16-token blocks."""
    p_later: float
    """Share of facts asked days later (`later`)."""
    p_soon: float
    """Share of facts asked within the day (`soon`); the rest are `aside`."""
    p_signal: float
    """Chance that an ask is announced by a signal naming the day of need."""
    p_reask: float
    """Chance of a further ask of a `later` fact (at most three asks)."""
    p_update: float
    """Chance that a `later` fact's value changes before its last ask (said as news)."""
    p_false_signal: float = 0.15
    """Chance that an `aside` fact gets a signal anyway."""
    p_close: float = 0.3
    """Chance, per fact, that its subject is closed ("all sorted") once nothing more of the
    subject is asked: asides and facts whose asks are over alike."""
    p_day_noise: float = 0.1
    """Chance that a signal names a neighbouring part of a day (morning, afternoon, evening)
    instead of the part of the ask."""
    p_mention: float = 0.25
    """Chance that a fact's subject comes up again later without a value or a plan."""
    later_said: float = 0.35
    """`later` facts are said in the first `later_said` of the turns (the setup)."""
    said: float = 0.85
    """`soon` and `aside` facts are said in the first `said` of the turns."""
    asks_from: float = 0.3
    """No `later` ask before this share of the turns."""
    lead_turns: tuple[int, int] = (6, 60)
    """Turns from a `later` fact's statement to its first ask (at least, at most)."""
    reask_turns: tuple[int, int] = (4, 40)
    """Turns between two asks of a `later` fact."""
    soon_turns: tuple[int, int] = (1, 8)
    """Turns from a `soon` fact's statement to its ask (at least, at most; uniform): up to a
    day's worth of turns, so keeping every fact just said until its ask could come costs the
    budget a reader of the signals does not pay (it knows which fresh facts are needed, and
    when)."""
    cue_turns: tuple[int, int] = (-3, 3)
    """Turns from a fact's first statement to the signal announcing its first ask, and to an
    aside's false signal (uniform; negative: before it). A `soon` fact's signal still comes
    before its ask."""
    p_aside_mention: float = 0.95
    """Chance that an aside with no false signal is talked about near its statement anyway,
    placed like a first signal (`cue_turns`) and in the same hosts (chat, the assistant's reply,
    an e-mail, a notes line, a calendar line), but naming no time to come ("still waiting to
    hear back about the plumber", "- chase the plumber (the other day)"): that a subject is
    talked about near its statement says nothing; what is said about it does."""
    p_again_first: float = 0.5
    """Chance that a repeated ask's "it comes up again" sentence precedes the question."""
    p_question_filler: float = 0.3
    """Chance that a question's message carries a sentence of small talk, before or after the
    question (evenly)."""
    p_idle_update: float = 0.2
    """Chance that a fact no question will ask again (an aside, or a fact past its last ask)
    gets a new value anyway."""
    day_turns: tuple[int, int] = (5, 11)
    """Turns per day (at least, at most; each day's drawn evenly, so 8 on average), split
    into morning, afternoon and evening at two cut points drawn evenly (`calendar`); a new day
    opens with a greeting naming it, a new part with a line saying it has come."""
    filler: tuple[int, int] = (0, 2)
    min_peak_load: float = 0.0
    """Floor on the live load at the episode's peak, in tokens relative to the budget's: a
    plan under it is redrawn (the same seed gives the same redraws)."""
    """Filler sentences per user message (at least, at most)."""

    def __post_init__(self) -> None:
        for name in (
            "p_later",
            "p_soon",
            "p_signal",
            "p_reask",
            "p_update",
            "p_false_signal",
            "p_close",
            "p_day_noise",
            "p_mention",
            "p_aside_mention",
            "p_again_first",
            "p_question_filler",
            "p_idle_update",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1]")
        if self.p_later + self.p_soon > 1.0:
            raise ValueError("p_later + p_soon must be at most 1")
        if self.n_turns < 10 or self.n_subjects < 1 or self.n_threads < 1:
            raise ValueError("a level needs at least 10 turns, a subject and a thread")
        if self.max_blocks < 4:
            raise ValueError("max_blocks must be at least 4")
        if not 3 <= self.day_turns[0] <= self.day_turns[1]:
            raise ValueError("day_turns must be an ordered range from at least 3")
        if not 1 <= self.soon_turns[0] <= self.soon_turns[1]:
            raise ValueError("soon_turns must be an ordered range from at least 1")
        if not self.cue_turns[0] <= 0 <= self.cue_turns[1]:
            raise ValueError("cue_turns must be an ordered range around 0")


LEVELS: Mapping[str, LevelSpec] = MappingProxyType(
    {
        # the teaching level: clear signals, no updates, a roomier cache
        "easy": LevelSpec(
            n_turns=60,
            n_subjects=16,
            n_threads=2,
            max_blocks=24,
            p_later=0.25,
            p_soon=0.5,
            p_signal=1.0,
            p_reask=0.3,
            p_update=0.0,
            p_idle_update=0.0,
            p_false_signal=0.05,
            p_day_noise=0.0,
        ),
        "medium": LevelSpec(
            n_turns=150,
            n_subjects=60,
            n_threads=6,
            max_blocks=16,
            p_later=0.3,
            p_soon=0.45,
            p_signal=0.96,
            p_reask=0.5,
            p_update=0.2,
            p_false_signal=0.1,
            p_day_noise=0.05,
            lead_turns=(12, 90),
            min_peak_load=1.5,
        ),
        "hard": LevelSpec(
            n_turns=150,
            n_subjects=62,
            n_threads=6,
            max_blocks=16,
            p_later=0.28,
            p_soon=0.45,
            p_signal=0.95,
            p_reask=0.35,
            p_update=0.3,
            p_idle_update=0.3,
            p_false_signal=0.15,
            p_day_noise=0.1,
            lead_turns=(12, 90),
            min_peak_load=1.5,
        ),
    }
)
"""The difficulty levels by name: easy | medium | hard."""
