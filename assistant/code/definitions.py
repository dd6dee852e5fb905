"""A module's classes and functions, found one way by everything that reads them: the index, stub filling and
the docstring writer."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
Definition = FunctionNode | ast.ClassDef
Found = tuple[str, Definition, tuple[ast.ClassDef, ...]]


def is_overload(node: FunctionNode) -> bool:
    """Whether a function is decorated `@overload` or `@typing.overload` (a signature for type checkers only)."""
    return any(
        (isinstance(d, ast.Name) and d.id == "overload") or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in node.decorator_list
    )


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists of a compound statement (if, try, with, for, while, match), in source order."""
    lists: list[object] = [getattr(node, "body", None)]
    lists += [handler.body for handler in getattr(node, "handlers", ())]
    lists += [getattr(node, "orelse", None), getattr(node, "finalbody", None)]
    lists += [case.body for case in getattr(node, "cases", ())]
    return [block for block in lists if isinstance(block, list)]


def scope_definitions(body: Sequence[ast.stmt], *, blocks: bool = True) -> Iterator[Definition]:
    """The classes and functions a module's or a class's body defines, in file order; with `blocks`, those under
    its compound statements too (if, try, with, loops, match), never those inside a class or a function."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node
        elif blocks:
            for block in _blocks(node):
                yield from scope_definitions(block)


def walk_definitions(body: Sequence[ast.stmt], *, blocks: bool = True) -> Iterator[Found]:
    """Classes and functions in file order, each with its qualified name ("Outer.Inner.method") and the classes
    around it (outermost first): at module level and in classes, nested classes included.

    Functions inside functions are closures, not API, and are left out. With `blocks`, definitions under the
    compound statements at those levels count too (`if TYPE_CHECKING:`, a try/except ImportError fallback, a
    platform or version switch, a `match`, a loop): they are API as well, and one name may then occur twice.
    """

    def visit(statements: Sequence[ast.stmt], prefix: str, classes: tuple[ast.ClassDef, ...]) -> Iterator[Found]:
        for node in scope_definitions(statements, blocks=blocks):
            name = prefix + node.name
            yield name, node, classes
            if isinstance(node, ast.ClassDef):
                yield from visit(node.body, name + ".", (*classes, node))

    return visit(body, "", ())


def walk_functions(
    body: Sequence[ast.stmt], *, blocks: bool = True
) -> Iterator[tuple[str, FunctionNode, tuple[ast.ClassDef, ...]]]:
    """The functions and methods of :func:`walk_definitions` (classes left out)."""
    for qualname, node, classes in walk_definitions(body, blocks=blocks):
        if not isinstance(node, ast.ClassDef):
            yield qualname, node, classes
