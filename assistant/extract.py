"""Source files → Examples. Python uses `ast`; other languages plug into `EXTRACTORS` by file suffix."""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from .examples import Example

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


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level functions and methods of top-level (and nested) classes, with their qualified names."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return found


def extract_python(source: str, path: str = "", blob: str = "") -> list[Example]:
    """Every function and method in a Python source as an Example.

    The requirement is the docstring's first paragraph, or, for undocumented code, the name in words plus
    the signature. Files that do not parse yield nothing (an index must not fail on one broken file).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    examples = []
    for qualname, node in _functions(tree):
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


def repo_functions(root: Path) -> list[Example]:
    """Every function of the Python files git tracks under `root` (unreadable files are skipped).

    Parsed straight from the files, without building or reading an index (nothing is embedded).
    """
    from .hooks import tracked_python_files

    found: list[Example] = []
    for name in tracked_python_files(root):
        try:
            found.extend(extract_python((root / name).read_text(encoding="utf-8"), name))
        except (OSError, UnicodeDecodeError):
            continue
    return found
