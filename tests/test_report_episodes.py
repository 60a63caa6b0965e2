"""The episode viewer of `kvarena report`: a page per serving episode, linked from the
leaderboard, showing a model's transcript or a policy's action log, the memory timeline and the
rubric's components, with every value from a file escaped. Checked without a browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.results import dumps
from evals.common.run_dir import RunDir
from evals.report import episodes
from evals.report.episodes import EPISODES_DIR, page_name
from evals.serving.jobs import EpisodeJob, run_job
from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.sim import EpisodeRecord
from rubrics import COMPONENTS

runner = CliRunner()
MODEL = "<script>alert('m')</script>"
"""A model name that is markup: every page must show it inert."""
HOSTILE_REPLY = "<img src=x onerror=alert(1)> & </pre><b>"


def _transcript(result: dict) -> dict:
    """A transcript in the shape `kvarena eval --model` writes (system, then per turn the
    observation, the reply with its tool calls, and their results)."""
    messages = [{"role": "system", "content": "You manage the KV-cache."}]
    for turn in range(result["record"]["turns"]):
        messages.append({"role": "user", "content": f"turn {turn} | queue <q> {turn}"})
        messages.append(
            {
                "role": "assistant",
                "content": HOSTILE_REPLY if turn == 0 else "",
                "tool_calls": [
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "evict", "arguments": '{"seq_id": "r<1>"}'},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "call_0", "content": "evict r<1>: ok"})
    return {
        "model": result["agent"],
        "scenario": result["scenario"],
        "seed": result["seed"],
        "history_turns": None,
        "messages": messages,
    }


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """A report over two runs: policies (noop, lru; with a failed rollout) and a model whose
    name is markup, with its transcripts written by the run directory's own writer."""
    root = tmp_path_factory.mktemp("episodes")
    policies = [
        run_job(EpisodeJob(agent, EpisodeSpec(scenario, seed, steps=6)))
        for scenario in ("easy", "hard")
        for agent in ("noop", "lru")
        for seed in range(2)
    ]
    failed = dict(policies[-1], seed=7, status="failed", error="<b>HTTP 500</b>")
    failed |= {"reward": None, "components": None, "metrics": None, "series": None}
    failed["record"] = None
    (root / "policies").mkdir()
    lines = [*policies, failed]
    (root / "policies" / "results.jsonl").write_text("".join(dumps(r) + "\n" for r in lines))
    model_run = RunDir(root / "model")
    for seed in range(2):
        result = run_job(EpisodeJob("lru", EpisodeSpec("hard", seed, steps=6))) | {"agent": MODEL}
        model_run.write_transcript(result, _transcript(result))
        model_run.add(result)
    model_run.close()
    done = runner.invoke(
        app, ["report", str(root / "policies"), str(root / "model"), "-o", str(root / "out")]
    )
    assert done.exit_code == 0, done.output
    return root / "out"


def _pages(report: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in (report / EPISODES_DIR).iterdir()}


def test_every_episode_has_a_page_linked_from_the_leaderboard(report):
    index = (report / "index.html").read_text()
    links = re.findall(r"href='(episodes/[^']+)'", index)
    pages = _pages(report)
    assert len(links) == len(set(links)) == len(pages) == 8 + 1 + 2
    assert {link.removeprefix("episodes/") for link in links} == set(pages)
    for text in pages.values():
        assert "href='../index.html'" in text
    assert "(failed)</a>" in index


def test_nothing_from_a_file_reaches_a_page_unescaped(report):
    for name, text in {"index.html": (report / "index.html").read_text(), **_pages(report)}.items():
        for raw in ("<script>alert", "<img src", "</pre><b>", "<b>HTTP", "r<1>", "<q>"):
            assert raw not in text, (name, raw)
    model_page = _pages(report)[page_name({"scenario": "hard", "agent": MODEL, "seed": 0})]
    assert "&lt;script&gt;alert(&#x27;m&#x27;)&lt;/script&gt; on hard, seed 0" in model_page
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &lt;/pre&gt;&lt;b&gt;" in model_page
    # the only scripts are none: a page is static
    assert "<script" not in model_page


def test_a_model_page_shows_its_transcript_turn_by_turn(report):
    page = _pages(report)[page_name({"scenario": "hard", "agent": MODEL, "seed": 1})]
    assert page.count("<details class='turn") == 6 + 1  # six turns and the system prompt
    assert page.count("→ evict({&quot;seq_id&quot;: &quot;r&lt;1&gt;&quot;})") == 6
    assert page.count("← evict r&lt;1&gt;: ok") == 6
    # each result right under the call it answers
    call = "→ evict({&quot;seq_id&quot;: &quot;r&lt;1&gt;&quot;})</div>"
    assert page.count(call + "<div class='result'>← evict r&lt;1&gt;: ok</div>") == 6
    assert "turn 5 | queue &lt;q&gt; 5" in page


def test_a_policy_page_shows_its_action_log_timeline_and_components(report):
    page = _pages(report)[page_name({"scenario": "hard", "agent": "lru", "seed": 0})]
    assert page.count("<details class='turn") == 6
    assert "<svg" in page and "GPU memory usage" in page
    for name in COMPONENTS:
        assert f"<td>{name}</td>" in page
    reward = re.search(r"<dt>reward</dt><dd>([-+0-9.]+)</dd>", page)
    total = re.search(r"reward \(the sum\)</th><th></th><th></th><th>([-+0-9.]+)</th>", page)
    assert reward and total and reward.group(1) == total.group(1)


def test_a_failed_episode_page_says_why(report):
    page = _pages(report)[page_name({"scenario": "hard", "agent": "lru", "seed": 7})]
    assert "&lt;b&gt;HTTP 500&lt;/b&gt;" in page
    assert "No components: the rollout failed." in page


def test_a_transcript_of_another_agent_sharing_the_file_name_is_not_shown(tmp_path):
    result = run_job(EpisodeJob("lru", EpisodeSpec("easy", 0, steps=3))) | {"agent": "a b"}
    run = RunDir(tmp_path)
    run.write_transcript(result | {"agent": "a_b"}, _transcript(result | {"agent": "a_b"}))
    run.close()
    messages, note = episodes.read_transcript(episodes.Episode(result, tmp_path))
    assert messages is None and "another episode's" in note


def test_the_page_count_is_capped_and_the_list_says_so(tmp_path, monkeypatch):
    lines = [run_job(EpisodeJob("noop", EpisodeSpec("easy", s, steps=2))) for s in range(4)]
    (tmp_path / "results.jsonl").write_text("".join(dumps(r) + "\n" for r in lines))
    monkeypatch.setattr(episodes, "MAX_PAGES", 3)
    done = runner.invoke(app, ["report", str(tmp_path), "-o", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert len(list((tmp_path / "out" / EPISODES_DIR).iterdir())) == 3
    index = (tmp_path / "out" / "index.html").read_text()
    assert "1 episode(s) have no page: a report writes at most 3." in index


def test_the_shaded_turns_are_the_rubrics_pressure_steps():
    for scenario in ("medium", "hard", "flash-crowd"):
        result = run_job(EpisodeJob("lru", EpisodeSpec(scenario, 0)))
        record = EpisodeRecord.from_dict(result["record"])
        assert sum(episodes.pressure_turns(record)) == result["metrics"]["pressure_steps"]
