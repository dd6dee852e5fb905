"""Which files of a repo `assist index` reads: the ones git tracks, and the untracked ones git does not ignore.

A file the user has just written is indexed before it is committed; `.venv/`, build output and whatever else
`.gitignore` names stay out. Untracked files inside a virtual environment git does not ignore (an older
`python -m venv venv` writes no `.gitignore` of its own) are left out too, and counted: thousands of installed
packages' functions would take hours to embed and would crowd the repo's own out of retrieval.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from assistant.code.extract import EXTRACTORS
from assistant.code.git import tracked_files
from assistant.errors import UsageError
from assistant.paths import GIT


@dataclass
class RepoFiles:
    """The files of a repo the index reads (relative to its root, with a suffix in EXTRACTORS)."""

    tracked: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)  # not ignored either
    left_out: list[str] = field(default_factory=list)  # untracked, inside a virtual environment
    environments: list[str] = field(default_factory=list)  # those virtual environments' folders, `venv/`

    @property
    def indexed(self) -> list[str]:
        """The files to index: the tracked ones, then the untracked ones."""
        return self.tracked + self.untracked


def untracked_files(root: Path) -> list[str]:
    """The files in the work tree `root` that git neither tracks nor ignores, relative to it (names that are not
    UTF-8 round-trip, as :func:`assistant.code.git.tracked_files` gives them)."""
    command = [*GIT, "ls-files", "-z", "--others", "--exclude-standard"]
    try:
        listed = subprocess.run(command, cwd=root, capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:  # a huge untracked tree (a dataset, a build folder) that is not ignored
        raise UsageError(
            f"git took over 120 s to list the untracked files of {root}; .gitignore its big folders"
        ) from None
    if listed.returncode != 0:
        reason = listed.stderr.decode(errors="replace").strip()
        raise UsageError(f"git could not list the untracked files of {root}: {reason}")
    return [name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def virtual_environment(root: Path, rel: str, seen: dict[Path, bool]) -> str | None:
    """The virtual environment under `root` that `rel` lies in, as `folder/` (None when none): the nearest folder
    above it holding `pyvenv.cfg`, else a `site-packages` folder (`seen` caches each folder's answer)."""
    parts = Path(rel).parts[:-1]
    for depth in range(1, len(parts) + 1):
        folder = Path(*parts[:depth])
        if folder not in seen:
            seen[folder] = (root / folder / "pyvenv.cfg").is_file()
        if seen[folder] or parts[depth - 1] == "site-packages":
            return folder.as_posix() + "/"
    return None


def repo_files(root: Path) -> RepoFiles:
    """The files `assist index` reads in the work tree `root` (see the module's docstring)."""
    found = RepoFiles()
    found.tracked = [rel for rel in dict.fromkeys(tracked_files(root)) if Path(rel).suffix in EXTRACTORS]
    seen: dict[Path, bool] = {}
    for rel in untracked_files(root):
        if Path(rel).suffix not in EXTRACTORS:
            continue
        environment = virtual_environment(root, rel, seen)
        if environment is None:
            found.untracked.append(rel)
        else:
            found.left_out.append(rel)
            if environment not in found.environments:
                found.environments.append(environment)
    return found


def utf8_name(rel: str) -> bool:
    """Whether a path git gave is valid UTF-8 (a name that is not cannot be stored, shown or sent as text: the
    index leaves such a file out, and so must whatever compares the work tree with it)."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def name_some(names: list[str], limit: int = 3) -> str:
    """`names` for a message: the first `limit` of them, then how many more (`a.py, b.py, c.py and 2 more`)."""
    shown = ", ".join(names[:limit])
    return f"{shown} and {len(names) - limit} more" if len(names) > limit else shown
