"""Docstrings by syntax position: find what lacks one, infer the repo's style, insert without disturbing the file.

Nothing here calls a model: :func:`find_missing` lists the targets, :func:`insert_docstrings` puts given
texts in place (correct indentation, tabs and CRLF kept, decorators and one-line definitions handled) and
proves the result: the file must parse, and apart from the new docstrings its syntax tree must be the same.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import textwrap
import tokenize
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePath

from assistant.code.definitions import Definition, is_overload, walk_definitions
from assistant.code.edit import python_text, source_lines
from assistant.code.examples import Example
from assistant.code.extract import extract_python
from assistant.code.parse import parse_module, syntax_problem
from assistant.errors import UsageError
from assistant.paths import read_regular_file

STYLES = ("google", "numpy", "rest", "plain")
DEFAULT_LINE_LENGTH = 88  # black's and ruff's default, when the repo configures none


@dataclass(frozen=True)
class Target:
    """A definition without a docstring."""

    qualname: str  # "Outer.Inner.method"
    kind: str  # "function", "async function", "method", "async method", "class"
    line: int  # 1-based line of the `def` / `class` keyword
    header_end: int  # 1-based line holding the colon that ends the header
    colon_col: int  # 0-based column of that colon
    one_line: bool  # the body starts on the header's line (`def f(): return 1`)
    indent: str  # indentation of the docstring
    code: str  # the definition's source, decorators included (what a model is shown)
    # Unique in the file, what docstrings are keyed by: the qualified name, or "name (line N)" where two targets
    # share one (a function defined once per platform under `if`/`else`).
    key: str = ""

    def to_json(self) -> dict:
        return {"name": self.qualname, "kind": self.kind, "line": self.line}


def _declares_only(node: Definition) -> bool:
    """Whether a definition's docstring lives on another: an `@overload` signature (the implementation's), or a
    property's `@x.setter` or `@x.deleter` (the getter's; Python shows that one)."""
    if isinstance(node, ast.ClassDef):
        return False
    accessor = any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in node.decorator_list)
    return accessor or is_overload(node)


def _header_colon(lines: list[str], node: Definition) -> tuple[int, int]:
    """Line (1-based) and column of the colon that ends a definition's header, found with the tokenizer
    so colons inside annotations, defaults and strings do not count."""
    first_body = node.body[0].lineno
    # One line per ast line, each ended by \n (a lone \r would not end a line for the tokenizer module).
    header = iter([line.rstrip("\r\n") + "\n" for line in lines[node.lineno - 1 : first_body]])
    depth = 0
    for token in tokenize.generate_tokens(lambda: next(header, "")):
        if token.type == tokenize.OP:
            if token.string in "([{":
                depth += 1
            elif token.string in ")]}":
                depth -= 1
            elif token.string == ":" and depth == 0:
                return node.lineno + token.start[0] - 1, token.start[1]
    raise ValueError(f"no header colon for {getattr(node, 'name', '?')}")  # cannot happen for parsed code


def _indent_unit(source: str) -> str:
    """The file's indentation step: a tab if the file indents with tabs, else four spaces."""
    tabs = len(re.findall(r"^\t", source, re.MULTILINE))
    spaces = len(re.findall(r"^ ", source, re.MULTILINE))
    return "\t" if tabs > spaces else "    "


def _indentation(line: str) -> str:
    """A line's leading spaces and tabs; a form feed there is dropped (Python resets the column at one, and
    copying it into a docstring's indentation is noise)."""
    return line[: len(line) - len(line.lstrip(" \t\f"))].replace("\f", "")


def find_missing(source: str) -> list[Target]:
    """Functions, methods and classes in `source` that have no docstring, in file order.

    Raises SyntaxError for a file that does not parse.
    """
    tree = parse_module(source)
    lines = source_lines(source, keepends=True)  # numbered as ast numbers them
    unit = _indent_unit(source)
    targets: list[Target] = []
    for qualname, node, classes in walk_definitions(tree.body):
        if ast.get_docstring(node, clean=False) is not None or _declares_only(node):
            continue
        line, col = _header_colon(lines, node)
        one_line = node.body[0].lineno == line
        header = lines[node.lineno - 1]
        header_indent = _indentation(header)
        if one_line:
            # One step deeper than the header, in the header's own whitespace (tabs stay tabs).
            step = "\t" if header_indent.startswith("\t") else ("    " if header_indent else unit)
            indent = header_indent + step
        else:
            indent = _indentation(lines[node.body[0].lineno - 1])
        if isinstance(node, ast.ClassDef):
            kind = "class"
        else:
            kind = ("async " if isinstance(node, ast.AsyncFunctionDef) else "") + ("method" if classes else "function")
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        code = re.sub(r"\r\n?", "\n", "".join(lines[start - 1 : node.end_lineno]))
        targets.append(Target(qualname, kind, node.lineno, line, col, one_line, indent, textwrap.dedent(code)))
    shared = {name for name, times in Counter(t.qualname for t in targets).items() if times > 1}
    return [replace(t, key=f"{t.qualname} (line {t.line})" if t.qualname in shared else t.qualname) for t in targets]


def _literal(text: str) -> tuple[str, str]:
    """The opening quotes and the text to put between them and `\"\"\"` so the literal's value is `text`: as
    written where it can be (raw when it holds backslashes: a regex, a Windows path), else escaped, for `\"\"\"`
    inside it or a quote or backslash at its end (which would run into the closing quotes)."""
    if '"""' not in text and not text.endswith(('"', "\\")):
        return ('r"""' if "\\" in text else '"""'), text
    core = text.rstrip('"')
    quotes = len(text) - len(core)
    return '"""', core.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '\\"' * quotes


# Lines a docstring keeps as written: indented, list items, reST fields, section heads, NumPy underlines.
_STRUCTURED_LINE = re.compile(r"^\s+\S|^\s*[-*]\s|^\s*:\w|^\s*\w[\w ]*:\s*$|^\s*-{3,}\s*$")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.")


def _structured(paragraph: str) -> bool:
    """Whether a paragraph is structured (sections, parameter lists, indented blocks), not prose to re-wrap."""
    return any(_STRUCTURED_LINE.match(line) for line in paragraph.splitlines())


def _summary_apart(paragraph: str, room: int) -> list[str]:
    """A first paragraph of prose sentences as its first sentence and the rest, where that sentence fits on the
    opening line (`room` columns), as PEP 257 asks of a docstring longer than a line; else the paragraph whole.

    A sentence ends at `.`, `!` or `?` before a space and a capital, outside brackets and backticks, and not at
    an abbreviation (`e.g.`)."""
    if _structured(paragraph):
        return [paragraph]
    flat = " ".join(paragraph.split())
    for end in re.finditer(r"[.!?](?= [A-Z`])", flat):
        before = flat[: end.end()]
        nested = before.count("(") != before.count(")") or before.count("[") != before.count("]")
        if nested or before.count("`") % 2 or before.lower().endswith(_ABBREVIATIONS):
            continue
        return [before, flat[end.end() + 1 :]] if len(before) <= room else [paragraph]
    return [paragraph]


def render(text: str, indent: str, width: int = DEFAULT_LINE_LENGTH) -> list[str]:
    """A docstring's lines (no newlines), indented and wrapped to `width`.

    One line when it fits; otherwise the summary, a blank line and the rest (a first sentence that fits the
    opening line is the summary, :func:`_summary_apart`), with prose paragraphs re-wrapped and structured lines
    (sections, parameter lists, indented blocks) kept as written.
    """
    text = text.strip()
    if not text:
        raise ValueError("empty docstring")
    prefix, text = _literal(text)
    paragraphs = [p.strip("\n") for p in re.split(r"\n\s*\n", text)]
    single = f'{indent}{prefix}{paragraphs[0]}"""'
    if len(paragraphs) == 1 and "\n" not in paragraphs[0] and len(single.expandtabs()) <= width:
        return [single]
    paragraphs[:1] = _summary_apart(paragraphs[0], width - len(f"{indent}{prefix}".expandtabs()))
    room = max(width - len(indent.expandtabs()), 30)
    out: list[str] = []
    for number, paragraph in enumerate(paragraphs):
        if number:
            out.append("")
        if _structured(paragraph):
            out.extend(paragraph.splitlines())
        else:
            # The first line shares its room with the opening quotes, so a summary that wraps stays beside them.
            opening = prefix if number == 0 else ""
            wrapped = textwrap.wrap(" ".join(paragraph.split()), room, initial_indent=opening) or [""]
            out.extend([wrapped[0].removeprefix(opening), *wrapped[1:]])
    first = f"{indent}{prefix}{out[0]}"
    if len(first.expandtabs()) > width:  # a long summary opens on its own line
        lines = [f"{indent}{prefix}", *(f"{indent}{line}" if line else "" for line in out)]
    else:
        lines = [first, *(f"{indent}{line}" if line else "" for line in out[1:])]
    return [*lines, f'{indent}"""']


def drop_docstrings(tree: ast.AST) -> ast.AST:
    """`tree` with the docstrings of its module, classes and functions removed (in place; returned for chaining)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module) and (
            node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)
        ):
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def bare_code(code: str) -> str:
    """`code` without docstrings or comments (normalized by `ast.unparse`); unparsable code as it is."""
    try:
        return ast.unparse(drop_docstrings(parse_module(code)))
    except (SyntaxError, ValueError, RecursionError):
        return code


def _strip_docstrings(tree: ast.AST) -> str:
    return ast.dump(drop_docstrings(tree), include_attributes=False)


def insert_docstrings(source: str, docstrings: Mapping[str, str], width: int = DEFAULT_LINE_LENGTH) -> str:
    """`source` with each target's docstring inserted (keyed by :attr:`Target.key` from :func:`find_missing`).

    The file's newline style and indentation are kept. Raises ValueError if the result would not parse
    or would differ from the original in anything but the new docstrings.
    """
    targets = {t.key: t for t in find_missing(source)}
    unknown = [name for name in docstrings if name not in targets]
    if unknown:
        raise ValueError(f"{unknown[0]} is not a definition without a docstring")
    lines = source_lines(source, keepends=True)
    endings = [line[len(line.rstrip("\r\n")) :] for line in lines]
    default = next((ending for ending in endings if ending), "\n")
    # Bottom-up, so earlier line numbers stay valid.
    for target in sorted((targets[n] for n in docstrings), key=lambda t: t.header_end, reverse=True):
        index = target.header_end - 1
        newline = endings[index] or default  # the header's own ending: a file may mix them
        block = [line + newline for line in render(docstrings[target.key], target.indent, width)]
        if target.one_line:
            line = lines[index]
            head, rest = line[: target.colon_col + 1], line[target.colon_col + 1 :]
            ending = newline if line.endswith(("\n", "\r")) else ""
            body = rest.strip(" \t\r\n")
            lines[index : index + 1] = [head + newline, *block, target.indent + body + (ending or newline)]
        else:
            lines[index + 1 : index + 1] = block
    result = "".join(lines)
    try:
        new_tree = parse_module(result)
    except SyntaxError as exc:  # pragma: no cover - a bug here must never reach the user's file
        raise ValueError(f"inserting docstrings would break the file ({syntax_problem(exc)})") from None
    if _strip_docstrings(new_tree) != _strip_docstrings(parse_module(source)):
        raise ValueError("inserting docstrings would change more than the docstrings")  # pragma: no cover
    return result


# -- the repo's conventions ------------------------------------------------------------------------------

_STYLE_PATTERNS = {
    "numpy": re.compile(r"^\s*(Parameters|Returns|Yields|Raises|Examples)\s*\n\s*-{3,}\s*$", re.MULTILINE),
    "google": re.compile(r"^\s*(Args|Arguments|Returns|Yields|Raises|Examples|Attributes):\s*$", re.MULTILINE),
    "rest": re.compile(r"^\s*:(param|returns?|rtype|raises?|type)\b", re.MULTILINE),
}


def detect_style(docstrings: Iterable[str]) -> str:
    """The docstring convention most of these docstrings follow ("plain" when few use sections at all)."""
    counts: Counter[str] = Counter()
    total = 0
    for doc in docstrings:
        total += 1
        for style, pattern in _STYLE_PATTERNS.items():
            if pattern.search(doc):
                counts[style] += 1
                break
    if not counts:
        return "plain"
    style, count = counts.most_common(1)[0]
    multi = sum(1 for _ in counts.elements())
    # A convention needs to be common among the docstrings that have structure at all.
    return style if count >= max(2, multi // 2) or (total and count / total >= 0.2) else "plain"


def _repo_texts(paths: Iterable[Path]) -> Iterator[tuple[Path, str]]:
    """Each of these files' text, where it is a regular UTF-8 file (symlinked and non-regular files are skipped:
    the files are the repository's, and a link to `/dev/zero` must not be read)."""
    for path in paths:
        data = read_regular_file(path)
        if data is None:
            continue
        try:
            yield path, data.decode("utf-8-sig")
        except UnicodeDecodeError:
            continue


def repo_docstrings(paths: Iterable[Path]) -> list[str]:
    """Every docstring in these Python files (unparsable, non-UTF-8, symlinked and non-regular files skipped)."""
    found: list[str] = []
    for _, text in _repo_texts(paths):
        try:
            tree = parse_module(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                doc = ast.get_docstring(node)
                if doc:
                    found.append(doc)
    return found


def repo_style(root: Path, names: Iterable[str]) -> str:
    """:func:`detect_style` over the docstrings of these tracked Python files of the repo `root`, remembered in the
    user cache by what git says of those files (:func:`~assistant.code.git.tracked_contents_key`): the hook runs at
    every commit, and reading every docstring of a repo of a few hundred files takes a second or more for an
    answer that rarely changes."""
    from assistant.code.git import tracked_contents_key
    from assistant.paths import atomic_write_text, cache_dir

    key = tracked_contents_key(root)
    where = cache_dir() / "docstring-styles" / f"{hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]}.json"
    if key is not None:
        try:
            kept = json.loads(where.read_text(encoding="utf-8"))
            if kept.get("key") == key and kept.get("style") in STYLES:
                return kept["style"]
        except (OSError, ValueError, AttributeError):
            pass  # none yet, or unreadable: detect it again
    style = detect_style(repo_docstrings(root / name for name in names))
    if key is not None:
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(where, json.dumps({"key": key, "style": style}))
        except (OSError, UsageError):
            pass  # a cache that cannot be written costs the next run a second, never this run its docstrings
    return style


def repo_functions(root: Path, names: Iterable[str]) -> list[Example]:
    """Every function and method of these Python files (paths relative to `root`), read as :func:`repo_docstrings`
    reads them: what an exemplar index keeps the documented ones of."""
    found: list[Example] = []
    for path, text in _repo_texts(root / name for name in names):
        found += extract_python(text, path.relative_to(root).as_posix())
    return found


def line_length(root: Path) -> int:
    """The repo's configured line length: ruff, black or flake8 settings, else 88."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            data = {}
        tool = data.get("tool", {})
        for value in (tool.get("ruff", {}).get("line-length"), tool.get("black", {}).get("line-length")):
            if isinstance(value, int) and value > 20:
                return value
    for name in ("ruff.toml", ".ruff.toml"):
        path = root / name
        if path.is_file():
            try:
                value = tomllib.loads(path.read_text(encoding="utf-8")).get("line-length")
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                value = None
            if isinstance(value, int) and value > 20:
                return value
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        path = root / name
        if path.is_file():
            match = re.search(r"^\s*max[-_]line[-_]length\s*=\s*(\d+)", path.read_text(errors="replace"), re.M)
            if match:
                return int(match.group(1))
    return DEFAULT_LINE_LENGTH


def is_test_file(name: str) -> bool:
    """Whether a file is one of pytest's test files by its name: `test_*.py`, `*_test.py`, or `conftest.py`."""
    base = PurePath(name).name
    return base == "conftest.py" or (base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py")))


def read_python(path: Path) -> str:
    """A Python file's text (a byte order mark dropped), or a UsageError saying why it is skipped
    (unreadable, not UTF-8, does not parse)."""
    return read_python_source(path)[0]


def read_python_source(path: Path) -> tuple[str, bytes]:
    """A Python file's text and the bytes it was read from (to detect a later change and keep a byte order
    mark), or a UsageError saying why it is skipped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror}), skipped") from None
    try:
        return python_text(raw, str(path)), raw
    except UsageError as exc:
        raise UsageError(f"{exc}, skipped") from None
