"""`kvarena validate`, context section (issue 16): the checks that the conversation-context
family pays for judgment and not for tricks. Paired seeds 0..episodes-1 on `medium` and `hard`,
the extractive reader unless stated:

- each keyless one-liner (`oneliners`: fact-shaped-sentence regex, role order,
  digit/name protection, recall with the question's words) and the bag-of-words probe (trained
  on seeds 1000-1999, disjoint from the test seeds) closes at most 70% of the noop -> oracle
  gap in mean reward;
- evict-all with an echo reader (rephrases the question, reads nothing) and with an "I don't
  know" reader score at least 0.3 below `noop`: the whole 95% CI of the paired difference lies
  below -0.3;
- the oracle, built from the answer key alone, scores at least as much as every baseline and
  one-liner on every episode;
- sizing: the statements (facts, stale values, distractors, details nobody asks about) take at
  least 1.5x the budget on hard and more than it on medium (smallest episode), while the oracle
  keeps value accuracy >= 0.9;
- determinism: rerunning episodes gives byte-identical results.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from kv_cache_env.context.conversation import LEVELS, generate_conversation, statement_blocks
from kv_cache_env.context.episode import ContextEpisode
from kv_cache_env.context.extractive import NO_ANSWER, extractive_answer

from ..common.results import dumps
from ..common.stats import mean_ci
from ..serving.validate import Check
from .oneliners import ONE_LINERS, BowProbe, probe_policy, train_probe
from .policies import CONTEXT_POLICIES, ContextPolicy
from .run import context_result

JUDGED = ("medium", "hard")
BASELINES = ("noop", "trt-lru", "sliding-window", "sink-recent", "window-recall")
RULES = ("fact-regex", "role-order", "digit-name", "recall-qwords", "bow-probe")
MAX_GAP_CLOSED = 0.7
NOOP_MARGIN = 0.3
PROBE_SEEDS = range(1000, 2000)

Reader = Callable[[ContextEpisode, str], str]


def _extractive(episode: ContextEpisode, question: str) -> str:
    return extractive_answer(episode.visible_text(), question)


_ASKED = re.compile(r"\b(my|[A-Z][a-z]+'s)\s+(.+?)(?:\s+(?:is|was|again)\b|\?|$)")


def echo_reader(episode: ContextEpisode, question: str) -> str:
    """Rephrases the question as the start of an answer and reads nothing: "What is my
    locker code?" -> "your locker code is"."""
    parts = [
        f"{'your' if owner == 'my' else owner} {what} is"
        for owner, what in _ASKED.findall(question.split(" and ")[0])
    ]
    return parts[0] if parts else question.rstrip("?")


def idk_reader(episode: ContextEpisode, question: str) -> str:
    return NO_ANSWER


READERS: dict[str, Reader] = {"extractive": _extractive, "echo": echo_reader, "idk": idk_reader}


@dataclass(frozen=True)
class ContextJob:
    agent: str
    reader: str
    level: str
    seed: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return self.agent, self.reader, self.level, self.seed


def context_validation_jobs(episodes: int) -> list[ContextJob]:
    agents = [*BASELINES, "oracle", *RULES]
    jobs = [
        ContextJob(agent, "extractive", level, seed)
        for level in JUDGED
        for agent in agents
        for seed in range(episodes)
    ]
    jobs += [
        ContextJob("evict-all", reader, level, seed)
        for level in JUDGED
        for reader in ("echo", "idk")
        for seed in range(episodes)
    ]
    return jobs


_PROBE: BowProbe | None = None


def _set_probe(probe: BowProbe) -> None:
    global _PROBE
    _PROBE = probe


def _policy(agent: str) -> ContextPolicy:
    if agent == "bow-probe":
        assert _PROBE is not None, "the probe is trained before the jobs run"
        return probe_policy(_PROBE)
    if agent in ONE_LINERS:
        return ONE_LINERS[agent]
    return CONTEXT_POLICIES[agent]


def run_context_job(job: ContextJob) -> dict[str, Any]:
    policy, reader = _policy(job.agent), READERS[job.reader]
    with ContextEpisode(generate_conversation(job.seed, job.level)) as episode:
        while not episode.done:
            policy(episode)
            episode.enforce()
            question = episode.pending_question
            episode.step(answer=reader(episode, question.text) if question else None)
        record = episode.record()
    return context_result(
        agent=job.agent, reader=job.reader, level=job.level, seed=job.seed, record=record
    )


def _run(
    jobs: list[ContextJob], workers: int, probe: BowProbe, tick: Callable[[], None]
) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    _set_probe(probe)
    out: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    if workers <= 1:
        for job in jobs:
            out[job.key] = run_context_job(job)
            tick()
        return out
    with ProcessPoolExecutor(workers, initializer=_set_probe, initargs=(probe,)) as pool:
        for job, result in zip(jobs, pool.map(run_context_job, jobs, chunksize=4), strict=True):
            out[job.key] = result
            tick()
    return out


def run_context_validation(
    episodes: int,
    workers: int = 1,
    tick: Callable[[], None] = lambda: None,
    probe_seeds: Iterable[int] = PROBE_SEEDS,
) -> list[Check]:
    """The context section's checks at `episodes` paired seeds per level. `probe_seeds` are
    the probe's training seeds (CI uses fewer than the default 1000)."""
    if episodes < 2:
        raise ValueError("the context checks need at least 2 episodes per level")
    probe_seeds = list(probe_seeds)
    if set(probe_seeds) & set(range(episodes)):
        raise ValueError("the probe's training seeds must not overlap the test seeds")
    probe = train_probe(probe_seeds, JUDGED)
    table = _Table(_run(context_validation_jobs(episodes), workers, probe, tick), episodes)
    return [
        *_one_liner_checks(table),
        *_reader_checks(table),
        _oracle_check(table),
        *_sizing_checks(table),
        *_ordering_checks(table),
        _determinism_check(table),
    ]


@dataclass(frozen=True)
class _Table:
    """The validation run's results by (agent, reader, level, seed), on seeds 0..episodes-1."""

    results: dict[tuple[str, str, str, int], dict[str, Any]]
    episodes: int

    def rewards(self, agent: str, level: str, reader: str = "extractive") -> list[float]:
        return [self.results[agent, reader, level, s]["reward"] for s in range(self.episodes)]

    def mean(self, agent: str, level: str, reader: str = "extractive") -> float:
        return mean_ci(self.rewards(agent, level, reader))[0]

    def metric(self, agent: str, level: str, name: str) -> float:
        values = [
            self.results[agent, "extractive", level, s]["metrics"][name]
            for s in range(self.episodes)
        ]
        return sum(values) / len(values)


def _one_liner_checks(t: _Table) -> list[Check]:
    checks = []
    for level in JUDGED:
        noop, oracle = t.mean("noop", level), t.mean("oracle", level)
        gap = oracle - noop
        for rule in RULES:
            closed = (t.mean(rule, level) - noop) / gap if gap > 0 else float("inf")
            checks.append(
                Check(
                    f"context {rule} closes <= {MAX_GAP_CLOSED:.0%} of noop->oracle on {level}",
                    closed <= MAX_GAP_CLOSED,
                    f"{rule} {t.mean(rule, level):+.3f} (value acc "
                    f"{t.metric(rule, level, 'value_accuracy'):.2f}) closes {closed:.0%} of noop "
                    f"{noop:+.3f} -> oracle {oracle:+.3f}",
                )
            )
    return checks


def _reader_checks(t: _Table) -> list[Check]:
    checks = []
    for level in JUDGED:
        for reader in ("echo", "idk"):
            pairs = zip(
                t.rewards("evict-all", level, reader), t.rewards("noop", level), strict=True
            )
            diff, half = mean_ci([a - b for a, b in pairs])
            checks.append(
                Check(
                    f"context evict-all + {reader} >= {NOOP_MARGIN} below noop on {level}",
                    diff + half <= -NOOP_MARGIN,
                    f"paired difference {diff:+.3f} [{diff - half:+.3f}, {diff + half:+.3f}] "
                    f"({t.mean('evict-all', level, reader):+.3f} vs noop "
                    f"{t.mean('noop', level):+.3f})",
                )
            )
    return checks


def _oracle_check(t: _Table) -> Check:
    others = [*BASELINES, *RULES]
    margins = [
        t.results["oracle", "extractive", level, s]["reward"]
        - max(t.results[a, "extractive", level, s]["reward"] for a in others)
        for level in JUDGED
        for s in range(t.episodes)
    ]
    return Check(
        "context oracle >= every baseline and one-liner, per episode",
        min(margins) >= -1e-12,
        f"{len(margins)} episodes x {len(others)} agents; smallest margin "
        f"{min(margins):+.4f}, mean {sum(margins) / len(margins):+.4f}",
    )


def _sizing_checks(t: _Table) -> list[Check]:
    checks = []
    for level, need in (("medium", 1.0), ("hard", 1.5)):
        budget = LEVELS[level].max_blocks
        ratios = [
            statement_blocks(generate_conversation(s, level)) / budget for s in range(t.episodes)
        ]
        accuracy = t.metric("oracle", level, "value_accuracy")
        strict = level == "medium"
        ok = (min(ratios) > need if strict else min(ratios) >= need) and accuracy >= 0.9
        checks.append(
            Check(
                f"context sizing on {level}: statements {'>' if strict else '>='} {need}x "
                "budget, oracle value acc >= 0.9",
                ok,
                f"statements / budget {min(ratios):.2f}x (smallest) "
                f"{sum(ratios) / len(ratios):.2f}x (mean) of {budget} blocks; oracle value "
                f"accuracy {accuracy:.3f}",
            )
        )
    return checks


def _ordering_checks(t: _Table) -> list[Check]:
    agents = [*BASELINES, *RULES, "oracle"]
    return [
        Check(
            f"context ordering on {level} (reported)",
            True,
            " > ".join(
                f"{a} {t.mean(a, level):+.3f}"
                for a in sorted(agents, key=lambda a: -t.mean(a, level))
            ),
        )
        for level in JUDGED
    ]


def _determinism_check(t: _Table) -> Check:
    reruns = [
        ContextJob(agent, "extractive", level, seed)
        for agent, level in (("oracle", "hard"), ("bow-probe", "medium"), ("recall-qwords", "hard"))
        for seed in range(min(2, t.episodes))
    ]
    same = [dumps(run_context_job(job)) == dumps(t.results[job.key]) for job in reruns]
    return Check(
        "context determinism (rerun gives byte-identical results)",
        all(same),
        f"{sum(same)}/{len(same)} reruns identical",
    )
