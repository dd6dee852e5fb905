"""Parsing Python that anyone may have written: a repo's file, a model's candidate or test, the user's `--test`.

`ast.parse` raises RecursionError or MemoryError, not SyntaxError, on a 5,000-term `x + 1 + 1 ...`, 20,000 unary
minus signs or 3,000 nested lambdas; and a tree that does parse (up to about 3,000 levels) still overflows the
stack of the recursive tools that come after it: `ast.unparse` at about 330 levels, `copy.deepcopy` at 240, an
`ast.NodeVisitor` at 490, `compile` at 990, fewer when the caller's own stack is deep. So every parse of such text
goes through :func:`parse_python`, which turns all of these into one error, :class:`Unparsable` (a SyntaxError,
so the callers' existing `except SyntaxError` treat it as "does not parse"), and refuses trees deeper than
:data:`MAX_DEPTH`, which leaves every later recursion a stack several times what it needs.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import Literal

# Nesting levels of the syntax tree. Of 12,000 files of the standard library and this project's dependencies,
# only 3 (generated sympy constants) are deeper than 100; `ast.unparse` needs about 3 frames a level.
MAX_DEPTH = 100


class Unparsable(SyntaxError):
    """Python that cannot be parsed safely: too deeply nested, too long for the parser, or with NUL bytes."""


def parse_python(
    source: str | bytes, filename: str = "<unknown>", mode: Literal["exec", "eval"] = "exec"
) -> ast.Module | ast.Expression:
    """`ast.parse`, raising SyntaxError (an :class:`Unparsable` for what ast.parse would crash on or whose tree is
    deeper than :data:`MAX_DEPTH`) for every source that does not give a tree the recursive tools can walk."""
    try:
        tree = ast.parse(source, filename=filename, mode=mode)
    except SyntaxError:
        raise
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes; nesting deeper than the parser's stack
        raise Unparsable(f"{_what(exc)}") from None
    depth, line = _depth(tree)
    if depth > MAX_DEPTH:
        error = Unparsable(f"nested more than {MAX_DEPTH} levels deep")
        error.lineno = line
        raise error
    return tree


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """:func:`parse_python` of a whole module (mode "exec")."""
    tree = parse_python(source, filename)
    assert isinstance(tree, ast.Module)
    return tree


@functools.lru_cache(maxsize=4)
def shared_tree(source: str) -> ast.Module:
    """:func:`parse_module`'s tree of `source`, parsed once while it is among the last 4 asked for (a file and a
    candidate's edit of it, read by one check after another): for code that only reads it, and never changes it,
    since every caller gets the same tree. Raises as parse_module does."""
    return parse_module(source)


@functools.lru_cache(maxsize=4)
def _lines(source: str) -> tuple[str, ...]:
    r"""The lines as the parser numbers them: ended by \n, \r\n or \r only (str.splitlines also ends one at a form
    feed, \x1c-\x1e, \x85, \u2028 and \u2029, and would shift every line after one)."""
    return tuple(re.split(r"\r\n|\r|\n", source))


def same_definition(old: str, before: ast.stmt | None, new: str, after: ast.stmt) -> bool:
    """Whether the definition `after` (a node of the text `new`) is `before` (of `old`; None: none) over again:
    the same lines, decorators included, or lines that differ only in layout (the same tree). The lines are
    compared first: dumping the tree of every definition of a 3,800-line module, for each candidate, took most of
    the checks' time."""
    if before is None:
        return False
    if (
        _lines(old)[_first_line(before) - 1 : before.end_lineno]
        == _lines(new)[_first_line(after) - 1 : after.end_lineno]
    ):
        return True
    return ast.dump(before) == ast.dump(after)


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno, *(decorator.lineno for decorator in getattr(node, "decorator_list", ()))])


def try_parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module | None:
    """The module's tree, or None when it does not parse (see :func:`parse_python`)."""
    try:
        return parse_module(source, filename)
    except SyntaxError:
        return None


def tree_depth(tree: ast.AST) -> int:
    """How many levels deep a syntax tree is, counted without recursion."""
    return _depth(tree)[0]


def syntax_problem(exc: SyntaxError) -> str:
    """A SyntaxError as "line N: what" (just "what" when no line is known, as for a parser that ran out of stack)."""
    return f"line {exc.lineno}: {exc.msg}" if exc.lineno else str(exc.msg)


def _depth(tree: ast.AST) -> tuple[int, int | None]:
    """The tree's depth and the line of its deepest node, counted without recursion."""
    deepest, line = 0, None
    stack = [(tree, 1, None)]
    while stack:
        node, depth, where = stack.pop()
        where = getattr(node, "lineno", where)
        if depth > deepest:
            deepest, line = depth, where
        stack.extend((child, depth + 1, where) for child in ast.iter_child_nodes(node))
    return deepest, line


def _what(exc: BaseException) -> str:
    if isinstance(exc, ValueError):
        return str(exc) or "invalid source"
    return "too deeply nested or too long to parse"
