"""The file a request targets, read and parsed once: the prompt's outline, the stub to fill and every candidate's
edit are all made from this one reading."""

from __future__ import annotations

import ast
import codecs
import os
from dataclasses import dataclass, field
from pathlib import Path

from assistant.code.edit import Edit, merge, read_target, unified_diff


@dataclass(frozen=True)
class Target:
    """A target file as read: its path, bytes, text (a byte order mark dropped) and syntax tree ("" and an empty
    module when it does not exist yet)."""

    given: str | Path  # as the caller named it
    path: Path  # resolved
    raw: bytes
    text: str
    exists: bool
    tree: ast.Module = field(repr=False, compare=False)

    @classmethod
    def read(cls, file: str | Path) -> Target:
        """Read and parse `file` once, or a one-line UsageError saying why assist may not edit it (not a file,
        not UTF-8, does not parse)."""
        path = Path(file).expanduser().resolve()
        exists = path.exists()
        try:
            raw = path.read_bytes() if exists and path.is_file() else b""
            text = raw.decode("utf-8-sig")
            tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            read_target(path)  # says why, in the words every command uses
            raise
        if exists and not path.is_file():
            read_target(path)  # "... is not a file"
        return cls(given=file, path=path, raw=raw, text=text, exists=exists, tree=tree)

    @property
    def bom(self) -> str:
        return "\ufeff" if self.raw.startswith(codecs.BOM_UTF8) else ""

    def display(self, root: Path | None) -> str:
        """The path shown in the prompt: relative to `root` when inside it, else as given."""
        return str(self.path.relative_to(root)) if root and self.path.is_relative_to(root) else str(self.given)

    def edit_display(self, root: Path | None) -> str:
        """The path an edit shows: relative to `root`, else to the working directory."""
        try:
            return str(self.path.relative_to(root)) if root else os.path.relpath(self.path)
        except ValueError:
            return str(self.path)

    def plan_edit(self, code: str, root: Path | None = None) -> Edit:
        """The edit that merges `code` into this file as read (see :func:`assistant.code.edit.plan_edit`, which
        reads the file again each time). Writes nothing."""
        old_text = self.text
        crlf = "\r\n" in old_text
        old = old_text.replace("\r\n", "\n")
        own = {self.path.stem}
        if root is not None and self.path.is_relative_to(root):
            own.add(".".join(self.path.relative_to(root).with_suffix("").parts))
        new, actions = merge(old, code, frozenset(own))
        if crlf:
            new = new.replace("\n", "\r\n")
        display = self.edit_display(root)
        bom = self.bom
        return Edit(
            path=self.path,
            display_path=display,
            old=bom + old_text,
            new=bom + new,
            diff=unified_diff(bom + old_text, bom + new, display, self.exists),
            actions=tuple(actions),
            exists=self.exists,
            named=self.path,
            root=root,
        )
