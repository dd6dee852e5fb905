"""Which attributes a method reads through its first parameter (`self.x`) that its class defines nowhere: an
AttributeError when that line runs. Only where the class can be read whole from its module: a base imported from
elsewhere, a metaclass, a decorator that may add attributes, `__getattr__`, or `setattr`/`__dict__`/`vars` in its
methods leaves it unchecked (nothing is flagged)."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Mapping

from assistant.code.names import scope_names
from assistant.code.parse import same_definition, shared_tree

_FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef
_CLASS_DECORATORS = frozenset({"dataclass"})  # adds methods and reads the annotations already in the body


def _dotted_tail(node: ast.expr) -> str:
    """The last name of a decorator (`dataclass`, `dataclasses.dataclass`, `dataclass(frozen=True)`)."""
    if isinstance(node, ast.Call):
        return _dotted_tail(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _first_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name the instance (or class) comes in as; None for a static method or one without parameters."""
    if any(_dotted_tail(d) == "staticmethod" for d in function.decorator_list):
        return None
    positional = [*function.args.posonlyargs, *function.args.args]
    return positional[0].arg if positional else None


def _dynamic(node: ast.AST) -> bool:
    """Whether code may add attributes by name: `setattr(...)`, `vars(...)`, or any `__dict__`."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in ("setattr", "vars"):
            return True
        if isinstance(inner, ast.Attribute) and inner.attr == "__dict__":
            return True
    return False


def _assigned(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The attributes a method sets through its first parameter (`self.x = ...`, `+=`, annotated, loop targets)."""
    first = _first_parameter(function)
    return {
        node.attr
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and not isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and node.value.id == first
    }


def _slots(body: list[ast.stmt]) -> set[str]:
    """The strings of a class's `__slots__`."""
    found: set[str] = set()
    for statement in body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in statement.targets
        ):
            found |= {
                n.value for n in ast.walk(statement.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            }
    return found


def class_attributes(
    owner: ast.ClassDef, classes: Mapping[str, ast.ClassDef], skip: str = "", seen: frozenset[str] = frozenset()
) -> set[str] | None:
    """Every attribute an instance of `owner` may have, read from its module: its body's names, what its methods
    set through their first parameter, `__slots__`, and the same of its bases defined in the module (`classes`, by
    name); a builtin base adds what `dir()` gives it. None where the class cannot be read whole (see the module's
    docstring). `skip`: a method of `owner` left out (the stub being filled: its old body is not the candidate's)."""
    if owner.keywords or owner.name in seen:
        return None
    if any(_dotted_tail(d) not in _CLASS_DECORATORS for d in owner.decorator_list):
        return None
    known = scope_names(owner.body) | _slots(owner.body)
    if known & {"__getattr__", "__getattribute__"}:
        return None
    for method in (n for n in owner.body if isinstance(n, _FUNCTIONS) and n.name != skip):
        if _dynamic(method):
            return None
        known |= _assigned(method)
    for base in owner.bases:
        if not isinstance(base, ast.Name):
            return None  # `Generic[T]`, `module.Base`: defined elsewhere
        if base.id in classes:
            inherited = class_attributes(classes[base.id], classes, seen=seen | {owner.name})
            if inherited is None:
                return None
            known |= inherited
        elif isinstance(getattr(builtins, base.id, None), type):
            known |= set(dir(getattr(builtins, base.id)))
        else:
            return None  # imported
    return known


def owner_class(module: ast.Module, qualname: str) -> ast.ClassDef | None:
    """The class that holds method `qualname` (`Outer.Inner.method`), or None for a function."""
    body, owner = module.body, None
    for part in qualname.split(".")[:-1]:
        owner = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if owner is None:
            return None
        body = owner.body
    return owner


def unknown_attributes(
    module: ast.Module, qualname: str, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> list[str]:
    """The attributes `function`, a version of method `qualname` of `module`, reads through its first parameter
    that the class defines nowhere (as `self.name`, sorted); empty where the class cannot be read whole, for a
    function or static method, or where `function` rebinds its first parameter or sets attributes by name."""
    owner = owner_class(module, qualname)
    first = _first_parameter(function)
    if owner is None or first is None or _dynamic(function):
        return []
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in module.body):
        return []
    if any(isinstance(n, ast.Name) and n.id == first and not isinstance(n.ctx, ast.Load) for n in ast.walk(function)):
        return []
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    known = class_attributes(owner, classes, skip=function.name)
    if known is None:
        return []
    known |= _assigned(function)
    read = {
        node.attr
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and node.value.id == first
    }
    return sorted(f"{first}.{name}" for name in read - known if not (name.startswith("__") and name.endswith("__")))


def _methods(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Each method of the classes in `body` (at any depth) with its qualified name."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, _FUNCTIONS):
                    yield f"{prefix}{node.name}.{inner.name}", inner
            yield from _methods(node.body, f"{prefix}{node.name}.")


def undefined_attributes(old: str, new: str) -> tuple[str, ...]:
    """:func:`unknown_attributes` of every method `new` adds or changes against `old` (the file before), read in
    `new`; sorted, empty when either text does not parse."""
    try:
        old_tree, new_tree = shared_tree(old), shared_tree(new)
    except (SyntaxError, ValueError):
        return ()
    before = {name: node for name, node in _methods(old_tree.body)}
    found: set[str] = set()
    for name, method in _methods(new_tree.body):
        if not same_definition(old, before.get(name), new, method):
            found.update(unknown_attributes(new_tree, name, method))
    return tuple(sorted(found))
