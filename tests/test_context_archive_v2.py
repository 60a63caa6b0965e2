"""The archive and episode inside real episodes: tool output archived with its turn, recall
ranked by the query alone and priced by what it brings back, a turn recalled again once its
copy is evicted, `fact_visible` by statement span, and an observation that shows roles and
text but never `kind`."""

from __future__ import annotations

import pytest

from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.llm.agent import render_context
from kv_context_env.policies.baselines import oracle, trt_lru
from kv_context_env.readers.extractive import extractive_answer
from kv_context_env.sim.archive import fts_query
from kv_context_env.sim.episode import (
    RECALL_PREFILL_TOKENS_PER_S,
    RECALL_SEARCH_S,
    ContextEpisode,
    recall_latency_s,
)
from kv_context_env.sim.values import names_value
from kv_context_env.vocabulary import Conversation, Question
from rubrics.context import RECALL_SLO_S, context_score


def _find(level: str, kind: str) -> tuple[Conversation, Question]:
    """The first question of `kind`: a question level (`later`, `updated`, ...), `tool` (its
    statement is in a tool output) or `reasoning` (in the assistant's reasoning)."""
    for seed in range(50):
        conversation = generate_conversation(seed, level)
        for question in conversation.questions:
            said_in = conversation.messages[question.facts[0].message_index]
            if question.level == kind or kind in (said_in.role, said_in.kind):
                return conversation, question
    raise AssertionError(f"no {kind} question")


def _until(episode: ContextEpisode, message_index: int, policy=trt_lru) -> None:
    """Play `policy` until conversation message `message_index` has arrived."""
    while episode.current_message.index < message_index:
        policy(episode)
        episode.enforce()
        question = episode.pending_question
        episode.step(answer="I don't know." if question else None)


def test_tool_output_is_archived_with_its_turn_and_recalled() -> None:
    conversation, question = _find("hard", "tool")
    value = question.values[0]
    with ContextEpisode(conversation) as episode:
        _until(episode, len(conversation.messages) - 1)
        stored = [t for t in episode.archive.turns() if names_value(t.tool_text, value)]
        assert stored, "the notes file's turn is archived with its tool output"
        assert not names_value(stored[0].user_text + stored[0].assistant_text, value)
        found = episode.archive.recall(question.text, k=len(episode.archive.turns()))
        assert stored[0].user_index in [t.user_index for t in found]


def test_reasoning_is_archived_with_its_turn_and_recalled() -> None:
    """A fact worked out in the assistant's reasoning is not lost with its blocks: the span is
    archived with its turn, and a recall of it brings it back in the copy, before the reply."""
    conversation, question = _find("hard", "reasoning")
    value = question.values[0]
    with ContextEpisode(conversation) as episode:
        _until(episode, len(conversation.messages) - 1)
        stored = [t for t in episode.archive.turns() if names_value(t.reasoning_text, value)]
        assert stored, "the reasoning's turn is archived with its reasoning"
        assert not names_value(stored[0].user_text + stored[0].assistant_text, value)
        span = question.facts[0]
        statement = conversation.messages[span.message_index].text[span.start : span.end]
        episode.recall(statement, k=len(episode.archive.turns()))
        copies = [episode.cache.message(i).text for i in episode.recalled_copies]
        (copy,) = [c for c in copies if f"message {stored[0].user_index}]" in c]
        assert copy.index("Reasoning: ") < copy.index(statement) < copy.index("\nAssistant: ")


def test_recall_ranks_by_the_query_alone_and_the_reader_places_copies_in_time() -> None:
    conversation, question = _find("hard", "updated")
    with ContextEpisode(conversation) as episode:
        _until(episode, question.message_index)
        turns = episode.archive.turns()
        ranked = episode.archive.recall(question.text, k=len(turns))
        rows = episode.archive._db.execute(
            "SELECT t.user_index, bm25(turns_fts) FROM turns_fts JOIN turns AS t"
            " ON t.id = turns_fts.rowid WHERE turns_fts MATCH ? ORDER BY t.user_index",
            (fts_query(question.text),),
        ).fetchall()
        score = dict(rows)
        keys = [(score[t.user_index], t.user_index) for t in ranked]
        assert keys == sorted(keys)  # bm25 of the query, then the older turn: nothing else
    # a recalled stale value stands at its original message: the later update still wins
    text = (
        "user #4: The plumber has a new number, 07700 900431.\n"
        "user #9: [recalled turn from message 2] User: You can reach the plumber on 0161 555 0192."
    )
    assert extractive_answer(text, "How do I get hold of the plumber?") == (
        "The plumber has a new number, 07700 900431."
    )


def test_recall_is_priced_by_the_tokens_it_brings_back() -> None:
    conversation, question = _find("hard", "later")
    with ContextEpisode(conversation) as episode:
        _until(episode, question.message_index)
        assert episode.recall("zzzz qqqq") == "recall: no archived turn matches"
        assert episode.record().recall_latency_s == pytest.approx(RECALL_SEARCH_S)
        episode.recall(question.text)
        tokens = episode.cache.message(episode.cache.n_messages - 1).n_tokens
        record = episode.record()
    assert record.recalled_tokens == tokens
    assert recall_latency_s(tokens) == RECALL_SEARCH_S + tokens / RECALL_PREFILL_TOKENS_PER_S
    assert record.recall_latency_s == pytest.approx(2 * RECALL_SEARCH_S + tokens / 4096)
    components, _ = context_score(record)
    assert components["recall_cost"] == pytest.approx(
        -record.recall_latency_s / (RECALL_SLO_S * max(1, len(record.questions)))
    )


def test_a_turn_is_recalled_again_after_its_copy_is_evicted() -> None:
    conversation, question = _find("hard", "later")
    with ContextEpisode(conversation) as episode:
        _until(episode, question.message_index)
        assert episode.recall(question.text).startswith("recalled")
        copy = episode.cache.n_messages - 1
        episode.recall(question.text)  # its copy is resident: the next best turn comes
        assert episode.cache.message(copy + 1).text != episode.cache.message(copy).text
        episode.evict_message(copy)
        assert episode.recall(question.text).startswith("recalled")
        assert episode.cache.message(copy + 2).text == episode.cache.message(copy).text
        assert episode.record().recalled_turns == 3


def test_fact_visible_counts_the_statement_span_not_the_whole_message() -> None:
    conversation, question = _find("hard", "later")
    with ContextEpisode(conversation) as episode:
        _until(episode, question.message_index, policy=oracle)
        oracle(episode)
        episode.enforce()
        fact = episode.cache_index[question.fact_index]
        assert not episode.cache.fully_resident(fact)  # the lean oracle kept only the span
        assert episode.facts_visible(question)
        episode.step(answer="I don't know.")
        assert episode.record().questions[-1].fact_visible


def test_the_observation_shows_roles_and_text_but_never_kinds() -> None:
    conversation = generate_conversation(3, "hard")
    with ContextEpisode(conversation) as episode:
        for _ in range(30):
            text = render_context(episode.observe())
            for kind in ("/fact", "/question", "/chat", "/reasoning", "/tool_output", "kind"):
                assert kind not in text
            trt_lru(episode)
            episode.enforce()
            question = episode.pending_question
            episode.step(answer="I don't know." if question else None)
