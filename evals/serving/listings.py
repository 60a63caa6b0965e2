"""`kvarena policies`, `scenarios` and `traces`: what a user can name in `eval`, as a table of
one line per item (the columns a narrow terminal cannot hold are left out and named,
`common.columns`), one item in full (`kvarena policies NAME`), or JSON (`--json`) that a script
reads. Every figure comes from the registry, the scenario or the packaged trace itself.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

import typer
from rich.table import Table

from ..common.columns import Column, fit_table
from ..common.console import out_console
from ..common.edge import InputError


def _pick(kind: str, name: str | None, names: Iterable[str], plural: str) -> list[str]:
    """Every name, or just `name` (InputError with a did-you-mean for an unknown one)."""
    from kv_cache_env.suggest import unknown_name

    every = list(names)
    if name is None:
        return every
    if name not in every:
        raise InputError(unknown_name(kind, name, every, plural))
    return [name]


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2))


def _print_long(title: str, fields: Mapping[str, object]) -> None:
    """One item in full: a name per line and its value beside it (wrapping between words,
    under itself)."""
    out_console.print(title, highlight=False, markup=False)
    grid = Table.grid(padding=(0, 2), pad_edge=True)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in fields.items():
        grid.add_row(key, _plain(value))
    out_console.print(grid, highlight=False)


def _plain(value: Any) -> str:
    """A parameter as a user reads it: enums by value, pairs as `name value`, numbers short."""
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return " ".join(
            f"{f.name}={_plain(getattr(value, f.name))}" for f in dataclasses.fields(value)
        )
    if isinstance(value, tuple | list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return "; ".join(f"{_plain(k)}: {_plain(v)}" for k, v in value)
        return "(" + ", ".join(_plain(v) for v in value) + ")"
    return str(value)


def _print_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str | None, long_form: str
) -> None:
    fitted = fit_table(columns, rows, title=title)
    fitted.print(note=False)
    if fitted.left_out:
        out_console.print(
            f"(left out at {fitted.width} columns: {', '.join(fitted.left_out)}; "
            f"{long_form} shows one in full, --json all)",
            highlight=False,
            markup=False,
        )


def _first_sentence(text: str) -> str:
    """A docstring's first sentence, on one line."""
    words = " ".join(text.split())
    end = words.find(". ")
    return words if end < 0 else words[: end + 1]


def list_policies(name: str | None, as_json: bool) -> None:
    from kv_cache_env import policies

    names = _pick("policy", name, policies.available(), "policies")
    items = []
    for each in names:
        doc = " ".join((type(policies.create(each)).__doc__ or "").split())
        items.append(
            {
                "name": each,
                "in_default_eval": each in policies.BUILTIN,
                "plans": policies.optimises(each),
                "summary": _first_sentence(doc),
                "description": doc,
            }
        )
    if as_json:
        _print_json(items if name is None else items[0])
    elif name is not None:
        item = items[0]
        _print_long(
            item["name"],
            {
                "in the default eval": "yes" if item["in_default_eval"] else "no",
                "searches by the reward": "yes" if item["plans"] else "no",
                "description": item["description"],
            },
        )
    else:
        rows = [[i["name"], "yes" if i["in_default_eval"] else "", i["summary"]] for i in items]
        columns = [
            Column("policy", justify="left"),
            Column("in eval", drop=1),
            Column("what it does", drop=2, justify="left", cut=True),
        ]
        _print_table(columns, rows, None, "kvarena policies NAME")


def _scenario_row(sc: Any) -> dict[str, str]:
    """The table's cells of one scenario, by header."""
    from .labels import label_of

    return {
        "scenario": sc.name,
        "label": label_of(sc.name)[0] or "-",
        "budget": f"{sc.budget_fraction[0]:.2f}-{sc.budget_fraction[1]:.2f}",
        "arrivals/s": f"{sc.arrival_rate[0]:.1f}-{sc.arrival_rate[1]:.1f}",
        "bursts": f"{sc.burst_probability:.0%} x{sc.burst_multiplier:g}",
        "kv": str(sc.base_quantization),
        "cpu": f"{sc.cpu_capacity_fraction:g}x",
        "link/s": f"{sc.link_fraction_per_s:g}x" if sc.link_fraction_per_s else "-",
        "prefill/s": str(sc.prefill_tokens_per_s),
        "fallback": sc.fallback,
        "chats": ",".join(sc.chat_types) or "-",
        "agents' tools": " ".join(f"{k} {w:g}" for k, w in sc.tool_mix),
    }


SCENARIO_COLUMNS = (
    Column("scenario", justify="left"),
    Column("label", drop=1, justify="left"),
    Column("budget", drop=2),
    Column("arrivals/s", drop=3),
    Column("bursts", drop=4),
    Column("kv", drop=5),
    Column("cpu", drop=6),
    Column("link/s", drop=7),
    Column("prefill/s", drop=8),
    Column("fallback", drop=9, justify="left"),
    Column("chats", drop=10, justify="left"),
    Column("agents' tools", drop=11, justify="left"),
)
"""The scenarios table's columns, the most telling first (budget: of the peak demand)."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def list_scenarios(name: str | None, as_json: bool) -> None:
    from kv_cache_env.sim import SCENARIOS, SUITE, SUITE_VERSION

    from .labels import label_of

    names = _pick("scenario", name, SCENARIOS, "scenarios")
    chosen = [SCENARIOS[n] for n in names]
    if as_json:
        items = [
            {
                "in_suite": sc.name in SUITE,
                "label": label_of(sc.name)[0],
                "label_rule": label_of(sc.name)[1],
                **{f.name: _jsonable(getattr(sc, f.name)) for f in dataclasses.fields(sc)},
            }
            for sc in chosen
        ]
        _print_json(
            {"suite_version": SUITE_VERSION, "scenarios": items} if name is None else items[0]
        )
    elif name is not None:
        sc = chosen[0]
        label, rule = label_of(sc.name)
        fields = {"in the suite": "yes" if sc.name in SUITE else "no"}
        fields |= {"label": f"{label} ({rule})" if rule else label or "-"}
        fields |= {f.name: getattr(sc, f.name) for f in dataclasses.fields(sc) if f.name != "name"}
        _print_long(sc.name, fields)
    else:
        rows = [list(_scenario_row(sc).values()) for sc in chosen]
        title = f"serving suite v{SUITE_VERSION}: {', '.join(SUITE)} (budget: of peak demand)"
        _print_table(SCENARIO_COLUMNS, rows, title, "kvarena scenarios NAME")


def list_traces(name: str | None, as_json: bool) -> None:
    from kv_cache_env.traces.trace_data import BUILTIN_TRACES

    from .trace_list import builtin_trace_rows, builtin_traces

    names = _pick("trace", name, BUILTIN_TRACES, "traces")
    if as_json:
        items = builtin_traces(names)
        _print_json(items if name is None else items[0])
        return
    headers = ("name", "requests", "duration", "prefix blocks", "source", "licence")
    rows = builtin_trace_rows(names)
    if name is not None:
        _print_long(rows[0][0], dict(zip(headers[1:], rows[0][1:], strict=True)))
        return
    columns = [
        Column("name", justify="left"),
        Column("requests"),
        Column("duration", drop=1),
        Column("prefix blocks", drop=2),
        Column("licence", drop=3, justify="left", wrap=True),
        Column("source", drop=4, justify="left"),
    ]
    order = [0, 1, 2, 3, 5, 4]
    table = [[row[i] for i in order] for row in rows]
    _print_table(columns, table, None, "kvarena traces NAME")
