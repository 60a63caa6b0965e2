"""Running the conversation-context family: baseline agents (or an LLM agent) on generated
conversations, answered by a reader, scored by the context rubric.

Readers (who answers the planted questions from what the cache still holds):
- `extractive` (default): the deterministic extractive reader, keyless;
- `hf:PATH`: a local Hugging Face causal LM through the block attention mask (`hf` extra);
- a chat model: any OpenAI-compatible endpoint (`ChatReader`), e.g. the `local:` model.
The keyless and chat readers live in `kv_context_env.readers.extractive` and
`kv_context_env.llm.chat_reader` (the taskset uses them too).

One result per episode, JSON-ready (`context_result`, the schema's owner:
`evals.common.context_results`): agent, reader, level, seed, status, reward, components,
metrics and the full record.
"""

from __future__ import annotations

from kv_context_env.generator.conversation import generate_conversation
from kv_context_env.llm.chat_reader import ChatReader
from kv_context_env.policies.baselines import get_context_policy
from kv_context_env.readers.extractive import Reader, extractive_reader
from kv_context_env.sim.episode import ContextEpisode, ContextRecord

from ..common.context_results import context_result


def hf_reader(path: str) -> Reader:
    """`path` is a Hugging Face model directory, a `.gguf` file or a `local:` model (GGUF files
    are converted once into a cached HF directory)."""
    from kv_context_env.readers.gguf_import import gguf_to_hf
    from kv_context_env.readers.hf_reader import HfReader

    from ..servers.local_model import is_local, model_path

    if is_local(path):
        path = str(gguf_to_hf(model_path(path)))
    elif path.endswith(".gguf"):
        path = str(gguf_to_hf(path))
    model = HfReader(path)

    def read(episode: ContextEpisode, question: str) -> str:
        return model.answer(episode.visible_pieces(), question)

    return read


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


__all__ = [
    "ChatReader",
    "Reader",
    "context_result",
    "extractive_reader",
    "hf_reader",
    "play_policy",
]
