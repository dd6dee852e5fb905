"""The repo's own tests as a stub's specification: the source of the test functions that mention it, for the prompt.

A test written before the body says what the body must do more exactly than a docstring: the names, the
arguments and the expected values. Filling a stub, `generate` shows the model the repo's test functions that
mention it (:func:`assistant.core.repo_tests.find_tests`'s choice: the test file named after the module first),
each whole, as many as fit a token budget (:data:`SPEC_TESTS_TOKENS`); never the rest of a test file.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Sequence
from pathlib import Path

from assistant.code.extract import read_repo_file
from assistant.code.parse import parse_module
from assistant.core.home import git_files, too_wide
from assistant.core.repo_tests import find_tests
from assistant.core.tokens import Count, approximate_tokens

SPEC_TESTS_TOKENS = 512  # the most tokens the tests may take in a stub's prompt


def _node(tree: ast.Module, parts: Sequence[str]) -> ast.AST | None:
    """The definition a node id's `Class::name` parts name in a test module."""
    scope: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for part in parts:
        found = next((n for n in scope if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and n.name == part), None)  # fmt: skip
        if found is None:
            return None
        scope = getattr(found, "body", [])
    return found


def tests_source(
    root: Path, nodes: Sequence[str], budget: int = SPEC_TESTS_TOKENS, count: Count = approximate_tokens
) -> str:
    """The source of the test functions named by pytest node ids (`tests/test_x.py::TestA::test_b`), in the order
    given, each under a comment naming it, as many whole ones as fit `budget` tokens (by `count`); "" for none."""
    parsed: dict[str, ast.Module | None] = {}
    texts: dict[str, str] = {}
    shown: list[str] = []
    used = 0
    for node in nodes:
        path, *parts = node.split("::")
        if path not in parsed:
            data = read_repo_file(root, path)  # not a link, nor outside the repo
            texts[path] = "" if data is None else data.decode("utf-8", errors="replace")
            try:
                parsed[path] = parse_module(texts[path]) if data is not None else None
            except (SyntaxError, ValueError):
                parsed[path] = None
        tree = parsed[path]
        found = _node(tree, [p.split("[", 1)[0] for p in parts]) if tree is not None and parts else None
        if not isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        lines = texts[path].splitlines()
        start = min([found.lineno] + [d.lineno for d in found.decorator_list])
        source = textwrap.dedent("\n".join(lines[start - 1 : found.end_lineno]))
        piece = f"# {node}\n{source}"
        cost = count(piece) + 1
        if used + cost > budget:
            continue  # a shorter one further on may still fit
        shown.append(piece)
        used += cost
    return "\n\n".join(shown)


def spec_tests(
    root: Path, path: str | Path, function: str, budget: int = SPEC_TESTS_TOKENS, count: Count = approximate_tokens
) -> str:
    """The repo's test functions that mention `function` of `path` (relative to `root`), as :func:`tests_source`
    shows them; "" outside a git work tree, in the home folder or /, or when none mention it. Nothing runs."""
    root = Path(root)
    if too_wide(root) or git_files(root) is None:
        return ""
    return tests_source(root, find_tests(root, path, function), budget, count)
