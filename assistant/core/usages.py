"""The project's own APIs that a stub's file uses, for the prompt: what its body most likely calls.

A function in a repository calls the repository's helpers, and those sit in other files, which the prompt's
file context does not show. Demonstrations (functions like the one asked for) bring a helper's definition only by
chance. This looks the other way, at use: the names the stub's file calls or imports (`f(...)`, `x.f(...)`,
`from .m import f`, `Class(...)` for its `__init__`) are matched to the project's functions defined in other
files, and the nearest-used ones are shown as signature and docstring summary, within a token budget. It is the
"what the file imports and calls" context of repository-level completion systems (RLPG's import channel,
RepoCoder's and CoCoMIC's cross-file definitions), kept to what the file itself already names.

Matching is by name: a name that half the project defines (`get`, `run`) says nothing and is skipped, and so are
the names of builtins and of builtin types' methods.
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from collections.abc import Sequence
from pathlib import PurePosixPath

from assistant.code.edit import leading_whitespace
from assistant.code.examples import Example
from assistant.code.extract import first_paragraph
from assistant.code.parse import parse_module
from assistant.core.repo_tests import is_test_file
from assistant.core.tokens import Count, approximate_tokens

# How many tokens of the project's definitions the stub prompt may hold.
USED_DEFINITIONS_TOKENS = 384
# A name defined in more places than this (across the project's other files) is too common to resolve by name.
MAX_DEFINITIONS = 2
# Names too common to tell a project's function from a builtin or a builtin type's method.
COMMON = frozenset(dir(builtins)) | {
    name for kind in (dict, list, str, set, bytes, tuple, int, float, object) for name in dir(kind)
}

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def outline(lines: Sequence[str], node: FunctionNode | ast.ClassDef) -> list[str]:
    """A definition's decorators and signature, its docstring summary and `...`, at its own indentation."""
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    first = node.body[0]
    # The body starts at its first statement's decorators, if any (a class's first method may be a property).
    first_body = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])])
    signature_end = first_body - 1 if first_body > node.lineno else node.lineno
    shown = list(lines[start - 1 : signature_end])
    if first_body == node.lineno:  # `def f(): ...` on one line: keep the line, it is short
        return shown
    indent = leading_whitespace(lines[first_body - 1])
    docstring = ast.get_docstring(node)
    if docstring:
        shown.append(f'{indent}"""{first_paragraph(docstring)}"""')
    if not isinstance(node, ast.ClassDef):
        shown.append(indent + "...")
    return shown


def is_test_path(path: str) -> bool:
    """Test code, not an API: pytest's test files, conftest.py, and whatever sits in a tests/ or test/ folder."""
    where = PurePosixPath(path)
    return is_test_file(where) or where.name == "conftest.py" or bool({"tests", "test"} & set(where.parts[:-1]))


def used_names(tree: ast.Module, around: int, skip: tuple[int, int] = (0, 0)) -> dict[str, int]:
    """The names a module calls or imports from elsewhere, each with its distance in lines from line `around` to
    its nearest use; lines `skip` (first, last: the stub's own body) are not looked at."""
    local = {
        node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    found: dict[str, int] = {}

    def note(name: str, line: int) -> None:
        if name in COMMON or name in local or skip[0] <= line <= skip[1]:
            return
        distance = abs(line - around)
        found[name] = min(distance, found.get(name, distance))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                note(node.func.id, node.lineno)
            elif isinstance(node.func, ast.Attribute):
                note(node.func.attr, node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if alias.name != "*":
                    note(alias.name, node.lineno)
    return found


def _owner(example: Example) -> tuple[str, str]:
    """(the class a method belongs to, or "", the function's own name)."""
    parts = example.name.split(".")
    return (parts[-2] if len(parts) > 1 else "", parts[-1])


def _shown(example: Example) -> list[str]:
    """An example function as its signature and docstring summary, with where it is defined."""
    code = textwrap.dedent(example.code)
    try:
        tree = parse_module(code)
    except SyntaxError:
        return []
    nodes = [n for n in tree.body if isinstance(n, FunctionNode)]
    if not nodes:
        return []
    owner, _ = _owner(example)
    shown = outline(code.splitlines(), nodes[0])
    if owner:  # a method under its class's header, as Python reads it
        shown = [f"class {owner}:", *("    " + line if line else line for line in shown)]
    return [f"# {example.path}", *shown]


def used_definitions(
    tree: ast.Module,
    path: str,
    around: int,
    pool: Sequence[Example],
    *,
    skip: tuple[int, int] = (0, 0),
    budget: int = USED_DEFINITIONS_TOKENS,
    count: Count = approximate_tokens,
) -> tuple[str, list[Example]]:
    """The definitions from the project's other files (`pool`, less `path` and test files) that the module
    `tree` uses, nearest use to line `around` first, as outlines within `budget` tokens ("" when none), and the
    examples shown."""
    by_name: dict[str, list[Example]] = {}
    for example in pool:
        if example.kind != "function" or example.path == path or is_test_path(example.path) or not example.name:
            continue
        owner, name = _owner(example)
        by_name.setdefault(name, []).append(example)
        if name == "__init__" and owner:  # `Class(...)` runs its __init__
            by_name.setdefault(owner, []).append(example)
    shown: list[str] = []
    chosen: list[Example] = []
    seen: set[int] = set()
    used = 0
    for name, _ in sorted(used_names(tree, around, skip).items(), key=lambda item: (item[1], item[0])):
        definitions = by_name.get(name, [])
        if not definitions or len(definitions) > MAX_DEFINITIONS:
            continue
        for example in definitions:
            if id(example) in seen:
                continue
            seen.add(id(example))
            lines = _shown(example)
            cost = count("\n".join(lines)) + 1
            if not lines or used + cost > budget:
                continue
            shown += [*lines, ""]
            chosen.append(example)
            used += cost
    return "\n".join(shown).strip("\n"), chosen
