"""The learned probe (`policies.probe`): its features read a sentence's neighbours (the
sentences sharing a rare word with it) before and after it, and at a question it keeps the
answering sentence in view (its honesty is tested with the other attacks')."""

from __future__ import annotations

import pytest

from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.policies.keeping import history_text
from kv_context_env.policies.probe import Probe, Reading, fit_probe, probe_policy, read_message
from kv_context_env.readers.extractive import NO_ANSWER, extractive_answer
from kv_context_env.sim.episode import ContextEpisode

TRAINING_SEED = 1_000_000
"""Training episodes sit far from every test and proof block."""


@pytest.fixture(scope="module")
def probe() -> Probe:
    return fit_probe([generate_conversation(TRAINING_SEED + i, "hard") for i in range(3)])


def test_a_sentence_reads_its_neighbours_before_and_after_it() -> None:
    reading = Reading(frozenset({"zanzibar"}))
    said = [
        *read_message(1, "tool", "Remember Zanzibar's fee soon.", 0),
        *read_message(2, "user", "The Zanzibar fee is $40.", 1),
        *read_message(3, "assistant", "Noted, nothing else.", 1),
        *read_message(4, "user", "What was the Zanzibar fee again?", 2),
    ]
    ks = [reading.add(s) for s in said]
    assert [s.valued for s in said] == [False, True, False, False]
    early = reading.features(ks[1], 2, 1).split()
    assert "b:remember" in early and not any(t.startswith("a:") for t in early)
    assert "r0" in early and "s0:fee" in early and "q0" in early
    late = reading.features(ks[1], 4, 3).split()
    assert "a:what_was" in late and "a2:again" in late and "q1" in late and "na1r2" in late
    assert "a:noted" not in late  # no rare word shared


def test_the_answer_is_in_view_at_the_questions(probe: Probe) -> None:
    policy = probe_policy(probe)
    asked = seen = 0
    with ContextEpisode(generate_conversation(6, "medium")) as episode:
        while not episode.done:
            policy(episode)
            episode.enforce()
            question = episode.pending_question
            if question is not None:
                wanted = extractive_answer(history_text(episode), question.text)
                if wanted != NO_ANSWER:
                    asked += 1
                    seen += wanted in episode.visible_text()
            text = episode.visible_text()
            episode.step(answer=extractive_answer(text, question.text) if question else None)
        assert episode.cache.active_blocks <= episode.max_blocks
    # a recall can fetch another turn (it ranks by the words alone): 86 of 97 in view here
    assert asked > 20 and seen >= 0.8 * asked, (seen, asked)
