"""Per-session decisions about paused KV: InferCept's min-waste choice.

InferCept (Abhyankar et al., ICML 2024, arXiv 2402.01869, section 4) decides, for each
intercepted request, whether to *preserve* its KV, *discard* it (recompute on return) or *swap*
it out, by the GPU memory each choice wastes over the interception: preserving wastes the
request's memory for the whole pause; discarding wastes the memory of everyone held up while its
context is recomputed; swapping wastes the memory held while its KV crosses the host link, out
and back. It beat fixed discard / preserve / swap by 1.6-2x there.

Here, for a session paused on the GPU with `B` private blocks, `T` tokens of context, an
expected `E` steps left in its pause (the signal table: its tool, its history, the time waited;
`features.expected_left`):
- keep: `weight x B x E` block-steps;
- discard: its recompute takes `T / prefill` steps, during which the `B` blocks it needs again
  are being rebuilt: `B x T / prefill`; impossible when the recompute alone would miss the
  resumed call's first-token deadline (`max_wait` steps);
- swap: `B x (backlog + B) / link` while it moves out, and as long again to load it back;
  impossible without CPU room or when the load alone would miss the deadline (an unlimited link
  moves it within the step: one step either way).
`weight` tilts the choice towards keeping (> 1: keep less, < 1: keep more); the `expert`
searches over it every turn, and `min-waste` is the rule at weight 1.
"""

from __future__ import annotations

from kv_cache_env.rl.features import expected_left
from kv_cache_env.sim import Action, EntryView, Observation, evict, swap

from .base import Policy


def min_waste_actions(obs: Observation, weight: float = 1.0) -> list[Action]:
    """Discard or offload each GPU-paused session whose keeping wastes the most (module doc)."""
    actions: list[Action] = []
    room = obs.cpu_capacity - obs.cpu_used
    backlog = obs.backlog
    for e in obs.entries:
        if not e.paused or e.swapped or e.frees <= 0:
            continue
        choice = _choice(obs, e, weight, room, backlog)
        if choice == "swap":
            actions.append(swap(e.seq_id))
            room -= e.private_blocks
            backlog += e.private_blocks
        elif choice == "discard":
            actions.append(evict(e.seq_id))
    return actions


def _choice(obs: Observation, e: EntryView, weight: float, room: int, backlog: int) -> str:
    blocks = e.private_blocks
    keep = weight * blocks * expected_left(e, obs.step_seconds)
    options = {"keep": keep}
    recompute = e.tokens / max(obs.prefill, 1)
    if recompute <= obs.max_wait:
        options["discard"] = blocks * recompute
    if blocks <= room:
        out = (backlog + blocks) / obs.link if obs.link else 1.0
        back = blocks / obs.link if obs.link else 1.0
        if back <= obs.max_wait:
            options["swap"] = blocks * (out + back)
    return min(options, key=lambda k: (options[k], k != "keep"))


class MinWastePolicy(Policy):
    """InferCept's min-waste choice for every session paused on the GPU each turn: keep it,
    offload it or discard it, whichever wastes the least GPU memory over its expected pause
    (its tool's median, its own history, the time waited: the signal table)."""

    name = "min-waste"

    def act(self, obs: Observation) -> list[Action]:
        return min_waste_actions(obs)


__all__ = ["MinWastePolicy", "min_waste_actions"]
