"""Repair from the test output: with tests and no candidate passing them, the model sees its best failing candidate
and the failing assertion, samples again, and a repaired candidate that passes ranks first and is what `--apply`
writes. The repo's tests that mention a stub are shown in its prompt (`generate.tests_in_prompt`).

The scripted backend stands in for the model only; the tests run for real: the repo's in the project sandbox
(pytest in a Landlock-bound copy of the repo), `--test` asserts in the exec sandbox."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from assistant.backends import Prompt
from assistant.pipeline import GenerationOptions, Pipeline, Request

from .conftest import ONE_EXAMPLE_BANK, ScriptedBackend, assist_here, commit_repo, register_scripted
from .helpers_geo import GEO_MODULE, RIGHT, WRONG


@pytest.fixture(autouse=True)
def two_repair_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the repair rounds, which are off by default (`DEFAULT_REPAIR`): the commands ask for two
    through the setting, as a user's config would; in-process pipelines say `repair=2`."""
    monkeypatch.setenv("ASSIST_GENERATE_REPAIR", "2")


TESTS = """from geo import cube, square


def test_square():
    assert square(3) == 9


class TestCube:
    def test_cube(self):
        assert cube(2) == 8

    def test_both(self):
        assert square(cube(1)) == 1
"""

REPAIR_TURN = "That code fails the tests"


def text_of(prompt: Prompt) -> str:
    return "\n".join(m["content"] for m in prompt.messages) + prompt.answer_prefix


def wrong_then_right(prompt: Prompt, number: int) -> str:
    """The first round writes x + x; a repair round (its prompt shows the failure) writes x * x."""
    return RIGHT if REPAIR_TURN in text_of(prompt) else WRONG


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    files = {"geo.py": GEO_MODULE, "tests/test_geo.py": TESTS, "bank.jsonl": ONE_EXAMPLE_BANK}
    files["tests/test_other.py"] = "def test_nothing():\n    assert True\n"
    path = commit_repo(tmp_path / "proj", files)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    return path


def fill(project: Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    common = ["--backend", "scripted", "--bank", "bank.jsonl", "-k", "0", "--ranker", "first", "--json"]
    shown = assist_here("generate", "--file", "geo.py", "--function", "square", *common, *extra, cwd=project, env=env)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return json.loads(shown.stdout)


def test_a_repair_round_sees_the_failing_assertion_and_its_passing_candidate_is_written(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = register_scripted(monkeypatch, ScriptedBackend(wrong_then_right))
    data = fill(project, "-n", "2", "--apply")
    # The first round (both samples x + x, one candidate) failed the repo's real tests; one repair round followed.
    assert len(backend.prompts) == 2
    repair_prompt = text_of(backend.prompts[1])
    assert REPAIR_TURN in repair_prompt
    assert "assert 6 == 9" in repair_prompt and "test_square" in repair_prompt  # pytest's own report, trimmed
    assert "return x + x" in repair_prompt  # the failing candidate, as the model's answer
    assert data["repair"]["first_passed"] is False and data["repair"]["passed"] is True
    assert data["repair"]["stopped"] == "passed"
    assert [(r["round"], r["candidates"], r["passes"]) for r in data["repair"]["rounds"]] == [(1, 1, 1)]
    assert data["repair"]["rounds"][0]["seconds"] > 0
    best = data["candidates"][0]
    assert "return x * x" in best["code"] and best["scores"]["repo-tests"]["value"] == 1.0
    assert [c["repair_round"] for c in data["candidates"]] == [1, None]
    assert data["applied"] is True
    assert (project / "geo.py").read_text(encoding="utf-8") == GEO_MODULE.replace("    ...\n", "    return x * x\n", 1)


def test_repair_0_runs_no_round_and_the_setting_does_the_same(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = register_scripted(monkeypatch, ScriptedBackend(wrong_then_right))
    data = fill(project, "-n", "1", "--repair", "0")
    assert len(backend.prompts) == 1 and data["repair"] is None
    assert "return x + x" in data["candidates"][0]["code"]
    fill(project, "-n", "1", env={"ASSIST_GENERATE_REPAIR": "0"})
    assert len(backend.prompts) == 2  # one more first round, no repair
    bad = assist_here("generate", "--file", "geo.py", "--function", "square", "--repair", "9", cwd=project)
    assert bad.returncode == 2 and "--repair" in bad.stderr


def test_the_verdict_points_to_repair_only_where_no_round_ran(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    register_scripted(monkeypatch, ScriptedBackend(lambda prompt, number: WRONG))  # never passes, repaired or not
    unrepaired = fill(project, "-n", "1", "--repair", "0")["verdict"]
    assert unrepaired.startswith("none of the 1 candidate passed the tests; --repair 2 has the model fix the best one")
    assert unrepaired.endswith("add --force to --apply.")
    data = fill(project, "-n", "1")  # two rounds (the fixture's setting), both failing
    assert [r["repeats"] for r in data["repair"]["rounds"]] == [1, 1]  # the same wrong sample each time
    repaired = data["verdict"]
    assert repaired.startswith("none of the ") and "(repairs included) passed the tests; to write the best" in repaired
    assert "--repair" not in repaired and repaired.endswith("add --force to --apply.")
    common = ["--backend", "scripted", "--bank", "bank.jsonl", "-k", "0", "--ranker", "first", "-n", "1"]
    shown = assist_here("generate", "--file", "geo.py", "--function", "square", *common, cwd=project)
    assert "0 new candidates (2 samples wrote an earlier candidate again), 0 passed" in shown.stdout.replace("\n", " ")


def test_tests_that_ran_on_no_candidate_get_no_repair_and_the_verdict_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The module does not import with the interpreter: the given test runs in it on no candidate, which is no fault
    # of theirs; a repair round could not pass it either, and the way out is the interpreter, not --repair.
    module = "import not_installed_dep\n" + GEO_MODULE
    project = commit_repo(tmp_path / "proj", {"geo.py": module, "bank.jsonl": ONE_EXAMPLE_BANK})
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    backend = register_scripted(monkeypatch, ScriptedBackend(lambda prompt, number: RIGHT))
    common = ["--backend", "scripted", "--bank", "bank.jsonl", "-k", "0", "--ranker", "first", "-n", "1", "--json"]
    args = ["generate", "--function", "square", "--test", "assert square(3) == 9", *common, "--apply"]
    shown = assist_here(*args, cwd=project)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    data = json.loads(shown.stdout)
    assert len(backend.prompts) == 1 and data["repair"] is None and not data["applied"]
    assert "ModuleNotFoundError: No module named 'not_installed_dep'" in data["tests_not_run"]
    assert data["verdict"].startswith("Nothing written: the tests ran on no candidate: the project's pytest ran none")
    assert "--python names the interpreter" in data["verdict"] and "--repair" not in data["verdict"]
    assert (project / "geo.py").read_text() == module


def test_a_candidate_that_breaks_its_modules_import_failed_the_tests_it_did_not_skip_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each candidate adds an import that is not installed: the module imports unfilled, so the fault is theirs:
    # they failed the test (no "ran on no candidate"), and repair rounds run.
    project = commit_repo(tmp_path / "proj", {"geo.py": GEO_MODULE, "bank.jsonl": ONE_EXAMPLE_BANK})
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    broken = "import not_installed_dep\n\n\n" + RIGHT
    register_scripted(monkeypatch, ScriptedBackend(lambda prompt, n: broken))
    common = ["--backend", "scripted", "--bank", "bank.jsonl", "-k", "0", "--ranker", "first", "-n", "1", "--json"]
    shown = assist_here("generate", "--function", "square", "--test", "assert square(3) == 9", *common, cwd=project)
    data = json.loads(shown.stdout)
    assert data["tests_not_run"] is None and data["repair"] is not None, shown.stdout + shown.stderr
    assert len(data["repair"]["rounds"]) == 2  # they ran (the same body again each time: no new candidate)
    assert data["candidates"][0]["scores"]["exec"]["why"].startswith("0/1 tests passed in its module; failed")


def test_explain_shows_each_round(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    register_scripted(monkeypatch, ScriptedBackend(wrong_then_right))
    common = ["--backend", "scripted", "--bank", "bank.jsonl", "-k", "0", "--ranker", "first", "-n", "1"]
    shown = assist_here("generate", "--file", "geo.py", "--function", "square", *common, "--explain", cwd=project)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    text = shown.stdout.replace("\n", " ")
    assert "Repair: 1 round after no candidate passed the tests, 1 new candidate, 1 passed" in text
    assert "round 1: 1 candidate, 1 passed" in text and "repaired candidates: #1 (round 1)" in text


def test_the_exec_sandbox_failure_reaches_the_repair_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong, right = "def double(x):\n    return x + 1\n", "def double(x):\n    return 2 * x\n"
    backend = register_scripted(
        monkeypatch, ScriptedBackend(lambda prompt, n: right if REPAIR_TURN in text_of(prompt) else wrong)
    )
    bank = tmp_path / "bank.jsonl"
    bank.write_text(ONE_EXAMPLE_BANK)
    args = ["generate", "double a number", "--test", "assert double(2) == 4", "--backend", "scripted"]
    shown = assist_here(*args, "--bank", bank, "-k", "0", "-n", "1", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    data = json.loads(shown.stdout)
    repair_prompt = text_of(backend.prompts[-1])
    assert "assert double(2) == 4" in repair_prompt and "AssertionError" in repair_prompt
    assert data["repair"]["stopped"] == "passed"
    assert data["candidates"][0]["code"].strip() == right.strip()
    assert data["candidates"][0]["scores"]["exec"]["value"] == 1.0


def test_the_budget_stops_the_rounds(tmp_path: Path) -> None:
    from assistant.core.repair import RepairOptions  # here: the module is new, so the other tests fail alone

    # Each sample takes at least 10 x 0.05 s: the first repair round outlasts a 0.2 s budget, so no second starts.
    backend = ScriptedBackend("def double(x):\n    return x + 1\n", delay=0.05)
    pipeline = Pipeline(GenerationOptions(k=0, n=1, ranker="exec", repair=2), backend=backend, start=tmp_path)
    request = Request("double a number", tests=["assert double(2) == 4"])
    first = pipeline.generate(request)
    assert first.candidates[0].scores["exec"].details["status"] == "failed"
    repaired = pipeline.repair(first, request, limits=RepairOptions(rounds=3, budget_s=0.2, n=1))
    assert repaired.stopped == "budget" and len(repaired.rounds) == 1
    assert len(backend.prompts) == 2
    unlimited = pipeline.repair(first, request, limits=RepairOptions(rounds=2, budget_s=60, n=1))
    assert unlimited.stopped == "rounds" and len(unlimited.rounds) == 2  # the same sample: nothing new to test
    assert [r.candidates for r in unlimited.rounds] == [0, 0]
    assert [r.repeats for r in unlimited.rounds] == [1, 1]  # counted, so the summary can say the model did not move


def test_the_repos_tests_are_in_the_stubs_prompt_unless_turned_off(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = register_scripted(monkeypatch, ScriptedBackend(RIGHT))
    fill(project, "-n", "1")
    shown = text_of(backend.prompts[0])
    assert "def test_square():\n    assert square(3) == 9" in shown
    assert "# tests/test_geo.py::TestCube::test_both\ndef test_both(self):" in shown
    assert "def test_cube(self)" not in shown and "test_nothing" not in shown  # they do not mention square
    fill(project, "-n", "1", env={"ASSIST_GENERATE_TESTS_IN_PROMPT": "false"})
    assert "test_square" not in text_of(backend.prompts[1])
    fill(project, "-n", "1", "--no-tests-in-prompt")
    assert "test_square" not in text_of(backend.prompts[2])
    fill(project, "-n", "1", "--tests-in-prompt", env={"ASSIST_GENERATE_TESTS_IN_PROMPT": "false"})
    assert "def test_square():" in text_of(backend.prompts[3])  # the flag wins over the setting
    plain = assist_here("generate", "x", "--tests-in-prompt", cwd=project)
    assert plain.returncode == 2 and "--tests-in-prompt is for filling a stub" in plain.stderr


def test_eval_repo_keeps_the_first_round_and_the_repaired_result_apart(tmp_path: Path, encoder) -> None:
    from assistant.backends import SamplingParams
    from assistant.core.repair import RepairOptions
    from assistant.evaluate.repo.projects import Project, ProjectSpec
    from assistant.evaluate.repo.run import function_table, index_project, run_function_tasks, summarize_functions
    from assistant.evaluate.repo.tasks import function_tasks
    from assistant.sandbox.project import run_pytest

    from .test_repo_bench import MODULE as BENCH_MODULE
    from .test_repo_bench import QUICK
    from .test_repo_bench import TESTS as BENCH_TESTS

    root = tmp_path / "tiny-0"  # test_repo_bench's tiny project: one task, `double`, covered by test_double
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(BENCH_MODULE)
    (root / "tests" / "test_mod.py").write_text(BENCH_TESTS)
    run = run_pytest(root, Path(sys.executable), ["tests"], trace=True)
    assert run.ok, run.output
    project = Project(ProjectSpec("tiny", "0", "", package="pkg", tests="tests"), root, Path(sys.executable),
                      sorted(run.passed()), run.calls)  # fmt: skip
    tasks = function_tasks(project)
    indexes = {"tiny": index_project(project, encoder)}
    # The first round's bodies return x + 1; a repair round, shown pytest's report, returns x * 2.
    backend = ScriptedBackend(
        lambda prompt, n: "    return x * 2\n```" if REPAIR_TURN in text_of(prompt) else "    return x + 1\n```",
        prefills_answer=True,
    )
    common = {"params": SamplingParams(n=2), "demos": 0, "limits": QUICK, "repair": RepairOptions(rounds=2, n=1)}
    (record,) = run_function_tasks(tasks, indexes, ["zero"], backend, tmp_path / "a", tests_in_prompt=True, **common)
    assert record["correct"] == 0 and record["tests_first"] is False and record["tests_repaired"] is True
    assert [(r["round"], r["candidates"], r["passes"]) for r in record["repair"]["rounds"]] == [(1, 1, 1)]
    assert record["repair_seconds"] > 0 and record["testing_seconds"] > 0
    assert "sampling_seconds" in record and "ranking_seconds" in record
    first, repair = text_of(backend.prompts[0]), text_of(backend.prompts[-1])
    assert "def test_double():\n    assert double(2) == 4" in first  # the covering test, shown on request
    assert "assert 3 == 4" in repair and "return x + 1" in repair  # pytest's report of the failing sample
    rows = summarize_functions([record], [1])
    assert rows[0]["tests_first"][0] == 0.0 and rows[0]["tests_repaired"][0] == 1.0
    assert "| zero | 0.0 [0.0, 0.0] | 100.0 [100.0, 100.0] |" in function_table(rows)
    # The leak control keeps the covering tests out of the prompt unless asked.
    before = len(backend.prompts)
    run_function_tasks(tasks, indexes, ["zero"], backend, tmp_path / "b", **common)
    assert "def test_double" not in text_of(backend.prompts[before])


def test_tests_typed_in_a_session_get_repair_rounds_shown_as_they_run(tmp_path: Path) -> None:
    from assistant.ui.session import Options, Session

    wrong, right = "def double(x):\n    return x + 1\n", "def double(x):\n    return 2 * x\n"
    backend = ScriptedBackend(lambda prompt, n: right if REPAIR_TURN in text_of(prompt) else wrong)
    session = Session(tmp_path, options=Options(n=1, k=0, ranker="exec", repair=2), backend=backend)
    stages: list[str] = []
    result = session.generate(
        "double a number", tests=["assert double(2) == 4"], progress=lambda stage, done, total: stages.append(stage)
    )
    assert [item.candidate.code.strip() for item in result.candidates] == [right.strip(), wrong.strip()]
    assert result.candidates[0].scores["exec"].details["status"] == "passed"
    assert "repair round 1 of 2: sampling again from the test output" in stages  # the TUI's status line
    assert session.state.result is result


def test_the_tests_shown_fit_their_token_budget_whole(project: Path) -> None:
    from assistant.core.spec_tests import spec_tests

    both = spec_tests(project, "geo.py", "square")
    assert both.count("# tests/test_geo.py::") == 2
    one = spec_tests(project, "geo.py", "square", budget=25)  # room for test_square (the first) alone, whole
    assert one == "# tests/test_geo.py::test_square\ndef test_square():\n    assert square(3) == 9"
    assert spec_tests(project, "geo.py", "missing") == ""
    assert spec_tests(project.parent, "proj/geo.py", "square") == ""  # not a git work tree: nothing is read


def test_a_plain_requests_candidates_are_repaired_in_their_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = commit_repo(tmp_path / "calc", {"calc.py": '"""Arithmetic."""\n\nFACTOR = 2\n'})
    # The first round's code uses the module's FACTOR wrongly; the repair round's uses it right.
    wrong, right = "def double(x):\n    return x + FACTOR\n", "def double(x):\n    return x * FACTOR\n"
    backend = register_scripted(
        monkeypatch, ScriptedBackend(lambda prompt, n: right if REPAIR_TURN in text_of(prompt) else wrong)
    )
    bank = tmp_path / "bank.jsonl"
    bank.write_text(ONE_EXAMPLE_BANK)
    args = ["generate", "double a number", "--file", "calc.py", "--test", "assert double(3) == 6", "-n", "1"]
    shown = assist_here(*args, "--backend", "scripted", "--bank", bank, "-k", "0", "--json", "--apply", cwd=root)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    data = json.loads(shown.stdout)
    assert "this test failed:\nassert double(3) == 6" in text_of(backend.prompts[-1])
    assert data["repair"]["stopped"] == "passed" and data["applied"] is True
    assert (root / "calc.py").read_text(encoding="utf-8").endswith("return x * FACTOR\n")


def test_a_failing_backend_in_a_repair_round_leaves_the_first_round_standing(tmp_path: Path) -> None:
    from assistant.errors import AssistError, Cancelled

    backend = ScriptedBackend("def double(x):\n    return x + 1\n")
    pipeline = Pipeline(GenerationOptions(k=0, n=1, ranker="exec", repair=2), backend=backend, start=tmp_path)
    request = Request("double a number", tests=["assert double(2) == 4"])
    first = pipeline.generate(request)
    backend.fail = AssistError("the server went away")
    repaired = pipeline.repair(first, request)
    assert repaired.stopped == "error: the server went away" and repaired.rounds == []
    assert [item.candidate.code for item in repaired.result.candidates] == [first.candidates[0].candidate.code]
    backend.fail = Cancelled("generate cancelled")  # Escape in the TUI still stops it
    with pytest.raises(Cancelled):
        pipeline.repair(first, request)


def test_the_repair_prompt_shows_the_candidate_that_passed_most_whatever_ranks_first(tmp_path: Path) -> None:
    none, half = "def double(x):\n    return 0\n", "def double(x):\n    return x + 2\n"  # 0 and 1 of 2 tests
    right = "def double(x):\n    return 2 * x\n"
    script = [none, half]
    backend = ScriptedBackend(lambda prompt, n: right if REPAIR_TURN in text_of(prompt) else script[n % 2])
    pipeline = Pipeline(GenerationOptions(k=0, n=2, ranker="first+exec", repair=2), backend=backend, start=tmp_path)
    request = Request("double a number", tests=["assert double(2) == 4", "assert double(3) == 6"])
    first = pipeline.generate(request)
    assert [item.candidate.code for item in first.candidates] == [none.strip(), half.strip()]  # sampling order
    repaired = pipeline.repair(first, request)
    shown = backend.prompts[-1].messages[-2]["content"]  # the failing candidate, as the model's answer
    assert "return x + 2" in shown and "return 0" not in shown
    assert "return 0" in backend.prompts[-1].messages[-1]["content"]  # the other one, in the repair turn
    # Ranked by sampling order first, the repair comes last; it passes, so there is one to write.
    assert repaired.result.candidates[-1].candidate.code == right.strip() and repaired.passed


def test_runs_versus_pairs_two_repair_runs_before_and_after_repair(tmp_path: Path, monkeypatch, capsys) -> None:
    from assistant.cache import JsonlCache

    from .test_benchmarks import _load

    module = _load(Path(__file__).resolve().parent.parent / "benchmarks" / "runs_versus.py", monkeypatch)

    def folder(name: str, first: dict[str, bool], repaired: dict[str, bool]) -> Path:
        records = JsonlCache(tmp_path / name / "function.jsonl")
        for task in first:
            record = {"task_id": task, "strategy": "hybrid+file", "n": 5, "correct": 0, "samples": [], "picks": {}}
            record.update(tests_first=first[task], tests_repaired=repaired[task], sampling_seconds=2.0)
            records.put(f"{name}-{task}", {**record, "repair_seconds": 3.0, "testing_seconds": 1.0})
        return tmp_path / name

    big = folder("big", {"t1": True, "t2": False}, {"t1": True, "t2": True})
    small = folder("small", {"t1": False, "t2": False}, {"t1": False, "t2": True})
    monkeypatch.setattr(sys, "argv", ["runs_versus", f"{big}:hybrid+file", f"{small}:hybrid+file", "--json"])
    module.main()
    result = json.loads(capsys.readouterr().out)
    assert result["metrics"]["top-1 with tests, first round"]["difference"][0] == pytest.approx(0.5)
    assert result["metrics"]["top-1 with tests, after repair"]["difference"][0] == pytest.approx(0.5)
    assert result["repair_seconds"] == {"first": 6.0, "second": 6.0} and "ranking_seconds" not in result


def test_a_repair_round_replaces_what_replace_names_as_the_first_round_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = '"""Arithmetic."""\n\n\ndef double(x):\n    return x + 2\n\n\ndef triple(x):\n    return 3 * x\n'
    root = commit_repo(tmp_path / "calc", {"calc.py": module})
    # Both rounds rewrite double (named by --replace) and re-type triple (not named: left out); only the repair
    # round's double is right.
    retyped = "\n\ndef triple(x):\n    return x\n"
    wrong, right = f"def double(x):\n    return x + 1\n{retyped}", f"def double(x):\n    return x * 2\n{retyped}"
    register_scripted(
        monkeypatch, ScriptedBackend(lambda prompt, n: right if REPAIR_TURN in text_of(prompt) else wrong)
    )
    bank = tmp_path / "bank.jsonl"
    bank.write_text(ONE_EXAMPLE_BANK)
    args = ["generate", "fix double", "--file", "calc.py", "--replace", "double", "--test", "assert double(3) == 6"]
    shown = assist_here(
        *args, "-n", "1", "--backend", "scripted", "--bank", bank, "-k", "0", "--json", "--apply", cwd=root
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    data = json.loads(shown.stdout)
    assert data["repair"]["stopped"] == "passed" and data["applied"] is True
    assert [(r["round"], r["candidates"], r["passes"]) for r in data["repair"]["rounds"]] == [(1, 1, 1)]
    first, repaired = sorted(data["candidates"], key=lambda c: c["repair_round"] or 0)
    for candidate in (first, repaired):  # the same rule in both rounds: double replaced, triple left out
        actions = candidate["edit"]["actions"]
        assert "replace double" in actions and "dropped: rewrites triple()" in actions, actions
    assert (root / "calc.py").read_text(encoding="utf-8") == module.replace("return x + 2", "return x * 2")


def test_one_rule_for_passed_the_tests_an_exec_ranker_with_no_tests_to_run_is_no_verdict(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--ranker exec` with no --test: exec scores "no tests" (no verdict) and the repo's tests pass candidate #1.
    # Repair and --apply read the same rule (rank.passed_tests): it passed, so no round runs and it is written.
    register_scripted(monkeypatch, ScriptedBackend(RIGHT))
    common = ["--backend", "scripted", "--bank", "bank.jsonl", "-k", "0", "-n", "1", "--json", "--apply"]
    shown = assist_here(
        "generate", "--file", "geo.py", "--function", "square", "--ranker", "exec", *common, cwd=project
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    data = json.loads(shown.stdout)
    scores = data["candidates"][0]["scores"]
    assert scores["exec"]["why"] == "no tests" and scores["repo-tests"]["value"] == 1.0
    assert data["repair"]["stopped"] == "already passed" and data["applied"] is True
    assert (project / "geo.py").read_text(encoding="utf-8") == GEO_MODULE.replace("    ...\n", "    return x * x\n", 1)
