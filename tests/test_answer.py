"""One road for a request: `Request.resolve` reads the file, finds the stub and plans the repo's tests once, and
`Pipeline.answer` generates, runs the repo's tests, ranks by the given tests, repairs and picks what may be written.

The backend is the conftest's scripted one; the repo's tests run for real in the project sandbox (pytest in a
Landlock-bound copy of a real git repo)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from assistant.errors import UsageError
from assistant.pipeline import GenerationOptions
from assistant.pipeline.pipeline import Answer, Request
from assistant.ui.session import Session

from .conftest import ScriptedBackend, enter_repo, pipeline_for
from .helpers_geo import RIGHT, SQUARE_MODULE, WRONG

TESTS = "from geo import square\n\n\ndef test_square():\n    assert square(3) == 9\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repo with a stub (geo.square) and one test of it."""
    return enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": TESTS})


def test_answer_runs_the_repos_tests_ranks_the_passing_candidate_first_and_picks_it(project: Path) -> None:
    request = Request.resolve(file=project / "geo.py", function="square")
    assert request.stub is not None and request.stub.qualname == "square"
    assert request.repo_tests is not None and request.repo_tests.args == ("tests/test_geo.py::test_square",)
    statuses: list[str] = []
    answer = pipeline_for(project, ScriptedBackend([WRONG, RIGHT]), n=2, repair=2).answer(
        request, status=statuses.append
    )
    assert isinstance(answer, Answer)
    first = answer.result.candidates[0]
    assert "x * x" in first.candidate.code and first.scores["repo-tests"].value == 1.0
    assert answer.pick.tested and answer.pick.position == 0 and answer.pick.passed == 1
    assert answer.repaired is not None and answer.repaired.stopped == "already passed"
    said = "Running the repo's tests on each candidate (found 1 test that fails with the stub raising: pytest"
    assert any(line.startswith(said) for line in statuses)
    data = answer.to_json({"applied": False})
    assert data["repo_tests"]["args"] == ["tests/test_geo.py::test_square"] and data["repo_tests_skipped"] is None
    assert data["repo_tests"]["picked"] is True  # by the run on the stub raising
    keys = list(data)
    assert keys[keys.index("source") + 1] == "applied"  # the door's keys where `generate --json` has them
    assert keys[-4:] == ["repo_tests", "repo_tests_skipped", "tests_not_run", "repair"]
    assert [shown["repair_round"] for shown in data["candidates"]] == [None, None]


def test_answer_ranks_by_the_given_tests_and_picks_none_when_every_candidate_fails(tmp_path: Path) -> None:
    backend = ScriptedBackend(["def add(a, b):\n    return a - b\n"])
    request = Request.resolve("add two numbers", tests=["assert add(1, 2) == 3"], root=tmp_path)
    answer = pipeline_for(tmp_path, backend, n=1, repair=0).answer(request)
    assert answer.result.rankers == ["first", "exec"]  # the tests ran on every candidate, though `first` orders
    assert answer.pick.tested and answer.pick.position is None
    assert answer.repaired is None and answer.source is None and answer.repo_tests is None
    assert set(answer.to_json()) >= {"candidates", "source", "repo_tests", "repo_tests_skipped", "repair"}


def test_resolve_refuses_settings_that_do_not_go_together_naming_the_setting(tmp_path: Path) -> None:
    stub = tmp_path / "geo.py"
    stub.write_text(SQUARE_MODULE, encoding="utf-8")
    for kwargs, setting in [
        ({"function": "square", "start": tmp_path}, "function:no_repo"),  # looked for: tmp_path is in no repo
        ({"replace": ("square",)}, "replace"),
        ({"file": stub, "function": "square", "replace": ("square",)}, "replace+function"),
        ({"test_cmd": "pytest"}, "test_cmd"),
        ({"python": "/usr/bin/python3"}, "python"),
        ({"file": stub, "function": "square", "python": tmp_path / "nope"}, "python:missing"),
        ({"file": stub, "function": "square", "test_cmd": "pytest", "repo_tests": False}, "test_cmd+repo_tests"),
    ]:
        with pytest.raises(UsageError) as caught:
            Request.resolve("", **kwargs)
        assert caught.value.setting == setting and "--" not in str(caught.value), kwargs
    # Outside a git work tree the repo's tests are skipped with the reason, unless a test command asked for them.
    request = Request.resolve(file=stub, function="square")
    assert request.repo_tests is None and "not a git work tree" in str(request.repo_tests_skipped)
    with pytest.raises(UsageError, match="not a git work tree"):
        Request.resolve(file=stub, function="square", test_cmd="pytest")


def test_the_repos_tests_keep_their_place_when_more_rankers_score_the_candidates(project: Path) -> None:
    # Given tests with a ranker that does not run them: exec is added after the repo's tests, which are no
    # registered ranker (this was "unknown ranker 'repo-tests'" after the sampling).
    resolved = Request.resolve(file=project / "geo.py", function="square")
    request = replace(resolved, tests=("assert square(3) == 9",))
    answer = pipeline_for(project, ScriptedBackend([WRONG, RIGHT]), n=2).answer(request)
    assert answer.result.rankers == ["repo-tests", "first", "exec"]
    assert "x * x" in answer.result.candidates[0].candidate.code and answer.pick.position == 0
    # The TUI's re-ranking (after its settings change) keeps them first too, rather than sorting by `first` alone.
    session = Session(
        project, options=GenerationOptions(n=2, k=0, ranker="first"), backend=ScriptedBackend([WRONG, RIGHT])
    )
    assert "x * x" in session.generate("", target="geo.py", function="square").candidates[0].candidate.code
    reranked = session.rerank()
    assert reranked.rankers[0] == "repo-tests" and "x * x" in reranked.candidates[0].candidate.code
