"""The episode viewer: one static page per serving episode of a report (`episodes/*.html`),
linked from the leaderboard's episode list (`episode_list_html`).

A page shows what the results file and the run hold of one episode, nothing re-run:

- its rubric components, each with its weight and weighted contribution (their sum is the
  reward), and its metrics;
- the memory timeline from the record: usage per turn over the report's bands, the turns under
  pressure (`pressure_turns`) shaded, and lanes for failures, the engine's
  forced preemptions, the agent's discards and its calls;
- turn by turn: for a model, its transcript (`transcripts/` beside the results, named by
  `run_dir.transcript_name`): the observation it was shown, its reply, each tool call with its
  arguments and the result the environment answered; for a policy, its action log as the record
  keeps it: calls per turn, the sequences it discarded (with the blocks freed), what the engine
  preempted and what failed. A record keeps the agent's discards one by one but its compress and
  swap calls only as totals (the metrics), so a policy's turn shows those as counts.

Everything a page shows from a file is escaped (`html.escape`; names through `display`): a
name, a reply or an observation may hold markup. Sizes are bounded: a page shows at most
`MAX_TURNS` turns and `MAX_TEXT` characters of one message (saying what it left out), the
timeline at most `svg.TIMELINE_POINTS` points, and a report writes at most `MAX_PAGES` pages
(the list says how many it left without one).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kv_cache_env.bounded_read import TRANSCRIPT_LIMITS, FileReadError, read_json
from kv_cache_env.sim import EpisodeRecord
from rubrics import COMPONENTS
from rubrics.metrics import PRESSURE_USAGE

from ..common.durable import OutputError, describe
from ..common.result_check import family_of
from ..common.run_dir import transcript_name
from ..common.secrets import scrub
from .display import display_name, html_text
from .svg import timeline

EPISODES_DIR = "episodes"
"""The pages' folder inside the report directory."""
MAX_PAGES = 5_000
"""Episode pages one report writes, in the leaderboard's row order (a 2,000-agent board has
100,000 episodes: their pages would take gigabytes)."""
MAX_TURNS = 300
"""Turns shown on one page (a full trace replay has thousands; the timeline shows them all)."""
MAX_TEXT = 8_000
"""Characters of one observation, reply or tool result shown."""
NAME_CHARS = 200
"""Longest name shown on a page."""
USAGE_BANDS = ((0.0, 0.8, "#e5f5ee"), (0.8, 0.95, "#fdf4d6"), (0.95, 1.0, "#fbe3d3"))
"""The usage bands of the report's memory figures (< 0.8 best, 0.8-0.95, 0.95-1)."""


@dataclass(frozen=True)
class Episode:
    """One checked result and the run directory it was read from (its transcripts; None when
    not known)."""

    result: Mapping[str, Any]
    run: Path | None = None


def episode_id(result: Mapping[str, Any]) -> tuple[str, str, int]:
    """(scenario, agent, seed): what names a serving episode within one report."""
    return (str(result["scenario"]), str(result["agent"]), int(result["seed"]))


def page_name(result: Mapping[str, Any]) -> str:
    """The page's file name: a readable slug (ASCII letters and digits) and a hash of the
    exact names, so two agents whose names differ only in other characters stay apart."""
    scenario, agent, seed = episode_id(result)
    digest = hashlib.sha1(json.dumps([scenario, agent, seed]).encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{agent}-{scenario}-{seed}").strip("-")[:60]
    return f"{slug or 'episode'}-{digest}.html"


def serving_episodes(episodes: Sequence[Episode]) -> list[Episode]:
    """The serving episodes (the viewer's), in the order given."""
    return [e for e in episodes if family_of(e.result) == "serving"]


def write_pages(
    episodes: Sequence[Episode], order: Sequence[tuple[str, str]], out: Path
) -> dict[tuple[str, str, int], str]:
    """Write a page per serving episode into `out/episodes/` (at most `MAX_PAGES`, taken in
    `order`: the leaderboard's (scenario, agent) rows, seeds ascending), replacing the folder
    whole; returns episode id -> the page's path relative to `out`."""
    chosen = _ordered(serving_episodes(episodes), order)[:MAX_PAGES]
    target = out / EPISODES_DIR
    try:
        return _write_pages(chosen, target, out)
    except OSError as error:  # a full disk, a read-only folder: one clean error, nothing partial
        raise OutputError(f"cannot write {target}: {describe(error)}") from None


def _write_pages(
    chosen: Sequence[Episode], target: Path, out: Path
) -> dict[tuple[str, str, int], str]:
    staging = Path(tempfile.mkdtemp(prefix=f".{EPISODES_DIR}.", dir=out))
    links: dict[tuple[str, str, int], str] = {}
    try:
        for episode in chosen:
            name = page_name(episode.result)
            (staging / name).write_text(scrub(render_page(episode)), encoding="utf-8")
            links[episode_id(episode.result)] = f"{EPISODES_DIR}/{name}"
        os.chmod(staging, 0o755)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{EPISODES_DIR}.old.", dir=out))
            os.replace(target, old / EPISODES_DIR)
        os.replace(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
    return links


def _ordered(episodes: Sequence[Episode], order: Sequence[tuple[str, str]]) -> list[Episode]:
    rank = {row: i for i, row in enumerate(order)}
    return sorted(
        episodes,
        key=lambda e: (
            rank.get((str(e.result["scenario"]), str(e.result["agent"])), len(rank)),
            int(e.result["seed"]),
        ),
    )


def episode_list_html(
    episodes: Sequence[Episode],
    order: Sequence[tuple[str, str]],
    links: Mapping[tuple[str, str, int], str],
) -> str:
    """The leaderboard's episode list: one line per (scenario, agent) row, each seed a link to
    its page (a failed one marked), and how many have no page (past `MAX_PAGES`)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for episode in _ordered(serving_episodes(episodes), order):
        result = episode.result
        groups.setdefault((str(result["scenario"]), str(result["agent"])), []).append(result)
    lines = []
    missing = 0
    for (scenario, agent), results in groups.items():
        seeds = []
        for result in results:
            href = links.get(episode_id(result))
            failed = result["status"] != "ok"
            css = " class='failed'" if failed else ""
            label = f"{result['seed']}{' (failed)' if failed else ''}"
            if href is None:
                missing += 1
                seeds.append(f"<span{css}>{html.escape(label)}</span>")
            else:
                seeds.append(f"<a{css} href='{html.escape(href, quote=True)}'>{label}</a>")
        lines.append(
            f"<li><b>{html_text(agent)}</b> on {html_text(scenario)}: seed {' '.join(seeds)}</li>"
        )
    note = (
        f"<p class='note'>{missing:,} episode(s) have no page: a report writes at most "
        f"{MAX_PAGES:,}.</p>"
        if missing
        else ""
    )
    return (
        "<p class='note'>One page per episode: its turns (a model's observations, calls and "
        "results; a policy's actions), the memory timeline and the rubric's components.</p>"
        f"{note}<ul class='episodes'>{''.join(lines)}</ul>"
    )


# --- one page ---------------------------------------------------------------------------------
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1200px;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.5rem; margin-bottom: 0.2rem; overflow-wrap: anywhere; }
h2 { margin-top: 1.6rem; }
p.note { color: #444; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; }
figure { margin: 1rem 0; } figure svg { width: 100%; height: auto; }
details.turn { border: 1px solid #ddd; border-radius: 4px; margin: 0.4rem 0;
               padding: 0.2rem 0.6rem; }
details.turn.pressure { border-left: 4px solid #D55E00; }
details.turn summary { cursor: pointer; font-size: 14px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f7f7f7; padding: 0.5rem;
      font-size: 12px; max-height: 28rem; overflow-y: auto; margin: 0.3rem 0; }
.call { font-family: ui-monospace, monospace; font-size: 12px; color: #0b4f8a; }
.result { font-family: ui-monospace, monospace; font-size: 12px; color: #1c6b3a; }
.error { color: #a00; }
div.top { display: grid; grid-template-columns: repeat(auto-fit, minmax(24rem, 1fr));
          gap: 0 2rem; align-items: start; }
div.top h2 { margin-top: 0.4rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.1rem 1rem;
           font-size: 14px; }
dl.facts dt { color: #555; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
"""


def _escape(text: object, limit: int = MAX_TEXT) -> str:
    """`text` escaped for HTML, cut to `limit` characters (saying how many it left out)."""
    shown = str(text)
    cut = len(shown) - limit
    if cut > 0:
        shown = shown[:limit]
    return html.escape(shown) + (f"\n[… {cut:,} more characters]" if cut > 0 else "")


def pressure_turns(record: EpisodeRecord) -> list[bool]:
    """Per turn, whether it counts as a pressure step of `rubrics.metrics.pressure_steps`
    (usage >= `PRESSURE_USAGE`, a forced preemption or a failure): their sum is that metric
    (tested). Kept here, not there: the rubric's code is part of the shipped reference table's
    digest."""
    return [
        usage >= PRESSURE_USAGE or bool(forced) or bool(failed)
        for usage, forced, failed in zip(
            record.usage, record.forced_preemptions, record.failures, strict=True
        )
    ]


def _record(result: Mapping[str, Any]) -> tuple[EpisodeRecord | None, str]:
    """(the episode record, why there is none)."""
    data = result.get("record")
    if not isinstance(data, dict):
        return None, "no episode record (a failed rollout keeps none)"
    try:
        return EpisodeRecord.from_dict(data), ""
    except (TypeError, ValueError, KeyError) as error:
        return None, f"the episode record cannot be read: {error}"


def read_transcript(episode: Episode) -> tuple[list[dict[str, Any]] | None, str]:
    """(the episode's transcript messages, or None with why): from `transcripts/` in its run
    directory, read within `TRANSCRIPT_LIMITS`, and only where the transcript names the same
    model, scenario and seed (sanitized file names can collide)."""
    if episode.run is None:
        return None, ""
    scenario, agent, seed = episode_id(episode.result)
    path = episode.run / "transcripts" / transcript_name(scenario, agent, seed)
    try:
        if not path.is_file():
            return None, ""
    except OSError:  # a name too long for a file: no run could have written its transcript
        return None, ""
    try:
        data = read_json(path, TRANSCRIPT_LIMITS)
    except FileReadError as error:
        return None, f"transcript unreadable: {error}"
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return None, "transcript unreadable: no 'messages' list"
    same = (data.get("model"), data.get("scenario"), data.get("seed")) == (agent, scenario, seed)
    if not same:
        return None, "the transcript file beside it is another episode's (its name collides)"
    return [m for m in data["messages"] if isinstance(m, dict)], ""


@dataclass
class _Turn:
    observation: str
    replies: list[str]
    """Rendered HTML fragments: the agent's text, its calls and the environment's results."""


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        parts = [b.get("text") if isinstance(b, dict) else None for b in content]
        if all(isinstance(p, str) for p in parts):
            return "\n".join(str(p) for p in parts)
    return json.dumps(content, ensure_ascii=False)


def transcript_turns(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[_Turn]]:
    """(the system prompt, the turns): each user message opens a turn (its observation); the
    assistant's replies and calls and the tool results that follow belong to it, each result
    shown under the call it answers (by `tool_call_id`)."""
    system = ""
    turns: list[_Turn] = []
    calls: dict[str, int] = {}  # the open turn's call ids -> their place in its replies
    for message in messages:
        role = message.get("role")
        text = _content(message)
        if role == "system" and not turns:
            system = text
        elif role == "user":
            turns.append(_Turn(text, []))
            calls = {}
        elif not turns:
            continue
        elif role == "assistant":
            if text.strip():
                turns[-1].replies.append(f"<pre class='reply'>{_escape(text)}</pre>")
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    continue
                calls[str(call.get("id"))] = len(turns[-1].replies)
                turns[-1].replies.append(
                    f"<div class='call'>→ {_escape(function.get('name'), 200)}"
                    f"({_escape(function.get('arguments'), 2_000)})</div>"
                )
        elif role == "tool":
            answer = f"<div class='result'>← {_escape(text, 2_000)}</div>"
            place = calls.pop(str(message.get("tool_call_id")), None)
            if place is None:
                turns[-1].replies.append(answer)
            else:
                turns[-1].replies[place] += answer
    return system, turns


def _facts(result: Mapping[str, Any]) -> str:
    scenario, agent, seed = episode_id(result)
    rows = [
        ("agent", html_text(agent, NAME_CHARS)),
        ("scenario", html_text(scenario, NAME_CHARS)),
        ("seed", str(seed)),
        ("suite version", html_text(result["suite_version"], 40)),
        ("status", html_text(result["status"], 40)),
    ]
    if result.get("reward") is not None:
        rows.append(("reward", f"{float(result['reward']):+.4f}"))
    if result.get("error"):
        rows.append(("error", f"<span class='error'>{_escape(result['error'], 2_000)}</span>"))
    usage = result.get("usage")
    if isinstance(usage, dict):
        tokens = ", ".join(f"{html_text(k, 40)} {html_text(v, 40)}" for k, v in usage.items())
        rows.append(("model tokens", tokens))
    return (
        "<dl class='facts'>"
        + "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows)
        + "</dl>"
    )


def _components(result: Mapping[str, Any]) -> str:
    components = result.get("components")
    weights = result.get("weights") or {}
    if not isinstance(components, dict):
        return "<p>No components: the rollout failed.</p>"
    rows = []
    total = 0.0
    for name in COMPONENTS:
        value = components.get(name)
        weight = weights.get(name)
        if not isinstance(value, int | float) or not isinstance(weight, int | float):
            continue
        total += value * weight
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td>{value:+.4f}</td><td>{weight:g}</td>"
            f"<td>{value * weight:+.4f}</td></tr>"
        )
    return (
        "<div class='scroll'><table id='components'><thead><tr><th>component</th><th>value</th>"
        "<th>weight</th><th>weighted</th></tr></thead><tbody>"
        + "".join(rows)
        + f"</tbody><tfoot><tr><th>reward (the sum)</th><th></th><th></th><th>{total:+.4f}"
        "</th></tr></tfoot></table></div>"
    )


def _metrics(result: Mapping[str, Any]) -> str:
    metrics = result.get("metrics")
    if not isinstance(metrics, dict):
        return ""
    cells = "".join(
        f"<tr><td>{html_text(name, 60)}</td><td>{'–' if v is None else html_text(_num(v), 40)}"
        "</td></tr>"
        for name, v in sorted(metrics.items())
    )
    return (
        "<details><summary>Metrics</summary><div class='scroll'><table id='metrics'>"
        f"<tbody>{cells}</tbody></table></div></details>"
    )


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _timeline(record: EpisodeRecord, title: str) -> str:
    turns = record.turns
    agent_discards = [0] * turns
    for eviction in record.evictions:
        if not eviction.forced and 0 <= eviction.turn < turns:
            agent_discards[eviction.turn] += 1
    svg = timeline(
        record.usage,
        pressure_turns(record),
        [
            ("failures", "#D55E00", record.failures),
            ("forced preemptions", "#E69F00", record.forced_preemptions),
            ("agent discards", "#0072B2", agent_discards),
            ("agent calls", "#999999", record.calls_per_turn),
        ],
        title=title,
        bands=USAGE_BANDS,
    )
    return f"<figure><figcaption><b>{html.escape(title)}</b></figcaption>{svg}</figure>"


def _turn_summary(record: EpisodeRecord | None, turn: int) -> tuple[str, bool]:
    """(what the record says of `turn` in one line, whether it was under pressure)."""
    if record is None or turn >= record.turns:
        return "", False
    pressure = pressure_turns(record)[turn]
    parts = [
        f"usage {record.usage[turn]:.1%}",
        f"queue {record.queue[turn]}",
        f"{record.tokens[turn]} tokens",
        f"{record.calls_per_turn[turn]} call(s)",
    ]
    if record.failures[turn]:
        parts.append(f"{record.failures[turn]} failed")
    if record.forced_preemptions[turn]:
        parts.append(f"{record.forced_preemptions[turn]} forced preemption(s)")
    if pressure:
        parts.append("under pressure")
    return " · ".join(parts), pressure


def _discards(record: EpisodeRecord, turn: int, forced: bool) -> list[str]:
    return [
        f"{html_text(e.seq_id, 40)} ({e.block_type.value}, {e.freed_blocks} blocks"
        + (", paused" if e.paused else "")
        + ")"
        for e in record.evictions
        if e.turn == turn and e.forced == forced
    ]


def _policy_turns(record: EpisodeRecord, shown: int) -> list[str]:
    out = []
    for turn in range(shown):
        summary, pressure = _turn_summary(record, turn)
        lines = []
        mine = _discards(record, turn, forced=False)
        if mine:
            lines.append(f"<div class='call'>→ discarded {', '.join(mine)}</div>")
        other = record.calls_per_turn[turn] - len(mine)
        if other > 0:
            lines.append(
                f"<div class='call'>→ {other} other call(s) (compress, swap or noop)</div>"
            )
        forced = _discards(record, turn, forced=True)
        if forced:
            lines.append(f"<div class='result'>← the engine preempted {', '.join(forced)}</div>")
        if not lines:
            lines.append("<div class='result'>no action</div>")
        acted = bool(mine or forced or record.calls_per_turn[turn])
        out.append(_turn_html(turn, summary, pressure, "".join(lines), open_=acted))
    return out


def _turn_html(turn: int, summary: str, pressure: bool, body: str, open_: bool = False) -> str:
    css = "turn pressure" if pressure else "turn"
    return (
        f"<details class='{css}'{' open' if open_ else ''} id='turn-{turn}'>"
        f"<summary><b>Turn {turn}</b> {summary}</summary>{body}</details>"
    )


def render_page(episode: Episode) -> str:
    """One episode's page (module docstring)."""
    result = episode.result
    scenario, agent, seed = episode_id(result)
    title = (
        f"{display_name(agent, NAME_CHARS)} on {display_name(scenario, NAME_CHARS)}, seed {seed}"
    )
    record, no_record = _record(result)
    messages, transcript_note = read_transcript(episode)
    body = [
        "<p><a href='../index.html'>← the leaderboard</a></p>",
        f"<h1>{html.escape(title)}</h1>",
        "<div class='top'><section>",
        _facts(result),
        _metrics(result),
        "</section><section><h2>Rubric components</h2>",
        _components(result),
        "</section></div>",
        "<h2>Memory timeline</h2>",
    ]
    if record is not None:
        body.append(_timeline(record, "GPU memory usage per turn (shaded: turns under pressure)"))
    else:
        body.append(f"<p>{html.escape(no_record)}</p>")
    body.append("<h2>Turn by turn</h2>")
    if transcript_note:
        body.append(f"<p class='note'>{html.escape(transcript_note)}</p>")
    if messages is not None:
        body += _model_turns(messages, record)
    elif record is not None:
        shown = min(record.turns, MAX_TURNS)
        body.append(
            "<p class='note'>A policy's action log as the episode record keeps it: the "
            "sequences it discarded each turn one by one, its other calls as a count.</p>"
        )
        body += _policy_turns(record, shown)
        if record.turns > shown:
            body.append(f"<p class='note'>{record.turns - shown:,} more turns not shown.</p>")
    else:
        body.append("<p>Nothing to show: no record and no transcript.</p>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )


def _model_turns(messages: Sequence[Mapping[str, Any]], record: EpisodeRecord | None) -> list[str]:
    system, turns = transcript_turns(messages)
    out = [
        "<p class='note'>The model's transcript: each turn's observation, its reply, its tool "
        "calls (→) and the environment's answers (←).</p>"
    ]
    if system:
        out.append(
            f"<details class='turn'><summary><b>System prompt</b></summary>"
            f"<pre>{_escape(system)}</pre></details>"
        )
    for turn, entry in enumerate(turns[:MAX_TURNS]):
        summary, pressure = _turn_summary(record, turn)
        body = (
            f"<details><summary>observation</summary><pre>{_escape(entry.observation)}</pre>"
            f"</details>{''.join(entry.replies) or '<div class=result>no reply</div>'}"
        )
        out.append(_turn_html(turn, summary, pressure, body, open_=True))
    if len(turns) > MAX_TURNS:
        out.append(f"<p class='note'>{len(turns) - MAX_TURNS:,} more turns not shown.</p>")
    return out
