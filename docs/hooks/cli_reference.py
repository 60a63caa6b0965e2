"""MkDocs hook: the CLI reference page (`cli.md`), generated from the `kvarena` Typer app.

The page is Typer's own Markdown rendering (`typer.cli.get_docs_for_click`, what
`typer evals.cli utils docs` prints) of every command, its arguments and options, so it never
drifts from `kvarena --help`.
"""

from __future__ import annotations

import os

from mkdocs.structure.files import File

INTRO = """\
Every command, argument and option of `kvarena`, generated from the app itself when the site is
built (the same text as `kvarena COMMAND --help`). Options shared by several commands are
described once, in the same words, on each of them.

"""


def cli_markdown() -> str:
    """The reference text of the whole `kvarena` app."""
    os.environ.setdefault("COLUMNS", "100")
    import typer
    from typer.cli import get_docs_for_click

    from evals.cli import app

    command = typer.main.get_command(app)
    context = typer.Context(command, info_name="kvarena")
    body = get_docs_for_click(obj=command, ctx=context, name="kvarena", title="CLI reference")
    return body.replace("# CLI reference\n\n", "# CLI reference\n\n" + INTRO, 1)


def on_files(files, config):
    files.append(File.generated(config, "cli.md", content=cli_markdown()))
    return files
