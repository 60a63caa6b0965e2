"""Names as the report shows them: whatever an agent or scenario is called in a results file,
a page shows a bounded, inert string (the full name stays in the results and the dataset).

- `display_name(name, limit)`: control characters (NUL, newlines, escapes) become spaces;
  a name over `limit` characters is cut, with a short hash of the full name after the cut so
  two long names that share a beginning stay apart ("aaaa…~3f2a9c").
- `markdown_cell(text)`: for a Markdown table cell, escaped as for HTML (`<`, `>`, `&`: raw
  HTML passes through Markdown) and for Markdown's structure (`|` would add a cell, `[`/`]`
  make links, backticks code, `\\` escapes), on one line (a newline would end the table and
  start a heading).
- `html_text(text)`: for HTML, after the same cleaning, `html.escape`d.
"""

from __future__ import annotations

import hashlib
import html
import re

TABLE_NAME_CHARS = 80
"""Longest name shown in a table cell."""
FIGURE_NAME_CHARS = 40
"""Longest name shown as a figure label."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MARKDOWN = str.maketrans({c: f"&#{ord(c)};" for c in "|[]`\\"})


def display_name(name: object, limit: int = TABLE_NAME_CHARS) -> str:
    """`name` cleaned of control characters and cut to `limit` (module docstring)."""
    text = str(name)
    if len(text) > limit:
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:6]
        text = text[: max(1, limit - 8)] + "…~" + digest
    return _CONTROL.sub(" ", text)


_UNSAFE_MARKDOWN = re.compile(r"[|\[\]`\\<>&\x00-\x1f\x7f-\x9f\u2028\u2029]")
_UNSAFE_HTML = re.compile(r"[&<>\"'\x00-\x1f\x7f-\x9f\u2028\u2029]")


def markdown_cell(text: object, limit: int = TABLE_NAME_CHARS) -> str:
    shown = str(text)
    if len(shown) <= limit and not _UNSAFE_MARKDOWN.search(shown):
        return shown  # the common case (numbers, plain names): one scan in C
    return html.escape(display_name(shown, limit), quote=False).translate(_MARKDOWN)


def unsafe_html(text: str) -> bool:
    """Whether `text` holds a character HTML must escape (or a control character)."""
    return _UNSAFE_HTML.search(text) is not None


def html_text(text: object, limit: int = TABLE_NAME_CHARS) -> str:
    shown = str(text)
    if len(shown) <= limit and not _UNSAFE_HTML.search(shown):
        return shown
    return html.escape(display_name(shown, limit))
