"""Code in a model's answer: the first fenced block's body, else the whole text."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: str) -> str:
    """The code in a completion: the first fenced block if there is one, else the whole text."""
    start, end = code_span(text)
    return text[start:end].replace("\r\n", "\n").strip("\n")


def code_span(text: str) -> tuple[int, int]:
    """Where the code sits in a completion: the first fenced block's body, else the whole text."""
    match = _FENCE.search(text)
    return match.span(1) if match else (0, len(text))
