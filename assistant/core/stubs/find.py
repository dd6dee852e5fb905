"""Finding stubs: every function of a file and where its body sits in the file's text (:class:`Stub`), by
syntax position on the file's own text; :func:`find_stub` names the one to fill or says in one line why not.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assistant.code.definitions import FunctionNode, is_overload, walk_functions
from assistant.code.edit import (
    leading_whitespace,
    source_lines,
)
from assistant.code.git import work_tree_python_files
from assistant.code.parse import parse_module, syntax_problem
from assistant.errors import UsageError
from assistant.paths import git_toplevel
from assistant.progress import Progress


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
    matches = [f for f in functions if f.qualname == function] or [f for f in functions if _named(f, function)]
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
            f"{stub.qualname} ({name}:{stub.line}) is not a stub: its body has {stub.body_lines} "
            f"line{'' if stub.body_lines == 1 else 's'} of code; "
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


STUB_SEARCH_BYTES = 4 << 20  # a Python file larger than this is generated or data: not searched for a stub


def _stub_files(root: Path, names: Sequence[str], function: str) -> tuple[list[str], list[str]]:
    """Of the Python files `names` (relative to `root`), those where `function` is the stub :func:`find_stub` would
    fill, and those where it names a function with a body. Read as an index reads a repo's files: a link, a
    non-regular file, one outside the repo or over STUB_SEARCH_BYTES is passed over (a repo never has another file
    read), and so is one that never writes `def NAME`, is not UTF-8 or does not parse."""
    pattern = re.compile(rf"\bdef\s+{re.escape(function.rsplit('.', 1)[-1])}\b")
    stubs, bodies = [], []
    for name in names:
        text = _source(root, name)
        if text is None or not pattern.search(text):  # most files do not: they are not parsed
            continue
        try:
            # As the fill will read it: an exact `Class.method` first, a redefinition over an earlier one.
            found = find_stub(text, function, name, requirement_given=True)
        except UsageError:  # ambiguous there, or not fillable as written: the fill, asked, says which precisely
            if any(f.is_stub and _named(f, function) for f in _functions(text, name)):
                stubs.append(name)
            continue
        (stubs if found.is_stub else bodies).append(name)
    return stubs, bodies


def _named(stub: Stub, function: str) -> bool:
    """Whether `function` ("name" or "Class.method") may name `stub`, as :func:`find_stub` matches names."""
    return stub.qualname == function or stub.name == function or stub.qualname.endswith("." + function)


def _functions(text: str, name: str) -> list[Stub]:
    try:
        return find_functions(text, name)
    except UsageError:  # does not parse
        return []


def _source(root: Path, name: str) -> str | None:
    """The text of the repo's file `name` as an index reads it (None for a link, a non-regular file, one outside
    the repo, over STUB_SEARCH_BYTES or not UTF-8; a BOM is dropped)."""
    from assistant.code.extract import read_repo_file

    data = read_repo_file(root, name, limit=STUB_SEARCH_BYTES)
    if data is None:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def repo_stubs(root: Path, progress: Progress | None = None) -> list[tuple[str, str]]:
    """Every stub of the Python files of the git work tree `root` (tracked, or untracked and not ignored), as (file
    relative to `root`, qualified name), in file then line order; files read as :func:`_source` reads them, and
    one that does not parse passed over. `progress` hears ("parse", files done, files), and may raise to stop."""
    report = progress or (lambda stage, done, total: None)
    names = work_tree_python_files(root)
    found: list[tuple[str, str]] = []
    for done, name in enumerate(names):
        report("parse", done, len(names))
        text = _source(root, name)
        try:
            found += [(name, stub.qualname) for stub in list_stubs(text, name)] if text is not None else []
        except UsageError:
            continue
    report("parse", len(names), len(names))
    return found


def locate_stub(function: str, start: Path) -> Path:
    """The file of the git work tree around `start` (tracked, or untracked and not ignored) where `function` is a
    stub, for a request that names the function but not its file; or a one-line UsageError: no work tree, no file
    with that stub (where the name has a body, those files are named), or more than one (each named). Not
    searched: files git ignores, submodules, and what :func:`_stub_files` passes over."""
    root = git_toplevel(start if start.is_dir() else start.parent)
    if root is None:
        raise UsageError(
            f"{start} is in no git work tree to look for the stub {function!r} in; name its file",
            setting="function:no_repo",
            values={"name": function},
        )
    stubs, bodies = _stub_files(root, work_tree_python_files(root), function)
    if len(stubs) == 1:
        return root / stubs[0]
    values = {"name": function, "root": str(root), "count": len(stubs), "files": _listed(stubs or bodies)}
    if stubs:
        raise UsageError(
            f"{function!r} is a stub in {len(stubs)} files of {root} ({values['files']}); name the file",
            setting="function:ambiguous",
            values=values,
        )
    values["bodies"] = f" ({function!r} has a body in {values['files']})" if bodies else ""
    raise UsageError(
        f"no Python file of {root} has a stub {function!r} (a body of ..., pass or raise NotImplementedError)"
        f"{values['bodies']}; name its file",
        setting="function:nowhere",
        values=values,
    )


def _listed(names: Sequence[str], most: int = 6) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
