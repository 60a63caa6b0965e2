"""`kvarena validate`: the checks a benchmark maintainer runs before trusting a leaderboard
(serving suite v4).

Figures are normalized per scenario on paired seeds: (agent - noop) / (bound - noop), where
`bound` is the clairvoyant reference (1.0) and `expert` the honest planner (it sees only the
observation and the signal table). Every scenario but `easy` (a sanity tier) counts.

1. The grid of fixed rules (`rule_grid`) is screened on tuning seeds (900000+, never the proof
   block): every one-liner, then every pair of the best one-liners per tool with different
   tools in both orders; the best `top` per scenario and on average, and the best `top` blind
   ones per scenario, go to the proof block with the registered rules and the two quoted ones.
2. On the proof block (`PROOF_START`; a CI-size run plays 800000+ instead), the gates: every
   scenario has a range (bound - noop >= 0.10, paired CI's lower end >= 0.05); the expert (on
   the block's first `expert` seeds) is the ceiling for honest play (no fixed rule, the anchor
   `regime-rule` included, beats it by more than 0.02 of the range with the paired CI's lower
   end above 0); *blind* rules (`Policy.reads_sessions` False: every sequence alike, or gated
   by the header alone) stay <= 0.5 of the range on each named regime (`NAMED`); at least
   three different fixed rules win the counted scenarios. In this problem good judgment is a
   short rule that reads the right signal, so a rule near the expert is no failure: the best
   rule's figures are reported (the gates of suite v3 — every rule of at most two lines <= 0.70
   on average and <= 0.85 per scenario, no single rule within 0.15 of the expert — with them),
   and a counted scenario whose best fixed rule reaches 0.9 of the range is labelled
   rule-solvable, with that rule. The stretch aim (expert - best rule >= 0.15 on two scenarios,
   with the per-term split, and a planner told the true pause lengths) is reported.
3. Each tool matters: the bound with it masked loses >= 0.10 of the range on some scenario (the
   expert's loss with it masked there is reported); a last-turn dump on the bound's trajectory
   gains <= 0 on average; no registered policy beats the bound on the mean, nor any fixed rule
   taken to the proof block (the grid's are not registered); `learned`, `vllm-default` and the
   classic orders are reported with paired CIs against noop and the expert; determinism, the
   shipped reference table, and each tool's effect on running and paused sequences.

With a `JobStore` (`--out DIR`), every finished episode is kept on disk as it comes, and
`--resume` continues a stopped run without playing them again (`validate_store`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from kv_cache_env.policies import Policy, available, create
from kv_cache_env.policies.regime_rule import RegimeRulePolicy
from kv_cache_env.policies.rule_grid import (
    OneLiner,
    conditions,
    field_values,
    grid_tools,
    one_liners,
    quoted_rules,
    two_liners,
)
from kv_cache_env.sim import (
    ACTIONS,
    SUITE,
    Observation,
    Simulator,
    Status,
    compress,
    evict,
    get_scenario,
    swap,
)
from rubrics import DEFAULT_WEIGHTS

from ..common.checks import Check
from ..common.stats import mean_ci
from .labels import SANITY, Label, write_labels
from .validate_jobs import Job, run_job, run_jobs
from .validate_results import Results, record_digest
from .validate_store import JobStore

PROOF_START = 650_000
"""The proof block. Each suite version proves on a block no run has touched before it: v3's
engine and scenarios were redesigned after runs on 500000+, whose second block (510000+) one
proof run spent before the expert's pool grew, so v3 proved on 520000+; the blocks 600000+
and 610000+ were spent by honesty measurements and an outside attack of v3. Suite v4 (the
scenario's name shown to every agent, the `regime-rule` anchor, the final gates) proves on
650000+."""
CI_START = 800_000
"""The block a CI-size run (`Sizes.ci`, the test suite) plays instead, so that test runs never
touch the proof block."""
TUNING_START = 900_000
SCORED = tuple(s for s in SUITE if s not in SANITY)
NAMED = ("agent-tools", "agent-remote", "chat-human", "big-cpu", "slow-prefill", "flash-crowd")
"""The named regimes: each is won by reading a per-session signal, so a blind rule must not
come close there (`blind_check`)."""
TOOLS = grid_tools()
"""The tools each ablation masks: the action table's that take a sequence (the grid's)."""
V2_RULES = (
    *("compress-all", "int8-everything", "swap-paused", "discard-paused"),
    *("swap-paused+compress-all", "discard-paused+compress-all", "offload-or-discard"),
    *("compress-first", "headroom", "fifo", "lru", "priority", "trtllm"),
)
"""The fixed rules the suite is held against besides the grid (suite v2's set)."""
CLASSIC_ORDERS = ("fifo", "lru", "priority")
REPORTED = ("vllm-default", *CLASSIC_ORDERS, "learned", "min-waste")
PLANNERS = frozenset({"bound", "expert", "lookahead", "random"})
MIN_RANGE, MIN_RANGE_LOW = 0.10, 0.05
CEILING_SLACK = 0.02
WINNERS = 3
BLIND_LIMIT = 0.5
RULE_SOLVABLE = 0.9
"""A counted scenario whose best fixed rule reaches this share of the range is labelled
rule-solvable (as `easy` is the sanity tier)."""
SINGLE_RULE_GAP = 0.15
RULE_AVERAGE, RULE_ANY = 0.70, 0.85
"""Retired as gates, reported: in this problem good judgment is a short rule that reads the right
signal, so rules near the expert are expected where one signal decides."""
ABLATION_COST = 0.10
STRETCH_GAP, STRETCH_SCENARIOS = 0.15, 2
DETERMINISM_JOBS = (("lru", "hard"), ("swap-paused", "chat-human"))


@dataclass(frozen=True)
class Sizes:
    """How many episodes each part of the validation plays."""

    episodes: int = 100
    """Proof-block seeds per scenario."""
    expert: int = 30
    """Of those, the first ones the expert (and the planner told the pauses) plays."""
    screen: int = 10
    """Tuning seeds per scenario for the grid's screen."""
    pairs: int = 12
    """Best one-liners per tool paired into two-liners."""
    top: int = 10
    """Rules taken to the proof block per scenario and on average."""
    ablation: int = 30
    """Seeds per scenario for each masked bound."""
    expert_ablation: int = 10
    """Seeds for each masked expert (on the scenario where its tool matters most)."""
    told: int = 10
    """Seeds per scenario for the planner told the true pause lengths."""
    grid_limit: int | None = None
    """Play only this many one-liners in the screen (a CI-size run)."""
    start: int = PROOF_START
    """First seed of the block the criteria are checked on."""

    @classmethod
    def ci(cls) -> Sizes:
        return cls(3, 1, 1, 2, 2, 1, 1, 1, grid_limit=24, start=CI_START)

    @property
    def proof(self) -> range:
        return range(self.start, self.start + self.episodes)

    @property
    def tuning(self) -> range:
        return range(TUNING_START, TUNING_START + self.screen)


# --- statistics --------------------------------------------------------------------------------
def paired(a: Iterable[float], b: Iterable[float]) -> tuple[float, float]:
    """Mean and 95% half-width of the per-seed differences a - b."""
    return mean_ci([x - y for x, y in zip(a, b, strict=True)])


@dataclass
class Table:
    """One scenario's figures on paired seeds."""

    scenario: str
    noop: float
    bound: float
    range_half: float
    normalized: dict[str, float]

    @property
    def range(self) -> float:
        return self.bound - self.noop


def table(results: Results, scenario: str, agents: Iterable[str], seeds: range) -> Table:
    noop = results.rewards(scenario, "noop", seeds)
    bound = results.rewards(scenario, "bound", seeds)
    width, half = paired(bound, noop)
    normalized = {}
    for agent in agents:
        mean = float(np.mean(results.rewards(scenario, agent, seeds)))
        normalized[agent] = (mean - float(np.mean(noop))) / width if width > 0 else 0.0
    return Table(scenario, float(np.mean(noop)), float(np.mean(bound)), half, normalized)


# --- the grid's screen -------------------------------------------------------------------------
@dataclass
class Screen:
    rules: dict[str, Policy]
    """The rules taken to the proof block, by name."""
    detail: str
    one_liners: int
    two_liners: int


def screen_grid(
    sizes: Sizes, workers: int, tick: Callable[[], None], store: JobStore | None = None
) -> Screen:
    """Play the grid on tuning seeds and keep its best rules (module doc, 1)."""
    seeds = sizes.tuning
    ones = one_liners(conditions(field_values(_tuning_observations(seeds))))
    if sizes.grid_limit is not None:
        ones = ones[:: max(1, len(ones) // sizes.grid_limit)][: sizes.grid_limit]
    base = [Job(a, sc, s, kind=a) for a in ("bound",) for sc in SCORED for s in seeds]
    base += [Job("noop", sc, s) for sc in SCORED for s in seeds]
    results = run_jobs(base + _rule_jobs(ones, seeds), workers, tick, store)
    scores = _screen_scores(results, ones, seeds)
    best: dict[str, list[OneLiner]] = {}
    for tool in TOOLS:
        mine = [r for r in ones if r.tool == tool]
        mine.sort(key=lambda r: -float(np.mean(list(scores[r.name].values()))))
        best[tool] = mine[: sizes.pairs]
    twos = two_liners(best)
    results.update(run_jobs(_rule_jobs(twos, seeds), workers, tick, store))
    rules: list[Policy] = [*ones, *twos]
    scores |= _screen_scores(results, twos, seeds)
    chosen: dict[str, Policy] = {}
    by_name = {r.name: r for r in rules}
    ranked = sorted(scores, key=lambda n: -float(np.mean(list(scores[n].values()))))
    for name in ranked[: sizes.top]:
        chosen[name] = by_name[name]
    blind = [n for n in ranked if not by_name[n].reads_sessions]
    for scenario in SCORED:
        for name in sorted(scores, key=lambda n: -scores[n][scenario])[: sizes.top]:
            chosen[name] = by_name[name]
        for name in sorted(blind, key=lambda n: -scores[n][scenario])[: sizes.top]:
            chosen[name] = by_name[name]  # the strongest blind rules, for `blind_check`
    detail = (
        f"{len(ones)} one-liners and {len(twos)} two-liners on {len(seeds)} tuning seeds x "
        f"{len(SCORED)} scenarios; best on average: {ranked[0]} "
        f"({float(np.mean(list(scores[ranked[0]].values()))):.2f})"
    )
    return Screen(chosen, detail, len(ones), len(twos))


def _tuning_observations(seeds: range) -> list[Observation]:
    """Observations of noop and offload-or-discard on the tuning seeds (where the grid's
    percentiles come from)."""
    out = []
    for scenario in SUITE:
        for agent in ("noop", "offload-or-discard"):
            for seed in seeds:
                sim = Simulator(get_scenario(scenario), seed)
                policy = create(agent)
                while not sim.done:
                    obs = sim.observe(hints=False)
                    out.append(obs)
                    sim.play_turn(policy.act(obs))
    return out


def _rule_jobs(rules: Iterable[Policy], seeds: range) -> list[Job]:
    return [Job(r.name, sc, s, rule=r) for r in rules for sc in SCORED for s in seeds]


def _screen_scores(
    results: Results, rules: Iterable[Policy], seeds: range
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for scenario in SCORED:
        noop = float(np.mean(results.rewards(scenario, "noop", seeds)))
        width = float(np.mean(results.rewards(scenario, "bound", seeds))) - noop
        for rule in rules:
            mean = float(np.mean(results.rewards(scenario, rule.name, seeds)))
            out.setdefault(rule.name, {})[scenario] = (mean - noop) / width if width > 0 else 0
    return out


# --- the proof block ---------------------------------------------------------------------------
ANCHOR = RegimeRulePolicy.name
"""The registered anchor that plays, per scenario, the fixed rule best there on tuning seeds."""


def rule_agents(screen: Screen) -> list[str]:
    """Every fixed rule the criteria apply to: suite v2's set, the quoted two, the grid's best,
    and the anchor `regime-rule` (in each scenario, one fixed rule)."""
    quoted = (r.name for r in quoted_rules())
    return list(dict.fromkeys([*V2_RULES, *quoted, *screen.rules, ANCHOR]))


def blind_agents(screen: Screen) -> list[str]:
    """The blind rules played on the proof block: the registered ones and the grid's strongest
    (`Policy.reads_sessions` is False: every sequence alike, or gated by the header alone)."""
    registered = [a for a in available() if a not in PLANNERS and not create(a).reads_sessions]
    grid = [name for name, rule in screen.rules.items() if not rule.reads_sessions]
    return list(dict.fromkeys([*registered, *grid]))


def proof_jobs(sizes: Sizes, screen: Screen) -> list[Job]:
    """The proof block's episodes (module doc, 2 and 3) but the masked experts."""
    seeds, few = sizes.proof, sizes.proof[: sizes.expert]
    rules = {r.name: r for r in quoted_rules()} | screen.rules
    registered = [a for a in available() if a not in PLANNERS]
    jobs = [Job(a, sc, s) for a in registered for sc in SUITE for s in seeds]
    jobs += [Job(n, sc, s, rule=r) for n, r in rules.items() for sc in SUITE for s in seeds]
    jobs += [Job("bound", sc, s, kind="bound") for sc in SUITE for s in seeds]
    jobs += [Job("expert", sc, s, kind="expert") for sc in SUITE for s in few]
    told = sizes.proof[: sizes.told]
    jobs += [Job("told-pauses", sc, s, kind="expert-told-pauses") for sc in SCORED for s in told]
    ablated = sizes.proof[: sizes.ablation]
    for tool in TOOLS:
        jobs += [Job(f"no-{tool}", sc, s, kind=f"no-{tool}") for sc in SCORED for s in ablated]
    return jobs


def run_validation(
    sizes: Sizes | None = None,
    workers: int = 1,
    tick: Callable[[], None] = lambda: None,
    store: JobStore | None = None,
) -> list[Check]:
    """Every check (module doc); with a `store`, finished episodes are kept on disk as they come
    and those it already holds are not played again (`--resume`)."""
    sizes = sizes or Sizes()
    screen = screen_grid(sizes, workers, tick, store)
    results = run_jobs(proof_jobs(sizes, screen), workers, tick, store)
    bad = results.failures()
    if bad:
        return [Check("episodes run", False, f"{bad[0].agent} failed: {bad[0].error}")]
    rules = rule_agents(screen)
    blind = blind_agents(screen)
    seeds, few = sizes.proof, sizes.proof[: sizes.expert]
    registered = (a for a in available() if a not in PLANNERS)
    agents = list(dict.fromkeys([*rules, *blind, *registered]))
    tables = {sc: table(results, sc, agents, seeds) for sc in SUITE}
    experts = {sc: table(results, sc, [*agents, "expert"], few) for sc in SUITE}
    ablation = ablation_costs(results, tables, sizes.proof[: sizes.ablation])
    results.update(run_jobs(expert_ablation_jobs(sizes, ablation), workers, tick, store))
    checks = [Check("the grid's screen (tuning seeds)", True, screen.detail)]
    checks.append(range_check(tables))
    checks.append(ceiling_check(results, experts, rules, few))
    checks.append(blind_check(tables, blind))
    checks += adaptivity_checks(tables, experts, rules)
    checks.append(labels_check(tables, rules))
    if store is not None:
        labels = {sc: Label(r, share) for sc, (r, share) in rule_solvable(tables, rules).items()}
        write_labels(store.path / "labels.json", labels, sizes.proof)
    checks.append(rules_check(tables, rules))
    checks.append(stretch_check(results, experts, rules, few, sizes.proof[: sizes.told]))
    checks.append(reported_check(results, tables, few))
    checks.append(ablation_check(results, ablation, experts, sizes))
    checks.append(dump_check(results, seeds))
    checks.append(outside_check(results, tables))
    checks.append(rules_below_bound_check(tables, rules))
    checks.append(cost_check(results, seeds, few))
    checks.append(determinism_check(results, sizes))
    checks.append(reference_table_check())
    checks.extend(tool_effect_checks())
    return checks


def range_check(tables: dict[str, Table]) -> Check:
    bad = [
        t.scenario
        for t in tables.values()
        if t.scenario in SCORED and (t.range < MIN_RANGE or t.range - t.range_half < MIN_RANGE_LOW)
    ]
    parts = [
        f"{t.scenario}{' (sanity tier)' if t.scenario in SANITY else ''}: noop {t.noop:+.3f} "
        f"bound {t.bound:+.3f} range {t.range:.3f}±{t.range_half:.3f}"
        for t in tables.values()
    ]
    return Check(
        "every scenario has a range (bound - noop >= 0.10, paired CI's lower end >= 0.05)",
        not bad,
        "; ".join(parts) + (f"; too small: {', '.join(bad)}" if bad else ""),
    )


def _best(t: Table, agents: Iterable[str]) -> str:
    return max(agents, key=lambda a: t.normalized[a])


CEILING = (
    f"the expert is the ceiling for honest play (no fixed rule beats it by > {CEILING_SLACK} "
    "of the range with the paired CI's lower end above 0)"
)


def ceiling_check(
    results: Results, experts: dict[str, Table], rules: list[str], few: range
) -> Check:
    """Every fixed rule against the expert on its seeds, paired: a rule above it by more than
    `CEILING_SLACK` of the range, with the CI's lower end above 0, fails the check."""
    failing, parts = [], []
    for scenario in SCORED:
        t = experts[scenario]
        width = max(t.range, 1e-9)
        expert = results.rewards(scenario, "expert", few)
        margins = {rule: paired(results.rewards(scenario, rule, few), expert) for rule in rules}
        best = max(margins, key=lambda r: (margins[r][0], r))
        mean, half = margins[best]
        failing += [
            f"{scenario} {r}"
            for r, (m, h) in margins.items()
            if m / width > CEILING_SLACK and m > h
        ]
        parts.append(
            f"{scenario}: expert {t.normalized['expert']:.2f}, best rule {t.normalized[best]:.2f} "
            f"({best}), rule - expert {mean / width:+.2f}±{half / width:.2f}"
        )
    beaten = f"; beaten: {', '.join(failing)}" if failing else ""
    return Check(f"{CEILING} ({len(few)} paired seeds)", not failing, "; ".join(parts) + beaten)


BLIND = (
    f"blind rules (no per-session signal) stay <= {BLIND_LIMIT} of the range on each named regime"
)


def blind_check(tables: dict[str, Table], blind: list[str]) -> Check:
    """The best blind rule on each named regime stays at or below `BLIND_LIMIT`."""
    best = {sc: _best(tables[sc], blind) for sc in NAMED}
    over = [sc for sc, rule in best.items() if tables[sc].normalized[rule] > BLIND_LIMIT]
    detail = "; ".join(f"{sc} {tables[sc].normalized[r]:.2f} ({r})" for sc, r in best.items())
    return Check(f"{BLIND} ({len(blind)} rules)", not over, detail)


def adaptivity_checks(
    tables: dict[str, Table], experts: dict[str, Table], rules: list[str]
) -> list[Check]:
    fixed = [r for r in rules if r != ANCHOR]  # the anchor is one of them per scenario
    winners = {sc: _best(tables[sc], fixed) for sc in SCORED}
    distinct = sorted(set(winners.values()))
    expert_mean = float(np.mean([experts[sc].normalized["expert"] for sc in SCORED]))
    averages = {r: float(np.mean([experts[sc].normalized[r] for sc in SCORED])) for r in fixed}
    single = max(averages, key=lambda r: averages[r])
    return [
        Check(
            f"the winning fixed rule differs across scenarios (>= {WINNERS} winners)",
            len(distinct) >= WINNERS,
            f"{len(distinct)} winners: " + "; ".join(f"{sc} {w}" for sc, w in winners.items()),
        ),
        Check(
            f"reported: the best single fixed rule's average vs the expert's (a gate of "
            f">= {SINGLE_RULE_GAP} below it until suite v4)",
            True,
            f"expert {expert_mean:.2f}, best single rule {averages[single]:.2f} ({single}) on "
            f"the expert's seeds; gap {expert_mean - averages[single]:+.2f}",
        ),
    ]


LABELS = f"labels: rule-solvable scenarios (best fixed rule >= {RULE_SOLVABLE} of the range)"


def rule_solvable(tables: dict[str, Table], rules: list[str]) -> dict[str, tuple[str, float]]:
    """Counted scenario -> (its best fixed rule, that rule's share of the range), for those whose
    best fixed rule reaches `RULE_SOLVABLE`."""
    fixed = [r for r in rules if r != ANCHOR]
    out = {}
    for scenario in SCORED:
        best = _best(tables[scenario], fixed)
        if tables[scenario].normalized[best] >= RULE_SOLVABLE:
            out[scenario] = (best, tables[scenario].normalized[best])
    return out


def labels_check(tables: dict[str, Table], rules: list[str]) -> Check:
    labels = rule_solvable(tables, rules)
    detail = "; ".join(f"{sc}: {rule} ({share:.2f})" for sc, (rule, share) in labels.items())
    return Check(LABELS, True, detail or "none")


def rules_check(tables: dict[str, Table], rules: list[str]) -> Check:
    fixed = [r for r in rules if r != ANCHOR]
    averages = {r: float(np.mean([tables[sc].normalized[r] for sc in SCORED])) for r in fixed}
    top = max(averages, key=lambda r: averages[r])
    highs = {sc: _best(tables[sc], fixed) for sc in SCORED}
    detail = f"best average {averages[top]:.2f} ({top}); per scenario: " + "; ".join(
        f"{sc} {tables[sc].normalized[r]:.2f} ({r})" for sc, r in highs.items()
    )
    return Check(
        f"reported: the best fixed rule of at most two lines, on average and per scenario (a gate "
        f"of <= {RULE_AVERAGE} and <= {RULE_ANY} until suite v4; {len(fixed)} rules)",
        True,
        detail,
    )


def term_split(
    results: Results, scenario: str, a: str, b: str, seeds: Iterable[int], width: float
) -> str:
    """How much of a - b each rubric term carries, as shares of the range."""
    seeds = list(seeds)
    parts = []
    for name, weight in DEFAULT_WEIGHTS.items():
        ours, theirs = (results.components(scenario, x, seeds, name) for x in (a, b))
        diff = np.mean([x - y for x, y in zip(ours, theirs, strict=True)])
        if abs(weight * diff / width) >= 0.005:
            parts.append(f"{name.split('_')[0]} {weight * diff / width:+.2f}")
    return ", ".join(parts) or "none"


def stretch_check(
    results: Results, experts: dict[str, Table], rules: list[str], few: range, told: range
) -> Check:
    lines, wide = [], 0
    for scenario in SCORED:
        t = experts[scenario]
        best = _best(t, rules)
        gap = t.normalized["expert"] - t.normalized[best]
        wide += gap >= STRETCH_GAP
        told_gap, _ = paired(
            results.rewards(scenario, "told-pauses", told),
            results.rewards(scenario, "expert", told),
        )
        rule_split = term_split(results, scenario, "expert", best, few, t.range)
        bound_split = term_split(results, scenario, "bound", "expert", few, t.range)
        lines.append(
            f"{scenario}: expert - {best} {gap:+.2f} ({rule_split}); "
            f"bound - expert {1 - t.normalized['expert']:.2f} ({bound_split}); "
            f"told pauses - expert {told_gap / t.range:+.2f}"
        )
    return Check(
        f"stretch (reported): expert - best rule >= {STRETCH_GAP} on {wide} of "
        f"{STRETCH_SCENARIOS} scenarios asked",
        True,
        "; ".join(lines),
    )


def reported_check(results: Results, tables: dict[str, Table], few: range) -> Check:
    parts = []
    for scenario in SCORED:
        t = tables[scenario]
        seeds = range(few.start, few.start + len(few))
        items = []
        for agent in REPORTED:
            m_noop, h_noop = paired(
                results.rewards(scenario, agent, seeds), results.rewards(scenario, "noop", seeds)
            )
            m_exp, h_exp = paired(
                results.rewards(scenario, agent, seeds),
                results.rewards(scenario, "expert", seeds),
            )
            items.append(
                f"{agent} {t.normalized[agent]:.2f} (vs noop {m_noop:+.3f}±{h_noop:.3f}, "
                f"vs expert {m_exp:+.3f}±{h_exp:.3f})"
            )
        parts.append(f"{scenario}: " + ", ".join(items))
    return Check(
        "reported: vllm-default, the classic orders, learned, min-waste", True, "; ".join(parts)
    )


def _uses(results: Results, scenario: str, agent: str, tool: str, seeds: Iterable[int]) -> bool:
    counter = ACTIONS[tool].counter
    return any(calls > 0 for calls in results.metrics(scenario, agent, seeds, counter))


def ablation_costs(
    results: Results, tables: dict[str, Table], seeds: range
) -> dict[str, dict[str, float]]:
    """Tool -> scenario -> (bound - the best of the bound with it masked and every registered
    policy that never used it) / range."""
    costs: dict[str, dict[str, float]] = {tool: {} for tool in TOOLS}
    registered = [a for a in available() if a not in PLANNERS]
    for scenario in SCORED:
        width = tables[scenario].range
        if width <= 0:
            continue
        bound = float(np.mean(results.rewards(scenario, "bound", seeds)))
        for tool in TOOLS:
            rivals = [f"no-{tool}"] + [
                a for a in registered if not _uses(results, scenario, a, tool, seeds)
            ]
            best = max(float(np.mean(results.rewards(scenario, a, seeds))) for a in rivals)
            costs[tool][scenario] = (bound - best) / width
    return costs


def expert_ablation_jobs(sizes: Sizes, costs: dict[str, dict[str, float]]) -> list[Job]:
    """Each tool masked from the expert on the scenario where masking it costs the bound most."""
    seeds = sizes.proof[: sizes.expert_ablation]
    jobs = []
    for tool, per in costs.items():
        if per:
            scenario = max(per, key=lambda sc: per[sc])
            jobs += [Job(f"expert-no-{tool}", scenario, s, kind=f"expert-no-{tool}") for s in seeds]
    return jobs


def ablation_check(
    results: Results, costs: dict[str, dict[str, float]], experts: dict[str, Table], sizes: Sizes
) -> Check:
    seeds = sizes.proof[: sizes.expert_ablation]
    passed, parts = True, []
    for tool, per in costs.items():
        scenario = max(per, key=lambda sc: per[sc]) if per else SCORED[0]
        width = experts[scenario].range
        loss, half = paired(
            results.rewards(scenario, "expert", seeds),
            results.rewards(scenario, f"expert-no-{tool}", seeds),
        )
        expert_cost = loss / width if width > 0 else 0.0
        passed &= per.get(scenario, 0.0) >= ABLATION_COST
        parts.append(
            f"without {tool}: bound max {per.get(scenario, 0.0):.2f} on {scenario}, expert "
            f"{expert_cost:.2f}±{half / max(width, 1e-9):.2f} there (reported) ("
            + ", ".join(f"{sc} {c:.2f}" for sc, c in per.items())
            + ")"
        )
    return Check(
        f"each tool matters: the bound loses >= {ABLATION_COST} of the range without it on some "
        f"scenario ({sizes.ablation} seeds; the expert's loss there reported, "
        f"{sizes.expert_ablation} seeds)",
        passed,
        "; ".join(parts),
    )


def dump_check(results: Results, seeds: range) -> Check:
    diffs = [_dump_gain(results, sc, s) for sc in SUITE for s in seeds]
    mean, half = mean_ci(diffs)
    return Check(
        "a last-turn dump on the bound's trajectory gains <= 0 on average",
        mean <= 0,
        f"{mean:+.4f}±{half:.4f} over {len(diffs)} episodes; largest {max(diffs):+.4f}",
    )


def _dump_gain(results: Results, scenario: str, seed: int) -> float:
    bound = results[scenario, "bound", seed]
    if bound.dump_reward is None or bound.reward is None:
        raise ValueError(f"the bound on {scenario} seed {seed} has no dump reward")
    return bound.dump_reward - bound.reward


def outside_check(results: Results, tables: dict[str, Table]) -> Check:
    above = [
        f"{agent} on {sc} ({t.normalized[agent]:.3f})"
        for sc, t in tables.items()
        for agent in t.normalized
        if t.normalized[agent] > 1 + 1e-9 and agent in available()
    ]
    registered = [a for a in available() if a not in PLANNERS]
    return Check(
        "no registered policy beats the bound on the mean",
        not above,
        "; ".join(above) or f"{len(registered)} policies x {len(SUITE)} scenarios",
    )


RULES_BELOW_BOUND = "no fixed rule beats the bound on the mean (the bound is the ceiling)"


def rules_below_bound_check(tables: dict[str, Table], rules: list[str]) -> Check:
    """The fixed rules taken to the proof block (the grid's best included, which are not
    registered policies) stay at or below the bound, so that normalizing to it is sound."""
    above = [
        f"{rule} on {sc} ({t.normalized[rule]:.3f})"
        for sc, t in tables.items()
        for rule in rules
        if t.normalized[rule] > 1 + 1e-9
    ]
    return Check(
        RULES_BELOW_BOUND,
        not above,
        "; ".join(above) or f"{len(rules)} rules x {len(tables)} scenarios",
    )


def cost_check(results: Results, seeds: range, few: range) -> Check:
    def median(agent: str, scenario: str, over: range) -> float:
        return float(np.median([results[scenario, agent, s].seconds for s in over]))

    plays = [results[sc, "expert", s].plays for sc in SUITE for s in few]
    return Check(
        "CPU seconds per episode (reported; medians)",
        True,
        "bound: "
        + ", ".join(f"{sc} {median('bound', sc, seeds):.1f}" for sc in SUITE)
        + "; expert: "
        + ", ".join(f"{sc} {median('expert', sc, few):.1f}" for sc in SUITE)
        + f"; expert play-outs per episode: median {np.median(plays):.0f}",
    )


def determinism_check(results: Results, sizes: Sizes) -> Check:
    seeds = sizes.proof[: min(2, sizes.episodes)]
    same = [
        run_job(Job(agent, sc, s)).fingerprint() == results[sc, agent, s].fingerprint()
        for agent, sc in DETERMINISM_JOBS
        for s in seeds
    ]
    for kind, scenario in (("bound", "hard"), ("expert", "agent-tools")):
        again = run_job(Job(kind, scenario, seeds[0], kind=kind))
        same.append(again.fingerprint() == results[scenario, kind, seeds[0]].fingerprint())
    return Check(
        "determinism (reruns give byte-identical results)",
        all(same),
        f"{sum(same)}/{len(same)} reruns identical (the bound and the expert included)",
    )


REFERENCE_TABLE_CHECK = "the shipped reference table is current and equals the computed reference"


def reference_table_check(seeds: Iterable[int] = (0,)) -> Check:
    """The table `eval` and `report` use in place of computing noop and the bound: made by this
    code (its digest) and equal, record for record, to what is computed here now."""
    from .reference_table import AGENTS, shipped, status

    shipped_table = shipped()
    if shipped_table is None or not shipped_table.current:
        return Check(REFERENCE_TABLE_CHECK, False, status())
    compared = different = 0
    for scenario in ("medium", "chat-human"):
        for agent in AGENTS:
            for seed in seeds:
                stored = shipped_table.records.get((agent, scenario, seed))
                if stored is None:
                    continue
                kind = "bound" if agent == "bound" else "policy"
                computed = run_job(Job(agent, scenario, seed, kind=kind)).record_digest
                compared += 1
                different += record_digest(stored) != computed
    detail = f"{compared} records compared, {different} differ; {status()}"
    return Check(REFERENCE_TABLE_CHECK, compared > 0 and different == 0, detail)


def tool_effect_checks(seeds: Iterable[int] = range(5)) -> list[Check]:
    """Each tool on a running and on a paused sequence does what the documentation says."""
    outcomes: dict[str, list[bool]] = {
        "compress": [],
        "swap running": [],
        "swap paused": [],
        "evict paused": [],
        "evict shared prefix": [],
    }
    for seed in seeds:
        sim = Simulator(get_scenario("hard"), seed)
        while not sim.engine.paused and not sim.done:
            sim.step()
        if sim.done:
            continue
        for name, seen in _tool_effects(sim).items():
            outcomes[name].append(seen)
        sim.check_invariants()
    return [
        Check(
            f"tool effect: {name}",
            bool(seen) and all(seen),
            f"{sum(seen)}/{len(seen)} episodes",
        )
        for name, seen in outcomes.items()
    ]


def _tool_effects(sim: Simulator) -> dict[str, bool]:
    """Apply each tool once to a fitting sequence of `sim` (one with paused sessions) and say
    whether its effect is the documented one; a tool with no fitting sequence is left out."""
    engine = sim.engine
    seen: dict[str, bool] = {}
    big = max(engine.running, key=lambda s: s.gpu_blocks)
    sim.apply(compress(big.seq_id))
    sim.apply(compress(big.seq_id))
    seen["compress"] = (
        big.quantization_level == "int4"
        and big.gpu_blocks == engine.kv.blocks_for(big)
        and not sim.apply(compress(big.seq_id)).ok
    )
    paused = [s for s in engine.paused if s.status is Status.PAUSED and s.gpu_blocks]
    if paused:
        target = paused[0]
        before, blocks = engine.kv.pool.available, engine.kv.freeable_blocks(target)
        ok = sim.apply(swap(target.seq_id)).ok
        seen["swap paused"] = (
            ok
            and target.status is Status.SWAPPED
            and engine.kv.pool.available - before == blocks
            and target.cpu_blocks > 0
        )
    if len(paused) > 1:
        target = paused[1]
        before, blocks = engine.kv.pool.available, engine.kv.freeable_blocks(target)
        ok = sim.apply(evict(target.seq_id)).ok
        seen["evict paused"] = (
            ok
            and target.status is Status.DISCARDED
            and engine.kv.pool.available - before == blocks
            and not sim.apply(evict(target.seq_id)).ok
        )
    running = [s for s in engine.running if s is not big and s.gpu_blocks]
    if running:
        target = running[0]
        blocks = target.gpu_blocks
        ok = sim.apply(swap(target.seq_id)).ok
        seen["swap running"] = (
            ok
            and target.status is Status.WAITING
            and target.cpu_blocks == blocks
            and engine.waiting[0] is target
        )
    counts = engine.kv.pool.ref_counts
    shared = [
        s
        for s in engine.running
        if s.prefix_held and all(counts[h] > 1 for h in s.request.prefix_hashes)
    ]
    if shared:
        victim = shared[0]
        before, private = engine.kv.pool.available, victim.gpu_blocks
        refs = {h: counts[h] for h in victim.request.prefix_hashes}
        ok = sim.apply(evict(victim.seq_id)).ok
        after = engine.kv.pool.ref_counts  # (a count taken now: the pool derives it)
        seen["evict shared prefix"] = (
            ok
            and engine.kv.pool.available - before == private
            and all(after[h] == refs[h] - 1 for h in refs)
        )
    return seen
