"""Running the conversation-context family: baseline agents (or an LLM agent) on generated
conversations, answered by a reader, scored by the context rubric.

Readers (who answers the planted questions from what the cache still holds):
- `extractive` (default): the deterministic extractive reader, keyless;
- `hf:PATH`: a local Hugging Face causal LM through the block attention mask (`hf` extra);
- a chat model: any OpenAI-compatible endpoint (`ChatReader`), e.g. the `local:` model.

One result per episode, JSON-ready: agent, reader, level, seed, status, reward, components,
metrics and the full record.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kv_cache_env.context.agent import reader_messages
from kv_cache_env.context.conversation import generate_conversation
from kv_cache_env.context.episode import ContextEpisode, ContextRecord
from kv_cache_env.context.extractive import extractive_answer
from kv_cache_env.responses import ProviderError, openai_reply, with_retries
from rubrics.context import context_score

from .context_policies import get_context_policy

Reader = Callable[[ContextEpisode, str], str]
"""(episode at the question, question text) -> answer."""


def extractive_reader(episode: ContextEpisode, question: str) -> str:
    return extractive_answer(episode.visible_text(), question)


def hf_reader(path: str) -> Reader:
    """`path` is a Hugging Face model directory, a `.gguf` file or a `local:` model (GGUF files
    are converted once into a cached HF directory)."""
    from kv_cache_env.context.gguf_import import gguf_to_hf
    from kv_cache_env.context.hf_reader import HfReader

    from .local_model import is_local, model_path

    if is_local(path):
        path = str(gguf_to_hf(model_path(path)))
    elif path.endswith(".gguf"):
        path = str(gguf_to_hf(path))
    model = HfReader(path)

    def read(episode: ContextEpisode, question: str) -> str:
        return model.answer(episode.visible_pieces(), question)

    return read


@dataclass
class ChatReader:
    """A chat model as the reader: the visible context as text, then the question.

    `__call__` (policy runs) uses a synchronous client; the LLM agent loop calls `answer` with
    the asynchronous client of its own event loop (a client must not outlive its loop)."""

    base_url: str | None
    api_key: str
    model: str
    timeout_s: float = 120.0
    max_tokens: int = 64
    _sync: Any = None

    async def answer(self, client: Any, context: str, question: str) -> str:
        async def send() -> bytes:
            raw = await client.chat.completions.with_raw_response.create(
                **self._request(context, question)
            )
            return raw.http_response.content

        reply = await with_retries(send, openai_reply, client.max_retries)
        return html.unescape(reply.content or "").strip()

    def __call__(self, episode: ContextEpisode, question: str) -> str:
        if self._sync is None:
            import openai

            self._sync = openai.OpenAI(
                api_key=self.api_key, base_url=self.base_url, timeout=self.timeout_s
            )
        for attempt in range(self._sync.max_retries + 1):
            raw = self._sync.chat.completions.with_raw_response.create(
                **self._request(episode.visible_text(), question)
            )
            try:
                return _reply_text(raw.http_response.content)
            except ProviderError:
                if attempt == self._sync.max_retries:
                    raise
        raise AssertionError("unreachable")

    def _request(self, context: str, question: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": reader_messages(context, question),
            "max_tokens": self.max_tokens,
            "temperature": 0,
        }


def _reply_text(body: bytes) -> str:
    """The answer text; HTML entities unescaped (SmolLM2 under llama.cpp writes `&#39;`). A
    body that is not a chat completion raises `ProviderError` (the episode fails with it)."""
    return html.unescape(openai_reply(body).content or "").strip()


def play_policy(
    policy_name: str,
    level: str,
    seed: int,
    reader: Reader,
    *,
    max_blocks: int | None = None,
) -> ContextRecord:
    policy = get_context_policy(policy_name)
    with ContextEpisode(generate_conversation(seed, level), max_blocks=max_blocks) as episode:
        while not episode.done:
            policy(episode)
            episode.enforce()
            question = episode.pending_question
            episode.step(answer=reader(episode, question.text) if question else None)
        return episode.record()


def context_result(
    *,
    agent: str,
    reader: str,
    level: str,
    seed: int,
    record: ContextRecord | None,
    error: str | None = None,
    weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    if record is None:
        return {
            "agent": agent,
            "reader": reader,
            "level": level,
            "seed": seed,
            "status": "failed",
            "error": error,
            "reward": None,
            "components": None,
            "metrics": None,
            "record": None,
        }
    components, reward = context_score(record, weights)
    return {
        "agent": agent,
        "reader": reader,
        "level": level,
        "seed": seed,
        "status": "ok",
        "error": None,
        "reward": reward,
        "components": components,
        "metrics": context_metrics(record),
        "record": record.as_dict(),
    }


def context_metrics(record: ContextRecord) -> dict[str, float]:
    questions = record.questions
    return {
        "rouge_l": sum(q.rouge_l for q in questions) / len(questions) if questions else 0.0,
        "value_accuracy": (
            sum(q.value_correct for q in questions) / len(questions) if questions else 0.0
        ),
        "wrong_values": (
            sum(q.verdict == "wrong" for q in questions) / len(questions) if questions else 0.0
        ),
        "facts_visible": (
            sum(q.fact_visible for q in questions) / len(questions) if questions else 0.0
        ),
        "oom_events": float(record.oom_events),
        "mean_active_blocks": (
            sum(record.active_blocks) / len(record.active_blocks) if record.active_blocks else 0.0
        ),
        "max_active_blocks": float(max(record.active_blocks, default=0)),
        "recalls": float(record.recalls),
        "archived_turns": float(record.archived_turns),
        "invalid_actions": float(record.invalid_actions),
    }
