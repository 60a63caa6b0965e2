"""Token estimate for prompt-cache accounting when a provider's usage fields are absent.

No tokenizer is downloaded: the estimate is the common four-characters-per-token rule,
``ceil(len(text) / 4)``, and at least 1 for non-empty text (0 for the empty string).
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4
"""Characters per token of the estimate (English prose and code average about four)."""


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ``ceil(len(text) / 4)``; 1 for any non-empty text, 0 for ""."""
    if not text:
        return 0
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))
