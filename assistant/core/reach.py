"""Which of a repo's test files may exercise a function: its name, and the names of what calls it, step by step.

Most functions are not named by their tests: `tabulate()` reaches `_pipe_line_with_colons` through a table of
formats, `tests/test_fifo.py` tests `FIFOCache.popitem` through the class. The pool is the test files whose code
names the function, its class (for a method), or, `depth` steps up the static call graph of the function's
package, a function, method, class or module-level name whose code names one of those. It is a superset to run,
not the answer: :func:`assistant.core.repo_tests.probe` then runs it once on the function raising and keeps the
tests that fail having run it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

from assistant.code.extract import read_repo_file
from assistant.code.parse import parse_module
from assistant.core.home import package_root

MAX_SCANNED = 400  # the package's source files read for callers at most (a monorepo's package is cut there)


def parsed(root: Path, relative: str) -> ast.Module | None:
    """The file (relative to `root`) parsed, read as the index reads it (no links out, nor to a device; a size
    limit); None if it cannot be read or is not Python."""
    data = read_repo_file(root, relative)
    if data is None:
        return None
    try:
        return parse_module(data.decode("utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None


def mentioned(*nodes: ast.AST) -> set[str]:
    """Every name the code under `nodes` uses: names, attributes, and what it imports."""
    found: set[str] = set()
    for inner in (inner for node in nodes for inner in ast.walk(node)):
        if isinstance(inner, ast.Name):
            found.add(inner.id)
        elif isinstance(inner, ast.Attribute):
            found.add(inner.attr)
        elif isinstance(inner, ast.alias):
            found.add((inner.asname or inner.name).rpartition(".")[2])
    return found


def _definitions(tree: ast.Module) -> Iterator[tuple[set[str], list[ast.AST]]]:
    """(the names a piece of a module defines, its code): each function, each method (with its class's name: a
    test reaches a method through its class), a class's other statements, and module-level assignments."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions):
            yield {node.name}, [node]
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                names = {node.name, item.name} if isinstance(item, functions) else {node.name}
                yield names, [item]
            yield {node.name}, [*node.bases, *node.decorator_list]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}, [node]


def source_scope(root: Path, path: str, files: Sequence[str]) -> list[str]:
    """The package's .py files among `files` (relative to `root`): those under the folder of the file's top
    package, or the file alone where it is no package's; at most MAX_SCANNED."""
    pure = PurePosixPath(path)
    if not (root / pure.parent / "__init__.py").exists():
        return [path]
    base = PurePosixPath(package_root(root, path) or ".")
    inside = pure.relative_to(base).parts
    if len(inside) == 1:  # the package is the folder `base` itself (the repo's root holds an __init__.py)
        return [f for f in files if PurePosixPath(f).parent == pure.parent and f.endswith(".py")][:MAX_SCANNED]
    prefix = (base / inside[0]).as_posix() + "/"
    return [f for f in files if f.startswith(prefix) and f.endswith(".py")][:MAX_SCANNED]


def caller_levels(trees: Sequence[ast.Module], function: str, depth: int) -> list[set[str]]:
    """The names a test may reach `function` by: level 0 is its name (and its class's, for `Class.method`); level
    i + 1 what the package defines whose code names one of level i's (and is new)."""
    parts = function.split(".")
    levels = [{parts[-1], parts[-2]} if len(parts) > 1 else {parts[-1]}]
    pieces = [(names, mentioned(*code)) for tree in trees for names, code in _definitions(tree)]
    seen = set(levels[0])
    for _ in range(depth):
        step = {n for names, uses in pieces if uses & levels[-1] for n in names} - seen
        if not step:
            break
        levels.append(step)
        seen |= step
    return levels


def reaching_files(
    root: Path, path: str, function: str, files: Sequence[str], test_files: Sequence[str], depth: int
) -> list[str]:
    """The test files (among `test_files`) whose code names `function` or, `depth` steps up, what calls it: the
    files naming it first (the one named after its module first), then those of each step up."""
    tests = set(test_files)
    sources = [f for f in source_scope(root, path, files) if f not in tests]
    trees = [tree for f in sources if (tree := parsed(root, f)) is not None]
    levels = caller_levels(trees, function, depth)
    stem = PurePosixPath(path).stem
    ranked: list[tuple[int, int, str]] = []
    for relative in test_files:
        tree = parsed(root, relative)
        uses = mentioned(tree) if tree is not None else set()
        level = next((i for i, names in enumerate(levels) if uses & names), None)
        if level is not None:
            named = PurePosixPath(relative).stem in (f"test_{stem}", f"{stem}_test")
            ranked.append((level, 0 if named else 1, relative))
    return [relative for *_, relative in sorted(ranked)]
