"""The attacks and the signal-reading reference see only what an agent sees: played on a copy
of a conversation whose answer key is blanked (no statement list; each question's values,
candidates, key, kind and answer-bearing span replaced), they act exactly as on the real one.
The oracle, which reads the key, is the negative control: it acts differently."""

from __future__ import annotations

import dataclasses

import pytest

from evals.context import validate
from evals.context.validate import READERS, make_policy
from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.policies.probe import fit_probe
from kv_context_env.sim.episode import ContextEpisode
from kv_context_env.vocabulary import Conversation, FactSpan


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
    return dataclasses.replace(conversation, questions=questions, facts=(), signals=())


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


@pytest.mark.parametrize(
    "agent", ["signal-reader", "closed-signal-reader", "template-parser", "recall-everything"]
)
def test_an_honest_agent_acts_the_same_without_the_answer_key(
    agent: str, conversation: Conversation
) -> None:
    assert _actions(agent, conversation) == _actions(agent, _blind(conversation))


def test_the_probe_acts_the_same_without_the_answer_key(conversation: Conversation) -> None:
    training = [generate_conversation(1_000_000 + i, "hard") for i in range(3)]
    validate._set_probe(fit_probe(training))
    try:
        assert _actions("probe", conversation) == _actions("probe", _blind(conversation))
    finally:
        validate._set_probe(None)


def test_the_oracle_reads_the_answer_key(conversation: Conversation) -> None:
    assert _actions("oracle", conversation) != _actions("oracle", _blind(conversation))


def test_the_reference_reads_signals_by_their_rules_not_a_phrase_list() -> None:
    """On a hard episode the reference links most signals of need to the subject they are
    about (checked against the generator's signal list, which it never reads), and reads a
    time from each; the closed-template reader of an earlier generator links far fewer."""
    from kv_context_env.generator.conversation import generate_conversation
    from kv_context_env.policies.signal_reader import SignalReader
    from kv_context_env.policies.template_signals import TemplateSignalReader
    from kv_context_env.readers.extractive import extractive_answer
    from kv_context_env.sim.episode import ContextEpisode

    c = generate_conversation(5, "hard")
    said = {
        c.messages[s.span.message_index].text[s.span.start : s.span.end]: s.key
        for s in c.signals
        if s.cue == "need"
    }
    linked = {}
    for name, reader in (("reference", SignalReader()), ("closed", TemplateSignalReader())):
        hits = set()
        with ContextEpisode(c) as episode:
            while not episode.done:
                before = dict(reader.need)
                reader(episode)
                episode.enforce()
                for key, window in reader.need.items():
                    if before.get(key) != window:
                        hits.add(key[0])
                question = episode.pending_question
                episode.step(
                    answer=extractive_answer(episode.visible_text(), question.text)
                    if question
                    else None
                )
        linked[name] = sum(
            any(head in key.split("|")[0].lower() for head in hits) for key in said.values()
        ) / len(said)
    assert linked["reference"] >= 0.9 and linked["closed"] < linked["reference"], linked


def test_the_reference_links_a_mention_by_an_owner_it_never_read() -> None:
    """A subject said as "the puppy class" is mentioned by "the Graz class' venue" when no other
    known subject's head ends in "class"; with two such subjects the mention is left unread."""
    from kv_context_env.policies.signal_reader import SignalReader, Subject

    reader = SignalReader()
    reader.subjects["puppy class"] = Subject("puppy class")
    reader.subjects["vendor"] = Subject("vendor")
    sentence = "The Graz class' venue is what I'll be after tomorrow afternoon."
    assert reader.mentioned(sentence) == "puppy class"
    assert reader.mentioned("The class is what I'll be after tomorrow.") is None
    reader.subjects["pottery class"] = Subject("pottery class")
    assert reader.mentioned(sentence) is None


def test_the_reference_reads_a_named_day_against_the_days_as_they_run() -> None:
    """A time named in days ("on Wednesday evening") is read again as the days run: when the
    days turn out longer than expected, the fact is still needed until Wednesday has come and
    gone, however many turns that takes."""
    from kv_context_env.policies.signal_reader import SignalReader, Window

    reader = SignalReader()
    reader.open_day(0, 0)  # Monday, the first day
    window = reader.window("I'll need the plumber's quote on Wednesday evening.")
    assert isinstance(window, Window) and (window.day, window.part) == (2, 2)
    reader.need[("plumber", "money")] = window
    last = window[1]
    reader.turn = last + 2 * 8  # two days past the turns first expected, and only Tuesday
    reader.open_day(1)
    tuesday = reader.estimate(("plumber", "money"))
    assert tuesday < float("inf")
    reader.turn += 8
    reader.open_day(2)  # Wednesday morning: the evening is still to come
    assert reader.estimate(("plumber", "money")) < tuesday
    reader.turn = 90
    reader.open_day(3)  # Thursday morning: Wednesday evening has just gone
    assert reader.estimate(("plumber", "money")) == reader.overdue_turns
    for turn, weekday in ((110, 4), (130, 5)):  # Friday, Saturday: more than a day past
        reader.turn = turn
        reader.open_day(weekday)
    assert reader.estimate(("plumber", "money")) == float("inf")
