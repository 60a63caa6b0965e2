"""MkDocs hook: the CLI reference page (`cli.md`), generated from the `kvarena` Typer app.

Every command with its usage, then its arguments and options in the groups `kvarena COMMAND
--help` shows them in (each option's `rich_help_panel`: "What to run", "Model endpoint",
"Output and execution", ...), in the same words, so the page never drifts from the help. The
page opens with the commands, each a link to its section.
"""

from __future__ import annotations

import os
from typing import Any

from mkdocs.structure.files import File

INTRO = """\
Every command, argument and option of `kvarena`, generated from the app itself when the site is
built (the same text as `kvarena COMMAND --help`, in the same groups). Options shared by several
commands are described once, in the same words, on each of them.

"""


def _help_text(text: str | None) -> str:
    """A command's help as Markdown paragraphs (click's `\\b` no-rewrap markers dropped)."""
    lines = (text or "").strip().splitlines()
    return "\n".join(_markdown(line) for line in lines if line.strip() != "\b")


def _groups(command: Any, context: Any) -> dict[str, list[str]]:
    """Group title -> its entries ("`-o, --out DIR`: help  [default: ...]"), in help order."""
    groups: dict[str, list[str]] = {}
    for param in command.get_params(context):
        record = param.get_help_record(context)
        if record is None:
            if param.param_type_name != "argument":
                continue
            name = param.make_metavar(context) if _takes_context(param) else param.make_metavar()
            record = (name, getattr(param, "help", None) or "")
        panel = getattr(param, "rich_help_panel", None)
        title = panel or ("Arguments" if param.param_type_name == "argument" else "Options")
        names, text = record
        text = _markdown(" ".join(text.split()))
        entry = f"* `{names}`" + (f": {text}" if text else "")
        groups.setdefault(title, []).append(entry)
    return groups


def _markdown(text: str) -> str:
    """Help text for Markdown: `<` and `>` outside code spans escaped (`runs/<command>` would
    otherwise be read as an HTML tag and vanish)."""
    spans = text.split("`")
    for i in range(0, len(spans), 2):  # the even pieces lie outside backticks
        spans[i] = spans[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(spans)


def _takes_context(param: Any) -> bool:
    import inspect

    return "ctx" in inspect.signature(param.make_metavar).parameters


def cli_markdown() -> str:
    """The reference text of the whole `kvarena` app."""
    os.environ.setdefault("COLUMNS", "100")
    import typer

    from evals.cli import app

    group = typer.main.get_command(app)
    root = typer.Context(group, info_name="kvarena")
    names = group.list_commands(root)
    lines = ["# CLI reference", "", INTRO.rstrip(), "", _help_text(group.help), ""]
    for name in names:
        short = _markdown(group.get_command(root, name).get_short_help_str(80))
        lines.append(f"* [`kvarena {name}`](#{name}): {short}")
    lines.append("")
    for title, entries in _groups(group, root).items():
        lines += [f"**{title}** (before the command)", "", *entries, ""]
    for name in names:
        command = group.get_command(root, name)
        context = typer.Context(command, info_name=name, parent=root)
        usage = " ".join(command.collect_usage_pieces(context))
        lines += [
            f"## `kvarena {name}` {{ #{name} }}",
            "",
            _help_text(command.help),
            "",
            "```console",
            f"$ kvarena {name} {usage}",
            "```",
            "",
        ]
        for title, entries in _groups(command, context).items():
            lines += [f"**{title}**", "", *entries, ""]
    return "\n".join(lines)


def on_files(files, config):
    files.append(File.generated(config, "cli.md", content=cli_markdown()))
    return files
