"""Plain words: what a user reads (every command's help, the lists `kvarena policies`,
`scenarios` and `traces` print, the README and the docs pages) names things by what they are.
The project's internal labels — design-document numbers ("seed 003"), issue numbers, work
rounds, "fortified", `SEED_004`-style constants, lettered readers, the former scenario name
`seed-compatible` — mean nothing to a user and fail this test wherever they appear.

CHANGELOG.md is history and may name what was renamed; it is not scanned.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app

ROOT = Path(__file__).resolve().parents[1]

INTERNAL = re.compile(
    r"\bseeds? 0\d\d\b"  # design documents: "seed 003", "seeds 000 + 001"
    r"|\bseed[-_]0\d\d\b"  # "seed-004 orders", SEED_004
    r"|\bissues? #?\d+\b"  # issue numbers
    r"|\b(?:first|second|third|fourth|fifth|sixth|this|last|previous|next) round\b"
    r"|\bround \d+\b"
    r"|\bfortified\b"
    r"|\bseed-compatible\b"
    r"|\breader \([a-e]\)"
    r"|\bhelper [\"`']",
    flags=re.IGNORECASE,
)


def _offences(text: str, where: str) -> list[str]:
    found = []
    for n, line in enumerate(text.splitlines(), start=1):
        for match in INTERNAL.finditer(line):
            found.append(f"{where}:{n}: {match.group(0)!r} in {line.strip()[:120]!r}")
    return found


def test_the_pattern_catches_what_it_should() -> None:
    caught = [
        "seed 003's rubric",
        "seeds 000 + 001",
        "SEED_004",
        "the seed-004 orders",
        "issue 13's targets",
        "the fifth round",
        "a fortified search",
        "`seed-compatible`",
        "Reader (b)",
    ]
    assert all(INTERNAL.search(text) for text in caught), caught
    plain = ["seeds 0-99", "seed 0", "seeds 1000-1999", "a round trip", "rounded to 3 places"]
    assert not any(INTERNAL.search(text) for text in plain), plain


def _help_texts() -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from cli_reference import cli_markdown
    finally:
        sys.path.pop(0)
    texts = {"kvarena help (every command)": cli_markdown()}
    runner = CliRunner()
    for command in ("policies", "scenarios", "traces"):
        done = runner.invoke(app, [command], env={"COLUMNS": "200"})
        assert done.exit_code == 0, done.output
        texts[f"kvarena {command}"] = done.output
    return texts


def test_cli_help_and_lists_use_no_internal_words() -> None:
    offences = [o for where, text in _help_texts().items() for o in _offences(text, where)]
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize(
    "path",
    ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))],
)
def test_readme_and_docs_use_no_internal_words(path: str) -> None:
    offences = _offences((ROOT / path).read_text(), path)
    assert offences == [], "\n".join(offences)


def test_code_comments_and_docstrings_use_no_design_document_numbers() -> None:
    # a reader of the code is a user too: "the original design's weights" says what
    # "seed 003's weights" does not
    numbered = re.compile(r"\bseeds? 0\d\d\b|\bseed[-_]0\d\d\b", flags=re.IGNORECASE)
    tops = ("environments", "evals", "rubrics", "scripts", "tests")
    found = {
        str(path.relative_to(ROOT))
        for top in tops
        for path in (ROOT / top).rglob("*.py")
        if path != Path(__file__).resolve() and numbered.search(path.read_text())
    }
    assert sorted(found) == []
