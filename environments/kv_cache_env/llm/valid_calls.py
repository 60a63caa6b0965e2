"""Which tool calls `Simulator.apply` accepts on an observation: per tool that takes a sequence,
the sequence ids it can act on now. What a constrained decoder lets a model write
(`evals.servers.local_tool_calls`), read from the observation alone (the text an LLM gets
parses back to it exactly).

The rule is the action table's (`kv_cache_env.sim.actions.AgentTool.refusal`), asked of each
listed entry as the observation shows it; `tests/test_action_table.py` checks it against
`Simulator.apply` and the Gymnasium mask on random states of every scenario.
"""

from __future__ import annotations

from ..sim import ACTIONS, Observation


def valid_targets(obs: Observation) -> dict[str, list[str]]:
    """Tool -> the sequence ids it is valid on now, in the observation's order."""
    tools = ACTIONS.targeted
    targets: dict[str, list[str]] = {tool.name: [] for tool in tools}
    for entry in obs.entries:
        for tool in tools:
            if tool.valid_on(entry, obs):
                targets[tool.name].append(entry.seq_id)
    return targets
