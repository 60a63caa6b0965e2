"""The `kv-context-env` verifiers taskset: one task = one generated long conversation; the model
manages its KV blocks through `evict_blocks` / `evict_message` / `recall` / `noop`, one message
arriving per turn, and the planted questions are answered by a reader from what stays cached.

- `KvContextTask.setup` builds the live `ContextEpisode` into `trace.state.episode`;
  `finalize` stores the record in `trace.info["context_record"]`; rewards and metrics are
  computed from that record only (so `vf-replay` re-scores identically).
- `KvContextHarness` runs the loop in-process (`kv_context_env.llm.agent`), every model call
  through the rollout's interception endpoint. The reader is the fixed extractive reader by
  default, so the policy model cannot raise its own reward by how it phrases answers; `model`
  makes the model itself read (a tool-free call per question). Either way the answer is scored
  by the value check (`values.judge_answer`): an echo of the question names no value and
  scores what "I don't know" scores, nothing.
- `KvContextEnv` makes the local subprocess runtime the default.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import verifiers.v1 as vf
from pydantic import ConfigDict

from kv_context_env.generator.conversation import LEVELS, generate_conversation
from kv_context_env.llm.agent import (
    context_system_prompt,
    play_context_episode,
    render_context,
)
from kv_context_env.llm.chat_reader import ChatReader
from kv_context_env.readers.extractive import extractive_answer
from kv_context_env.sim.episode import ContextEpisode, ContextRecord
from model_client.openai_chat import openai_chat
from rubrics.context import CONTEXT_COMPONENTS, CONTEXT_WEIGHTS, context_metrics

RECORD_KEY = "context_record"


class KvContextData(vf.TaskData):
    seed: int
    level: str = "medium"
    max_blocks: int | None = None


class KvContextState(vf.State):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    episode: Any = None
    """The rollout's live `ContextEpisode` (never serialized)."""


class KvContextTaskConfig(vf.TaskConfig):
    pass


def _record(trace: vf.Trace) -> ContextRecord:
    return ContextRecord.from_dict(trace.info[RECORD_KEY])


def _episode(data: KvContextData) -> ContextEpisode:
    return ContextEpisode(generate_conversation(data.seed, data.level), max_blocks=data.max_blocks)


class KvContextTask(vf.Task[KvContextData, KvContextState, KvContextTaskConfig]):
    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        trace.state.episode = _episode(self.data)

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        episode: ContextEpisode = trace.state.episode
        trace.info[RECORD_KEY] = episode.record().as_dict()
        trace.info["level"] = self.data.level
        episode.close()

    @vf.reward(weight=CONTEXT_WEIGHTS["answer_quality"])
    async def answer_quality(self, trace: vf.Trace) -> float:
        return CONTEXT_COMPONENTS["answer_quality"](_record(trace))

    @vf.reward(weight=CONTEXT_WEIGHTS["oom_penalty"])
    async def oom_penalty(self, trace: vf.Trace) -> float:
        return CONTEXT_COMPONENTS["oom_penalty"](_record(trace))

    @vf.reward(weight=CONTEXT_WEIGHTS["recall_cost"])
    async def recall_cost(self, trace: vf.Trace) -> float:
        return CONTEXT_COMPONENTS["recall_cost"](_record(trace))

    @vf.metric
    async def context(self, trace: vf.Trace) -> dict[str, float]:
        """Value accuracy, ROUGE-L, facts still visible when asked, OOM events, blocks used,
        recalls."""
        return context_metrics(_record(trace))


class KvContextTasksetConfig(vf.TasksetConfig):
    level: str = "medium"
    """Difficulty: easy, medium or hard."""
    num_tasks: int = 20
    base_seed: int = 0
    max_blocks: int | None = None
    """Cache budget in 16-token blocks (default: the level's)."""
    task: KvContextTaskConfig = KvContextTaskConfig()


class KvContextTaskset(vf.Taskset[KvContextTask, KvContextTasksetConfig]):
    def load(self) -> Iterator[KvContextTask]:
        config = self.config
        if config.level not in LEVELS:
            raise ValueError(f"unknown level {config.level!r}; known: {', '.join(LEVELS)}")
        for i in range(config.num_tasks):
            data = KvContextData(
                id=f"kv-context-{config.level}-{config.base_seed + i}",
                seed=config.base_seed + i,
                level=config.level,
                max_blocks=config.max_blocks,
                prompt="",
                system_prompt="",
            )
            with _episode(data) as episode:
                first = render_context(episode.observe())
                system = context_system_prompt(episode.max_blocks)
            yield KvContextTask(
                data.model_copy(update={"system_prompt": system, "prompt": first}), config.task
            )


class KvContextHarnessConfig(vf.HarnessConfig):
    history_turns: int | None = 0
    """Past turns sent with each observation (each observation is self-contained)."""
    reader: str = "extractive"
    """Who answers the planted questions: `extractive` (fixed and deterministic, no call; the
    default) or `model` (the model under training/evaluation, one tool-free call per
    question). The value check scores both."""
    request_timeout: float = 300.0


class KvContextHarness(vf.Harness[KvContextHarnessConfig]):
    """Plays the episode in-process: one model reply = one arriving message."""

    APPENDS_SYSTEM_PROMPT = True
    NEEDS_CONTAINER = False
    EXECUTES_CODE = False

    async def launch(  # type: ignore[override]
        self,
        ctx: Any,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: KvContextData,
    ) -> vf.ProgramResult:
        episode: ContextEpisode = trace.state.episode
        client = openai.AsyncOpenAI(
            base_url=endpoint, api_key=secret, timeout=self.config.request_timeout
        )

        reader = ChatReader(endpoint, secret, ctx.model)

        async def read(context: str, question: str) -> str:
            if self.config.reader == "extractive":
                return extractive_answer(context, question)
            return await reader.answer(client, context, question)

        try:
            await play_context_episode(
                episode,
                openai_chat(client, ctx.model),
                read,
                history_turns=self.config.history_turns,
            )
        except openai.BadRequestError:
            if trace.stop_condition is None:
                raise
        finally:
            await client.close()
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class KvContextEnvConfig(vf.SingleAgentEnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig.model_construct(
        runtime=vf.SubprocessConfig(), harness=KvContextHarnessConfig(id="kv-context-env")
    )


class KvContextEnv(vf.SingleAgentEnv, vf.Env[KvContextEnvConfig]):
    """Single-agent env whose default runtime is the local subprocess one."""
