"""Fill a stub in place: find a function whose body is `...`, `pass` or `raise NotImplementedError`, show the
model the code around it, prefill its answer with the stub's own signature and docstring, and put only the new
body back into the file.

Everything is done by syntax position on the file's own text: the lines before and after the body are kept
byte for byte (line endings, tabs, form feeds, comments), and the body is indented as the file indents.
"""

from __future__ import annotations

import ast
import io
import math
import time
import tokenize
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.backends import Backend, Completion, Prompt, SamplingParams, Step
from assistant.code.definitions import FunctionNode, is_overload, scope_definitions, walk_functions
from assistant.code.edit import (
    LEFT_OUT,
    Edit,
    add_missing_imports,
    leading_whitespace,
    make_edit,
    merge,
    own_module_names,
    read_target_source,
    source_lines,
)
from assistant.code.examples import Example
from assistant.code.extract import first_paragraph
from assistant.code.fences import code_span
from assistant.code.parse import parse_module, syntax_problem
from assistant.core.candidates import Candidate, CutOff, repeats_itself
from assistant.core.rank import Rankers
from assistant.core.retrieve import Hit, Retriever, demonstration_filter
from assistant.core.target import Target
from assistant.core.tokens import Count, approximate_tokens, token_counter
from assistant.core.usages import outline, used_definitions
from assistant.errors import UsageError
from assistant.progress import Progress

if TYPE_CHECKING:
    from assistant.core.generation import GenerateResult


# How many tokens of surrounding code the prompt may hold (imports, the enclosing class, the nearest definitions).
STUB_CONTEXT_TOKENS = 768
# A neighbour this short is shown whole; a longer one as its signature and docstring summary.
SHORT_DEFINITION_LINES = 12
# With `attributes`: at most this many statements that set attributes on `self` shown per stub (the class's and
# its bases' in the same file).
ATTRIBUTE_STATEMENTS = 24
# The query for the repository's fragments: the file's last lines up to the body (RepoCoder's window before the hole).
FRAGMENT_QUERY_LINES = 20


@dataclass(frozen=True)
class Stub:
    """A function of a file and where its body sits in that file's text (offsets are into that exact text)."""

    qualname: str  # "name", "Class.method", "Outer.Inner.method"
    name: str
    form: str  # "...", "pass", "raise NotImplementedError", "docstring only", or "body" (not a stub)
    docstring: str | None
    start: int  # first line, decorators included (1-based, as ast counts)
    line: int  # the `def` line
    end: int
    head: str  # the kept text from the first decorator to where the body starts (signature, docstring)
    head_end: int  # character offset where the body's replaced region starts
    body_end: int  # character offset where it ends (the last body line's end, before its line ending)
    newline: str  # the line ending used for new lines ("\n", "\r\n" or "\r")
    indent: str  # the `def` line's indentation
    body_indent: str  # the indentation the new body gets
    body_lines: int  # lines the current body takes (0 for a docstring-only stub)
    overload: bool = False  # an `@overload` declaration: a signature for type checkers, never the one to fill
    inline_docstring: bool = False  # `def f(x): "Doc."`: a body cannot go under a docstring on the `def` line

    @property
    def is_stub(self) -> bool:
        return self.form != "body" and not self.overload

    def dedented_head(self) -> str:
        """The head moved to column 0 (what the model's answer starts with)."""
        return "\n".join(_strip_prefix(line, self.indent) for line in source_lines(self.head))

    def to_json(self) -> dict:
        return {"function": self.qualname, "line": self.line, "form": self.form, "docstring": self.docstring}


def _strip_prefix(line: str, prefix: str) -> str:
    line = line.lstrip("\f")  # a form feed before a definition is layout, not indentation
    return line[len(prefix) :] if line.startswith(prefix) else line


def _form(body: Sequence[ast.stmt], has_docstring: bool) -> str:
    rest = list(body[1:] if has_docstring else body)
    if not rest:
        return "docstring only"
    if len(rest) != 1:
        return "body"
    node = rest[0]
    if isinstance(node, ast.Pass):
        return "pass"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis:
        return "..."
    if isinstance(node, ast.Raise) and node.cause is None:
        raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
            return "raise NotImplementedError"
    return "body"


def _indent_unit(lines: Sequence[str]) -> str:
    """One indentation level as the file writes it: a tab where lines are tab-indented, else four spaces."""
    for line in lines:
        if line[:1] == "\t" and line.strip():
            return "\t"
    return "    "


def _char_col(line: str, byte_col: int) -> int:
    """ast's column (UTF-8 bytes) as a character index into the line."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _shares_line(lines: Sequence[str], node: ast.stmt) -> bool:
    """Whether code comes before `node` on its first line (`def f(x): "Doc."`)."""
    line = lines[node.lineno - 1]
    return bool(line[: _char_col(line, node.col_offset)].strip(" \t\f"))


def _describe(text: str, lines: list[str], offsets: list[int], qualname: str, node: FunctionNode) -> Stub:
    docstring = ast.get_docstring(node, clean=True)
    has_docstring = docstring is not None
    form = _form(node.body, has_docstring)
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    def_line = lines[node.lineno - 1]
    indent = leading_whitespace(def_line)
    unit = _indent_unit(lines)
    last = node.body[0] if form == "docstring only" else node.body[1 if has_docstring else 0]

    def line_end(number: int) -> int:  # offset of the end of a line's content (before its line ending)
        return offsets[number - 1] + len(lines[number - 1])

    def ending(number: int) -> str:
        raw = text[line_end(number) : offsets[number] if number < len(offsets) else len(text)]
        return raw or "\n"

    if form == "docstring only":
        # Nothing to replace: the body goes after the docstring.
        anchor = node.body[0]
        head_end = line_end(anchor.end_lineno or anchor.lineno)
        body_end = head_end
        docline = lines[anchor.lineno - 1]
        own_line = not docline[: _char_col(docline, anchor.col_offset)].strip(" \t\f")
        body_indent = leading_whitespace(docline) if own_line else indent + unit
        body_lines = 0
    else:
        first = last
        first_line = lines[first.lineno - 1]
        column = _char_col(first_line, first.col_offset)
        before = first_line[:column]
        if before.strip(" \t\f"):
            # The body shares a line with the signature or the docstring (`def f(x): ...`): split it there.
            kept = before.rstrip(" \t").rstrip(";").rstrip(" \t")
            head_end = offsets[first.lineno - 1] + len(kept)
            body_indent = indent + unit
        else:
            head_end = line_end(first.lineno - 1) if first.lineno > node.lineno else offsets[first.lineno - 1]
            body_indent = leading_whitespace(first_line)
        body_end = line_end(node.end_lineno or node.lineno)
        body_lines = (node.end_lineno or node.lineno) - first.lineno + 1
    return Stub(
        qualname=qualname,
        name=node.name,
        form=form,
        docstring=docstring,
        start=start,
        line=node.lineno,
        end=node.end_lineno or node.lineno,
        head=text[offsets[start - 1] : head_end],
        head_end=head_end,
        body_end=body_end,
        newline=ending(node.lineno),
        indent=indent,
        body_indent=body_indent,
        body_lines=body_lines,
        overload=is_overload(node),
        inline_docstring=has_docstring and _shares_line(lines, node.body[0]),
    )


def _parse(text: str, name: str) -> ast.Module:
    try:
        return parse_module(text)
    except SyntaxError as exc:
        raise UsageError(f"{name} does not parse ({syntax_problem(exc)}); fix it first") from None
    except ValueError:
        raise UsageError(f"{name} does not parse (it holds NUL bytes)") from None


def _line_offsets(lines_kept: list[str]) -> list[int]:
    offsets, at = [], 0
    for line in lines_kept:
        offsets.append(at)
        at += len(line)
    return offsets


def find_functions(text: str, name: str = "the file", tree: ast.Module | None = None) -> list[Stub]:
    """Every function and method of `text` (module level and in classes, nested classes included), stubs or not.

    Not those under `if`, `try`, `with`, a loop or `match`: one name there may be two variants (per platform, per
    version), and which to fill or show would be a guess. `tree` is `text` already parsed (a request parses its
    target once)."""
    tree = tree or _parse(text, name)
    kept = source_lines(text, keepends=True)
    lines = [line.rstrip("\r\n") for line in kept]
    offsets = _line_offsets(kept)
    found = walk_functions(tree.body, blocks=False)
    return [_describe(text, lines, offsets, qualname, node) for qualname, node, _ in found]


def list_stubs(text: str, name: str = "the file") -> list[Stub]:
    """The stubs of `text`, in file order (what the TUI's picker offers)."""
    return [stub for stub in find_functions(text, name) if stub.is_stub]


def find_stub(
    text: str,
    function: str,
    name: str = "the file",
    requirement_given: bool = False,
    tree: ast.Module | None = None,
) -> Stub:
    """The stub called `function` ("name" or "Class.method"; a bare name also finds a unique method), or a
    one-line UsageError: no such function, more than one, not a stub, or no docstring and no requirement. With a
    requirement, a function with a body is found too (its `form` is "body"): its body is the one to rewrite."""
    functions = find_functions(text, name, tree)
    matches = [f for f in functions if f.qualname == function]
    if not matches:
        matches = [f for f in functions if f.qualname.endswith("." + function) or f.name == function]
    if not matches:
        every = walk_functions((tree or _parse(text, name)).body)  # blocks too: to say why it is not offered
        nested = sorted({node.lineno for qualname, node, _ in every if function in (qualname, node.name)})
        if nested:
            raise UsageError(
                f"{function!r} is defined under an if, try, with, loop or match block in {name} (line "
                f"{', '.join(map(str, nested))}); assist fills functions at module and class level only"
            )
        stubs = [f.qualname for f in functions if f.is_stub]
        hint = f"; its stubs: {', '.join(stubs[:8])}" if stubs else "; it has no stubs (a body of ..., pass or raise)"
        raise UsageError(f"there is no function {function!r} in {name}{hint}")
    if len({m.qualname for m in matches}) > 1:
        raise UsageError(f"{function!r} is ambiguous in {name}: {', '.join(m.qualname for m in matches)}; name one")
    # `@overload` declarations only give signatures: the implementation after them is the one to fill.
    declared = [m for m in matches if not m.overload]
    if not declared:
        raise UsageError(
            f"{matches[0].qualname} ({name}:{matches[0].line}) is only declared with @overload; write its "
            "implementation (a `def` without @overload, its docstring and `...`) to have it filled"
        )
    # A redefinition wins, as at run time, unless only an earlier one is a stub (a property's getter, written
    # before its setter, is the one to fill).
    stub = ([m for m in declared if m.is_stub] or declared)[-1]
    if not stub.is_stub and not requirement_given:
        # A body is rewritten only when asked with a requirement: what it should do now is not its docstring's.
        raise UsageError(
            f"{stub.qualname} ({name}:{stub.line}) is not a stub: its body has {stub.body_lines} line(s) of code; "
            "give a requirement to have it rewritten, or replace the body with `...` to have it written"
        )
    if stub.inline_docstring:
        raise UsageError(
            f"{stub.qualname} ({name}:{stub.line}) has its docstring on the `def` line, where no body can follow "
            "it; move the docstring to a line of its own"
        )
    if not stub.docstring and not requirement_given:
        raise UsageError(
            f"{stub.qualname} ({name}:{stub.line}) has no docstring; write one, or give the requirement as well"
        )
    return stub


# -- context -------------------------------------------------------------------------------------------


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
    target: tuple[FunctionNode, tuple[ast.ClassDef, ...]] | None = None
    for qualname, node, classes in walk_functions(tree.body, blocks=False):
        if qualname == stub.qualname and node.lineno == stub.line:
            target = (node, classes)
    if target is None:
        raise UsageError(f"{stub.qualname} is no longer at line {stub.line}; run the command again")
    node, classes = target
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


# -- candidates ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Taken:
    """What a sample gives for the stub: its new body (at column 0), and the other definitions it also wrote."""

    body: str
    others: tuple[str, ...]  # e.g. ("rewrites helper()", "adds extra()")
    imports: tuple[str, ...]  # top-level imports it wrote (the file gets those it lacks)
    params: tuple[str, ...] = ()  # the parameters of the function the sample wrote (its own signature)


def _string_interior(code: str) -> set[int]:
    """Lines (1-based) that lie inside a multi-line string after its first line: re-indenting them would change
    the string."""
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                inside.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


def _cut_to_parse(code: str) -> tuple[ast.Module, str] | None:
    """The longest prefix of `code` ending before a column-0 line that parses (a sample cut off while it was
    writing something after the function still gives the function)."""
    lines = source_lines(code, keepends=True)
    for cut in range(len(lines) - 1, 0, -1):
        if lines[cut][:1] not in ("", " ", "\t", "\n", "\r", "#"):
            prefix = "".join(lines[:cut])
            try:
                return parse_module(prefix), prefix
            except (SyntaxError, ValueError):
                continue
    return None


def take_body(code: str, name: str, existing: Sequence[str], finished: bool) -> Taken | str:
    """The body of the function `name` in a sample's `code` (at module level, or as a method of a class the
    sample wrote), or why there is none: "cut off", "syntax", "no function".

    A sample that was cut off (`finished` False) counts only if the function ended before the cut.
    """
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError):
        if finished:
            return "syntax"
        rescued = _cut_to_parse(code)
        if rescued is None:
            return "cut off"
        tree, code = rescued
        salvaged = True
    else:
        salvaged = False
    found = [(n, i) for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    target = next((n for n, _ in found if n.name == name), None)
    if target is None:
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            target = next(
                (m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == name), None
            )
            if target is not None:
                break
    if target is None:
        return "no function" if finished or tree.body else "cut off"
    lines = source_lines(code)
    if not finished and not salvaged and (target.end_lineno or 0) >= len(lines) - _trailing_blank(lines):
        # It parsed as it stood when cut, but nothing followed the function: it may be unfinished.
        return "cut off"
    docstring = ast.get_docstring(target) is not None
    statements = target.body[1:] if docstring else target.body
    if not statements:
        return "no body"
    first = statements[0]
    first_line = lines[first.lineno - 1]
    column = _char_col(first_line, first.col_offset)
    if first_line[:column].strip(" \t\f"):
        # One-line `def f(x): return x`: the body is what follows the colon.
        body_lines = [first_line[column:], *lines[first.lineno : target.end_lineno]]
        indent = ""
    else:
        body_lines = list(lines[first.lineno - 1 : target.end_lineno])
        indent = leading_whitespace(first_line)
    interior = _string_interior(code)
    dedented = []
    for number, line in enumerate(body_lines, start=first.lineno):
        if number in interior:
            dedented.append(line)
        elif not line.strip():
            dedented.append("")
        elif indent and line.startswith(indent):
            dedented.append(line[len(indent) :])
        else:
            dedented.append(line)
    others = []
    imports = []
    for statement in tree.body:
        if statement is target:
            continue
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if isinstance(statement, ast.ClassDef) and target in statement.body:
                # The class the sample wrote around the method: only its other methods are something else.
                for member in statement.body:
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and member is not target:
                        verb = "rewrites" if member.name in existing else "adds"
                        others.append(f"{verb} {statement.name}.{member.name}()")
                continue
            verb = "rewrites" if statement.name in existing else "adds"
            others.append(f"{verb} {statement.name}()")
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            imports.append(ast.unparse(statement))
    return Taken(
        body="\n".join(dedented).rstrip() + "\n",
        others=tuple(others),
        imports=tuple(imports),
        params=_params(target),
    )


def _params(node: FunctionNode) -> tuple[str, ...]:
    """A function's parameter names, every kind."""
    args = node.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
    return tuple(a.arg for a in named)


def _trailing_blank(lines: list[str]) -> int:
    count = 0
    for line in reversed(lines):
        if line.strip():
            break
        count += 1
    return count


def indent_body(body: str, stub: Stub) -> list[str]:
    """`body` (at column 0, as :func:`take_body` gives it) indented as the stub's body is, one level mapped onto
    the file's own unit (tabs stay tabs), lines inside multi-line strings left as they are."""
    unit = stub.body_indent[len(stub.indent) :] if stub.body_indent.startswith(stub.indent) else stub.body_indent
    unit = unit or "    "
    lines = source_lines(body)
    interior = _string_interior(body)

    def leading(line: str) -> str:
        return line[: len(line) - len(line.lstrip(" \t"))]

    # The model's own unit: the indentation of the first statement nested in another (the body itself is at
    # column 0); a continuation line of a bracket says nothing of it. Unparsable: the first indented line's.
    model_unit = _nested_indent(body, lines) or next(
        (leading(line) for n, line in enumerate(lines, 1) if leading(line) and n not in interior), ""
    )
    out = []
    for number, line in enumerate(lines, start=1):
        if number in interior:
            out.append(line)
        elif not line.strip():
            out.append("")
        else:
            rest = leading(line)
            levels = 0
            while model_unit and rest.startswith(model_unit):
                rest, levels = rest[len(model_unit) :], levels + 1
            out.append(stub.body_indent + unit * levels + rest + line.lstrip(" \t"))
    while out and not out[-1]:
        out.pop()
    return out


def _nested_indent(body: str, lines: Sequence[str]) -> str:
    """The leading whitespace of the first statement that starts its own line indented, or "" (none, or `body`
    does not parse at column 0)."""
    try:
        tree = parse_module(body)
    except (SyntaxError, ValueError):
        return ""
    nested = sorted((n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.col_offset > 0), key=lambda n: n.lineno)
    for node in nested:
        line = lines[node.lineno - 1]
        lead = leading_whitespace(line)
        if lead and _char_col(line, node.col_offset) == len(lead):
            return lead
    return ""


def fill_body(text: str, stub: Stub, body: str) -> str:
    """`text` with the stub's body replaced by `body` (at column 0); every other character is kept."""
    lines = indent_body(body, stub)
    if not lines:
        raise UsageError(f"the new body of {stub.qualname} is empty")
    replacement = stub.newline + stub.newline.join(lines)
    return text[: stub.head_end] + replacement + text[stub.body_end :]


# -- planning the edit ---------------------------------------------------------------------------------


def plan_fill(path: Path | Target, stub: Stub, taken: Taken, root: Path | None = None) -> Edit:
    """The edit that fills the stub in `path` (a path, or the file as already read) with `taken`'s body (and adds
    imports the file lacks). Writes nothing.

    The stub must describe the file as it is (the edit is refused at apply time if the file changed since)."""
    if isinstance(path, Target):
        named, raw, old_text = Path(path.given).expanduser().absolute(), path.raw, path.text
    else:
        named = Path(path).expanduser().absolute()
        raw, old_text, _ = read_target_source(named.resolve())
    new = fill_body(old_text, stub, taken.body)
    actions = [f"fill {stub.qualname}"]
    # Never an import of the file itself: inside it, that is a circular import.
    own = own_module_names(named, root)
    if taken.imports:
        # The file's lines keep their endings (a file may mix them); the imports take the stub's.
        merged, done = merge(new, "\n".join(taken.imports) + "\n", own, newline=stub.newline)
        if done:
            new = merged
            actions += done
    new, added = add_missing_imports(old_text, new, own, newline=stub.newline)
    actions += added
    actions += [f"{LEFT_OUT}{other}" for other in taken.others]
    return make_edit(named, raw, old_text, new, actions, root)


def collect_stub(
    completions: Sequence[Completion], stub: Stub, prefix: str, existing: Sequence[str]
) -> tuple[list[tuple[Candidate, Taken]], Counter[str], list[CutOff]]:
    """Candidates for a stub from samples: each sample's new body, the function it makes (the candidate's code),
    what else it wrote (dropped, named in `Candidate.dropped`), and the samples cut off by the token limit.

    `prefix` is the code the answer was prefilled with (the stub's head), "" when the model wrote the whole
    function. Duplicates are dropped by the new body's syntax tree."""
    kept: list[tuple[Candidate, Taken]] = []
    dropped: Counter[str] = Counter()
    cut: list[CutOff] = []
    seen: set[str] = set()
    head = stub.dedented_head()
    for number, completion in enumerate(completions):
        if prefix:
            start, end = code_span(completion.text) if "```" in completion.text else (0, len(completion.text))
            code = prefix + completion.text[start:end].replace("\r\n", "\n")
        else:
            start, end = code_span(completion.text)
            code = completion.text[start:end].replace("\r\n", "\n")
        finished = completion.finish_reason != "length"
        taken = take_body(code, stub.name, existing, finished)
        if isinstance(taken, str):
            if taken == "cut off":
                looping = completion.cut_reason == "looping" or repeats_itself(completion.text)
                reason = completion.cut_reason or "token limit"  # the engine may end a straggler early
                cut.append(CutOff(number, completion.tokens, completion.text, looping, reason))
            dropped[taken] += 1
            continue
        function = head + "\n" + "\n".join(indent_body(taken.body, _relative(stub))) + "\n"
        try:
            tree = parse_module(function)
        except (SyntaxError, ValueError):
            dropped["syntax"] += 1
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes and the like: the file's own check says them
                compile(tree, "<candidate>", "exec", dont_inherit=True)  # `await` outside async, and the like
        except (SyntaxError, ValueError):
            dropped["syntax"] += 1
            continue
        written = tree.body[0]
        if isinstance(written, ast.FunctionDef | ast.AsyncFunctionDef) and _form(
            written.body, ast.get_docstring(written) is not None
        ) in ("...", "pass", "raise NotImplementedError"):
            dropped["still a stub"] += 1
            continue
        if isinstance(written, ast.FunctionDef | ast.AsyncFunctionDef):
            # A sample that wrote its own signature: a body using a parameter the stub lacks cannot go under it.
            names = [n for n in ast.walk(written) if isinstance(n, ast.Name)]
            used = {n.id for n in names if isinstance(n.ctx, ast.Load)} - {
                n.id for n in names if not isinstance(n.ctx, ast.Load)
            }  # read, never bound in the body: a name the stub's signature would have to supply
            if (set(taken.params) - set(_params(written))) & used:
                dropped["another signature"] += 1
                continue
        form = ast.dump(tree)
        if form in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(form)
        candidate = Candidate(
            code=function,
            sample=number,
            tokens=completion.tokens,
            logprobs=completion.logprobs,
            dropped=taken.others,
            imports=taken.imports,
        )
        kept.append((candidate, taken))
    return kept, dropped, cut


def _relative(stub: Stub) -> Stub:
    """The stub as if its `def` sat at column 0 (to show a candidate as a function on its own)."""
    body_indent = stub.body_indent[len(stub.indent) :] if stub.body_indent.startswith(stub.indent) else "    "
    return replace(stub, indent="", body_indent=body_indent or "    ")


# -- generation ----------------------------------------------------------------------------------------


def _described(request: StubRequest) -> dict:
    """The stub as a result shows it; with `apis` asked for, the used functions its prompt showed (`path:line`)."""
    described = request.stub.to_json()
    if request.apis is not None:
        described["apis"] = [{"name": e.name, "source": e.source} for e in request.apis]
    if request.fragments is not None:
        described["fragments"] = [hit.example.source for hit in request.fragments]
    return described


def _defined_names(tree: ast.Module) -> list[str]:
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]


@dataclass(frozen=True)
class StubRequest:
    """A stub-filling request, ready to sample: the stub, the prompt and how its answers are read."""

    stub: Stub
    query: str  # the requirement (the docstring unless given), also the retrieval query
    requirement: str  # as given ("" when the docstring stands for it)
    hits: list[Hit]
    prompt: Prompt
    prompt_tokens: int
    limit: int  # max_new_tokens of the samples
    sized: bool  # the limit was sized to the docstring (so it may grow once when every sample is cut off)
    prefix: str  # the code the answer is prefilled with ("" when the model writes the whole function)
    existing: list[str]  # the file's other definitions (a sample that rewrites one is flagged)
    display: str
    apis: list[Example] | None = None  # the used functions shown in the prompt (None: not asked for)
    fragments: list[Hit] | None = None  # the repository's fragments shown in the prompt (None: not asked for)


def prepare_stub(
    function: str,
    backend: Backend,
    target: Target,
    *,
    requirement: str | None = None,
    retriever: Retriever | None = None,
    k: int = 4,
    max_new_tokens: int | None = None,
    tests: Sequence[str] = (),
    root: Path | None = None,
    progress: Progress | None = None,
    demonstrations: Sequence[Hit] | None = None,
    context_tokens: int = STUB_CONTEXT_TOKENS,
    timings: dict[str, float] | None = None,
    definitions: Sequence[Example] = (),
    fragments: Retriever | None = None,
    own_file: bool = False,
    attributes: bool = False,
    spec_tests: str = "",
    stub: Stub | None = None,
) -> StubRequest:
    """Find the stub, retrieve demonstrations for it and build its prompt (see :func:`fill_stub`).

    `attributes`: the context shows what a method's class sets on `self` before its nearest definitions
    (:func:`stub_context`).

    `own_file`: the demonstrations may be the stub's file's other functions, whole (the context shows most of
    them as outlines only); the stub itself never is, under its name in the index, whatever its body there.
    Off (this function's default; `generate`'s is on, `GenerationOptions.own_file`): they come from the
    repository's other files.

    `definitions`: the project's functions; those from other files that the stub's file uses are shown before
    the file, as signatures and docstring summaries (:func:`assistant.core.usages.used_definitions`). Empty (the
    default): none are. `fragments`: a retriever over the repository's 20-line fragments; with it, the `k` it
    finds for :func:`fragment_query` in the repository's other files are shown first (the code the papers'
    function-level benchmarks retrieve; `retriever` None leaves the demonstrations out).

    `stub`: the stub `function` names in `target`, when the caller found it already (:func:`find_stub` with this
    target, its display name and whether a requirement is given); None finds it here."""
    from assistant.backends import check_text
    from assistant.backends.prompts import build_stub_prompt
    from assistant.core.generation import retrieve_step

    if k < 0:
        raise UsageError("-k must be 0 or more")
    report = progress or (lambda stage, done, total: None)
    if not target.exists:
        raise UsageError(f"{target.given} does not exist; --function fills a stub in an existing file")
    text = target.text
    display = target.display(root)
    requirement = (requirement or "").strip()
    if requirement:
        check_text(requirement, "the requirement")
    if stub is None:
        stub = find_stub(text, function, display, requirement_given=bool(requirement), tree=target.tree)
    query = requirement or stub.docstring or stub.name
    check_text(query, "the docstring")
    timings = timings if timings is not None else {}
    hits = retrieve_step(
        query, retriever, k, demonstrations, demonstration_filter(display, stub.qualname, own_file), report, timings
    )
    found: list[Hit] | None = None if fragments is None else []
    if fragments is not None and k > 0:
        started = time.perf_counter()
        # The file's own code is in the prompt already (and in a benchmark, its fragments hold the hidden body).
        found = fragments.search(fragment_query(text, stub), k, lambda e, path=display: e.path == path)
        timings["fragments"] = time.perf_counter() - started
    prefill = bool(getattr(backend, "prefills_answer", False))
    head = stub.dedented_head()
    count = token_counter(backend)
    context = stub_context(text, stub, context_tokens, count, target.tree, attributes)
    apis, shown = used_definitions(
        target.tree, display, stub.line, definitions, skip=(stub.start, stub.end), count=count
    )
    prompt = build_stub_prompt(
        stub.qualname,
        head,
        context,
        [hit.example for hit in reversed(hits)],  # most similar last, nearest the request
        requirement=requirement,
        tests=tests,
        file_path=display,
        prefill=prefill,
        apis=apis,
        fragments=[hit.example for hit in reversed(found or [])],  # most similar last, nearest the file
        spec_tests=spec_tests,
    )
    return StubRequest(
        stub=stub,
        query=query,
        requirement=requirement,
        hits=hits,
        prompt=prompt,
        prompt_tokens=backend.count_tokens(prompt),
        limit=max_new_tokens or default_max_tokens(stub, prefill),
        sized=max_new_tokens is None,
        prefix=head + "\n" if prefill else "",
        existing=[name for name in _defined_names(target.tree) if name != stub.name],
        display=display,
        apis=shown if definitions else None,
        fragments=found,
    )


def sample_stub(
    request: StubRequest, backend: Backend, params: SamplingParams, progress: Progress | None = None
) -> tuple[list[Completion], int]:
    """The request's samples, and the token limit they ended with: when the limit was sized to the docstring
    and every sample was cut off by it, the cut-off ones are sampled once more at twice the limit (a greedy one
    that repeats its lines is not: more room would only lengthen its loop)."""
    return sample_stubs([request], backend, [params], progress)[0]


def sample_stubs(
    requests: Sequence[StubRequest],
    backend: Backend,
    params: Sequence[SamplingParams],
    progress: Progress | None = None,
) -> list[tuple[list[Completion], int]]:
    """:func:`sample_stub` for several requests (one `params` each): requests that share a token limit and
    sampling settings go to the backend in one `sample_batch` call, each with its own seed, so a request's
    samples do not depend on its neighbours' (up to the rounding of batched arithmetic); the retries at twice
    the limit run one request at a time."""
    if len(params) != len(requests):
        raise ValueError("one SamplingParams per request")
    report = progress or (lambda stage, done, total: None)

    def step(done: int, total: int) -> None:
        report("generate", done, total)

    owned = [replace(p, max_new_tokens=r.limit) for r, p in zip(requests, params, strict=True)]
    groups: dict[tuple, list[int]] = {}
    for position, p in enumerate(owned):
        groups.setdefault((p.n, p.temperature, p.top_p, p.max_new_tokens), []).append(position)
    first: list[list[Completion]] = [[] for _ in requests]
    report("generate", 0, 1)
    for members in groups.values():
        sampled = backend.sample_batch(
            [requests[i].prompt for i in members],
            owned[members[0]],
            step=step,
            seeds=[owned[i].seed for i in members],
        )
        for position, completions in zip(members, sampled, strict=True):
            first[position] = list(completions)
    results = []
    for request, p, completions in zip(requests, owned, first, strict=True):
        limit = p.max_new_tokens
        kept, _, cut = collect_stub(completions, request.stub, request.prefix, request.existing)
        greedy = p.temperature <= 0
        if greedy:
            # A greedy sample going round in a loop would only go on looping with more room: not retried.
            cut = [c for c in cut if not c.repeating]
        if not kept and cut and request.sized:
            # Every sample ran out of room: the limit was too small for this function. Once, with twice as much.
            limit = min(2 * limit, 2048)
            if greedy and backend.prefills_answer:
                more = replace(p, n=1, max_new_tokens=limit - p.max_new_tokens)
                retried = carry_on(backend, request.prompt, [completions[c.sample] for c in cut], more, step)
            else:
                retry = replace(p, n=len(cut), max_new_tokens=limit, seed=None if p.seed is None else p.seed + 1)
                retried = backend.sample(request.prompt, retry, step=step)
            completions = [*completions, *retried]
        results.append((completions, limit))
    report("generate", 1, 1)
    return results


def carry_on(
    backend: Backend, prompt: Prompt, cut: Sequence[Completion], more: SamplingParams, step: Step | None = None
) -> list[Completion]:
    """Greedy samples cut off by their limit, each carried on from where it stopped for `more.max_new_tokens`.

    A greedy draw at twice the limit would begin with the very tokens already drawn, so decoding them again
    (most of a CPU's time for a long body) buys nothing: the cut-off text joins the answer's prefill and only
    the rest is decoded. Sampled retries are drawn afresh instead (a fresh draw may take a shorter path, where
    carrying on commits to the long one)."""
    prompts = [replace(prompt, answer_prefix=prompt.answer_prefix + completion.text) for completion in cut]
    rests = backend.sample_batch(prompts, more, step=step)
    carried = []
    for completion, (rest, *_) in zip(cut, rests, strict=True):
        both = None if completion.logprobs is None or rest.logprobs is None else completion.logprobs + rest.logprobs
        text, tokens = completion.text + rest.text, completion.tokens + rest.tokens
        carried.append(Completion(text, tokens, rest.finish_reason, both))
    return carried


#: Why a sample that wrote nothing was dropped: it re-typed the stub (`...`, `pass`, `raise NotImplementedError`,
#: often copying the prompt's "# <- write this body" line) or ended right after the docstring.
WROTE_NOTHING = frozenset({"still a stub", "no body"})


def wrote_nothing(completion: Completion, request: StubRequest) -> bool:
    """Whether a sample left the stub as it was (see :data:`WROTE_NOTHING`)."""
    kept, dropped, _ = collect_stub([completion], request.stub, request.prefix, request.existing)
    return not kept and not WROTE_NOTHING.isdisjoint(dropped)


def redraw_empty(
    requests: Sequence[StubRequest],
    completions: Sequence[Sequence[Completion]],
    backend: Backend,
    params: Sequence[SamplingParams],
    progress: Progress | None = None,
) -> list[tuple[list[Completion], list[int]]]:
    """Each request's `completions` with every sample that wrote nothing drawn once more in its place, and the
    places redrawn (one `params` each, with the token limit its first samples ended with).

    A small model re-types the stub it was shown in about one sample in ten; such a sample is no candidate, so
    the user would get fewer than the `-n` asked for. Each new sample is drawn on its own (n=1) with the seed
    moved by 2 plus its number (the cut-off retry takes +1), so it depends only on its request and place; all of
    them go to the backend in one `sample_batch` call per sampling setting. One that again writes nothing stays.
    """
    if not len(requests) == len(completions) == len(params):
        raise ValueError("one list of completions and one SamplingParams per request")
    report = progress or (lambda stage, done, total: None)
    redrawn = [list(samples) for samples in completions]
    places: list[list[int]] = [[] for _ in requests]
    wanted: dict[tuple, list[tuple[int, int]]] = {}  # sampling setting -> (request, sample number)
    for position, (request, samples, p) in enumerate(zip(requests, completions, params, strict=True)):
        for number, completion in enumerate(samples):
            if wrote_nothing(completion, request):
                wanted.setdefault((p.temperature, p.top_p, p.max_new_tokens), []).append((position, number))
    for members in wanted.values():
        first = params[members[0][0]]
        drawn = backend.sample_batch(
            [requests[position].prompt for position, _ in members],
            replace(first, n=1),
            step=lambda done, total: report("generate", done, total),
            seeds=[None if params[i].seed is None else params[i].seed + 2 + number for i, number in members],
        )
        for (position, number), samples in zip(members, drawn, strict=True):
            if samples:
                redrawn[position][number] = samples[0]
                places[position].append(number)
    return [(samples, sorted(at)) for samples, at in zip(redrawn, places, strict=True)]


def fill_stub(
    function: str,
    backend: Backend,
    *,
    file: str | Path | None = None,
    target: Target | None = None,
    requirement: str | None = None,
    retriever: Retriever | None = None,
    k: int = 4,
    params: SamplingParams | None = None,
    max_new_tokens: int | None = None,
    tests: Sequence[str] = (),
    root: Path | None = None,
    rankers: Rankers | None = None,
    progress: Progress | None = None,
    demonstrations: Sequence[Hit] | None = None,
    context_tokens: int = STUB_CONTEXT_TOKENS,
    python: str | Path | None = None,
    run_in_module: bool = True,
    definitions: Sequence[Example] = (),
    redraw: bool = False,
    fragments: Retriever | None = None,
    own_file: bool = False,
    spec_tests: str = "",
    stub: Stub | None = None,
) -> GenerateResult:
    """Ranked candidates for the body of the stub `function` in `file`; each candidate's edit replaces only
    that body. `file` names the file, or `target` is the file already read (one of them is needed).
    In a git work tree, the rankers see where the candidates can run (`Problem.home`: the file in a copy of the
    repo, with `python`, default the repo's venv); `agree` runs the model's tests on them there. `run_in_module`
    False leaves that out (the repo's own tests will rank the candidates: agree would only cost time).

    The requirement is the stub's docstring unless `requirement` is given; it is also the retrieval query.
    `max_new_tokens` None sizes the limit to the docstring (:func:`default_max_tokens`) and, when every sample
    was cut off by it, samples once more at twice the limit; a given limit is kept as it is. Samples cut off
    are reported in `cut_off`. With `redraw`, a sample that wrote nothing (re-typed the stub) is drawn once more
    in its place (:func:`redraw_empty`; how many in `redrawn`). Other definitions a sample wrote are dropped
    from its edit, named in its `dropped`, and rank it below every candidate that wrote only the function. `rankers` are
    ranker objects or a function that chooses them for the candidates (None: sampling order). `definitions`:
    the project's functions, whose ones the file uses are shown in the prompt (see :func:`prepare_stub`);
    `own_file` lets the demonstrations be the file's other functions (the same). `spec_tests`: the repo's test
    functions that use the stub, shown in the prompt as its specification (:mod:`assistant.core.spec_tests`).
    `stub`: the stub already found in `target` (see :func:`prepare_stub`); None finds it.
    """
    from assistant.backends.prompts import ANSWER_PREFIX
    from assistant.core.generation import GenerateResult, rank_step, retriever_label
    from assistant.core.home import module_home
    from assistant.core.rank import Problem

    params = params or SamplingParams()
    if params.n < 1:
        raise UsageError("-n must be at least 1")
    report = progress or (lambda stage, done, total: None)
    if target is None:
        if file is None:
            raise UsageError("--function needs --file, the file that holds the stub")
        target = Target.read(file)
    timings: dict[str, float] = {}
    request = prepare_stub(
        function,
        backend,
        target,
        requirement=requirement,
        retriever=retriever,
        k=k,
        max_new_tokens=max_new_tokens,
        tests=tests,
        root=root,
        progress=report,
        demonstrations=demonstrations,
        context_tokens=context_tokens,
        timings=timings,
        definitions=definitions,
        fragments=fragments,
        own_file=own_file,
        spec_tests=spec_tests,
        stub=stub,
    )
    started = time.perf_counter()
    usage_before = backend.usage.to_json()
    completions, limit = sample_stub(request, backend, params, report)
    redrawn: list[int] = []
    if redraw:
        [(completions, redrawn)] = redraw_empty(
            [request], [completions], backend, [replace(params, max_new_tokens=limit)], report
        )
    kept, dropped, cut = collect_stub(completions, request.stub, request.prefix, request.existing)
    timings["generate"] = time.perf_counter() - started

    candidates = [candidate for candidate, _ in kept]
    planned = {candidate.sample: plan_fill(target, request.stub, taken, root) for candidate, taken in kept}
    # Where the candidates can run (their file, filled, in a copy of the repo): what `agree` runs them in.
    home = (
        module_home(target.path, request.stub.qualname, {s: e.new for s, e in planned.items()}, python)
        if run_in_module and target.exists and planned
        else None
    )
    # Scored as whole functions after the plain fence, so a candidate is judged the same way whether its
    # log-probabilities were recorded while sampling or computed now.
    problem = Problem(
        requirement=request.query,
        prompt=replace(request.prompt, answer_prefix=ANSWER_PREFIX),
        tests=tuple(tests),
        home=home,
    )
    ranked, chosen = rank_step(problem, candidates, rankers, report, timings)
    edits = [planned[item.candidate.sample] for item in ranked]

    return GenerateResult(
        requirement=request.query,
        model=backend.model,
        backend=backend.name,
        retriever=retriever_label(retriever, k, request.hits, demonstrations),
        rankers=[r.name for r in chosen],
        demonstrations=request.hits,
        candidates=ranked,
        edits=list(edits),
        prompt=request.prompt,
        prompt_tokens=request.prompt_tokens,
        samples=len(completions),
        dropped=dict(dropped),
        timings=timings,
        usage=backend.usage.since(usage_before),
        function=_described(request),
        cut_off=cut,
        redrawn=len(redrawn),
        max_new_tokens=limit,
        home=home,
    )
