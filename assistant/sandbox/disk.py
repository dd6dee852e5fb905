"""A cap on how much a sandboxed run writes in all, watched from outside the run.

``RLIMIT_FSIZE`` bounds one file, not how many a run writes: without this, ten seconds of generated code can put
gigabytes into its directory (a RAM-backed /tmp fills memory). Landlock lets a run write only under its own
directory, so the parent measures that directory's growth (allocated blocks and entries) while the run goes on,
and stops the run once either passes its cap. It is a watch, not a quota: between two looks a fast writer can
go past the cap by what it writes in that time (the interval is at least a quarter second, longer when the
tree is big enough that walking it costs more, so the watch takes at most about 5% of a core), and a run that
ends before the first look is never measured. Two more gaps: a directory the run makes unreadable to us (not
as root) is not counted, nor is a file it deleted but holds open; as a backstop the run is also stopped when
the filesystem holding it runs low on free space (below half of what was free at the start, or 256 MB,
whichever is less). The walk goes by file descriptor, so neither a path too long to name nor a symlink
swapped in mid-walk hides anything or leads it out of the folder.

Standard library only; the sandbox's parent side (``assistant.sandbox`` and ``assistant.sandbox.project``)
uses it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_MB = 1024 * 1024
_MIN_INTERVAL_S = 0.25
_WALK_SHARE = 20  # the interval is at least this many times the last walk's duration
_FREE_FLOOR = 256 * _MB


@dataclass(frozen=True)
class Usage:
    """Bytes allocated to, and the number of, the entries under a directory (it included)."""

    bytes: int
    entries: int


def usage(root: str, most: int | None = None) -> Usage:
    """What `root` holds: allocated bytes (st_blocks, so sparse files count what they use) and entries.

    Walked by file descriptor (``os.fwalk``): no symlink is followed, even one swapped in while we walk, and no
    path is too long to measure. A directory that cannot be read counts as empty; counting stops past `most`
    entries. A tree nested deeper than Python's recursion limit raises RecursionError."""
    total, entries = 0, 0
    walker = os.fwalk(root, follow_symlinks=False)
    try:
        for _, dirs, files, dir_fd in walker:
            for name in (*dirs, *files):
                entries += 1
                try:
                    total += os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue  # removed while we looked
            if most is not None and entries > most:
                break
    finally:
        walker.close()
    return Usage(total, entries)


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
        self.baseline = usage(root)
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
        try:
            now = usage(self.root, most=self.baseline.entries + self.max_files)
        except RecursionError:
            return "disk limit: nested folders deeper than can be measured"
        self._interval = max(_MIN_INTERVAL_S, _WALK_SHARE * (time.monotonic() - started))
        self._next = time.monotonic() + self._interval
        grown = now.bytes - self.baseline.bytes
        if grown > self.limit_mb * _MB:
            return f"disk limit: wrote more than {self.limit_mb} MB in its directory"
        if now.entries - self.baseline.entries > self.max_files:
            return f"disk limit: made more than {self.max_files:,} files and directories"
        free = _free_bytes(self.root)
        if self._floor is not None and free is not None and free < self._floor:
            return f"disk limit: the filesystem holding the run has less than {self._floor // _MB} MB free"
        return None
