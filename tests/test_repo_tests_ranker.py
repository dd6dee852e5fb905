"""The repo's own tests are a ranker of the registry (`repo-tests`): built by name, fed by the Problem (the tests
planned for the stub and each candidate's edited file), and run on the one ranking road (`Pipeline.rank`), leading
the other rankers; a person never names it.

The backend is the conftest's scripted one; the repo's tests run for real in the project sandbox (pytest in a
Landlock-bound copy of a real git repo)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.backends.prompts import Prompt
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem, RepoTestsRanker
from assistant.errors import UsageError
from assistant.pipeline import GenerationOptions
from assistant.pipeline.pipeline import Request
from assistant.pipeline.registry import (
    RANKER_CHOICES,
    RANKERS,
    available_rankers,
    check_rankers,
    make_rankers,
    parse_rankers,
    resolve_rankers,
)
from assistant.ui.cli import app

from .conftest import ScriptedBackend, enter_repo, pipeline_for
from .helpers_geo import SQUARE_MODULE

TESTS = """from geo import square


def test_square_of_three():
    assert square(3) == 9


def test_square_of_two():
    assert square(2) == 4


def test_square_of_zero():
    assert square(0) == 0
"""
RIGHT = "def square(x: float) -> float:\n    return x * x\n"  # passes 3 of 3
DOUBLE = "def square(x: float) -> float:\n    return x + x\n"  # passes 2 of 3 (two and zero)
ZERO = "def square(x: float) -> float:\n    return 0\n"  # passes 1 of 3 (zero)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repo with a stub (geo.square) and three tests of it."""
    return enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": TESTS})


def test_the_registry_builds_the_repo_tests_ranker_and_leads_with_it_where_they_are_planned() -> None:
    assert isinstance(RANKERS["repo-tests"](None), RepoTestsRanker)
    assert [ranker.name for ranker in make_rankers("repo-tests+first", None)] == ["repo-tests", "first"]
    backend = ScriptedBackend(scores=False)
    plain = [Candidate("x = 1", 0, 1)]
    assert resolve_rankers("first", backend, plain, has_tests=False) == "first"
    assert resolve_rankers("first", backend, plain, has_tests=False, repo_tests=True) == "repo-tests+first"
    # Named already (a result the repo's tests ranked, ranked again): still once, still first.
    assert resolve_rankers("first+repo-tests", backend, plain, has_tests=True, repo_tests=True) == "repo-tests+first"
    active = resolve_rankers("first", backend, plain, has_tests=True, repo_tests=True)
    shown = available_rankers(active, backend, plain, has_tests=True)
    assert shown[:2] == ["repo-tests", "first"] and shown.count("repo-tests") == 1
    assert "repo-tests" not in available_rankers("first", backend, plain, has_tests=True)


def test_ranking_runs_the_repos_tests_on_each_edit_and_puts_them_first(project: Path) -> None:
    request = Request.resolve(file=project / "geo.py", function="square")
    plan = request.repo_tests
    assert plan is not None and len(plan.args) == 3
    pipeline = pipeline_for(project, ScriptedBackend([DOUBLE, ZERO, RIGHT]), n=3)
    result = pipeline.generate(request)
    assert result.rankers == ["first"] and [item.candidate.sample for item in result.candidates] == [0, 1, 2]
    heard: list[tuple[str, int, int]] = []
    ranked = pipeline.rank(result, spec="first", repo_tests=plan, progress=lambda *step: heard.append(step))
    # The order, scores and `why`s the old step (`repo_tests.test_candidates`) gave: share of tests passed first.
    assert ranked.rankers == ["repo-tests", "first"]
    assert [item.candidate.sample for item in ranked.candidates] == [2, 0, 1]
    scores = [item.scores["repo-tests"] for item in ranked.candidates]
    assert [round(score.value, 3) for score in scores] == [1.0, 0.667, 0.333]
    assert re.fullmatch(r"3/3 passed in \d+\.\d s", scores[0].why), scores[0].why
    assert re.fullmatch(r"2/3 passed in \d+\.\d s", scores[1].why), scores[1].why
    assert scores[1].details["failed"] == ["tests/test_geo.py::test_square_of_three"]
    assert "assert 6 == 9" in scores[1].details["failure"] and "failure" not in scores[0].details
    assert all(list(item.scores) == ["repo-tests", "first"] for item in ranked.candidates)  # the leader reads first
    # Each edit moved with its candidate; the progress is the repo tests' own stage, one step per candidate.
    assert [edit.new.count("x * x") for edit in ranked.edits if edit is not None] == [1, 0, 0]
    assert heard == [("repo tests", done, 3) for done in range(4)]
    # The registry's object, given the same Problem, scores the same; identical files run once.
    edits = {item.candidate.sample: edit for item, edit in zip(result.candidates, result.edits, strict=True)}
    twice = [result.candidates[2].candidate, Candidate(RIGHT, 7, 1)]
    problem = Problem(result.requirement, result.prompt, repo_tests=plan, edits={2: edits[2], 7: edits[2]})
    direct = RANKERS["repo-tests"](None).score(problem, twice)
    assert direct[0] is direct[1] and direct[0].value == 1.0
    # Ranked again (the TUI after a settings change): scored already, so nothing runs, and they still lead.
    heard.clear()
    again = pipeline.rank(ranked, spec="first", repo_tests=plan, every_ranker=True, progress=lambda *s: heard.append(s))
    assert again.rankers[0] == "repo-tests" and [item.candidate.sample for item in again.candidates] == [2, 0, 1]
    assert not [stage for stage in heard if stage[0] == "repo tests"]


def test_answer_ranks_and_repairs_with_the_repo_tests_ranker(project: Path) -> None:
    request = Request.resolve(file=project / "geo.py", function="square")
    answer = pipeline_for(project, ScriptedBackend([DOUBLE, RIGHT]), n=1, repair=1).answer(request)
    assert answer.repaired is not None and answer.repaired.stopped == "passed"
    assert answer.result.rankers == ["repo-tests", "first"]
    best = answer.result.candidates[0]
    assert "x * x" in best.candidate.code and list(best.scores) == ["repo-tests", "first"]
    assert best.scores["repo-tests"].value == 1.0 and answer.repaired.origin == {best.candidate.sample: 1}
    assert answer.pick.position == 0 and answer.pick.passed == 1
    # Their runs are timed with the rest: on the stub as the request was resolved, then on the candidates.
    timings = answer.to_json()["timings_s"]
    assert {"find tests", "generate", "repo tests"} <= set(timings), timings
    assert timings["find tests"] == round(request.repo_tests.took_s, 3) > 0 and timings["repo tests"] > 0


def test_the_repo_tests_are_not_chosen_by_name(
    scripted_backend: ScriptedBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert "repo-tests" not in RANKER_CHOICES
    for spec in ("repo-tests", "first+repo-tests"):
        with pytest.raises(UsageError, match="the repo-tests ranker is not chosen by name") as caught:
            check_rankers(spec)
        assert "--" not in str(caught.value) and "\n" not in str(caught.value)
        with pytest.raises(UsageError, match="not chosen by name"):
            GenerationOptions(ranker=spec).check()
    with pytest.raises(UsageError) as unknown:
        parse_rankers("nope")
    assert "repo-tests" not in str(unknown.value)  # the names offered are those a person may choose
    # The library's object, asked to score without a plan: one line, not a crash.
    problem = Problem("square a number", Prompt(messages=({"role": "user", "content": "square"},)))
    with pytest.raises(UsageError, match="none are planned here"):
        RepoTestsRanker().score(problem, [Candidate(RIGHT, 0, 1)])
    # The command line refuses it before any sampling, in one line, with exit status 2.
    shown = CliRunner().invoke(app, ["generate", "square a number", "--backend", "scripted", "--ranker", "repo-tests"])
    assert shown.exit_code == 2 and "not chosen by name" in shown.stderr
    assert scripted_backend.calls == 0


def test_tests_that_cannot_rank_the_stub_are_skipped_with_the_reason(
    scripted_backend: ScriptedBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run once on the stub first: a module that does not import with the interpreter (a dependency it lacks), or
    # tests that already pass without the function, would give every candidate the same verdict.
    missing = SQUARE_MODULE.replace('"""Geometry helpers."""\n', '"""Geometry helpers."""\nimport not_installed_dep\n')
    broken = enter_repo(monkeypatch, tmp_path / "broken", {"geo.py": missing, "tests/test_geo.py": TESTS})
    request = Request.resolve(file=broken / "geo.py", function="square")
    skipped = request.repo_tests_skipped
    assert request.repo_tests is None and skipped is not None and skipped.setting == "repo_tests:no_run"
    assert "ModuleNotFoundError: No module named 'not_installed_dep'" in str(skipped)
    with pytest.raises(UsageError, match="do not run with"):  # asked for by a test command: the answer is the error
        Request.resolve(file=broken / "geo.py", function="square", test_cmd="pytest tests/test_geo.py")
    scripted_backend.script([RIGHT])
    shown = CliRunner().invoke(app, ["generate", "--function", "square", "--backend", "scripted", "--ranker", "first"])
    said = " ".join(shown.stdout.split())
    assert "Repo tests: skipped: the repo's tests do not run with" in said, shown.output
    assert "(ModuleNotFoundError: No module named 'not_installed_dep'); give --python" in said

    # A stub called as its module imports fails the import itself; a candidate would not: its tests stay.
    called = SQUARE_MODULE.replace("    ...\n", "    raise NotImplementedError\n") + "\n\nNINE = square(3)\n"
    early = enter_repo(monkeypatch, tmp_path / "early", {"geo.py": called, "tests/test_geo.py": TESTS})
    request = Request.resolve(file=early / "geo.py", function="square")
    assert request.repo_tests is not None and request.repo_tests_skipped is None

    idle = "from geo import square\n\n\ndef test_square_is_there():\n    assert callable(square)\n"
    idle_repo = enter_repo(monkeypatch, tmp_path / "idle", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": idle})
    request = Request.resolve(file=idle_repo / "geo.py", function="square")
    assert request.repo_tests is None
    said = "the 1 test that reaches square does not check it: it does not fail with it raising"
    assert str(request.repo_tests_skipped) == said


def test_a_candidate_is_not_said_to_fail_tests_that_never_ran_on_it(project: Path) -> None:
    from assistant.core.rank import Ranked, Score, may_write, not_run

    ran = Score(0.5, "1/2 passed", {"status": "failed"})
    idle = Score(0.0, "error: 0/0 passed", {"status": "error", "not_run": "ModuleNotFoundError: No module named 'x'"})
    both = [Ranked(Candidate(RIGHT, 0, 1), {"repo-tests": idle}), Ranked(Candidate(DOUBLE, 1, 1), {"repo-tests": idle})]
    assert not_run(both) == "ModuleNotFoundError: No module named 'x'"
    pick = may_write(both, tested=True)
    assert pick.refused and pick.position is None and pick.not_run == not_run(both)
    one_ran = [both[0], Ranked(Candidate(DOUBLE, 1, 1), {"repo-tests": ran})]
    assert not_run(one_ran) is None and may_write(one_ran, tested=True).not_run is None
    assert not_run([Ranked(Candidate(RIGHT, 0, 1), {"first": Score(0.0, "")})]) is None  # no verdict: not "not run"


def test_the_run_on_the_stub_refuses_what_no_candidate_could_change(tmp_path: Path, monkeypatch) -> None:
    from assistant.core.repo_tests import _refuse_unrun
    from assistant.sandbox.project import ProjectRun

    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": TESTS})
    with pytest.raises(UsageError, match=r"pytest ran no test of the test command \(tests/test_geo.py -k nomatch"):
        Request.resolve(file=repo / "geo.py", function="square", test_cmd="pytest tests/test_geo.py -k nomatch")
    plan = Request.resolve(file=repo / "geo.py", function="square").repo_tests
    assert plan is not None
    bare = ProjectRun("error", {}, {}, 1, 0.1, "/usr/bin/python3: No module named pytest\n")  # no pytest there
    with pytest.raises(UsageError, match=r"do not run with .* No module named pytest") as caught:
        _refuse_unrun(plan, bare)
    assert caught.value.setting == "repo_tests:no_run"
    # An error the stub itself may cause as its module imports is no reason: a candidate would not repeat it.
    _refuse_unrun(plan, ProjectRun("error", {}, {}, 2, 0.1, "E   TypeError: 'NoneType' object is not callable\n"))

    skipping = (
        "import pytest\nfrom geo import square\n\n\n@pytest.mark.skip\ndef test_nine():\n    assert square(3) == 9\n"
    )
    gated = enter_repo(monkeypatch, tmp_path / "gated", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": skipping})
    request = Request.resolve(file=gated / "geo.py", function="square")
    assert request.repo_tests is None and "is skipped here" in str(request.repo_tests_skipped)
    # Of the tests that reach the stub, only those that fail with it raising, having run it, are kept.
    mixed = "import pytest\nfrom geo import square\n\n\ndef test_there():\n    assert callable(square)\n\n\n"
    mixed += "@pytest.mark.xfail(strict=False)\ndef test_known():\n    assert square(3) == 10\n\n\n"
    mixed += "def test_nine():\n    assert square(3) == 9\n"
    both = enter_repo(monkeypatch, tmp_path / "mixed", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": mixed})
    assert Request.resolve(file=both / "geo.py", function="square").repo_tests.args == ("tests/test_geo.py::test_nine",)


@pytest.mark.parametrize("picked", [True, False], ids=["the run that picks", "the run on the file as it is"])
def test_the_run_on_the_stub_stops_at_once_when_its_progress_cancels(tmp_path: Path, monkeypatch, picked) -> None:
    # The TUI's Escape while a slow suite runs on the stub: the progress callback raises, the run's processes end.
    import time

    from assistant.core.repo_tests import repo_tests
    from assistant.core.stubs import find_stub
    from assistant.errors import Cancelled

    slow = "import time\nfrom geo import square\n\n\ndef test_slow():\n    time.sleep(30)\n    assert square(3) == 9\n"
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": slow})
    started = time.monotonic()

    def progress(stage: str, done: int, total: int) -> None:
        assert stage == ("find tests" if picked else "repo tests")
        if time.monotonic() - started > 1.0:
            raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        stub = find_stub(SQUARE_MODULE, "square") if picked else None
        repo_tests(repo, "geo.py", "square", baseline=SQUARE_MODULE, stub=stub, progress=progress)
    assert time.monotonic() - started < 5.0  # not the test's 30 s, nor the run's 60 s limit


def test_the_tui_session_runs_the_repos_tests_with_the_interpreter_it_was_given(tmp_path: Path, monkeypatch) -> None:
    # `assist tui --python P`: the session's run on the stub, and the plan after it, use P, not the one found.
    import sys

    from assistant.core.stubs import find_stub
    from assistant.core.target import Target
    from assistant.ui.session import Session

    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": TESTS})
    link = tmp_path / "env" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(sys.executable)
    session = Session(repo, python=link)
    target = Target.read(repo / "geo.py")
    plan = session._repo_tests(target, "square", find_stub(target.text, "square", "geo.py"))
    said = str(plan.python) if plan is not None else str(session.state.repo_tests_skipped)
    assert str(link) in said  # planned with it, or refused naming it (a bare interpreter without pytest)
    with pytest.raises(UsageError) as missing:
        Session(repo, python=tmp_path / "nope")
    assert missing.value.setting == "python:missing"
