"""A sample's body: read out of the code the model wrote (:func:`take_body`), indented as the file indents
(:func:`indent_body`) and put in place of the stub's body with every other character kept (:func:`fill_body`).
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from assistant.code.definitions import FunctionNode
from assistant.code.edit import (
    leading_whitespace,
    source_lines,
)
from assistant.code.parse import parse_module
from assistant.core.stubs.find import Stub, _char_col
from assistant.errors import UsageError


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
    target = _written(tree, name)
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
    others, imports = _besides(tree, target, existing)
    return Taken(
        body="\n".join(dedented).rstrip() + "\n",
        others=tuple(others),
        imports=tuple(imports),
        params=_params(target),
    )


def _written(tree: ast.Module, name: str) -> FunctionNode | None:
    """The function `name` a sample wrote: at module level, else the first class's method of that name."""
    found = [(n, i) for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    target = next((n for n, _ in found if n.name == name), None)
    if target is None:
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            target = next(
                (m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name == name), None
            )
            if target is not None:
                break
    return target


def _besides(tree: ast.Module, target: FunctionNode, existing: Sequence[str]) -> tuple[list[str], list[str]]:
    """What a sample wrote besides the function `target`: the other definitions (each "rewrites X()" when
    `existing` names it, else "adds X()"), and its top-level imports."""
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
    return others, imports


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
