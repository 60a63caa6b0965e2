"""Reports: leaderboard.md, the self-contained index.html checked in headless Chromium, the
results as a datasets.Dataset; and `kvarena validate`."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from evals.common.results import dumps, episode_result
from evals.report.build import ReportError, build_report, leaderboard, load_results, to_dataset
from evals.serving.jobs import EpisodeJob, run_job
from evals.serving.normalize import MIN_RANGE
from kv_cache_env.episodes import EpisodeSpec

# scripts/test spreads the suite over xdist workers; one worker takes this whole module, so the
# module's `runs` (35 episodes) are played once.
pytestmark = pytest.mark.xdist_group("report-runs")

TRACE = "azure-conv-2023"  # the packaged copy (kv_cache_env.traces.trace_data)
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two run directories: policies on the tiers (one failed rollout included; the reference
    bound on easy only, to keep it fast) and a trace."""
    root = tmp_path_factory.mktemp("runs")
    tiers = [
        run_job(EpisodeJob(agent, EpisodeSpec(scenario, seed)))
        for scenario in ("easy", "medium", "hard")
        for agent in ("noop", "lru", "compress-first")
        for seed in range(3)
    ]
    tiers += [run_job(EpisodeJob("bound", EpisodeSpec("easy", seed))) for seed in range(3)]
    tiers.append(
        episode_result(agent="some-model", scenario="hard", seed=0, record=None, error="HTTP 500")
    )
    tiers.append(run_job(EpisodeJob("lru", EpisodeSpec("hard", 1))) | {"agent": "some-model"})
    trace = [
        run_job(EpisodeJob(agent, EpisodeSpec("medium", seed, trace=TRACE)))
        for agent in ("noop", "lru")
        for seed in range(2)
    ]
    for name, results in (("tiers", tiers), ("trace", trace)):
        (root / name).mkdir()
        (root / name / "results.jsonl").write_text("".join(dumps(r) + "\n" for r in results))
    return [root / "tiers", root / "trace"]


def test_leaderboard_rows_counts_and_gap(runs, tmp_path):
    results = load_results(runs)
    rows = build_report(results, tmp_path, [str(r) for r in runs])
    by = {(r.scenario, r.agent): r for r in rows}
    assert by["hard", "some-model"].episodes == 2 and by["hard", "some-model"].failed == 1
    # the gap and the normalized score run to the reference bound (run on easy only)
    assert by["easy", "bound"].gap == 0.0
    gap = by["easy", "bound"].reward[0] - by["easy", "noop"].reward[0]
    assert by["easy", "noop"].gap == pytest.approx(gap)
    assert by["easy", "noop"].to_bound[0] == pytest.approx(gap)  # paired on the same seeds
    assert by["hard", "noop"].gap is None and by["hard", "noop"].normalized is None
    if gap >= MIN_RANGE:
        assert by["easy", "noop"].normalized == pytest.approx(0.0)
        assert by["easy", "bound"].normalized == pytest.approx(1.0)
        lru = (by["easy", "lru"].reward[0] - by["easy", "noop"].reward[0]) / gap
        assert by["easy", "lru"].normalized == pytest.approx(lru)
    else:
        assert by["easy", "noop"].normalized is None
    markdown = (tmp_path / "leaderboard.md").read_text()
    detail = markdown.split("## Every agent on every scenario")[1]
    table = [line for line in detail.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(rows)  # header + one row per agent x scenario
    assert "| hard | some-model | 2 | 1 |" in markdown
    assert "Student-t 95% CI" in markdown
    assert ("trace:azure-conv-2023", "lru") in by


def test_the_ranking_table_comes_first_in_the_page(runs, tmp_path):
    results = load_results(runs)
    build_report(results, tmp_path, [str(r) for r in runs])
    page = (tmp_path / "index.html").read_text()
    body = page.split("<body>", 1)[1]
    assert body.index("<table") == body.index("<table class='sortable compact' id='ranking'>")
    assert body.index("id='ranking'") < body.index("<figure") < body.index("id='leaderboard'")
    markdown = (tmp_path / "leaderboard.md").read_text()
    assert markdown.index("## Ranking") < markdown.index("## Every agent on every scenario")


def test_results_of_different_suite_versions_are_refused(runs, tmp_path):
    results = load_results(runs[:1])
    older = dict(results[0], suite_version="1")
    (tmp_path / "results.jsonl").write_text(dumps(older) + "\n")
    with pytest.raises(ReportError, match="different suite versions"):
        load_results([runs[0], tmp_path])
    with pytest.raises(ReportError, match=r"results of serving suite v1: this kvarena reports"):
        load_results([tmp_path])


def test_malformed_results_name_file_and_line(tmp_path):
    bad = tmp_path / "results.jsonl"
    bad.write_text('{"schema_version": 1}\n')
    with pytest.raises(ReportError, match=r"results.jsonl:1: missing field"):
        load_results([tmp_path])
    with pytest.raises(ReportError, match=r"no results\.jsonl"):
        load_results([tmp_path / "nowhere"])


def test_results_round_trip_as_a_dataset(runs, tmp_path):
    import datasets

    results = load_results(runs)
    to_dataset(results).save_to_disk(str(tmp_path / "ds"))
    loaded = datasets.load_from_disk(str(tmp_path / "ds"))
    assert loaded.num_rows == len(results)
    failed = [row for row in loaded if row["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["reward"] is None and failed[0]["error"] == "HTTP 500"
    ok = next(row for row in loaded if row["status"] == "ok")
    assert set(ok["components"]) >= {"failure_penalty", "throughput_reward"}
    assert json.loads(ok["record"])["turns"] == 15


def _chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"],
            check=False,
            env=env,
            capture_output=True,
        )
        found = shutil.which("chromium")
    if not found:
        message = "Debian's chromium package could not be installed"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_report_page_renders_in_headless_chromium(runs, tmp_path):
    from playwright.sync_api import sync_playwright

    results = load_results(runs)
    build_report(results, tmp_path, [str(r) for r in runs])
    expected_rows = len(leaderboard(results))
    page_file = tmp_path / "index.html"
    assert "http" not in page_file.read_text().split("<body>")[0]  # nothing to fetch
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=_chromium(), args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("requestfailed", lambda r: problems.append(f"request {r.url}"))
        page.goto(page_file.as_uri())
        rows = page.locator("#leaderboard tbody tr")
        assert rows.count() == expected_rows
        assert page.locator("#ranking tbody tr").count() == len({r["agent"] for r in results})
        assert page.locator("figure svg").count() >= 3
        # at 1280 px nothing but a wide table's own box scrolls, and the ranking fits whole
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        ranking_box = "document.querySelector('#ranking').parentElement"
        assert page.evaluate(f"{ranking_box}.scrollWidth <= {ranking_box}.clientWidth")
        assert page.evaluate(f"{ranking_box}.getBoundingClientRect().right") <= 1280
        # figures take the page's width
        width = page.evaluate("document.querySelector('figure svg').getBoundingClientRect().width")
        assert width >= 0.9 * page.evaluate("document.querySelector('h2').offsetWidth")
        page.click("#leaderboard thead th:nth-child(5)")  # sort by reward, ascending
        first = float(rows.nth(0).locator("td").nth(4).get_attribute("data-sort"))
        last = float(rows.nth(rows.count() - 1).locator("td").nth(4).get_attribute("data-sort"))
        assert first <= last
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert problems == []
    shot = (tmp_path / "report.png").read_bytes()
    assert shot.startswith(b"\x89PNG") and len(shot) > 10_000


def test_kvarena_report_cli(runs, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evals.cli",
            "report",
            *map(str, runs),
            "-o",
            str(tmp_path / "r"),
            "--dataset",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "index.html").is_file() and (tmp_path / "d").is_dir()
    assert "1 failed" in done.stderr
