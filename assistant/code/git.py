"""Git integration for docstrings: staged files, and a plain pre-commit hook that assist owns.

With the pre-commit framework, use the hooks in `.pre-commit-hooks.yaml` instead; it stashes unstaged
changes itself. The plain hook here works on staged content only and never writes a file that also has
unstaged changes (those would be mixed into what the user reviews): it generates nothing for such a file,
names it with the reason, and fails, so the commit does not go through undocumented.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from assistant.errors import UsageError
from assistant.paths import GIT, atomic_write_text

MARKER = "# written by `assist hook install`"


def staged_python_files(root: Path) -> list[str]:
    """Added, copied, modified or renamed Python files in the index, relative to the repo root."""
    listed = subprocess.run(
        [*GIT, "diff", "--cached", "--name-only", "-z", "--diff-filter=ACMR", "--", "*.py"],
        cwd=root,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        raise UsageError(f"git could not list staged files: {listed.stderr.decode(errors='replace').strip()}")
    return sorted(name for name in listed.stdout.decode("utf-8", "replace").split("\0") if name)


def tracked_files(root: Path, *patterns: str) -> list[str]:
    """The files git tracks in the work tree `root` (matching `patterns`, default all), relative to it; a name
    that is not UTF-8 round-trips (surrogateescape), so it can still be opened."""
    listed = subprocess.run([*GIT, "ls-files", "-z", "--", *patterns], cwd=root, capture_output=True, timeout=120)
    if listed.returncode != 0:
        raise UsageError(f"git could not list the files of {root}: {listed.stderr.decode(errors='replace').strip()}")
    return [name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def tracked_python_files(root: Path) -> list[str]:
    """The Python files git tracks under `root`, relative to it, sorted (none when git cannot list them)."""
    try:
        return sorted(tracked_files(root, "*.py"))
    except UsageError:
        return []


def staged_text(root: Path, name: str) -> bytes:
    """The staged content of a file (what the commit will hold)."""
    # `:0:` names the stage: `:0:x.py` alone would be read as stage 0 of `x.py`, not the file `0:x.py`.
    shown = subprocess.run([*GIT, "show", f":0:{name}"], cwd=root, capture_output=True, check=False)
    if shown.returncode != 0:
        raise UsageError(f"{name}: not in the index")
    return shown.stdout


def has_unstaged_changes(root: Path, name: str) -> bool:
    """Whether the working-tree file differs from its staged content (or is gone)."""
    command = [*GIT, "--literal-pathspecs", "diff", "--quiet", "--", name]  # a name, not a pattern
    return subprocess.run(command, cwd=root, capture_output=True).returncode != 0


def hook_path(root: Path) -> Path:
    found = subprocess.run(
        [*GIT, "rev-parse", "--git-path", "hooks/pre-commit"], cwd=root, capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        raise UsageError(f"{root} is not a git repository")
    path = Path(found.stdout.strip())
    return path if path.is_absolute() else root / path


def _git_dir(root: Path) -> Path | None:
    found = subprocess.run(
        [*GIT, "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=root, capture_output=True, text=True
    )
    return Path(found.stdout.strip()) if found.returncode == 0 and found.stdout.strip() else None


def install_hook(root: Path, check_only: bool = False, force: bool = False) -> Path:
    """Write `.git/hooks/pre-commit` running `assist docstring` on staged files.

    Refuses, unless `force`, to replace a hook assist did not write, a hook that is a symlink (its target may be
    shared: with `force` the link itself is replaced, never written through), and a hooks folder outside this
    repository's git folder (a `core.hooksPath` other repositories share: assist would run in all of them).
    A foreign hook replaced with `force` is kept beside it as `pre-commit.before-assist`. The hook calls this
    interpreter's assist, so it works without the virtualenv being active.
    """
    path = hook_path(root)
    git_dir = _git_dir(root)
    # The folder, not the hook: a hook that is itself a link is dealt with below.
    shared = git_dir is not None and not path.parent.resolve().is_relative_to(git_dir.resolve())
    if shared and not force:
        raise UsageError(
            f"{path.parent} is a hooks folder outside this repository (core.hooksPath), so other repositories run "
            "it too; pass --force to install there anyway"
        )
    if path.is_symlink():
        if not force:
            raise UsageError(
                f"{path} is a link (to {os.readlink(path)}); remove it, or pass --force to replace the link"
            )
        path.unlink()  # the link, not what it points at
    foreign = path.exists() and MARKER not in path.read_text(errors="replace")
    if foreign and not force:
        raise UsageError(f"{path} exists and was not written by assist; move it away (or pass --force to replace it)")
    if foreign:
        backup = path.with_name("pre-commit.before-assist")
        number = 1
        while backup.exists() or backup.is_symlink():
            number += 1
            backup = path.with_name(f"pre-commit.before-assist-{number}")
        path.rename(backup)
    mode = "--check" if check_only else "--write --fail-on-change"
    script = (
        "#!/bin/sh\n"
        f"{MARKER}: documents staged Python functions.\n"
        "# Remove this file (or run `assist hook uninstall`) to stop it; `git commit --no-verify` skips it once.\n"
        f"exec {shlex.quote(sys.executable)} -P -m assistant docstring --staged {mode}\n"
    )
    if path.parent.exists() and not path.parent.is_dir():
        raise UsageError(f"{path.parent} is not a folder, so no hook can go in it; move it away and run this again")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, script, 0o755, root=root, force=force)  # a symlinked hook: see write_target
    except OSError as exc:
        raise UsageError(f"cannot write the hook {path}: {exc.strerror or exc}") from None
    return path


def uninstall_hook(root: Path) -> Path:
    """Remove the hook if assist wrote it."""
    path = hook_path(root)
    if not path.exists():
        raise UsageError(f"there is no pre-commit hook at {path}")
    if MARKER not in path.read_text(errors="replace"):
        raise UsageError(f"{path} was not written by assist; leaving it alone")
    path.unlink()
    return path
