"""Code similarity with identifiers and constants masked (TST^R's target S_c).

Two programs that differ only in names and literal values do the same kind of thing; what is compared is
the shape of the code: keywords, operators, builtins and structure. Each masked token becomes one character
of a string, so normalised Levenshtein similarity over those strings (rapidfuzz, in C++, all cores) is the
token-level edit similarity: 1 - distance / max(len).
"""

from __future__ import annotations

import builtins
import io
import keyword
import tokenize
from collections.abc import Sequence

import numpy as np

_KEEP_NAMES = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins))
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER, tokenize.TYPE_COMMENT}
# Python 3.12+ splits f-strings into parts; count one STR for the start and drop the rest.
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)
_FSTRING_PARTS = {getattr(tokenize, "FSTRING_MIDDLE", -2), getattr(tokenize, "FSTRING_END", -3)}


def masked_tokens(code: str) -> list[str]:
    """The code's tokens with identifiers → ID, numbers and strings → NUM / STR; comments dropped.

    Docstrings count as strings. Code that does not tokenize falls back to whitespace-split words.
    """
    tokens: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in _SKIP:
                continue
            if token.type == tokenize.NAME:
                tokens.append(token.string if token.string in _KEEP_NAMES else "ID")
            elif token.type == tokenize.NUMBER:
                tokens.append("NUM")
            elif token.type in (tokenize.STRING, _FSTRING_START):
                tokens.append("STR")
            elif token.type in _FSTRING_PARTS:
                continue
            elif token.type == tokenize.NEWLINE:
                tokens.append("NEWLINE")
            elif token.type == tokenize.INDENT:
                tokens.append("INDENT")
            elif token.type == tokenize.DEDENT:
                tokens.append("DEDENT")
            else:
                tokens.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code.split()
    return tokens


class _Alphabet:
    """Maps each distinct token to one character, so token sequences become strings for rapidfuzz."""

    def __init__(self) -> None:
        self.chars: dict[str, str] = {}

    def encode(self, tokens: Sequence[str]) -> str:
        out = []
        for token in tokens:
            char = self.chars.get(token)
            if char is None:
                # Private-use plane characters: never confused with each other, plenty of room.
                char = self.chars[token] = chr(0xF0000 + len(self.chars))
            out.append(char)
        return "".join(out)


def similarity_matrix(codes_a: Sequence[str], codes_b: Sequence[str] | None = None) -> np.ndarray:
    """S_c for every pair: float32 (len(a), len(b)) in [0, 1] (b defaults to a)."""
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    alphabet = _Alphabet()
    left = [alphabet.encode(masked_tokens(code)) for code in codes_a]
    right = left if codes_b is None else [alphabet.encode(masked_tokens(code)) for code in codes_b]
    return cdist(left, right, scorer=Levenshtein.normalized_similarity, dtype=np.float32, workers=-1)


def similarity(code_a: str, code_b: str) -> float:
    """S_c of one pair."""
    return float(similarity_matrix([code_a], [code_b])[0, 0])
