"""A filled stub meets the repo's own tests: found statically (or named by --test-cmd), run per candidate in the
project sandbox, ranked passing first, shown in the output, and the passing one applied.

The command runs end to end against the scripted OpenAI-compatible server (real HTTP on 127.0.0.1) and the real
project sandbox (pytest in a Landlock-bound copy of the repo)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.core.home import git_files, package_root, project_python
from assistant.core.repo_tests import find_tests, parse_test_cmd, repo_tests
from assistant.errors import UsageError
from assistant.ui.cli import app
from assistant.ui.errors import said_with_flags

from .conftest import ONE_EXAMPLE_BANK, enter_repo, git
from .helpers_geo import GEO_MODULE
from .openai_server import Script, openai_server

TESTS = """from geo import cube, square


def test_square():
    assert square(3) == 9
    assert square(-2) == 4


class TestCube:
    def test_cube(self):
        assert cube(2) == 8

    def test_both(self):
        assert square(cube(1)) == 1


def helper_not_a_test():
    return square(1)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    files = {"geo.py": GEO_MODULE, "tests/test_geo.py": TESTS, "bank.jsonl": ONE_EXAMPLE_BANK}
    files["tests/test_other.py"] = "def test_nothing():\n    assert True\n"
    return enter_repo(monkeypatch, tmp_path / "proj", files)


def test_finds_the_test_functions_that_mention_the_function(project: Path) -> None:
    assert find_tests(project, "geo.py", "square") == [
        "tests/test_geo.py::test_square",
        "tests/test_geo.py::TestCube::test_both",
    ]
    assert find_tests(project, "geo.py", "Shape.cube") == [
        "tests/test_geo.py::TestCube::test_cube",
        "tests/test_geo.py::TestCube::test_both",
    ]
    assert find_tests(project, "geo.py", "missing") == []
    assert repo_tests(project, "geo.py", "missing") is None


def test_unittest_classes_are_read_whatever_their_name(tmp_path: Path) -> None:
    # pytest collects a TestCase subclass by its base, not its name (all of cachetools' tests are such classes).
    cases = "import unittest\nfrom geo import square\n\n\nclass GeoCase(unittest.TestCase):\n"
    cases += "    def test_square(self):\n        self.assertEqual(square(2), 4)\n\n\n"
    cases += "class Helper:\n    def test_not_collected(self):\n        square(1)\n"
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_cases.py").write_text(cases)
    assert find_tests(tmp_path, "geo.py", "square") == ["tests/test_cases.py::GeoCase::test_square"]


def test_test_cmd_takes_pytest_arguments_only() -> None:
    assert parse_test_cmd("pytest tests/test_geo.py -k 'square or cube'") == (
        "tests/test_geo.py",
        "-k",
        "square or cube",
    )
    assert parse_test_cmd("python3 -m pytest -x tests") == ("-x", "tests")
    for bad, fragment in [
        ("make test", "runs pytest only, not 'make'"),
        ("pytest 'open", "not a valid command"),
        ("pytest tests && rm -rf /", "'&&' is shell"),
    ]:
        with pytest.raises(UsageError, match=fragment) as caught:
            parse_test_cmd(bad)
        assert "--" not in str(caught.value)  # the library's words; the command line's are its flags
    said = {
        "make test": "--test-cmd runs pytest only, not 'make'; e.g. --test-cmd 'pytest tests/test_util.py'",
        "pytest tests && rm -rf /": "--test-cmd is one pytest command; '&&' is shell, which is not run",
    }
    for bad, line in said.items():
        with pytest.raises(UsageError) as caught:
            parse_test_cmd(bad)
        assert str(said_with_flags(caught.value)) == line


def test_the_interpreter_is_the_repos_venv_when_it_links_out_of_the_repo(project: Path) -> None:
    (project / ".venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    assert project_python(project) == project / ".venv" / "bin" / "python"
    with pytest.raises(UsageError, match="the interpreter /nope does not exist") as caught:
        project_python(project, "/nope")
    assert str(said_with_flags(caught.value)) == "--python /nope does not exist"  # as the command line says it
    # A "python" the repo ships itself is never run unasked.
    (project / "venv" / "bin").mkdir(parents=True)
    (project / ".venv" / "bin" / "python").unlink()
    (project / "venv" / "bin" / "python").write_text("#!/bin/sh\necho pwned\n")
    (project / "venv" / "bin" / "python").chmod(0o755)
    assert project_python(project) == Path(sys.executable)
    # Nor is a venv the repo ships, though its python links to the system's: what it holds beside that link
    # (a `._pth`, pyvenv.cfg, site-packages' .pth files) steers the interpreter before the sandbox is up.
    (project / "venv" / "bin" / "python").unlink()
    (project / "venv" / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    assert project_python(project) == project / "venv" / "bin" / "python"  # the user's own (untracked) venv
    git(project, "add", "-f", "venv/bin/python")
    assert project_python(project) == Path(sys.executable)
    with pytest.raises(UsageError, match="is not an executable file"):
        project_python(project, project / "venv")


def test_the_copy_holds_what_git_shows_and_the_edited_package_comes_first(project: Path) -> None:
    (project / ".gitignore").write_text(".env\n")
    (project / ".env").write_text("TOKEN=secret\n")
    (project / "new_module.py").write_text("X = 1\n")
    listed = git_files(project)
    assert listed is not None and ".env" not in listed and "new_module.py" in listed and "geo.py" in listed
    (project / "packages" / "foo" / "src" / "foo" / "sub").mkdir(parents=True)
    for folder in ("packages/foo/src/foo", "packages/foo/src/foo/sub"):
        (project / folder / "__init__.py").write_text("")
    assert package_root(project, "packages/foo/src/foo/sub/mod.py") == "packages/foo/src"
    assert package_root(project, "geo.py") == "."
    plan = repo_tests(project, "geo.py", "square")
    assert plan is not None and plan.pythonpath == (".",) and plan.include == git_files(project)
    with pytest.raises(UsageError, match="not a git work tree"):
        repo_tests(project.parent, "proj/geo.py", "square")


WRONG = "    return x + x\n```\n"
RIGHT = "    return x * x\n```\n"


def run(args: list[str], url: str) -> object:
    common = ["--backend", "openai", "--base-url", url, "--model", "tiny-coder", "--bank", "bank.jsonl", "-k", "0"]
    common += ["--ranker", "first", "--api", "completions"]
    return CliRunner().invoke(app, [*args, *common], env={**os.environ, "OPENAI_API_KEY": "sk-test"})


def test_generate_runs_the_repos_tests_ranks_the_passing_candidate_first_and_applies_it(project: Path) -> None:
    args = ["generate", "--file", "geo.py", "--function", "square", "-n", "2"]
    with openai_server(Script(answers=[(WRONG, "stop"), (RIGHT, "stop")])) as (url, _):
        shown = run([*args, "--apply"], url)
    assert shown.exit_code == 0, shown.output
    assert "Repo tests (found 2 tests that fail with the stub raising: pytest tests/test_geo.py::test_square " in (
        shown.stdout.replace("\n", " ")
    )
    first, second = shown.stdout.index("#1"), shown.stdout.index("#2")
    assert "tests: 2/2 passed" in shown.stdout[first:second]
    assert "tests: 0/2 passed in" in shown.stdout[second:]
    assert "return x * x" in shown.stdout[first:second]
    text = (project / "geo.py").read_text(encoding="utf-8")
    assert text == GEO_MODULE.replace("    ...\n", "    return x * x\n", 1)  # only that body changed
    assert "warning" not in shown.stderr


def test_test_cmd_names_the_tests_and_json_carries_the_verdicts(project: Path) -> None:
    args = ["generate", "--file", "geo.py", "--function", "square", "-n", "1", "--json"]
    with openai_server(Script(answers=[(WRONG, "stop")])) as (url, _):
        result = run([*args, "--test-cmd", "pytest tests/test_geo.py -k test_square"], url)
        refused = run(["generate", "--file", "geo.py", "--function", "square", "-n", "1", "--apply"], url)
        unchanged = (project / "geo.py").read_text(encoding="utf-8")
        applied = run(["generate", "--file", "geo.py", "--function", "square", "-n", "1", "--apply", "--force"], url)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["repo_tests"]["args"] == ["tests/test_geo.py", "-k", "test_square"]
    assert data["repo_tests"]["picked"] is False  # as the test command names them
    verdict = data["candidates"][0]["scores"]["repo-tests"]
    assert verdict["value"] == 0.0 and verdict["why"].startswith("0/1 passed in")
    # A candidate that fails the tests is not written: exit 1, and the last line says so and how to write it anyway.
    assert refused.exit_code == 1 and unchanged == GEO_MODULE
    last = refused.stdout.rstrip().splitlines()[-1]
    assert last.startswith("Nothing written: none of the 1 candidate passed the tests") and "--force" in last
    # --force writes the best one, and the last line says it failed the tests.
    assert applied.exit_code == 0, applied.output
    assert "with --force, though no candidate passed the tests" in applied.stdout.rstrip().splitlines()[-1]
    assert (project / "geo.py").read_text(encoding="utf-8") == GEO_MODULE.replace("    ...\n", "    return x + x\n", 1)
    bad = run(["generate", "make test", "--test-cmd", "pytest"], "http://127.0.0.1:9")
    assert bad.exit_code == 2 and "--test-cmd needs --function" in bad.stderr
    both = run([*args, "--test-cmd", "pytest", "--no-repo-tests"], "http://127.0.0.1:9")
    assert both.exit_code == 2 and "give one or the other" in both.stderr


def test_outside_a_git_work_tree_the_tests_are_skipped_with_a_reason(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "loose"
    (folder / "tests").mkdir(parents=True)
    (folder / "geo.py").write_text(GEO_MODULE, encoding="utf-8")
    (folder / "tests" / "test_geo.py").write_text(TESTS, encoding="utf-8")
    (folder / "bank.jsonl").write_text(ONE_EXAMPLE_BANK)
    monkeypatch.chdir(folder)
    args = ["generate", "--file", "geo.py", "--function", "square", "-n", "1"]
    with openai_server(Script(answers=[(RIGHT, "stop")])) as (url, _):
        shown = run(args, url)
        asked = run([*args, "--test-cmd", "pytest tests"], url)
    assert shown.exit_code == 0, shown.output
    assert "Repo tests: skipped:" in shown.stdout and "not a git work tree" in shown.stdout
    assert "run only in one (or --no-repo-tests)" in shown.stdout  # the library's reason, said with the flag
    assert asked.exit_code == 2 and "not a git work tree" in asked.stderr


def test_found_tests_do_not_run_without_a_filesystem_wall(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where the kernel has no Landlock, a clone's conftest.py would run as the user: found tests are not run
    # unasked; --test-cmd (asked for) still runs.
    from assistant.core.home import module_home
    from assistant.sandbox import boundary

    monkeypatch.setattr(boundary, "probe", lambda: {"landlock": (False, "the kernel has no Landlock")})
    with pytest.raises(UsageError, match=r"no filesystem wall here \(the kernel has no Landlock\), so a clone's"):
        repo_tests(project, "geo.py", "square")
    # Nor does agree run the model's tests in the repo's copy (its conftest.py would run too).
    assert module_home(project / "geo.py", "square", {}) is None
    # generate says why, in --json too.
    with openai_server(Script(answers=[(RIGHT, "stop")])) as (url, _):
        result = run(["generate", "--file", "geo.py", "--function", "square", "-n", "1", "--json"], url)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["repo_tests"] is None and "no filesystem wall here" in data["repo_tests_skipped"]
    assert data["repo_tests_skipped"].endswith("would run as you; --test-cmd runs them anyway")  # the CLI's words
    plan = repo_tests(project, "geo.py", "square", test_cmd="pytest tests/test_geo.py")
    assert plan is not None and plan.args == ("tests/test_geo.py",) and not plan.found
