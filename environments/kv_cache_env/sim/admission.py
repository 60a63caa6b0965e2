"""The admission arithmetic the engine and the reference run share.

vLLM v1's scheduler admits a waiting request when the blocks for its prefix-cache misses and for
the tokens it computes in its first step fit (`vllm/v1/core/sched/scheduler.py`, `schedule`:
`num_new_tokens` capped by the token budget, `max_num_batched_tokens`; then
`kv_cache_manager.allocate_slots`). Here: what a request still has to prefill once its cached
prefix blocks are hit (`prefill_left`), and the private blocks it holds after its first prefill
chunk (`first_chunk_blocks`). `KVCacheManager.admission_need` (what the observation shows),
`Scheduler._try_admit` (the admission itself) and the reference run's `_admit` all use these two.
"""

from __future__ import annotations


def prefill_left(private: int, prefix: int, hit_tokens: int) -> int:
    """Tokens still to prefill: the request's own context (`private`) plus the part of its shared
    prefix (`prefix` tokens) beyond the `hit_tokens` the prefix cache already holds."""
    return private + prefix - hit_tokens if hit_tokens < prefix else private


def first_chunk_blocks(private: int, remaining: int, budget: int, per_block: int) -> int:
    """Private blocks a sequence with `private` tokens of its own context holds after computing
    its first prefill chunk, `remaining` tokens being left to prefill and `budget` the prefill
    tokens of one step (`per_block` tokens fit one block at its precision)."""
    after = remaining - budget
    kv = private - after if 0 < after < private else (private if after <= 0 else 0)
    return -(-kv // per_block)
