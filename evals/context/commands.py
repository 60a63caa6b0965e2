"""`kvarena context-eval`: option parsing; the run itself is `eval_run`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..common.console import console, status_line
from ..common.edge import (
    InputError,
    check_options,
    check_path,
    check_seeds,
    names_option,
    parse_weights,
    repeated_names,
)
from ..common.options import (
    CPUS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    MODEL_PANEL,
    RUN_PANEL,
    BackendKind,
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

if TYPE_CHECKING:
    from ..common.backends import Backend

Policy = Annotated[
    list[str] | None,
    typer.Option(
        "--policy",
        "-p",
        metavar="NAMES",
        help="Context baselines, comma-separated (default: all).",
        rich_help_panel=RUN_PANEL,
    ),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="MODEL",
        help="An LLM agent instead (OpenAI-compatible, or local:NAME).",
        rich_help_panel=RUN_PANEL,
    ),
]
BaseUrl = Annotated[
    str | None,
    typer.Option(metavar="URL", help="The agent model's endpoint.", rich_help_panel=MODEL_PANEL),
]
ApiKeyVar = Annotated[
    str,
    typer.Option(
        metavar="VAR",
        help="Environment variable holding the API key.",
        rich_help_panel=MODEL_PANEL,
    ),
]
Level = Annotated[
    list[str] | None,
    typer.Option(
        "--level",
        "-l",
        metavar="NAMES",
        help="Levels, comma-separated (default: easy,medium,hard).",
        rich_help_panel=RUN_PANEL,
    ),
]
Seed = Annotated[
    int, typer.Option(metavar="SEED", help="Episode i uses seed + i.", rich_help_panel=RUN_PANEL)
]
Reader = Annotated[
    str | None,
    typer.Option(
        metavar="READER",
        rich_help_panel=RUN_PANEL,
        help="Who answers the questions: extractive (default without --model), hf:PATH "
        "(a local Hugging Face model through the block mask), local:NAME, or a model "
        "name on --reader-base-url. Default with --model: that model.",
    ),
]
ReaderBaseUrl = Annotated[
    str | None,
    typer.Option(
        metavar="URL", help="Endpoint of a chat-model reader.", rich_help_panel=MODEL_PANEL
    ),
]
MaxBlocks = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Cache budget in blocks (default: the level's).",
        rich_help_panel=RUN_PANEL,
    ),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Cap on each agent reply (default 512; 192 for local: models).",
        rich_help_panel=MODEL_PANEL,
    ),
]
Weights = Annotated[
    str | None,
    typer.Option(
        metavar="JSON",
        help="Context rubric weight overrides as JSON, e.g. '{\"oom_penalty\": 1}'.",
        rich_help_panel=RUN_PANEL,
    ),
]


def context_eval_command(
    policy: Policy = None,
    model: Model = None,
    base_url: BaseUrl = None,
    api_key_var: ApiKeyVar = "OPENAI_API_KEY",
    level: Level = None,
    episodes: Episodes = 5,
    seed: Seed = 0,
    reader: Reader = None,
    reader_base_url: ReaderBaseUrl = None,
    max_blocks: MaxBlocks = None,
    max_tokens: MaxTokens = None,
    timeout: Timeout = DEFAULT_TIMEOUT_S,
    max_retries: MaxRetries = DEFAULT_MAX_RETRIES,
    out: Out = None,
    resume: Resume = False,
    force: Force = False,
    workers: Workers = CPUS,
    backend: BackendKind = "local",
    address: RayAddress = None,
    weights: Weights = None,
    wide: Wide = False,
) -> RunDone:
    """The conversation-context family: which blocks of one long chat stay cached. Writes
    results.jsonl and run.json; prints ROUGE-L, OOM events and blocks per level."""
    status_line("context-eval: loading the context family")
    from kv_context_env.policies.baselines import CONTEXT_POLICIES
    from rubrics.context import ContextWeights

    from ..servers.local_model import DEFAULT_MAX_TOKENS, is_local
    from .eval_run import ContextEvalArgs, run_context_command

    check_options(
        {
            "--episodes": episodes,
            "--seed": seed,
            "--max-blocks": max_blocks,
            "--max-tokens": max_tokens,
            "--timeout": timeout,
            "--max-retries": max_retries,
            "--workers": workers,
        }
    )
    check_seeds(seed, episodes)
    if out is not None:
        check_path(out, "--out")
    for option, value in (("--reader", reader), ("--model", model)):
        if value is not None and value.startswith(("hf:", "local:")):
            check_path(value.split(":", 1)[1], option)
    parsed = parse_weights(weights, ContextWeights)
    _check_pairs(bool(model and policy), resume, force, out)
    policies, levels = names_option(policy, "--policy"), names_option(level, "--level")
    for option, values in (("--policy", policy), ("--level", level)):
        if repeated := repeated_names(values):
            console.print(f"note: {option} names {', '.join(repeated)} more than once; run once")
    args = ContextEvalArgs(
        policies=policies or list(CONTEXT_POLICIES),
        model=model,
        base_url=base_url,
        api_key_var=api_key_var,
        levels=levels or ["easy", "medium", "hard"],
        episodes=episodes,
        seed=seed,
        reader=reader,
        reader_base_url=reader_base_url,
        max_blocks=max_blocks,
        max_tokens=max_tokens or (DEFAULT_MAX_TOKENS if model and is_local(model) else 512),
        out=out or Path("runs") / datetime.now(UTC).strftime("context-%Y%m%d-%H%M%S"),
        weights=parsed,
        timeout_s=timeout,
        max_retries=max_retries,
        resume=resume,
        force=force,
        wide=wide,
        workers=workers,
        backend=_backend(backend, address, bool(model) or reader not in (None, "extractive")),
    )
    return run_context_command(args)


def _check_pairs(model_and_policy: bool, resume: bool, force: bool, out: Path | None) -> None:
    """InputError for options that do not go together."""
    if model_and_policy:
        raise InputError("give --policy or --model, not both")
    if resume and force:
        raise InputError("give --resume or --force, not both")
    if resume and out is None:
        raise InputError("--resume needs --out (the run directory to finish)")


def _backend(kind: str, address: str | None, model: bool) -> Backend:
    """`--backend` and `--address` (`backends.backend_option`); `model`: a model plays or
    reads, in this process."""
    from ..common.backends import backend_option

    return backend_option(kind, address, model=model)
