"""`--help` as plain text that fits the terminal: every command's help screen is written here
(the app's group and each command use `HelpGroup` / `HelpCommand`), not by Typer's boxed panels,
which at 80 columns squeeze an option's help into a column of 17 characters and cut choices.

The layout: the usage line, the command's text (paragraphs rewrapped), then one section per
help panel (`rich_help_panel`; "Options" for the rest). An option's names and placeholder stand
in a left column and its help beside them; where the names are wider than that column (or the
terminal is too narrow for two columns), the help goes on the lines under them, indented. Lines
break only between words, and no line is wider than the terminal (at most `MAX_WIDTH`: prose
wider than that is hard to read).

One placeholder style: an option's value is an upper-case word (its `metavar`, else `N` for a
whole number, `NUMBER`, `PATH` or `TEXT`), a choice lists its values as `{a|b}`; ranges are not
shown (the edge checks them and says the range in its error).
"""

from __future__ import annotations

import inspect
import shutil
import textwrap
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any

import typer.core

MAX_WIDTH = 100
"""Help is wrapped at the terminal's width, at most this."""
MIN_WIDTH = 40
"""Narrower terminals get help wrapped as at this width."""
OPTION_COLUMN = 30
"""The widest left column (option names and placeholder) of a two-column section."""
TWO_COLUMNS = 60
"""Below this width every option's help goes under its names."""
KEEP = "\xa0"
"""A space that `wrap` never breaks at (turned into a space when printed)."""
INDENT = 2
HELP_INDENT = 8
"""Indent of help under its option."""
PLACEHOLDERS = {
    "integer": "N",
    "int": "N",
    "integer range": "N",
    "int range": "N",
    "float": "NUMBER",
    "float range": "NUMBER",
    "path": "PATH",
    "text": "TEXT",
    "str": "TEXT",
}
"""A value's placeholder by its type's name, where the option names none (`metavar`)."""


def help_width() -> int:
    """The width help is wrapped at: the terminal's (`COLUMNS` when set), within bounds."""
    return max(MIN_WIDTH, min(MAX_WIDTH, shutil.get_terminal_size((80, 24)).columns))


def wrap(text: str, width: int, indent: int = 0, first: str | None = None) -> list[str]:
    """`text` as lines of at most `width` characters, broken between words only (a word
    longer than a line stands alone on its line)."""
    prefix = " " * indent
    lines = textwrap.wrap(
        text,
        width=max(width, indent + 10),
        initial_indent=prefix if first is None else first,
        subsequent_indent=prefix,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace(KEEP, " ") for line in lines] or [prefix.rstrip()]


def paragraphs(text: str | None) -> list[str]:
    """A docstring's paragraphs, each on one line (click's `\\f` cuts what follows)."""
    body = inspect.cleandoc(text or "").partition("\f")[0]
    return [" ".join(p.split()) for p in body.split("\n\n") if p.strip()]


def placeholder(param: Any) -> str:
    """What stands for the option's value in help: "" for a flag."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    if param.metavar:
        return str(param.metavar)
    choices = getattr(param.type, "choices", None)
    if choices:
        values = [c.value if isinstance(c, Enum) else str(c) for c in choices]
        return "{" + "|".join(values) + "}"
    if param.param_type_name == "argument":
        return (param.name or "").upper() + ("..." if param.nargs == -1 else "")
    return PLACEHOLDERS.get(param.type.name, param.type.name.upper())


def option_names(param: Any) -> str:
    """`-p, --policy NAMES`, `--hints / --no-hints`, or an argument's placeholder."""
    if param.param_type_name == "argument":
        return placeholder(param)
    shorts = [o for o in param.opts if not o.startswith("--")]
    longs = [o for o in param.opts if o.startswith("--")]
    names = ", ".join([*shorts, *longs])
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    value = placeholder(param)
    return f"{names} {value}" if value else names


def default_text(param: Any) -> str:
    """` [default: X]` where the option has a default worth saying, else ""."""
    if param.param_type_name == "argument" or param.show_default is False:
        return ""
    default = param.default
    if isinstance(param.show_default, str):
        shown = param.show_default
    elif default is None or (isinstance(default, (list, tuple)) and not default):
        return ""
    elif getattr(param, "is_flag", False):
        if not param.secondary_opts:
            return ""
        shown = param.opts[-1] if default else param.secondary_opts[-1]
    elif isinstance(default, Enum):
        shown = str(default.value)
    elif isinstance(default, float):
        shown = f"{default:g}"
    else:
        shown = str(default)
    return f" [default:{KEEP}{shown}]"


def _section(title: str, rows: Sequence[tuple[str, str]], width: int) -> list[str]:
    """A titled list of (names, help) rows: two columns where they fit, else help underneath."""
    lines = [f"{title}:"]
    if not rows:
        return lines
    column = min(OPTION_COLUMN, max(len(names) for names, _ in rows))
    two = width >= TWO_COLUMNS
    for names, text in rows:
        if two and len(names) <= column:
            start = INDENT + column + 2
            first = " " * INDENT + names.ljust(column + 2)
            lines += wrap(text, width, start, first) if text else [first.rstrip()]
        else:
            lines += wrap(names, width, INDENT + 4, " " * INDENT)
            if text:
                lines += wrap(text, width, HELP_INDENT)
    return lines


def _param_rows(params: Iterable[Any], ctx: Any) -> dict[str, list[tuple[str, str]]]:
    """Help panel -> (names, help) rows of its visible parameters, in declaration order."""
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            panel = getattr(param, "rich_help_panel", None) or "Arguments"
        else:
            panel = getattr(param, "rich_help_panel", None) or "Options"
        text = " ".join((getattr(param, "help", None) or "").split()) + default_text(param)
        panels.setdefault(panel, []).append((option_names(param), text.strip()))
    return panels


def _usage_pieces(command: Any, ctx: Any) -> list[str]:
    """`[OPTIONS]`, then each argument's placeholder (in brackets where optional)."""
    params = command.get_params(ctx)
    pieces = ["[OPTIONS]"] if any(p.param_type_name == "option" for p in params) else []
    for param in params:
        if param.param_type_name == "argument":
            name = placeholder(param)
            pieces.append(name if param.required else f"[{name}]")
    if getattr(command, "commands", None):
        pieces += ["COMMAND", "[ARGS]..."]
    return pieces


def render_help(command: Any, ctx: Any, width: int | None = None) -> str:
    """The whole help screen of `command` (a command or the group) as text."""
    width = width or help_width()
    usage = " ".join([ctx.command_path, *_usage_pieces(command, ctx)])
    lines = wrap(usage, width, 4, "Usage: ")
    for paragraph in paragraphs(command.help):
        lines += ["", *wrap(paragraph, width)]
    panels = _param_rows(command.get_params(ctx), ctx)
    for title in sorted(panels, key=lambda t: (t != "Arguments", t == "Options")):
        lines += ["", *_section(title, panels[title], width)]
    commands = getattr(command, "commands", None)
    if commands:
        rows = [
            (name, (paragraphs(sub.help) or [""])[0])
            for name in command.list_commands(ctx)
            if not (sub := commands[name]).hidden
        ]
        lines += ["", *_section("Commands", rows, width)]
    return "\n".join(lines) + "\n"


class HelpCommand(typer.core.TyperCommand):
    """A command whose `--help` is `render_help`'s."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(render_help(self, ctx))


class HelpGroup(typer.core.TyperGroup):
    """The app's group: its `--help` is `render_help`'s."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(render_help(self, ctx))
