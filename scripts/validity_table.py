"""Print the serving suite's validity table (markdown) from a finished `kvarena validate -o DIR`.

Reads the run's kept episodes through `validate`'s own store and functions (the grid's screen is
replayed from the store, nothing is played again), so it must run on the code the run was made
with (the store refuses other code). Per counted scenario, normalized noop -> bound on the
proof block's paired seeds: the best one-liner, the best fixed rule (its text), the best blind
rule, `regime-rule`, `learned`, `vllm-default`; the expert and the best rule minus the expert on
the expert's seeds; the label.

    uv run --no-sync python scripts/validity_table.py DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environments"))

from evals.serving.validate import (
    ANCHOR,
    PLANNERS,
    RULE_SOLVABLE,
    SCORED,
    SUITE,
    Sizes,
    blind_agents,
    paired,
    rule_agents,
    screen_grid,
    table,
)
from evals.serving.validate_results import Results
from evals.serving.validate_store import JobStore
from kv_cache_env.bounded_read import SMALL_JSON_LIMITS, read_json
from kv_cache_env.policies import available


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the directory given to validate -o")
    args = parser.parse_args()
    kept = read_json(args.run / "run.json", SMALL_JSON_LIMITS)
    sizes = Sizes(**kept["sizes"])
    store = JobStore(args.run, {"sizes": kept["sizes"]}, resume=True)
    screen = screen_grid(sizes, 1, lambda: None, store)
    results = Results()
    for result in store.done.values():
        results.add(result)
    rules, blind = rule_agents(screen), blind_agents(screen)
    registered = [a for a in available() if a not in PLANNERS]
    agents = list(dict.fromkeys([*rules, *blind, *registered]))
    seeds, few = sizes.proof, sizes.proof[: sizes.expert]
    print(
        "| scenario | noop / bound reward | range | best one-liner | best fixed rule | best blind "
        "rule | `regime-rule` | `learned` | `vllm-default` | `expert` | best rule − expert |"
    )
    print("|---" * 11 + "|")
    for scenario in SUITE:
        t = table(results, scenario, agents, seeds)
        e = table(results, scenario, [*rules, "expert"], few)
        n = t.normalized
        ones = [r for r in rules if "; then" not in r and r in screen.rules]
        one = max(ones, key=lambda r: n[r])
        best = max(rules, key=lambda r: n[r])
        blind_best = max(blind, key=lambda r: n[r])
        top = max(rules, key=lambda r: e.normalized[r])
        mean, half = paired(
            results.rewards(scenario, top, few), results.rewards(scenario, "expert", few)
        )
        width = max(e.range, 1e-9)
        label = " (sanity tier)" if scenario not in SCORED else ""
        if scenario in SCORED and n[best] >= RULE_SOLVABLE:
            label = " (rule-solvable)"
        print(
            f"| `{scenario}`{label} | {t.noop:+.3f} / {t.bound:+.3f} | {t.range:.3f} ± "
            f"{t.range_half:.3f} | {n[one]:.2f} `{one}` | {n[best]:.2f} `{best}` | "
            f"{n[blind_best]:.2f} `{blind_best}` | {n[ANCHOR]:.2f} | {n['learned']:.2f} | "
            f"{n['vllm-default']:.2f} | {e.normalized['expert']:.2f} | "
            f"{mean / width:+.2f} ± {half / width:.2f} (`{top}`) |"
        )
    print(
        f"\n{len(seeds)} paired seeds per scenario ({seeds.start}–{seeds.stop - 1}); the expert "
        f"and the last column on the first {len(few)}."
    )


if __name__ == "__main__":
    main()
