"""The shared admission arithmetic against its plain definitions (hypothesis)."""

from hypothesis import given
from hypothesis import strategies as st

from kv_cache_env.sim.admission import first_chunk_blocks, prefill_left

tokens = st.integers(min_value=0, max_value=1 << 20)


@given(tokens, tokens, st.integers(min_value=1, max_value=1 << 16), st.sampled_from([4, 16, 64]))
def test_first_chunk_blocks_is_the_kv_left_after_one_budget_rounded_up(
    private, remaining, budget, per_block
):
    after = max(remaining - budget, 0)  # tokens still to prefill after the first chunk
    kv = private - min(after, private)
    assert first_chunk_blocks(private, remaining, budget, per_block) == -(-kv // per_block)


@given(tokens, tokens, tokens)
def test_prefill_left_is_the_own_context_and_the_missed_prefix(private, prefix, hit_tokens):
    assert prefill_left(private, prefix, hit_tokens) == private + max(prefix - hit_tokens, 0)
