"""The plain git pre-commit hook in write mode, run by a real `git commit` (issue 26, item 7). No model is
loaded: a file the hook will not write is turned away before any generation."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import git
from .test_docstrings import _run


def _commit(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "work"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_writing_hook_blocks_a_commit_of_a_partially_staged_file_and_says_why(scratch_repo: Path) -> None:
    assert _run(["hook", "install"], scratch_repo).exit_code == 0
    path = scratch_repo / "part.py"
    path.write_text("def f():\n    return 1\n")
    git(scratch_repo, "add", "part.py")
    path.write_text(path.read_text() + "\n# not staged yet\n")
    head = git(scratch_repo, "rev-parse", "HEAD")
    commit = _commit(scratch_repo)
    output = commit.stdout + commit.stderr
    assert commit.returncode != 0, output
    assert "part.py: skipped, 1 definition(s) left without a docstring: it also has unstaged changes" in output
    assert git(scratch_repo, "rev-parse", "HEAD") == head  # nothing was committed
    assert path.read_text() == "def f():\n    return 1\n\n# not staged yet\n"


def test_the_hook_runs_assists_own_code_not_a_package_of_the_same_name_in_the_repo(scratch_repo: Path) -> None:
    # Git runs hooks from the top of the work tree, and `python -m` would put that folder first on sys.path.
    assert _run(["hook", "install"], scratch_repo).exit_code == 0
    (scratch_repo / "assistant").mkdir()
    (scratch_repo / "assistant" / "__init__.py").write_text(
        "import pathlib\npathlib.Path(__file__).parent.parent.joinpath('ran').write_text('repo code ran')\n"
    )
    (scratch_repo / "done.py").write_text('def f():\n    """One."""\n    return 1\n')
    git(scratch_repo, "add", "done.py")
    commit = _commit(scratch_repo)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert not (scratch_repo / "ran").exists()


def test_the_doctor_says_when_a_hook_an_older_assist_wrote_should_be_rewritten(scratch_repo: Path) -> None:
    from assistant.code.git import hook_path
    from assistant.ui import doctor

    assert doctor.hook_checks(scratch_repo) == []  # no hook: nothing to say
    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0
    (check,) = doctor.hook_checks(scratch_repo / "text")
    assert check.ok is True
    path = hook_path(scratch_repo)
    path.write_text(path.read_text().replace(" -P -m assistant ", " -m assistant "))  # what an older assist wrote
    (check,) = doctor.hook_checks(scratch_repo)
    assert check.ok is None and "older assist" in check.detail
    assert check.fix == "assist hook install --check-only (rewrites it)"
    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0
    assert doctor.hook_checks(scratch_repo)[0].ok is True


def _stage_broken(repo: Path, kind: str) -> str:
    """Stage one file the hook cannot read as Python, of `kind`; the name it is reported under."""
    if kind == "does not parse":
        (repo / "broken.py").write_text("def broken(:\n")
        git(repo, "add", "broken.py")
        return "broken.py"
    if kind == "symlink out of the repo":
        outside = repo.parent / "outside.py"
        outside.write_text("def f():\n    return 1\n")
        (repo / "link.py").symlink_to(outside)
        git(repo, "add", "link.py")
        return "link.py"
    with open(os.path.join(bytes(repo), b"caf\xe9.py"), "wb") as file:  # a file name that is not UTF-8
        file.write(b"def f():\n    return 1\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True, capture_output=True)
    return "caf"


@pytest.mark.parametrize("kind", ["does not parse", "symlink out of the repo", "name not UTF-8"])
def test_the_writing_hook_fails_on_a_staged_file_it_cannot_read_and_names_it(scratch_repo: Path, kind: str) -> None:
    # Issue 67, item 6: these passed with "every function, method and class has a docstring", exit 0, while
    # the checking hook failed on each.
    assert _run(["hook", "install"], scratch_repo).exit_code == 0
    name = _stage_broken(scratch_repo, kind)
    head = git(scratch_repo, "rev-parse", "HEAD")
    commit = _commit(scratch_repo)
    output = commit.stdout + commit.stderr
    assert commit.returncode != 0, output
    assert name in output and "skipped" in output and "1 file(s) not documented" in output
    assert "every function, method and class has a docstring" not in output
    assert git(scratch_repo, "rev-parse", "HEAD") == head  # nothing was committed


def test_docstring_write_fails_on_a_file_that_does_not_parse(scratch_repo: Path) -> None:
    (scratch_repo / "broken.py").write_text("def broken(:\n")
    (scratch_repo / "fine.py").write_text('def f():\n    """Documented."""\n')
    result = _run(["docstring", "--write", "fine.py", "broken.py"], scratch_repo)
    assert result.exit_code == 1, result.output
    assert "broken.py does not parse (line 1: invalid syntax), skipped" in result.output
    assert "every function, method and class has a docstring" not in result.output
    assert (scratch_repo / "broken.py").read_text() == "def broken(:\n"
