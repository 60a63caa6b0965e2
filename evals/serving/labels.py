"""Rule-solvable labels: the counted scenarios whose best fixed rule reached 0.9 of the range on
`kvarena validate`'s proof run, each with that rule (as `easy` is labelled the sanity tier).

A proof run with `-o DIR` writes `DIR/labels.json`; the shipped copy
(`reference_data/labels.json`, committed with the proof run's figures) is what `kvarena
scenarios`, the report and the docs show, and only for the suite version it was measured on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kv_cache_env.bounded_read import SMALL_JSON_LIMITS, read_json
from kv_cache_env.sim import SUITE_VERSION

from ..common.durable import write_atomic

LABELS_PATH = Path(__file__).resolve().parent / "reference_data" / "labels.json"
SANITY = ("easy",)
"""The sanity tier: suite scenarios with too little room to rank by (not counted by validate)."""


@dataclass(frozen=True)
class Label:
    """A rule-solvable scenario: the fixed rule that won it and its share of the range."""

    rule: str
    share: float


def write_labels(path: Path, labels: dict[str, Label], proof: range) -> None:
    data: dict[str, Any] = {
        "suite_version": SUITE_VERSION,
        "proof_seeds": [proof.start, proof.stop - 1],
        "labels": {
            sc: {"rule": lab.rule, "share": round(lab.share, 4)} for sc, lab in labels.items()
        },
    }
    write_atomic(path, json.dumps(data, indent=1) + "\n")


def shipped_labels(path: Path | None = None) -> dict[str, Label] | None:
    """The labels measured for this suite version (the shipped file, or `path`); None when none
    were (no file yet, or one of another suite version)."""
    path = path or LABELS_PATH
    if not path.exists():
        return None
    data = read_json(path, SMALL_JSON_LIMITS)
    if str(data.get("suite_version")) != SUITE_VERSION:
        return None
    return {sc: Label(str(v["rule"]), float(v["share"])) for sc, v in data["labels"].items()}


def label_of(scenario: str) -> tuple[str, str]:
    """(label, the rule behind it) of a scenario: "sanity tier", "rule-solvable" with its rule,
    or empty."""
    if scenario in SANITY:
        return "sanity tier", ""
    found = (shipped_labels() or {}).get(scenario)
    return ("rule-solvable", found.rule) if found else ("", "")


def labels_sentence(scenarios: list[str]) -> str:
    """One sentence naming the labelled scenarios among `scenarios` (the report's note)."""
    sanity = [sc for sc in scenarios if sc in SANITY]
    parts = [f"{', '.join(sanity)}: the sanity tier"] if sanity else []
    labels = shipped_labels()
    if labels is None:
        parts.append(f"rule-solvable labels are not yet measured for suite v{SUITE_VERSION}")
    else:
        solvable = [f"{sc} ({labels[sc].rule})" for sc in scenarios if sc in labels]
        parts.append(
            "rule-solvable (a fixed rule reached 0.9 of the range on validate's proof run): "
            + (", ".join(solvable) or "none here")
        )
    return "Labels: " + "; ".join(parts) + "."


__all__ = [
    "LABELS_PATH",
    "SANITY",
    "Label",
    "label_of",
    "labels_sentence",
    "shipped_labels",
    "write_labels",
]
