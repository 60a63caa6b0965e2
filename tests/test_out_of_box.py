"""From a copy of the checkout with no `../shared` beside it, the trace commands and the trace tests
run on the packaged traces: nothing fails and nothing skips."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_ANYWHERE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", ".*_cache", ".hypothesis"
)
_TOP_LEVEL = {"runs", "report", "dist"}  # output folders, as .gitignore anchors them (/report/)


def _ignored(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: caches anywhere, run outputs only at the top (evals/report/ is
    code)."""
    top = Path(folder).resolve() == ROOT
    return set(_ANYWHERE(folder, names)) | ({n for n in names if n in _TOP_LEVEL} if top else set())


def _copy_checkout(tmp_path: Path) -> Path:
    clone = tmp_path / "elsewhere" / "kvcache-arena"
    shutil.copytree(ROOT, clone, ignore=_ignored)
    assert not (clone.parent / "shared").exists()
    return clone


def _run(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The copy's sources come first on the path, ahead of the installed (editable) checkout.
    paths = os.pathsep.join([str(clone), str(clone / "environments")])
    env = os.environ | {"PYTHONPATH": paths, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=clone, env=env
    )


@pytest.mark.long_running
def test_trace_commands_and_tests_run_without_shared(tmp_path):
    clone = _copy_checkout(tmp_path)
    where = _run(clone, "-c", "import kv_cache_env.traces as t; print(t.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(clone)

    listing = _run(clone, "-m", "evals.cli", "traces")
    assert listing.returncode == 0, listing.stderr
    assert "mooncake-conversation" in listing.stdout and "12,031" in listing.stdout
    assert "azure-conv-2023" in listing.stdout and "19,366" in listing.stdout

    out = tmp_path / "run"
    args = ("-m", "evals.cli", "eval", "--trace", "mooncake-conversation", "-p", "lru,noop")
    done = _run(clone, *args, "-n", "3", "-o", str(out), "-j", "1")
    assert done.returncode == 0, done.stderr
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 6 and all(r["status"] == "ok" for r in results)
    assert {r["scenario"] for r in results} == {"trace:mooncake-conversation"}

    tests = _run(
        clone, "-m", "pytest", "-o", "addopts=", "-q", "-rs", "-p", "no:cacheprovider",
        "tests/test_traces.py",
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert re.search(r"\b\d+ passed\b", tests.stdout), tests.stdout
    assert "skipped" not in tests.stdout and "SKIPPED" not in tests.stdout
