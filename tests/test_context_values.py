"""The value check (issue 16): verdicts and scores of answers, the first-person normalisation
of ROUGE-L, and the rubric terms that must not pay for doing nothing useful."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kv_context_env.sim.episode import ContextRecord, QuestionResult
from kv_context_env.sim.scoring import rouge_l
from kv_context_env.sim.values import (
    MAX_ANSWER_TOKENS,
    VERDICT_SCORES,
    judge_answer,
    names_value,
    person_normalised,
)
from kv_context_env.tokenizer import count_tokens
from rubrics.context import (
    CONTEXT_COMPONENTS,
    answer_quality,
    context_score,
    oom_penalty,
    recall_cost,
)

POOL = ("4471", "9130", "5512", "2086")


def test_verdicts() -> None:
    assert judge_answer("My locker code is 4471.", ["4471"], POOL) == "correct"
    assert judge_answer("It was 9130, I think.", ["4471"], POOL) == "wrong"  # stale / distractor
    assert judge_answer("4471 or maybe 9130", ["4471"], POOL) == "wrong"  # hedging is wrong
    assert judge_answer("I don't know.", ["4471"], POOL) == "abstain"
    assert judge_answer("your locker code is", ["4471"], POOL) == "abstain"  # an echo
    assert judge_answer("44715", ["4471"], POOL) == "abstain"  # whole values only
    two = ("Saffron", "8802")
    assert judge_answer("Saffron, and 8802.", two, (*two, "Mochi", "4471")) == "correct"
    assert judge_answer("Saffron.", two, (*two, "Mochi")) == "abstain"
    # a dump of the visible text that holds the value among other text is no answer
    notes = " ".join(f"The note number {i} says the fern needs water." for i in range(12))
    dump = f"My locker code is 4471. {notes}"
    assert count_tokens(dump) > MAX_ANSWER_TOKENS
    assert judge_answer(dump, ["4471"], POOL) == "abstain"
    assert judge_answer(dump + " It was 9130 before.", ["4471"], POOL) == "wrong"
    assert names_value("a double espresso, please", "a double espresso")
    assert names_value("double espresso", "a double espresso")
    assert not names_value("B-170", "B-17") and not names_value("LC-55812", "55812")


def test_i_dont_know_beats_a_wrong_value_and_an_echo_earns_nothing() -> None:
    assert VERDICT_SCORES["correct"] > VERDICT_SCORES["abstain"] > VERDICT_SCORES["wrong"]
    assert VERDICT_SCORES["abstain"] == 0.0


@given(st.text(alphabet="abc xyz.,!?", max_size=40), st.sampled_from(POOL))
def test_an_answer_naming_only_the_key_value_is_correct(noise: str, value: str) -> None:
    assert judge_answer(f"{noise} {value} {noise}", [value], POOL) == "correct"
    other = next(v for v in POOL if v != value)
    assert judge_answer(f"{noise} {value} {other}", [value], POOL) == "wrong"


def test_a_correct_first_person_answer_gets_full_rouge() -> None:
    key = "your locker code is 4471"
    assert rouge_l(person_normalised("My locker code is 4471."), person_normalised(key)) == 1.0
    echo = rouge_l(person_normalised("your locker code is"), person_normalised(key))
    assert echo < 1.0


def _record(scores: list[str], active: int, recalls: int = 0, oom: int = 0) -> ContextRecord:
    questions = tuple(
        QuestionResult(i, "direct", "q", "a", "r", 0.5, True, v == "correct", v, VERDICT_SCORES[v])
        for i, v in enumerate(scores)
    )
    return ContextRecord(
        level="hard",
        seed=0,
        max_blocks=48,
        turns=10,
        questions=questions,
        active_blocks=(active,) * 10,
        oom_events=oom,
        oom_blocks=oom,
        agent_evicted_blocks=0,
        recalls=recalls,
        recalled_turns=0,
        recalled_tokens=0,
        invalid_actions=0,
        archived_turns=0,
    )


def test_an_empty_cache_earns_nothing_and_an_oom_costs_a_share_of_turns() -> None:
    """No term pays for leaving blocks empty (the live facts need more than the budget): an
    episode that evicts everything and answers nothing scores 0, the same answers with a full
    cache score the same, and OOM turns cost their share."""
    assert set(CONTEXT_COMPONENTS) == {"answer_quality", "oom_penalty", "recall_cost"}
    empty = _record(["abstain"] * 4, active=1)
    assert context_score(empty)[1] == 0.0
    lean = _record(["correct"] * 4, active=12)
    full = _record(["correct"] * 4, active=48)
    assert context_score(lean)[1] == context_score(full)[1] == 1.0
    half = _record(["correct", "correct", "abstain", "wrong"], active=12)
    assert answer_quality(half) == (2 + 0 - 0.25) / 4
    crowded = _record(["correct"] * 4, active=48, oom=5)
    assert oom_penalty(crowded) == -0.5
    assert context_score(crowded)[1] == pytest.approx(1.0 - 0.05 * 0.5)


def test_recall_is_charged_by_its_latency_in_answer_budgets() -> None:
    few = dataclasses.replace(_record(["correct"] * 6, active=12, recalls=6), recall_latency_s=1.2)
    many = dataclasses.replace(few, recalls=102, recall_latency_s=20.4)
    assert recall_cost(few) == pytest.approx(-1.0)  # 1.2 s over 6 questions of 0.2 s each
    assert recall_cost(many) == pytest.approx(-17.0)  # uncapped
    assert context_score(many)[1] < context_score(few)[1]
