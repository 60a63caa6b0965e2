"""Hosted-model evals: the environment played by any OpenAI-compatible chat endpoint, or by an
Anthropic Messages endpoint.

Each episode runs `kv_cache_env.llm.agent_loop.play_episode` with a chat function backed by the
official `openai` (or `anthropic`) client, which retries 408/409/429/5xx, connection errors and
timeouts with exponential backoff (`max_retries`). Where the endpoint supports explicit prompt
caching (Anthropic; OpenAI-compatible endpoints that accept `cache_control`, such as OpenRouter),
the request carries the hybrid planner's breakpoints (`prompt_cache.strategies.HybridPlanner`: seed
002's stability tiers for changing content, a rolling breakpoint for growing history) unless
`prompt_cache` is off; the minimum cacheable prefix is the model's (`prompt_cache.minimums`).

A response that is not a chat completion is a provider error
(`model_client.provider_responses`), retried like a 5xx. An episode whose calls still fail is
recorded as failed, with the error, never dropped; so is one that hits an unexpected exception (a
bug), with its type and message. The API key is read from the environment variable named by the
caller and is never written anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anthropic
import numpy as np
import openai

from kv_cache_env.llm.agent_loop import play_episode
from kv_cache_env.llm.tools import tool_schemas
from kv_cache_env.sim import Simulator
from model_client.model_output import one_line
from model_client.openai_chat import openai_chat
from model_client.provider_responses import ProviderError
from model_client.reply import ChatFn

from ..common.hosted_client import anthropic_client, openai_client
from ..common.results import episode_result
from ..common.secrets import key_from_env
from ..prompt_cache.chat import anthropic_chat, openai_cached_chat
from ..prompt_cache.minimums import min_cacheable_tokens
from ..prompt_cache.strategies import DEFAULT_STRATEGY, Planner, make_planner
from ..prompt_cache.tiers import TierConfig
from .jobs import EpisodeJob

Api = Literal["openai", "anthropic"]
CACHE_CONTROL_HOSTS = ("openrouter.ai",)
"""OpenAI-compatible endpoints known to pass `cache_control` through to the provider."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    """The model name sent to the endpoint."""
    base_url: str | None = None
    """None: the OpenAI API."""
    api_key_var: str = "OPENAI_API_KEY"
    timeout_s: float = 120.0
    max_retries: int = 4
    history_turns: int | None = None
    hints: bool = True
    sampling: dict[str, Any] = field(default_factory=dict)
    label: str | None = None
    """The agent name results carry (default: `name`)."""
    api: Api = "openai"
    prompt_cache: bool | None = None
    """Stability-tier breakpoints: None = where the endpoint supports explicit caching
    (Anthropic, or an OpenAI-compatible host in CACHE_CONTROL_HOSTS); True/False forces."""
    sampling_seed: int | None = None
    """Send a `seed` with every request, drawn from (sampling_seed, episode seed): each rollout
    of a task samples afresh under a new sampling seed (a local llama.cpp server otherwise
    replays the same samples after every restart), and the same seed reproduces it where the
    endpoint honours seeds. OpenAI API only (the Messages API has no seed)."""

    @property
    def agent(self) -> str:
        return self.label or self.name

    @property
    def uses_tiers(self) -> bool:
        if self.prompt_cache is not None:
            return self.prompt_cache
        if self.api == "anthropic":
            return True
        return any(host in (self.base_url or "") for host in CACHE_CONTROL_HOSTS)


def api_key(spec: ModelSpec) -> str:
    """The key from the environment. A loopback endpoint (a local server) needs none."""
    key = key_from_env(spec.api_key_var, spec.base_url)
    if key is not None:
        return key
    raise ValueError(
        f"environment variable {spec.api_key_var} is not set; export your API key there "
        "(or name another variable with --api-key-var)"
    )


def make_client(spec: ModelSpec) -> Any:
    """An `AsyncOpenAI`, or an `AsyncAnthropic` for `api="anthropic"`, on the bounded HTTP
    layer (`hosted_client`: one deadline per attempt, a capped body and Retry-After)."""
    if spec.api == "anthropic":
        return anthropic_client(api_key(spec), spec.base_url, spec.timeout_s, spec.max_retries)
    return openai_client(api_key(spec), spec.base_url, spec.timeout_s, spec.max_retries)


def episode_planner(spec: ModelSpec) -> Planner:
    """The breakpoint planner of one episode (stateful across its requests)."""
    return make_planner(
        DEFAULT_STRATEGY if spec.uses_tiers else "none",
        TierConfig(cache_min_tokens=min_cacheable_tokens(spec.name)),
        windowed=spec.history_turns is not None,
        history_turns=spec.history_turns,
    )


def episode_chat(client: Any, spec: ModelSpec, episode_seed: int = 0) -> ChatFn:
    """A chat function for one episode (the planner and the request seeds are per episode)."""
    if spec.api == "anthropic":
        return anthropic_chat(client, spec.name, episode_planner(spec), spec.sampling)
    seeds = request_seeds(spec.sampling_seed, episode_seed)
    if spec.uses_tiers:
        return openai_cached_chat(client, spec.name, episode_planner(spec), spec.sampling, seeds)
    return openai_chat(client, spec.name, spec.sampling, request_seed=seeds)


def request_seeds(sampling_seed: int | None, episode_seed: int) -> Callable[[], int] | None:
    """The `seed` of each successive request of one episode (None: send none): a stream of
    31-bit integers from a generator seeded with (sampling_seed, episode_seed)."""
    if sampling_seed is None:
        return None
    rng = np.random.default_rng([sampling_seed, episode_seed])
    return lambda: int(rng.integers(0, 2**31 - 1))


def _cause(error: BaseException) -> str:
    """ " (why: ...)" when an SDK error wraps the reason (a deadline, a refused body)."""
    cause = error.__cause__
    if cause is None or str(cause) in str(error):
        return ""
    return f" ({type(cause).__name__}: {cause})"


async def run_model_episode(
    job: EpisodeJob, spec: ModelSpec, chat: ChatFn
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(result, transcript) of one episode; the transcript is None when it could not start."""
    scenario, schedule = job.episode.resolve()
    sim = Simulator(scenario, job.seed, schedule=schedule)
    weights = job.weights
    transcript = None
    message = "no transcript"
    try:
        transcript = await play_episode(
            sim, chat, history_turns=spec.history_turns, hints=spec.hints
        )
    except (openai.OpenAIError, anthropic.AnthropicError, TimeoutError, ProviderError) as error:
        message = f"{type(error).__name__}: {error}{_cause(error)}"
    except Exception as error:  # a bug must fail this episode, not the run (its reason kept)
        message = f"unexpected {type(error).__name__}: {error}"
    if transcript is None:
        return (
            episode_result(
                agent=spec.agent,
                scenario=scenario.name,
                seed=job.seed,
                record=None,
                error=one_line(message, 500),
                weights=weights,
            ),
            None,
        )
    result = episode_result(
        agent=spec.agent,
        scenario=scenario.name,
        seed=job.seed,
        record=sim.record(),
        usage=transcript.usage.as_dict(),
        weights=weights,
    )
    return result, {
        "model": spec.agent,
        "scenario": scenario.name,
        "seed": job.seed,
        "api": spec.api,
        "prompt_cache": DEFAULT_STRATEGY if spec.uses_tiers else "off",
        "history_turns": spec.history_turns,
        "sampling_seed": spec.sampling_seed,
        "tools": tool_schemas(),
        "messages": transcript.messages,
        "usage": transcript.usage.as_dict(),
    }


async def run_model_jobs(
    jobs: list[EpisodeJob],
    spec: ModelSpec,
    *,
    concurrency: int,
    on_result: Callable[[dict[str, Any], dict[str, Any] | None], None],
) -> None:
    """Run `jobs` with at most `concurrency` episodes in flight; `on_result` gets each one."""
    client = make_client(spec)
    gate = asyncio.Semaphore(concurrency)

    async def one(job: EpisodeJob) -> None:
        async with gate:
            chat = episode_chat(client, spec, job.seed)
            result, transcript = await run_model_episode(job, spec, chat)
        on_result(result, transcript)

    try:
        await asyncio.gather(*(one(job) for job in jobs))
    finally:
        await client.close()
