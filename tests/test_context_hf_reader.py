"""The block-masked Hugging Face reader (the masking design).

The pure mask/position helpers run without torch. The model tests build a tiny randomly
initialised Llama from a config (no download) and check what "true attention masking" must
mean: a masked block is invisible, a visible one is not, positions are absolute (masking equals
cutting the block out WITHOUT renumbering, and differs from cutting it out with renumbering), and
the KV-cache greedy loop agrees with full recomputation.
"""

import pytest

from kv_context_env.readers.hf_reader import (
    PLAIN_PROMPT,
    absolute_position_ids,
    block_attention_mask,
    char_visibility,
    token_visibility,
)

# ---------------------------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------------------------


def test_block_k_covers_tokens_16k_to_16k_plus_15():
    mask = block_attention_mask(64, [True, False, True, False], 0)
    assert mask == [1] * 16 + [0] * 16 + [1] * 16 + [0] * 16
    for k in range(4):
        assert set(mask[16 * k : 16 * k + 16]) == {1 - k % 2}


def test_partial_last_block_and_question_ones():
    # 37 tokens = blocks [0..15] [16..31] [32..36]; question of 3 tokens is always visible.
    mask = block_attention_mask(37, [False, True, False], 3)
    assert mask == [0] * 16 + [1] * 16 + [0] * 5 + [1, 1, 1]
    assert len(mask) == 40
    # Custom block size: 4 tokens per block.
    assert block_attention_mask(6, [True, False], 2, block_size=4) == [1, 1, 1, 1, 0, 0, 1, 1]
    # No history: only the question.
    assert block_attention_mask(0, [], 2) == [1, 1]


def test_block_mask_validates_lengths():
    with pytest.raises(ValueError, match="keep_blocks has 2 entries; 37 history tokens"):
        block_attention_mask(37, [True, True], 1)
    with pytest.raises(ValueError, match="need 2"):
        block_attention_mask(32, [True, True, True], 1)
    with pytest.raises(ValueError, match="need 0"):
        block_attention_mask(0, [True], 1)
    with pytest.raises(ValueError, match="block_size"):
        block_attention_mask(4, [True], 1, block_size=0)
    with pytest.raises(ValueError, match=">= 0"):
        block_attention_mask(-1, [], 1)


def test_absolute_position_ids():
    assert absolute_position_ids(5) == [0, 1, 2, 3, 4]
    assert absolute_position_ids(0) == []
    with pytest.raises(ValueError):
        absolute_position_ids(-1)


def test_token_visible_iff_all_its_characters_are():
    text, visible = char_visibility([("ab c", True), ("de", False), ("f", True)])
    assert text == "ab cdef"
    assert visible == [True] * 4 + [False] * 2 + [True]
    # tokens: "ab" (0,2), "cd" straddles the evicted span, "e" inside it, "f" after, BOS (0,0)
    offsets = [(0, 0), (0, 2), (3, 5), (5, 6), (6, 7)]
    assert token_visibility(offsets, visible) == [True, True, False, False, True]


# ---------------------------------------------------------------------------------------------
# Tiny model
# ---------------------------------------------------------------------------------------------

VOCAB = 128
HISTORY = 64  # 4 blocks of 16
QUESTION = 5


def _tiny_model(attn_implementation: str = "eager"):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        # The default 0.02 init gives near-uniform attention and logits of ~0.3, where moving a
        # block by 16 positions changes them by only ~5e-4; at 0.3 the effects are O(1).
        initializer_range=0.3,
        attn_implementation=attn_implementation,
    )
    model = transformers.LlamaForCausalLM(config).float().eval()
    return model


@pytest.fixture(scope="module")
def model():
    return _tiny_model()


@pytest.fixture(scope="module")
def ids():
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(1)
    # Ids 3.. so no special token (pad 0, bos 1, eos 2) appears by chance.
    all_ids = torch.randint(3, VOCAB, (HISTORY + QUESTION,), generator=generator).tolist()
    return all_ids[:HISTORY], all_ids[HISTORY:]


def _replace(seq, start, stop):
    """A copy of `seq` with tokens [start, stop) changed to different ids."""
    out = list(seq)
    for t in range(start, stop):
        out[t] = 3 + (out[t] - 3 + 17) % (VOCAB - 3)
    assert all(a != b for a, b in zip(out[start:stop], seq[start:stop], strict=True))
    return out


def _max_diff(a, b) -> float:
    return float((a - b).abs().max())


KEEP = [True, True, False, True]  # block 2 (tokens 32..47) evicted


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_masked_block_is_invisible_and_visible_block_is_not(attn, ids):
    from kv_context_env.readers.hf_reader import masked_logits

    model = _tiny_model(attn)
    history, question = ids
    base = masked_logits(model, history, KEEP, question)
    # (i) new ids throughout the masked block: the answer position cannot tell.
    assert _max_diff(base, masked_logits(model, _replace(history, 32, 48), KEEP, question)) < 1e-5
    # (ii) one changed token in a visible block (block 1) does change the logits.
    assert _max_diff(base, masked_logits(model, _replace(history, 20, 21), KEEP, question)) > 0.1
    # ... and the masked block would matter if it were kept.
    keep_all = [True] * 4
    assert (
        _max_diff(
            masked_logits(model, history, keep_all, question),
            masked_logits(model, _replace(history, 32, 48), keep_all, question),
        )
        > 0.1
    )


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_evicting_the_first_block_stays_finite(attn, ids):
    """Block 0 masked: its own queries attend to nothing; that must not poison later tokens."""
    torch = pytest.importorskip("torch")
    from kv_context_env.readers.hf_reader import masked_logits

    model = _tiny_model(attn)
    history, question = ids
    keep = [False, True, True, True]
    base = masked_logits(model, history, keep, question)
    assert bool(torch.isfinite(base).all())
    assert _max_diff(base, masked_logits(model, _replace(history, 0, 16), keep, question)) < 1e-5


def test_positions_are_absolute(model, ids):
    """(iii) Masking block 2 == cutting it out while keeping positions 48.. for what follows;
    != cutting it out and renumbering (what a cumsum-derived position would do)."""
    from kv_context_env.readers.hf_reader import forward_logits, masked_logits

    history, question = ids
    masked = masked_logits(model, history, KEEP, question)
    other_content = masked_logits(model, _replace(history, 32, 48), KEEP, question)
    assert _max_diff(masked, other_content) < 1e-5

    cut = history[:32] + history[48:] + question
    ones = [1] * len(cut)
    kept_positions = [*range(32), *range(48, HISTORY + QUESTION)]
    cut_absolute = forward_logits(model, cut, ones, kept_positions)
    assert _max_diff(masked, cut_absolute) < 1e-5

    cut_renumbered = forward_logits(model, cut, ones, list(range(len(cut))))
    assert _max_diff(masked, cut_renumbered) > 0.1

    # Stock `generate` derives positions from the mask (cumsum): its first-step logits are the
    # renumbered cut's, not the masked run's. This is why `greedy_generate` exists.
    torch = pytest.importorskip("torch")
    with torch.inference_mode():
        out = model.generate(
            input_ids=torch.tensor([history + question]),
            attention_mask=torch.tensor([block_attention_mask(HISTORY, KEEP, QUESTION)]),
            max_new_tokens=1,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    stock = out.logits[0][0].float()
    assert _max_diff(stock, cut_renumbered) < 1e-5
    assert _max_diff(stock, masked) > 0.1


def _greedy_without_cache(model, input_ids, mask, n_new):
    """Reference: recompute the whole sequence for each new token (no KV cache)."""
    from kv_context_env.readers.hf_reader import forward_logits

    seq, m, out = list(input_ids), list(mask), []
    for _ in range(n_new):
        token = int(forward_logits(model, seq, m, list(range(len(seq)))).argmax())
        out.append(token)
        seq.append(token)
        m.append(1)
    return out


def test_greedy_loop_matches_argmax_and_full_recomputation(model, ids):
    """(iv) First token == argmax of masked_logits; all tokens == the no-cache reference
    (positions previous + 1, mask extended by 1); deterministic."""
    from kv_context_env.readers.hf_reader import greedy_generate, masked_logits

    history, question = ids
    mask = block_attention_mask(HISTORY, KEEP, QUESTION)
    tokens = greedy_generate(model, history + question, mask, max_new_tokens=12)
    assert len(tokens) == 12
    assert tokens[0] == int(masked_logits(model, history, KEEP, question).argmax())
    assert tokens == _greedy_without_cache(model, history + question, mask, 12)
    assert greedy_generate(model, history + question, mask, max_new_tokens=12) == tokens
    # The masked block's content does not reach the generated answer either.
    other = _replace(history, 32, 48) + question
    assert greedy_generate(model, other, mask, max_new_tokens=12) == tokens
    # EOS stops (and is included); 0 new tokens is allowed.
    assert (
        greedy_generate(
            model, history + question, mask, max_new_tokens=12, eos_token_ids=[tokens[2]]
        )
        == tokens[: tokens.index(tokens[2]) + 1]
    )
    assert greedy_generate(model, history + question, mask, max_new_tokens=0) == []


# ---------------------------------------------------------------------------------------------
# HfReader end to end: tiny model + tiny local tokenizer saved to disk
# ---------------------------------------------------------------------------------------------

SENTENCES = [
    "the launch code is seven two nine",
    "alice likes green tea and bob likes coffee",
    "what is the launch code",
    "question answer the code is",
]


def _tiny_tokenizer():
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[PAD]", "[BOS]", "[EOS]", "[UNK]"])
    tok.train_from_iterator(SENTENCES, trainer=trainer)
    assert tok.get_vocab_size() <= VOCAB
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        unk_token="[UNK]",
    )


@pytest.fixture(scope="module")
def reader_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    _tiny_model().save_pretrained(path)
    _tiny_tokenizer().save_pretrained(path)
    return path


def test_reader_masks_exactly_the_evicted_characters(reader_dir):
    from kv_context_env.readers.hf_reader import HfReader

    reader = HfReader(reader_dir, max_new_tokens=6, attn_implementation="eager")
    tokenizer = reader.tokenizer
    pieces = [
        ("alice likes green tea ", True),
        ("and bob likes coffee ", False),
        ("the launch code is seven", True),
    ]
    ids, mask, positions = reader.build_inputs(pieces, "what is the launch code")
    history_words = "".join(text for text, _ in pieces).split()  # WordLevel: one per word
    question_ids = tokenizer(PLAIN_PROMPT.format(question="what is the launch code"))["input_ids"]
    assert ids == tokenizer.convert_tokens_to_ids(history_words) + question_ids
    assert mask == [1] * 4 + [0] * 4 + [1] * 5 + [1] * len(question_ids)
    assert positions == list(range(len(ids)))

    # A word split across a boundary ("gre|en" with "en" evicted) is evicted whole.
    split = [("alice likes gre", True), ("en tea", False), (" and bob", True)]
    ids2, mask2, _ = reader.build_inputs(split, "what is the launch code")
    assert mask2[:5] == [1, 1, 0, 0, 1] and mask2[5] == 1
    assert ids2[:5] == tokenizer.convert_tokens_to_ids(history_words[:5])

    # Model-token blocks of 16: 13 history tokens = one block, visible.
    assert reader.active_blocks(pieces) == 1
    assert reader.active_blocks([(text, False) for text, _ in pieces]) == 0


def test_reader_answer_ignores_evicted_text_end_to_end(reader_dir):
    from kv_context_env.readers.hf_reader import HfReader, forward_logits, greedy_generate

    reader = HfReader(reader_dir, max_new_tokens=6, attn_implementation="eager")
    question = "what is the launch code"
    pieces = [("alice likes green tea ", True), ("and bob likes coffee ", False), ("the", True)]
    swapped = [pieces[0], ("code is seven two ", False), pieces[2]]  # same token count
    shown = [pieces[0], ("code is seven two ", True), pieces[2]]

    ids, mask, pos = reader.build_inputs(pieces, question)
    ids_s, mask_s, pos_s = reader.build_inputs(swapped, question)
    ids_v, mask_v, pos_v = reader.build_inputs(shown, question)
    assert ids != ids_s and mask == mask_s and pos == pos_s
    base = forward_logits(reader.model, ids, mask, pos)
    assert _max_diff(base, forward_logits(reader.model, ids_s, mask_s, pos_s)) < 1e-5
    assert _max_diff(base, forward_logits(reader.model, ids_v, mask_v, pos_v)) > 0.1

    answer = reader.answer(pieces, question)
    assert answer == reader.answer(swapped, question) == reader.answer(pieces, question)
    expected = greedy_generate(reader.model, ids, mask, max_new_tokens=6, eos_token_ids=[2])
    assert answer == reader.tokenizer.decode(expected, skip_special_tokens=True).strip()


def test_reader_refuses_remote_names_and_explains_missing_dependencies(tmp_path, monkeypatch):
    import builtins

    from kv_context_env.readers import hf_reader

    with pytest.raises(ValueError, match="local directory"):
        hf_reader.HfReader("org/some-model-on-the-hub")

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(ImportError, match=r"uv sync --extra hf, then pip install torch==2\.13\.0"):
        hf_reader.masked_logits(None, [5], [True], [6])


def test_reader_uses_the_chat_template_without_a_second_bos(reader_dir):
    from kv_context_env.readers.hf_reader import HfReader

    reader = HfReader(reader_dir, max_new_tokens=2)
    assert reader.question_text("what is the code") == "Question: what is the code\nAnswer:"
    reader.tokenizer.chat_template = (
        "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    text = reader.question_text("what is the code")
    assert text == "[user] what is the code [assistant]"
    ids, mask, _ = reader.build_inputs([("the code is seven", False)], "what is the code")
    assert reader.tokenizer.bos_token_id not in ids
    assert mask == [0] * 4 + [1] * (len(ids) - 4)
