"""The plain git pre-commit hook in write mode, run by a real `git commit` (issue 26, item 7). No model is
loaded: a file the hook will not write is turned away before any generation."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
