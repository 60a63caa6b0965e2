"""The README and the documentation site: the site builds in strict mode (a broken link, a
missing anchor or a page left out of the navigation fails), and the README stays a short entry
point that gives the two commands CI and a newcomer rely on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAIN_JOB = "pip install -q uv && uv run kvarena eval"
TEST_COMMAND = "bash scripts/test"


def test_the_docs_site_builds_in_strict_mode(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for page in ("index", "concepts", "serving", "context", "cli", "results", "failures"):
        assert (tmp_path / ("" if page == "index" else page) / "index.html").exists(), page
    cli = (tmp_path / "cli" / "index.html").read_text()
    # the CLI reference is generated from the app: every command and a known option appear
    for command in ("kvarena eval", "kvarena report", "kvarena validate", "kvarena traces"):
        assert command in cli, command
    assert "--episodes" in cli


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README has {len(lines)} lines (at most 250)"
    long = [n for n, line in enumerate(lines, start=1) if len(line) > 100]
    assert long == [], f"README lines over 100 characters: {long}"


def test_the_readme_gives_the_main_job_and_the_test_command() -> None:
    text = README.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert any(block.strip() == MAIN_JOB for block in blocks), "the main job's command block"
    assert any(block.strip() == TEST_COMMAND for block in blocks), "the test command's block"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in ci if line.strip() and not line.startswith("#")]
    assert commands[-1] == TEST_COMMAND, "CI must call exactly the README's test command"


def test_the_readme_links_resolve() -> None:
    text = README.read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links into the docs"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == []


def test_the_changelog_keeps_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    assert re.search(r"^## \[\d+\.\d+\.\d+\]", text, flags=re.M)
