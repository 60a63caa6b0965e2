"""Tiny worlds for exact tests: a 4-token-block scenario and hand-made request schedules; and the
order in which the suite's tests are handed out."""

from __future__ import annotations

import pytest

from kv_cache_env.sim import (
    BlockType,
    FollowUp,
    PauseKind,
    Request,
    Scenario,
    Simulator,
    schedule_from_requests,
)


def tiny_scenario(**changes: object) -> Scenario:
    base = Scenario(
        name="tiny",
        steps=12,
        warmup_steps=0,
        block_size=4,
        prefill_tokens_per_s=64,
        max_wait_steps=3,
        cpu_capacity_fraction=1.0,
    )
    return base.with_options(**changes)


def req(
    seq_id: str,
    *,
    arrival: int = 0,
    prompt: int = 8,
    output: int = 8,
    rate: int = 4,
    block_type: BlockType = BlockType.GENERATION,
    priority: float = 0.5,
    prefix: tuple[int, ...] = (),
    followups: tuple[FollowUp, ...] = (),
) -> Request:
    return Request(
        seq_id=seq_id,
        arrival_step=arrival,
        block_type=block_type,
        priority=priority,
        prompt_tokens=prompt,
        output_tokens=output,
        decode_rate=rate,
        prefix_hashes=prefix,
        shared_prefix_id="p" if prefix else None,
        followups=followups,
    )


def call(
    pause: int, *, prompt: int = 8, output: int = 4, kind: PauseKind = PauseKind.SEARCH
) -> FollowUp:
    """A further call of a session: after `pause` steps, `prompt` new tokens, `output` more."""
    return FollowUp(kind, pause, prompt, output)


def tiny_sim(requests: list[Request], capacity: int, **scenario_changes: object) -> Simulator:
    scenario = tiny_scenario(**scenario_changes)
    horizon = scenario.warmup_steps + scenario.steps
    return Simulator(
        scenario, 0, schedule=schedule_from_requests(requests, horizon), capacity=capacity
    )


def steps(sim: Simulator, n: int) -> None:
    for _ in range(n):
        sim.step()
        sim.check_invariants()


@pytest.fixture
def make_sim():
    return tiny_sim


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long_running` come first. scripts/test spreads the suite over xdist workers,
    which take tests in this order (after the `xdist_group` modules, each handed out whole): a
    test of a minute or more then starts while short tests remain to fill the other workers,
    not at the end, where one worker would finish it alone while the others idle."""
    items.sort(key=lambda item: item.get_closest_marker("long_running") is None)
