"""The secret scrubber: everything a run writes (results, `run.json`, transcripts, reports, the
one-line errors it prints) passes `scrub` first.

- API keys: `key_from_env` refuses a key that is not printable ASCII (`BadKeyError`, naming
  the variable, never the key): no HTTP header can carry it, so it is refused before any
  request. `register_secret(key)` is called where a key is read from the environment; `scrub`
  then replaces every run of text made of substrings of 8 or more characters of it, in any
  letter case (an endpoint that echoes a key, or part of one, upper-cased or not, in an error
  body) with `[REDACTED]`.
- URLs: the userinfo (`https://user:pass@host`) and the query string (`?key=...`) of every URL
  are replaced with `[REDACTED]`, whatever the key (a key inside `--base-url`);
  `register_url_secrets(base_url)` also registers what the URL carries (the password, the
  Basic authorization an HTTP client derives from it, the query values), for an endpoint
  that echoes them back elsewhere.

Registered secrets live for the process (the keys of one run); the list is process-wide
because every writer, however deep, must see it.
"""

from __future__ import annotations

import base64
import os
import re
import string
import urllib.parse

MIN_SECRET_RUN = 8
"""Shortest piece of a key that is redacted: shorter runs occur in ordinary text."""
REDACTED = "[REDACTED]"

_secrets: list[str] = []
_grams: set[str] = set()
"""Every 8-character piece of every registered secret, ASCII letters lower-cased."""
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s\"'<>@]*@")
_URL_QUERY = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s\"'<>?#]*)\?[^\s\"'<>#]*")


LOOPBACK_PREFIXES = ("http://127.0.0.1", "http://localhost", "http://[::1]")
"""Base URLs of a server on this machine (a local model, the keyless policy server)."""


class BadKeyError(ValueError):
    """An API key no HTTP header can carry; the message names the variable, never the key."""


def key_from_env(api_key_var: str, base_url: str | None) -> str | None:
    """The API key in `api_key_var`, registered so that `scrub` removes it from everything
    written; a loopback endpoint needs none (`"not-needed"`); None when the key is missing.
    BadKeyError when it holds anything but printable ASCII without spaces (a pasted line
    break, a typographic quote)."""
    key = os.environ.get(api_key_var)
    if key:
        register_secret(key)
        bad = next((i for i, c in enumerate(key) if not "!" <= c <= "~"), None)
        if bad is not None:
            what = "a line break" if key[bad] in "\r\n" else f"character {ord(key[bad]):#06x}"
            raise BadKeyError(
                f"environment variable {api_key_var}: the API key holds {what} at position "
                f"{bad + 1}; a key is printable ASCII without spaces (check what was pasted)"
            )
        return key
    if base_url and base_url.startswith(LOOPBACK_PREFIXES):
        return "not-needed"
    return None


def register_secret(value: str | None) -> None:
    """Scrub `value` (and every piece of it of `MIN_SECRET_RUN` or more characters) from
    everything written from now on; values shorter than that are ignored."""
    if not value or len(value) < MIN_SECRET_RUN or value in _secrets:
        return
    _secrets.append(value)
    folded = value.translate(_ASCII_LOWER)
    _grams.update(folded[i : i + MIN_SECRET_RUN] for i in range(len(value) - MIN_SECRET_RUN + 1))


def register_url_secrets(url: str | None) -> None:
    """Register the secrets a URL carries: the userinfo's password (and the Basic
    authorization an HTTP client derives from the userinfo, in base64) and every query value,
    so an endpoint echoing them back is scrubbed too."""
    if not url or "://" not in url:
        return
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None or parts.password is not None:
        userinfo = parts.netloc.rpartition("@")[0]
        register_secret(urllib.parse.unquote(parts.password or ""))
        register_secret(urllib.parse.unquote(parts.username or ""))
        decoded = ":".join(urllib.parse.unquote(p) for p in userinfo.split(":", 1))
        register_secret(base64.b64encode(decoded.encode()).decode())
    for _, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=False):
        register_secret(value)


def forget_secrets() -> None:
    """Drop every registered secret (tests)."""
    _secrets.clear()
    _grams.clear()


def scrub(text: str) -> str:
    """`text` without registered secrets or URL userinfo and query strings."""
    if "://" in text:
        text = _URL_USERINFO.sub(rf"\1{REDACTED}@", text)
        text = _URL_QUERY.sub(rf"\1?{REDACTED}", text)
    if _grams:
        folded = text.translate(_ASCII_LOWER)  # same length: offsets match `text`'s
        if any(gram in folded for gram in _grams):
            text = _scrub_grams(text, folded)
    return text


def _scrub_grams(text: str, folded: str) -> str:
    """Replace every maximal run covered by occurrences of a key's 8-character pieces (found in
    `folded`, `text` with ASCII letters lower-cased)."""
    covered: list[tuple[int, int]] = []
    for gram in _grams:
        start = folded.find(gram)
        while start >= 0:
            covered.append((start, start + MIN_SECRET_RUN))
            start = folded.find(gram, start + 1)
    covered.sort()
    out, at = [], 0
    run_start, run_end = covered[0]
    for start, end in covered[1:]:
        if start <= run_end:
            run_end = max(run_end, end)
            continue
        out += [text[at:run_start], REDACTED]
        at, (run_start, run_end) = run_end, (start, end)
    out += [text[at:run_start], REDACTED, text[run_end:]]
    return "".join(out)
