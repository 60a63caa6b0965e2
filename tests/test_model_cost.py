"""`kvarena eval --model ... --dry-run` against real runs on the keyless policy server (loopback
HTTP, the official SDKs): the estimate's calls are exact, its input tokens match a run of the
same agent, and a run prints its own totals the same way at its end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evals.cli import app
from evals.prompt_cache.dollars import usage_cost
from evals.prompt_cache.provider import Prices
from evals.servers.policy_server import PolicyServer
from evals.serving.jobs import EpisodeJob
from evals.serving.model_cost import STAND_IN, Totals, estimate, eval_prices, run_totals
from evals.serving.model_eval import ModelSpec, run_model_jobs
from kv_cache_env.episodes import EpisodeSpec
from kv_cache_env.sim import SCENARIOS

runner = CliRunner()
JOBS = [EpisodeJob("m", EpisodeSpec(scenario, 0)) for scenario in ("easy", "hard")]
CALLS = SCENARIOS["easy"].steps + SCENARIOS["hard"].steps


def _run(spec: ModelSpec) -> Totals:
    results: list[dict[str, Any]] = []
    asyncio.run(run_model_jobs(JOBS, spec, concurrency=1, on_result=lambda r, t: results.append(r)))
    return run_totals(results)


def _anthropic(server: PolicyServer) -> ModelSpec:
    # the server's Messages route bills with the provider-cache model over the request it got
    # (a 1,024-token minimum, the default of an unknown model's name)
    return ModelSpec(name="served", api="anthropic", base_url=server.anthropic_base_url)


def test_the_estimate_matches_a_run_of_the_same_agent_with_prompt_caching() -> None:
    with PolicyServer(STAND_IN) as server:
        spec = _anthropic(server)
        run = _run(spec)
    guess = estimate(JOBS, spec)
    assert (guess.episodes, guess.calls) == (run.episodes, run.calls) == (2, CALLS)
    # the same conversation, billed from the OpenAI-shaped messages here and from the
    # Anthropic-shaped body there: within 1% (measured 0.05%), the cache's split too
    assert guess.input_tokens == pytest.approx(run.input_tokens, rel=0.01)
    assert guess.cached_input_tokens == pytest.approx(run.cached_input_tokens, rel=0.01)
    assert guess.cache_write_input_tokens == pytest.approx(run.cache_write_input_tokens, rel=0.02)
    assert 0 < guess.cache_write_input_tokens < guess.cached_input_tokens  # history read back
    # output: the same tool calls, counted from another body shape
    assert guess.output_tokens == pytest.approx(run.output_tokens, rel=0.2)


def test_another_agent_changes_the_tokens_but_not_the_calls() -> None:
    # headroom calls the most tools of the servable rules: longer histories, far more output
    with PolicyServer("headroom") as server:
        spec = _anthropic(server)
        run = _run(spec)
    guess = estimate(JOBS, spec)
    assert guess.calls == run.calls == CALLS
    assert 0.75 * run.input_tokens < guess.input_tokens < run.input_tokens  # measured 0.84
    assert guess.output_tokens < run.output_tokens


def test_without_breakpoints_every_input_token_is_fresh() -> None:
    spec = ModelSpec(name="gpt-4.1-mini")  # the OpenAI API: the client places none
    guess = estimate(JOBS[:1], spec)
    assert guess.calls == SCENARIOS["easy"].steps
    assert guess.cached_input_tokens == guess.cache_write_input_tokens == 0
    windowed = estimate(JOBS[:1], ModelSpec(name="gpt-4.1-mini", history_turns=0))
    assert windowed.calls == guess.calls and windowed.input_tokens < guess.input_tokens / 2


def test_prices_default_and_price_output() -> None:
    assert eval_prices(None, None, None, None) is None
    assert eval_prices(2, None, None, None) == Prices(2, 2, 2, 0)
    assert eval_prices(3, 15, 0.3, 3.75) == Prices(3, 0.3, 3.75, 15)
    with pytest.raises(ValueError, match="need --price-in"):
        eval_prices(None, 15, None, None)
    usage = {
        "input_tokens": 3_000_000,
        "cached_input_tokens": 1_000_000,
        "cache_write_input_tokens": 1_000_000,
        "output_tokens": 1_000_000,
    }
    # fresh 1M x 3 + read 1M x 0.3 + written 1M x 3.75 + output 1M x 15
    assert usage_cost(usage, Prices(3, 0.3, 3.75, 15)) == pytest.approx(22.05)
    assert usage_cost(usage, Prices(3, 0.3, 3.75)) == pytest.approx(7.05)  # report: input only


def _figures(output: str) -> dict[str, str]:
    """The table's rows by figure name (the first line of each value)."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 4 and cells[1] and cells[1] != "figure":
            rows[cells[1]] = cells[2]
    return rows


def test_dry_run_sends_nothing_and_the_run_prints_the_same_totals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "run"
    prices = ["--price-in", "2", "--price-out", "8"]
    with PolicyServer(STAND_IN) as server:
        base = ["eval", "--model", STAND_IN, "--base-url", server.base_url, "-s", "easy"]
        dry = runner.invoke(app, [*base, "-n", "2", "-o", str(out), "--dry-run", *prices])
        assert dry.exit_code == 0, dry.output
        assert server.requests == 0 and not out.exists()
        done = runner.invoke(app, [*base, "-n", "2", "-o", str(out), "--max-tokens", "64", *prices])
        assert done.exit_code == 0, done.output
        assert server.requests == 2 * SCENARIOS["easy"].steps
    estimated, billed = _figures(dry.stdout), _figures(done.stdout)
    assert (
        list(estimated)
        == list(billed)
        == [
            "episodes",
            "model calls",
            "input tokens",
            "output tokens",
            "cost",
            "prices ($/M)",
        ]
    )
    assert estimated["model calls"] == billed["model calls"] == str(2 * SCENARIOS["easy"].steps)
    assert "no cap" in estimated["output tokens"]
    assert f"at most {2 * SCENARIOS['easy'].steps * 64:,} at 64 a call" in done.stdout
    assert estimated["cost"].startswith("$") and billed["cost"].startswith("$")


def test_dry_run_needs_no_key_but_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    done = runner.invoke(
        app, ["eval", "--model", "gpt-4.1-mini", "-s", "easy", "-n", "1", "--dry-run"]
    )
    assert done.exit_code == 0, done.output
    assert "give --price-in" in done.stdout
    for args, message in (
        (["--dry-run"], "--dry-run needs --model"),
        (["--price-in", "1"], "need --model"),
        (["--model", "m", "--price-out", "1"], "need --price-in"),
    ):
        bad = runner.invoke(app, ["eval", "-s", "easy", *args])
        assert bad.exit_code == 2 and message in " ".join(bad.output.split()), bad.output
