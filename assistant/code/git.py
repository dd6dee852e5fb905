"""Git integration for docstrings: staged files, and a plain pre-commit hook that assist owns.

With the pre-commit framework, use the hooks in `.pre-commit-hooks.yaml` instead; it stashes unstaged
changes itself. The plain hook here works on staged content only and never writes a file that also has
unstaged changes (those would be mixed into what the user reviews): it generates nothing for such a file,
names it with the reason, and fails, so the commit does not go through undocumented.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
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


def work_tree_python_files(root: Path) -> list[str]:
    """The Python files of the work tree `root` that git tracks or would (untracked files it does not ignore: a
    module just written), relative to it, sorted; none when git cannot list them."""
    command = [*GIT, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"]
    try:
        listed = subprocess.run(command, cwd=root, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if listed.returncode != 0:
        return []
    return sorted({name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if name})


def tracked_contents_key(root: Path, pattern: str = "*.py") -> str | None:
    """A digest of which files git tracks under `root` (matching `pattern`) and their staged contents (`git
    ls-files -s`: mode, blob hash, name): it changes when any of them does. None when git cannot say."""
    listed = subprocess.run([*GIT, "ls-files", "-s", "-z", "--", pattern], cwd=root, capture_output=True, timeout=120)
    return hashlib.sha256(listed.stdout).hexdigest() if listed.returncode == 0 else None


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


KEPT = "pre-commit.before-assist"  # a hook `install --force` replaced: run first by assist's, put back by uninstall


@dataclass(frozen=True)
class InstalledHook:
    """What `install_hook` did: the hook it wrote, and the hook before it, when there is one."""

    path: Path
    kept: Path | None  # where the hook it replaced was moved to (None: it replaced none, or its own)
    runs_first: Path | None  # the kept hook the new one runs first (None: none, or not executable)


@dataclass(frozen=True)
class UninstalledHook:
    """What `uninstall_hook` did."""

    path: Path
    removed: bool  # assist's hook was there and is gone (False: there was no hook, nothing done)
    restored: bool  # the hook it had replaced is back at `path`
    kept: Path | None  # with nothing removed: a kept hook still lying there (left alone)


def install_hook(root: Path, check_only: bool = False, force: bool = False) -> InstalledHook:
    """Write `.git/hooks/pre-commit` running `assist docstring` on staged files.

    Refuses, unless `force`, to replace a hook assist did not write, a hook that is a symlink (its target may be
    shared: with `force` the link itself is moved, never written through), and a hooks folder outside this
    repository's git folder (a `core.hooksPath` other repositories share: assist would run in all of them).
    A foreign hook (or link) replaced with `force` is kept beside it as `pre-commit.before-assist`, which the new
    hook runs first and `uninstall_hook` puts back. The hook calls this interpreter's assist, so it works without
    the virtualenv being active.
    """
    path = hook_path(root)
    git_dir = _git_dir(root)
    # The folder, not the hook: a hook that is itself a link is dealt with below.
    shared = git_dir is not None and not path.parent.resolve().is_relative_to(git_dir.resolve())
    if shared and not force:
        raise UsageError(
            f"{path.parent} is a hooks folder outside this repository (core.hooksPath), so other repositories run "
            "it too; set force to install there anyway",
            setting="force:shared_hooks",
            values={"folder": path.parent},
        )
    if path.is_symlink() and not force:
        target = os.readlink(path)
        raise UsageError(
            f"{path} is a link (to {target}); remove it, or set force to replace the link",
            setting="force:hook_link",
            values={"path": path, "target": target},
        )
    foreign = path.is_symlink() or (path.exists() and MARKER not in path.read_text(errors="replace"))
    if foreign and not force:
        raise UsageError(
            f"{path} exists and was not written by assist; move it away (or set force to replace it)",
            setting="force:foreign_hook",
            values={"path": path},
        )
    if path.parent.exists() and not path.parent.is_dir():
        raise UsageError(f"{path.parent} is not a folder, so no hook can go in it; move it away and run this again")
    kept = _keep_aside(path) if foreign else None
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, _hook_script(check_only), 0o755, root=root, force=force)
        except OSError as exc:
            raise UsageError(f"cannot write the hook {path}: {exc.strerror or exc}") from None
    except BaseException:
        if kept is not None and not os.path.lexists(path):
            kept.rename(path)  # assist's hook is not there: the user's goes back where it was
        raise
    previous = path.with_name(KEPT)
    runs_first = previous if previous.is_file() and os.access(previous, os.X_OK) else None
    return InstalledHook(path, kept, runs_first)


def _keep_aside(path: Path) -> Path:
    """Move the hook (or link: the link itself) at `path` to `pre-commit.before-assist`; one an earlier install
    kept there moves on to `pre-commit.before-assist-N`, so none is overwritten and the newest is the one run
    first and put back."""
    kept = path.with_name(KEPT)
    if os.path.lexists(kept):  # a file, or a link even when dangling
        number = 2
        while os.path.lexists(older := path.with_name(f"{KEPT}-{number}")):
            number += 1
        kept.rename(older)
    path.rename(kept)
    return kept


def _hook_script(check_only: bool) -> str:
    """The hook: the one it replaced first (when executable, as git would run it; its failure fails the commit),
    then `assist docstring --staged`."""
    if check_only:
        mode, does = "--check", "checks staged Python functions for missing docstrings (writes nothing, no model)"
    else:
        mode, does = (
            "--write --fail-on-change",
            "writes missing docstrings of staged Python functions (and fails, to have them reviewed)",
        )
    # `$0`: git runs a hook by its path, so the kept hook is found beside this one wherever the repo is.
    return (
        "#!/bin/sh\n"
        f"{MARKER}: {does}.\n"
        "# `assist hook uninstall` removes it and puts back the hook it replaced; `git commit --no-verify` skips it\n"
        "# once.\n"
        f"# It runs the hook it replaced first ({KEPT}, when executable) and fails when that fails.\n"
        f'previous="$(dirname "$0")/{KEPT}"\n'
        'if [ -f "$previous" ] && [ -x "$previous" ]; then "$previous" "$@" || exit $?; fi\n'
        f"exec {shlex.quote(sys.executable)} -P -m assistant docstring --staged {mode}\n"
    )


def uninstall_hook(root: Path) -> UninstalledHook:
    """Remove the hook if assist wrote it, putting back the hook it replaced (`pre-commit.before-assist`).

    No hook: nothing to do. A hook assist did not write is refused (UsageError) and left alone, and so is any
    kept one then: putting it back would overwrite a hook that is not assist's."""
    path = hook_path(root)
    kept = path.with_name(KEPT)
    found_kept = kept if os.path.lexists(kept) else None
    if not os.path.lexists(path):
        return UninstalledHook(path, removed=False, restored=False, kept=found_kept)
    try:
        ours = MARKER in path.read_text(errors="replace")
    except OSError:  # a dangling link, a folder: not assist's
        ours = False
    if not ours:
        raise UsageError(f"{path} was not written by assist; leaving it alone")
    if kept.is_symlink() or kept.is_file():
        # One rename over assist's hook: never a moment without a hook, and the same file, so its mode is kept.
        os.replace(kept, path)
        return UninstalledHook(path, removed=True, restored=True, kept=None)
    path.unlink()
    return UninstalledHook(path, removed=True, restored=False, kept=found_kept)
