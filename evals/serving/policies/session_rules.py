"""Session rules: one decision per interception kind, the judgment a fixed rule can express.

A `KindRule` maps each pause kind (tool, long tool, human) to what happens to a session paused on
it: keep its KV on the GPU, compress it, offload it (swap) or discard it (evict); then it
compresses running sequences until next step's growth fits under a usage target. With a `gate`
it acts on paused sessions only while memory is short, longest expected pause first. The grid of
these rules is part of the bound's pool: the bound can always do what the best fixed per-kind
rule does on an episode, and its macros search beyond that.
"""

from __future__ import annotations

from itertools import product
from typing import Literal

from kv_cache_env.features import compress_gain, expected_left
from kv_cache_env.sim import (
    Action,
    Observation,
    PauseKind,
    compress,
    evict,
    swap,
)

from .base import Policy, blocks_to_free

SessionAction = Literal["keep", "compress", "swap", "discard"]
_TOOL_OF: dict[SessionAction, str] = {"compress": "compress", "swap": "swap", "discard": "evict"}


class KindRule(Policy):
    """Per-kind session decisions plus compression of running sequences to a target."""

    def __init__(
        self,
        decisions: dict[PauseKind, SessionAction],
        compress_target: float | None = 0.8,
        gate: float | None = None,
    ) -> None:
        self.decisions = dict(decisions)
        self.compress_target = compress_target
        self.gate = gate
        parts = ",".join(f"{k}={self.decisions.get(k, 'keep')}" for k in PauseKind)
        extra = f";compress@{compress_target}" if compress_target is not None else ""
        gated = f";gate@{gate}" if gate is not None else ""
        self.name = f"rule[{parts}{extra}{gated}]"  # type: ignore[misc]

    @property
    def tools(self) -> frozenset[str]:
        used = {_TOOL_OF[a] for a in self.decisions.values() if a != "keep"}
        if self.compress_target is not None:
            used.add("compress")
        return frozenset(used)

    def act(self, obs: Observation) -> list[Action]:
        actions: list[Action] = []
        room = obs.cpu_capacity - obs.cpu_used
        paused = [e for e in obs.entries if e.paused and not e.swapped]
        need = blocks_to_free(obs, self.gate) + obs.queue.head_blocks if self.gate else None
        if need is not None:
            paused.sort(key=lambda e: -expected_left(e))
        for e in paused:
            if need is not None and need <= 0:
                break
            decision = self.decisions.get(e.pause, "keep")  # type: ignore[arg-type]
            if decision == "discard":
                actions.append(evict(e.seq_id))
                freed = e.frees
            elif decision == "swap" and e.private_blocks <= room:
                actions.append(swap(e.seq_id))
                room -= e.private_blocks
                freed = e.frees
            elif decision == "compress" and e.quantization.next_level is not None:
                actions.append(compress(e.seq_id))
                freed = compress_gain(e)
            else:
                continue
            if need is not None:
                need -= freed
        if self.compress_target is not None:
            need_c = blocks_to_free(obs, self.compress_target)
            for e in obs.entries:
                if need_c <= 0:
                    break
                if e.paused or e.swapped or (gain := compress_gain(e)) <= 0:
                    continue
                actions.append(compress(e.seq_id))
                need_c -= gain
        return actions


def kind_rule_grid(
    kinds: tuple[PauseKind, ...] = tuple(PauseKind),
    targets: tuple[float | None, ...] = (0.8, None),
    gates: tuple[float | None, ...] = (None, 0.8),
) -> list[KindRule]:
    """Every per-kind assignment of keep/compress/swap/discard x compression target x gate."""
    options: tuple[SessionAction, ...] = ("keep", "compress", "swap", "discard")
    rules = []
    for choice in product(options, repeat=len(kinds)):
        decisions = dict(zip(kinds, choice, strict=True))
        for target in targets:
            for gate in gates:
                if gate is not None and all(a == "keep" for a in choice):
                    continue
                rules.append(KindRule(decisions, target, gate))
    return rules
