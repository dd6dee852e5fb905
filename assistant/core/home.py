"""Where a stub's candidates can run: their own file, filled in, inside a sandboxed copy of its project.

A body written by `assist generate --file F --function NAME` calls the rest of its module (helpers, constants,
imports), so it cannot run alone. Merged into its file, in a throwaway copy of the repo run with the repo's own
interpreter (:func:`assistant.sandbox.project.run_pytest`: Landlock, no network, rlimits, a scrubbed
environment), it can: that is how the `agree` ranker runs the model's tests on a stub's candidates. The
repo's tests for a stub (:mod:`assistant.core.repo_tests`) run in the same copy, found by the same helpers: the
interpreter with the project's dependencies, the files git shows, and the folder its top package sits in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from assistant.code.edit import enclosing_root
from assistant.errors import UsageError
from assistant.paths import GIT
from assistant.sandbox import boundary


@dataclass(frozen=True)
class ModuleHome:
    """A stub's file in its project, with each candidate's version of the whole file (by sample number)."""

    root: Path  # the project's work tree (never written: every run uses a copy)
    path: str  # the file, relative to `root` (posix)
    module: str  # its import name, e.g. "boltons.strutils"
    qualname: str  # the function filled: "name" or "Class.method"
    python: Path  # the interpreter with the project's dependencies
    pythonpath: tuple[str, ...]  # folders of the copy put first on sys.path
    include: tuple[str, ...] | None  # the files copied (what git tracks); None: the tree less caches and venvs
    texts: Mapping[int, str]  # sample number -> the file with that candidate's body

    @property
    def is_method(self) -> bool:
        """A method needs an instance: tests that call it by name alone cannot run it."""
        return "." in self.qualname


def project_python(root: Path, python: str | Path | None = None) -> Path:
    """The interpreter that has the project's dependencies (see the module docstring).

    A repo's own `.venv/bin/python` is taken only when git tracks nothing under that venv and the interpreter
    resolves outside the repo (a venv's python is a link to an installed one): a venv the repo ships, even one
    linking to the system's python, brings files the interpreter reads as it starts (`pyvenv.cfg`, a `._pth`,
    site-packages' `.pth` files), before any sandbox is up, so it is not run unasked."""
    if python is not None:
        chosen = Path(python)
        if not chosen.exists():
            raise UsageError(
                f"the interpreter {python} does not exist", setting="python:missing", values={"python": python}
            )
        if not chosen.is_file() or not os.access(chosen, os.X_OK):
            raise UsageError(
                f"the interpreter {python} is not an executable file",
                setting="python:not_executable",
                values={"python": python},
            )
        return chosen
    return found_python(root)[0]


def found_python(root: Path) -> tuple[Path, str]:
    """The interpreter :func:`project_python` takes where none is named, and where it came from, in words: "the
    repo's venv", "the active virtualenv" or "assist's own"."""
    top = os.path.realpath(root)
    for venv in (".venv", "venv"):
        candidate = root / venv / "bin" / "python"
        real = os.path.realpath(candidate)
        if candidate.exists() and os.path.commonpath([real, top]) != top and not _tracked(root, venv):
            return candidate, "the repo's venv"
    active = os.environ.get("VIRTUAL_ENV")
    if active and (Path(active) / "bin" / "python").exists():
        return Path(active) / "bin" / "python", "the active virtualenv"
    return Path(sys.executable), "assist's own"


def _ls_files(root: Path, *args: str) -> list[str] | None:
    """`git ls-files -z ARGS` in the work tree `root`, as names; None when git cannot say."""
    try:
        listed = subprocess.run(
            [*GIT, "--literal-pathspecs", "ls-files", "-z", *args],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name]


def _tracked(root: Path, folder: str) -> bool:
    """Whether git tracks anything under `folder` of the work tree `root` (True when git cannot say)."""
    listed = _ls_files(root, "--cached", "--", folder)
    return listed is None or bool(listed)


def git_files(root: Path) -> tuple[str, ...] | None:
    """The files git shows in the work tree at `root` (tracked, and untracked but not ignored), None outside git:
    what a test run's copy holds, so ignored files (.env, keys, build output) stay out of it."""
    listed = _ls_files(root, "--cached", "--others", "--exclude-standard")
    return None if listed is None else tuple(sorted(set(listed)))


def package_root(root: Path, path: str | Path) -> str | None:
    """The folder (relative to `root`) that the file's top package sits in: what must be on sys.path so that the
    edited copy, not an installed one, is imported (e.g. `packages/foo/src` in a monorepo)."""
    folder = (root / path).parent
    while (folder / "__init__.py").exists() and folder != root:
        folder = folder.parent
    try:
        relative = folder.relative_to(root).as_posix()
    except ValueError:
        return None
    return relative or "."


def too_wide(root: Path) -> bool:
    """Whether a work tree is the home folder or /: a copy of it would hold whatever else lives there, so no
    candidate or test runs in it."""
    return os.path.realpath(root) in (os.path.realpath(Path.home()), os.path.realpath("/"))


def search_path(root: Path, path: str | Path) -> tuple[str, ...]:
    """The folders of the copy put first on sys.path for a file (relative to `root`): the one its top package
    sits in, then `src` and the root where they exist, so the edited copy, not an installed one, is imported."""
    first = package_root(root, path)
    return tuple(dict.fromkeys(p for p in (first, "src", ".") if p is not None and (root / p).is_dir()))


def import_name(path: str, pythonpath: Sequence[str]) -> str | None:
    """The module name `path` (relative to the project) is imported as, with `pythonpath`'s folders first on
    sys.path: `src/click/core.py` with ("src",) is `click.core`; None when no folder holds it, or it is not a .py
    file whose parts are identifiers."""
    pure = PurePosixPath(path)
    if pure.suffix != ".py":
        return None
    for folder in pythonpath:
        base = PurePosixPath(folder)
        if str(base) != "." and not pure.is_relative_to(base):
            continue
        parts = list((pure if str(base) == "." else pure.relative_to(base)).with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(part.isidentifier() for part in parts):
            return ".".join(parts)
    return None


def unwalled() -> str | None:
    """Why a repository's own code (its conftest.py, its package) must not run here unasked, or None when the
    project sandbox has its filesystem wall (Landlock). Without it (macOS, Linux before 5.13) that code would run
    with your files and keys in reach, however else the sandbox limits it."""
    available, detail = boundary.probe().get("landlock", (False, "no Landlock"))
    return None if available else f"the sandbox has no filesystem wall here ({detail})"


def module_home(
    file: Path, qualname: str, texts: Mapping[int, str], python: str | Path | None = None
) -> ModuleHome | None:
    """The home of `file`'s stub `qualname`: the git work tree around it, its interpreter (`python`, else the
    repo's .venv or venv, else the active virtualenv, else assist's) and its import name. None where candidates
    cannot run in it: outside a git work tree, or one that is the home folder or / (the copy would be all of
    it), a file git ignores (the copy holds what git shows), a file that cannot be imported by name, or where the
    sandbox has no filesystem wall (:func:`unwalled`: the repo's conftest.py and package would run as you)."""
    if unwalled() is not None:
        return None
    file = Path(os.path.realpath(file))
    root = Path(os.path.realpath(enclosing_root(file)))
    if too_wide(root) or not file.is_relative_to(root):
        return None
    include = git_files(root)
    if include is None:
        return None
    relative = file.relative_to(root).as_posix()
    if relative not in include:  # git ignores it: the copy would not hold the folder it sits in
        return None
    pythonpath = search_path(root, relative)
    module = import_name(relative, pythonpath)
    if module is None:
        return None
    try:
        interpreter = project_python(root, python)
    except UsageError:
        return None
    return ModuleHome(root, relative, module, qualname, interpreter, pythonpath, include, dict(texts))
