"""Tests as the user gives them (`--test`, `--tests FILE`, the TUI's tests editor): Python text cut into chunks,
each `assert` together with the statements just before it, so a chunk runs on its own and reports on its own."""

from __future__ import annotations

import ast

from assistant.code.edit import source_lines
from assistant.code.parse import parse_module, syntax_problem
from assistant.errors import UsageError


def split_asserts(source: str, origin: str = "the tests") -> list[str]:
    """`source` cut after each top-level `assert` (trailing statements join the last chunk).

    Text that does not parse, or holds no assert, is a one-line :class:`UsageError` naming `origin`.
    """
    try:
        tree = parse_module(source)
    except SyntaxError as exc:
        raise UsageError(f"{origin} does not parse ({syntax_problem(exc)})") from None
    except ValueError as exc:  # e.g. a NUL byte
        raise UsageError(f"{origin} does not parse ({exc})") from None
    lines = source_lines(source)
    chunks: list[str] = []
    pending: list[str] = []
    for node in tree.body:
        pending.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
        if isinstance(node, ast.Assert):
            chunks.append("\n".join(pending))
            pending = []
    if pending and chunks:
        chunks[-1] += "\n" + "\n".join(pending)
    if not chunks:
        raise UsageError(f"{origin} has no assert statements")
    return chunks


def doctest_assert(source: str, expected: str) -> str | None:
    """A doctest example (`>>> source`, its value shown as `expected`) as one assert statement comparing the two
    with `==`, parenthesized where it must be (`f(x) is bool` shown as `True` would otherwise chain into `f(x) is
    bool == True`, and `f(a), f(b)` become an assert with a message); a comment on the line is dropped. None when
    either side is not one expression."""
    try:
        left = ast.parse(source.strip(), mode="eval").body
        right = ast.parse(expected.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    test = ast.Assert(test=ast.Compare(left=left, ops=[ast.Eq()], comparators=[right]), msg=None)
    return ast.unparse(ast.fix_missing_locations(test))
