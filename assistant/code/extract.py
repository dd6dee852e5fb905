"""Source files → Examples. Python uses `ast`; other languages plug into `EXTRACTORS` by file suffix."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from assistant.code.definitions import walk_functions
from assistant.code.edit import declared_coding, source_lines
from assistant.code.examples import Example
from assistant.code.parse import parse_module
from assistant.errors import UsageError
from assistant.paths import read_regular_file

Extractor = Callable[[str, str, str], list[Example]]

_WORD_SPLIT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def git_blob_hash(data: bytes) -> str:
    """The hash git gives this content as a blob (`git hash-object`), without running git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def humanize_identifier(name: str) -> str:
    """`parseHTTPResponse_v2` → `parse http response v 2`: words from camelCase and snake_case."""
    return " ".join(word.lower() for word in _WORD_SPLIT.findall(name))


def first_paragraph(docstring: str) -> str:
    """The docstring's summary: its first paragraph, on one line."""
    paragraph = docstring.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = ast.unparse(node.args)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{node.name}({args}){returns}"


def source_text(rel: str, data: bytes) -> str:
    """A file's text as the index reads it: Python source in the coding its cookie declares (PEP 263), anything
    else as UTF-8; undecodable bytes become U+FFFD, a byte order mark is dropped, line endings become \\n."""
    coding = "utf-8-sig"
    if rel.endswith(".py"):
        with contextlib.suppress(UsageError):
            coding = declared_coding(data, rel)
    return data.decode(coding, errors="replace").removeprefix("\ufeff").replace("\r\n", "\n")


def extract_python(source: str, path: str = "", blob: str = "") -> list[Example]:
    """Every function and method in a Python source as an Example.

    The requirement is the docstring's first paragraph, or, for undocumented code, the name in words plus
    the signature. Files that do not parse yield nothing (an index must not fail on one broken file).
    """
    return python_examples(source, path, blob) or []


def extract_file(suffix: str, text: str, path: str = "", blob: str = "") -> list[Example] | None:
    """The examples of a file with this suffix (one of EXTRACTORS), or None when it is Python that does not
    parse (see :func:`assistant.code.parse.parse_python`), so that an index can count what it skipped."""
    if suffix == ".py":
        return python_examples(text, path, blob)
    return EXTRACTORS[suffix](text, path, blob)


def python_examples(source: str, path: str = "", blob: str = "") -> list[Example] | None:
    """:func:`extract_python`, but None for a source that does not parse."""
    source = source.removeprefix("\ufeff")  # a UTF-8 BOM decoded as text: Python ignores it, ast does not
    try:
        tree = parse_module(source)
    except SyntaxError:  # Unparsable too: nested too deep for the parser or for what walks the tree after it
        return None
    lines = source_lines(source)  # numbered as ast numbers them (str.splitlines also breaks at form feeds)
    examples = []
    # Module and class level only: a platform's or a version's variant behind `if`/`try` would enter the index
    # a second time under the same name.
    for qualname, node, _ in walk_functions(tree.body, blocks=False):
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        end = node.end_lineno or node.lineno
        code = textwrap.dedent("\n".join(lines[start - 1 : end]))
        docstring = ast.get_docstring(node)
        if docstring and first_paragraph(docstring):
            requirement = first_paragraph(docstring)
        else:
            requirement = f"{humanize_identifier(node.name)}: {_signature(node)}"
        examples.append(
            Example(
                requirement=requirement,
                code=code,
                name=qualname,
                path=path,
                start_line=start,
                end_line=end,
                language="python",
                blob=blob,
            )
        )
    return examples


EXTRACTORS: dict[str, Extractor] = {".py": extract_python}


def written_requirement(example: Example) -> bool:
    """Whether a person wrote the example's requirement (a bank's prompt, a function's docstring), rather than
    :func:`extract_python` making it up from the name and signature."""
    if not example.path or example.kind != "function":
        return True
    try:
        tree = parse_module(example.code)
    except (SyntaxError, ValueError):
        return False
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    docstring = ast.get_docstring(node) if node is not None else None
    return bool(docstring and first_paragraph(docstring))


def read_repo_file(root: Path, rel: str, limit: int | None = None) -> bytes | None:
    """The bytes of the repo file `rel`, or None unless it is a regular file that lies inside `root` (and, given
    `limit`, of at most that many bytes: a larger one is not read whole).

    A tracked symlink is refused even when its target is inside the repo (that target is read under its
    own name if git tracks it); so is any path that resolves outside the repo (a tracked directory
    replaced by a link), so content from elsewhere on the machine never reaches an index or a prompt.
    Missing and unreadable files are None too.
    """
    path = Path(root) / rel
    try:
        if path.is_symlink():
            return None
        resolved = path.resolve(strict=True)
        if not resolved.is_relative_to(Path(root).resolve()):
            return None
    except (OSError, RuntimeError):
        return None
    return read_regular_file(resolved, limit)


def repo_functions(root: Path) -> list[Example]:
    """Every function of the Python files git tracks under `root` (unreadable, non-UTF-8, symlinked and
    outside-the-repo files are skipped, see :func:`read_repo_file`).

    Parsed straight from the files, without building or reading an index (nothing is embedded).
    """
    from assistant.code.git import tracked_python_files

    found: list[Example] = []
    for name in tracked_python_files(root):
        data = read_repo_file(root, name)
        if data is None:
            continue
        try:
            found.extend(extract_python(data.decode("utf-8-sig"), name))
        except UnicodeDecodeError:
            continue
    return found
