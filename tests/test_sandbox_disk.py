"""The disk watch's measure: what a directory holds, counted without following links."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from assistant.sandbox import disk
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


# A run as a user without privileges: 1,200 nested folders, some read-only or unreadable, with links out.
NON_ROOT_TREE = """
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("disk", sys.argv[1])
disk = importlib.util.module_from_spec(spec)
sys.modules["disk"] = disk
spec.loader.exec_module(disk)
base, outside = sys.argv[2], sys.argv[3]
os.chdir(base)
for i in range(1200):  # past the recursion limit, as shutil.rmtree would need
    os.mkdir("d")
    os.chdir("d")
    if i % 300 == 0:
        open("f", "w").close()
        os.symlink(outside, "l")
        os.chmod("..", 0o500 if i % 600 else 0)
os.chdir("/")
os.chmod(base, 0o500)
print(disk.usage(base).depth, disk.remove_tree(base), os.path.lexists(base))
"""


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to drop to nobody")
def test_a_deep_tree_with_rights_taken_away_is_removed_by_its_owner() -> None:
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    if subprocess.run([*drop, "-c", "pass"], capture_output=True).returncode != 0:
        pytest.skip("nobody cannot run this interpreter")
    root = Path(tempfile.mkdtemp(prefix="assist-disk-test-", dir="/tmp"))  # pytest's tmp_path is root's alone
    try:
        root.chmod(0o777)  # nobody removes the run folder itself from here
        outside = root / "outside"
        outside.mkdir()
        (outside / "keep.txt").write_text("x")
        base = root / "run"
        base.mkdir()
        os.chown(base, 65534, 65534)
        script = [*drop, "-c", NON_ROOT_TREE, disk.__file__, str(base), str(outside)]
        out = subprocess.run(script, capture_output=True, text=True, timeout=60)
        assert out.stdout.split() == ["65", "True", "False"], out.stderr
        assert (outside / "keep.txt").read_text() == "x"
    finally:
        disk.remove_tree(str(root))
