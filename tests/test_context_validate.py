"""`kvarena validate`'s context section at CI size: 2 paired seeds per level on a block of its
own (never the proof block), the probe trained on 20 episodes, on two workers. Every check
runs; the figures that need no more episodes hold (the fake readers earn nothing, on an empty
cache and on the oracle's, and sit far below the oracle reading the same cache; the oracle's
accuracy, determinism, the parser's recall and precision, novelty); the attacks' shares are
only reported here (their criteria need the full 50 episodes), but the reference and the
oracle must already sit above every attack on both judged levels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.common.edge import InputError
from evals.context import validate
from evals.context.validate import (
    ATTACKS,
    CHECK_SEED,
    JUDGED,
    MAX_ATTACK,
    PROOF_SEED,
    REFERENCE,
    SHAPE_ABLATIONS,
    SHAPE_READER,
    context_store,
    context_validation_jobs,
    echo_reader,
    run_context_validation,
)

# scripts/test spreads the suite over xdist workers; one worker takes this whole module, so the
# module's `checks` (context validate at CI size, ~1 min) is built once.
pytestmark = pytest.mark.xdist_group("context-validate-ci")

EPISODES = 2


def test_echo_reader_rephrases_the_question() -> None:
    assert echo_reader(None, "Right, how early is the locksmith?") == "how early is the locksmith"  # type: ignore[arg-type]


def test_the_test_block_is_not_the_proof_block() -> None:
    proof = {job.seed for job in context_validation_jobs(50)}
    check = {job.seed for job in context_validation_jobs(EPISODES, CHECK_SEED)}
    assert min(proof) == PROOF_SEED and not proof & check


SIZES = {"probe_episodes": 20, "first_seed": CHECK_SEED}


@pytest.fixture(scope="module")
def kept_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the module's run keeps its finished episodes (`--out`)."""
    return tmp_path_factory.mktemp("validate") / "context"


@pytest.fixture(scope="module")
def checks(kept_in: Path) -> list:
    ticks: list[int] = []
    store = context_store(kept_in, EPISODES, resume=False, **SIZES)
    out = run_context_validation(  # two workers: the probe trains beside the other agents
        EPISODES, 2, lambda: ticks.append(1), auc_episodes=4, store=store, **SIZES
    )
    store.close()
    assert len(ticks) == len(context_validation_jobs(EPISODES, CHECK_SEED))
    return out


def _mean(check, agent: str) -> float:  # type: ignore[no-untyped-def]
    match = re.search(rf"{re.escape(agent)} ([-+]\d\.\d+)", check.detail)
    assert match, check
    return float(match.group(1))


def test_every_attack_and_the_reference_are_measured_and_ordered(checks) -> None:  # type: ignore[no-untyped-def]
    names = {c.name: c for c in checks}
    for level in JUDGED:
        for attack in ATTACKS:
            name = f"context {attack} closes <= {MAX_ATTACK:.0%} of noop->oracle on {level}"
            assert name in names
        assert f"context {SHAPE_READER} closes <= 40% of noop->oracle on {level} " in {
            n[: len(f"context {SHAPE_READER} closes <= 40% of noop->oracle on {level} ")]
            for n in names
        }
        ablation = names[f"context {SHAPE_READER} with each shape rule off on {level} (reported)"]
        assert ablation.detail.count("without ") == len(SHAPE_ABLATIONS), ablation.detail
        reference = names[f"context {REFERENCE} closes >= 80% of noop->oracle on {level}"]
        ordering = names[f"context ordering on {level} (reported)"]
        best = [_mean(ordering, a) for a in ("oracle", REFERENCE)]
        for attack in ATTACKS:
            assert best[0] > best[1] > _mean(ordering, attack), ordering.detail
        assert _mean(ordering, REFERENCE) > _mean(ordering, "noop"), reference.detail


def test_readers_oracle_parser_novelty_and_determinism_hold_at_ci_size(checks) -> None:  # type: ignore[no-untyped-def]
    margins = [c for c in checks if "evict-all" in c.name]
    assert len(margins) == 3 * len(JUDGED)
    for check in margins:  # the value check pays an echo, a refusal or everything nothing
        match = re.search(
            r"paired difference ([-+]\d\.\d+) .*\(([-+]\d\.\d+) vs noop", check.detail
        )
        # evict-all earns nothing with them; noop itself earns about nothing now (its LRU
        # answers no soon ask and pays for its forced evictions), so the sign of the
        # difference is noise: the margin is reported, not asserted
        assert match and float(match.group(2)) <= 0.0, check
    on_oracle = [c for c in checks if "on the oracle's cache" in c.name]
    assert len(on_oracle) == 3 * len(JUDGED)
    for check in on_oracle:  # the asked sentence is in view, and still earns them nothing
        quality = re.search(r"answer quality ([-+]\d\.\d+)", check.detail)
        assert check.passed and quality and float(quality.group(1)) <= 0.0, check
    for name in (
        "context oracle value accuracy",
        "context novelty: ",
        "context signal phrasing: ",
        "context determinism",
    ):
        (check,) = [c for c in checks if c.name.startswith(name)]
        assert check.passed, check
    parser = next(c for c in checks if "template parser statement recall" in c.name)
    recall, precision = map(float, re.findall(r"(?:recall|precision) (\d\.\d+)", parser.detail))
    assert recall >= 0.9 and precision >= 0.9, parser.detail
    closed = [c for c in checks if "closed-signal-reader" in c.name]
    assert len(closed) == len(JUDGED) and all("against the reference's" in c.detail for c in closed)
    auc = next(c for c in checks if "AUC" in c.name)
    assert float(auc.detail.split()[0]) > 0.5, auc.detail


def test_validate_rejects_an_unknown_family() -> None:
    result = CliRunner().invoke(app, ["validate", "--family", "both", "-n", "2"])
    assert result.exit_code == 2 and "--family" in result.output


def test_a_stopped_validation_resumes_without_playing_its_finished_episodes(
    checks, kept_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    episodes = kept_in / "episodes.jsonl"
    lines = episodes.read_text().splitlines(keepends=True)
    cut = [json.loads(line)["job"] for line in lines[-3:]]
    episodes.write_text("".join(lines[:-3]) + '{"job": ["noop", "extra')  # cut by a kill
    played: list[list] = []
    real = validate.run_context_jobs

    def counted(jobs, probe=None):  # type: ignore[no-untyped-def]
        played.extend([*job.key] for job in jobs)
        return real(jobs, probe)

    monkeypatch.setattr(validate, "run_context_jobs", counted)
    store = context_store(kept_in, EPISODES, resume=True, **SIZES)
    assert store.skipped_lines == 1 and len(store.done) == len(lines) - 3
    again = run_context_validation(EPISODES, 1, auc_episodes=4, store=store, **SIZES)
    store.close()
    assert sorted(played) == sorted(cut)  # only the jobs the first run had not kept
    assert [(c.name, c.passed, c.detail) for c in again] == [
        (c.name, c.passed, c.detail) for c in checks
    ]


def test_a_validation_run_is_resumed_only_as_it_was_started(tmp_path: Path) -> None:
    context_store(tmp_path, 3, resume=False).close()
    with pytest.raises(InputError, match="already holds a validation run"):
        context_store(tmp_path, 3, resume=False)
    with pytest.raises(InputError, match=r"cannot resume .*sizes"):
        context_store(tmp_path, 4, resume=True)
