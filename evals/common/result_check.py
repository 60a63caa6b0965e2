"""Reading result lines someone else wrote: one `results.jsonl` line -> a result object, or the
problems that make it unusable. Used by `kvarena report` (which names the bad line, and reads
both families' lines) and when a serving run is resumed (a bad line is run again, not kept).

Two families write results: serving (`results`) and context (`context_results`). `family_of`
tells which schema a line follows from the fields only one of them has (`schema_version` and
`scenario`; `level` and `reader`); the line is then checked by that family's schema.

`results.validate` checks what a serving result means (the reward is the weighted sum, the
components are the rubric's), `context_results.validate_context` a context one; both assume
the types are right. This module checks the types first, so a
line with `components: null` on an ok episode, `reward: "high"`, a string seed,
`series.usage: "abc"`, NaN or Infinity anywhere, JSON nested deeper than `MAX_JSON_DEPTH`, or
bytes that are not UTF-8 is reported, never a crash. The file around the lines is read by
`kv_cache_env.bounded_read` (`RESULTS_LIMITS`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from typing import Any, Literal

from kv_cache_env.bounded_read import MAX_JSON_DEPTH, too_deep

from .context_results import validate_context
from .results import validate

Family = Literal["serving", "context"]
FAMILIES: tuple[Family, ...] = ("serving", "context")
SERVING: tuple[Family, ...] = ("serving",)
_MARKS: dict[Family, tuple[str, str]] = {
    "serving": ("schema_version", "scenario"),
    "context": ("level", "reader"),
}
"""The fields that mark a line as a family's (`family_of`)."""


class _Constant(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Constant(f"{name} is not a finite number")


def family_of(result: Mapping[str, object]) -> Family | None:
    """Which family's schema a result object follows: serving when it has `schema_version` or
    `scenario` (every serving line has both, no context line either), context when it has
    `level` or `reader` (every context line has both); None when it has none of them."""
    for family in FAMILIES:
        if any(name in result for name in _MARKS[family]):
            return family
    return None


def parse_line(
    line: bytes | str, families: Collection[Family] = SERVING
) -> tuple[dict[str, Any] | None, list[str]]:
    """(result, []) for a usable line of one of `families`; (None, problems) otherwise."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as error:
            return None, [f"not UTF-8 text (byte {error.start})"]
    try:
        value = json.loads(line, parse_constant=_no_constant)
    except _Constant as error:
        return None, [str(error)]
    except json.JSONDecodeError as error:
        return None, [f"not JSON ({error.msg})"]
    except RecursionError:
        return None, [f"JSON nested more than {MAX_JSON_DEPTH} deep"]
    except ValueError:
        return None, ["not JSON (an integer of more than 4,300 digits)"]
    if too_deep(line):
        return None, [f"JSON nested more than {MAX_JSON_DEPTH} deep"]
    problems = check_result(value, families)
    return (value if not problems else None), problems


def check_result(value: object, families: Collection[Family] = SERVING) -> list[str]:
    """Problems with a parsed result object of one of `families`: its family (`family_of`),
    then the types, then the family's schema (`results.validate`,
    `context_results.validate_context`). A line of no recognisable family is checked as the
    only family asked for (its missing fields named), or refused as neither of them."""
    if not isinstance(value, dict):
        return [f"not a JSON object (got {type(value).__name__})"]
    family = family_of(value)
    if family is None:
        if len(families) != 1:
            return [
                "neither "
                + " nor ".join(
                    f"a {f} result (no {' or '.join(_MARKS[f])})" for f in FAMILIES if f in families
                )
            ]
        (family,) = families
    elif family not in families:
        has = " and ".join(name for name in _MARKS[family] if name in value)
        wanted = " or ".join(families)
        return [f"a {family} result (it has {has}), where {wanted} results are read"]
    problems = _type_problems(value)
    if problems:
        return problems
    return validate(value) if family == "serving" else validate_context(value)


MAX_MAGNITUDE = 1e12
"""Largest |value| of a reward, component, metric, weight or series entry: far above any the
rubric gives (rewards and components are O(1), counts of a full replay stay under 10^7), and
far enough below the float limit that sums and means over millions of episodes stay finite."""
MAX_TOKENS = 2**53
"""Largest token count in `usage`: exact as a float, so prices multiply it without overflow."""
MAX_SEED = 2**63 - 1


def _finite(value: object) -> bool:
    """A JSON number (not a bool) that is finite and at most `MAX_MAGNITUDE` in size. An integer
    of hundreds of digits fails here, before any arithmetic turns it into an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE
    return math.isfinite(value) and abs(value) <= MAX_MAGNITUDE


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _numbers(value: object, name: str, *, nullable_values: bool = False) -> str | None:
    if not isinstance(value, dict):
        return f"{name} must be an object, got {_kind(value)}"
    for key, item in value.items():
        if item is None and nullable_values:
            continue
        if not _finite(item):
            return f"{name}.{key} must be a finite number of size at most 1e12, got {_kind(item)}"
    return None


def _kind(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and not _finite(value):
        return f"{float(value):.3g}" if abs(value) < 1e300 else "a number over 1e300"
    return {type(None): "null", bool: "boolean", str: "string", list: "array", dict: "object"}.get(
        type(value), "number"
    )


def _type_problems(result: dict[str, Any]) -> list[str]:
    problems: list[str] = []

    def expect(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    get = result.get
    if "schema_version" in result:
        expect(_int(get("schema_version")), "schema_version must be an integer")
    if "suite_version" in result:
        version = get("suite_version")
        expect(
            isinstance(version, str) or _int(version),
            f"suite_version must be a string, got {_kind(version)}",
        )
    for name in ("agent", "scenario", "status", "level", "reader"):
        if name in result:
            expect(isinstance(get(name), str), f"{name} must be a string, got {_kind(get(name))}")
    if "seed" in result:
        seed = get("seed")
        expect(_int(seed), f"seed must be an integer, got {_kind(seed)}")
        if _int(seed):
            shown = str(seed) if len(str(seed)) <= 20 else f"an integer of {len(str(seed))} digits"
            expect(0 <= seed <= MAX_SEED, f"seed must be between 0 and 2^63 - 1, got {shown}")
    if "error" in result:
        expect(get("error") is None or isinstance(get("error"), str), "error must be a string")
    if get("reward") is not None:
        reward = get("reward")
        expect(
            _finite(reward),
            f"reward must be a finite number of size at most 1e12, got {_kind(reward)}",
        )
    if "weights" in result:
        problem = _numbers(get("weights"), "weights")
        expect(problem is None, problem or "")
    ok = get("status") == "ok"
    for name in ("components", "metrics"):
        if get(name) is not None or (ok and name in result):
            # (a serving metric without a value is null: `results.validate` says which may be)
            blank = name == "metrics" and family_of(result) == "serving"
            problem = _numbers(get(name), name, nullable_values=blank)
            expect(problem is None, problem or "")
    series = get("series")
    if series is not None or (ok and "series" in result):
        if not isinstance(series, dict):
            problems.append(f"series must be an object, got {_kind(series)}")
        else:
            for key, values in series.items():
                if not isinstance(values, list) or not all(_finite(v) for v in values):
                    problems.append(f"series.{key} must be an array of finite numbers")
                    break
    usage = get("usage")
    usage_ok = isinstance(usage, dict) and all(
        _int(v) and 0 <= v <= MAX_TOKENS for v in usage.values()
    )
    if usage is not None and not usage_ok:
        problems.append("usage must be an object of integers between 0 and 2^53")
    record = get("record")
    if ok and "record" in result:
        expect(isinstance(record, dict), f"record must be an object, got {_kind(record)}")
    weights, components = get("weights"), get("components")
    if ok and isinstance(weights, dict) and isinstance(components, dict):
        missing = sorted(set(components) - set(weights))
        expect(not missing, f"weights lack {', '.join(missing[:3])}")
    if ok and "reward" in result:
        expect(get("reward") is not None, "an ok episode needs a reward")
    return problems
