"""The attacks and the signal-reading reference see only what an agent sees: played on a copy
of a conversation whose answer key is blanked (no statement list; each question's values,
candidates, key, kind and answer-bearing span replaced), they act exactly as on the real one.
The oracle, which reads the key, is the negative control: it acts differently."""

from __future__ import annotations

import dataclasses

import pytest

from evals.context.validate import READERS, make_policy
from kv_cache_env.context.conversation import generate_conversation
from kv_cache_env.context.episode import ContextEpisode
from kv_cache_env.context.types import Conversation, FactSpan


def _blind(conversation: Conversation) -> Conversation:
    questions = tuple(
        dataclasses.replace(
            q,
            fact_index=0,
            answer="the value is zzzz",
            level="unknown",
            values=("zzzz",),
            candidates=("zzzz",),
            facts=(FactSpan(0, 0, 1),),
            key="",
        )
        for q in conversation.questions
    )
    return dataclasses.replace(conversation, questions=questions, facts=())


def _actions(agent: str, conversation: Conversation) -> tuple:
    policy = make_policy(agent)
    read = READERS["extractive"]
    with ContextEpisode(conversation) as episode:
        while not episode.done:
            policy(episode)
            episode.enforce()
            question = episode.pending_question
            episode.step(answer=read(episode, question.text) if question else None)
        record = episode.record()
    answers = tuple(q.answer for q in record.questions)
    return (
        record.active_blocks,
        record.recalls,
        record.recalled_tokens,
        record.agent_evicted_blocks,
        record.oom_events,
        answers,
    )


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    return generate_conversation(5, "hard")


@pytest.mark.parametrize("agent", ["signal-reader", "template-parser", "recall-everything"])
def test_an_honest_agent_acts_the_same_without_the_answer_key(
    agent: str, conversation: Conversation
) -> None:
    assert _actions(agent, conversation) == _actions(agent, _blind(conversation))


def test_the_oracle_reads_the_answer_key(conversation: Conversation) -> None:
    assert _actions("oracle", conversation) != _actions("oracle", _blind(conversation))
