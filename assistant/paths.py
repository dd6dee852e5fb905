"""Where assist keeps its files (the user cache, the repo's `.assist/` folder), and how it rewrites one.

Every rewrite is atomic (a temporary file beside it, then a rename) and keeps what the rename would lose:
permissions, owner and group, a symlink (written through to its target, refused outside the repo unless
forced). A read-only file is refused, and so is a file with several hard links unless forced, in which
case it is rewritten in place so that all its names keep sharing one content.

A rewrite that must not overwrite an edit (`expected`: the bytes the caller read) compares the file just before
the rename; an editor that saves by renaming its own file over the name in the moment between that check and the
rename would lose its save. On Linux (renameat2's RENAME_EXCHANGE: ext4, xfs, btrfs, tmpfs and most local
filesystems) the new file is swapped in atomically and the file it displaced is compared afterwards: a save
made meanwhile is swapped back and the rewrite refused, so no save is lost. Elsewhere (macOS, Windows, a
filesystem without the exchange such as some network ones) the window remains, tens of microseconds wide (an
editor saving by rename every 0.2 ms lost 5 to 9 saves to about 150 rewrites); and a save written into the file
in place (not by rename) after the check is overwritten on every platform.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import secrets
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, Unpack

import platformdirs

from assistant.errors import UsageError

# How assist runs git, every time: never with a repository git finds without a `.git` (a folder a stranger commits
# with HEAD, objects/, refs/ and a config of their own is one, and that config can run commands: core.fsmonitor),
# and never an fsmonitor hook.
GIT = ("git", "-c", "safe.bareRepository=explicit", "-c", "core.fsmonitor=false")


def git_toplevel(folder: Path) -> Path | None:
    """The top of the git work tree `folder` lies in (as git prints it; a name may hold a newline), or None."""
    try:
        top = subprocess.run([*GIT, "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, text=True)
    except OSError:  # the folder is gone
        return None
    name = top.stdout[:-1] if top.stdout.endswith("\n") else top.stdout
    return Path(name) if top.returncode == 0 and name else None


def committed_link(folder: Path) -> Path | None:
    """The git work tree that commits a symlink `folder`, as written, runs through (`vendor -> ../other-checkout`),
    else None. The repository behind such a link, which a repository can plant, must not become the one whose
    files assist may write; a link you made yourself (untracked) is followed. Every link on the path counts, below
    the working folder or not (`../evil/vendor/x.py` named from a sibling folder); git runs only for a link, so
    most calls cost a few `lstat`s."""
    lexical = Path(folder).absolute()  # not abspath: it folds `vendor/..` away before the kernel follows the link
    for depth in range(2, len(lexical.parts) + 1):
        link = Path(*lexical.parts[:depth])
        if not link.is_symlink():
            continue
        root = git_toplevel(link.parent)  # the work tree that holds the link (as its parent, a real folder)
        if root is None:
            continue
        # Committed as a link (mode 120000): a tracked folder you replaced with a link of your own is yours.
        command = [*GIT, "--literal-pathspecs", "ls-files", "-s", "-z", "--", link.name]
        listed = subprocess.run(command, cwd=link.parent, capture_output=True)
        if listed.returncode == 0 and listed.stdout.startswith(b"120000 "):
            return root
    return None


REPO_DIR_NAME = ".assist"
_IGNORE_ALL = "# written by assist: this folder holds local indexes and models' data\n*\n"


def repo_dir(root: Path, *, create: bool = False) -> Path:
    """The repo's `.assist/` folder (created, git-ignored by its own `.gitignore`, only when `create`).

    A clone can bring a `.assist/` of its own, and whatever assist writes there (indexes, trained models,
    history) would follow a symlink the repo planted out of it; so a `.assist` that git tracks as a symlink or a
    submodule, or that holds symlinks git tracks, is refused with a one-line error rather than written through.
    So is any other file git tracks there: assist keeps `.assist/` out of git (its `.gitignore` ignores all), so
    a tracked one came with the repo, and an index, trained retriever or discriminator a repo ships would decide
    what reaches the prompt and which candidate is applied (and a model folder's config what code loads).
    A link the user made (untracked: say, indexes kept on another disk) is theirs, and followed.
    """
    folder = Path(root) / REPO_DIR_NAME
    try:
        listed = subprocess.run(
            [*GIT, "--literal-pathspecs", "ls-files", "-s", "-z", "--", REPO_DIR_NAME],
            cwd=root,
            capture_output=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        listed = b""
    entries = [entry for entry in listed.decode("utf-8", "surrogateescape").split("\0") if entry]
    for entry in entries:
        if entry.startswith(("120000 ", "160000 ")):  # git's modes for a symlink and a submodule
            name = entry.split("\t", 1)[-1]
            what = "symlink" if entry.startswith("1200") else "submodule (its files could be links)"
            raise UsageError(
                f"{Path(root) / name} is a {what} the repo ships; assist writes through no link in "
                f"{REPO_DIR_NAME}/ (remove it)"
            )
    if entries:
        first = entries[0].split("\t", 1)[-1]
        raise UsageError(
            f"{Path(root) / first} is a file the repo ships (git tracks {len(entries)} in {REPO_DIR_NAME}/); "
            f"assist loads no index or trained model a repository brings (remove them: git rm -r {REPO_DIR_NAME})"
        )
    if create:
        folder.mkdir(exist_ok=True)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            atomic_write_text(ignore, _IGNORE_ALL)
    return folder


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 4 MB blocks (models are gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _usable_folder(path: Path, setting: str) -> Path:
    """`path`, created if missing, or a one-line UsageError naming the environment variable that sets it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{path} is not a folder; set {setting} to a folder assist may write") from None
    except OSError as exc:
        raise UsageError(f"cannot create {path} ({exc.strerror}); set {setting} to a folder assist may write") from None
    return path  # not checked for writing: a read-only folder of models prepared for you is fine to read


def cache_dir() -> Path:
    """The user cache: converted models and indexes of banks. `ASSIST_CACHE_DIR` overrides the XDG default
    (`XDG_CACHE_HOME`). A path that is not a folder, or that cannot be created, is a one-line UsageError."""
    override = os.environ.get("ASSIST_CACHE_DIR")
    path = Path(override) if override else Path(platformdirs.user_cache_dir("assist"))
    setting = "ASSIST_CACHE_DIR" if override else "ASSIST_CACHE_DIR (or XDG_CACHE_HOME)"
    return _usable_folder(path, setting)


def models_dir() -> Path:
    """Where converted models live: `ASSIST_MODELS_DIR`, else `<cache>/models`."""
    override = os.environ.get("ASSIST_MODELS_DIR")
    path = Path(override) if override else cache_dir() / "models"
    return _usable_folder(path, "ASSIST_MODELS_DIR")


def data_path(*parts: str) -> Path:
    """A file shipped with assist: `prompts/...` or `index/...`.

    In a source checkout (or an editable install) they sit at the top of the repo; in a wheel they are
    carried inside the package under `_data/`.
    """
    package = Path(__file__).resolve().parent
    for root in (package / "_data", package.parent):
        candidate = root.joinpath(*parts)
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"assist's data file {'/'.join(parts)} is missing from this installation")


def _new_temp_file(path: Path) -> tuple[int, Path]:
    """An exclusive new file beside `path`, created with mode 0o666 so the kernel applies the umask as for
    `open()` (mkstemp would make it 0o600, and reading the umask means briefly changing it for every thread)."""
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file beside {path}")


class ChangedOnDisk(UsageError):
    """The file's bytes are no longer those the caller read: someone edited it meanwhile."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def write_target(path: Path, root: Path | None = None, force: bool = False) -> Path:
    """The file a rewrite of `path` must replace, or a one-line UsageError saying why it must not be rewritten.

    A symlink is written through to its target, so the link survives; with `root` (the repo), only when the
    target lies inside it, unless `force`. A read-only file is refused (its write bit is the user's "do not
    touch", even for root). A file with more than one hard link is refused unless `force`: an atomic rewrite
    would detach it from its other names; forced, it is rewritten in place so every name sees the new text.
    """
    path = Path(path)
    target = Path(os.path.realpath(path))
    linked = target != Path(os.path.abspath(path))
    if root is not None and linked and not force and not _inside(target, Path(os.path.realpath(root))):
        raise UsageError(
            f"{path} is a symlink to {target}, outside the repo; not written (set force to write through it)",
            setting="force:symlink",
            values={"path": path, "target": target},
        )
    try:
        info = target.stat()
    except FileNotFoundError:
        return target  # a new file
    except OSError as exc:  # a symlink loop, a folder we may not search
        raise UsageError(f"{path}: cannot write ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{path} is not a regular file; not written")
    own = os.geteuid() in (0, info.st_uid) if hasattr(os, "geteuid") else True
    if (own and not info.st_mode & stat.S_IWUSR) or not os.access(target, os.W_OK):
        raise UsageError(f"{path} is read-only; not written (make it writable first, e.g. chmod u+w)")
    if info.st_nlink > 1 and not force:
        raise UsageError(
            f"{path} has {info.st_nlink} hard links and a rewrite would detach it from the others; not written "
            "(set force to rewrite it in place)",
            setting="force:hard_links",
            values={"path": path, "links": info.st_nlink},
        )
    return target


def _check_unchanged(target: Path, expected: bytes | None) -> None:
    if expected is None:
        return
    try:
        current = target.read_bytes()
    except FileNotFoundError:
        current = None
    if current != expected:
        raise ChangedOnDisk(f"{target} changed since it was read; not written")


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _renameat2() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2  # glibc 2.28+
    except (AttributeError, OSError):
        return None


def _exchange(first: Path, second: Path) -> bool:
    """Swap two existing names in one step (Linux's renameat2 RENAME_EXCHANGE); False where the platform or the
    filesystem cannot, and nothing was changed."""
    function = _renameat2() if os.name == "posix" else None
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _identity(path: Path | int) -> tuple[int, int]:
    info = os.fstat(path) if isinstance(path, int) else path.stat()
    return info.st_dev, info.st_ino


def _open(path: Path) -> int:
    # Non-blocking: what an exchange displaced may be a FIFO a stranger put there, which must not hang the open.
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))


def _replace_unchanged(tmp: Path, target: Path, expected: bytes | None) -> None:
    """Rename `tmp` over `target` when `target` still holds `expected` (None: whatever it holds), else
    ChangedOnDisk and `target` keeps what it holds; where the platform swaps names atomically, a save renamed
    over `target` between the check and the rename is not lost either (see the module's docstring)."""
    _check_unchanged(target, expected)
    if expected is None:
        os.replace(tmp, target)
        return
    # Files are told apart by inode number below; each is held open meanwhile, so that a save cannot be given
    # the number of one an editor's rename just freed.
    held = [_open(tmp)]
    try:
        if not _exchange(tmp, target):
            os.replace(tmp, target)
            return
        held.append(_open(tmp))  # the displaced file: what was checked, or a save made since
        same = False  # a folder or a FIFO put there since the check is no file that was read: it goes back
        if stat.S_ISREG(os.fstat(held[-1]).st_mode):
            with os.fdopen(os.dup(held[-1]), "rb") as displaced:
                same = displaced.read() == expected
        if same:
            tmp.unlink()
            return
        _put_back(tmp, target, held)
        raise ChangedOnDisk(f"{target} changed since it was read; not written")
    finally:
        for fd in held:
            os.close(fd)


def _put_back(tmp: Path, target: Path, held: list[int]) -> None:
    """Swap `tmp` (a save the exchange displaced) back over `target`, where we placed our file (`held[0]`); if
    yet another save was renamed over ours meanwhile, the newest goes back in place. The file swapped out last
    is removed. Every file moved is added to `held` (kept open by the caller)."""
    placed = _identity(held[0])
    for _ in range(100):
        moving = held[-1]  # the file `tmp` names now
        _exchange(tmp, target)
        if _identity(tmp) == placed:  # `target` still held what we put there: it now holds the newest save
            tmp.unlink()
            return
        placed = _identity(moving)  # an editor renamed a newer save over it: that one goes back next
        held.append(_open(tmp))
    kept = tmp.with_name(f"{tmp.name}.kept")
    os.rename(tmp, kept)
    raise ChangedOnDisk(f"{target} kept changing while it was written; not written (a save may be at {kept})")


def _write_in_place(target: Path, data: bytes, expected: bytes | None) -> None:
    """Overwrite a hard-linked file's content without replacing its inode (every link sees the new text)."""
    with open(target, "r+b") as handle:
        before = handle.read()
        if expected is not None and before != expected:
            raise ChangedOnDisk(f"{target} changed since it was read; not written")
        if len(data) > len(before) and hasattr(os, "posix_fallocate"):
            # The room first: a full disk then refuses before a byte of the old text is overwritten.
            os.posix_fallocate(handle.fileno(), 0, len(data))
        try:
            handle.seek(0)
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
        except OSError:
            # Put the old text back (it fits: it was there), so a failed write does not leave half of each.
            with contextlib.suppress(OSError):
                handle.seek(0)
                handle.write(before)
                handle.truncate()
                handle.flush()
            raise


class WriteChecks(TypedDict, total=False):
    """The refusals a rewrite may be asked for, by :func:`atomic_write_bytes` and what writes through it.

    `root` (the repo: a symlink is written through only to a target inside it) and `force` (write through a
    symlink out of it, or a file with other hard links, in place): see :func:`write_target`. `expected`: the bytes
    the caller read; the file must still hold them just before the replace, else :class:`ChangedOnDisk`.
    """

    root: Path | None
    force: bool
    expected: bytes | None


def atomic_write_bytes(
    path: Path,
    data: bytes,
    mode: int | None = None,
    *,
    root: Path | None = None,
    force: bool = False,
    expected: bytes | None = None,
) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half of it.

    The file keeps its permissions (or gets `mode`), its owner and group where the OS permits (as root it
    does), its extended attributes and ACLs (Linux), and stays a symlink if it is one: see :func:`write_target`
    for what is refused (`root`, `force`).
    With `expected`, the file's bytes must still be those just before the replace, else
    :class:`ChangedOnDisk` and nothing is written. A new file gets the permissions `open()` would give it.
    """
    target = write_target(Path(path), root, force)
    try:
        info: os.stat_result | None = target.stat()
    except FileNotFoundError:
        info = None
    if info is not None and info.st_nlink > 1:  # only reached with force
        _write_in_place(target, data, expected)
        if mode is not None:
            os.chmod(target, mode)
        return
    if mode is None and info is not None:
        mode = stat.S_IMODE(info.st_mode)
    fd, tmp = _new_temp_file(target)
    ours = _identity(fd)  # unique while `tmp` names it: a displaced save is never removed below
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if info is not None:
            _keep_xattrs(target, tmp)  # before chmod: an ACL's mask then follows the file's mode, as before
        if mode is not None:
            os.chmod(tmp, mode)
        if info is not None:
            _keep_owner(tmp, info)
        _replace_unchanged(tmp, target, expected)
    except BaseException:
        with contextlib.suppress(OSError):
            if _identity(tmp) == ours:
                tmp.unlink()
        raise


def _kept_xattr(name: str) -> bool:
    """Whether an extended attribute describes the file rather than its old content: tags (`user.*`), the POSIX
    ACL and the SELinux label. Not file capabilities (the kernel drops them on a write) nor IMA/EVM hashes of
    the old bytes, nor `trusted.*`."""
    return name.startswith("user.") or name in ("system.posix_acl_access", "security.selinux")


def _keep_xattrs(source: Path, tmp: Path) -> None:
    """Give the new file the old one's extended attributes where the OS has them (Linux) and they still hold
    (:func:`_kept_xattr`). One we may not set is left out."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = [name for name in os.listxattr(source) if _kept_xattr(name)]
    except OSError:  # a filesystem without them
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.setxattr(tmp, name, os.getxattr(source, name))


def _keep_owner(tmp: Path, info: os.stat_result) -> None:
    """Give the new file the old one's owner and group; a user who may not (not root) keeps what they can."""
    if not hasattr(os, "chown"):
        return
    mine = tmp.stat()
    if (mine.st_uid, mine.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.chown(tmp, info.st_uid, info.st_gid)
    except PermissionError:
        with contextlib.suppress(PermissionError):
            os.chown(tmp, -1, info.st_gid)  # a member of the file's group may still keep the group


def atomic_write_text(path: Path, text: str, mode: int | None = None, **checks: Unpack[WriteChecks]) -> None:
    """Text version of :func:`atomic_write_bytes` (UTF-8, newlines written as given)."""
    atomic_write_bytes(path, text.encode("utf-8"), mode, **checks)


def read_regular_file(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of `path` when it is a regular file and not a symlink, else None (missing and unreadable too,
    and larger than `limit` bytes when given).

    For files a repository or a sandboxed run controls: a link to `/dev/zero` would be read forever, a FIFO would
    block, and a link elsewhere would bring another file's content in."""
    try:
        if path.is_symlink():
            return None
        # O_NOFOLLOW: the checked name cannot have become a link since; O_NONBLOCK: a FIFO does not hang us.
        flags = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        with os.fdopen(os.open(path, flags), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            if limit is None:
                return handle.read()
            # In chunks: read(limit + 1) would reserve the whole limit up front, whatever the file's size.
            data = bytearray()
            while len(data) <= limit and (chunk := handle.read(min(1 << 20, limit + 1 - len(data)))):
                data += chunk
            return bytes(data) if len(data) <= limit else None
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop on older Pythons
        return None


def read_json_object(path: Path, limit: int) -> dict | None:
    """The JSON object (a dict) in `path`, read as :func:`read_regular_file` reads (a regular file, not a link, at
    most `limit` bytes); None when it is missing, unreadable, too large, not UTF-8, not JSON or not an object."""
    data = read_regular_file(path, limit=limit)
    if data is None:
        return None
    try:
        loaded = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError; RecursionError: nesting too deep
        return None
    return loaded if isinstance(loaded, dict) else None
