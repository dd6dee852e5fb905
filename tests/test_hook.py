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
    assert "part.py: skipped, 1 definition left without a docstring: it also has unstaged changes" in output
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


def test_the_doctor_says_when_the_hook_leaves_a_kept_hook_unused(scratch_repo: Path) -> None:
    from assistant.code.git import KEPT, hook_path
    from assistant.ui import doctor

    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0
    path = hook_path(scratch_repo)
    path.with_name(KEPT).write_text("#!/bin/sh\nexit 0\n")  # kept aside by an older assist, which did not run it
    path.write_text("".join(line for line in path.read_text().splitlines(True) if KEPT not in line))
    (check,) = doctor.hook_checks(scratch_repo)
    assert check.ok is None and f"does not run the hook it replaced, {KEPT}" in check.detail
    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0  # rewritten: runs it first
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
    assert name in output and "skipped" in output and "1 file not documented" in output
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


# -- install --force keeps the user's hook, the installed hook runs it, uninstall puts it back (issue: hook) ------


def _hooks(repo: Path) -> Path:
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    return hooks


def test_install_force_says_where_the_users_hook_went_and_uninstall_puts_it_back(scratch_repo: Path) -> None:
    hook = _hooks(scratch_repo) / "pre-commit"
    hook.write_text("#!/bin/sh\necho mine\n")
    hook.chmod(0o750)
    result = _run(["hook", "install", "--force"], scratch_repo)
    assert result.exit_code == 0, result.output
    kept = hook.with_name("pre-commit.before-assist")
    assert f"moved your previous hook to {kept}" in result.output
    assert kept.read_text() == "#!/bin/sh\necho mine\n"
    result = _run(["hook", "uninstall"], scratch_repo)
    assert result.exit_code == 0, result.output
    assert f"removed assist's hook and put your previous one back at {hook}" in result.output
    assert hook.read_text() == "#!/bin/sh\necho mine\n" and hook.stat().st_mode & 0o777 == 0o750
    assert not kept.exists()


def test_a_second_forced_install_keeps_the_newest_hook_for_uninstall_and_the_older_one_too(
    scratch_repo: Path,
) -> None:
    # The weird state: a hook kept by an earlier install, and the user's new hook where assist's was.
    hooks = _hooks(scratch_repo)
    (hooks / "pre-commit").write_text("#!/bin/sh\necho first\n")
    assert _run(["hook", "install", "--force"], scratch_repo).exit_code == 0
    (hooks / "pre-commit").write_text("#!/bin/sh\necho second\n")  # the user replaced assist's hook
    result = _run(["hook", "install", "--force"], scratch_repo)
    assert result.exit_code == 0, result.output
    assert (hooks / "pre-commit.before-assist").read_text() == "#!/bin/sh\necho second\n"
    assert (hooks / "pre-commit.before-assist-2").read_text() == "#!/bin/sh\necho first\n"
    assert _run(["hook", "uninstall"], scratch_repo).exit_code == 0
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\necho second\n"
    assert (hooks / "pre-commit.before-assist-2").read_text() == "#!/bin/sh\necho first\n"
    # Now the user's hook is back, a kept hook is never put over it.
    (hooks / "pre-commit.before-assist").write_text("#!/bin/sh\necho stale\n")
    result = _run(["hook", "uninstall"], scratch_repo)
    assert result.exit_code == 2 and "was not written by assist; leaving it alone" in result.output
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\necho second\n"
    assert (hooks / "pre-commit.before-assist").read_text() == "#!/bin/sh\necho stale\n"


def test_a_symlinked_hook_replaced_with_force_is_kept_as_a_link_and_put_back(
    scratch_repo: Path, tmp_path: Path
) -> None:
    hook = _hooks(scratch_repo) / "pre-commit"
    dotfiles = tmp_path / "dotfiles-pre-commit"
    dotfiles.write_text("#!/bin/sh\necho shared\n")
    hook.symlink_to(dotfiles)
    assert _run(["hook", "install", "--force"], scratch_repo).exit_code == 0
    kept = hook.with_name("pre-commit.before-assist")
    assert kept.is_symlink() and kept.readlink() == dotfiles
    assert not hook.is_symlink() and dotfiles.read_text() == "#!/bin/sh\necho shared\n"
    assert _run(["hook", "uninstall"], scratch_repo).exit_code == 0
    assert hook.is_symlink() and hook.readlink() == dotfiles and not kept.exists()


def test_the_installed_hook_runs_the_users_previous_hook_first_and_fails_when_it_fails(
    scratch_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The --check-only hook, so no model is loaded; the lines that run the previous hook are the same in both.
    hook = _hooks(scratch_repo) / "pre-commit"
    hook.write_text('#!/bin/sh\necho ran >> "$(git rev-parse --git-dir)/ran"\nexit "$(cat "$PREVIOUS_EXIT")"\n')
    hook.chmod(0o755)
    status = scratch_repo.parent / "exit-status"
    status.write_text("0")
    monkeypatch.setenv("PREVIOUS_EXIT", str(status))  # git passes it on to the hooks
    result = _run(["hook", "install", "--check-only", "--force"], scratch_repo)
    assert result.exit_code == 0 and "assist's hook runs it first" in result.output, result.output
    ran = scratch_repo / ".git" / "ran"
    (scratch_repo / "done.py").write_text('def f():\n    """One."""\n    return 1\n')
    git(scratch_repo, "add", "done.py")
    commit = _commit(scratch_repo)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert ran.read_text() == "ran\n"
    status.write_text("3")  # the user's checks fail: so does the commit, before assist's check runs
    (scratch_repo / "bare.py").write_text("def g():\n    return 1\n")
    git(scratch_repo, "add", "bare.py")
    head = git(scratch_repo, "rev-parse", "HEAD")
    commit = _commit(scratch_repo)
    assert commit.returncode != 0 and "has no docstring" not in commit.stdout + commit.stderr
    assert ran.read_text() == "ran\nran\n" and git(scratch_repo, "rev-parse", "HEAD") == head
    status.write_text("0")  # the user's checks pass: assist's check still fails the undocumented function
    commit = _commit(scratch_repo)
    assert commit.returncode != 0 and "bare.py:1: function g has no docstring" in commit.stdout + commit.stderr
    hook.with_name("pre-commit.before-assist").chmod(0o644)  # not executable: git would not run it either
    (scratch_repo / "bare.py").write_text('def g():\n    """Two."""\n    return 1\n')
    git(scratch_repo, "add", "bare.py")
    commit = _commit(scratch_repo)
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert ran.read_text() == "ran\nran\nran\n"


def test_the_check_only_hook_says_it_only_checks(scratch_repo: Path) -> None:
    from assistant.code.git import MARKER, hook_path

    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0
    header = hook_path(scratch_repo).read_text().splitlines()[1]
    assert header.startswith(MARKER) and "checks" in header and "documents" not in header
    assert _run(["hook", "install"], scratch_repo).exit_code == 0
    header = hook_path(scratch_repo).read_text().splitlines()[1]
    assert header.startswith(MARKER) and "writes" in header and "--check" not in header  # `assist doctor` reads it


def test_uninstall_with_no_assist_hook_is_a_quiet_no_op_and_a_foreign_hook_is_still_refused(
    scratch_repo: Path,
) -> None:
    from assistant.code.git import hook_path

    path = hook_path(scratch_repo)
    assert _run(["hook", "install"], scratch_repo).exit_code == 0
    assert _run(["hook", "uninstall"], scratch_repo).exit_code == 0
    result = _run(["hook", "uninstall"], scratch_repo)
    assert result.exit_code == 0, result.output
    assert result.output == f"no assist hook installed at {path}; nothing to do\n"
    path.write_text("#!/bin/sh\necho mine\n")
    result = _run(["hook", "uninstall"], scratch_repo)
    assert result.exit_code == 2 and f"{path} was not written by assist; leaving it alone" in result.output
    assert path.read_text() == "#!/bin/sh\necho mine\n"


def test_the_hook_leaves_staged_test_files_alone_unless_asked(
    scratch_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first commit of a module with its tests had the hook write "Test that the perimeter of a square is 8."
    # above `test_perimeter`, and a summary of the function under test above `test_bounding_box`.
    assert _run(["hook", "install", "--check-only"], scratch_repo).exit_code == 0
    (scratch_repo / "tests").mkdir()
    (scratch_repo / "area.py").write_text("def area(w, h):\n    return w * h\n")
    (scratch_repo / "tests" / "test_area.py").write_text("def test_area():\n    assert area(2, 3) == 6\n")
    (scratch_repo / "tests" / "conftest.py").write_text("def helper():\n    return 1\n")
    git(scratch_repo, "add", "area.py", "tests")
    commit = _commit(scratch_repo)
    output = commit.stdout + commit.stderr
    assert commit.returncode == 1, output
    assert "area.py:1: function area has no docstring" in output and "test_area has" not in output
    assert "left 2 test files alone (tests/conftest.py, tests/test_area.py)" in output
    monkeypatch.setenv("ASSIST_DOCSTRING_TESTS", "1")
    output = _commit(scratch_repo).stderr
    assert "3 definitions in 3 files lack a docstring" in output and "left" not in output
    monkeypatch.delenv("ASSIST_DOCSTRING_TESTS")
    named = _run(["docstring", "--check", "tests/test_area.py"], scratch_repo)  # a file named is always read
    assert named.exit_code == 1 and "function test_area has no docstring" in named.output


def test_the_pre_commit_frameworks_hooks_leave_out_the_test_files_the_plain_hook_leaves_out() -> None:
    import re

    from assistant.code.docstrings import is_test_file

    text = (Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    excludes = re.findall(r"^  exclude: '([^']+)'", text, re.MULTILINE)
    assert len(excludes) == text.count("- id: ") == 2
    names = ["tests/test_a.py", "a_test.py", "pkg/conftest.py", "src/x.py", "testing.py", "contest.py", "tests/util.py"]
    for pattern in excludes:
        assert [bool(re.search(pattern, name)) for name in names] == [is_test_file(name) for name in names]
