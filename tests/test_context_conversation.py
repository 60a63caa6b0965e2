"""The context family's tokenizer, conversation generator (with its answer key and turns) and
extractive reader."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kv_cache_env.context.conversation import (
    LEVELS,
    QUESTION_LEVELS,
    LevelSpec,
    generate_conversation,
    statement_blocks,
    total_blocks,
    turns,
)
from kv_cache_env.context.extractive import NO_ANSWER, extractive_answer, split_sentences
from kv_cache_env.context.pools import OWNER_NAMES, TEMPLATES
from kv_cache_env.context.tokenizer import count_tokens, tokenize
from kv_cache_env.context.types import Conversation, FactSpan, Kind, Message, Question, Role
from kv_cache_env.context.values import judge_answer, names_value

SEEDS = range(20)
"""Seeds 0..19 per level: enough for stable means, fast enough (~4 s for all tests)."""


@cache
def conv(seed: int, level: str) -> Conversation:
    return generate_conversation(seed, level)


def all_convs(level: str) -> list[Conversation]:
    return [conv(seed, level) for seed in SEEDS]


def said(c: Conversation, span: FactSpan) -> str:
    return c.messages[span.message_index].text[span.start : span.end]


ANNOUNCING = re.compile(r"correct|actually|scratch|update|changed|no longer|instead", re.I)
V1_SHAPE = re.compile(r"^(My|[A-Z][a-z]+'s) [a-z' ]+ is [^.]+\.$")
"""The one shape every v1 fact had ("My locker code is 4471.")."""


# --- tokenizer -----------------------------------------------------------------------------


@given(st.text())
def test_tokenize_round_trips_any_text(text: str) -> None:
    pieces = tokenize(text)
    assert "".join(pieces) == text
    assert all(pieces)
    assert count_tokens(text) == len(pieces)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("Hello, world!", ["Hello", ",", " world", "!"]),
        ("My locker code is 4471.", ["My", " locker", " code", " is", " 447", "1", "."]),
        # long words are cut into chunks of at most 6 characters; the space leads the first
        (" internationalization", [" intern", "ationa", "lizati", "on"]),
        # a whitespace run leaves its last character to lead the next word
        ("a   b\n", ["a", "  ", " b", "\n"]),
        ("x_1 2024-05", ["x_", "1", " 202", "4", "-", "05"]),
    ],
)
def test_tokenize_exact_pieces(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_token_counts_are_realistic_for_english() -> None:
    prose = (
        "Slow growth over hours often points to an unbounded cache or a leaked reference, "
        "so it would help to cap the cache size and see whether the growth stops."
    )
    chars_per_token = len(prose) / count_tokens(prose)
    assert 3.5 <= chars_per_token <= 6.0


# --- generator: determinism and shape ------------------------------------------------------


@pytest.mark.parametrize("level", list(LEVELS))
def test_same_seed_same_conversation_and_seeds_differ(level: str) -> None:
    for seed in (0, 7, 123):
        assert generate_conversation(seed, level) == generate_conversation(seed, level)
    texts = {tuple(m.text for m in conv(seed, level).messages) for seed in SEEDS}
    assert len(texts) == len(SEEDS)


def test_unknown_level_and_bad_spec_are_rejected() -> None:
    with pytest.raises(ValueError, match="not a level"):
        generate_conversation(0, "extreme")
    easy = LEVELS["easy"]
    with pytest.raises(ValueError, match="p_update"):
        dataclasses.replace(easy, p_update=1.5)
    with pytest.raises(ValueError, match="extra messages"):
        dataclasses.replace(easy, n_messages=2 * easy.n_turns + 1)
    with pytest.raises(ValueError, match="too few"):
        LevelSpec(
            n_messages=20,
            n_turns=8,
            n_questions=3,
            p_distractor=0,
            p_update=0,
            p_tool_fact=0,
            min_gap_turns=3,
            max_blocks=10,
        )


@pytest.mark.parametrize("level", list(LEVELS))
def test_messages_are_well_formed(level: str) -> None:
    spec = LEVELS[level]
    for c in all_convs(level):
        assert (c.level, len(c.messages), len(c.questions)) == (
            level,
            spec.n_messages,
            spec.n_questions,
        )
        assert [m.index for m in c.messages] == list(range(spec.n_messages))
        system = c.messages[0]
        assert (system.role, system.kind) == ("system", "system")
        assert all(m.kind != "system" for m in c.messages[1:])
        for m in c.messages:
            assert m.n_tokens == count_tokens(m.text) >= 1
            if m.kind == "reasoning":
                assert m.role == "assistant"
            if m.kind == "tool_output":
                assert m.role == "tool"
                assert 30 <= m.n_tokens <= 250
            if m.kind in ("fact", "question"):
                assert m.role == "user"
            if m.kind in ("chat", "chitchat", "fact", "question"):
                assert 10 <= m.n_tokens <= 200, m.text
            # the generator's kind is the only place a fact is marked: hosts of statements
            # are ordinary chat, notes files and reasoning spans
            if m.facts:
                assert m.kind in ("fact", "tool_output", "reasoning")


@pytest.mark.parametrize("level", list(LEVELS))
def test_turns_pair_every_user_message_with_the_following_reply(level: str) -> None:
    for c in all_convs(level):
        pairs = turns(c)
        assert len(pairs) == LEVELS[level].n_turns
        covered = [0]
        for user, reply in pairs:
            assert c.messages[user].role == "user"
            assert (c.messages[reply].role, c.messages[reply].kind) != ("assistant", "reasoning")
            assert c.messages[reply].role == "assistant"
            between = c.messages[user + 1 : reply]
            assert all(m.kind in ("reasoning", "tool_output") for m in between)
            covered.extend(range(user, reply + 1))
        assert covered == list(range(len(c.messages)))  # the turns tile the conversation


def test_turns_on_a_hand_made_conversation() -> None:
    shape: list[tuple[Role, Kind]] = [
        ("system", "system"),
        ("user", "chat"),  # 1 ┐ turn 0: reasoning and a tool output before the reply
        ("assistant", "reasoning"),  # 2
        ("tool", "tool_output"),  # 3
        ("assistant", "chat"),  # 4 ┘
        ("user", "question"),  # 5 ┐ turn 1
        ("assistant", "chat"),  # 6 ┘
        ("user", "fact"),  # 7 ┐ turn 2
        ("assistant", "reasoning"),  # 8
        ("assistant", "chat"),  # 9 ┘
    ]
    messages = tuple(Message(i, role, kind, "x", 1) for i, (role, kind) in enumerate(shape))
    assert turns(Conversation(0, "easy", messages, ())) == [(1, 4), (5, 6), (7, 9)]
    orphan = Conversation(0, "easy", messages[:3], ())
    with pytest.raises(AssertionError, match="no assistant reply"):
        turns(orphan)


@pytest.mark.parametrize("level", list(LEVELS))
def test_statements_exceed_the_budget_and_the_answers_fit(level: str) -> None:
    spec = LEVELS[level]
    need = {"easy": 0.0, "medium": 1.0, "hard": 1.5}[level]
    for c in all_convs(level):
        assert statement_blocks(c) >= need * spec.max_blocks, c.seed
        answers = [f for q in c.questions for f in q.facts]
        assert statement_blocks(c, answers) <= spec.max_blocks // 2
        assert total_blocks(c) >= 3 * spec.max_blocks


def test_harder_levels_are_longer_and_denser() -> None:
    easy, medium, hard = LEVELS["easy"], LEVELS["medium"], LEVELS["hard"]
    assert easy.n_messages < medium.n_messages < hard.n_messages
    assert easy.n_questions < medium.n_questions < hard.n_questions
    assert easy.min_gap_turns < medium.min_gap_turns < hard.min_gap_turns
    assert easy.n_decoys < medium.n_decoys < hard.n_decoys
    assert (easy.p_distractor, easy.p_update, easy.p_tool_fact, easy.p_two_fact) == (0, 0, 0, 0)
    assert 0 < medium.p_distractor <= hard.p_distractor
    assert 0 < medium.p_update <= hard.p_update
    assert 0 < medium.p_tool_fact <= hard.p_tool_fact
    assert 0 < medium.p_two_fact <= hard.p_two_fact


# --- the answer key ------------------------------------------------------------------------


@pytest.mark.parametrize("level", list(LEVELS))
def test_every_question_points_at_earlier_statements_of_its_values(level: str) -> None:
    spec = LEVELS[level]
    attrs = {t.attr for t in TEMPLATES}
    for c in all_convs(level):
        turn_of = {i: t for t, (u, r) in enumerate(turns(c)) for i in range(u, r + 1)}
        keys_at = {i: set(m.facts) for i, m in enumerate(c.messages)}
        asked = [q.message_index for q in c.questions]
        assert asked == sorted(asked)
        for q in c.questions:
            asking = c.messages[q.message_index]
            assert asking.kind == "question"
            assert q.text in asking.text and q.text.endswith("?")
            assert q.level in QUESTION_LEVELS
            assert len(q.facts) == len(q.values) == (2 if q.level == "two_fact" else 1)
            assert set(q.values) <= set(q.candidates)
            assert q.fact_index == q.facts[0].message_index
            parts = q.answer.split(" and ")
            for fact, value, part in zip(q.facts, q.values, parts, strict=True):
                text = said(c, fact)
                assert fact in c.statements
                assert names_value(text, value), (text, value)
                assert any(a in text for a in attrs)
                distance = turn_of[q.message_index] - turn_of[fact.message_index]
                assert distance >= 1 and (
                    distance <= spec.near_turns or distance >= spec.min_gap_turns
                )
                # the answer-bearing statement is the latest of its key before the question
                owner, attr = part.rpartition(" is ")[0].split(" ", 1)
                key = f"{'my' if owner == 'your' else owner.removesuffix(chr(39) + 's')}|{attr}"
                assert key in keys_at[fact.message_index]
                later = [
                    i for i in range(fact.message_index + 1, q.message_index) if key in keys_at[i]
                ]
                assert later == [], (key, later)
            assert judge_answer(q.answer, q.values, q.candidates) == "correct"


@pytest.mark.parametrize("level", ["medium", "hard"])
def test_distractors_updates_tool_facts_and_two_fact_questions_appear(level: str) -> None:
    seen: set[str] = set()
    for c in all_convs(level):
        levels = {q.level for q in c.questions}
        assert {"updated", "tool", "two_fact"} <= levels
        seen |= levels
        for q in c.questions:
            if q.level == "tool":
                assert c.messages[q.fact_index].role == "tool"
            if q.level == "updated":
                (fact,) = q.facts
                update = said(c, fact)
                assert not ANNOUNCING.search(update), update  # it reads like any statement
                stale = [
                    s
                    for s in c.statements
                    if s.message_index < fact.message_index
                    and set(c.messages[s.message_index].facts)
                    & set(c.messages[fact.message_index].facts)
                    and not names_value(said(c, s), q.values[0])
                ]
                assert stale, q
    assert seen == set(QUESTION_LEVELS) - {"direct"} or seen == set(QUESTION_LEVELS)


def test_facts_are_not_lexically_special() -> None:
    hard = all_convs("hard")
    statements = [said(c, s) for c in hard for s in c.statements]
    v1 = sum(bool(V1_SHAPE.match(s)) for s in statements)
    assert v1 < 0.25 * len(statements)  # the v1 one-shape regex finds a minority
    hosts = Counter(c.messages[s.message_index].role for c in hard for s in c.statements)
    assert set(hosts) == {"user", "tool", "assistant"}  # chat, notes files and reasoning
    assert all(not ANNOUNCING.search(s) for s in statements)
    pools = {v for t in TEMPLATES for v in t.values if len(v) > 3}
    filler = [
        m.text
        for c in hard
        for m in c.messages
        if not m.facts and m.role == "user" and m.kind != "question"
    ]
    with_names = sum(any(n in t for n in OWNER_NAMES) for t in filler)
    with_values = sum(any(v in t for v in pools) for t in filler)
    assert with_names >= 0.2 * len(filler) and with_values >= 0.1 * len(filler)


# --- the extractive reader -----------------------------------------------------------------


def test_reader_picks_the_best_matching_latest_sentence() -> None:
    text = (
        "My locker code is 4471. Maria's locker code is 9130.\n"
        "- buy printer paper\nWhat is my locker code?"
    )
    assert extractive_answer(text, "What is my locker code?") == "My locker code is 4471."
    assert extractive_answer(text, "What is Maria's locker code?") == (
        "Maria's locker code is 9130."
    )
    updated = f"{text} So my locker code is 5512 these days."
    assert extractive_answer(updated, "What was my locker code again?") == (
        "So my locker code is 5512 these days."
    )
    # one shared word ("my") is not enough
    assert extractive_answer(text, "What is my cat's name?") == NO_ANSWER
    assert extractive_answer("Nice weather today.", "What is the wifi password?") == NO_ANSWER
    assert extractive_answer("", "What is my locker code?") == NO_ANSWER
    # the assistant's "your" is the user's "my"
    assert extractive_answer("I note your cat's name is Mochi.", "What is my cat's name?") == (
        "I note your cat's name is Mochi."
    )
    two = extractive_answer(text, "What are my locker code and Maria's locker code?")
    assert "4471" in two and "9130" in two


def test_reader_places_a_recalled_copy_at_its_original_message() -> None:
    stale = "user #3: My locker code is 4471.\n"
    update = "user #7: So my locker code is 5512 these days.\n"
    copy = "user #12: [recalled turn from message 3] User: My locker code is 4471."
    assert extractive_answer(stale + update + copy, "What is my locker code?") == (
        "So my locker code is 5512 these days."
    )
    # recalled after an update that has left the view, the stale copy is all there is
    assert "4471" in extractive_answer(copy, "What is my locker code?")


def test_sentences_split_at_stops_and_lines() -> None:
    assert split_sentences("One. Two!\n- three\n\n Four? five") == [
        "One.",
        "Two!",
        "- three",
        "Four?",
        "five",
    ]


def _visible(c: Conversation, q: Question, drop: set[int] | None = None) -> str:
    return "\n".join(
        m.text for m in c.messages[: q.message_index + 1] if m.index not in (drop or set())
    )


@pytest.mark.parametrize("level", list(LEVELS))
def test_reader_answers_from_the_facts_and_never_without_them(level: str) -> None:
    for c in all_convs(level):
        for q in c.questions:
            seen = extractive_answer(_visible(c, q), q.text)
            assert judge_answer(seen, q.values, q.candidates) == "correct", (seen, q)
            drop = {f.message_index for f in q.facts}
            blind = extractive_answer(_visible(c, q, drop), q.text)
            assert judge_answer(blind, q.values, q.candidates) != "correct", (blind, q)
