"""Issue 16's archive and episode fixes inside real episodes: tool output archived with its
turn, superseded facts marked, a turn recalled again once its copy is evicted, `fact_visible`
by statement span, and an observation that shows roles and text but never `kind`."""

from __future__ import annotations

from evals.context.policies import oracle, trt_lru
from kv_cache_env.context.agent import render_context
from kv_cache_env.context.conversation import generate_conversation
from kv_cache_env.context.episode import ContextEpisode
from kv_cache_env.context.types import Conversation, Question
from kv_cache_env.context.values import names_value


def _find(level: str, kind: str) -> tuple[Conversation, Question]:
    for seed in range(50):
        conversation = generate_conversation(seed, level)
        for question in conversation.questions:
            if question.level == kind:
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


def test_superseded_turns_are_marked_and_recall_prefers_the_current_one() -> None:
    conversation, question = _find("hard", "updated")
    with ContextEpisode(conversation) as episode:
        _until(episode, question.message_index)
        turns = episode.archive.turns()
        superseded = [t for t in turns if t.superseded]
        assert superseded, "the turn with the stale value is marked"
        assert all(not names_value(t.user_text, question.values[0]) for t in superseded)
        ranked = episode.archive.recall(question.text, k=len(turns))
        flags = [t.superseded for t in ranked]
        assert flags == sorted(flags)  # every current turn before every superseded one


def test_a_turn_is_recalled_again_after_its_copy_is_evicted() -> None:
    conversation, question = _find("hard", "direct")
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
    conversation, question = _find("hard", "direct")
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
