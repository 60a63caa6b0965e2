"""The serving family's commands: `eval`, `validate`, `bench`, `policies`, `scenarios`,
`traces`. Each parses its options and calls one function; the options' help lives here."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ..common.console import console, out_console, status_line
from ..common.edge import InputError, check_options, check_path
from ..common.options import (
    CPUS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    MODEL_PANEL,
    RUN_PANEL,
    BackendKind,
    Constrain,
    Episodes,
    Force,
    MaxRetries,
    Out,
    RayAddress,
    Resume,
    Timeout,
    Wide,
    Workers,
)
from ..common.outcome import RunDone


class Api(StrEnum):
    """The endpoint's API."""

    openai = "openai"
    anthropic = "anthropic"


Policy = Annotated[
    list[str] | None,
    typer.Option(
        "--policy",
        "-p",
        metavar="NAMES",
        help="Built-in policies, comma-separated (kvarena policies; default: every built-in).",
        rich_help_panel=RUN_PANEL,
    ),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="MODEL",
        help="Evaluate this model instead of policies: a model name at an OpenAI-compatible "
        "or Anthropic endpoint, or local:smollm2 / local:PATH.gguf (no key).",
        rich_help_panel=RUN_PANEL,
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option(
        metavar="URL",
        help="Endpoint base URL (default: the provider's API).",
        rich_help_panel=MODEL_PANEL,
    ),
]
ApiKeyVar = Annotated[
    str | None,
    typer.Option(
        metavar="VAR",
        help="Environment variable holding the API key (default: OPENAI_API_KEY, or "
        "ANTHROPIC_API_KEY with --api anthropic). The key is never written.",
        rich_help_panel=MODEL_PANEL,
    ),
]
ApiOption = Annotated[
    Api,
    typer.Option(
        help="The endpoint's API: chat completions (openai) or Messages (anthropic).",
        rich_help_panel=MODEL_PANEL,
    ),
]
PromptCache = Annotated[
    bool | None,
    typer.Option(
        "--prompt-cache/--no-prompt-cache",
        help="cache_control breakpoints of the hybrid planner (stability tiers for "
        "changing content, a rolling breakpoint for growing history). Default: on for "
        "--api anthropic and for OpenAI-compatible hosts that accept cache_control "
        "(OpenRouter); off elsewhere.",
        rich_help_panel=MODEL_PANEL,
    ),
]
Concurrency = Annotated[
    int,
    typer.Option(
        "--concurrency",
        "-c",
        min=1,
        metavar="N",
        help="Episodes played at once against the endpoint.",
        rich_help_panel=MODEL_PANEL,
    ),
]
HistoryTurns = Annotated[
    int | None,
    typer.Option(
        min=0,
        metavar="K",
        help="Send only the system prompt and the last K turns (default: all; 0 for local:).",
        rich_help_panel=MODEL_PANEL,
    ),
]
Temperature = Annotated[
    float | None,
    typer.Option(metavar="T", help="Sampling temperature.", rich_help_panel=MODEL_PANEL),
]
SamplingSeed = Annotated[
    int | None,
    typer.Option(
        metavar="SEED",
        help="Send a sampling `seed` with every request, drawn from this seed and the "
        "episode's: rerun with another value for another rollout of the same tasks (RL groups); "
        "OpenAI API only.",
        rich_help_panel=MODEL_PANEL,
    ),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        min=1, metavar="N", help="Cap on each reply's tokens.", rich_help_panel=MODEL_PANEL
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="With --model: print the episodes, model calls, input and output tokens and cost "
        "the run would spend, estimated offline with a built-in policy standing in for the "
        "model, and send nothing (the run prints the same totals at its end).",
        rich_help_panel=MODEL_PANEL,
    ),
]


def _price(what: str) -> Any:
    return typer.Option(min=0, metavar="PRICE", help=what, rich_help_panel=MODEL_PANEL)


PriceIn = Annotated[
    float | None,
    _price("$ per million fresh input tokens: the cost of a model run and its --dry-run."),
]
PriceOut = Annotated[float | None, _price("$ per million output tokens (with --price-in).")]
PriceCached = Annotated[
    float | None,
    _price("$ per million input tokens read from the provider's cache (default: --price-in)."),
]
PriceWrite = Annotated[
    float | None,
    _price("$ per million input tokens written to the provider's cache (default: --price-in)."),
]
Hints = Annotated[
    bool,
    typer.Option(
        help="Show pre-scored eviction candidates in the observation.",
        rich_help_panel=MODEL_PANEL,
    ),
]
Scenario = Annotated[
    list[str] | None,
    typer.Option(
        "--scenario",
        "-s",
        metavar="NAMES",
        help="Scenarios, comma-separated (kvarena scenarios; default: the serving suite). "
        "With --trace: the tier whose memory budget and request mix the replay uses "
        "(default: medium).",
        rich_help_panel=RUN_PANEL,
    ),
]
Trace = Annotated[
    Path | None,
    typer.Option(
        metavar="NAME|FILE",
        help="Replay a trace: a built-in name (mooncake-conversation, azure-conv-2023; see "
        "kvarena traces) or a Mooncake .jsonl / Azure .csv path (.gz allowed).",
        rich_help_panel=RUN_PANEL,
    ),
]
Full = Annotated[
    bool, typer.Option(help="With --trace: replay the whole trace.", rich_help_panel=RUN_PANEL)
]
Seed = Annotated[
    int,
    typer.Option(
        metavar="SEED",
        help="Episode i uses seed + i (evaluation seeds start at 0; train on seeds from "
        "1,000,000).",
        rich_help_panel=RUN_PANEL,
    ),
]
Steps = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Agent turns per episode (default: the scenario's, 15).",
        rich_help_panel=RUN_PANEL,
    ),
]
Weights = Annotated[
    str | None,
    typer.Option(
        metavar="JSON",
        help="Rubric weight overrides as JSON, e.g. '{\"latency_penalty\": 0.1}': every episode "
        "is scored under them and the planners (bound, expert, lookahead) search under them.",
        rich_help_panel=RUN_PANEL,
    ),
]


def eval_command(
    policy: Policy = None,
    model: Model = None,
    base_url: BaseUrl = None,
    api_key_var: ApiKeyVar = None,
    api: ApiOption = Api.openai,
    prompt_cache: PromptCache = None,
    concurrency: Concurrency = 4,
    history_turns: HistoryTurns = None,
    timeout: Timeout = DEFAULT_TIMEOUT_S,
    max_retries: MaxRetries = DEFAULT_MAX_RETRIES,
    temperature: Temperature = None,
    sampling_seed: SamplingSeed = None,
    max_tokens: MaxTokens = None,
    dry_run: DryRun = False,
    price_in: PriceIn = None,
    price_out: PriceOut = None,
    price_cached: PriceCached = None,
    price_write: PriceWrite = None,
    hints: Hints = True,
    constrain: Constrain = True,
    scenario: Scenario = None,
    trace: Trace = None,
    full: Full = False,
    episodes: Episodes = 10,
    seed: Seed = 0,
    steps: Steps = None,
    out: Out = None,
    resume: Resume = False,
    workers: Workers = CPUS,
    backend: BackendKind = "local",
    address: RayAddress = None,
    weights: Weights = None,
    force: Force = False,
    wide: Wide = False,
) -> RunDone | None:
    """Run policies (or a model) on scenarios or a trace; write results.jsonl and run.json.

    With no option: every built-in policy, the reference bound included, on the serving suite,
    10 episodes each, no API key. With --model and --dry-run: what the run would send and cost.
    """
    options = dict(locals())  # the options by name: EvalArgs has the same fields
    options["api"] = api.value
    status_line("eval: loading the simulator and the policies")
    from .eval_run import EvalArgs, run_eval

    return run_eval(EvalArgs(**options))


Repeats = Annotated[int, typer.Option(min=1, metavar="N", help="Speed table: paired repeats.")]
BoundEpisodes = Annotated[
    int, typer.Option(min=0, metavar="N", help="Speed table: bound episodes.")
]
SpeedEpisodes = Annotated[
    int, typer.Option(min=1, metavar="N", help="Speed table: hard episodes per policy.")
]


def bench_command(
    episodes: Annotated[
        int,
        typer.Option(
            "--episodes",
            "-n",
            min=1,
            metavar="N",
            help="Episodes per scenario for the speed figures.",
        ),
    ] = 1000,
    trace: Annotated[
        str,
        typer.Option(
            metavar="NAME|FILE",
            help="Trace for the replay figure: a built-in name (kvarena traces) or path.",
        ),
    ] = "mooncake-conversation",
    as_json: Annotated[bool, typer.Option("--json", help="Print figures as JSON.")] = False,
    speed: Annotated[
        bool, typer.Option(help="The engine-speed table (each figure in a fresh process).")
    ] = True,
    before: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Worktree of an older commit, measured beside this one (ratios)."
        ),
    ] = None,
    naive: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Speed table: the naive replay script timed as the machine's yardstick "
            "(default: shared/tools/naive_replay.py beside the checkout, when there).",
        ),
    ] = None,
    repeats: Repeats = 3,
    bound_episodes: BoundEpisodes = 6,
    speed_episodes: SpeedEpisodes = 200,
) -> None:
    """Measure simulator speed, the full-trace replay time and the observation size; with
    --before, the engine-speed table of this tree against an older commit's worktree."""
    status_line("bench: loading the simulator")
    from .bench import run_bench
    from .speed import run_speed, speed_table

    check_options(
        {
            "--episodes": episodes,
            "--repeats": repeats,
            "--bound-episodes": bound_episodes,
            "--speed-episodes": speed_episodes,
        }
    )
    naive = _bench_paths(trace, before, naive)
    figures = run_bench(episodes=episodes, trace=trace, progress=None if as_json else console)
    if speed:
        figures["speed"] = run_speed(
            before=before,
            trace=trace,
            naive=naive,
            repeats=repeats,
            hard_episodes=speed_episodes,
            bound_episodes=bound_episodes,
        )
    if as_json:
        out_console.print_json(json.dumps(figures))
        return
    table = Table("figure", "value", title="kvarena bench", title_justify="left")
    for key, val in figures.items():
        if key != "speed":
            table.add_row(key, f"{val:,.3f}" if isinstance(val, float) else str(val))
    out_console.print(table)
    if speed:
        out_console.print(speed_table(figures["speed"]))


def _bench_paths(trace: str, before: Path | None, naive: Path | None) -> Path | None:
    """bench's paths checked at the edge; the naive replay to time (the shipped one by default)."""
    from kv_cache_env.traces.trace_data import resolve_trace

    from .speed import NAIVE_REPLAY

    for option, path in (("--trace", trace), ("--before", before), ("--naive", naive)):
        if path is not None:
            check_path(path, option)
    if not resolve_trace(trace).is_file():
        raise InputError(f"{trace}: no such trace file")
    if before is not None and not (before / "environments" / "kv_cache_env").is_dir():
        raise InputError(f"{before}: not a kvcache-arena worktree (git worktree add --detach ...)")
    if naive is not None and not naive.is_file():
        raise InputError(f"--naive {naive}: no such file")
    return NAIVE_REPLAY if naive is None and NAIVE_REPLAY.is_file() else naive


AsJson = Annotated[bool, typer.Option("--json", help="Print JSON that a script can read.")]


def policies_command(
    name: Annotated[
        str | None, typer.Argument(metavar="NAME", help="One policy in full (default: all).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """List the registered policies, one a line; with NAME, that policy in full."""
    from .listings import list_policies

    list_policies(name, as_json)


def scenarios_command(
    name: Annotated[
        str | None, typer.Argument(metavar="NAME", help="One scenario in full (default: all).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """List the built-in scenarios and their main parameters, one a line; with NAME, every
    parameter of that scenario."""
    from .listings import list_scenarios

    list_scenarios(name, as_json)


def traces_command(
    name: Annotated[
        str | None, typer.Argument(metavar="NAME", help="One trace in full (default: all).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """List the built-in traces (`--trace NAME`): requests, duration and source."""
    from .listings import list_traces

    status_line("traces: reading the packaged traces")
    list_traces(name, as_json)
