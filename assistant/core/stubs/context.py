"""What the prompt shows around a stub: the code of its file within a token budget (:func:`stub_context`), what
a method's class sets on `self` (:func:`attribute_outlines`), the fragment query and the sized token limit.
"""

from __future__ import annotations

import ast
import io
import math
import tokenize
from collections.abc import Callable, Iterator, Sequence

from assistant.code.definitions import FunctionNode, scope_definitions, walk_functions
from assistant.code.edit import (
    leading_whitespace,
    source_lines,
)
from assistant.code.extract import first_paragraph
from assistant.core.stubs.find import Stub, _char_col, _parse, _shares_line
from assistant.core.tokens import Count, approximate_tokens
from assistant.core.usages import outline
from assistant.errors import UsageError

# How many tokens of surrounding code the prompt may hold (imports, the enclosing class, the nearest definitions).
STUB_CONTEXT_TOKENS = 768
# A neighbour this short is shown whole; a longer one as its signature and docstring summary.
SHORT_DEFINITION_LINES = 12
# With `attributes`: at most this many statements that set attributes on `self` shown per stub (the class's and
# its bases' in the same file).
ATTRIBUTE_STATEMENTS = 24
# The query for the repository's fragments: the file's last lines up to the body (RepoCoder's window before the hole).
FRAGMENT_QUERY_LINES = 20


def stub_context(
    text: str,
    stub: Stub,
    budget: int = STUB_CONTEXT_TOKENS,
    count: Count = approximate_tokens,
    tree: ast.Module | None = None,
    attributes: bool = False,
) -> str:
    """The code around a stub for the prompt, within `budget` tokens (by `count`), in file order.

    Always the stub itself (its head and `...`) and the headers of the classes around it; then, while the
    budget lasts: the file's imports, the enclosing class's attributes, then the nearest definitions (the
    class's other methods first, then the module's), each whole when short, else as signature + docstring.

    With `attributes`, a method's class's instance attributes come before the nearest definitions: each method
    that sets one on `self` (`__init__` first; then the class's bases defined in the file) is shown whole when
    short, else as its signature and those statements (:func:`attribute_outline`), since a long `__init__`'s
    outline hides the names the method is likeliest to read.
    """
    tree = tree or _parse(text, "the file")
    lines = source_lines(text)
    node, classes = _located(tree, stub)
    pieces: dict[int, list[str]] = {}  # first line -> the lines shown there
    used = 0

    def add(at: int, shown: list[str], must: bool = False) -> bool:
        nonlocal used
        if at in pieces:
            return True
        cost = count("\n".join(shown)) + 1
        if not must and used + cost > budget:
            return False
        pieces[at] = shown
        used += cost
        return True

    head = [line.lstrip("\f") for line in source_lines(stub.head)]
    add(stub.start, [*head, stub.body_indent + "...  # <- write this body"], must=True)
    for cls in classes:
        cls_start = min([cls.lineno] + [d.lineno for d in cls.decorator_list])
        add(cls_start, outline(lines, cls), must=True)
    for statement in tree.body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            add(statement.lineno, list(lines[statement.lineno - 1 : statement.end_lineno]))
    scopes: list[list[ast.stmt]] = [cls.body for cls in reversed(classes)] + [tree.body]
    for body in scopes[:1] if classes else []:
        for statement in body:
            if isinstance(statement, ast.Assign | ast.AnnAssign) and (statement.end_lineno or 0) - statement.lineno < 3:
                add(statement.lineno, list(lines[statement.lineno - 1 : statement.end_lineno]))
    if attributes and classes and _instance_method(node):
        attribute_outlines(tree, lines, classes[-1], node, add)
    anchor = stub.line
    for body in scopes:
        nearest = sorted(
            (s for s in scope_definitions(body, blocks=False) if s is not node and s not in classes),
            key=lambda s: abs(s.lineno - anchor),
        )
        for definition in nearest:
            start = min([definition.lineno] + [d.lineno for d in definition.decorator_list])
            end = definition.end_lineno or definition.lineno
            whole = list(lines[start - 1 : end])
            if end - start + 1 <= SHORT_DEFINITION_LINES and add(start, whole):
                continue
            add(start, outline(lines, definition))
        if classes:
            outer = classes[0]
            anchor = outer.lineno
    return _in_file_order(pieces)


def _located(tree: ast.Module, stub: Stub) -> tuple[FunctionNode, tuple[ast.ClassDef, ...]]:
    """The stub's function node and the classes around it (outermost first), or a one-line UsageError when the
    file no longer has it at its line."""
    target: tuple[FunctionNode, tuple[ast.ClassDef, ...]] | None = None
    for qualname, node, classes in walk_functions(tree.body, blocks=False):
        if qualname == stub.qualname and node.lineno == stub.line:
            target = (node, classes)
    if target is None:
        raise UsageError(f"{stub.qualname} is no longer at line {stub.line}; run the command again")
    return target


def _in_file_order(pieces: dict[int, list[str]]) -> str:
    """The pieces (first line -> lines) in file order, a blank line where lines between them are left out."""
    shown: list[str] = []
    previous_end = 0
    for at in sorted(pieces):
        if shown and at > previous_end + 1:
            shown.append("")
        shown.extend(pieces[at])
        previous_end = at + len(pieces[at]) - 1
    return "\n".join(line.rstrip() for line in shown).strip("\n")


# Methods that Python makes class-level without a decorator: their first parameter is the class.
IMPLICIT_CLASS_METHODS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


def _instance_method(method: FunctionNode) -> bool:
    """Whether a method's first parameter is the instance: not a staticmethod or classmethod (by decorator or by
    Python's rule for `__new__` and the like)."""
    named = {
        d.id if isinstance(d, ast.Name) else d.attr
        for d in method.decorator_list
        if isinstance(d, ast.Name | ast.Attribute)
    }
    return not ({"staticmethod", "classmethod"} & named) and method.name not in IMPLICIT_CLASS_METHODS


def _set_names(target: ast.expr, this: str) -> list[str]:
    """The attributes an assignment target sets on `this` (`self.x`, `self.a, self.b`, `*self.rest`); not
    `self.d[k]` nor `self.a.b`, which change what an attribute holds."""
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == this:
        return [target.attr]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _set_names(element, this)]
    if isinstance(target, ast.Starred):
        return _set_names(target.value, this)
    return []


def _self_assignments(method: FunctionNode) -> Iterator[tuple[ast.stmt, list[str]]]:
    """The statements of a method that set attributes of its first parameter (`self.x = ...`, `self.a, self.b =
    ...`, `self.x: int = 0`), in file order, with the names they set; nested functions and classes are not looked
    into."""
    arguments = [*method.args.posonlyargs, *method.args.args]
    if not arguments:
        return
    this = arguments[0].arg
    pending: list[ast.AST] = list(reversed(method.body))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [name for target in targets for name in _set_names(target, this)]
            if names:
                yield node, names
            continue
        pending.extend(reversed(list(ast.iter_child_nodes(node))))


def _header_end(lines: Sequence[str], method: FunctionNode) -> int:
    """The line where a `def` header ends (its colon), not the comments between it and the body."""
    text = "\n".join(lines[method.lineno - 1 : method.body[0].lineno]) + "\n"
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
            elif token.type == tokenize.OP and token.string == ":" and depth == 0:
                return method.lineno + token.start[0] - 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return method.body[0].lineno - 1


def attribute_outline(lines: Sequence[str], method: FunctionNode, statements: Sequence[ast.stmt]) -> list[str]:
    """A method's decorators, signature and docstring summary, then the lines of `statements` (each moved back to
    the body's indentation, as one may sit inside an `if`; a line two of them share, once), then `...`: what it
    sets on `self`, the rest left out."""
    start, _ = _span(method)
    header_end = _header_end(lines, method)
    if method.body[0].lineno <= header_end:  # `def __init__(self): self.x = 1`: the body shares the header's line
        return list(lines[start - 1 : method.end_lineno or method.lineno])
    shown = list(lines[start - 1 : header_end])
    indent = leading_whitespace(lines[method.body[0].lineno - 1])
    docstring = ast.get_docstring(method)
    if docstring:
        shown.append(f'{indent}"""{first_paragraph(docstring)}"""')
    done = header_end
    for statement in statements:
        first = lines[statement.lineno - 1].lstrip("\f")
        deeper = leading_whitespace(first)
        for number in range(max(statement.lineno, done + 1), (statement.end_lineno or statement.lineno) + 1):
            line = lines[number - 1].lstrip("\f")
            if number == statement.lineno and _shares_line(lines, statement):
                # `else: self.c = 2`: the statement alone, from where it starts (the clause is not shown).
                line = deeper + lines[number - 1][_char_col(lines[number - 1], statement.col_offset) :]
            shown.append(indent + line[len(deeper) :] if line.startswith(deeper) else line)
        done = max(done, statement.end_lineno or statement.lineno)
    shown.append(indent + "...")
    return shown


def _span(node: ast.stmt) -> tuple[int, int]:
    """A statement's first line (its decorators' included) and last line."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


def _bases(tree: ast.Module, cls: ast.ClassDef) -> list[ast.ClassDef]:
    """`cls`, then its bases defined at the file's top level (each the last class of that name defined before
    the class naming it, never one enclosing `cls`), breadth first, each once."""
    top = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    order: list[ast.ClassDef] = []
    pending = [cls]
    while pending:
        current = pending.pop(0)
        if current in order:
            continue
        order.append(current)
        for base in current.bases:
            name = base.value if isinstance(base, ast.Subscript) else base  # `Base[int]`, `Generic[T]`
            earlier = [
                c
                for c in top
                if isinstance(name, ast.Name)
                and c.name == name.id
                and c.lineno < current.lineno
                and not c.lineno <= cls.lineno <= (c.end_lineno or c.lineno)  # an enclosing class is not a base
            ]
            pending.extend(earlier[-1:])
    return order


def attribute_outlines(
    tree: ast.Module,
    lines: Sequence[str],
    cls: ast.ClassDef,
    skip: FunctionNode,
    add: Callable[[int, list[str]], bool] = lambda at, shown: True,
) -> list[str]:
    """Offer `add` (first line, lines; True when taken) what an instance method of `cls` may read on `self`: each
    method other than `skip` that first sets one of its attributes (`__init__` first, then in file order), whole
    when short, else :func:`attribute_outline`; then for each base of `cls` defined at the file's top level, one
    piece, its header and its methods so (a short base whole). An attribute counts as shown once a piece holding
    its first assignment is taken; at most ATTRIBUTE_STATEMENTS assignments are offered in all. Returns the
    names shown."""
    seen: list[str] = []
    room = ATTRIBUTE_STATEMENTS
    for owner in _bases(tree, cls):
        methods = [
            m
            for m in scope_definitions(owner.body, blocks=False)
            if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m is not skip and _instance_method(m)
        ]
        methods.sort(key=lambda m: m.name != "__init__")  # stable: file order otherwise
        base: list[list[str]] = []  # a base's methods' lines, offered with its header as one piece
        held: list[str] = []  # the names they show
        spent = 0
        for method in methods:
            taken: list[ast.stmt] = []
            names: list[str] = []
            for statement, sets in _self_assignments(method):
                if room - len(taken) > 0 and [n for n in sets if n not in seen and n not in held and n not in names]:
                    taken.append(statement)
                    names += [n for n in sets if n not in names]
            if not taken:
                continue
            start, end = _span(method)
            whole = end - start + 1 <= SHORT_DEFINITION_LINES
            shown = list(lines[start - 1 : end]) if whole else attribute_outline(lines, method, taken)
            if owner is not cls:
                base.append(shown)
                held += names
                spent += len(taken)
                room -= len(taken)
            elif add(start, shown):  # not taken: its names stay unseen, so a later, shorter piece may show them
                seen += names
                room -= len(taken)
        if not base:
            continue
        start, end = _span(owner)
        if end - start + 1 <= SHORT_DEFINITION_LINES:  # a short base whole, as the nearest definitions show it
            shown = list(lines[start - 1 : end])
        else:
            shown = outline(lines, owner)
            for method_lines in base:
                shown += ["", *method_lines]
        if add(start, shown):
            seen += held
        else:
            room += spent
    return seen


def default_max_tokens(stub: Stub, prefilled: bool) -> int:
    """A token limit sized to the task: a docstring that describes more gets more room for the body.

    128 tokens plus twice the docstring's (a body rarely outgrows twice its description), rounded up to 32,
    at most 1024; where the model must re-type the signature and docstring (no prefill), their tokens too.
    """
    words = approximate_tokens(stub.docstring or "")
    limit = 128 + 2 * words + (0 if prefilled else approximate_tokens(stub.head))
    return min(1024, 32 * math.ceil(limit / 32))


def fragment_query(text: str, stub: Stub, lines: int = FRAGMENT_QUERY_LINES) -> str:
    """What the repository's 20-line fragments are searched with: the file's last `lines` lines up to where the
    body starts (the signature and docstring, and the code just above them), as RepoCoder and RepoEval query
    with the window before the hole."""
    return "\n".join(source_lines(text[: stub.head_end])[-lines:])
