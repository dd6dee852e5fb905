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
