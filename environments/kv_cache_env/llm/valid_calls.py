"""Which tool calls `Simulator.apply` accepts on an observation: per tool, the sequence ids it
can act on now. What a constrained decoder lets a model write (`evals.servers.local_tool_calls`),
read from the observation alone (the text an LLM gets parses back to it exactly).

The rules are `Simulator._apply`'s, stated on what the observation shows:
- `evict`: every sequence listed (running, paused on the GPU, offloaded to CPU);
- `compress`: GPU-resident (not offloaded, not loading back over the host link) and not int4;
- `swap`: GPU-resident and its private blocks fit in the free CPU blocks.
`tests/test_valid_calls.py` checks them against `Simulator.apply` call by call.
"""

from __future__ import annotations

from ..sim import Observation

TOOLS_WITH_TARGETS: tuple[str, ...] = ("evict", "compress", "swap")


def valid_targets(obs: Observation) -> dict[str, list[str]]:
    """Tool -> the sequence ids it is valid on now, in the observation's order."""
    room = obs.cpu_capacity - obs.cpu_used
    targets: dict[str, list[str]] = {tool: [] for tool in TOOLS_WITH_TARGETS}
    for entry in obs.entries:
        targets["evict"].append(entry.seq_id)
        if entry.swapped or entry.moving:
            continue  # offloaded, or its KV is still loading back: evict only
        if entry.quantization.next_level is not None:
            targets["compress"].append(entry.seq_id)
        if entry.private_blocks <= room:
            targets["swap"].append(entry.seq_id)
    return targets
