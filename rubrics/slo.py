"""Latency objectives (SLOs) per scenario: the one table the serving metrics (`metrics.py`) and
the docs' serving page read.

A request meets its objectives (DistServe, Zhong et al., OSDI 2024: "SLO attainment") when it
completes, each of its calls' first token comes within `first_token_s` of the call's start
(arrival, or the return of a paused session), and its mean time per output token after each
call's first (DistServe's TPOT) is within `per_token_s`. Goodput is such requests per second.

The simulated clock steps in whole seconds (`Scenario.step_seconds` = 1): a new request is
admitted in the step after it arrives and prefilled in the next, so its first token comes two
seconds after its arrival at the earliest, and a resumed call's one second after its return.
Objectives below those cannot be met by any policy, so sub-second objectives of the literature
(DistServe's 0.25 s for a 13B chatbot, vLLM's and SGLang's benchmark examples of a few hundred
milliseconds) are not used.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class Objectives:
    """The latency objectives of one scenario's requests, and where their values come from."""

    first_token_s: float
    """Largest wait for each call's first token, from its arrival or its return (seconds)."""
    per_token_s: float
    """Largest mean time per output token after each call's first (seconds)."""
    source: str
    """Where the values come from: a cited serving paper, or a documented assumption."""


_CHATBOT = Objectives(
    first_token_s=2.5,
    per_token_s=0.15,
    source=(
        "DistServe (OSDI 2024), Table 1: the chatbot objectives for a 66B model "
        "(TTFT 2.5 s, TPOT 0.15 s)"
    ),
)
_LARGE_CHATBOT = Objectives(
    first_token_s=4.0,
    per_token_s=0.2,
    source=(
        "DistServe (OSDI 2024), Table 1: its loosest chatbot objectives, for a 175B model "
        "(TTFT 4 s, TPOT 0.2 s); assumption: a scenario that prefills 4,096 tokens a second "
        "(a 70B-class model, half the others' rate) is held to them"
    ),
)
_REMOTE = Objectives(
    first_token_s=_LARGE_CHATBOT.first_token_s,
    per_token_s=_LARGE_CHATBOT.per_token_s,
    source="as agent-tools (the same agents and model; only the offload tier differs)",
)

OBJECTIVES: MappingProxyType[str, Objectives] = MappingProxyType(
    {
        "easy": _CHATBOT,
        "medium": _CHATBOT,
        "hard": _CHATBOT,
        "chat-human": _CHATBOT,
        "big-cpu": _CHATBOT,
        "flash-crowd": _CHATBOT,
        "medium-128": _CHATBOT,
        "agent-tools": _LARGE_CHATBOT,
        "slow-prefill": _LARGE_CHATBOT,
        "agent-remote": _REMOTE,
    }
)
"""Each built-in scenario's objectives."""

DEFAULT = Objectives(
    first_token_s=_CHATBOT.first_token_s,
    per_token_s=_CHATBOT.per_token_s,
    source="a scenario of no row here (a trace replay, a custom scenario): the chatbot row's",
)


def objectives_for(scenario: str) -> Objectives:
    """The objectives of the scenario called `scenario` (a record's name): its row, or
    `DEFAULT` (trace replays are named `trace:FILE`)."""
    return OBJECTIVES.get(scenario, DEFAULT)
