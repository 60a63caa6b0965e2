"""`valid_targets` says exactly which calls `Simulator.apply` accepts, read from the observation
(and from its text, which is what a local model's constrained decoder sees)."""

from __future__ import annotations

import numpy as np
import pytest

from kv_cache_env.llm.valid_calls import valid_targets
from kv_cache_env.sim import Simulator, compress, evict, get_scenario, parse, render, swap

MAKE = {"evict": evict, "compress": compress, "swap": swap}


@pytest.mark.parametrize("scenario", ["hard", "chat-human", "big-cpu", "agent-tools"])
def test_valid_targets_are_what_apply_accepts(scenario):
    rng = np.random.default_rng(0)
    checked = 0
    for seed in range(2):
        sim = Simulator(get_scenario(scenario), seed)
        while not sim.done:
            obs = sim.observe()
            targets = valid_targets(obs)
            assert valid_targets(parse(render(obs))) == targets
            for entry in obs.entries:
                for tool, make in MAKE.items():
                    probe = sim.clone()
                    accepted = probe.apply(make(entry.seq_id)).ok
                    assert accepted == (entry.seq_id in targets[tool]), (tool, entry)
                    checked += 1
            # move the episode on with a few random valid calls, so offloads and int4 appear
            for tool in ("swap", "compress", "compress", "evict"):
                if targets[tool] and rng.random() < 0.5:
                    sim.apply(MAKE[tool](str(rng.choice(targets[tool]))))
                    break
            sim.step()
    assert checked > 100
