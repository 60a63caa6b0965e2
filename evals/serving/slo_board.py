"""The docs' SLO table (`scripts/slo_table.py` plays it; `docs/serving.md` shows it): per
policy and suite scenario, the mean SLO attainment, first-token p95 and rubric reward over the
seeds played, and per scenario how far the reward's order of the policies agrees with the
attainment's (Kendall's tau-b, and the best policy by each).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from itertools import combinations

from kv_cache_env.sim import SUITE

START = "<!-- slo-table:start (scripts/slo_table.py writes what is between the markers) -->"
END = "<!-- slo-table:end -->"


@dataclass(frozen=True)
class Episode:
    """One played episode's figures."""

    policy: str
    scenario: str
    seed: int
    reward: float
    attainment: float | None
    first_token_p95_s: float | None

    def as_list(self) -> list[object]:
        return list(astuple(self))

    @classmethod
    def from_list(cls, values: Sequence[object]) -> Episode:
        return cls(*values)  # type: ignore[arg-type]


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Kendall's tau-b of two paired sequences (None when either is constant)."""
    concordant = discordant = ties_x = ties_y = 0
    for (x1, y1), (x2, y2) in combinations(zip(xs, ys, strict=True), 2):
        dx, dy = x1 - x2, y1 - y2
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            ties_x += 1
        elif dy == 0:
            ties_y += 1
        elif (dx > 0) == (dy > 0):
            concordant += 1
        else:
            discordant += 1
    pairs_x = concordant + discordant + ties_y
    pairs_y = concordant + discordant + ties_x
    if not pairs_x or not pairs_y:
        return None
    return (concordant - discordant) / math.sqrt(pairs_x * pairs_y)


def _number(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def render(episodes: Sequence[Episode], seeds: int, skipped: Sequence[str] = ()) -> str:
    """The Markdown between the page's markers."""
    policies = list(dict.fromkeys(e.policy for e in episodes))
    scenarios = [s for s in SUITE if any(e.scenario == s for e in episodes)]
    cell: dict[tuple[str, str], tuple[float | None, float | None, float | None]] = {}
    for policy in policies:
        for scenario in scenarios:
            mine = [e for e in episodes if e.policy == policy and e.scenario == scenario]
            cell[policy, scenario] = (
                _mean([e.attainment for e in mine]),
                _mean([e.first_token_p95_s for e in mine]),
                _mean([e.reward for e in mine]),
            )

    def suite_mean(policy: str) -> float:
        rewards = [cell[policy, s][2] for s in scenarios]
        return sum(r for r in rewards if r is not None) / len(scenarios)

    policies.sort(key=lambda p: -suite_mean(p))
    lines = [
        f"Seeds 0–{seeds - 1} of every suite scenario, default weights; each cell is the mean "
        "over the seeds of SLO attainment · first-token p95 (s) · rubric reward. Rows by mean "
        "reward over the suite."
        + (f" Not played (too slow for this table): {', '.join(skipped)}." if skipped else ""),
        "",
        "| policy | " + " | ".join(f"`{s}`" for s in scenarios) + " |",
        "|---|" + "---:|" * len(scenarios),
    ]
    for policy in policies:
        cells = [
            f"{_number(a, '.2f')} · {_number(p, '.1f')} · {_number(r, '+.3f')}"
            for a, p, r in (cell[policy, s] for s in scenarios)
        ]
        lines.append(f"| `{policy}` | " + " | ".join(cells) + " |")
    taus, best_reward, best_slo = [], [], []
    for scenario in scenarios:
        rows = [(p, cell[p, scenario]) for p in policies]
        rows = [(p, a, r) for p, (a, _, r) in rows if a is not None and r is not None]
        tau = kendall_tau([r for _, _, r in rows], [a for _, a, _ in rows])
        taus.append(_number(tau, "+.2f"))
        best_reward.append(f"`{max(rows, key=lambda row: row[2])[0]}`" if rows else "–")
        best_slo.append(f"`{max(rows, key=lambda row: row[1])[0]}`" if rows else "–")
    lines += [
        "| *Kendall τ, reward vs attainment* | " + " | ".join(taus) + " |",
        "| *best by reward* | " + " | ".join(best_reward) + " |",
        "| *best by attainment* | " + " | ".join(best_slo) + " |",
    ]
    return "\n".join(lines)


def replace_section(page: str, table: str) -> str:
    """`page` with what is between its markers replaced by `table`."""
    start, end = page.index(START), page.index(END)
    return page[: start + len(START)] + "\n\n" + table + "\n\n" + page[end:]


def section(page: str) -> str:
    """What is between the page's markers (as `replace_section` writes it)."""
    start, end = page.index(START), page.index(END)
    return page[start + len(START) : end].strip("\n")
