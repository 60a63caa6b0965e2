"""The body of `kvarena context-eval` (its options: `commands`): baselines (or an LLM agent) on
the conversation-context family at each level, with a reader, written to `results.jsonl` +
`run.json` and printed as one table per level (ROUGE-L, facts still visible, OOM events, blocks
used, recalls, reward)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kv_cache_env.suggest import unknown_name
from kv_context_env import CONTEXT_SUITE_VERSION
from kv_context_env.generator.conversation import LEVELS, generate_conversation
from kv_context_env.policies.baselines import CONTEXT_POLICIES
from kv_context_env.sim.archive import ArchiveWriteError
from kv_context_env.sim.episode import ContextEpisode
from model_client.model_output import one_line
from model_client.provider_responses import ProviderError
from rubrics.context import ContextWeights

from ..common.backends import LOCAL, Backend, WorkerLost, plays_here, use
from ..common.columns import Column, Fitted, fit_table
from ..common.console import console, plan_line, versions
from ..common.durable import OutputError, describe, refuse_links, write_atomic
from ..common.edge import EXIT_EPISODES_FAILED, InputError, check_out_dir
from ..common.options import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from ..common.outcome import RunDone
from ..common.processes import interrupt_status, terminate_as_interrupt
from ..common.run_dir import RunDir, prepare_run_dir
from ..common.secrets import BadKeyError, key_from_env, scrub
from ..common.stats import mean_ci
from .run import (
    ChatReader,
    Reader,
    context_result,
    extractive_reader,
    hf_reader,
    play_policy,
)


class ContextEvalError(ValueError):
    """Bad arguments; the message says what to change."""


@dataclass(frozen=True)
class ContextEvalArgs:
    policies: list[str]
    model: str | None
    base_url: str | None
    api_key_var: str
    levels: list[str]
    episodes: int
    seed: int
    reader: str | None
    reader_base_url: str | None
    max_blocks: int | None
    out: Path
    weights: ContextWeights
    """The context rubric's weights, checked once at the edge (`--weights`)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """One deadline per model call attempt, the whole answer included (`--timeout`)."""
    max_retries: int = DEFAULT_MAX_RETRIES
    """Retries per model call (`--max-retries`), the agent's and a chat reader's."""
    max_tokens: int = 512
    """Cap on each agent reply (tool calls fit easily; a small local model rambles)."""
    wide: bool = False
    """Print every column of the tables, however wide."""
    resume: bool = False
    """Keep the ok episodes already in `out` (of this run's arguments) and run the rest."""
    force: bool = False
    """Move results already in `out` aside first."""
    workers: int = 1
    """Worker processes (or, on Ray, a Ray instance's CPUs) for baselines read by the
    extractive reader; a model agent and the other readers play in this process."""
    backend: Backend = LOCAL
    """Where the pooled episodes play (`--backend`, `--address`)."""


def run_context_command(args: ContextEvalArgs) -> RunDone:
    """Run the episodes into `args.out` and print the tables; InputError for bad arguments.
    The app's closing step prints the ranking (`RunDone`)."""
    if args.resume or args.force:
        moved = prepare_run_dir(
            args.out, _run_info(args, _reader_label(args)), resume=args.resume, force=args.force
        )
        if moved is not None:
            console.print(f"moved the previous results aside to {moved}")
    else:
        check_out_dir(args.out)
    started = time.perf_counter()
    try:
        with terminate_as_interrupt(), use(args.backend, args.workers):
            results = run_context_eval(args)
    except ContextEvalError as error:
        raise InputError(str(error)) from None
    except KeyboardInterrupt as error:
        console.print(f"[yellow]interrupted:[/yellow] finished episodes are in {args.out}")
        raise typer.Exit(interrupt_status(error)) from None
    except OutputError:
        console.print(
            f"the finished episodes are kept in {args.out / 'results.jsonl'}; once the output "
            f"can be written again, finish with --resume --out {args.out}"
        )
        raise
    print_context_tables(results, wide=args.wide)
    info = _read_info(args.out)
    console.print(
        f"wrote {args.out / 'results.jsonl'} and {args.out / 'run.json'}: "
        f"{info.get('episodes_run', len(results))} episodes, "
        f"{info.get('wall_time_s', time.perf_counter() - started):.1f} s from start to finish"
    )
    failed = sum(1 for r in results if r["status"] != "ok")
    if failed:
        console.print(
            f"[yellow]{failed} of {len(results)} episode(s) failed[/yellow]; see 'error' in the "
            f"results (exit status {EXIT_EPISODES_FAILED})"
        )
    return RunDone(args.out, args.wide, EXIT_EPISODES_FAILED if failed else 0, tuple(results))


def run_context_eval(args: ContextEvalArgs) -> list[dict[str, Any]]:
    for level in args.levels:
        if level not in LEVELS:
            raise ContextEvalError(unknown_name("level", level, LEVELS))
    for name in args.policies:
        if name not in CONTEXT_POLICIES:
            raise ContextEvalError(
                unknown_name("context policy", name, CONTEXT_POLICIES, "context policies")
            )
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        agent_key = ""
        agent_name = args.model
        agent_base = args.base_url
        if args.model:
            agent_name, agent_base = stack.enter_context(
                _endpoint(args.model, args.base_url, args.out)
            )
            agent_key = _api_key(agent_base, args.api_key_var)
        reader_label = _reader_label(args)
        reader = stack.enter_context(_reader(args, reader_label, agent_name, agent_base))
        agents = [args.model] if args.model else args.policies
        jobs = [
            (level, agent, args.seed + i)
            for level in args.levels
            for agent in agents
            for i in range(args.episodes)
        ]
        counts = [(len(agents), "agents"), (len(args.levels), "levels"), (args.episodes, "seeds")]
        console.print(
            plan_line("context-eval", len(jobs), counts, args.out) + f", reader {reader_label}",
            highlight=False,
        )
        # without --resume a fresh run: the kept lines are none (the file is emptied)
        run = RunDir(args.out, resume=args.resume, family="context")
        stack.callback(run.close)
        if args.resume:
            console.print(run.resumed_line(len(jobs)))
        results = run.results
        status, reason = "error", None
        # run.json says "running" from the start: a disk that fills up later still finds it
        # there to overwrite in place with what stopped the run
        _write_info(args, reader_label, results, "running", started)
        try:
            endpoint = (agent_base, agent_key, agent_name or "")
            _play_into(run, jobs, args, endpoint, reader, reader_label)
            results = run.finish(jobs)
            status = "complete"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        except OutputError as error:
            reason = str(error)
            raise
        except Exception as error:
            reason = one_line(f"{type(error).__name__}: {error}", 300)
            raise
        finally:
            if status != "complete":
                results = run.results
            with suppress(OutputError):  # an error on its way out says what went wrong
                _write_info(args, reader_label, results, status, started, reason)
    return results


def _play_into(
    run: RunDir,
    jobs: list[tuple[str, str, int]],
    args: ContextEvalArgs,
    endpoint: tuple[str | None, str, str],
    reader: Reader,
    reader_label: str,
) -> None:
    """Play the jobs `run` does not hold yet into it, with one progress bar over all `jobs`."""
    pending = [job for job in jobs if not run.done(job)]
    with _progress() as progress:
        task = progress.add_task("episodes", total=len(jobs))
        progress.advance(task, len(jobs) - len(pending))

        def playing(description: str) -> None:
            progress.update(task, description=description)

        for result in _played(args, pending, endpoint, reader, reader_label, playing):
            run.add(result)
            progress.advance(task)


def _played(
    args: ContextEvalArgs,
    jobs: list[tuple[str, str, int]],
    endpoint: tuple[str | None, str, str],
    reader: Reader,
    reader_label: str,
    playing: Callable[[str], None],
) -> Iterator[dict[str, Any]]:
    """The results of `jobs` ((level, agent, seed)) as they finish: baselines read by the
    extractive reader through the worker pool (`processes.worker_pool`, on the run's
    backend); a model agent, another reader, or a run that fits one worker in this process
    (`playing` names each episode as it starts)."""
    if args.model or reader is not extractive_reader or plays_here(args.workers, len(jobs)):
        for level, agent, seed in jobs:
            playing(f"{level} {agent} seed {seed}")
            yield _play(args, endpoint, agent, reader, reader_label, level, seed)
        return
    from concurrent.futures import as_completed

    from ..common.processes import stop_pool, worker_pool

    with worker_pool(args.workers) as pool:
        futures = {}
        for job in jobs:
            level, agent, seed = job
            played = pool.submit(_play, args, endpoint, agent, reader, reader_label, level, seed)
            futures[played] = job
        try:
            for future in as_completed(futures):
                try:
                    yield future.result()
                except WorkerLost as error:  # failed, recorded: --resume plays it again
                    level, agent, seed = futures[future]
                    yield context_result(
                        agent=agent,
                        reader=reader_label,
                        level=level,
                        seed=seed,
                        record=None,
                        error=str(error),
                    )
        except BaseException:
            stop_pool(pool)  # an interrupted run does not wait for its workers' episodes
            raise


def _play(
    args: ContextEvalArgs,
    endpoint: tuple[str | None, str, str],
    agent: str,
    reader: Reader,
    reader_label: str,
    level: str,
    seed: int,
) -> dict[str, Any]:
    """One episode's result: the model at `endpoint` (with --model) or the baseline `agent`; a
    full disk under the episode's archive is the one-line `cannot write` error."""
    try:
        if args.model:
            return _play_model(args, endpoint, reader, reader_label, level, seed)
        return _play_baseline(args, agent, reader, reader_label, level, seed)
    except ArchiveWriteError as error:
        raise OutputError(f"cannot write {error.filename}: {describe(error)}") from None


def _reader_label(args: ContextEvalArgs) -> str:
    """Who answers the questions, as results and `run.json` name it."""
    return args.reader or (args.model if args.model else "extractive")


def _run_info(args: ContextEvalArgs, reader_label: str) -> dict[str, Any]:
    """`run.json` without the run's status: what `--resume` compares (`prepare_run_dir`)."""
    return {
        "command": "context-eval",
        "arguments": {
            "policies": None if args.model else args.policies,
            "model": args.model,
            "base_url": scrub(args.base_url) if args.base_url else None,
            "levels": args.levels,
            "episodes": args.episodes,
            "seed": args.seed,
            "reader": reader_label,
            "max_blocks": args.max_blocks,
            "weights": args.weights.overrides(),
            "workers": args.workers,
            "backend": args.backend.kind,
        },
        "suite_version": CONTEXT_SUITE_VERSION,
        "versions": versions(),
    }


def _read_info(out: Path) -> dict[str, Any]:
    """The run.json just written ({} if it cannot be read back)."""
    try:
        info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _write_info(
    args: ContextEvalArgs,
    reader_label: str,
    results: list[dict[str, Any]],
    status: str,
    started: float,
    reason: str | None = None,
) -> None:
    """`run.json`, written when the run starts (status running) and however it ends (complete /
    interrupted / error, with what stopped it in `error`); whole, by rename, as `durable`
    writes."""
    info = {
        **_run_info(args, reader_label),
        "status": status,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_time_s": round(time.perf_counter() - started, 3),
        "episodes_run": len(results),
        "episodes_failed": sum(1 for r in results if r["status"] != "ok"),
    }
    if reason is not None:
        info["error"] = reason
    write_atomic(args.out / "run.json", json.dumps(info, indent=2) + "\n", in_place_fallback=True)


def _play_baseline(
    args: ContextEvalArgs, agent: str, reader: Reader, reader_label: str, level: str, seed: int
) -> dict[str, Any]:
    """One baseline episode; a reader that fails (endpoint down, model error) fails the
    episode, which is recorded, not the run."""
    try:
        record = play_policy(agent, level, seed, reader, max_blocks=args.max_blocks)
    except _reader_errors() as error:
        message = one_line(f"{type(error).__name__}: {error}", 500)
        return context_result(
            agent=agent, reader=reader_label, level=level, seed=seed, record=None, error=message
        )
    return context_result(
        agent=agent,
        reader=reader_label,
        level=level,
        seed=seed,
        record=record,
        weights=args.weights,
    )


def _reader_errors() -> tuple[type[BaseException], ...]:
    """What a failing reader raises: openai's errors only where a reader imported openai (the
    extractive reader never does, and importing it costs a second)."""
    errors: tuple[type[BaseException], ...] = (TimeoutError, RuntimeError, ProviderError)
    openai = sys.modules.get("openai")
    return errors + ((openai.OpenAIError,) if openai is not None else ())


def _play_model(
    args: ContextEvalArgs,
    endpoint: tuple[str | None, str, str],
    reader: Reader,
    reader_label: str,
    level: str,
    seed: int,
) -> dict[str, Any]:
    import openai

    from kv_context_env.llm.agent import CONTEXT_TOOLS, play_context_episode
    from model_client.openai_chat import openai_chat
    from model_client.reply import Transcript

    from ..common.hosted_client import openai_client

    base_url, key, model = endpoint
    agent = args.model or model
    with ContextEpisode(generate_conversation(seed, level), max_blocks=args.max_blocks) as episode:

        async def play() -> Transcript:
            # One client per event loop: a client must not outlive the loop it was used in.
            async with openai_client(key, base_url, args.timeout_s, args.max_retries) as client:

                async def read(context: str, question: str) -> str:
                    if isinstance(reader, ChatReader):
                        return await reader.answer(client, context, question)
                    return reader(episode, question)

                chat = openai_chat(client, model, {"max_tokens": args.max_tokens})
                return await play_context_episode(episode, chat, read)

        try:
            transcript = asyncio.run(play())
        except (openai.OpenAIError, TimeoutError, ProviderError, RuntimeError) as error:
            message = one_line(f"{type(error).__name__}: {error}", 500)
            return context_result(
                agent=agent, reader=reader_label, level=level, seed=seed, record=None, error=message
            )
        except ArchiveWriteError:
            raise  # the disk, not the episode: the run stops (and --resume finishes it)
        except Exception as error:  # a bug fails this episode, not the run (reason kept)
            message = one_line(f"unexpected {type(error).__name__}: {error}", 500)
            return context_result(
                agent=agent, reader=reader_label, level=level, seed=seed, record=None, error=message
            )
        result = context_result(
            agent=agent,
            reader=reader_label,
            level=level,
            seed=seed,
            record=episode.record(),
            weights=args.weights,
        )
    result["usage"] = transcript.usage.as_dict()
    folder = args.out / "transcripts"
    refuse_links(args.out, ("transcripts",))
    try:
        folder.mkdir(exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot create {folder}: {describe(error)}") from None
    name = f"{level}__{agent.replace('/', '_').replace(':', '_')}__{seed}.json"
    record = {"family": "context", "history_turns": 0, "tools": CONTEXT_TOOLS}
    record["messages"] = transcript.messages  # history_turns: play_context_episode's default
    write_atomic(folder / name, json.dumps(record, indent=1) + "\n")
    return result


def _api_key(base_url: str | None, api_key_var: str) -> str:
    """The key from the environment; a loopback endpoint needs none. Never written anywhere."""
    try:
        key = key_from_env(api_key_var, base_url)
    except BadKeyError as error:
        raise ContextEvalError(str(error)) from None
    if key is not None:
        return key
    raise ContextEvalError(f"environment variable {api_key_var} is not set")


@contextmanager
def _endpoint(model: str, base_url: str | None, out: Path) -> Iterator[tuple[str, str | None]]:
    """(name to send, base URL): a `local:` model is started here and stopped after."""
    from ..servers.local_model import LocalModelError, LocalModelServer, is_local

    if not is_local(model):
        yield model, base_url
        return
    try:
        server = LocalModelServer(model, log=out / "local-model.log")
        with console.status(f"loading {model}"):
            server.start()
    except LocalModelError as error:
        raise ContextEvalError(str(error)) from None
    try:
        yield server.alias, server.base_url
    finally:
        server.stop()


@contextmanager
def _reader(
    args: ContextEvalArgs, label: str, agent_name: str | None, agent_base: str | None
) -> Iterator[Reader]:
    if label == "extractive":
        yield extractive_reader
        return
    if label.startswith("hf:"):
        try:
            built = hf_reader(label.removeprefix("hf:"))
        except (ImportError, ValueError, OSError, RuntimeError) as error:
            raise ContextEvalError(f"--reader {label}: {error}") from None
        yield built
        return
    if args.model and label == args.model:
        key = _api_key(agent_base, args.api_key_var)
        yield _chat_reader(args, agent_base, key, agent_name or label)
        return
    with _endpoint(label, args.reader_base_url, args.out) as (name, base):
        yield _chat_reader(args, base, _api_key(base, args.api_key_var), name)


def _chat_reader(args: ContextEvalArgs, base_url: str | None, key: str, model: str) -> ChatReader:
    """A chat reader on the bounded client (`--timeout` per attempt, `--max-retries`)."""
    from ..common.hosted_client import openai_client

    return ChatReader(
        base_url,
        key,
        model,
        args.timeout_s,
        max_retries=args.max_retries,
        client_factory=lambda: openai_client(key, base_url, args.timeout_s, args.max_retries),
    )


@contextmanager
def _progress() -> Iterator[Progress]:
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        yield progress


METRICS: tuple[tuple[str, str, str, int], ...] = (
    ("ROUGE-L", "rouge_l", ".3f", 1),
    ("exact", "value_accuracy", ".2f", 2),
    ("facts", "facts_visible", ".2f", 3),
    ("OOM", "oom_events", ".1f", 4),
    ("blocks", "mean_active_blocks", ".1f", 6),
    ("recalls", "recalls", ".1f", 5),
)
"""The table's metric columns: (header, metric, format, priority: the higher, the sooner a
narrow terminal leaves it out)."""


def context_tables(
    results: list[dict[str, Any]], *, wide: bool = False, width: int | None = None
) -> list[Fitted]:
    """One table per level, best reward first, fitted to the terminal (`columns.fit_table`):
    the agent, its reader, n and the reward always, the metrics as the width allows."""
    tables = []
    for level in dict.fromkeys(r["level"] for r in results):
        rows = [r for r in results if r["level"] == level]
        budget = LEVELS[level].max_blocks
        readers = sorted({r["reader"] for r in rows})
        one_reader = len(readers) == 1
        columns = [Column("agent", justify="left")]
        if not one_reader:
            columns.append(Column("reader", justify="left"))
        columns.append(Column("n"))
        columns += [Column(header, drop=drop) for header, _, _, drop in METRICS]
        columns.append(Column("reward ±95%"))
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in rows:
            groups.setdefault((r["agent"], r["reader"]), []).append(r)
        ordered = sorted(
            groups.items(),
            key=lambda kv: -_mean([r["reward"] for r in kv[1] if r["status"] == "ok"]),
        )
        cells = []
        for (agent, reader), group in ordered:
            ok = [r for r in group if r["status"] == "ok"]
            failed = len(group) - len(ok)
            names = [agent] if one_reader else [agent, reader]
            if not ok:
                cells.append([*names, f"0 ({failed} failed)", *["-"] * (len(METRICS) + 1)])
                continue
            reward, reward_half = mean_ci([r["reward"] for r in ok])
            cells.append(
                [
                    *names,
                    f"{len(ok)}" + (f" ({failed} failed)" if failed else ""),
                    *(
                        format(_mean([r["metrics"][key] for r in ok]), spec)
                        for _, key, spec, _ in METRICS
                    ),
                    f"{reward:+.3f}±{reward_half:.2f}",
                ]
            )
        title = f"context · {level} · budget {budget} blocks" + (
            f" · reader {readers[0]}" if one_reader else ""
        )
        caption = "facts: asked facts still cached · OOM: engine evictions · blocks: mean active"
        tables.append(
            fit_table(columns, cells, title=title, caption=caption, wide=wide, width=width)
        )
    return tables


def print_context_tables(results: list[dict[str, Any]], *, wide: bool = False) -> None:
    """`context_tables`, printed; the columns left out are named once, after the last."""
    tables = context_tables(results, wide=wide)
    for i, fitted in enumerate(tables):
        fitted.print(note=i == len(tables) - 1)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("-inf")
