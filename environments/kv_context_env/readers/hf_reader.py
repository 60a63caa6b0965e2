"""Reader (b) of the conversation-context family: a local Hugging Face causal LM that answers a
question over the FULL history, with evicted blocks hidden by the attention mask (the masking
design, "true attention masking").

Nothing is deleted physically. Every history token stays in `input_ids`; a token of an evicted
block gets attention-mask 0, so no later query can attend to it, which is mathematically the same
as removing its KV entries. Two details make that equivalence exact:

* **Absolute positions.** Positions are passed explicitly as `0..L-1` over history + question.
  Without them, transformers derives positions from the attention mask (`cumsum - 1`), so every
  token after an evicted block would move left by the block's length: that is a different input
  (the one you get by cutting the block out and renumbering), not a masked one.
* **Our own greedy loop.** `model.generate` forwards `position_ids` given as a kwarg only for
  the first step in some versions, and recomputes them from the attention mask for each new
  token afterwards (the shift above, from the second token on). So `greedy_generate` runs the
  prompt once with the block mask and absolute positions, then feeds each new token with
  `past_key_values`, position = previous + 1 and the mask extended by a 1.

This module owns the pure mask/position helpers (no torch needed), the model-level functions
(`forward_logits`, `masked_logits`, `greedy_generate`, `generate_answer`) and `HfReader`, which maps
character-level visibility of the history text onto the model's own tokens.

torch and transformers are optional (the project's `hf` extra); they are imported inside the
functions that need them, and a missing one raises an ImportError that says what to install.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kv_context_env.vocabulary import BLOCK_SIZE

INSTALL_HINT = (
    "the Hugging Face reader needs transformers and torch: uv sync --extra hf, then "
    "pip install torch==2.13.0 (or pip install 'kvcache-arena[hf]' torch==2.13.0)"
)

PLAIN_PROMPT = "Question: {question}\nAnswer:"
"""Question format for tokenizers without a chat template."""


def _torch() -> Any:
    try:
        import torch
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    return torch


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    return transformers


# ---------------------------------------------------------------------------------------------
# Pure helpers (no torch)
# ---------------------------------------------------------------------------------------------


def block_attention_mask(
    n_history: int,
    keep_blocks: Sequence[bool],
    n_question: int,
    block_size: int = BLOCK_SIZE,
) -> list[int]:
    """Per-token attention mask over history + question (the masking design, step 2).

    History token `t` gets `keep_blocks[t // block_size]` (block `k` covers tokens
    `[k*B, k*B + B - 1]`; the last block may be partial), every question token gets 1.
    Raises ValueError unless `len(keep_blocks) == ceil(n_history / block_size)`."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if n_history < 0 or n_question < 0:
        raise ValueError(f"token counts must be >= 0, got {n_history=} {n_question=}")
    n_blocks = math.ceil(n_history / block_size)
    if len(keep_blocks) != n_blocks:
        raise ValueError(
            f"keep_blocks has {len(keep_blocks)} entries; {n_history} history tokens in blocks "
            f"of {block_size} need {n_blocks}"
        )
    history = [int(bool(keep_blocks[t // block_size])) for t in range(n_history)]
    return history + [1] * n_question


def absolute_position_ids(n: int) -> list[int]:
    """Positions `0..n-1`: a token's position is its index in the full, never-renumbered
    sequence, whether or not earlier tokens are masked."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return list(range(n))


def char_visibility(pieces: Sequence[tuple[str, bool]]) -> tuple[str, list[bool]]:
    """Concatenate history pieces into one text and a per-character visibility list."""
    text = "".join(piece for piece, _ in pieces)
    visible = [bool(flag) for piece, flag in pieces for _ in piece]
    return text, visible


def token_visibility(
    offsets: Iterable[tuple[int, int]], visible_chars: Sequence[bool]
) -> list[bool]:
    """A model token is visible iff every character it covers is visible: a token straddling an
    evicted span is evicted with it. Zero-width tokens (BOS and other specials) cover no
    evicted character and are visible."""
    return [all(visible_chars[start:end]) for start, end in offsets]


# ---------------------------------------------------------------------------------------------
# Model-level functions (torch)
# ---------------------------------------------------------------------------------------------


def _as_batch(values: Sequence[int], device: Any) -> Any:
    torch = _torch()
    return torch.tensor([list(values)], dtype=torch.long, device=device)


def _model_device(model: Any) -> Any:
    return next(model.parameters()).device


def forward_logits(
    model: Any,
    input_ids: Sequence[int],
    attention_mask: Sequence[int],
    position_ids: Sequence[int],
) -> Any:
    """One forward pass (no cache); returns the float32 logits at the last position, shape
    `(vocab,)`."""
    if not len(input_ids) == len(attention_mask) == len(position_ids):
        raise ValueError(
            f"lengths differ: {len(input_ids)} ids, {len(attention_mask)} mask, "
            f"{len(position_ids)} positions"
        )
    if not input_ids:
        raise ValueError("forward_logits needs at least one token")
    torch = _torch()
    device = _model_device(model)
    with torch.inference_mode():
        out = model(
            input_ids=_as_batch(input_ids, device),
            attention_mask=_as_batch(attention_mask, device),
            position_ids=_as_batch(position_ids, device),
            use_cache=False,
        )
    return out.logits[0, -1].float()


def masked_logits(
    model: Any,
    history_ids: Sequence[int],
    keep_blocks: Sequence[bool],
    question_ids: Sequence[int],
    block_size: int = BLOCK_SIZE,
) -> Any:
    """Logits at the last position of history + question, with evicted blocks masked and
    absolute positions (one forward pass)."""
    mask = block_attention_mask(len(history_ids), keep_blocks, len(question_ids), block_size)
    ids = [*history_ids, *question_ids]
    return forward_logits(model, ids, mask, absolute_position_ids(len(ids)))


def greedy_generate(
    model: Any,
    input_ids: Sequence[int],
    attention_mask: Sequence[int],
    *,
    max_new_tokens: int = 32,
    eos_token_ids: Iterable[int] = (),
) -> list[int]:
    """Greedy decoding with the KV cache and absolute positions (see the module docstring for
    why not `model.generate`). The prompt is `input_ids` at positions `0..L-1` under
    `attention_mask`; new token `i` sits at position `L + i` with mask 1. Stops after
    `max_new_tokens` or on (and including) an EOS token; returns the new token ids."""
    if len(input_ids) != len(attention_mask):
        raise ValueError(f"lengths differ: {len(input_ids)} ids, {len(attention_mask)} mask")
    if not input_ids:
        raise ValueError("greedy_generate needs at least one prompt token")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    torch = _torch()
    device = _model_device(model)
    stop = set(eos_token_ids)
    mask = list(attention_mask)
    n = len(input_ids)
    step_ids = _as_batch(input_ids, device)
    step_positions = _as_batch(absolute_position_ids(n), device)
    past: Any = None
    new_tokens: list[int] = []
    with torch.inference_mode():
        while len(new_tokens) < max_new_tokens:
            out = model(
                input_ids=step_ids,
                attention_mask=_as_batch(mask, device),
                position_ids=step_positions,
                past_key_values=past,
                use_cache=True,
            )
            past = out.past_key_values
            token = int(out.logits[0, -1].argmax())
            new_tokens.append(token)
            if token in stop:
                break
            # The new token sees itself and every visible token before it.
            mask.append(1)
            step_ids = _as_batch([token], device)
            step_positions = _as_batch([n + len(new_tokens) - 1], device)
    return new_tokens


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, Iterable):
            ids.update(int(v) for v in value)
    return ids


def generate_answer(
    model: Any,
    tokenizer: Any,
    history_ids: Sequence[int],
    keep_blocks: Sequence[bool],
    question_ids: Sequence[int],
    *,
    block_size: int = BLOCK_SIZE,
    max_new_tokens: int = 32,
) -> str:
    """Greedy answer over history (evicted blocks masked) + question, decoded without special
    tokens and stripped."""
    mask = block_attention_mask(len(history_ids), keep_blocks, len(question_ids), block_size)
    tokens = greedy_generate(
        model,
        [*history_ids, *question_ids],
        mask,
        max_new_tokens=max_new_tokens,
        eos_token_ids=_eos_ids(model, tokenizer),
    )
    return str(tokenizer.decode(tokens, skip_special_tokens=True)).strip()


# ---------------------------------------------------------------------------------------------
# The reader
# ---------------------------------------------------------------------------------------------


class HfReader:
    """A local Hugging Face causal LM reading the full history through the block mask.

    `answer(pieces, question)`: `pieces` is the history as consecutive text pieces, each with a
    visibility flag (the environment knows which character spans lie in evicted blocks of the
    project tokenizer). The history is tokenised with the model's own fast tokenizer; a model
    token is visible iff all its characters are visible (`token_visibility`). The question
    follows, always visible, in the tokenizer's chat template if it has one, else as
    `PLAIN_PROMPT`. Positions are absolute over history + question.

    Arguments: `model_path` a local directory (no network: `local_files_only=True`), `device`
    a torch device string, `block_size` the model-token block size of `active_blocks` (the mask
    itself is per token), `max_new_tokens` the answer cap, `attn_implementation` passed to
    `from_pretrained` when given (e.g. "eager").
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str = "cpu",
        block_size: int = BLOCK_SIZE,
        max_new_tokens: int = 32,
        attn_implementation: str | None = None,
    ) -> None:
        path = Path(model_path)
        if not path.is_dir():
            raise ValueError(f"model_path must be a local directory, got {str(model_path)!r}")
        _torch()
        transformers = _transformers()
        self.block_size = block_size
        self.max_new_tokens = max_new_tokens
        self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(
            path, local_files_only=True
        )
        if not self.tokenizer.is_fast:
            raise ValueError(
                f"{path}: the reader needs a fast tokenizer (character offsets); got "
                f"{type(self.tokenizer).__name__}"
            )
        extra = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
        self.model: Any = transformers.AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, **extra
        )
        self.model.to(device)
        self.model.eval()

    def question_text(self, question: str) -> str:
        """The question as the model sees it (chat template, else `PLAIN_PROMPT`)."""
        if getattr(self.tokenizer, "chat_template", None):
            text = str(
                self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": question}],
                    tokenize=False,
                    add_generation_prompt=True,
                )
            )
            # The history already opens the sequence; a second BOS mid-sequence is noise.
            bos = self.tokenizer.bos_token
            if bos and text.startswith(bos):
                text = text[len(bos) :]
            return text
        return PLAIN_PROMPT.format(question=question)

    def build_inputs(
        self, pieces: Sequence[tuple[str, bool]], question: str
    ) -> tuple[list[int], list[int], list[int]]:
        """`(input_ids, attention_mask, position_ids)` of history + question: mask 0 exactly on
        history tokens that touch an evicted character, positions `0..L-1`."""
        text, visible_chars = char_visibility(pieces)
        history = self.tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
        history_ids = list(history["input_ids"])
        visible = token_visibility(history["offset_mapping"], visible_chars)
        question_ids = list(
            self.tokenizer(self.question_text(question), add_special_tokens=False)["input_ids"]
        )
        if not question_ids:
            raise ValueError("the question tokenises to nothing")
        ids = history_ids + question_ids
        mask = [int(v) for v in visible] + [1] * len(question_ids)
        return ids, mask, absolute_position_ids(len(ids))

    def active_blocks(self, pieces: Sequence[tuple[str, bool]]) -> int:
        """Model-token blocks of the history (blocks of `block_size` model tokens) holding at
        least one visible token: the masking design's "Active Blocks", counted in the model's
        tokens."""
        text, visible_chars = char_visibility(pieces)
        history = self.tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
        visible = token_visibility(history["offset_mapping"], visible_chars)
        return sum(
            any(visible[k : k + self.block_size]) for k in range(0, len(visible), self.block_size)
        )

    def answer(self, pieces: Sequence[tuple[str, bool]], question: str) -> str:
        """Greedy answer to `question` over the history with evicted spans masked."""
        ids, mask, _ = self.build_inputs(pieces, question)
        tokens = greedy_generate(
            self.model,
            ids,
            mask,
            max_new_tokens=self.max_new_tokens,
            eos_token_ids=_eos_ids(self.model, self.tokenizer),
        )
        return str(self.tokenizer.decode(tokens, skip_special_tokens=True)).strip()
