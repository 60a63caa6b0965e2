"""What a model run sends and what it costs: `kvarena eval --model ... --dry-run` estimates it
before anything is sent, and a model run prints the same totals, from what the endpoint billed,
at its end, so the estimate can be checked against the run.

How the estimate is made. Every episode of the run is played here, offline, by a stand-in agent
(`STAND_IN`, a built-in policy answering each observation with tool calls exactly as the keyless
policy server does) through the run's own agent loop (`play_episode`, with the run's history
window and hints), so each request is rendered as the run renders it. Each request's
`cache_control` breakpoints are placed by the run's planner (`model_eval.episode_planner`: the
hybrid planner where the run places breakpoints, none elsewhere) and the request is billed by
the model of the provider's cache (`bill_request`, as `kvarena cache-replay` bills recorded
transcripts: tool definitions included, four characters a token), one cache for the whole run.

What the estimate assumes:

- model calls: one per agent turn (an episode never ends early), so this figure is exact; a
  retried call is billed again and is not counted.
- input tokens: the model's replies, and the observations they lead to, are the stand-in's. A
  model that calls more tools, or writes text beside its calls, sends longer histories.
- output tokens: the stand-in's tool calls, as the keyless endpoint counts them; the ceiling is
  every call using `--max-tokens` (Anthropic's API: 1024 when not given; OpenAI's: none).
- without breakpoints (the OpenAI API, unless `--prompt-cache`) every input token is fresh;
  a provider's automatic caching only lowers the bill.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.table import Table

from kv_cache_env.llm.agent_loop import play_episode
from kv_cache_env.sim import Simulator
from model_client.model_output import ToolCall
from model_client.reply import ChatFn, ModelReply, TokenUsage

from ..common.results import USAGE_FIELDS
from ..prompt_cache.chat import DEFAULT_MAX_TOKENS as ANTHROPIC_MAX_TOKENS
from ..prompt_cache.dollars import usage_cost
from ..prompt_cache.minimums import min_cacheable_tokens
from ..prompt_cache.provider import Prices, ProviderCache
from ..prompt_cache.replay import bill_request
from ..prompt_cache.requests import split_request
from ..prompt_cache.strategies import Planner, tools_tokens
from ..prompt_cache.tokens import estimate_tokens
from ..servers.policy_server import EMPTY_REPLY, policy_tool_calls
from .jobs import EpisodeJob
from .model_eval import ModelSpec, episode_planner

STAND_IN = "compress-first"
"""The built-in policy that plays the model in the estimate: an observation-based rule that
calls a tool or two on most turns (measured against other rules in docs/models.md)."""


@dataclass(frozen=True)
class Totals:
    """What a run sends: its episodes, model calls and tokens (input split as providers bill
    it). The field names of the token counts are the results' `usage` fields."""

    episodes: int
    calls: int
    input_tokens: int
    """Every prompt token, cached or not."""
    cached_input_tokens: int
    """Read from the provider's cache."""
    cache_write_input_tokens: int
    """Written to the provider's cache."""
    output_tokens: int
    failed: int = 0
    """Episodes that failed (their calls and tokens are not counted: no usage is recorded)."""

    @property
    def usage(self) -> dict[str, int]:
        """The totals as a result's `usage` field (what `dollars.usage_cost` prices)."""
        fields = asdict(self)
        return {name: fields[name] for name in USAGE_FIELDS}


def run_totals(results: Iterable[Mapping[str, Any]]) -> Totals:
    """The totals a model run's results recorded (what the endpoint billed)."""
    results = list(results)
    ok = [r for r in results if r["status"] == "ok" and r.get("usage") is not None]
    return Totals(
        episodes=len(ok),
        calls=sum(int(r["record"]["turns"]) for r in ok),
        failed=sum(r["status"] != "ok" for r in results),
        **{name: sum(int(r["usage"].get(name, 0)) for r in ok) for name in USAGE_FIELDS},
    )


def stand_in_chat(spec: ModelSpec, cache: ProviderCache, stand_in: str = STAND_IN) -> ChatFn:
    """A chat function for one episode of the estimate: `stand_in` answers, and each request
    is billed by `cache` with the run's breakpoints (the planner is per episode, as the run's)."""
    planner: Planner = episode_planner(spec)

    async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        billed = bill_request(split_request(messages), tools, planner, cache, tools_tokens(tools))
        calls = policy_tool_calls(stand_in, str(messages[-1]["content"]))
        return ModelReply(
            content=None if calls else EMPTY_REPLY,
            tool_calls=tuple(
                ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls
            ),
            usage=TokenUsage(
                input_tokens=billed.total,
                cached_input_tokens=billed.read,
                output_tokens=estimate_tokens(json.dumps(calls)),
                cache_write_input_tokens=billed.written,
            ),
        )

    return chat


def estimate(
    jobs: Sequence[EpisodeJob],
    spec: ModelSpec,
    stand_in: str = STAND_IN,
    done: Callable[[], None] | None = None,
) -> Totals:
    """The totals of running `jobs` against `spec`'s endpoint, with `stand_in` playing the
    model; no request leaves this process. `done` is called after each episode. The time grows
    with the square of an episode's turns under full history (every request is rebuilt whole,
    as it is sent): 15 turns take ~0.3 s here, 120 take ~9 s."""
    cache = ProviderCache(min_tokens=min_cacheable_tokens(spec.name))
    usage = TokenUsage()
    calls = 0
    for job in jobs:
        scenario, schedule = job.episode.resolve()
        sim = Simulator(scenario, job.seed, schedule=schedule)
        chat = stand_in_chat(spec, cache, stand_in)
        transcript = asyncio.run(
            play_episode(sim, chat, history_turns=spec.history_turns, hints=spec.hints)
        )
        usage.add(transcript.usage)
        calls += transcript.turns
        if done is not None:
            done()
    return Totals(episodes=len(jobs), calls=calls, **usage.as_dict())


def reply_cap(spec: ModelSpec) -> int | None:
    """The most output tokens one call may bill: `--max-tokens`, else the API's default cap
    (Anthropic's client sends 1024; OpenAI's none)."""
    cap = spec.sampling.get("max_tokens")
    if cap is None and spec.api == "anthropic":
        return ANTHROPIC_MAX_TOKENS
    return int(cap) if cap is not None else None


def eval_prices(
    price_in: float | None,
    price_out: float | None,
    price_cached: float | None,
    price_write: float | None,
) -> Prices | None:
    """The prices of `eval --price-*` ($ per million tokens): None without `--price-in`; a
    cached or written token costs `--price-in` unless its own price is given. ValueError for a
    price given without `--price-in`."""
    if price_in is None:
        if any(p is not None for p in (price_out, price_cached, price_write)):
            raise ValueError("--price-out, --price-cached and --price-write need --price-in")
        return None
    return Prices(
        input=price_in,
        cached=price_in if price_cached is None else price_cached,
        write=price_in if price_write is None else price_write,
        output=price_out or 0.0,
    )


def totals_table(title: str, totals: Totals, prices: Prices | None, cap: int | None) -> Table:
    """The figures of `totals` (and their cost at `prices`), as the dry run and the run's end
    print them."""
    table = Table("figure", "value", title=title, title_justify="left")
    table.add_row("episodes", f"{totals.episodes:,}" + _failed(totals))
    table.add_row("model calls", f"{totals.calls:,}")
    fresh = totals.input_tokens - totals.cached_input_tokens - totals.cache_write_input_tokens
    table.add_row(
        "input tokens",
        f"{totals.input_tokens:,} (fresh {fresh:,}, read from the cache "
        f"{totals.cached_input_tokens:,}, written to it {totals.cache_write_input_tokens:,})",
    )
    ceiling = None if cap is None else totals.calls * cap
    bound = "no cap" if ceiling is None else f"at most {ceiling:,} at {cap:,} a call"
    table.add_row("output tokens", f"{totals.output_tokens:,} ({bound})")
    if prices is None:
        table.add_row("cost", "give --price-in (and --price-out) in $ per million tokens")
        return table
    cost = f"${usage_cost(totals.usage, prices):,.4f}"
    if ceiling is not None and prices.output:
        most = usage_cost(totals.usage | {"output_tokens": ceiling}, prices)
        cost += f" (at most ${most:,.4f} with every reply at the cap)"
    table.add_row("cost", cost)
    table.add_row(
        "prices ($/M)",
        f"input {prices.input:g}, cached {prices.cached:g}, write {prices.write:g}, "
        f"output {prices.output:g}",
    )
    return table


def _failed(totals: Totals) -> str:
    return f" ok ({totals.failed} failed: not counted)" if totals.failed else ""
