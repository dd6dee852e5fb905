"""Edits: put a candidate into a file by syntax position, show the unified diff, apply it atomically.

A candidate's top-level functions and classes replace the file's top-level definitions of the same name
(decorators included) or are appended at the end; imports the file lacks go after its last top-level
import. Nothing is written until :func:`apply_edit`, which refuses to touch a file with unstaged changes
(the user's work could not be recovered from git) unless forced.
"""

from __future__ import annotations

import ast
import difflib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .paths import atomic_write_text


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

    def to_json(self) -> dict:
        return {"path": self.display_path, "diff": self.diff, "actions": list(self.actions)}


def _span(node: ast.stmt) -> tuple[int, int]:
    """1-based first and last line of a definition, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno] + [d.lineno for d in decorators])
    return start, node.end_lineno or node.lineno


def _definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def _imports_module(node: ast.Import | ast.ImportFrom, modules: frozenset[str]) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and node.module in modules
    return any(alias.name in modules for alias in node.names)


def merge(old: str, code: str, own_module: frozenset[str] = frozenset()) -> tuple[str, list[str]]:
    """The file text with `code` merged in, and a list of what was done. Both must parse.

    Imports of `own_module` (the file's own module names) are left out: a model that was shown the
    file tends to import its functions from it, which inside that file is a circular import.
    """
    try:
        tree = ast.parse(old)
    except SyntaxError as exc:
        raise UsageError(f"the target file does not parse (line {exc.lineno}: {exc.msg}); fix it first") from None
    new_tree = ast.parse(code)
    code_lines = code.splitlines()
    lines = old.splitlines()
    existing = _definitions(tree)
    actions: list[str] = []
    replacements: list[tuple[int, int, list[str]]] = []  # (start, end, new lines), 1-based inclusive
    appended: list[list[str]] = []
    imports: list[str] = []
    have_imports = {ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
    for node in new_tree.body:
        start, end = _span(node)
        segment = code_lines[start - 1 : end]
        if isinstance(node, ast.Import | ast.ImportFrom):
            if ast.unparse(node) not in have_imports and not _imports_module(node, own_module):
                imports.extend(segment)
                actions.append(f"insert {ast.unparse(node)}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in existing:
                if ast.dump(existing[node.name]) == ast.dump(node):
                    continue  # the same definition the file already has: not a change
                old_start, old_end = _span(existing[node.name])
                replacements.append((old_start, old_end, segment))
                actions.append(f"replace {node.name}")
            else:
                appended.append(segment)
                actions.append(f"insert {node.name}")
        # Other top-level statements (example calls, prints) are not put into the user's file.
    for start, end, segment in sorted(replacements, reverse=True):
        lines[start - 1 : end] = segment
    if appended:
        while lines and not lines[-1].strip():
            lines.pop()
        for segment in appended:
            if lines:
                lines.extend(["", ""])
            lines.extend(segment)
    if imports:
        import_nodes = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        if import_nodes:
            at = max((n.end_lineno or n.lineno) for n in import_nodes)
        else:
            docstring = (
                tree.body[0]
                if tree.body
                and isinstance(tree.body[0], ast.Expr)
                and isinstance(getattr(tree.body[0], "value", None), ast.Constant)
                and isinstance(tree.body[0].value.value, str)
                else None
            )
            at = (docstring.end_lineno or 0) if docstring else 0
        # Line numbers before the imports are unchanged by the edits above, which all sit after them.
        block = imports + ([""] if not import_nodes and lines[at:] else [])
        lines[at:at] = block
    new = "\n".join(lines) + "\n" if lines else ""
    return new, actions


def unified_diff(old: str, new: str, display_path: str, exists: bool = True) -> str:
    """A git-style unified diff (a/ b/ prefixes, /dev/null for a new file)."""
    before = f"a/{display_path}" if exists else "/dev/null"
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=before, tofile=f"b/{display_path}"
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def python_text(raw: bytes, name: str) -> str:
    """Bytes as Python source, or a UsageError naming what is wrong with them (not UTF-8, does not parse)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{name} is not UTF-8 text") from None
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise UsageError(f"{name} does not parse (line {exc.lineno}: {exc.msg})") from None
    return text


def read_target(path: Path) -> str:
    """The text of a file assist may edit ("" when it does not exist yet), or a UsageError saying why not."""
    if path.exists() and not path.is_file():
        raise UsageError(f"{path} is not a file")
    try:
        return python_text(path.read_bytes() if path.exists() else b"", str(path))
    except UsageError as exc:
        raise UsageError(f"{exc}; assist will not edit it until it is fixed") from None


def plan_edit(path: str | Path, code: str, root: Path | None = None) -> Edit:
    """The edit that merges `code` into the file at `path` (which may not exist yet). Writes nothing."""
    path = Path(path).expanduser().resolve()
    exists = path.exists()
    old_text = read_target(path)
    crlf = "\r\n" in old_text
    old = old_text.replace("\r\n", "\n")
    own = {path.stem}
    if root is not None and path.is_relative_to(root):
        own.add(".".join(path.relative_to(root).with_suffix("").parts))
    new, actions = merge(old, code, frozenset(own))
    if crlf:
        new = new.replace("\n", "\r\n")
    try:
        display = str(path.relative_to(root)) if root else os.path.relpath(path)
    except ValueError:
        display = str(path)
    return Edit(
        path=path,
        display_path=display,
        old=old_text,
        new=new,
        diff=unified_diff(old_text, new, display, exists),
        actions=tuple(actions),
        exists=exists,
    )


def unstaged_changes(path: Path) -> str | None:
    """Why the file's current content could not be restored from git, or None when it can."""
    if not path.exists():
        return None
    folder = path.parent
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=folder, capture_output=True, text=True)
    if inside.returncode != 0:
        return "it is not in a git repository"
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=folder, capture_output=True)
    if tracked.returncode != 0:
        return "it is not tracked by git"
    changed = subprocess.run(["git", "diff", "--quiet", "--", path.name], cwd=folder, capture_output=True)
    if changed.returncode != 0:
        return "it has unstaged changes"
    return None


def apply_edit(edit: Edit, force: bool = False) -> None:
    """Write the edit atomically. Refuses when the file changed since the edit was planned, and, unless
    `force`, when its current content is not safe in git."""
    current = edit.path.read_bytes().decode("utf-8", errors="replace") if edit.path.exists() else ""
    if edit.exists != edit.path.exists() or current != edit.old:
        raise UsageError(f"{edit.display_path} changed since the diff was made; run the command again")
    if not force:
        reason = unstaged_changes(edit.path)
        if reason:
            raise UsageError(f"refusing to modify {edit.display_path}: {reason} (commit or stash, or pass --force)")
    edit.path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(edit.path, edit.new)  # keeps the file's permissions
