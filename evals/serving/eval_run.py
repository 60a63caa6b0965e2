"""`kvarena eval`'s body: check the arguments, build the episode jobs, run them (built-in
policies in worker processes, or a model over HTTP with a local model started here if asked),
keep every finished episode in the run directory, and print the summary tables."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kv_cache_env import policies
from kv_cache_env.episodes import EpisodeSpec, load_episode_trace
from kv_cache_env.sim import SCENARIOS, SUITE, SUITE_VERSION, canonical_scenario_name
from kv_cache_env.suggest import unknown_name
from kv_cache_env.traces import TraceError
from model_client.model_output import one_line
from rubrics import Weights

from ..common.backends import WorkerLost, backend_option, plays_here, use
from ..common.console import (
    console,
    out_console,
    plan_line,
    progress,
    status_line,
    summary_line,
    versions,
)
from ..common.durable import OutputError
from ..common.edge import (
    EXIT_EPISODES_FAILED,
    InputError,
    check_options,
    check_path,
    check_seeds,
    names_option,
    parse_weights,
    repeated_names,
)
from ..common.outcome import RunDone
from ..common.processes import interrupt_status, terminate_as_interrupt
from ..common.run_dir import RunDir, prepare_run_dir, write_run_info
from ..common.secrets import BadKeyError, key_from_env, scrub
from .jobs import (
    EpisodeJob,
    failed_result,
    reference_for_scoring,
    reference_from_table,
    run_job,
)
from .normalize import normalized_scores
from .reference_table import source_digest
from .summary import summarize
from .tables import print_tables

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..prompt_cache.provider import Prices
    from ..servers.local_model import LocalModelServer
    from .model_eval import ModelSpec


@dataclass
class EvalArgs:
    """`kvarena eval`'s options, as given (None: not given)."""

    policy: list[str] | None
    model: str | None
    base_url: str | None
    api_key_var: str | None
    api: str
    prompt_cache: bool | None
    concurrency: int
    history_turns: int | None
    timeout: float
    max_retries: int
    temperature: float | None
    sampling_seed: int | None
    max_tokens: int | None
    dry_run: bool
    price_in: float | None
    price_out: float | None
    price_cached: float | None
    price_write: float | None
    hints: bool
    constrain: bool
    scenario: list[str] | None
    trace: Path | None
    full: bool
    episodes: int
    seed: int
    steps: int | None
    out: Path | None
    resume: bool
    workers: int
    weights: str | None
    force: bool
    wide: bool = False
    backend: str = "local"
    address: str | None = None


def run_eval(args: EvalArgs) -> RunDone | None:
    """Run policies (or a model) on scenarios or a trace; write results.jsonl and run.json and
    print the tables. The app's closing step prints the ranking (`RunDone`). With `dry_run`,
    print what the model run would send and cost, and return None having sent nothing."""
    started = time.perf_counter()
    names, tiers = _check(args)
    backend = backend_option(args.backend, args.address, model=args.model is not None)
    prices = _prices(args)
    spec, local_server = _model_spec(args) if args.model else (None, None)
    weights = parse_weights(args.weights, Weights)  # checked once; passed on as it is
    count = 1 if args.full else args.episodes
    jobs = [
        EpisodeJob(
            agent=name,
            episode=EpisodeSpec(
                scenario=tier,
                seed=args.seed + i,
                trace=str(args.trace) if args.trace else None,
                full=args.full,
                steps=args.steps,
            ),
            weights=weights,
        )
        for tier in tiers
        for name in names
        for i in range(count)
    ]
    if args.dry_run:
        assert spec is not None  # _check: --dry-run needs --model
        _print_estimate(jobs, spec, prices)
        return None
    out = args.out or Path("runs") / datetime.now(UTC).strftime("eval-%Y%m%d-%H%M%S")
    counts = [(len(names), "agents"), (len(tiers), "scenarios"), (count, "seeds")]
    console.print(plan_line("eval", len(jobs), counts, out), highlight=False)
    run_info: dict[str, Any] = {
        "command": "eval",
        "arguments": _arguments(args, names, tiers, count, weights, spec, local_server),
        "suite_version": SUITE_VERSION,
        "source_digest": source_digest(),
        "versions": versions(),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    moved = prepare_run_dir(out, run_info, resume=args.resume, force=args.force)
    if moved is not None:
        console.print(f"moved the previous results aside to {moved}")
    run = RunDir(out, resume=args.resume)
    pending = [job for job in jobs if not run.done(job.key)]
    if args.resume:
        console.print(run.resumed_line(len(jobs)))
    with _closing(run, run_info, started, len(jobs)):
        write_run_info(out, run_info, run.results, "running", started)
        with use(backend, args.workers):
            _execute(pending, args, spec, local_server, run)
        results = run.finish(job.key for job in jobs)
        run_info = write_run_info(out, run_info, results, "complete", started)
    _print_results(results, args, weights)
    if spec is not None:
        from .model_cost import reply_cap, run_totals, totals_table

        title = "what this run sent (as the endpoint billed it)"
        out_console.print(totals_table(title, run_totals(results), prices, reply_cap(spec)))
    failed = run_info["episodes_failed"]
    console.print(
        f"wrote {run.results_path} and {out / 'run.json'}: {run_info['episodes_run']} episodes, "
        f"{run_info['wall_time_s']:.1f} s from start to finish"
    )
    if failed:
        console.print(
            f"[yellow]{failed} of {len(results)} episode(s) failed[/yellow]; see 'error' in the "
            f"results (exit status {EXIT_EPISODES_FAILED})"
        )
    return RunDone(out, args.wide, EXIT_EPISODES_FAILED if failed else 0, tuple(results))


@contextmanager
def _closing(run: RunDir, run_info: dict[str, Any], started: float, total: int) -> Iterator[None]:
    """However the run stops before it completes, `run.json` says how (`interrupted` on Ctrl-C
    or SIGTERM, exit 130 / 143; `error` with the reason otherwise) and every finished episode
    is already in `results.jsonl`."""

    def close(status: str, reason: str | None = None) -> None:
        run.close()
        with suppress(OutputError):  # the error on its way out says what went wrong
            write_run_info(run.path, run_info, run.results, status, started, error=reason)

    try:
        with terminate_as_interrupt():
            yield
    except KeyboardInterrupt as error:
        close("interrupted")
        console.print(
            f"[yellow]interrupted:[/yellow] {len(run.results)} of {total} episodes kept in "
            f"{run.results_path}; finish with --resume --out {run.path}"
        )
        raise typer.Exit(interrupt_status(error)) from None
    except OutputError as error:
        close("error", str(error))
        console.print(
            f"{len(run.results)} of {total} episodes kept in {run.results_path}; once the "
            f"output can be written again, finish with --resume --out {run.path}"
        )
        raise
    except BaseException as error:
        close("error", one_line(f"{type(error).__name__}: {error}", 300))
        raise


def _print_results(results: list[dict[str, Any]], args: EvalArgs, weights: Weights) -> None:
    """The tables; noop and the bound come from the shipped table where the run lacks them (the
    bound only under the default weights)."""
    reference: list[dict[str, Any]] = []
    sources: dict[str, str] = {}
    if args.trace is None and args.steps is None:
        reference, sources = reference_for_scoring(results, weights)
    normalized = normalized_scores([*results, *reference])
    print_tables(summarize(results), normalized, wide=args.wide, reference=sources)


def _print_estimate(jobs: list[EpisodeJob], spec: ModelSpec, prices: Prices | None) -> None:
    """The dry run's table: the run's totals, estimated offline (`model_cost`)."""
    from .model_cost import STAND_IN, estimate, reply_cap, totals_table

    status_line(f"eval: dry run, nothing is sent; {STAND_IN!r} plays the model offline")
    with progress() as bar:
        task = bar.add_task("estimate", total=len(jobs))
        totals = estimate(jobs, spec, done=lambda: bar.advance(task))
    title = f"what this run would send (estimate; {STAND_IN!r} standing in for the model)"
    out_console.print(totals_table(title, totals, prices, reply_cap(spec)))


def _prices(args: EvalArgs) -> Prices | None:
    """The `--price-*` options as one value (None: no price given)."""
    given = (args.price_in, args.price_out, args.price_cached, args.price_write)
    if all(price is None for price in given):
        return None  # (and the model clients' imports are not paid by a policy run)
    from .model_cost import eval_prices

    try:
        return eval_prices(args.price_in, args.price_out, args.price_cached, args.price_write)
    except ValueError as error:
        raise InputError(str(error)) from None


def _check(args: EvalArgs) -> tuple[list[str], list[str]]:
    """InputError for the first bad option; else (agent names, scenario names). Fills in the
    API key variable's default."""
    check_options(
        {
            "--episodes": args.episodes,
            "--seed": args.seed,
            "--steps": args.steps,
            "--concurrency": args.concurrency,
            "--workers": args.workers,
            "--history-turns": args.history_turns,
            "--timeout": args.timeout,
            "--max-retries": args.max_retries,
            "--temperature": args.temperature,
            "--sampling-seed": args.sampling_seed,
            "--max-tokens": args.max_tokens,
            "--price-in": args.price_in,
            "--price-out": args.price_out,
            "--price-cached": args.price_cached,
            "--price-write": args.price_write,
        }
    )
    if args.model and args.policy:
        raise InputError("give --policy or --model, not both")
    if args.resume and args.force:
        raise InputError("give --resume or --force, not both")
    if args.resume and args.out is None:
        raise InputError("--resume needs --out (the run directory to finish)")
    if args.api not in ("openai", "anthropic"):
        raise InputError(f"--api must be 'openai' or 'anthropic', not {args.api!r}")
    if args.dry_run and not args.model:
        raise InputError("--dry-run needs --model (built-in policies send nothing)")
    priced = [args.price_in, args.price_out, args.price_cached, args.price_write]
    if any(price is not None for price in priced) and not args.model:
        raise InputError("--price-* need --model (built-in policies cost nothing)")
    if args.sampling_seed is not None and not args.model:
        raise InputError("--sampling-seed needs --model (policies draw from the episode seed)")
    if args.sampling_seed is not None and args.api == "anthropic":
        raise InputError("--sampling-seed: the Anthropic Messages API takes no seed")
    if args.api_key_var is None:
        args.api_key_var = "ANTHROPIC_API_KEY" if args.api == "anthropic" else "OPENAI_API_KEY"
    check_seeds(args.seed, 1 if args.full else args.episodes)
    if args.out is not None:
        check_path(args.out, "--out")
    if args.trace is not None:
        check_path(args.trace, "--trace")
    if args.model is not None and args.model.startswith("local:"):
        check_path(args.model.removeprefix("local:"), "--model")
    policy_names = names_option(args.policy, "--policy")
    scenario_names = names_option(args.scenario, "--scenario")
    for option, values in (("--policy", args.policy), ("--scenario", args.scenario)):
        if repeated := repeated_names(values):
            console.print(f"note: {option} names {', '.join(repeated)} more than once; run once")
    names = [args.model] if args.model else (policy_names or list(policies.BUILTIN))
    if not args.model:
        for name in names:
            try:
                policies.create(name)
            except ValueError as error:
                raise InputError(str(error)) from None
    tiers = scenario_names or (["medium"] if args.trace else list(SUITE))
    # a former name: results say the new (and a former and a new name of one tier run once)
    tiers = list(dict.fromkeys(canonical_scenario_name(tier) for tier in tiers))
    for tier in tiers:
        if tier not in SCENARIOS:
            raise InputError(unknown_name("scenario", tier, SCENARIOS))
    if args.full and args.trace is None:
        raise InputError("--full needs --trace")
    if args.trace is not None:
        if len(tiers) != 1:
            raise InputError("--trace takes one --scenario (the tier whose budget it uses)")
        try:
            load_episode_trace(str(args.trace))  # parsed once: the episodes reuse it
        except TraceError as error:
            raise InputError(str(error)) from None
    return names, tiers


def _model_spec(args: EvalArgs) -> tuple[ModelSpec, LocalModelServer | None]:
    """The model's client settings; for a `local:` model, also its (not yet started) server.
    InputError if the options do not fit the model or no API key is set."""
    from ..servers.local_model import (
        DEFAULT_HISTORY_TURNS,
        DEFAULT_MAX_TOKENS,
        LocalModelError,
        LocalModelServer,
        is_local,
    )

    assert args.model is not None
    try:  # a key no header can carry: refused before the SDKs' seconds of imports
        key_from_env(args.api_key_var or "OPENAI_API_KEY", args.base_url)
    except BadKeyError as error:
        raise InputError(str(error)) from None
    from .model_eval import ModelSpec, api_key  # imports openai: only when needed

    sampling: dict[str, Any] = {}
    if args.temperature is not None:
        sampling["temperature"] = args.temperature
    name, label, local_server = args.model, None, None
    if is_local(args.model):
        if args.api != "openai":
            raise InputError("a local: model speaks the OpenAI API; drop --api")
        if args.base_url:
            raise InputError("a local: model is served here; drop --base-url")
        try:
            local_server = LocalModelServer(
                args.model, log=Path(args.out or ".") / "local-model.log", constrain=args.constrain
            )
        except LocalModelError as error:
            raise InputError(str(error)) from None
        name, label, args.base_url = local_server.alias, args.model, local_server.base_url
        if args.history_turns is None:
            args.history_turns = DEFAULT_HISTORY_TURNS
        args.max_tokens = args.max_tokens or DEFAULT_MAX_TOKENS
    if args.max_tokens is not None:
        sampling["max_tokens"] = args.max_tokens
    spec = ModelSpec(
        name=name,
        base_url=args.base_url,
        api_key_var=args.api_key_var or "OPENAI_API_KEY",
        timeout_s=args.timeout,
        max_retries=args.max_retries,
        history_turns=args.history_turns,
        hints=args.hints,
        sampling=sampling,
        label=label,
        api=args.api,  # type: ignore[arg-type]
        prompt_cache=args.prompt_cache,
        sampling_seed=args.sampling_seed,
    )
    try:
        if not args.dry_run:  # a dry run sends nothing: no key needed
            api_key(spec)
    except ValueError as error:
        raise InputError(str(error)) from None
    return spec, local_server


def _arguments(
    args: EvalArgs,
    names: list[str],
    tiers: list[str],
    count: int,
    weights: Weights,
    spec: ModelSpec | None,
    local_server: LocalModelServer | None,
) -> dict[str, Any]:
    """`run.json`'s arguments: everything that changes results (`--resume` compares them)."""
    from ..prompt_cache.strategies import DEFAULT_STRATEGY

    model = args.model
    return {
        "policies": None if model else names,
        "model": model,
        "base_url": scrub(args.base_url) if args.base_url else None,  # as written: --resume
        # compares what run.json holds, and a key in the URL never reaches it
        "api_key_var": args.api_key_var if model else None,
        "api": args.api if model else None,
        "prompt_cache": (DEFAULT_STRATEGY if spec.uses_tiers else "off") if spec else None,
        "concurrency": args.concurrency if model else None,
        "sampling_seed": args.sampling_seed,
        "history_turns": args.history_turns,
        "constrain": args.constrain if local_server is not None else None,
        "scenarios": tiers,
        "trace": str(args.trace) if args.trace else None,
        "full": args.full,
        "episodes": count,
        "seed": args.seed,
        "steps": args.steps,
        "workers": args.workers,
        "backend": args.backend,
        "weights": weights.overrides(),
        "resume": args.resume,
    }


def _execute(
    pending: list[EpisodeJob],
    args: EvalArgs,
    spec: ModelSpec | None,
    local_server: LocalModelServer | None,
    run: RunDir,
) -> None:
    """Run the pending episodes into `run` (a local model server is stopped however it ends)."""
    try:
        if local_server is not None and pending:
            from ..servers.local_model import start_local

            start_local(local_server)
        if spec is not None:
            _run_model(pending, spec, args.concurrency, run)
        else:
            shipped, computed = reference_from_table(pending)
            for result in shipped:
                run.add(result)
            for _job, result in _run_jobs(computed, args.workers, len(shipped)):
                run.add(result)
    finally:
        if local_server is not None:
            local_server.stop()


def _run_model(jobs: list[EpisodeJob], spec: ModelSpec, concurrency: int, run: RunDir) -> None:
    from .model_eval import run_model_jobs

    rewards: list[float] = []
    errors = 0
    with progress() as bar:
        task = bar.add_task(spec.agent, total=len(jobs))

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
            bar.update(task, advance=1, description=f"{spec.agent} reward {mean} errors {errors}")

        import asyncio  # imported where used: start-up time of every other command

        started = time.perf_counter()
        asyncio.run(run_model_jobs(jobs, spec, concurrency=concurrency, on_result=on_result))
    console.print(summary_line(len(jobs), errors, time.perf_counter() - started))


def _run_jobs(
    jobs: list[EpisodeJob], workers: int, shipped: int = 0
) -> Iterator[tuple[EpisodeJob, dict[str, Any]]]:
    """Play the jobs (in worker processes when more than one), with a progress bar that ends
    on a summary line. `shipped`: the run's episodes answered from the shipped reference table,
    which the bar counts as done from its start (its total is the run's), not in its rate."""
    if not jobs:
        return
    failed = 0
    with progress() as bar:
        task = bar.add_task("episodes", total=shipped + len(jobs), completed=shipped, kept=shipped)
        for job, result in _play(jobs, workers):
            failed += result["status"] != "ok"
            yield job, result
            bar.advance(task)
    seconds = bar.tasks[0].finished_time or 0.0  # the bar's own clock, so the same rate
    kept = f"{shipped} from the shipped reference table" if shipped else ""
    console.print(summary_line(len(jobs), failed, seconds, kept=kept))


def _play(jobs: list[EpisodeJob], workers: int) -> Iterator[tuple[EpisodeJob, dict[str, Any]]]:
    if plays_here(workers, len(jobs)):
        for job in jobs:
            yield job, run_job(job)
        return
    from concurrent.futures import as_completed  # (start-up time)

    from ..common.processes import stop_pool, worker_pool

    with worker_pool(workers) as pool:
        futures: dict[Future[dict[str, Any]], EpisodeJob] = {
            pool.submit(run_job, job): job for job in jobs
        }
        try:
            for future in as_completed(futures):
                yield futures[future], _result(futures[future], future)
        except BaseException:
            stop_pool(pool)  # an interrupted run does not wait for its workers' episodes
            raise


def _result(job: EpisodeJob, future: Future[dict[str, Any]]) -> dict[str, Any]:
    """The episode's result; a Ray worker (or node) lost on every retry is a failed episode,
    recorded (`--resume` plays it again)."""
    try:
        return future.result()
    except WorkerLost as error:
        return failed_result(job, str(error))
