"""The context family's tokenizer, conversation generator (with its answer key and turns) and
extractive reader."""

from __future__ import annotations

import dataclasses
import re
import statistics
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from kv_cache_env.context.conversation import (
    LEVELS,
    QUESTION_LEVELS,
    UPDATE_LEADS,
    LevelSpec,
    generate_conversation,
    total_blocks,
    turns,
)
from kv_cache_env.context.extractive import NO_ANSWER, extractive_answer, split_sentences
from kv_cache_env.context.tokenizer import count_tokens, tokenize
from kv_cache_env.context.types import Conversation, Kind, Message, Question, Role

SEEDS = range(20)
"""Seeds 0..19 per level: enough for stable means, fast enough (~3 s for all tests)."""


@cache
def conv(seed: int, level: str) -> Conversation:
    return generate_conversation(seed, level)


def all_convs(level: str) -> list[Conversation]:
    return [conv(seed, level) for seed in SEEDS]


def value_of(question: Question) -> str:
    """The answer key's value: "your locker code is 4471" → "4471"."""
    return question.answer.split(" is ", 1)[1]


def mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text) is not None


_OWNED = r"(My|my|[A-Z][a-z]+'s) {attr} is ([^.\n]+)\."


def attribute_of(question: Question) -> str:
    """The template attribute of a question: "your dog's name is Rufus" → "dog's name"."""
    head = question.answer.split(" is ", 1)[0]
    return head.split(" ", 1)[1]


def owner_of(question: Question) -> str:
    head = question.answer.split(" is ", 1)[0].split(" ", 1)[0]
    return "my" if head == "your" else head


def owned_facts(c: Conversation, question: Question) -> list[tuple[int, str, str]]:
    """(message index, owner, value) of every "<owner> <attr> is <value>." in the chat."""
    pattern = re.compile(_OWNED.format(attr=re.escape(attribute_of(question))))
    return [
        (m.index, owner.lower() if owner.lower() == "my" else owner, value)
        for m in c.messages
        for owner, value in pattern.findall(m.text)
    ]


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
                assert 60 <= m.n_tokens <= 250
            if m.kind in ("fact", "question"):
                assert m.role == "user"
            if m.kind in ("chat", "chitchat", "fact", "question"):
                assert 10 <= m.n_tokens <= 120, m.text


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
def test_conversation_sizes_and_cache_budget(level: str) -> None:
    spec = LEVELS[level]
    tokens = [sum(m.n_tokens for m in c.messages) for c in all_convs(level)]
    assert 1500 <= statistics.mean(tokens) <= 6000
    ratios = [spec.max_blocks / total_blocks(c) for c in all_convs(level)]
    assert 0.40 <= statistics.mean(ratios) <= 0.50
    assert all(0.33 <= r <= 0.62 for r in ratios), ratios


def test_harder_levels_are_longer_and_further() -> None:
    easy, medium, hard = LEVELS["easy"], LEVELS["medium"], LEVELS["hard"]
    assert easy.n_messages < medium.n_messages < hard.n_messages
    assert easy.n_questions < medium.n_questions < hard.n_questions
    assert easy.min_gap_turns < medium.min_gap_turns < hard.min_gap_turns
    assert easy.max_blocks < medium.max_blocks < hard.max_blocks
    assert (easy.p_distractor, easy.p_update, easy.p_tool_fact) == (0, 0, 0)
    assert 0 < medium.p_distractor <= hard.p_distractor
    assert 0 < medium.p_update <= hard.p_update
    assert 0 < medium.p_tool_fact <= hard.p_tool_fact


# --- the answer key ------------------------------------------------------------------------


@pytest.mark.parametrize("level", list(LEVELS))
def test_every_question_points_at_an_earlier_message_holding_its_answer(level: str) -> None:
    gap = LEVELS[level].min_gap_turns
    for c in all_convs(level):
        turn_of = {i: t for t, (u, r) in enumerate(turns(c)) for i in range(u, r + 1)}
        asked = [q.message_index for q in c.questions]
        assert asked == sorted(asked)
        assert len({attribute_of(q) for q in c.questions}) == len(c.questions)
        for q in c.questions:
            asking, fact = c.messages[q.message_index], c.messages[q.fact_index]
            assert asking.kind == "question"
            assert q.text in asking.text and q.text.endswith("?")
            assert q.fact_index < q.message_index
            assert turn_of[q.message_index] - turn_of[q.fact_index] >= gap
            assert q.level in QUESTION_LEVELS
            # the fact message states exactly the answer key
            assert (q.fact_index, owner_of(q), value_of(q)) in owned_facts(c, q)
            assert fact.kind == ("tool_output" if q.level == "tool" else "fact")
            # the single source: no reply, reasoning span or other user message has the value
            for m in c.messages:
                if m.index != q.fact_index and m.role != "tool":
                    assert not mentions(m.text, value_of(q)), (m.text, q)
            # ... and the question's latest statement is the fact message
            own = [i for i, owner, _ in owned_facts(c, q) if owner == owner_of(q)]
            assert max(own) == q.fact_index


def test_easy_questions_are_all_direct() -> None:
    for c in all_convs("easy"):
        assert {q.level for q in c.questions} == {"direct"}
        for q in c.questions:
            assert [i for i, _, _ in owned_facts(c, q)] == [q.fact_index]


@pytest.mark.parametrize("level", ["medium", "hard"])
def test_distractors_updates_and_tool_facts_appear_where_promised(level: str) -> None:
    for c in all_convs(level):
        levels = [q.level for q in c.questions]
        assert "updated" in levels and "tool" in levels
        distractors = 0
        for q in c.questions:
            facts = owned_facts(c, q)
            others = [(i, v) for i, owner, v in facts if owner != owner_of(q)]
            assert all(v != value_of(q) and i < q.message_index for i, v in others)
            distractors += len(others)
            stale = [v for i, owner, v in facts if owner == owner_of(q) and i != q.fact_index]
            if q.level == "updated":
                assert len(stale) == 1 and stale[0] != value_of(q)
                assert c.messages[q.fact_index].text.startswith(UPDATE_LEADS)
            else:
                assert stale == []
            if q.level == "distractor":
                assert others
        assert distractors >= 1


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
    updated = f"{text} Scratch that, it changed. My locker code is 5512."
    assert extractive_answer(updated, "What was my locker code again?") == (
        "My locker code is 5512."
    )
    assert extractive_answer(text, "What is my cat's name?") == "My locker code is 4471."
    assert extractive_answer("Nice weather today.", "What is the wifi password?") == NO_ANSWER
    assert extractive_answer("", "What is my locker code?") == NO_ANSWER


def test_sentences_split_at_stops_and_lines() -> None:
    assert split_sentences("One. Two!\n- three\n\n Four? five") == [
        "One.",
        "Two!",
        "- three",
        "Four?",
        "five",
    ]


def _visible(c: Conversation, q: Question, drop: int | None = None) -> str:
    return "\n".join(m.text for m in c.messages[: q.message_index + 1] if m.index != drop)


@pytest.mark.parametrize("level", list(LEVELS))
def test_reader_answers_from_the_fact_and_fails_without_it(level: str) -> None:
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    full: list[float] = []
    removed: list[float] = []
    removed_direct: list[float] = []
    for c in all_convs(level):
        for q in c.questions:
            seen = extractive_answer(_visible(c, q), q.text)
            blind = extractive_answer(_visible(c, q, drop=q.fact_index), q.text)
            assert mentions(seen, value_of(q)), (seen, q)
            assert not mentions(blind, value_of(q)), (blind, q)
            full.append(scorer.score(q.answer, seen)["rougeL"].fmeasure)
            removed.append(scorer.score(q.answer, blind)["rougeL"].fmeasure)
            if q.level == "direct":
                removed_direct.append(removed[-1])
    assert statistics.mean(full) >= 0.85
    assert statistics.mean(removed_direct) <= 0.3
    # A distractor or the stale value of an updated fact shares the answer's template words,
    # which ROUGE-L rewards: the drop is smaller there, but still large.
    assert statistics.mean(full) - statistics.mean(removed) >= 0.4
    if level == "easy":
        assert statistics.mean(removed) <= 0.3
