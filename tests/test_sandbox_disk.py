"""The disk watch's measure: what a directory holds, counted without following links."""

from __future__ import annotations

import os
from pathlib import Path

from assistant.sandbox.disk import DiskWatch, usage


def test_usage_counts_nested_entries_and_never_follows_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * 4 * 2**20)
    root = tmp_path / "run"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "one.bin").write_bytes(b"y" * 2**20)
    os.symlink(outside, root / "link")
    found = usage(str(root))
    assert found.entries == 4  # a, a/b, a/b/one.bin, link
    assert 2**20 <= found.bytes < 2 * 2**20  # one file and three small inodes, not the 4 MB behind the link


def test_the_watch_counts_growth_from_its_baseline(tmp_path: Path) -> None:
    (tmp_path / "copy.bin").write_bytes(b"x" * 3 * 2**20)  # what was there first (a project's copy) is free
    watch = DiskWatch(str(tmp_path), limit_mb=2, max_files=3)
    watch._next = 0.0  # look now
    assert watch.check() is None
    (tmp_path / "new.bin").write_bytes(b"y" * 3 * 2**20)
    watch._next = 0.0
    assert watch.check() == "disk limit: wrote more than 2 MB in its directory"
    os.remove(tmp_path / "new.bin")
    for i in range(4):
        (tmp_path / f"e{i}").touch()
    watch._next = 0.0
    assert watch.check() == "disk limit: made more than 3 files and directories"


def test_a_tree_past_path_max_is_measured(tmp_path: Path) -> None:
    # Twenty folders of 250-character names put the file past PATH_MAX (4,096): walked by path, it would be missed.
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(20):
            name = f"{level:03d}" + "d" * 247
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        out = os.open("deep.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        os.write(out, b"z" * 2**20)
        os.close(out)
    finally:
        os.close(fd)
    found = usage(str(tmp_path))
    assert found.entries == 21 and found.bytes >= 2**20
