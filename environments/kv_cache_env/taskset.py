"""The `kv-cache-env` verifiers taskset: one task = one simulator episode, played by the model
through the `evict` / `compress` / `swap` / `noop` tools, scored by the serving rubric.

- `KvCacheTask.setup` builds the rollout's live simulator into `trace.state.sim`;
  `finalize` stores the episode record in `trace.info["episode_record"]`, and every reward and
  metric is computed from that record, so `vf-replay` (which has no live state) re-scores
  identically. Weights default to the original design's and can be overridden with
  `--env.taskset.task.rewards '{"latency_penalty": {"weight": 0.1}}'`; the components' weights
  are checked when the config is made, as one `rubrics.Weights` (`KvCacheTaskConfig.weights`).
- `KvCacheHarness` runs the tool loop in-process (`kv_cache_env.llm.agent_loop.play_episode`), every
  model call going through the per-rollout interception endpoint it is given; tools act on the
  live simulator. MCP toolsets would run in another process and copy state on every call.
- `KvCacheEnv` makes the local subprocess runtime the default: no account, no sandbox.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import verifiers.v1 as vf
from pydantic import ConfigDict, model_validator

from model_client.openai_chat import openai_chat
from rubrics import COMPONENTS, DEFAULT_WEIGHTS, Weights, valued_metrics

from .episodes import EpisodeSpec
from .llm.agent_loop import play_episode
from .llm.prompt import system_prompt, turn_message
from .sim import SCENARIOS, EpisodeRecord, Simulator, canonical_scenario_name

RECORD_KEY = "episode_record"


class KvCacheData(vf.TaskData):
    """One episode, JSON-safe (env servers ship it over the wire)."""

    seed: int
    scenario: str = "medium"
    trace: str | None = None
    steps: int | None = None
    block_size: int | None = None
    hints: bool = True

    def episode(self) -> EpisodeSpec:
        return EpisodeSpec(
            scenario=self.scenario,
            seed=self.seed,
            trace=self.trace,
            steps=self.steps,
            block_size=self.block_size,
        )


class KvCacheState(vf.State):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    sim: Any = None
    """The rollout's live `Simulator` (never serialized: `Trace.state` is excluded)."""
    hints: bool = True


class KvCacheTaskConfig(vf.TaskConfig):
    """The rubric's weights are verifiers' reward weights (`rewards`, e.g.
    `{"latency_penalty": {"weight": 3.0}}`); the seven components' are checked when the config
    is made by the one check `kvarena eval --weights` and the Gymnasium envs use (finite,
    |w| <= 10^6), and `weights` is that value."""

    @model_validator(mode="after")
    def _check_weights(self) -> KvCacheTaskConfig:
        self.weights  # noqa: B018 - a WeightError (ValueError) fails the config, naming the key
        return self

    @property
    def weights(self) -> Weights:
        """The rubric's weights: the defaults with the components' `rewards` weights applied."""
        return Weights(
            {
                name: spec.weight
                for name, spec in self.rewards.items()
                if name in COMPONENTS and spec.weight is not None
            }
        )


def _record(trace: vf.Trace) -> EpisodeRecord:
    return EpisodeRecord.from_dict(trace.info[RECORD_KEY])


class KvCacheTask(vf.Task[KvCacheData, KvCacheState, KvCacheTaskConfig]):
    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        trace.state.sim = self.data.episode().simulator()
        trace.state.hints = self.data.hints

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        sim: Simulator = trace.state.sim
        trace.info[RECORD_KEY] = sim.record().to_dict()
        trace.info["scenario"] = sim.scenario.name
        trace.info["turns_played"] = sim.turn

    # --- the seven rubric components (the original design's weights) ------------------------
    @vf.reward(weight=DEFAULT_WEIGHTS["failure_penalty"])
    async def failure_penalty(self, trace: vf.Trace) -> float:
        return COMPONENTS["failure_penalty"](_record(trace))

    @vf.reward(weight=DEFAULT_WEIGHTS["throughput_reward"])
    async def throughput_reward(self, trace: vf.Trace) -> float:
        return COMPONENTS["throughput_reward"](_record(trace))

    @vf.reward(weight=DEFAULT_WEIGHTS["headroom_bonus"])
    async def headroom_bonus(self, trace: vf.Trace) -> float:
        return COMPONENTS["headroom_bonus"](_record(trace))

    @vf.reward(weight=DEFAULT_WEIGHTS["memory_efficiency"])
    async def memory_efficiency(self, trace: vf.Trace) -> float:
        return COMPONENTS["memory_efficiency"](_record(trace))

    @vf.reward(weight=DEFAULT_WEIGHTS["eviction_quality"])
    async def eviction_quality(self, trace: vf.Trace) -> float:
        return COMPONENTS["eviction_quality"](_record(trace))

    @vf.reward(weight=DEFAULT_WEIGHTS["latency_penalty"])
    async def latency_penalty(self, trace: vf.Trace) -> float:
        return COMPONENTS["latency_penalty"](_record(trace))

    @vf.reward(weight=DEFAULT_WEIGHTS["risky_eviction_penalty"])
    async def risky_eviction_penalty(self, trace: vf.Trace) -> float:
        return COMPONENTS["risky_eviction_penalty"](_record(trace))

    # --- metrics -----------------------------------------------------------------------------
    @vf.metric
    async def episode(self, trace: vf.Trace) -> dict[str, float]:
        """The episode metrics (`rubrics.METRIC_NAMES`): failures, pressure_steps,
        tool_calls_per_turn, evict/compress/swap/noop/invalid calls, tokens_generated,
        forced_preemptions, prefix_hit_rate, and the serving metrics (SLO attainment, goodput,
        first-token and between-token latency percentiles, host-link bytes, recompute tokens);
        a serving metric without a value (a percentile of no samples) is left out."""
        return {name: float(value) for name, value in valued_metrics(_record(trace)).items()}


class KvCacheTasksetConfig(vf.TasksetConfig):
    scenario: str = "medium"
    """A built-in scenario (`kvarena scenarios`: easy, medium, hard, the named regimes
    agent-tools, agent-remote, chat-human, big-cpu, slow-prefill, flash-crowd, or medium-128);
    or the path of a Mooncake .jsonl / Azure .csv trace to replay (with the `medium` budget)."""
    num_tasks: int = 20
    """Number of episodes (task i uses seed base_seed + i)."""
    base_seed: int = 0
    """First seed. Evaluation seeds start at 0; train on seeds >= 1,000,000
    (`kv_cache_env.episodes.TRAIN_SEED_START`) so that no evaluated episode is trained on."""
    steps: int | None = None
    """Turns per episode (default: the scenario's, 15)."""
    block_size: int | None = None
    """Tokens per KV block (default: the scenario's, 16)."""
    hints: bool = True
    """Show pre-scored eviction candidates in observations."""
    task: KvCacheTaskConfig = KvCacheTaskConfig()


class KvCacheTaskset(vf.Taskset[KvCacheTask, KvCacheTasksetConfig]):
    def load(self) -> Iterator[KvCacheTask]:
        config = self.config
        scenario, trace = canonical_scenario_name(config.scenario), None
        if scenario not in SCENARIOS:
            scenario, trace = "medium", config.scenario
        for i in range(config.num_tasks):
            data = KvCacheData(
                id=f"kv-cache-{EpisodeSpec(scenario, 0, trace).label}-{config.base_seed + i}",
                seed=config.base_seed + i,
                scenario=scenario,
                trace=trace,
                steps=config.steps,
                block_size=config.block_size,
                hints=config.hints,
                prompt="",
                system_prompt="",
            )
            sim = data.episode().simulator()
            yield KvCacheTask(
                data.model_copy(
                    update={
                        "system_prompt": system_prompt(sim.scenario),
                        "prompt": turn_message(sim.observe(hints=config.hints)),
                    }
                ),
                config.task,
            )


class KvCacheHarnessConfig(vf.HarnessConfig):
    history_turns: int | None = None
    """Send the model only the system prompt and the last K turns (small-context models)."""
    request_timeout: float = 300.0
    """Seconds per model call."""


class KvCacheHarness(vf.Harness[KvCacheHarnessConfig]):
    """Plays the episode in-process: one model reply = one simulator step."""

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
        data: KvCacheData,
    ) -> vf.ProgramResult:
        sim: Simulator = trace.state.sim
        client = openai.AsyncOpenAI(
            base_url=endpoint, api_key=secret, timeout=self.config.request_timeout
        )
        try:
            await play_episode(
                sim,
                openai_chat(client, ctx.model),
                history_turns=self.config.history_turns,
                hints=trace.state.hints,
            )
        except openai.BadRequestError:
            if trace.stop_condition is None:  # not max-turns / a stop: a real error
                raise
        finally:
            await client.close()
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class KvCacheEnvConfig(vf.SingleAgentEnvConfig):
    # model_construct: validating a harness config with this module's id here would import
    # this half-initialised module (verifiers resolves harness ids by import).
    agent: vf.AgentConfig = vf.AgentConfig.model_construct(
        runtime=vf.SubprocessConfig(), harness=KvCacheHarnessConfig(id="kv-cache-env")
    )


class KvCacheEnv(vf.SingleAgentEnv, vf.Env[KvCacheEnvConfig]):
    """Single-agent env whose default runtime is the local subprocess one."""


def tasks_dataset(config: KvCacheTasksetConfig | None = None) -> Any:
    """The tasks as a Hugging Face `datasets.Dataset` (one row per task's data)."""
    import datasets

    taskset = KvCacheTaskset(config or KvCacheTasksetConfig())
    rows = [task.data.model_dump(mode="json", exclude_none=True) for task in taskset]
    return datasets.Dataset.from_list(rows)
