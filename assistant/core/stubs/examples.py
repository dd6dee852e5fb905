"""A stub's own examples as tests: the `>>>` lines of its docstring whose expected value is a literal, and its
`assert` lines, where each can run in the stub's module as written.

They are tests the user wrote: when no other tests are given and the repo has none for the stub, its candidates
run them in their module, and a candidate that fails them is not written without `force`. They do not order the
candidates (`assistant.pipeline.pipeline.ranks_by_tests`: measured, agree's order picked better, and agree reads
every example first anyway). Only examples that
cannot be misread are taken: a module-level function's, one line of call and one literal line of value, reading
nothing but the function, the module's top-level names and the builtins (an example that builds an object on an
earlier line, prints, or raises is left to agree, which reads every example).
"""

from __future__ import annotations

import ast
import builtins

from assistant.code.asserts import doctest_assert
from assistant.code.names import MODULE_DUNDERS, scope_names
from assistant.code.parse import parse_module
from assistant.core.stubs.find import Stub


def example_tests(stub: Stub, module: ast.Module) -> tuple[str, ...]:
    """The stub's docstring examples as assert statements (empty for a method's, or none usable)."""
    if "." in stub.qualname or not stub.docstring:
        return ()
    allowed = scope_names(module.body) | set(dir(builtins)) | MODULE_DUNDERS
    lines = [line.strip() for line in stub.docstring.splitlines()] + [""]
    found: list[str] = []
    for number, line in enumerate(lines[:-1]):
        if line.startswith("assert "):
            test = line
        elif line.startswith(">>> ") and _literal(lines[number + 1]) and not _continues(lines, number + 2):
            test = doctest_assert(line[4:], lines[number + 1])
        else:
            continue
        if test is not None and _runs_as_written(test, stub.name, allowed) and test not in found:
            found.append(test)
    return tuple(found)


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return bool(text)


def _continues(lines: list[str], number: int) -> bool:
    """Whether the expected output goes on past its first line (then that line alone is not the value)."""
    return number < len(lines) and bool(lines[number]) and not lines[number].startswith(">>>")


def _runs_as_written(test: str, name: str, allowed: set[str]) -> bool:
    """A test that parses, calls `name`, and reads no name but `name`, the module's and the builtins."""
    try:
        tree = parse_module(test)
    except (SyntaxError, ValueError):
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert):
        return False
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    called = any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
        for node in ast.walk(tree)
    )
    # `print(...)`'s value is None; what a doctest compares is its output.
    return called and "print" not in read and read <= allowed | {name}
