"""The file a request targets, read and parsed once: the prompt's outline, the stub to fill and every candidate's
edit are all made from this one reading."""

from __future__ import annotations

import ast
import codecs
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from assistant.code.edit import Edit, plan_edit_of, read_target_source


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
        raw, text, tree = read_target_source(path)
        return cls(given=file, path=path, raw=raw, text=text, exists=path.exists(), tree=tree)

    @property
    def bom(self) -> str:
        return "\ufeff" if self.raw.startswith(codecs.BOM_UTF8) else ""

    def display(self, root: Path | None) -> str:
        """The path shown in the prompt: relative to `root` when inside it, else as given."""
        return str(self.path.relative_to(root)) if root and self.path.is_relative_to(root) else str(self.given)

    def plan_edit(self, code: str, root: Path | None = None, replace: Collection[str] | None = None) -> Edit:
        """The edit that merges `code` into this file as read (:func:`assistant.code.edit.plan_edit_of`; `replace`:
        the definitions it may replace, None any). Writes nothing."""
        return plan_edit_of(Path(self.given).expanduser().absolute(), self.raw, self.text, code, root, replace)
