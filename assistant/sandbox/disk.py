"""A cap on how much a sandboxed run writes in all, watched from outside the run.

``RLIMIT_FSIZE`` bounds one file, not how many a run writes: without this, ten seconds of generated code can put
gigabytes into its directory (a RAM-backed /tmp fills memory). Landlock lets a run write only under its own
directory, so the parent measures that directory's growth (allocated blocks, entries and depth) while the run goes
on, and stops the run once one passes its cap. It is a watch, not a quota: between two looks a fast writer can go
past the cap by what it writes in that time (the interval is at least a quarter second, longer when the tree is big
enough that walking it costs more, so the watch takes at most about 5% of a core); :meth:`DiskWatch.final` takes
one last look once the run is over, so a run too quick for any look is measured too. Two more gaps: a directory the
run makes unreadable to us (not as root) is not counted, nor is a file it deleted but holds open; as a backstop the
run is also stopped when the filesystem holding it runs low on free space (below half of what was free at the
start, or 256 MB, whichever is less). Folders nested deeper than :data:`MAX_DEPTH` stop the run. The walk goes by
file descriptor and without recursion, so neither a path too long to name nor a symlink swapped in mid-walk hides
anything or leads it out of the folder; :func:`remove_tree` removes a run's folder the same way, however deep.

Standard library only; the sandbox's parent side (``assistant.sandbox`` and ``assistant.sandbox.project``)
uses it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from dataclasses import dataclass

_MB = 1024 * 1024
_MIN_INTERVAL_S = 0.25
_WALK_SHARE = 20  # the interval is at least this many times the last walk's duration
_FREE_FLOOR = 256 * _MB
# Folders nested deeper than this below a run's directory stop the run (a few thousand made cleanup and other
# tools fail); a project whose copy is deeper keeps its own depth as the cap.
MAX_DEPTH = 64
_BASELINE_DEPTH = 256  # how deep the first measure looks, to find a copy's own depth


@dataclass(frozen=True)
class Usage:
    """Bytes allocated to, and the number of, the entries under a directory (it included), and how deep it goes."""

    bytes: int
    entries: int
    depth: int = 0  # levels of folders below the root; counting stops one past the walk's `max_depth`


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    """A descriptor for the folder `name` (relative to `dir_fd`), never through a symlink."""
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def _entries(dir_fd: int) -> list[tuple[str, bool]]:
    """(name, is a folder, not a link) for each entry of the open folder; empty when it cannot be listed."""
    try:
        with os.scandir(dir_fd) as listing:
            return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listing]
    except OSError:
        return []


def usage(root: str, most: int | None = None, max_depth: int = MAX_DEPTH) -> Usage:
    """What `root` holds: allocated bytes (st_blocks, so sparse files count what they use), entries and depth.

    Walked by file descriptor, without recursion: no symlink is followed, even one swapped in while we walk, and
    no path is too long to measure. A directory that cannot be read counts as empty; counting stops past `most`
    entries, and the walk enters no folder deeper than `max_depth` + 1 (one descriptor is open per level)."""
    total, entries, depth = 0, 0, 0
    try:
        stack = [(_open_dir(root), _entries_of(root))]
    except OSError:
        return Usage(0, 0, 0)
    try:
        while stack:
            dir_fd, left = stack[-1]
            if not left:
                os.close(stack.pop()[0])
                continue
            name, is_dir = left.pop()
            entries += 1
            if most is not None and entries > most:
                break
            try:
                total += os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_blocks * 512
            except OSError:
                continue  # removed while we looked
            if is_dir and len(stack) <= max_depth + 1:
                depth = max(depth, len(stack))
                with contextlib.suppress(OSError):  # unreadable to us, or swapped for a link: counted, not entered
                    inner = _open_dir(name, dir_fd)
                    stack.append((inner, _entries(inner)))
    finally:
        for dir_fd, _ in stack:
            os.close(dir_fd)
    return Usage(total, entries, depth)


def _entries_of(path: str) -> list[tuple[str, bool]]:
    fd = _open_dir(path)
    try:
        return _entries(fd)
    finally:
        os.close(fd)


def remove_tree(path: str) -> bool:
    """Remove the folder `path` and everything in it, however deep, without recursion or following links.

    Each folder met is first moved up into `path` itself (a rename, so no path grows long and at most two
    descriptors are open), then emptied and removed. A folder we may not list or change (a run's chmod, when we
    are not root) gets its owner's rights back, and we try again. Other errors are ignored, as
    ``shutil.rmtree(ignore_errors=True)`` does. Returns whether `path` is gone. (``shutil.rmtree`` recurses in
    Python 3.11: a run that nested folders a few thousand deep made it raise RecursionError.)"""
    if os.path.isdir(path) and not os.path.islink(path) and not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        with contextlib.suppress(OSError):
            os.chmod(path, stat.S_IRWXU)  # our own temporary folder (the run cannot swap it for a link)
    try:
        top = _open_dir(path)
    except FileNotFoundError:
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)  # a link or a file where the folder was
        return not os.path.lexists(path)
    try:
        pending: list[str | None] = [None]  # None: `path` itself; else a folder moved up into it
        while pending:
            _empty(top, pending.pop(), pending)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(path)
    return not os.path.lexists(path)


def _owner_rights(name: str, dir_fd: int) -> None:
    """Give the folder `name` of `dir_fd` its owner's rights back (only after we were refused: as root we never
    are). Never through a link: a process that outlived the run could swap the folder for a link to one outside
    between a check and a chmod that follows links, so the folder is held by an O_PATH descriptor that cannot be
    a link (O_NOFOLLOW | O_DIRECTORY) and changed through it."""
    flags = getattr(os, "O_PATH", 0) | os.O_NOFOLLOW | os.O_DIRECTORY
    if not flags & getattr(os, "O_PATH", 0):  # no O_PATH (not Linux): a folder without rights stays behind
        with contextlib.suppress(OSError, NotImplementedError, ValueError):
            os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd, follow_symlinks=False)
        return
    with contextlib.suppress(OSError):
        held = os.open(name, flags, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{held}", stat.S_IRWXU)  # the folder the descriptor holds, never a link
        finally:
            os.close(held)


def _empty(top: int, name: str | None, pending: list[str | None]) -> None:
    """Empty the folder `name` of `top` (`top` itself for None): files go, folders move up into `top` and onto
    `pending`; then remove it."""
    dir_fd = top
    if name is not None:
        try:
            dir_fd = _open_dir(name, top)
        except PermissionError:
            _owner_rights(name, top)
            try:
                dir_fd = _open_dir(name, top)
            except OSError:
                return
        except OSError:
            return
    try:
        entries = _entries(dir_fd)
        if entries and not os.access(".", os.W_OK | os.X_OK, dir_fd=dir_fd) and name is not None:
            _owner_rights(name, top)  # emptying a folder writes it
        for entry, is_dir in entries:
            if not is_dir:
                with contextlib.suppress(OSError):
                    os.unlink(entry, dir_fd=dir_fd)
            elif name is None:
                pending.append(entry)
            else:
                moved = f".assist-rm-{secrets.token_hex(8)}"
                try:
                    _move(entry, dir_fd, moved, top)
                    pending.append(moved)
                except OSError:
                    continue
    finally:
        if dir_fd != top:
            os.close(dir_fd)
    if name is not None:
        with contextlib.suppress(OSError):
            os.rmdir(name, dir_fd=top)


def _move(entry: str, dir_fd: int, moved: str, top: int) -> None:
    """Rename the folder `entry` of `dir_fd` to `moved` in `top`; moving a folder writes its ".." entry, so a
    folder without its owner's write right gets it back first."""
    try:
        os.rename(entry, moved, src_dir_fd=dir_fd, dst_dir_fd=top)
    except PermissionError:
        _owner_rights(entry, dir_fd)
        os.rename(entry, moved, src_dir_fd=dir_fd, dst_dir_fd=top)


def _free_bytes(path: str) -> int | None:
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


class DiskWatch:
    """Watches a run's directory from outside: :meth:`check` says why the run must stop, or None.

    The first measure, taken when the watch is made, is the baseline: only what the run adds counts (a project's
    copy may itself be large)."""

    def __init__(self, root: str, limit_mb: int, max_files: int) -> None:
        self.root = root
        self.limit_mb = limit_mb
        self.max_files = max_files
        started = time.monotonic()
        self.baseline = usage(root, max_depth=_BASELINE_DEPTH)
        self.max_depth = max(MAX_DEPTH, self.baseline.depth)
        self._interval = max(_MIN_INTERVAL_S, _WALK_SHARE * (time.monotonic() - started))
        self._next = time.monotonic() + self._interval
        free = _free_bytes(root)
        self._floor = None if free is None else min(_FREE_FLOOR, free // 2)

    def wait(self) -> float:
        """Seconds until the next look is due (0 when it is)."""
        return max(0.0, self._next - time.monotonic())

    def check(self) -> str | None:
        """When a look is due, measure; a one-line reason when the run went past a cap, else None."""
        if time.monotonic() < self._next:
            return None
        started = time.monotonic()
        now = usage(self.root, most=self.baseline.entries + self.max_files, max_depth=self.max_depth)
        self._interval = max(_MIN_INTERVAL_S, _WALK_SHARE * (time.monotonic() - started))
        self._next = time.monotonic() + self._interval
        grown = now.bytes - self.baseline.bytes
        if grown > self.limit_mb * _MB:
            return f"disk limit: wrote more than {self.limit_mb} MB in its directory"
        if now.entries - self.baseline.entries > self.max_files:
            return f"disk limit: made more than {self.max_files:,} files and directories"
        if now.depth > self.max_depth:
            return f"disk limit: nested folders more than {self.max_depth} deep"
        free = _free_bytes(self.root)
        if self._floor is not None and free is not None and free < self._floor:
            return f"disk limit: the filesystem holding the run has less than {self._floor // _MB} MB free"
        return None

    def final(self) -> str | None:
        """Measure now, whenever the last look was: after the run, so that a run too quick for any look (or what
        it did since the last one) is measured too. A one-line reason when it went past a cap, else None."""
        self._next = 0.0
        return self.check()
