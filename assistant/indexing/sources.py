"""Which index a command uses: a bank you name, the repo you stand in (once indexed), or the embedded default."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import UsageError
from assistant.indexing.index import (
    HOLDS_NO_FUNCTIONS,
    Index,
    Progress,
    TextEncoder,
    holds_nothing,
    index_bank,
    load_repo_index,
    repo_root,
)
from assistant.paths import cache_dir, data_path


def default_bank() -> Path:
    """The embedded default bank shipped in `index/` (see index/README.md)."""
    return data_path("index", "default_bank.jsonl")


@dataclass(frozen=True)
class Source:
    """An opened index and a line saying where it came from."""

    index: Index
    description: str
    kind: str  # "repo", "bank" or "default"
    root: Path | None = None  # the repo's work tree, for repo sources


def open_source(
    encoder: TextEncoder,
    *,
    bank: str | Path | None = None,
    start: str | Path = ".",
    progress: Progress | None = None,
) -> Source:
    """Open the index to retrieve from.

    A named bank is indexed (incrementally) and used. Otherwise the index of the git repo containing
    `start` is used if `assist index` was run there and found something to index; otherwise the embedded
    default bank, indexed into the user cache on first use.
    """
    noop: Progress = lambda stage, done, total: None  # noqa: E731
    if bank is not None:
        index, _ = index_bank(bank, encoder, progress or noop)
        return Source(index, f"bank {bank} ({len(index)} examples)", "bank")
    root: Path | None = None
    with contextlib.suppress(UsageError):  # not in a repo: fall back to the default bank
        root = repo_root(start)
    empty = False
    if root is not None:
        existing = load_repo_index(root)
        empty = existing is not None and holds_nothing(root, existing)
        if existing is not None and not empty:
            if existing.encoder_name != encoder.name:
                raise UsageError(
                    f"the index in {root} was built with {existing.encoder_name}, not {encoder.name}; "
                    f"run `assist index` again"
                )
            return Source(existing, f"repo {root} ({len(existing)} functions)", "repo", root)
    bank_path = default_bank()
    directory = cache_dir() / "banks" / f"default-{encoder.name}"
    index, _ = index_bank(bank_path, encoder, progress or noop, directory=directory)
    hint = " — run `assist index` to use this repo's own code" if root is not None else ""
    if empty:  # indexed, but nothing to retrieve: as if it were not, and said so
        hint = f" — {HOLDS_NO_FUNCTIONS}"
    return Source(index, f"embedded default bank ({len(index)} examples){hint}", "default", root)
