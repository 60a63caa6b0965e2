"""`kvarena`: run evals and benchmarks from the command line. All I/O of the project lives here.

kvarena eval                      # built-in policies x easy/medium/hard, no API key
kvarena eval -p lru,lookahead -s hard -n 50 --seed 7 -o runs/hard
kvarena eval -p lru --trace mooncake-conversation --full   # or --trace path/to/trace.jsonl
kvarena traces                    # the built-in traces
kvarena bench [--json]
kvarena policies | kvarena scenarios
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kv_cache_env.episodes import EpisodeSpec, load_episode_trace
from kv_cache_env.sim import SCENARIOS, SUITE, SUITE_VERSION
from kv_cache_env.traces import TraceError

from .common.edge import InputError, SafeGroup, check_options, check_out_dir, parse_weights
from .common.run_dir import RunDir, prepare_run_dir, write_run_info
from .serving import policies
from .serving.jobs import EpisodeJob, run_job
from .serving.normalize import Normalized, normalized_scores
from .serving.summary import COLUMNS, Row, summarize

if TYPE_CHECKING:
    from concurrent.futures import Future

    from .common.local_model import LocalModelServer
    from .serving.model_eval import ModelSpec

app = typer.Typer(
    help="kvcache-arena: an LLM agent manages the KV-cache of a simulated inference server.",
    no_args_is_help=True,
    add_completion=False,
    cls=SafeGroup,
)
console = Console(stderr=True)
out_console = Console()


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an unexpected error.")
    ] = False,
) -> None:
    """kvcache-arena: an LLM agent manages the KV-cache of a simulated inference server."""


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


@app.command("eval")
def eval_command(
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="Policies, comma-separated (default: built-ins)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Evaluate this model on an OpenAI-compatible endpoint instead of policies.",
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Endpoint base URL (default: the OpenAI API).")
    ] = None,
    api_key_var: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the API key (default: OPENAI_API_KEY, or "
            "ANTHROPIC_API_KEY with --api anthropic)."
        ),
    ] = None,
    api: Annotated[
        str,
        typer.Option(
            help="The endpoint's API: 'openai' (chat completions) or 'anthropic' (Messages)."
        ),
    ] = "openai",
    prompt_cache: Annotated[
        bool | None,
        typer.Option(
            "--prompt-cache/--no-prompt-cache",
            help="cache_control breakpoints of the hybrid planner (seed 002's tiers for "
            "changing content, a rolling breakpoint for growing history). Default: on for "
            "--api anthropic and for OpenAI-compatible hosts that accept cache_control "
            "(OpenRouter); off elsewhere.",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1)] = 4,
    history_turns: Annotated[
        int | None,
        typer.Option(min=0, help="Send only the system prompt and the last K turns."),
    ] = None,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds per model call.")] = 120.0,
    max_retries: Annotated[int, typer.Option(min=0, help="Retries per model call.")] = 4,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="Cap on each reply's tokens.")
    ] = None,
    hints: Annotated[bool, typer.Option(help="Show pre-scored eviction candidates.")] = True,
    constrain: Annotated[
        bool,
        typer.Option(
            help="local: models: replies to the tools are tool calls by constrained decoding "
            "(--no-constrain: free text, as llama.cpp's chatml-function-calling gives it)."
        ),
    ] = True,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            "-s",
            help="Scenarios, comma-separated (default: the serving suite v2). With --trace: the "
            "tier whose memory budget and request mix the replay uses (default: medium).",
        ),
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            help="Replay a trace: a built-in name (mooncake-conversation, azure-conv-2023; see "
            "kvarena traces) or a Mooncake .jsonl / Azure .csv path (.gz allowed)."
        ),
    ] = None,
    full: Annotated[bool, typer.Option(help="With --trace: replay the whole trace.")] = False,
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1)] = 10,
    seed: Annotated[
        int,
        typer.Option(help="Episode i uses seed + i (evaluation seeds start at 0; see README)."),
    ] = 0,
    steps: Annotated[int | None, typer.Option(min=1, help="Turns per episode.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")] = None,
    resume: Annotated[
        bool, typer.Option(help="Keep the ok episodes already in --out and run the rest.")
    ] = False,
    workers: Annotated[int, typer.Option("--workers", "-j", min=1)] = os.cpu_count() or 1,
    weights: Annotated[
        str | None,
        typer.Option(help="Rubric weight overrides as JSON, e.g. '{\"latency_penalty\": 0.1}'."),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Move results already in --out aside and start fresh.")
    ] = False,
) -> None:
    """Run policies (or a model) on scenarios or a trace; write results.jsonl and run.json."""
    started = time.perf_counter()
    check_options(
        {
            "--episodes": episodes,
            "--seed": seed,
            "--steps": steps,
            "--concurrency": concurrency,
            "--workers": workers,
            "--history-turns": history_turns,
            "--timeout": timeout,
            "--max-retries": max_retries,
            "--temperature": temperature,
            "--max-tokens": max_tokens,
        }
    )
    if model and policy:
        raise _fail("give --policy or --model, not both")
    if resume and force:
        raise _fail("give --resume or --force, not both")
    if resume and out is None:
        raise _fail("--resume needs --out (the run directory to finish)")
    if api not in ("openai", "anthropic"):
        raise _fail(f"--api must be 'openai' or 'anthropic', not {api!r}")
    if api_key_var is None:
        api_key_var = "ANTHROPIC_API_KEY" if api == "anthropic" else "OPENAI_API_KEY"
    names = [model] if model else (_split(policy) or list(policies.BUILTIN))
    if not model:
        for name in names:
            try:
                policies.create(name)
            except ValueError as error:
                raise _fail(str(error)) from None
    tiers = _split(scenario) or (["medium"] if trace else list(SUITE))
    for tier in tiers:
        if tier not in SCENARIOS:
            raise _fail(f"unknown scenario {tier!r}; known scenarios: {', '.join(SCENARIOS)}")
    if full and trace is None:
        raise _fail("--full needs --trace")
    if trace is not None:
        if len(tiers) != 1:
            raise _fail("--trace takes one --scenario (the tier whose budget it uses)")
        try:
            load_episode_trace(str(trace))  # parsed once: the episodes reuse it
        except TraceError as error:
            raise _fail(str(error)) from None
    spec = None
    local_server = None
    if model:
        from .common.local_model import (
            DEFAULT_HISTORY_TURNS,
            DEFAULT_MAX_TOKENS,
            LocalModelError,
            LocalModelServer,
            is_local,
        )
        from .prompt_cache.strategies import DEFAULT_STRATEGY
        from .serving.model_eval import ModelSpec, api_key  # imports openai: only when needed

        sampling: dict[str, Any] = {}
        if temperature is not None:
            sampling["temperature"] = temperature
        name, label = model, None
        if is_local(model):
            if api != "openai":
                raise _fail("a local: model speaks the OpenAI API; drop --api")
            if base_url:
                raise _fail("a local: model is served here; drop --base-url")
            try:
                local_server = LocalModelServer(
                    model, log=Path(out or ".") / "local-model.log", constrain=constrain
                )
            except LocalModelError as error:
                raise _fail(str(error)) from None
            name, label, base_url = local_server.alias, model, local_server.base_url
            history_turns = DEFAULT_HISTORY_TURNS if history_turns is None else history_turns
            max_tokens = max_tokens or DEFAULT_MAX_TOKENS
        if max_tokens is not None:
            sampling["max_tokens"] = max_tokens
        spec = ModelSpec(
            name=name,
            base_url=base_url,
            api_key_var=api_key_var,
            timeout_s=timeout,
            max_retries=max_retries,
            history_turns=history_turns,
            hints=hints,
            sampling=sampling,
            label=label,
            api=api,  # type: ignore[arg-type]
            prompt_cache=prompt_cache,
        )
        try:
            api_key(spec)
        except ValueError as error:
            raise _fail(str(error)) from None
    weight_pairs = _parse_weights(weights)
    count = 1 if full else episodes
    jobs = [
        EpisodeJob(
            agent=name,
            episode=EpisodeSpec(
                scenario=tier,
                seed=seed + i,
                trace=str(trace) if trace else None,
                full=full,
                steps=steps,
            ),
            weights=weight_pairs,
        )
        for tier in tiers
        for name in names
        for i in range(count)
    ]
    out = out or Path("runs") / datetime.now(UTC).strftime("eval-%Y%m%d-%H%M%S")
    arguments: dict[str, Any] = {
        "policies": None if model else names,
        "model": model,
        "base_url": base_url,
        "api_key_var": api_key_var if model else None,
        "api": api if model else None,
        "prompt_cache": (DEFAULT_STRATEGY if spec.uses_tiers else "off") if spec else None,
        "concurrency": concurrency if model else None,
        "history_turns": history_turns,
        "constrain": constrain if local_server is not None else None,
        "scenarios": tiers,
        "trace": str(trace) if trace else None,
        "full": full,
        "episodes": count,
        "seed": seed,
        "steps": steps,
        "workers": workers,
        "weights": dict(weight_pairs),
        "resume": resume,
    }
    run_info: dict[str, Any] = {
        "command": "eval",
        "arguments": arguments,
        "suite_version": SUITE_VERSION,
        "versions": _versions(),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    moved = prepare_run_dir(out, run_info, resume=resume, force=force)
    if moved is not None:
        console.print(f"moved the previous results aside to {moved}")
    run = RunDir(out, resume=resume)
    pending = [job for job in jobs if not run.done(job.key)]
    if resume:
        console.print(f"resuming {out}: {len(jobs) - len(pending)} of {len(jobs)} episodes kept")
    write_run_info(out, run_info, run.results, "running", started)
    status = "error"
    try:
        if local_server is not None and pending:
            _start_local(local_server)
        if spec is not None:
            _run_model(pending, spec, concurrency, run)
        else:
            for _job, result in _run_jobs(pending, workers):
                run.add(result)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        console.print(
            f"[yellow]interrupted:[/yellow] {len(run.results)} of {len(jobs)} episodes kept in "
            f"{run.results_path}; finish with --resume --out {out}"
        )
        raise typer.Exit(130) from None
    finally:
        if local_server is not None:
            local_server.stop()
        if status != "complete":
            run.close()
            write_run_info(out, run_info, run.results, status, started)
    results = run.finish(job.key for job in jobs)
    wall = time.perf_counter() - started
    run_info = write_run_info(out, run_info, results, "complete", started)
    _print_tables(summarize(results), normalized_scores(results))
    failed = run_info["episodes_failed"]
    if failed:
        console.print(f"[yellow]{failed} episode(s) failed[/yellow]; see 'error' in the results")
    console.print(f"wrote {run.results_path} and {out / 'run.json'} in {wall:.1f}s")


def _start_local(server: LocalModelServer) -> None:
    from .common.local_model import LocalModelError

    with console.status(f"loading {server.model} ({server.path.name})") as status:
        try:
            server.start(tick=lambda s: status.update(f"loading {server.model}: {s:.0f}s"))
        except LocalModelError as error:
            raise _fail(str(error)) from None
    console.print(f"{server.model} serving at {server.base_url}")


def _run_model(jobs: list[EpisodeJob], spec: ModelSpec, concurrency: int, run: RunDir) -> None:
    from .serving.model_eval import run_model_jobs

    rewards: list[float] = []
    errors = 0
    with _progress() as progress:
        task = progress.add_task(spec.agent, total=len(jobs))

        def on_result(result: dict[str, Any], transcript: dict[str, Any] | None) -> None:
            nonlocal errors
            # transcript first: a kill between the two leaves an orphan transcript (rewritten on
            # resume), never a kept result without its transcript
            if transcript is not None:
                run.write_transcript(result, transcript)
            run.add(result)
            if result["status"] == "ok":
                rewards.append(result["reward"])
            else:
                errors += 1
            mean = f"{sum(rewards) / len(rewards):+.3f}" if rewards else "-"
            progress.update(
                task, advance=1, description=f"{spec.agent} reward {mean} errors {errors}"
            )

        import asyncio  # imported where used: start-up time of every other command

        asyncio.run(run_model_jobs(jobs, spec, concurrency=concurrency, on_result=on_result))


def _parse_weights(text: str | None) -> tuple[tuple[str, float], ...]:
    from rubrics import COMPONENTS

    return tuple(sorted(parse_weights(text, COMPONENTS).items()))


def _run_jobs(jobs: list[EpisodeJob], workers: int) -> Iterator[tuple[EpisodeJob, dict[str, Any]]]:
    with _progress() as progress:
        task = progress.add_task("episodes", total=len(jobs))
        if workers <= 1 or len(jobs) == 1:
            for job in jobs:
                progress.update(task, description=f"{job.episode.label} {job.agent}")
                yield job, run_job(job)
                progress.advance(task)
            return
        from concurrent.futures import ProcessPoolExecutor, as_completed  # (start-up time)

        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures: dict[Future[dict[str, Any]], EpisodeJob] = {
                pool.submit(run_job, job): job for job in jobs
            }
            try:
                for future in as_completed(futures):
                    job = futures[future]
                    progress.update(task, description=f"{job.episode.label} {job.agent}")
                    yield job, future.result()
                    progress.advance(task)
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<32}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _print_tables(rows: list[Row], normalized: dict[tuple[str, str], Normalized]) -> None:
    # Ten "mean±ci" columns need ~150 characters; wider than a default pipe's 80.
    printer = out_console if out_console.width >= 150 else Console(width=150)
    for scenario in dict.fromkeys(r.scenario for r in rows):
        table = Table(
            title=f"{scenario}: mean ± 95% CI; norm = (agent - noop) / (bound - noop), paired",
            title_justify="left",
        )
        table.add_column("agent")
        table.add_column("n", justify="right")
        table.add_column("norm", justify="right")
        table.add_column("bound-agent", justify="right")
        for header, _, _ in COLUMNS:
            table.add_column(header, justify="right")
        for row in sorted(
            (r for r in rows if r.scenario == scenario),
            key=lambda r: -r.values["reward"][0] if r.episodes > r.failed else 1e9,
        ):
            n = f"{row.episodes - row.failed}" + (f" ({row.failed} failed)" if row.failed else "")
            cells = [_cell(header, *row.values[header]) for header, _, _ in COLUMNS]
            figures = normalized.get((scenario, row.agent))
            norm = "-" if figures is None or figures.score is None else f"{figures.score:.2f}"
            gap = (
                "-"
                if figures is None or figures.to_bound is None
                else f"{figures.to_bound[0]:+.3f}±{figures.to_bound[1]:.3f}"
            )
            table.add_row(row.agent, n, norm, gap, *cells)
        printer.print(table)


def _cell(header: str, mean: float, half: float) -> str:
    if mean != mean:  # nan: no ok episodes
        return "-"
    digits = 3 if header in ("reward", "throughput", "headroom") else 1
    sign = "+" if header == "reward" else ""
    return f"{mean:{sign}.{digits}f}±{half:.{digits}f}"


def _versions() -> dict[str, str]:
    from importlib import metadata  # (start-up time of commands that write no run.json)

    versions = {"python": platform.python_version(), "platform": sys.platform}
    for dist in ("kvcache-arena", "numpy", "rich", "typer"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


@app.command("cache-replay")
def cache_replay(
    transcripts: Annotated[
        list[Path],
        typer.Argument(
            help="Transcript files or directories (a run directory of 'kvarena eval --model' "
            "or 'kvarena context-eval --model')."
        ),
    ],
    price_in: Annotated[
        float, typer.Option(min=0, help="Price of uncached input, $ per million tokens.")
    ],
    price_cached: Annotated[
        float, typer.Option(min=0, help="Price of input read from the cache, $ per M tokens.")
    ],
    price_write: Annotated[
        float, typer.Option(min=0, help="Price of input written to the cache, $ per M tokens.")
    ],
    cache_min_tokens: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Provider minimum for a cacheable prefix (cacheMinTokens). Default: that of "
            "--for-model, else 1024.",
        ),
    ] = None,
    for_model: Annotated[
        str | None,
        typer.Option(help="Price for this provider model's minimum prefix (e.g. claude-opus-4-5)."),
    ] = None,
    cache_buffer_multiplier: Annotated[
        float, typer.Option(min=1, help="Safety margin on the minimum (cacheBufferMultiplier).")
    ] = 1.5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Replay eval transcripts through (a) no breakpoints, (b) one after the system prompt,
    (c) a rolling breakpoint on the last message, (d) the stability tiers and (e) the hybrid
    planner (the hosted client's default); compare costs."""
    from .prompt_cache.command import run_cache_replay
    from .prompt_cache.minimums import min_cacheable_tokens

    if cache_min_tokens is None:
        cache_min_tokens = min_cacheable_tokens(for_model)
    run_cache_replay(
        transcripts,
        price_in=price_in,
        price_cached=price_cached,
        price_write=price_write,
        cache_min_tokens=cache_min_tokens,
        cache_buffer_multiplier=cache_buffer_multiplier,
        as_json=as_json,
    )


@app.command("context-eval")
def context_eval(
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="Context baselines, comma-separated (default: all)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="An LLM agent instead (OpenAI-compatible, or local:NAME)."
        ),
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="The agent model's endpoint.")] = None,
    api_key_var: Annotated[
        str, typer.Option(help="Environment variable holding the API key.")
    ] = "OPENAI_API_KEY",
    level: Annotated[
        list[str] | None,
        typer.Option("--level", "-l", help="Levels, comma-separated (default: easy,medium,hard)."),
    ] = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1)] = 5,
    seed: Annotated[int, typer.Option(help="Episode i uses seed + i.")] = 0,
    reader: Annotated[
        str | None,
        typer.Option(
            help="Who answers the questions: extractive (default without --model), hf:PATH "
            "(a local Hugging Face model through the block mask), local:NAME, or a model "
            "name on --reader-base-url. Default with --model: that model."
        ),
    ] = None,
    reader_base_url: Annotated[
        str | None, typer.Option(help="Endpoint of a chat-model reader.")
    ] = None,
    max_blocks: Annotated[
        int | None, typer.Option(min=1, help="Cache budget in blocks (default: the level's).")
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="Cap on each agent reply (default 512; 192 for local: models)."),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory.")] = None,
    weights: Annotated[
        str | None,
        typer.Option(help="Context rubric weight overrides as JSON, e.g. '{\"oom_penalty\": 1}'."),
    ] = None,
) -> None:
    """The conversation-context family: which blocks of one long chat stay cached (seeds 000 +
    001). Writes results.jsonl and run.json; prints ROUGE-L, OOM events and blocks per level."""
    from rubrics.context import CONTEXT_COMPONENTS

    from .common.local_model import DEFAULT_MAX_TOKENS, is_local
    from .context.command import (
        ContextEvalArgs,
        ContextEvalError,
        print_context_tables,
        run_context_eval,
    )
    from .context.policies import CONTEXT_POLICIES

    check_options(
        {
            "--episodes": episodes,
            "--seed": seed,
            "--max-blocks": max_blocks,
            "--max-tokens": max_tokens,
        }
    )
    parsed = parse_weights(weights, CONTEXT_COMPONENTS)
    if model and policy:
        raise _fail("give --policy or --model, not both")
    args = ContextEvalArgs(
        policies=_split(policy) or list(CONTEXT_POLICIES),
        model=model,
        base_url=base_url,
        api_key_var=api_key_var,
        levels=_split(level) or ["easy", "medium", "hard"],
        episodes=episodes,
        seed=seed,
        reader=reader,
        reader_base_url=reader_base_url,
        max_blocks=max_blocks,
        max_tokens=max_tokens or (DEFAULT_MAX_TOKENS if model and is_local(model) else 512),
        out=out or Path("runs") / datetime.now(UTC).strftime("context-%Y%m%d-%H%M%S"),
        weights=parsed,
    )
    check_out_dir(args.out)
    started = time.perf_counter()
    try:
        results = run_context_eval(args)
    except ContextEvalError as error:
        raise _fail(str(error)) from None
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted:[/yellow] finished episodes are in {args.out}")
        raise typer.Exit(130) from None
    print_context_tables(results)
    console.print(
        f"wrote {args.out / 'results.jsonl'} and {args.out / 'run.json'} in "
        f"{time.perf_counter() - started:.1f}s"
    )


@app.command("policies")
def policies_command() -> None:
    """List the registered policies."""
    for name in policies.available():
        policy = policies.create(name)
        doc = " ".join((type(policy).__doc__ or "").split())
        out_console.print(f"[bold]{name:<16}[/bold] {doc}", soft_wrap=True)


@app.command("scenarios")
def scenarios_command() -> None:
    """List the built-in scenarios and their main parameters."""
    table = Table(
        "scenario",
        "budget",
        "arrivals/s",
        "bursts",
        "pauses",
        "kv",
        "cpu",
        "prefill/s",
        "fallback",
        title=f"serving suite v{SUITE_VERSION} (the suite: {', '.join(SUITE)})",
        title_justify="left",
    )
    for sc in SCENARIOS.values():
        table.add_row(
            sc.name,
            f"{sc.budget_fraction[0]:.2f}-{sc.budget_fraction[1]:.2f} of peak",
            f"{sc.arrival_rate[0]:.1f}-{sc.arrival_rate[1]:.1f}",
            f"{sc.burst_probability:.0%} x{sc.burst_multiplier:g}",
            " ".join(f"{k} {w:g}" for k, w in sc.pause_mix),
            str(sc.base_quantization),
            f"{sc.cpu_capacity_fraction:g}x",
            str(sc.prefill_tokens_per_s),
            sc.fallback,
        )
    Console(width=max(out_console.width, 140)).print(table)


@app.command("traces")
def traces_command() -> None:
    """List the built-in traces (`--trace NAME`): requests, duration and source."""
    from .serving.trace_list import builtin_trace_rows

    table = Table("name", "requests", "duration", "prefix blocks", "source", "licence")
    for row in builtin_trace_rows():
        table.add_row(*row)
    out_console.print(table)


@app.command("serve-policy")
def serve_policy_command(
    name: Annotated[str, typer.Argument(help="An observation-based policy, e.g. lru.")],
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8000,
    host: Annotated[str, typer.Option(help="Loopback address to bind.")] = "127.0.0.1",
    faults: Annotated[
        str | None,
        typer.Option(
            help="Inject faults for tests: N:KIND,... with KIND in 429, 500, timeout, "
            "badjson, drop (N counts chat requests from 1)."
        ),
    ] = None,
    fault_delay: Annotated[
        float, typer.Option(min=0, help="Seconds a 'timeout' fault waits.")
    ] = 30.0,
) -> None:
    """Serve a policy as an OpenAI-compatible chat endpoint (tool calls), loopback only."""
    from .common.policy_server import PolicyServer, parse_faults

    try:
        server = PolicyServer(
            name, host=host, port=port, faults=parse_faults(faults), timeout_s=fault_delay
        )
    except (ValueError, OSError) as error:
        raise _fail(str(error)) from None
    console.print(
        f"serving policy [bold]{name}[/bold] at {server.base_url} (OpenAI chat) and "
        f"{server.anthropic_base_url} (Anthropic Messages) (Ctrl-C stops)"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


@app.command("serve-model")
def serve_model_command(
    model: Annotated[str, typer.Argument(help="local:smollm2 or local:/path/model.gguf")],
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8000,
    constrain: Annotated[
        bool,
        typer.Option(
            help="local: models: replies to the tools are tool calls by constrained decoding "
            "(--no-constrain: free text, as llama.cpp's chatml-function-calling gives it)."
        ),
    ] = True,
) -> None:
    """Serve a local GGUF model as an OpenAI-compatible endpoint with tool calls (loopback)."""
    from .common.local_model import LocalModelError, LocalModelServer

    try:
        server = LocalModelServer(model, port=port, constrain=constrain)
    except LocalModelError as error:
        raise _fail(str(error)) from None
    try:
        _start_local(server)
        console.print(f"model name for clients: [bold]{server.alias}[/bold]; Ctrl-C stops")
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


@app.command("report")
def report_command(
    runs: Annotated[list[Path], typer.Argument(help="Run directories or results.jsonl files.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report directory.")] = Path("report"),
    dataset: Annotated[
        Path | None, typer.Option(help="Also save the results as a datasets.Dataset here.")
    ] = None,
    price_in: Annotated[
        float | None, typer.Option(min=0, help="$ per M fresh input tokens (with the other two).")
    ] = None,
    price_cached: Annotated[
        float | None, typer.Option(min=0, help="$ per M input tokens read from the cache.")
    ] = None,
    price_write: Annotated[
        float | None, typer.Option(min=0, help="$ per M input tokens written to the cache.")
    ] = None,
) -> None:
    """Build leaderboard.md and a self-contained index.html from one or more runs; with the
    three prices, also the input cost per episode in dollars from the recorded usage."""
    from .prompt_cache.provider import Prices
    from .report import ReportError, build_report, load_results, to_dataset

    given = [p for p in (price_in, price_cached, price_write) if p is not None]
    if len(given) not in (0, 3):
        raise _fail("give all three of --price-in, --price-cached and --price-write, or none")
    prices = Prices(*given) if given else None
    try:
        results = load_results(runs)
    except ReportError as error:
        raise _fail(str(error)) from None
    check_out_dir(out)
    if dataset is not None and dataset.exists() and not dataset.is_dir():
        raise InputError(f"--dataset {dataset}: exists and is not a directory")
    with console.status("rendering figures"):
        rows = build_report(results, out, [str(r) for r in runs], prices)
    if dataset is not None:
        to_dataset(results).save_to_disk(str(dataset))
        console.print(f"saved the dataset to {dataset}")
    failed = sum(r.failed for r in rows)
    console.print(
        f"{len(results)} episodes ({failed} failed) in {len(rows)} rows: "
        f"{out / 'leaderboard.md'}, {out / 'index.html'}"
    )


@app.command("validate")
def validate_command(
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=2)] = 100,
    ablation_episodes: Annotated[
        int | None,
        typer.Option(min=1, help="Episodes per scenario for each ablated bound (default: -n)."),
    ] = None,
    deep_episodes: Annotated[
        int | None,
        typer.Option(min=1, help="Episodes per scenario for the deeper search (default: n/10)."),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", "-j", min=1)] = os.cpu_count() or 1,
    family: Annotated[str, typer.Option(help="Which checks: serving, context or all.")] = "all",
) -> None:
    """Check that the benchmark rewards judgment and behaves as documented; exit 1 on a failure."""
    from .context.validate import context_validation_jobs, run_context_validation
    from .serving.validate import run_validation, validation_jobs

    if family not in ("serving", "context", "all"):
        raise _fail(f"--family must be serving, context or all, not {family!r}")
    serving, context = family in ("serving", "all"), family in ("context", "all")
    ablation = episodes if ablation_episodes is None else ablation_episodes
    deep = max(2, episodes // 10) if deep_episodes is None else deep_episodes
    jobs, bounds = validation_jobs(episodes, ablation, deep)
    total = (len(jobs) + len(bounds)) * serving + len(context_validation_jobs(episodes)) * context
    with _progress() as progress:
        task = progress.add_task("validate", total=total)
        checks = (
            run_validation(
                episodes,
                workers,
                lambda: progress.advance(task),
                ablation_episodes=ablation,
                deep_episodes=deep,
            )
            if serving
            else []
        )
        if context:
            checks += run_context_validation(episodes, workers, lambda: progress.advance(task))
    table = Table("check", "result", "figures", title="kvarena validate", title_justify="left")
    for check in checks:
        verdict = "[green]pass[/green]" if check.passed else "[red]FAIL[/red]"
        table.add_row(check.name, verdict, check.detail)
    Console(width=max(out_console.width, 160)).print(table)
    failed = [c for c in checks if not c.passed]
    if failed:
        console.print(f"[red]{len(failed)} check(s) failed[/red]")
        raise typer.Exit(1)
    console.print(f"all {len(checks)} checks passed")


@app.command("bench")
def bench_command(
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1)] = 1000,
    trace: Annotated[
        str,
        typer.Option(help="Trace for the replay figure: a built-in name (kvarena traces) or path."),
    ] = "mooncake-conversation",
    as_json: Annotated[bool, typer.Option("--json", help="Print figures as JSON.")] = False,
    speed: Annotated[
        bool, typer.Option(help="The engine-speed table (each figure in a fresh process).")
    ] = True,
    before: Annotated[
        Path | None,
        typer.Option(help="Worktree of an older commit, measured beside this one (ratios)."),
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Speed table: paired repeats.")] = 3,
    bound_episodes: Annotated[int, typer.Option(min=0, help="Speed table: bound episodes.")] = 6,
    speed_episodes: Annotated[
        int, typer.Option(min=1, help="Speed table: hard episodes per policy.")
    ] = 200,
) -> None:
    """Measure simulator speed, the full-trace replay time and the observation size; with
    --before, the engine-speed table of this tree against an older commit's worktree."""
    from kv_cache_env.trace_data import resolve_trace

    from .serving.bench import run_bench
    from .serving.speed import run_speed

    if not resolve_trace(trace).is_file():
        raise _fail(f"{trace}: no such trace file")
    if before is not None and not (before / "environments" / "kv_cache_env").is_dir():
        raise _fail(f"{before}: not a kvcache-arena worktree (git worktree add --detach ...)")
    figures = run_bench(episodes=episodes, trace=trace, progress=None if as_json else console)
    if speed:
        figures["speed"] = run_speed(
            before=before,
            trace=trace,
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
        from .serving.speed import speed_table

        out_console.print(speed_table(figures["speed"]))


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
