"""`kvarena`: the command-line app and its commands' registration. Each command's options and
body live with its family (`serving.commands`, `context.commands`, `prompt_cache.commands`,
`report.commands`, `servers.commands`), and `validate`'s family dispatch in `validation`.

kvarena eval                      # built-in policies x the serving suite, no API key
kvarena eval -p lru,lookahead -s hard -n 50 --seed 7 -o runs/hard
kvarena eval -p lru --trace mooncake-conversation --full   # or --trace path/to/trace.jsonl
kvarena context-eval              # the conversation-context family's baselines
kvarena validate | bench [--json] | report RUN... | cache-replay RUN...
kvarena policies | scenarios | traces | serve-policy NAME | serve-model local:NAME
"""

from __future__ import annotations

from typing import Annotated

import typer

from . import validation
from .common.edge import SafeGroup
from .common.help import HelpCommand
from .context import commands as context
from .prompt_cache import commands as prompt_cache
from .report import commands as report_commands
from .servers import commands as servers
from .serving import commands as serving

app = typer.Typer(
    help="kvcache-arena: an LLM agent manages the KV-cache of a simulated inference server.",
    no_args_is_help=True,
    add_completion=False,
    cls=SafeGroup,
    result_callback=report_commands.close_run,  # a run's ranking, after eval and context-eval
)


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an unexpected error.")
    ] = False,
) -> None:
    """kvcache-arena: an LLM agent manages the KV-cache of a simulated inference server."""


app.command("eval", cls=HelpCommand)(serving.eval_command)
app.command("cache-replay", cls=HelpCommand)(prompt_cache.cache_replay_command)
app.command("context-eval", cls=HelpCommand)(context.context_eval_command)
app.command("policies", cls=HelpCommand)(serving.policies_command)
app.command("scenarios", cls=HelpCommand)(serving.scenarios_command)
app.command("traces", cls=HelpCommand)(serving.traces_command)
app.command("serve-policy", cls=HelpCommand)(servers.serve_policy_command)
app.command("serve-model", cls=HelpCommand)(servers.serve_model_command)
app.command("report", cls=HelpCommand)(report_commands.report_command)
app.command("validate", cls=HelpCommand)(validation.validate_command)
app.command("bench", cls=HelpCommand)(serving.bench_command)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
