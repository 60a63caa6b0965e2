"""One validity check's outcome, as `kvarena validate` prints it: every family's checks return
a list of these (`serving.validate`, `context.validate`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """A named claim about the benchmark, whether it held, and the figures that say so."""

    name: str
    passed: bool
    detail: str
