"""`agree` for a stub's candidates: their bodies call the rest of their module, so each runs merged into its file,
in a sandboxed copy of the git repo (the real project sandbox: pytest under Landlock, no network), on the tests the
model writes (scripted here) and the docstring's own examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.backends import SamplingParams
from assistant.config import load_settings
from assistant.core.agreement import AgreementRanker, module_test_file, passed_in_module
from assistant.core.home import import_name, module_home
from assistant.core.stubs import fill_stub
from assistant.pipeline import GenerationOptions, Pipeline, Request

from .conftest import ScriptedBackend, git
from .helpers_quadruple import QUADRUPLE_MODULE, SCRIPT, quadruple_repo

BOX = '''

class Box:
    def area(self):
        """The area of the box."""
        ...
'''
MODULE = QUADRUPLE_MODULE + BOX  # quadruple, and a method stub beside it


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return quadruple_repo(tmp_path, monkeypatch, MODULE)


def backend() -> ScriptedBackend:
    return ScriptedBackend(SCRIPT)


def test_import_names_follow_the_folders_put_first_on_sys_path() -> None:
    assert import_name("src/click/core.py", ("src", ".")) == "click.core"
    assert import_name("boltons/strutils.py", (".",)) == "boltons.strutils"
    assert import_name("pkg/__init__.py", (".",)) == "pkg"
    assert import_name("scripts/my-tool.py", (".",)) is None  # not importable by name
    assert import_name("README.md", (".",)) is None


def test_the_candidates_that_agree_run_in_their_module_and_rank_first(repo: Path) -> None:
    scripted = backend()
    result = fill_stub(
        "quadruple",
        scripted,
        file=repo / "pkg" / "geo.py",
        k=0,
        params=SamplingParams(n=3, seed=0),
        rankers=[AgreementRanker(scripted)],
    )
    assert result.home is not None and result.home.module == "pkg.geo" and result.home.path == "pkg/geo.py"
    # Each body calls _double, so none could run alone; in its module the two right ones agree on every test.
    assert [item.candidate.sample for item in result.candidates][:2] == [1, 2]
    top = result.candidates[0].scores["agree"]
    assert top.details["tests"][0] == "assert quadruple(3) == 12"  # the docstring's example comes first
    assert top.details["passed"] == [0, 1, 2, 3] and top.details["cluster"] == [2, 3]
    assert top.value == 2 * 4 / (3 * 4)
    wrong = result.candidates[2].scores["agree"]
    assert wrong.details["passed"] == [2]  # _double(0) == 0 is all it gets right
    # The edits still replace only the stub's body, in ranked order; the repo itself was not touched.
    assert "return _double(_double(x))" in result.edits[0].new
    assert (repo / "pkg" / "geo.py").read_text(encoding="utf-8") == MODULE
    assert not (repo / "test_assist_agree.py").exists()


def test_a_test_that_hangs_fails_alone_and_the_module_sees_its_own_names(repo: Path) -> None:
    loops = MODULE.replace('    """\n    ...\n', '    """\n    while True:\n        pass\n', 1)
    right = MODULE.replace('    """\n    ...\n', '    """\n    return _double(x) * SCALE\n', 1)
    home = module_home(repo / "pkg" / "geo.py", "quadruple", {0: loops, 1: right})
    assert home is not None
    tests = ["assert quadruple(1) == 4", "assert SCALE == 2", "assert _double(3) == 6"]
    passed = passed_in_module(home, [0, 1, 7], tests)
    # Sample 0 loops forever: its call times out, the tests that do not call it still pass; 7 has no file.
    assert passed == [frozenset({1, 2}), frozenset({0, 1, 2}), frozenset()]
    assert "def test_2():" in module_test_file("pkg.geo", tests)


def test_a_test_that_does_not_compile_fails_alone_and_a_broken_project_is_said_plainly(repo: Path) -> None:
    right = MODULE.replace('    """\n    ...\n', '    """\n    return _double(x) * SCALE\n', 1)
    home = module_home(repo / "pkg" / "geo.py", "quadruple", {0: right})
    assert home is not None
    # `await` outside an async function parses as a line but does not compile in a function: it fails alone.
    tests = ["assert await quadruple(1) == 4", "assert quadruple(2) == 8", "setup_module = 1; assert True"]
    assert passed_in_module(home, [0], tests) == [frozenset({1, 2})]
    # A project whose pytest cannot even collect (here a conftest that raises) tells every candidate apart from
    # none: the reason is given instead of "passes 0/N".
    (repo / "conftest.py").write_text("raise ImportError('broken conftest')\n", encoding="utf-8")
    git(repo, "add", "conftest.py")
    broken = module_home(repo / "pkg" / "geo.py", "quadruple", {0: right})
    assert broken is not None
    why = passed_in_module(broken, [0], tests)
    assert isinstance(why, str) and why.startswith("the project's pytest ran none of the tests")


def test_a_git_ignored_file_has_no_home(repo: Path) -> None:
    (repo / ".gitignore").write_text("scratch/\n", encoding="utf-8")
    (repo / "scratch").mkdir()
    (repo / "scratch" / "geo.py").write_text(MODULE, encoding="utf-8")
    assert module_home(repo / "scratch" / "geo.py", "quadruple", {0: MODULE}) is None


def test_auto_ranks_a_function_stub_by_agreement_and_a_method_or_loose_file_without(repo: Path, tmp_path: Path) -> None:
    scripted = backend()
    pipeline = Pipeline(GenerationOptions(k=0, n=3), load_settings(start=repo), start=repo, backend=scripted)
    result = pipeline.generate(Request(file=repo / "pkg" / "geo.py", function="quadruple"))
    assert result.rankers == ["agree", "logprob"] and result.candidates[0].candidate.sample in (1, 2)
    # When the repo's own tests will rank them (the CLI found some), the candidates are not run on the model's.
    tested = pipeline.generate(Request(file=repo / "pkg" / "geo.py", function="quadruple", run_in_module=False))
    assert tested.home is None and tested.rankers == ["logprob"]
    areas = ScriptedBackend([f"def area(self):\n    return {i}\n```\n" for i in (1, 2)])
    method = Pipeline(GenerationOptions(k=0, n=2), load_settings(start=repo), start=repo, backend=areas).generate(
        Request(file=repo / "pkg" / "geo.py", function="Box.area")
    )
    assert method.home is not None and method.home.is_method and method.rankers == ["logprob"]
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "geo.py").write_text(MODULE, encoding="utf-8")
    outside = Pipeline(GenerationOptions(k=0, n=3), load_settings(start=loose), start=loose, backend=backend())
    result = outside.generate(Request(file=loose / "geo.py", function="quadruple"))
    assert result.home is None and result.rankers == ["logprob"]  # no git work tree: nothing to copy and run in
