"""The identifier-aware tokenizer BM25 uses: code identifiers and English split into comparable words."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

# Words too common in requirements to tell examples apart.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "given",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
        "write",
        "function",
        "python",
        "return",
        "returns",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-cased words, with `camelCase`, `snake_case` and digits split apart.

    A compound identifier is also kept whole (`get_user` → `get`, `user`, `get_user`) so an exact
    identifier match still outranks two loose word matches.
    """
    tokens: list[str] = []
    for raw in _TOKEN.findall(text):
        parts = [p.lower() for p in _WORD.findall(raw)]
        tokens.extend(p for p in parts if p not in STOPWORDS)
        whole = raw.lower().strip("_")
        if len(parts) > 1 and whole:
            tokens.append(whole)
    return tokens
