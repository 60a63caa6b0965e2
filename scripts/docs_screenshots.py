"""Regenerate the pictures in docs/assets/: `kvarena eval --help` as it looks in a 100-column
terminal (rich's own SVG export of the coloured output), and a report page in headless
Chromium (Debian's `chromium`; run `kvarena eval` and `kvarena report` first and pass the
report directory).

    uv run --no-sync python scripts/docs_screenshots.py [REPORT_DIR]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.text import Text

ASSETS = Path(__file__).resolve().parents[1] / "docs" / "assets"


def eval_help() -> None:
    env = {**os.environ, "COLUMNS": "100", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "kvarena"), "eval", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    console = Console(record=True, width=100, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(Text.from_ansi(done.stdout))
    console.save_svg(str(ASSETS / "eval-help.svg"), title="kvarena eval --help")


def report(directory: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("no chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--window-size=1300,1500",
                f"--screenshot={ASSETS / 'report.png'}",
                (directory / "index.html").as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


if __name__ == "__main__":
    eval_help()
    if len(sys.argv) > 1:
        report(Path(sys.argv[1]).resolve())
