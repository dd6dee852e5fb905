"""Which of a repo's tests check a stub: the test files that reach it by name or through what calls it
(assistant.core.reach), and the run on it raising that keeps those that fail having run it."""

from __future__ import annotations

from pathlib import Path

from assistant.code.parse import parse_module
from assistant.core.reach import caller_levels, reaching_files
from assistant.pipeline import Request

from .conftest import enter_repo
from .helpers_geo import SQUARE_MODULE

SHAPES = '''"""Shapes."""


def square(x):
    """Return x times x."""
    ...


def area(side):
    return square(side)


def report(side):
    return f"area {area(side)}"


FORMATS = {"area": area}


class Plate:
    def weight(self, side):
        return report(side)
'''


def test_each_level_is_what_calls_the_one_below() -> None:
    levels = caller_levels([parse_module(SHAPES)], "square", depth=3)
    assert levels == [{"square"}, {"area"}, {"report", "FORMATS"}, {"Plate", "weight"}]
    assert caller_levels([parse_module(SHAPES)], "square", depth=1) == [{"square"}, {"area"}]
    # A method is reached through its class as well as by its name.
    assert caller_levels([parse_module(SHAPES)], "Plate.weight", depth=0) == [{"Plate", "weight"}]


def test_test_files_come_by_level_then_the_one_named_after_the_module(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/shapes.py": SHAPES,
        "tests/test_report.py": "from pkg.shapes import report\n\ndef test_r():\n    assert report(2)\n",
        "tests/test_zzz.py": "from pkg.shapes import square\n\ndef test_s():\n    assert square(2) == 4\n",
        "tests/test_shapes.py": "from pkg import shapes\n\ndef test_s():\n    assert shapes.square(3) == 9\n",
        "tests/test_other.py": "def test_nothing():\n    assert True\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    tests = sorted(name for name in files if name.startswith("tests/"))
    found = reaching_files(tmp_path, "pkg/shapes.py", "square", sorted(files), tests, depth=2)
    assert found == ["tests/test_shapes.py", "tests/test_zzz.py", "tests/test_report.py"]
    assert reaching_files(tmp_path, "pkg/shapes.py", "square", sorted(files), tests, depth=0) == found[:2]


TESTS = """from geo import area, square


def test_area():
    assert area(3) == 9


def test_there():
    assert callable(square)


def test_broken_before():
    assert area is None
"""


def test_tests_that_reach_the_stub_through_its_callers_are_kept_when_they_check_it(tmp_path, monkeypatch) -> None:
    geo = SQUARE_MODULE + "\n\ndef area(side):\n    return square(side)\n"
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": geo, "tests/test_geo.py": TESTS})
    request = Request.resolve(file=repo / "geo.py", function="square")
    # test_area never names square; test_there passes with it raising; test_broken_before fails without running it.
    assert request.repo_tests is not None, request.repo_tests_skipped
    assert request.repo_tests.args == ("tests/test_geo.py::test_area",)
    # A function with a body that a requirement rewrites keeps the tests that name it, as before.
    body = geo.replace("    ...\n", "    return x * x\n", 1)
    (repo / "geo.py").write_text(body)
    rewritten = Request.resolve("return the square", file=repo / "geo.py", function="square")
    assert rewritten.repo_tests is not None
    assert rewritten.repo_tests.args == ("tests/test_geo.py::test_there",)


def test_a_test_command_is_run_as_given(tmp_path, monkeypatch) -> None:
    geo = SQUARE_MODULE + "\n\ndef area(side):\n    return square(side)\n"
    passing = TESTS.replace("assert area is None", "assert area is not None")
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": geo, "tests/test_geo.py": passing})
    request = Request.resolve(file=repo / "geo.py", function="square", test_cmd="pytest tests/test_geo.py")
    assert request.repo_tests is not None and request.repo_tests.args == ("tests/test_geo.py",)


def test_the_package_at_the_repos_root_is_its_folder(tmp_path: Path) -> None:
    from assistant.core.reach import source_scope

    for name in ("__init__.py", "mod.py", "other.py", "sub/__init__.py", "sub/x.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    files = ["__init__.py", "mod.py", "other.py", "sub/__init__.py", "sub/x.py"]
    assert source_scope(tmp_path, "mod.py", files) == ["__init__.py", "mod.py", "other.py"]
    assert source_scope(tmp_path, "sub/x.py", files) == ["sub/__init__.py", "sub/x.py"]
    (tmp_path / "__init__.py").unlink()
    assert source_scope(tmp_path, "mod.py", files) == ["mod.py"]  # a module of no package: itself


def test_a_test_file_that_does_not_import_does_not_hide_the_others(tmp_path, monkeypatch) -> None:
    geo = SQUARE_MODULE + "\n\ndef area(side):\n    return square(side)\n"
    extra = "import not_installed_dep\nfrom geo import area\n\n\ndef test_extra():\n    assert area(1) == 1\n"
    files = {"geo.py": geo, "tests/test_geo.py": TESTS, "tests/test_extra.py": extra}
    repo = enter_repo(monkeypatch, tmp_path / "proj", files)
    request = Request.resolve(file=repo / "geo.py", function="square")
    assert request.repo_tests is not None, request.repo_tests_skipped
    assert request.repo_tests.args == ("tests/test_geo.py::test_area",)


def test_failures_of_tests_that_never_ran_the_stub_do_not_end_the_run_that_picks(tmp_path, monkeypatch) -> None:
    # 60 tests that fail for another reason (as tests needing the network the sandbox denies do) come first; the
    # one test that checks `square` (through `area`, never naming it) comes after them, and is still found.
    geo = SQUARE_MODULE + "\n\ndef area(side):\n    return square(side)\n"
    failing = "".join(f"\n\ndef test_offline_{n}():\n    assert False\n" for n in range(60))
    tests = "from geo import area\n" + failing + "\n\ndef test_zz_area():\n    assert area(3) == 9\n"
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": geo, "tests/test_geo.py": tests})
    request = Request.resolve(file=repo / "geo.py", function="square")
    assert request.repo_tests is not None, request.repo_tests_skipped
    assert request.repo_tests.picked and request.repo_tests.args == ("tests/test_geo.py::test_zz_area",)


def test_failures_never_seen_running_the_stub_leave_the_tests_that_name_it(tmp_path, monkeypatch) -> None:
    # A test may run the function where its mark is not heard (a subprocess, a module imported through a link):
    # failing without being seen to run it, it is neither kept nor taken to show that nothing checks the stub.
    broken = "from geo import square\n\n\ndef test_broken():\n    assert False\n    square(1)\n"
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": broken})
    request = Request.resolve(file=repo / "geo.py", function="square")
    assert request.repo_tests is not None and not request.repo_tests.picked
    assert request.repo_tests.args == ("tests/test_geo.py::test_broken",)


def test_a_candidates_run_of_picked_tests_is_cut_at_a_few_times_the_run_that_picked_them(tmp_path, monkeypatch):
    from assistant.core.repo_tests import REPO_TEST_LIMITS, candidate_limits

    assert candidate_limits(0.4).timeout_s == 10.0  # the floor
    assert candidate_limits(6.0).timeout_s == 18.0
    assert candidate_limits(45.0).timeout_s == REPO_TEST_LIMITS.timeout_s  # never longer than before
    geo = SQUARE_MODULE + "\n\ndef area(side):\n    return square(side)\n"
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": geo, "tests/test_geo.py": TESTS})
    plan = Request.resolve(file=repo / "geo.py", function="square").repo_tests
    assert plan is not None and plan.limits.timeout_s == 10.0  # a quick run picked them


def test_tests_a_test_command_names_are_cut_the_same_way(tmp_path, monkeypatch) -> None:
    geo = SQUARE_MODULE + "\n\ndef area(side):\n    return square(side)\n"
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": geo, "tests/test_geo.py": TESTS})
    plan = Request.resolve(file=repo / "geo.py", function="square", test_cmd="pytest tests/test_geo.py").repo_tests
    assert plan is not None and plan.limits.timeout_s == 10.0  # their run on the stub was quick
