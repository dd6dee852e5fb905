"""Counting a prompt's tokens before it is sent: the backend's tokenizer where it has one, else an estimate."""

from __future__ import annotations

import math
from collections.abc import Callable

from assistant.backends import Backend

CHARS_PER_TOKEN = 4

Count = Callable[[str], int]


def approximate_tokens(text: str) -> int:
    """Tokens in `text`, estimated as characters / 4 (for backends without a tokenizer)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def token_counter(backend: Backend) -> Count:
    """Count tokens with the backend's tokenizer where it has one, else estimate (characters / 4)."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None:
        return approximate_tokens
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
