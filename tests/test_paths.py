"""Atomic rewrites keep what a rename would lose (issue 26, item 6): symlinks, owner, hard links, read-only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from assistant.errors import UsageError
from assistant.paths import _kept_xattr, atomic_write_text
from assistant.ui.errors import said_with_flags


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_a_symlink_inside_the_repo_stays_a_link_and_its_target_gets_the_text(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text("old\n")
    link = tmp_path / "link.py"
    link.symlink_to("real.py")
    atomic_write_text(link, "new\n")  # no repo named (caches, config): written through
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert (tmp_path / "real.py").read_text() == "new\n"
    atomic_write_text(link, "newer\n", root=tmp_path)  # a repo named: its target lies inside
    assert link.is_symlink() and (tmp_path / "real.py").read_text() == "newer\n"
    assert _leftovers(tmp_path) == []


def test_a_symlink_out_of_the_repo_is_refused_unless_forced(tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (outside / "secret.py").write_text("secret\n")
    link = repo / "x.py"
    link.symlink_to(outside / "secret.py")
    with pytest.raises(UsageError, match=r"is a symlink to .*secret\.py, outside the repo; not written .*force") as no:
        atomic_write_text(link, "owned\n", root=repo)
    target = outside / "secret.py"  # the command line names the flag, as it always has
    said = f"{link} is a symlink to {target}, outside the repo; not written (pass --force to write through it)"
    assert str(said_with_flags(no.value)) == said
    assert (outside / "secret.py").read_text() == "secret\n" and link.is_symlink()
    atomic_write_text(link, "forced\n", root=repo, force=True)
    assert (outside / "secret.py").read_text() == "forced\n" and link.is_symlink()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_owner_and_group_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "theirs.py"
    path.write_text("old\n")
    os.chown(path, 12345, 23456)
    path.chmod(0o640)
    atomic_write_text(path, "new\n")
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (12345, 23456, 0o640)
    assert path.read_text() == "new\n"


def _acl(user: int) -> bytes:
    """A POSIX access ACL in the kernel's xattr form: owner rw, `user` rw, group r, mask rw, others r."""
    import struct

    def entry(tag: int, perm: int, who: int = 0xFFFFFFFF) -> bytes:
        return struct.pack("<HHI", tag, perm, who)

    return struct.pack("<I", 2) + entry(1, 6) + entry(2, 6, user) + entry(4, 4) + entry(0x10, 6) + entry(0x20, 4)


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="extended attributes through os: Linux only")
def test_extended_attributes_and_an_acl_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "tagged.py"
    path.write_text("old\n")
    try:
        os.setxattr(path, "user.origin", b"kept")
        os.setxattr(path, "system.posix_acl_access", _acl(12345))
    except OSError as exc:
        pytest.skip(f"this filesystem refuses extended attributes or ACLs ({exc.strerror})")
    mode = stat.S_IMODE(path.stat().st_mode)
    atomic_write_text(path, "new\n")
    assert path.read_text() == "new\n"
    assert os.getxattr(path, "user.origin") == b"kept"
    assert os.getxattr(path, "system.posix_acl_access") == _acl(12345)  # user 12345 may still write it
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert not _kept_xattr("security.capability") and not _kept_xattr("security.ima")  # they described old bytes
    assert _kept_xattr("user.origin") and _kept_xattr("system.posix_acl_access")


def test_a_hard_linked_file_is_refused_unless_forced_and_then_rewritten_in_place(tmp_path: Path) -> None:
    path, other = tmp_path / "a.py", tmp_path / "b.py"
    path.write_text("old\n")
    os.link(path, other)
    with pytest.raises(UsageError, match=r"has 2 hard links.*force") as no:
        atomic_write_text(path, "new\n")
    assert str(said_with_flags(no.value)).endswith("not written (pass --force to rewrite it in place)")
    assert other.read_text() == "old\n"
    atomic_write_text(path, "new\n", force=True)
    assert path.read_text() == other.read_text() == "new\n"  # still one file under two names
    assert path.stat().st_ino == other.stat().st_ino and path.stat().st_nlink == 2


def test_a_read_only_file_is_refused_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "frozen.py"
    path.write_text("keep\n")
    path.chmod(0o444)
    with pytest.raises(UsageError, match=r"frozen\.py is read-only; not written"):
        atomic_write_text(path, "new\n")
    with pytest.raises(UsageError, match="read-only"):
        atomic_write_text(path, "new\n", force=True)  # forcing is for links; a read-only bit is the user's own
    assert path.read_text() == "keep\n" and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert _leftovers(tmp_path) == []


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path: Path) -> None:
    from assistant.paths import ChangedOnDisk

    path = tmp_path / "work.py"
    path.write_text("read\n")
    path.write_text("edited meanwhile\n")
    with pytest.raises(ChangedOnDisk):
        atomic_write_text(path, "new\n", expected=b"read\n")
    assert path.read_text() == "edited meanwhile\n" and _leftovers(tmp_path) == []
    atomic_write_text(path, "new\n", expected=b"edited meanwhile\n")
    assert path.read_text() == "new\n"


def test_a_assist_folder_the_repo_ships_as_a_submodule_is_refused(tmp_path: Path) -> None:
    import subprocess

    from assistant.paths import repo_dir

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    assert repo_dir(tmp_path) == tmp_path / ".assist" and not (tmp_path / ".assist").exists()  # looking creates nothing
    git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},.assist")  # what a clone of a submodule holds
    with pytest.raises(UsageError, match=r"\.assist is a submodule"):
        repo_dir(tmp_path, create=True)
    assert not (tmp_path / ".assist").exists()


def test_a_folder_laid_out_as_a_bare_repository_never_runs_its_config(scratch_repo: Path, monkeypatch) -> None:
    import subprocess

    from assistant.code.edit import enclosing_root, unstaged_changes
    from assistant.core.home import module_home
    from assistant.indexing.index import repo_root

    # A stranger's repository can commit HEAD, objects/, refs/ and a config into any folder: git then takes that
    # folder for a repository of its own, and its config's fsmonitor is a command git runs.
    marker = scratch_repo.parent / "ran"
    src = scratch_repo / "src"
    (src / "objects").mkdir(parents=True)
    (src / "refs").mkdir()
    (src / "HEAD").write_text("ref: refs/heads/main\n")
    config = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
    config += f'\tfsmonitor = "touch {marker}; false"\n'
    (src / "config").write_text(config)
    (src / "target.py").write_text("def f():\n    ...\n")
    subprocess.run(["git", "ls-files"], cwd=src, capture_output=True)
    assert marker.exists()  # plain git runs it: what the test guards against is real
    marker.unlink()
    monkeypatch.chdir(scratch_repo)
    assert enclosing_root(src / "target.py") == src  # git refuses the folder; the folder itself is the bound
    assert unstaged_changes(src / "target.py") is not None
    module_home(src / "target.py", "f", {})
    with pytest.raises(UsageError, match="laid out as a bare git repository"):
        repo_root(src)
    assert not marker.exists()


def test_a_folder_linked_to_another_repository_does_not_make_it_the_one_written(
    scratch_repo: Path, tmp_path: Path, monkeypatch
) -> None:
    from assistant.code.edit import apply_edit, plan_edit
    from assistant.indexing.index import repo_root

    from .conftest import git

    other = tmp_path / "other"
    other.mkdir()
    (other / "mod.py").write_text("def f():\n    return 1\n")
    git(other, "init", "-q")
    git(other, "add", ".")
    git(other, "commit", "-qm", "other")
    (scratch_repo / "mine").symlink_to(other)  # a link of your own, untracked: followed
    (scratch_repo / "vendor").symlink_to(other)  # committed by the repository: `vendor -> ../other`
    git(scratch_repo, "add", "vendor")
    git(scratch_repo, "commit", "-qm", "vendor")
    monkeypatch.chdir(scratch_repo)
    assert repo_root(Path("vendor")) == repo_root(Path(".")) == scratch_repo.resolve()
    assert repo_root(Path("mine")) == other.resolve()
    edit = plan_edit(Path("vendor/mod.py"), "def g():\n    return 2\n", root=repo_root(Path("vendor")))
    with pytest.raises(UsageError, match="outside the repo; not written"):
        apply_edit(edit)
    assert (other / "mod.py").read_text() == "def f():\n    return 1\n"
    # Named from a sibling folder, not below the working folder: the link still counts.
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    monkeypatch.chdir(sibling)
    named = Path("..") / scratch_repo.name / "vendor" / "mod.py"
    assert repo_root(named.parent) == scratch_repo.resolve()
    edit = plan_edit(named, "def g():\n    return 2\n", root=repo_root(named.parent))
    with pytest.raises(UsageError, match="outside the repo; not written"):
        apply_edit(edit)
    assert (other / "mod.py").read_text() == "def f():\n    return 1\n"
    # `vendor/..` is the folder above the link's target for the kernel, not the repository's own top.
    (other / "sub").mkdir()
    (other / "sub" / "m.py").write_text("x = 1\n")
    (scratch_repo / "deep").symlink_to(other / "sub")
    git(scratch_repo, "add", "deep")
    git(scratch_repo, "commit", "-qm", "deep")
    dotted = Path("..") / scratch_repo.name / "deep" / ".." / "mod.py"
    assert dotted.resolve() == (other / "mod.py").resolve()
    assert repo_root(dotted.parent) == scratch_repo.resolve()
    # A tracked folder you replaced with a link of your own (data on another disk) is yours: followed.
    (scratch_repo / "data").mkdir()
    (scratch_repo / "data" / "keep.txt").write_text("k\n")
    git(scratch_repo, "add", "data")
    git(scratch_repo, "commit", "-qm", "data")
    (scratch_repo / "data" / "keep.txt").unlink()
    (scratch_repo / "data").rmdir()
    (scratch_repo / "data").symlink_to(other)
    assert repo_root(Path("..") / scratch_repo.name / "data") == other.resolve()


def test_repo_root_finds_a_repository_whose_path_holds_a_newline_and_works_from_a_deleted_folder(
    tmp_path: Path, monkeypatch
) -> None:
    from assistant.indexing.index import repo_root

    from .conftest import git

    odd = tmp_path / "ends in a newline\n"
    odd.mkdir()
    (odd / "mod.py").write_text("x = 1\n")
    git(odd, "init", "-q")
    assert repo_root(odd / "mod.py") == odd.resolve()  # git prints it and a newline: only that one goes
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # the shell's working folder was deleted under it: a named repository is still found
    assert repo_root(odd) == odd.resolve()
    with pytest.raises(UsageError, match="not inside a git repository"):
        repo_root(tmp_path)


def test_an_in_place_write_that_runs_out_of_room_leaves_the_old_text(tmp_path: Path) -> None:
    # A hard-linked file is rewritten in place (--force); a full disk once left the first part of the new text.
    import subprocess
    import sys

    target = tmp_path / "linked.py"
    old = b"".join(b"def f%d():\n    return %d\n\n\n" % (n, n) for n in range(400))
    target.write_bytes(old)
    os.link(target, tmp_path / "other-name.py")
    script = f"""
import resource, signal
from pathlib import Path
from assistant.paths import _write_in_place
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill, as a full disk gives ENOSPC
resource.setrlimit(resource.RLIMIT_FSIZE, ({len(old) + 1000}, {len(old) + 1000}))
try:
    _write_in_place(Path({str(target)!r}), b"x = 1\\n" * {len(old)}, {old!r})
except OSError as exc:
    print("refused", exc.errno)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("refused"), done.stdout + done.stderr
    assert target.read_bytes() == old and (tmp_path / "other-name.py").read_bytes() == old


# -- a save made in the check-then-rename window (issue 67, item 9) ---------------------------------------------

# An editor in its own process that saves by rename ("save N" to a temporary file, then over the name) in a tight
# loop; before each save it reads the file: "ours after K" there while its last save was not K means a rewrite
# replaced a save it had not read (the save is lost), unless that rewrite is swapping the save back: the file is
# read again for up to half a second (the swap takes microseconds, longer on a busy machine). It prints how many
# it lost.
EDITOR = r"""
import os, sys, time
path, saves = sys.argv[1], int(sys.argv[2])

def replaced(number):
    with open(path, "rb") as handle:
        now = handle.read()
    return now.startswith(b"ours after ") and int(now.split()[-1]) != number - 1

lost = 0
for number in range(1, saves + 1):
    deadline = time.monotonic() + 0.5
    while replaced(number):
        if time.monotonic() > deadline:
            lost += 1
            break
        time.sleep(0.001)
    with open(path + ".editor", "wb") as handle:
        handle.write(b"save %d" % number)
    os.replace(path + ".editor", path)
    time.sleep(0.0002)
print(lost)
"""


def _can_exchange(folder: Path) -> bool:
    """Whether this platform and filesystem swap two names atomically (renameat2 RENAME_EXCHANGE), probed here
    independently of the code under test."""
    import ctypes

    (folder / "a").write_text("a")
    (folder / "b").write_text("b")
    try:
        swap = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    swapped = swap(-100, bytes(folder / "a"), -100, bytes(folder / "b"), 2) == 0
    (folder / "a").unlink()
    (folder / "b").unlink()
    return swapped


def test_a_save_renamed_over_the_file_while_it_is_rewritten_is_never_lost(tmp_path: Path) -> None:
    import subprocess
    import sys

    from assistant.paths import ChangedOnDisk

    if not _can_exchange(tmp_path):
        pytest.skip("no atomic exchange of names here: the window is documented, not closed")
    path = tmp_path / "edited.txt"
    path.write_bytes(b"save 0")
    editor = subprocess.Popen([sys.executable, "-c", EDITOR, str(path), "3000"], stdout=subprocess.PIPE, text=True)
    written = refused = 0
    while editor.poll() is None:
        read = path.read_bytes()
        if not read.startswith(b"save "):
            continue
        try:
            atomic_write_text(path, f"ours after {int(read.split()[-1])}", expected=read)
            written += 1
        except ChangedOnDisk:
            refused += 1
    lost = int(editor.communicate()[0])
    final = path.read_bytes()
    if final.startswith(b"ours after "):  # the last rewrite came after the editor's last save: it had read it
        assert final == b"ours after 3000"
    assert lost == 0, f"{lost} saves lost ({written} rewrites, {refused} refused)"
    assert written and refused  # the two raced
    assert _leftovers(tmp_path) == [] and not list(tmp_path.glob("*.kept"))


@pytest.mark.parametrize(
    "env, named",
    [
        ({"ASSIST_CACHE_DIR": "{file}"}, "{file} is not a folder; set ASSIST_CACHE_DIR"),
        ({"ASSIST_CACHE_DIR": "/dev/null"}, "/dev/null is not a folder; set ASSIST_CACHE_DIR"),
        ({"ASSIST_CACHE_DIR": "", "XDG_CACHE_HOME": "/proc"}, "cannot create /proc/assist"),
    ],
)
def test_a_cache_folder_that_is_not_one_is_a_one_line_error(tmp_path: Path, env: dict, named: str) -> None:
    from .conftest import assist

    file = tmp_path / "a-file"
    file.write_text("")
    env = {key: value.format(file=file) for key, value in env.items()}
    result = assist("models", "list", cwd=tmp_path, env={**env, "ASSIST_MODELS_DIR": ""})
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and named.format(file=file) in line, line


def test_a_folder_put_in_the_files_place_after_the_check_is_swapped_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window between the check and the exchange, made deterministic: a folder takes the file's name there.
    # It is no save that was read, so it goes back where it was and the write is refused, not left renamed aside.
    from assistant import paths

    if not _can_exchange(tmp_path):
        pytest.skip("this filesystem cannot swap two names atomically")
    target = tmp_path / "a.py"
    target.write_text("old\n")
    checked = paths._check_unchanged

    def check_then_a_folder(path: Path, expected: bytes | None) -> None:
        checked(path, expected)
        path.unlink()
        path.mkdir()
        (path / "inside").write_text("keep")

    monkeypatch.setattr(paths, "_check_unchanged", check_then_a_folder)
    with pytest.raises(paths.ChangedOnDisk):
        paths.atomic_write_bytes(target, b"new\n", expected=b"old\n")
    assert target.is_dir() and (target / "inside").read_text() == "keep"
    assert [entry.name for entry in tmp_path.iterdir()] == ["a.py"]
