"""Where things sit in a conversation says nothing about what will be asked: each structural
regularity an outside reader of shape alone could use is a documented distribution the
generator draws from (`LevelSpec`), and these tests pin its spread."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from kv_context_env.generator.calendar import PARTS, draw_calendar
from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.generator.levels import LEVELS
from kv_context_env.generator.lexicon import lexicon
from kv_context_env.generator.load import fresh_load
from kv_context_env.generator.plan import World, plan_world
from kv_context_env.readers.extractive import split_sentences

SEEDS = range(8)
NEED_KINDS = ("plan", "need", "todo", "calendar")


@pytest.fixture(scope="module")
def worlds() -> list[World]:
    return [plan_world(np.random.default_rng(s), LEVELS["hard"], lexicon()) for s in SEEDS]


def test_days_vary_in_length_and_parts_in_turns() -> None:
    """Day lengths are drawn evenly from `day_turns` (5-11 turns, 8 on average) and every
    part of a day lasts a turn or more, starting at no fixed turn of the day."""
    rng = np.random.default_rng(0)
    lengths: Counter[int] = Counter()
    afternoon_starts: Counter[int] = Counter()
    for _ in range(200):
        calendar = draw_calendar(rng, 150, LEVELS["hard"].day_turns)
        days = Counter(calendar.days)
        for day, length in list(days.items())[:-1]:  # the last day is cut short
            lengths[length] += 1
            first = calendar.days.index(day)
            parts = calendar.parts[first : first + length]
            assert list(parts) == sorted(parts) and set(parts) == set(range(PARTS))
            afternoon_starts[parts.index(1)] += 1
    lo, hi = LEVELS["hard"].day_turns
    assert set(lengths) == set(range(lo, hi + 1))
    share = [lengths[n] / lengths.total() for n in range(lo, hi + 1)]
    assert max(share) - min(share) < 0.04  # even
    mean = sum(n * c for n, c in lengths.items()) / lengths.total()
    assert abs(mean - (lo + hi) / 2) < 0.15
    assert len(afternoon_starts) >= hi - 2  # the afternoon starts at turns 1 .. hi - 2


def test_a_part_of_the_day_opens_with_a_line_saying_so() -> None:
    conversation = generate_conversation(3, "hard")
    lex = lexicon()
    starts = {
        part: tuple(lex.text("days", "part_start", part)) for part in ("afternoon", "evening")
    }
    users = [m for m in conversation.messages if m.role == "user"]
    opened = [m for m in users if m.text.startswith(starts["afternoon"] + starts["evening"])]
    lo, hi = LEVELS["hard"].day_turns
    n_turns = LEVELS["hard"].n_turns
    assert 2 * (n_turns // hi) <= len(opened) <= 2 * (n_turns // lo + 1)  # two a day


def test_soon_asks_come_at_a_delay_drawn_from_a_range(worlds: list[World]) -> None:
    """A `soon` fact is asked 1 to 8 turns after its statement, evenly (`soon_turns`: up to a
    day's worth of turns), so half its asks come more than four turns on."""
    assert all(spec.soon_turns == (1, 8) for spec in LEVELS.values())
    delays = Counter(f.asks[0] - f.said[0] for w in worlds for f in w.facts if f.role == "soon")
    lo, hi = LEVELS["hard"].soon_turns
    assert set(delays) == set(range(lo, hi + 1))
    for n in range(lo, hi + 1):  # each delay within half its even share of 1/8
        assert abs(delays[n] / delays.total() - 1 / (hi - lo + 1)) < 0.5 / (hi - lo + 1), delays
    late = sum(c for n, c in delays.items() if n > 4) / delays.total()
    assert 0.4 < late < 0.6, delays


@pytest.mark.parametrize("level", ["medium", "hard"])
def test_more_is_said_than_the_budget_keeps_until_a_soon_ask(level: str) -> None:
    """Keeping every fact just said until a `soon` ask could come (`soon_turns`) takes more
    blocks than the budget at most soon asks, so "keep the newest facts" loses soon asks and
    only knowing which fresh facts are needed keeps them (`load.fresh_load`)."""
    loads = [fresh_load(generate_conversation(seed, level)) for seed in range(6)]
    assert all(f.asks > 20 for f in loads)
    assert np.mean([f.median for f in loads]) >= 1.4, loads
    assert np.mean([f.over for f in loads]) >= 0.65, loads


@pytest.mark.parametrize("level", ["medium", "hard"])
def test_a_signal_moved_off_a_question_turn_stays_near_its_statement(level: str) -> None:
    """Two thirds of the turns ask a question, so a signal planned on one moves to the nearest
    free turn (still before its ask): in the conversation as said, a `soon` fact's first
    signal of need sits within a turn of its planned range (`cue_turns`) of its statement."""
    lo, hi = LEVELS[level].cue_turns
    offsets: Counter[int] = Counter()
    for seed in range(4):
        c = generate_conversation(seed, level)
        turns = np.cumsum([m.role == "user" for m in c.messages])
        first: dict[str, int] = {}
        for signal in c.signals:
            if signal.cue == "need":
                first.setdefault(signal.key, int(turns[signal.span.message_index]))
        for q in c.questions:
            if q.level == "soon" and q.key in first:
                offsets[first[q.key] - int(turns[q.fact_index])] += 1
    near = sum(n for off, n in offsets.items() if lo - 1 <= off <= hi + 1)
    assert near / offsets.total() >= 0.93, offsets


def _first_cue_offsets(worlds: list[World], role: str) -> Counter[int]:
    out: Counter[int] = Counter()
    for world in worlds:
        for fact in world.facts:
            cues = [s for s in fact.signals if s.kind in NEED_KINDS]
            if fact.role == role and cues:
                out[cues[0].turn - fact.said[0]] += 1
    return out


def test_first_signals_fall_before_and_after_statements_for_needs_and_asides_alike(
    worlds: list[World],
) -> None:
    """A first-ask signal and an aside's false signal are both placed `cue_turns` (-3 .. +3)
    from the statement, so which side it falls on does not say which it is."""
    lo, hi = LEVELS["hard"].cue_turns
    later = _first_cue_offsets(worlds, "later")
    aside = _first_cue_offsets(worlds, "aside")
    for offsets in (later, aside):
        assert min(offsets) <= -2 and max(offsets) >= 2
        # a signal planned on a question turn moves to the nearest free turn
        near = sum(n for off, n in offsets.items() if lo - 1 <= off <= hi + 1)
        assert near / offsets.total() >= 0.93, offsets
    # most moved signals land on the statement's own turn (the nearest free one), so fewer
    # fall after it than the plan draws, for needs and asides alike
    after = [sum(c for o, c in x.items() if o > 0) / x.total() for x in (later, aside)]
    assert all(0.1 < a < 0.55 for a in after), after
    assert abs(after[0] - after[1]) < 0.1, after


def test_subjects_are_closed_whether_they_were_needed_or_not(worlds: list[World]) -> None:
    """A closure comes after the subject's last ask, and as often (`p_close` a fact) for
    facts that were asked as for asides."""
    closed: Counter[bool] = Counter()
    facts: Counter[bool] = Counter()
    for world in worlds:
        for fact in world.facts:
            facts[bool(fact.asks)] += 1
            for signal in fact.signals:
                if signal.kind == "close":
                    asks = [t for f in world.facts if f.subject is fact.subject for t in f.asks]
                    assert all(t < signal.turn for t in asks)
                    closed[bool(fact.asks)] += 1
    rates = [closed[asked] / facts[asked] for asked in (True, False)]
    p = LEVELS["hard"].p_close
    assert all(p - 0.1 < r < p + 0.05 for r in rates), rates


def test_a_new_value_often_comes_with_no_ask_to_follow(worlds: list[World]) -> None:
    """Values change before an ask (`p_update`) and with none to come (`p_idle_update`)."""
    asked_after: Counter[bool] = Counter()
    for world in worlds:
        for fact in world.facts:
            for turn in fact.said[1:]:
                asked_after[any(a > turn for a in fact.asks)] += 1
    assert asked_after[False] >= 0.4 * asked_after.total(), asked_after
    assert asked_after[True] >= 0.1 * asked_after.total(), asked_after


def test_a_repeated_asks_again_sentence_comes_before_or_after_the_question() -> None:
    """`p_again_first`: about half of the "again" sentences come before the question; small
    talk (`p_question_filler`) sits on either side as well."""
    again: Counter[str] = Counter()
    small_talk: Counter[str] = Counter()
    asides = set(lexicon().text("speech", "question_asides"))
    for seed in range(4):
        conversation = generate_conversation(seed, "hard")
        spans = {s.span.message_index: s.span for s in conversation.signals if s.cue == "again"}
        for question in conversation.questions:
            text = conversation.messages[question.message_index].text
            at = text.index(question.text)
            span = spans.get(question.message_index)
            if span is not None:
                again["before" if span.start < at else "after"] += 1
            for sentence in split_sentences(text):
                if sentence in asides:
                    small_talk["before" if text.index(sentence) < at else "after"] += 1
    for sides in (again, small_talk):
        assert min(sides["before"], sides["after"]) >= 0.3 * sides.total(), sides
