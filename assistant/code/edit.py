"""Edits: put a candidate into a file by syntax position, show the unified diff, apply it atomically.

A candidate's top-level functions and classes replace the file's top-level definitions of the same name
(decorators included) or are appended at the end; imports the file lacks go after its last top-level
import. Nothing is written until :func:`apply_edit`, which refuses to touch a file with unstaged changes
(the user's work could not be recovered from git) unless forced. `from __future__` imports go first.

Line numbers are mapped onto text the way Python counts lines (LF, CRLF and a lone CR end a line; form
feeds, U+2028 and the other characters `str.splitlines` also breaks at do not). Every writer of Python
source goes through :func:`write_python`, which compiles the new bytes first and writes nothing if they
do not compile.
"""

from __future__ import annotations

import ast
import builtins
import codecs
import difflib
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard, Unpack

from assistant.code.attributes import undefined_attributes
from assistant.code.names import bound_names, undefined_names
from assistant.code.parse import parse_module, same_definition, shared_tree, syntax_problem
from assistant.errors import UsageError
from assistant.paths import (
    GIT,
    ChangedOnDisk,
    WriteChecks,
    atomic_write_bytes,
    committed_link,
    git_toplevel,
    write_target,
)

# A line as Python's tokenizer sees one: ended by \r\n, \r or \n (universal newlines), or the unended last.
_SOURCE_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
# A line as git and diff see one: ended by \n only.
_DIFF_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def source_lines(text: str, keepends: bool = False) -> list[str]:
    """`text` split into lines numbered as `ast` numbers them (unlike `str.splitlines`, which also breaks at
    form feeds, U+001C-U+001E, U+0085 and U+2028/U+2029 and so drifts from `ast`'s line numbers)."""
    lines = _SOURCE_LINE.findall(text)
    return lines if keepends else [line.rstrip("\r\n") for line in lines]


def leading_whitespace(line: str) -> str:
    """A line's indentation (spaces and tabs; a form feed resets the column, as in Python's tokenizer)."""
    whitespace = re.match(r"[ \t\f]*", line).group()  # type: ignore[union-attr]
    return whitespace.rsplit("\f", 1)[-1]


def check_compiles(data: bytes, name: str, what: str = "the new text") -> None:
    """Refuse, with one line, Python source that would not compile (bytes, so a BOM and a coding cookie
    count as they will when Python reads the file)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are the file's business
            compile(parse_module(data, name), name, "exec", dont_inherit=True)  # a tree too deep is refused first
    except SyntaxError as exc:
        raise UsageError(f"{name}: {what} would not compile ({syntax_problem(exc)}); not written") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise UsageError(f"{name}: {what} would not compile ({exc}); not written") from None


def write_python(
    path: Path, text: str, *, name: str | None = None, bom: bool = False, **checks: Unpack[WriteChecks]
) -> None:
    """The one way assist writes Python source: compile check, then an atomic rewrite that keeps the file's
    mode, owner and symlink (:func:`assistant.paths.atomic_write_bytes`; `root`, `force` and `expected`: see
    :class:`assistant.paths.WriteChecks`).

    With `expected` (the bytes read before the change was made), a file edited meanwhile is not written:
    :class:`assistant.paths.ChangedOnDisk`. `bom` puts a UTF-8 byte order mark back in front.
    """
    name = name or str(path)
    if bom and not text.startswith("\ufeff"):
        text = "\ufeff" + text
    data = source_bytes(text, name)
    check_compiles(data, name)
    try:
        atomic_write_bytes(Path(path), data, **checks)
    except UsageError:
        raise
    except OSError as exc:
        raise UsageError(f"{name}: cannot write ({exc.strerror or exc}); not written") from None


@dataclass(frozen=True)
class Edit:
    """A planned change to one file: old and new text and the unified diff between them."""

    path: Path
    display_path: str
    old: str
    new: str
    diff: str
    actions: tuple[str, ...]  # e.g. ("replace is_even", "insert import math")
    exists: bool = True
    named: Path | None = None  # the path as given (a symlink stays one); `path` is where it resolves
    root: Path | None = None  # the repo: a symlink is written through only to a target inside it
    # Definitions the file has that the candidate re-typed and the edit leaves as they are ("rewrites f()").
    left_out: tuple[str, ...] = ()
    # Bare names the new code reads and nothing in the new file binds (a NameError when that line runs), and
    # `self.x` a changed method reads that its class defines nowhere (an AttributeError).
    undefined: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "path": self.display_path,
            "diff": self.diff,
            "actions": list(self.actions),
            "left_out": list(self.left_out),
            "undefined": list(self.undefined),
        }


def _span(node: ast.stmt) -> tuple[int, int]:
    """1-based first and last line of a definition, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno] + [d.lineno for d in decorators])
    return start, node.end_lineno or node.lineno


def _definitions(tree: ast.Module) -> dict[str, tuple[int, int, list[ast.stmt]]]:
    """Each top-level name's definition as (first line, last line, its nodes): a run of consecutive definitions
    of one name (`@overload` declarations, then the implementation) counts as one; else the last one (the one
    that holds at run time)."""
    found: dict[str, tuple[int, int, list[ast.stmt]]] = {}
    previous: str | None = None
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            previous = None
            continue
        start, end = _span(node)
        if node.name == previous:
            first, _, nodes = found[node.name]
            found[node.name] = (first, end, [*nodes, node])
        else:
            found[node.name] = (start, end, [node])
        previous = node.name
    return found


def _main_guard(tree: ast.Module) -> ast.stmt | None:
    """The file's last statement when it is `if __name__ == "__main__":` (new definitions go above it)."""
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.If) and isinstance(last.test, ast.Compare) and isinstance(last.test.left, ast.Name):
        comparators = last.test.comparators
        if last.test.left.id == "__name__" and comparators and isinstance(comparators[0], ast.Constant):
            return last if comparators[0].value == "__main__" else None
    return None


def _imports_module(node: ast.Import | ast.ImportFrom, modules: frozenset[str]) -> bool:
    """Whether `node` imports one of `modules` (the file's own names): `from pkg.utils import x`, `import
    pkg.utils`, or relatively, `from .utils import x` in utils.py (its stem is among the names)."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return node.level == 1 and node.module is not None and node.module in modules
        return node.module in modules
    return any(alias.name in modules for alias in node.names)


def _is_future(node: ast.stmt) -> TypeGuard[ast.ImportFrom]:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__" and node.level == 0


def _module_docstring(tree: ast.Module) -> ast.stmt | None:
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def _future_position(tree: ast.Module, lines: list[str]) -> int:
    """How many of the file's lines come before where `from __future__` imports may go: after the file's
    own future imports, else after the module docstring, else before the first statement (comments and a
    shebang stay above it)."""
    futures = [n for n in tree.body if _is_future(n)]
    if futures:
        return max(n.end_lineno or n.lineno for n in futures)
    docstring = _module_docstring(tree)
    if docstring is not None:
        return docstring.end_lineno or docstring.lineno
    if tree.body:
        return _span(tree.body[0])[0] - 1
    count = len(lines)
    while count and not lines[count - 1].strip():
        count -= 1
    return count


def dominant_newline(text: str) -> str:
    """The line ending most of `text`'s lines use ("\n" when it has none)."""
    crlf = text.count("\r\n")
    counts = {"\r\n": crlf, "\r": text.count("\r") - crlf, "\n": text.count("\n") - crlf}
    return max(counts, key=lambda ending: (counts[ending], ending == "\n"))


def _merge_class(
    old: ast.ClassDef,
    new: ast.ClassDef,
    lines: list[str],
    code_lines: list[str],
    newline: str,
    actions: list[str],
    replaceable: Callable[[str], bool] = lambda name: True,
) -> list[tuple[int, int, int, list[str]]] | None:
    """The changes that merge class `new` (a candidate's) into the file's class `old` member by member: a method
    the file's class has is replaced, a new one goes at the class's end, and every other member stays (a sample
    that wrote `class Stack` with one method once replaced the user's whole class). None when the class's header
    differs (bases, decorators, keywords: then it is replaced whole) or a member cannot be placed."""

    def header(cls: ast.ClassDef) -> list[list[str]]:
        return [[ast.dump(node) for node in part] for part in (cls.decorator_list, cls.bases, cls.keywords)]

    if header(old) != header(new):
        return None
    kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    old_members = {n.name: n for n in old.body if isinstance(n, kinds)}
    new_members = [n for n in new.body if isinstance(n, kinds)]
    if not new_members or any(n.lineno == old.lineno for n in old.body):  # `class A: x = 1` on one line
        return None
    old_indent = leading_whitespace(lines[_span(old.body[-1])[0] - 1])  # a class body is never empty
    new_indent = leading_whitespace(code_lines[_span(new_members[0])[0] - 1])

    def reindented(member: ast.stmt) -> list[str]:
        start, end = _span(member)
        shown = []
        for line in code_lines[start - 1 : end]:
            body = line[len(new_indent) :] if line.startswith(new_indent) else line.lstrip(" \t")
            shown.append(old_indent + body if line.strip() else line)
        return shown

    changes: list[tuple[int, int, int, list[str]]] = []
    added: list[str] = []
    for member in new_members:
        mine = old_members.get(member.name)
        if mine is not None:
            if ast.dump(mine) != ast.dump(member) and not replaceable(f"{new.name}.{member.name}"):
                actions.append(f"{LEFT_OUT}rewrites {new.name}.{member.name}()")
            elif ast.dump(mine) != ast.dump(member):
                start, end = _span(mine)
                changes.append((start - 1, end, 0, reindented(member)))
                actions.append(f"replace {new.name}.{member.name}")
        else:
            added += [newline, *reindented(member)]
            actions.append(f"insert {new.name}.{member.name}")
    if added:
        end = old.end_lineno or old.lineno
        changes.append((end, end, 0, added))
    return changes


# How an edit's actions name what a candidate wrote that the edit leaves out ("dropped: rewrites f()").
LEFT_OUT = "dropped: "


def replaceable_names(replace: Collection[str] | None) -> Callable[[str], bool]:
    """Whether a definition the file already has (`name` or `Class.method`) may be replaced: every one when
    `replace` is None, else only those it names (a class named lets its methods be replaced too; a bare name
    also names a method of that name)."""
    if replace is None:
        return lambda name: True
    wanted = frozenset(replace)
    return lambda name: name in wanted or name.split(".")[0] in wanted or name.rsplit(".", 1)[-1] in wanted


def definition_names(tree: ast.Module) -> list[str]:
    """The file's top-level functions and classes and its classes' members (`Class.method`), in file order: the
    names a request may allow its candidates to rewrite."""
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    names: list[str] = []
    for node in (n for n in tree.body if isinstance(n, kinds)):
        names.append(node.name)
        if isinstance(node, ast.ClassDef):
            names.extend(f"{node.name}.{member.name}" for member in node.body if isinstance(member, kinds))
    return names


def check_replace_names(tree: ast.Module, names: Collection[str], display: str) -> None:
    """A one-line UsageError for a name to replace that the file does not define at its top level (a function or
    class, or `Class.method`; a member's bare name too)."""
    listed = definition_names(tree)
    defined = {*listed, *(name.split(".", 1)[1] for name in listed if "." in name)}
    for name in names:
        if name not in defined:
            # As --replace takes them: `Class.method`, never a member's bare name, which reads as a top-level one.
            shown = ", ".join(listed[:8]) + (", ..." if len(listed) > 8 else "") if listed else "none"
            raise UsageError(f"there is no function or class {name!r} in {display} to replace (it defines: {shown})")


# A change to the file's lines: (from, to, order at one place, new lines), applied as lines[from:to] = new lines.
_Change = tuple[int, int, int, list[str]]


def merge(
    old: str,
    code: str,
    own_module: frozenset[str] = frozenset(),
    newline: str | None = None,
    replace: Collection[str] | None = None,
) -> tuple[str, list[str]]:
    """The file text with `code` merged in, and a list of what was done. Both must parse.

    `replace`: the definitions the file already has (None: every one) that `code` may replace. Another's
    redefinition is left out, the file's own kept byte for byte, and named ("dropped: rewrites f()"): working code
    nobody asked to change never changes. New definitions and imports go in (not star ones: :func:`_star_import`).

    Imports of `own_module` (the file's own module names) are left out: a model that was shown the
    file tends to import its functions from it, which inside that file is a circular import. The file's
    lines keep their own endings, and the new lines end with `newline` (default: the ending most of the file's
    lines use); `from __future__` imports go before every other statement.
    """
    newline = newline or dominant_newline(old)
    try:
        tree = parse_module(old)
    except SyntaxError as exc:
        raise UsageError(f"the target file does not parse ({syntax_problem(exc)}); fix it first") from None
    new_tree = parse_module(code)
    code_lines = [line + newline for line in source_lines(code)]
    lines = source_lines(old, keepends=True)  # numbered as ast numbers them
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    actions: list[str] = []
    # Every change is made against the file's own line numbers and applied bottom-up in one pass, so no change
    # moves the place of another (an import inserted after a shorter replacement once landed inside a string).
    changes: list[_Change] = []
    appended: list[list[str]] = []
    imports: list[str] = []
    features: list[str] = []
    have_imports = _imported(tree)
    have_features = {alias.name for n in tree.body if _is_future(n) for alias in n.names}
    existing, new_definitions = _definitions(tree), _definitions(new_tree)
    replaceable = replaceable_names(replace)
    for node in new_tree.body:
        start, end = _span(node)
        if _is_future(node):
            features += [a.name for a in node.names if a.name not in have_features and a.name not in features]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if _star_import(node) and ast.unparse(node) not in have_imports:
                actions.append(f"left out {ast.unparse(node)}")
            elif _adds_import(node, have_imports, own_module):
                imports.extend(code_lines[start - 1 : end])
                actions.append(f"insert {ast.unparse(node)}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first, last, group = new_definitions[node.name]
            if node is not group[0] or _span(node)[0] != first:
                continue  # one of a run of one name's definitions (overloads): the run goes in whole, once
            segment = code_lines[first - 1 : last]
            if node.name in existing:
                old_place = existing[node.name]
                changes += _redefinition(
                    node, group, old_place, segment, lines, code_lines, newline, actions, replaceable
                )
            else:
                appended.append(segment)
                actions.append(f"insert {node.name}")
        # Other top-level statements (example calls, prints) are not put into the user's file.
    guard = _main_guard(tree) if appended else None
    if guard is not None:  # above `if __name__ == "__main__":`, which may call them
        block = [line for segment in appended for line in [*segment, newline, newline]]
        changes.append((_span(guard)[0] - 1, _span(guard)[0] - 1, 0, block))
        appended = []
    future_at = _future_position(tree, lines)
    import_at = None
    if imports:
        import_at, change = _imports_change(tree, lines, imports, newline)
        changes.append(change)
        future_at = min(future_at, import_at)  # future imports must precede the ones just inserted
    if features:  # Python requires them before every other statement
        following = imports[0] if imports and future_at == import_at else None
        statement, change = _future_change(features, future_at, lines, following, newline)
        changes.append(change)
        actions.insert(0, f"insert {statement}")
    return "".join(_applied(lines, changes, appended, newline)), actions


def _imported(tree: ast.Module) -> set[str]:
    """The file's top-level imports as `ast.unparse` writes them, and each name a `from` import brings in one by
    one (`from decimal import Decimal` is in `from decimal import A, Decimal`)."""
    have = {ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
    have |= {
        ast.unparse(ast.ImportFrom(n.module, [alias], n.level))
        for n in tree.body
        if isinstance(n, ast.ImportFrom)
        for alias in n.names
    }
    return have


def _star_import(node: ast.Import | ast.ImportFrom) -> bool:
    """`from m import *`: never put into a user's file by an edit (a model trained on benchmark prompts writes
    `from typing import *` out of habit). What the code reads from it gets its own import where it is a standard
    library name (:func:`missing_stdlib_imports`); any other name is left undefined, and said to be."""
    return isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)


def _adds_import(node: ast.Import | ast.ImportFrom, have: set[str], own_module: frozenset[str]) -> bool:
    """Whether a candidate's import goes into the file: one the file does not make (:func:`_imported`), of no
    module of the file's own."""
    if isinstance(node, ast.ImportFrom) and all(
        ast.unparse(ast.ImportFrom(node.module, [alias], node.level)) in have for alias in node.names
    ):
        return False  # every name it imports, the file imports already
    return ast.unparse(node) not in have and not _imports_module(node, own_module)


def _redefinition(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
    group: list[ast.stmt],
    old_place: tuple[int, int, list[ast.stmt]],
    segment: list[str],
    lines: list[str],
    code_lines: list[str],
    newline: str,
    actions: list[str],
    replaceable: Callable[[str], bool],
) -> list[_Change]:
    """The changes for a candidate's definition (`group`: a run of one name's, its lines `segment`) of a name the
    file defines at `old_place`: none when they are the same or it may not be replaced (said in `actions`), a class
    merged member by member where it can be, else the file's definition replaced whole."""
    old_start, old_end, old_group = old_place
    if [ast.dump(n) for n in old_group] == [ast.dump(n) for n in group]:
        return []  # the same definition the file already has: not a change
    if isinstance(node, ast.ClassDef) and len(group) == len(old_group) == 1:
        old_class = old_group[0]
        assert isinstance(old_class, ast.ClassDef)
        member_changes = _merge_class(old_class, node, lines, code_lines, newline, actions, replaceable)
        if member_changes is not None:
            return member_changes
    if not replaceable(node.name):
        actions.append(f"{LEFT_OUT}rewrites {node.name}()")
        return []
    actions.append(f"replace {node.name}")
    return [(old_start - 1, old_end, 0, segment)]


def _imports_change(tree: ast.Module, lines: list[str], imports: list[str], newline: str) -> tuple[int, _Change]:
    """Where the new `imports` go, and the change that puts them there: after the file's last top-level import,
    else below its docstring, else below the comments that open it."""
    import_nodes = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    if import_nodes:
        at = max((n.end_lineno or n.lineno) for n in import_nodes)
    else:
        docstring = _module_docstring(tree)
        at = (docstring.end_lineno or 0) if docstring else 0
        while not docstring and at < len(lines) and lines[at].lstrip().startswith("#"):
            at += 1  # below a shebang, a coding cookie (it counts only on line 1 or 2) and a licence header
    block = imports + ([newline] if not import_nodes and lines[at:] else [])
    return at, (at, at, 1, block)


def _future_change(
    features: list[str], at: int, lines: list[str], following: str | None, newline: str
) -> tuple[str, _Change]:
    """`from __future__ import <features>`, and the change that puts it at line index `at`, a blank line below it
    unless an import follows (`following`: the line that will, when not the file's own at `at`)."""
    statement = f"from __future__ import {', '.join(features)}"
    if following is None:
        following = "" if at >= len(lines) else lines[at]
    spacer = [newline] if following.strip() and not following.startswith(("import ", "from ")) else []
    return statement, (at, at, 2, [statement + newline, *spacer])


def _applied(lines: list[str], changes: list[_Change], appended: list[list[str]], newline: str) -> list[str]:
    """`lines` with the changes made bottom-up, then the `appended` definitions at the end, two blank lines above
    each."""
    # At one place a replacement goes first (it lies below), then imports, then `from __future__` above them.
    for begin, stop, _, new_lines in sorted(changes, key=lambda change: (change[0], -change[2]), reverse=True):
        lines[begin:stop] = new_lines
    if appended:
        while lines and not lines[-1].strip():
            lines.pop()
        for segment in appended:
            if lines:
                lines.extend([newline, newline])
            lines.extend(segment)
    return lines


# Names the standard library exports that code uses bare, each from the one module people mean by it: a body that
# writes `Counter(words)` in a file that never imports it fails with NameError when it runs. Names common as
# variables elsewhere (`count`, `field`, `auto`, `date`) are left out: for them no import is guessed.
STDLIB_EXPORTS: dict[str, str] = {
    name: module
    for module, names in {
        "abc": "ABC abstractmethod",
        "bisect": "bisect_left bisect_right insort insort_left insort_right",
        "collections": "ChainMap Counter OrderedDict defaultdict deque namedtuple",
        "contextlib": "contextmanager suppress",
        "copy": "deepcopy",
        "dataclasses": "asdict astuple dataclass",
        "datetime": "timedelta timezone",
        "decimal": "Decimal ROUND_CEILING ROUND_DOWN ROUND_FLOOR ROUND_HALF_DOWN ROUND_HALF_EVEN ROUND_HALF_UP "
        "ROUND_UP",
        "enum": "Enum IntEnum",
        "fractions": "Fraction",
        "functools": "cache cached_property lru_cache partial reduce total_ordering wraps",
        "heapq": "heapify heappop heappush heappushpop heapreplace nlargest nsmallest",
        "itertools": (
            "accumulate chain combinations combinations_with_replacement compress dropwhile filterfalse groupby "
            "islice pairwise permutations product starmap takewhile zip_longest"
        ),
        "math": "ceil floor gcd isqrt sqrt",
        "operator": "attrgetter itemgetter",
        "pathlib": "Path PurePath",
        "string": "ascii_letters ascii_lowercase ascii_uppercase punctuation",
        "textwrap": "dedent",
        "typing": (
            "Any Callable Dict FrozenSet Generator Iterable Iterator List Literal Mapping NamedTuple Optional "
            "Sequence Set Tuple TypeVar Union"
        ),
    }.items()
    for name in names.split()
}


_DATETIME_CLASS = {"now", "utcnow", "today", "fromtimestamp", "fromisoformat", "strptime", "combine"}


def missing_stdlib_imports(old: str, new: str) -> list[str]:
    """The standard-library imports that the definitions `new` adds or changes (against `old`, the file before)
    need while nothing in the module binds the name they read: a module read as `module.name` (a body that writes
    `itertools.islice(...)` in a module that only does `from itertools import islice`), or a name of
    :data:`STDLIB_EXPORTS` read bare (`Counter(...)`: `from collections import Counter`). Either fails with
    NameError. Each as its `import` statement, in order; no bare name is guessed under a star import."""
    try:
        old_tree, new_tree = shared_tree(old), shared_tree(new)
    except (SyntaxError, ValueError):
        return []
    kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    before = {node.name: node for node in old_tree.body if isinstance(node, kinds)}
    changed = [
        n for n in new_tree.body if isinstance(n, kinds) and not same_definition(old, before.get(n.name), new, n)
    ]
    # The module's own names (definitions and imports anywhere at top level, inside an `if` or `try` too).
    top = [n for n in new_tree.body if not isinstance(n, kinds)]
    module = bound_names(top) | {n.name for n in new_tree.body if isinstance(n, kinds)} | set(dir(builtins))
    missing: list[str] = []
    for definition in changed:
        bound = module | (bound_names([definition]) - {definition.name})
        for node in ast.walk(definition):
            statement = _needed_import(node, bound, star="*" in module)
            if statement is not None and statement not in missing:
                missing.append(statement)
    return missing


def _needed_import(node: ast.AST, bound: set[str], star: bool) -> str | None:
    """The import `node` needs, if it reads a standard-library module or export that nothing binds."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        name = node.value.id
        if name == "datetime" and node.attr in _DATETIME_CLASS and name not in bound:
            return "from datetime import datetime"  # `datetime.now()` means the class: the module has no `now`
        if name in sys.stdlib_module_names and name not in bound:
            return f"import {name}"
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and not star:
        module = STDLIB_EXPORTS.get(node.id)
        if module is not None and node.id not in bound:
            return f"from {module} import {node.id}"
    return None


def add_missing_imports(old: str, new: str, own: frozenset[str], newline: str | None = None) -> tuple[str, list[str]]:
    """`new` with :func:`missing_stdlib_imports` put in after its imports, and the actions that say so."""
    missing = missing_stdlib_imports(old, new)
    if not missing:
        return new, []
    merged, done = merge(new, "\n".join(missing) + "\n", own, newline=newline)
    return merged, [f"{action} (missing: the code uses it)" for action in done]


def unified_diff(old: str, new: str, display_path: str, exists: bool = True) -> str:
    """A git-style unified diff (a/ b/ prefixes, /dev/null for a new file); lines end at \\n, as in git."""
    before = f"a/{display_path}" if exists else "/dev/null"
    lines = difflib.unified_diff(
        _DIFF_LINE.findall(old), _DIFF_LINE.findall(new), fromfile=before, tofile=f"b/{display_path}"
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


# PEP 263: a comment on line 1 or 2 naming the file's coding (line 2 counts after a blank or comment line 1).
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_BLANK_OR_COMMENT = re.compile(rb"^[ \t\f]*(?:#.*)?$")


def declared_coding(data: bytes, name: str) -> str:
    """The coding Python reads source `data` in: its `# -*- coding: ... -*-` cookie's, else UTF-8 ("utf-8-sig"
    with a byte order mark), or a UsageError (an unknown coding, or one that contradicts the mark)."""
    bom = data.startswith(codecs.BOM_UTF8)
    for number, line in enumerate(data[len(codecs.BOM_UTF8) if bom else 0 :].splitlines()[:2]):
        match = _COOKIE.match(line)
        if match:
            cookie = match.group(1).decode("ascii")
            try:
                info = codecs.lookup(cookie)
            except LookupError:
                raise UsageError(f"{name}: its coding declaration names an unknown coding ({cookie!r})") from None
            if not getattr(info, "_is_text_encoding", True):  # rot13, base64, hex: Python refuses them too
                raise UsageError(f"{name}: its coding declaration names {cookie!r}, which is not a text coding")
            coding = "utf-8" if info.name == "utf-8-sig" else info.name
            if bom and coding != "utf-8":
                raise UsageError(f"{name}: it declares {cookie} but starts with a UTF-8 byte order mark")
            return "utf-8-sig" if bom else coding
        if number == 0 and not _BLANK_OR_COMMENT.match(line):
            break
    return "utf-8-sig" if bom else "utf-8"


def source_bytes(text: str, name: str) -> bytes:
    """Python source text as the bytes of its file: in the coding it declares (UTF-8 unless a cookie names
    another), or a UsageError when it holds a character that coding cannot."""
    data = text.encode("utf-8")
    coding = declared_coding(data, name)
    if coding.startswith("utf-8"):
        return data
    try:
        return text.encode(coding)
    except UnicodeEncodeError as exc:
        held = exc.object[exc.start : exc.end]
        raise UsageError(f"{name}: the text holds {held!r}, which its coding ({coding}) cannot; not written") from None


def python_source(raw: bytes, name: str) -> tuple[str, ast.Module]:
    """Bytes as Python source, read in the coding they declare (UTF-8 unless a cookie says otherwise; a byte order
    mark dropped), and its syntax tree, or a UsageError naming what is wrong with them (not in their coding, does
    not parse)."""
    coding = declared_coding(raw, name)
    try:
        text = raw.decode(coding)
    except UnicodeDecodeError:
        shown = "UTF-8" if coding.startswith("utf-8") else coding
        raise UsageError(f"{name} is not {shown} text") from None
    try:
        tree = parse_module(text)
    except SyntaxError as exc:
        raise UsageError(f"{name} does not parse ({syntax_problem(exc)})") from None
    except ValueError:  # NUL bytes
        raise UsageError(f"{name} does not parse (it holds NUL bytes)") from None
    return text, tree


def python_text(raw: bytes, name: str) -> str:
    """:func:`python_source`'s text."""
    return python_source(raw, name)[0]


def _target_bytes(path: Path) -> bytes:
    if path.exists() and not path.is_file():
        raise UsageError(f"{path} is not a file")
    try:
        return path.read_bytes() if path.exists() else b""
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None


PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")


def _python_file(path: Path, raw: bytes) -> bool:
    """Whether `path` is a Python file assist may write code into: a Python suffix, or none and a first line
    that runs python (a script such as `manage`)."""
    if path.suffix in PYTHON_SUFFIXES:
        return True
    if path.suffix:
        return False
    first = raw.split(b"\n", 1)[0]
    return not raw or (first.startswith(b"#!") and b"python" in first)


def read_target_source(path: Path) -> tuple[bytes, str, ast.Module]:
    """A file assist may edit, read once: its bytes, text (a byte order mark dropped) and syntax tree (b"", "" and
    an empty module when it does not exist yet), or a UsageError saying why assist will not edit it (not Python
    by its name: a settings.json that happens to parse is not a place for a function)."""
    raw = _target_bytes(path)
    if not _python_file(path, raw):
        raise UsageError(f"{path} is not a Python file (.py, or a script starting #!...python); assist writes Python")
    try:
        text, tree = python_source(raw, str(path))
    except UsageError as exc:
        raise UsageError(f"{exc}; assist will not edit it until it is fixed") from None
    return raw, text, tree


def read_target(path: Path) -> str:
    """The text of a file assist may edit ("" when it does not exist yet; a byte order mark dropped), or a
    UsageError saying why not."""
    return read_target_source(path)[1]


def plan_edit(path: str | Path, code: str, root: Path | None = None) -> Edit:
    """The edit that merges `code` into the file at `path` (which may not exist yet). Writes nothing.

    `Edit.old` and `Edit.new` are the file's whole text, a byte order mark included when it has one.
    """
    named = Path(path).expanduser().absolute()
    resolved = named.resolve()
    raw, old_text, _ = read_target_source(resolved)
    return plan_edit_of(named, raw, old_text, code, root)


def own_module_names(named: Path, root: Path | None = None) -> frozenset[str]:
    """The names the file `named` may be imported by: its stem, and every dotted tail of its path inside `root`
    (`src/pkg/utils.py`: `pkg.utils` and `src.pkg.utils`), since the package's top may sit below the repo's."""
    path = named.resolve()
    own = {path.stem}
    if root is not None and path.is_relative_to(root.resolve()):
        parts = path.relative_to(root.resolve()).with_suffix("").parts
        own.update(".".join(parts[first:]) for first in range(len(parts)))
    return frozenset(own)


def plan_edit_of(
    named: Path,
    raw: bytes,
    old_text: str,
    code: str,
    root: Path | None = None,
    replace: Collection[str] | None = None,
) -> Edit:
    """:func:`plan_edit` for a file already read (`raw` bytes, `old_text` its text): no second reading.

    `replace`: the file's definitions `code` may replace (None: any; see :func:`merge`). Standard-library modules
    the new code uses and the file does not import are imported (:func:`missing_stdlib_imports`)."""
    own = own_module_names(named, root)
    new, actions = merge(old_text, code, own, replace=replace)  # every line the file had keeps its own ending
    new, added = add_missing_imports(old_text, new, own)
    return make_edit(named, raw, old_text, new, [*actions, *added], root)


def make_edit(named: Path, raw: bytes, old_text: str, new: str, actions: Sequence[str], root: Path | None) -> Edit:
    """The edit from `old_text` (the file's text as read, `raw` its bytes) to `new`: the byte order mark kept, the
    path shown relative to `root` (else the working directory), the diff made. Actions that leave a definition
    out (:data:`LEFT_OUT`) are its `left_out`; names the new code reads and nothing binds, and attributes its methods
    read that their class defines nowhere (`self.x`), its `undefined`."""
    path = named.resolve()
    exists = path.exists()
    bom = "\ufeff" if raw.startswith(codecs.BOM_UTF8) else ""
    try:
        display = str(path.relative_to(root)) if root else os.path.relpath(path)
    except ValueError:
        display = str(path)
    return Edit(
        path=path,
        display_path=display,
        old=bom + old_text,
        new=bom + new,
        diff=unified_diff(bom + old_text, bom + new, display, exists),
        actions=tuple(actions),
        exists=exists,
        named=named,
        root=root,
        left_out=tuple(a.removeprefix(LEFT_OUT) for a in actions if a.startswith(LEFT_OUT)),
        undefined=undefined_names(old_text, new) + undefined_attributes(old_text, new),
    )


NOT_IN_GIT = "it is not in a git repository"
UNTRACKED = "it is not tracked by git"
# How to make content that git could not give back safe to overwrite, by the reason unstaged_changes gives, with
# the refusal's `setting` (a door's wording of the fix); any other reason (unstaged changes): commit or stash them.
_UNSAVED_FIXES = {
    NOT_IN_GIT: ("force:not_in_git", "set force to write it anyway"),
    UNTRACKED: ("force:untracked", "git add it first, or set force"),
}
_UNSAVED_FIX = ("force:unsaved", "commit or stash, or set force")


def unstaged_changes(path: Path) -> str | None:
    """Why the file's current content could not be restored from git, or None when it can."""
    if not path.exists():
        return None
    folder = path.parent
    inside = subprocess.run([*GIT, "rev-parse", "--is-inside-work-tree"], cwd=folder, capture_output=True, text=True)
    if inside.returncode != 0:
        return NOT_IN_GIT
    # Literal: a name like `t[1].py` is not a pattern that a tracked `t1.py` would match.
    literal = [*GIT, "--literal-pathspecs"]
    tracked = subprocess.run(
        [*literal, "ls-files", "-v", "--error-unmatch", "--", path.name], cwd=folder, capture_output=True
    )
    if tracked.returncode != 0:
        return UNTRACKED
    # `git diff` does not look at a file marked assume-unchanged (tag in lower case) or skip-worktree (S): its
    # changes would pass as none.
    tag = tracked.stdout[:1].decode("ascii", "replace")
    if tag.islower() or tag == "S":
        return "git is told not to look at its changes (assume-unchanged, skip-worktree or core.ignoreStat)"
    changed = subprocess.run([*literal, "diff", "--quiet", "--", path.name], cwd=folder, capture_output=True)
    if changed.returncode != 0:
        return "it has unstaged changes"
    return None


def enclosing_root(path: Path) -> Path:
    """The git work tree an edit of `path` belongs to (where a symlink's target must lie), else the folder holding it.

    Where the path runs, as written, through a link the working folder's repository commits (`vendor ->
    ../other-checkout`), that work tree: the repository behind such a link must not become the one an edit may
    write into (:func:`assistant.paths.committed_link`)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    linked = committed_link(folder)
    if linked is not None:
        return linked
    return git_toplevel(folder) or folder


def check_can_apply(
    named: Path,
    force: bool = False,
    root: Path | None = None,
    display: str | None = None,
    unsaved_ok: bool = False,
) -> None:
    """The refusals of :func:`apply_edit` that do not depend on the new text, so a command can make them before
    any model work: unless `force`, content git could not give back (unstaged changes, untracked; `unsaved_ok`
    lets only this one pass, as the TUI does once you confirm) and a symlink out of the repo (`root`, else the
    git work tree around the file) or hard links; always, a read-only file."""
    named = Path(named).expanduser()
    display = display or str(named)
    if not (force or unsaved_ok):
        reason = unstaged_changes(Path(os.path.realpath(named)))
        if reason:
            setting, fix = _UNSAVED_FIXES.get(reason, _UNSAVED_FIX)
            values = {"path": display, "reason": reason}
            raise UsageError(f"refusing to modify {display}: {reason} ({fix})", setting=setting, values=values)
    write_target(named, root or enclosing_root(named), force)


def apply_edit(edit: Edit, force: bool = False, root: Path | None = None, unsaved_ok: bool = False) -> None:
    """Write the edit atomically. Refuses when the file changed since the edit was planned, when the new
    text does not compile, and, unless `force`, when its current content is not safe in git (unless
    `unsaved_ok`) or the file is a symlink out of the repo (`root`, else the edit's, else the git work tree
    around the file) or has other hard links."""
    named = edit.named or edit.path
    changed = UsageError(f"{edit.display_path} changed since the diff was made; run the command again")
    if edit.exists != edit.path.exists() or Path(os.path.realpath(named)) != edit.path:
        raise changed
    expected = source_bytes(edit.old, edit.display_path) if edit.exists else None
    if expected is not None and _target_bytes(edit.path) != expected:
        raise changed
    root = root or edit.root or enclosing_root(named)
    # Every refusal before the first folder is made: a refused apply leaves nothing behind.
    check_can_apply(named, force, root, edit.display_path, unsaved_ok)
    check_compiles(source_bytes(edit.new, edit.display_path), edit.display_path)
    try:
        edit.path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{edit.display_path}: cannot make its folder ({exc.strerror or exc}); not written") from None
    try:
        write_python(named, edit.new, name=edit.display_path, root=root, force=force, expected=expected)
    except ChangedOnDisk:
        raise changed from None
