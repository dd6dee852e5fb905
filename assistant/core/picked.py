"""The tests a run on a stub picked, remembered by everything that decided them.

The run that picks the repo's tests that check a stub (:func:`assistant.core.repo_tests.probe`) runs every test
file that may reach it: half a second on a small project, 6-7 s on click's 2,182 tests. Asked about the same
files again (generate again, another seed, repair rounds, the TUI's next try), it would pick the same tests, so its
answer is kept in the user cache (`<cache>/picked-tests/`, one small JSON file each, the newest
:data:`KEEP` kept) under a key made of what the run depends on: every file of the run's copy (the stub's file as
the run saw it, raising), the function, the test files and interpreter asked for, the interpreter's installed
packages (the folders that hold them, by their modification time: installing or removing one changes it), the
sandbox's layers and the run's settings. Any change to one of them is another key, and the run happens again.
Not seen: an edit inside an installed package, or a change outside the repo that a link in it points to. Only a
run that picked tests is kept; a refusal is looked at again every time, and where the interpreter's package
folders are not found nothing is kept.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import UsageError
from assistant.paths import atomic_write_text, cache_dir, file_sha256, read_json_object

VERSION = 2  # raise when what is kept, or how the run picks, changes: older entries are then never read
KEEP = 200  # entries kept in the cache folder (newest first); each is a few KB
MAX_ENTRY_BYTES = 1 << 20


@dataclass(frozen=True)
class Picked:
    """What a run on a stub picked: the tests that check it (node ids, nearest first) and how long the run took."""

    args: tuple[str, ...]
    ran_s: float


def picked_key(
    root: Path, include: Sequence[str], files: dict[str, str], python: Path, settings: Sequence[object]
) -> str | None:
    """The key of a run with `python` over the files `include` of `root` with `files` (paths relative to `root`)
    written over them, and its `settings`: a sha256 of them all, the interpreter's package folders' modification
    times included. None where the interpreter's package folders are not found (a change to them would go unseen)."""
    stamps = _package_stamps(python)
    if stamps is None:
        return None
    digest = hashlib.sha256(repr((VERSION, str(python), *settings)).encode())
    digest.update(stamps.encode("utf-8", "surrogateescape"))
    for name in sorted({*include, *files}):
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(_content_digest(root / name, files.get(name)))
    return digest.hexdigest()


# Asked of an interpreter that is not a venv's: -I -S, so nothing but the interpreter runs (no site hooks, no .pth
# files), as for the test runs themselves.
SITE_PACKAGES = "import site; print(chr(10).join(site.getsitepackages()))"


def _package_stamps(python: Path) -> str | None:
    """Each folder the interpreter's packages are installed in, with its modification time (installing or removing
    one changes it); None where none is found."""
    stamps = []
    for folder in _package_folders(python):
        try:
            stamps.append(f"{folder}\0{os.stat(folder).st_mtime_ns}\0")
        except OSError:
            continue  # named, not there
    return "".join(stamps) or None


def _package_folders(python: Path) -> list[str]:
    """The folders the interpreter's installed packages live in: a venv's own `lib/python3.X/site-packages` (found
    as `site` finds it, by the `pyvenv.cfg` beside or above the interpreter), else what the interpreter says."""
    home = Path(os.path.abspath(python)).parent
    for prefix in (home, home.parent):
        if (prefix / "pyvenv.cfg").is_file():
            return sorted(glob.glob(str(prefix / "lib*" / "python*" / "site-packages")))
    try:
        done = subprocess.run([str(python), "-I", "-S", "-c", SITE_PACKAGES], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    listed = done.stdout.decode("utf-8", "surrogateescape").splitlines() if done.returncode == 0 else []
    return [line for line in listed if line]


def _content_digest(path: Path, text: str | None) -> bytes:
    """The sha256 of what the run's copy holds at `path`: `text` written over it, a link's target (the copy keeps
    links as links), a file's bytes; a marker for what cannot be read."""
    if text is not None:
        return hashlib.sha256(b"text\0" + text.encode("utf-8", "surrogateescape")).digest()
    try:
        if path.is_symlink():
            return hashlib.sha256(b"link\0" + os.fsencode(os.readlink(path))).digest()
        return b"file\0" + bytes.fromhex(file_sha256(path))
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
