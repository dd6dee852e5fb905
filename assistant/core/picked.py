"""The tests a run on a stub picked, remembered by everything that decided them.

The run that picks the repo's tests that check a stub (:func:`assistant.core.repo_tests.probe`) runs every test
file that may reach it: half a second on a small project, 6-7 s on click's 2,182 tests. Asked about the same
files again (generate again, another seed, repair rounds, the TUI's next try), it would pick the same tests, so its
answer is kept in the user cache (`<cache>/picked-tests/`, one small JSON file each, the newest
:data:`KEEP` kept) under a key made of what the run depends on: every file of the run's copy (the stub's file as
the run saw it, raising), the test files and interpreter asked for, the interpreter's installed packages (the
folders that hold them, by their modification time: installing or removing one changes it), and the run's
settings. Any change to one of them is another key, and the run happens again. Only a run that picked tests is
kept; a refusal is looked at again every time.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import UsageError
from assistant.paths import atomic_write_text, cache_dir, read_json_object

VERSION = 1  # raise when what is kept, or how the run picks, changes: older entries are then never read
KEEP = 200  # entries kept in the cache folder (newest first); each is a few KB
MAX_ENTRY_BYTES = 1 << 20


@dataclass(frozen=True)
class Picked:
    """What a run on a stub picked: the tests that check it (node ids, nearest first) and how long the run took."""

    args: tuple[str, ...]
    ran_s: float


def picked_key(root: Path, include: Sequence[str], files: dict[str, str], settings: Sequence[object]) -> str:
    """The key of a run over the files `include` of `root` with `files` (paths relative to `root`) written over
    them, and its `settings` (the interpreter first): a sha256 of them all, the interpreter's package folders'
    modification times included."""
    digest = hashlib.sha256(repr((VERSION, *settings)).encode())
    for folder in _package_folders(Path(str(settings[0]))):
        digest.update(f"{folder}\0{os.stat(folder).st_mtime_ns}\0".encode())
    for name in sorted(include):
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(_content_digest(root / name, files.get(name)))
    return digest.hexdigest()


def _package_folders(python: Path) -> list[str]:
    """The folders the interpreter's installed packages live in (a venv's `lib/python3.X/site-packages`)."""
    prefix = Path(os.path.abspath(python)).parent.parent
    return sorted(glob.glob(str(prefix / "lib*" / "python*" / "*-packages")))


def _content_digest(path: Path, text: str | None) -> bytes:
    """The sha256 of what the run's copy holds at `path`: `text` written over it, a link's target (the copy keeps
    links as links), a file's bytes; a marker for what cannot be read."""
    if text is not None:
        return hashlib.sha256(b"text\0" + text.encode("utf-8", "surrogateescape")).digest()
    try:
        if path.is_symlink():
            return hashlib.sha256(b"link\0" + os.fsencode(os.readlink(path))).digest()
        return hashlib.sha256(b"file\0" + path.read_bytes()).digest()
    except OSError:
        return b"missing"


def _folder() -> Path | None:
    """The cache's folder, None where the user cache cannot be used (the run then happens every time)."""
    try:
        return cache_dir() / "picked-tests"
    except UsageError:
        return None


def recall(key: str) -> Picked | None:
    """What a run with this key picked, or None (never run, forgotten, or unreadable)."""
    folder = _folder()
    data = None if folder is None else read_json_object(folder / f"{key}.json", MAX_ENTRY_BYTES)
    if data is None:
        return None
    args, ran_s = data.get("args"), data.get("ran_s")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args) or not args:
        return None
    if not isinstance(ran_s, int | float) or ran_s < 0:
        return None
    return Picked(tuple(args), float(ran_s))


def remember(key: str, picked: Picked) -> None:
    """Keep what a run picked under its key, and forget all but the newest KEEP entries. A cache that cannot be
    written is not an error: the run happens again next time."""
    folder = _folder()
    if folder is None:
        return
    try:
        folder.mkdir(exist_ok=True)
        atomic_write_text(folder / f"{key}.json", json.dumps({"args": list(picked.args), "ran_s": picked.ran_s}))
        entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in entries[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        return
