"""One validity check's outcome, as `kvarena validate` prints it: every family's checks return
a list of these (`serving.validate`, `context.validate`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Check:
    """A named claim about the benchmark, whether it held, and the figures that say so."""

    name: str
    passed: bool
    detail: str

    def __post_init__(self) -> None:
        # a comparison of numpy figures gives numpy's bool, which JSON cannot write
        object.__setattr__(self, "passed", bool(self.passed))


def checks_json(checks: list[Check]) -> str:
    """The checks as JSON (a list of {name, passed, detail}): `checks.json` and `validate
    --json` alike."""
    return json.dumps([asdict(c) for c in checks], indent=1) + "\n"
