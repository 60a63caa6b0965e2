"""The one-line message for an unknown name (policy, scenario, trace, level): the closest known
names first ("did you mean"), then every known name, so a typo is fixed without reading a list.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown_name(kind: str, name: str, known: Iterable[str], plural: str | None = None) -> str:
    """E.g. "unknown policy 'lur' (did you mean 'lru'?); known policies: noop, lru, ..."."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if not close:  # a prefix or a part of a longer name ("swap" -> "swap-paused")
        close = [n for n in names if name and (n.startswith(name) or name in n)][:3]
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown {kind} {name!r}{hint}; known {plural or kind + 's'}: {', '.join(names)}"
