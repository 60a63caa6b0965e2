"""The conversation-context episode with its baselines: the turn loop, the engine's OOM
fallback, archival and recall inside real episodes, the rubric, and determinism."""

from __future__ import annotations

import json

import pytest

from evals.context.run import context_result, extractive_reader, play_policy
from kv_context_env.generator.conversation import LEVELS, generate_conversation, turns
from kv_context_env.llm.agent import call_context_tool, render_context
from kv_context_env.policies.baselines import get_context_policy
from kv_context_env.sim.episode import (
    ActionError,
    ContextEpisode,
    ContextRecord,
    answer_has_value,
    recall_latency_s,
)
from model_client.model_output import ToolCall
from rubrics.context import CONTEXT_COMPONENTS, context_score


def play(name: str, level: str, seed: int) -> ContextRecord:
    return play_policy(name, level, seed, extractive_reader)


@pytest.mark.parametrize("level", list(LEVELS))
def test_invariants_hold_through_whole_episodes(level: str) -> None:
    """After every step: the tracker's deque is what the cache fully holds, the budget holds,
    and every complete turn with an evicted message has been archived exactly once."""
    conversation = generate_conversation(11, level)
    pairs = turns(conversation)
    for name in ("noop", "oracle", "window-recall"):
        policy = get_context_policy(name)
        with ContextEpisode(conversation) as episode:
            while not episode.done:
                policy(episode)
                episode.enforce()
                question = episode.pending_question
                episode.step(extractive_reader(episode, question.text) if question else None)
                cache = episode.cache
                assert episode.tracker.context_indices() == cache.resident_messages()
            record = episode.record()
            assert max(record.active_blocks) <= episode.max_blocks  # after each enforcement
            archived = {t.user_index for t in episode.archive.turns()}
            index = episode.cache_index
            expected = {
                index[u]
                for u, a in pairs
                if u in index
                and a in index
                and not (cache.fully_resident(index[u]) and cache.fully_resident(index[a]))
            }
            assert archived == expected, name
            assert episode.archive.count() == len(archived) == record.archived_turns


def test_proactive_trt_lru_evicts_what_the_engine_would_but_without_oom() -> None:
    for level in LEVELS:
        engine = play("noop", level, 3)
        proactive = play("trt-lru", level, 3)
        assert engine.oom_events > 0 and proactive.oom_events == 0
        assert engine.active_blocks == proactive.active_blocks
        assert [q.answer for q in engine.questions] == [q.answer for q in proactive.questions]


def test_the_oracle_answers_and_tops_the_baselines() -> None:
    """The oracle cannot keep every live fact (the live load exceeds the budget): it recalls
    some, pays for it, and still answers nearly everything and beats every baseline."""
    for level in ("easy", "hard"):
        oracle = [play("oracle", level, seed) for seed in range(2)]
        answers = [q.value_correct for r in oracle for q in r.questions]
        assert sum(answers) / len(answers) >= 0.9
        assert all(r.oom_events == 0 for r in oracle)
        if level == "hard":
            assert sum(r.recalls for r in oracle) > 0
        best = sum(context_score(r)[1] for r in oracle)
        for name in ("noop", "trt-lru", "window-recall"):
            others = sum(context_score(play(name, level, seed))[1] for seed in range(2))
            assert best > others, (level, name)


def _later_question_out_of_view(level: str, seed: int) -> tuple[ContextEpisode, object]:
    """An episode played by `trt-lru` up to the first question asked days after its statement,
    whose statement has left the view (the episode is open: the caller closes it)."""
    conversation = generate_conversation(seed, level)
    policy = get_context_policy("trt-lru")
    episode = ContextEpisode(conversation)
    while not episode.done:
        policy(episode)
        question = episode.pending_question
        if (
            question is not None
            and question.level != "soon"
            and not episode.facts_visible(question)
        ):
            return episode, question
        episode.enforce()
        episode.step(extractive_reader(episode, question.text) if question else None)
    episode.close()
    raise AssertionError("no later question out of view")


def test_recall_brings_an_archived_fact_back_and_charges_its_tokens() -> None:
    """A question whose statement was evicted: recalling with the statement's own words brings
    its turn back as new blocks, the reader answers from the copy, and the recall's latency is
    charged by the tokens it returned. (Ranking is by the query alone: a turn whose signals name
    the same subject can outrank the statement's own, so the test takes the first episode whose
    statement ranks its own turn first.)"""
    for seed in range(6):
        episode, question = _later_question_out_of_view("medium", seed)
        span = question.facts[0]
        statement = episode.conversation.messages[span.message_index].text[span.start : span.end]
        (best,) = episode.archive.recall(statement)
        if best.user_index <= span.message_index <= best.assistant_index:
            break
        episode.close()
    else:
        raise AssertionError("no statement ranks its own turn first")
    with episode:
        blocks_before = episode.cache.n_blocks
        assert extractive_reader(episode, question.text) != question.values[0]
        assert episode.recall(statement).startswith("recalled")
        copy = episode.cache.message(episode.cache.n_messages - 1)
        assert copy.kind == "recalled" and statement in copy.text
        assert episode.cache.n_blocks > blocks_before  # the copy takes new blocks
        assert episode.facts_visible(question)
        episode.enforce()
        answer = extractive_reader(episode, question.text)
        assert answer_has_value(answer, question.values[0]), answer
        episode.step(answer)
        record = episode.record()
    assert record.recalls == 1 and record.recalled_turns == 1
    assert record.recalled_tokens == copy.n_tokens
    assert record.recall_latency_s == pytest.approx(recall_latency_s(copy.n_tokens))
    assert record.questions[-1].value_correct


def test_recalled_blocks_count_against_the_budget_and_overflow_is_an_oom() -> None:
    """With the cache full to its budget, a recall's blocks push it over: the engine evicts by
    itself (an OOM event), taking the oldest blocks first."""
    episode, question = _later_question_out_of_view("hard", 1)
    with episode:
        cache = episode.cache
        assert cache.active_blocks <= episode.max_blocks  # trt-lru left it at the budget
        span = question.facts[0]
        statement = episode.conversation.messages[span.message_index].text[span.start : span.end]
        ooms = episode.record().oom_events
        episode.recall(statement)
        assert cache.active_blocks > episode.max_blocks
        event = episode.enforce()
        assert event is not None and cache.active_blocks <= episode.max_blocks
        assert episode.record().oom_events == ooms + 1
        # the engine's prioritized LRU: every block was read this turn, so the oldest go
        # first (the system prompt last); a whole recalled turn can push out its own start
        system = set(cache.blocks_of(0))
        kept = [k for k in range(cache.n_blocks) if cache.is_active(k) and k not in system]
        assert max(event.blocks) < min(kept)


def test_episodes_are_deterministic_and_records_round_trip() -> None:
    first = play("sink-recent", "medium", 5)
    second = play("sink-recent", "medium", 5)
    assert first == second
    data = json.loads(json.dumps(first.as_dict()))
    assert ContextRecord.from_dict(data) == first
    result = context_result(
        agent="sink-recent", reader="extractive", level="medium", seed=5, record=first
    )
    assert set(result["components"]) == set(CONTEXT_COMPONENTS)
    assert result["reward"] == pytest.approx(context_score(first)[1])


def test_visible_text_drops_evicted_messages_and_keeps_the_rest() -> None:
    conversation = generate_conversation(2, "easy")
    with ContextEpisode(conversation) as episode:
        while episode.cache.n_messages < 6:
            _skip(episode)
        while not any(
            episode.cache.message(i).n_tokens > 3 * episode.block_size
            for i in range(1, episode.cache.n_messages - 1)
        ):
            _skip(episode)
        target = next(
            i
            for i in range(1, episode.cache.n_messages - 1)
            if episode.cache.message(i).n_tokens > 3 * episode.block_size
        )
        text = episode.cache.message(target).text
        words = [w for w in text.split() if len(w) > 3]
        assert all(w in episode.visible_text() for w in words)
        episode.evict_message(target)
        assert not episode.cache.fully_resident(target)
        middle = text[len(text) // 3 : 2 * len(text) // 3]
        assert middle not in episode.visible_text()
        assert "[…]" in episode.visible_text()
        observation = render_context(episode.observe())
        assert f"#{target} " not in observation  # every block of it is gone
        assert "1 message(s) fully evicted" in observation
        neighbours = [f"#{target - 1} ", f"#{target + 1} "]
        assert all(n in observation for n in neighbours)  # shared blocks: partly evicted
        assert "partial" in observation


def test_tool_calls_apply_or_report_errors_without_crashing() -> None:
    with ContextEpisode(generate_conversation(4, "easy")) as episode:
        for _ in range(5):
            _skip(episode)
        before = episode.cache.active_blocks
        result = call_context_tool(episode, ToolCall("1", "evict_blocks", '{"blocks": [1, 2]}'))
        assert result.startswith("evicted 2") and episode.cache.active_blocks == before - 2
        errors = [
            ToolCall("2", "evict_blocks", '{"blocks": [1]}'),  # already evicted
            ToolCall("3", "evict_blocks", '{"blocks": "x"}'),
            ToolCall("4", "evict_message", "{"),
            ToolCall("5", "evict_message", '{"index": 999}'),
            ToolCall("6", "fly", "{}"),
            ToolCall("7", "recall", '{"query": 3}'),
        ]
        for call in errors:
            assert call_context_tool(episode, call).startswith("error:"), call
        assert episode.record().invalid_actions == len(errors)
        assert call_context_tool(episode, ToolCall("8", "noop", "{}")) == "ok"
        assert episode.cache.active_blocks == before - 2
    with pytest.raises(ActionError):
        finished = ContextEpisode(generate_conversation(4, "easy"))
        while not finished.done:
            _skip(finished)
        finished.close()
        finished.evict_blocks([0])


def test_exact_value_check() -> None:
    key = "Jonas's licence plate is WD 118 ZT"
    assert answer_has_value("His plate is wd 118 zt.", key)
    assert not answer_has_value("Jonas's licence plate is WD 118 ZQ", key)
    assert not answer_has_value("anything", "no value here is ")
    assert answer_has_value("It was a double espresso.", "your usual order is a double espresso")
    assert answer_has_value("Double espresso, I think", "your usual order is a double espresso")
    assert not answer_has_value("the code is 5120", "your locker code is 512")
    assert answer_has_value("the code is 512.", "your locker code is 512")


def test_a_question_needs_an_answer() -> None:
    conversation = generate_conversation(1, "easy")
    with ContextEpisode(conversation) as episode:
        while episode.pending_question is None:
            episode.step()
        with pytest.raises(ValueError, match="needs the reader's answer"):
            episode.step()
        with pytest.raises(ValueError, match="call enforce"):
            episode.step("an answer read before the engine ran")
        episode.enforce()
        with pytest.raises(ActionError, match="act before enforce"):
            episode.evict_blocks([1])
        episode.step("read after the engine ran")
        assert len(episode.record().questions) == 1


def _skip(episode: ContextEpisode) -> None:
    """One turn with no action (a question gets a dummy answer)."""
    episode.enforce()
    episode.step(None if episode.pending_question is None else "x")
