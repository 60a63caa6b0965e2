"""Regenerate the pictures in docs/assets/ (run through `scripts/screenshots`, which installs
Chromium first where it is absent):

- `eval-help.svg`: `kvarena eval --help` as it looks in a 100-column terminal (rich's own SVG
  export of the coloured output);
- `report.png`, `episode-model.png`, `episode-policy.png`: a report's first screen, and two
  pages of its episode viewer (a model's transcript, a policy's action log), in headless
  Chromium (Debian's `chromium`, driven by Playwright) at 1280 px, from a demo made here: the
  built-in policies on the serving suite (3 episodes each; noop and the bound from the shipped
  table) and a policy served as a keyless model (`evals.servers.policy_server`) on two scenarios.

It prints the layout measured at 1280 px: the page's scroll width, and for each table whether
it fits or scrolls inside its own box.

    scripts/screenshots [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "docs" / "assets"
WIDTH = 1280
"""The viewport the layout is checked at (a laptop's browser window)."""
MODEL_POLICY = "offload-or-discard"
"""The policy the demo serves as a model (its calls: offloads and discards)."""
MODEL_NAME = "served-offload-or-discard"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MEASURE = """() => ({
  scrollWidth: document.documentElement.scrollWidth,
  tables: Array.from(document.querySelectorAll('table')).map(t => {
    const box = t.parentElement;
    return {id: t.id, width: Math.round(t.getBoundingClientRect().width),
            box_right: Math.round(box.getBoundingClientRect().right),
            scrolls_in_its_box: box.scrollWidth > box.clientWidth};
  }),
})"""


def kvarena(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "evals.cli", *args], check=True, cwd=ROOT, env=env)


def eval_help() -> None:
    env = {**os.environ, "COLUMNS": "100", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    done = subprocess.run(
        [sys.executable, "-m", "evals.cli", "eval", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=ROOT,
    )
    console = Console(record=True, width=100, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(
        Text.from_ansi(done.stdout.replace("Usage: python -m evals.cli", "Usage: kvarena"))
    )
    console.save_svg(str(ASSETS / "eval-help.svg"), title="kvarena eval --help")


def demo_report(root: Path) -> Path:
    """Runs and their report under `root`; the report directory."""
    from evals.servers.policy_server import PolicyServer

    kvarena("eval", "-n", "3", "-o", str(root / "policies"), "--force")
    with PolicyServer(MODEL_POLICY) as server:
        env = {**os.environ, "OPENAI_API_KEY": "no-key-needed"}
        kvarena(
            "eval", "--model", MODEL_NAME, "--base-url", server.base_url, "-s", "medium,hard",
            "-n", "3", "-o", str(root / "model"), "--force", env=env,
        )  # fmt: skip
    out = root / "report"
    kvarena("report", str(root / "policies"), str(root / "model"), "-o", str(out))
    return out


def shoot(report: Path) -> dict[str, object]:
    """The screenshots, and the layout measured on each page."""
    from playwright.sync_api import sync_playwright

    from evals.report.episodes import page_name

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("no chromium: run scripts/screenshots (it installs it)")
    pages = {
        "report.png": report / "index.html",
        "episode-model.png": report
        / "episodes"
        / page_name({"scenario": "hard", "agent": MODEL_NAME, "seed": 0}),
        "episode-policy.png": report
        / "episodes"
        / page_name({"scenario": "hard", "agent": "lru", "seed": 0}),
    }
    measured: dict[str, object] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
        for name, path in pages.items():
            page.goto(path.as_uri())
            measured[name] = page.evaluate(MEASURE)
            # the report's first screen; an episode page down to its first turns
            clip = {
                "x": 0,
                "y": 0,
                "width": WIDTH,
                "height": 1000 if name == "report.png" else 1500,
            }
            page.screenshot(path=str(ASSETS / name), full_page=True, clip=clip)
        browser.close()
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="Keep the demo runs and report here.")
    args = parser.parse_args()
    eval_help()
    with tempfile.TemporaryDirectory() as scratch:
        root = (args.keep or Path(scratch)).resolve()
        report = demo_report(root)
        print(json.dumps(shoot(report), indent=1))
    print(f"wrote {', '.join(p.name for p in sorted(ASSETS.glob('*')))} in {ASSETS}")


if __name__ == "__main__":
    main()
