"""Which parts of an episode's state an agent can see, and which it cannot.

Every field of the records the engine keeps is classified here: *visible* (shown in the
observation, or a consequence of what it shows or of the agent's own actions), *hidden* (drawn by
the generator and never shown: the future), or *derived* (a function of the others, recomputed
when they change). An honest planner (the `expert` policy) may read visible fields only, and
redraws every hidden one from the published signal table (`catalogue`) before it plans; the
future arrivals are hidden as a whole. A test fails when a new field is left unclassified, so a
field cannot leak the future by being forgotten.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Literal

from .sequence import Sequence
from .workload import FollowUp, Request

Kind = Literal["visible", "hidden", "derived"]

REQUEST_FIELDS: dict[str, Kind] = {
    "seq_id": "visible",
    "arrival_step": "visible",
    "block_type": "visible",
    "priority": "visible",
    "prompt_tokens": "visible",
    "output_tokens": "hidden",  # its max_tokens bounds it (catalogue.output_bounds)
    "decode_rate": "visible",
    "prefix_hashes": "visible",
    "shared_prefix_id": "visible",
    "reasoning_tokens": "derived",  # the block type's reasoning share of the first output
    "followups": "hidden",  # while a session is paused, what it waits on is visible
    "plan": "visible",  # shown once the session holds KV; a waiting request's is redrawn
    "pace": "hidden",  # its history (pauses, pace shown) estimates it
}
"""`Request` (one per arrival). Requests that have not arrived yet are hidden entirely."""

FOLLOWUP_FIELDS: dict[str, Kind] = {
    "pause": "hidden",  # the current pause's is visible while it lasts; ended ones are history
    "pause_steps": "hidden",  # ended pauses are history (shown through n and pace)
    "prompt_tokens": "hidden",
    "output_tokens": "hidden",
}
"""`FollowUp` (a session's further call). Calls that have happened are visible history."""

SEQUENCE_FIELDS: dict[str, Kind] = {
    "request": "visible",  # the record itself; its fields as in REQUEST_FIELDS
    "private_prompt": "visible",
    "wait_since": "visible",
    "not_before": "visible",
    "status": "visible",
    "quantization_level": "visible",
    "generated": "visible",
    "prefill_remaining": "visible",
    "prefix_tokens": "visible",
    "call": "visible",
    "call_end": "derived",  # generated at the call's start + its hidden output
    "resume_step": "derived",  # paused_since + the hidden pause length
    "paused_since": "visible",
    "first_token_by": "visible",
    "gpu_blocks": "visible",
    "cpu_blocks": "visible",
    "outbound": "visible",
    "inbound": "visible",
    "prefix_held": "visible",
    "last_access_step": "visible",
    "token_step": "visible",
    "admitted_order": "visible",
    "preemptions": "visible",
    "pauses_done": "visible",
    "log_ratio_sum": "visible",
    "total_output": "derived",  # the request's outputs summed
}
"""`Sequence` (the engine's per-request state)."""


def unclassified() -> dict[str, set[str]]:
    """Fields of the engine's records that this module does not classify (should be empty)."""
    out = {}
    for cls, table in ((Request, REQUEST_FIELDS), (FollowUp, FOLLOWUP_FIELDS)):
        names = {f.name for f in fields(cls)}
        out[cls.__name__] = names ^ set(table)
    names = {f.name for f in fields(Sequence)}
    out["Sequence"] = names ^ set(SEQUENCE_FIELDS)
    return {k: v for k, v in out.items() if v}


__all__ = ["FOLLOWUP_FIELDS", "REQUEST_FIELDS", "SEQUENCE_FIELDS", "Kind", "unclassified"]
