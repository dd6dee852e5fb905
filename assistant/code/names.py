"""Which names a piece of code binds, and which it reads that nothing binds: a bare name that its own code, its
module's top level, its class body and the builtins all leave unbound is a NameError when that line runs."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Sequence

from assistant.code.parse import same_definition, shared_tree

# Names every module has without binding them.
MODULE_DUNDERS = frozenset({"__name__", "__file__", "__doc__", "__spec__", "__package__", "__loader__", "__builtins__"})
_DEFINITIONS = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def bound_names(nodes: Sequence[ast.AST]) -> set[str]:
    """Every name the nodes bind anywhere inside them: assignment targets, parameters, imports (a dotted one binds
    its first part), definitions, `except ... as`, match captures, `global` and `nonlocal` declarations."""
    bound: set[str] = set()
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            bound.update(node.names)
    return bound


def scope_names(body: Sequence[ast.stmt]) -> set[str]:
    """What a module's or class's own statements bind: definitions by name, every other statement's targets."""
    names: set[str] = set()
    for statement in body:
        names |= {statement.name} if isinstance(statement, _DEFINITIONS) else bound_names([statement])
    return names


def _functions(
    body: Sequence[ast.stmt], prefix: str = "", seen: frozenset[str] = frozenset()
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, frozenset[str]]]:
    """Each module-level function and method (of classes at any depth) with its qualified name and the names of the
    class bodies around it."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node, seen
        elif isinstance(node, ast.ClassDef):
            inner = seen | scope_names(node.body) | {"__class__"}
            yield from _functions(node.body, f"{prefix}{node.name}.", frozenset(inner))


def undefined_names(old: str, new: str) -> tuple[str, ...]:
    """The bare names that the functions and methods `new` adds or changes (against `old`, the file before) read
    while nothing binds them: not their own code, the module's top level, their classes' bodies, nor the builtins
    (none under a star import). Sorted; empty when either text does not parse.

    Replayed on 1,190 samples of the 1.5B (237 stubs of six real projects), 2 of the 105 it flags passed their
    tests (`results/correctness-undefined-names`)."""
    try:
        old_tree, new_tree = shared_tree(old), shared_tree(new)
    except (SyntaxError, ValueError):
        return ()
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(new_tree)):
        return ()
    before = {name: node for name, node, _ in _functions(old_tree.body)}
    # A function's `global X` makes X a module name once it runs (`def init(): global CONFIG; CONFIG = ...`).
    declared = {name for node in ast.walk(new_tree) if isinstance(node, ast.Global) for name in node.names}
    module = scope_names(new_tree.body) | declared | set(dir(builtins)) | MODULE_DUNDERS
    found: set[str] = set()
    for name, function, classes in _functions(new_tree.body):
        if same_definition(old, before.get(name), new, function):
            continue
        bound = module | classes | bound_names([function])
        read = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        found |= read - bound
    return tuple(sorted(found))
