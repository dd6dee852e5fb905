"""What the run on a stub picked is remembered by everything that decided it (`assistant.core.picked`): asked
again about the same files, nothing runs; a file of the copy or the interpreter's packages changed, it runs again.

The runs are real (pytest in the project sandbox); the probe is wrapped only to count them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from assistant.core import picked, repo_tests
from assistant.pipeline import Request

from .conftest import enter_repo
from .helpers_geo import SQUARE_MODULE

TESTS = "from geo import square\n\n\ndef test_square():\n    assert square(3) == 9\n"


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs that pick, counted (each still runs)."""
    seen: list[str] = []
    real = repo_tests.probe

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(str(args[1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(repo_tests, "probe", counted)
    return seen


def _planned(repo: Path) -> Request:
    return Request.resolve(file=repo / "geo.py", function="square")


def test_the_same_files_are_not_run_again_and_any_change_runs_them(tmp_path, monkeypatch, runs) -> None:
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": TESTS})
    first = _planned(repo).repo_tests
    assert first is not None and first.picked and not first.remembered and runs == ["geo.py"]
    again = _planned(repo).repo_tests
    assert again is not None and again.remembered and runs == ["geo.py"]
    assert (again.args, again.limits, again.picked) == (first.args, first.limits, True)
    assert "found 1 test that fails with the stub raising (remembered): pytest" in again.describe()
    assert again.took_s is not None and again.took_s < first.took_s
    # Any file the run's copy holds, not only the stub's or a test file: another key, the run again.
    (repo / "notes.txt").write_text("untracked, not ignored: the copy holds it\n")
    third = _planned(repo).repo_tests
    assert third is not None and not third.remembered and len(runs) == 2
    # The stub's file itself (here its docstring): the run again.
    (repo / "geo.py").write_text(SQUARE_MODULE.replace('"""', '"""Squares. ', 1))
    assert not _planned(repo).repo_tests.remembered and len(runs) == 3


def test_a_refusal_is_not_remembered_nor_an_unreadable_entry_believed(tmp_path, monkeypatch, runs) -> None:
    idle = "from geo import square\n\n\ndef test_named():\n    assert square is not None\n"
    repo = enter_repo(monkeypatch, tmp_path / "proj", {"geo.py": SQUARE_MODULE, "tests/test_geo.py": idle})
    for _ in range(2):
        request = _planned(repo)
        assert request.repo_tests is None and "does not check it" in str(request.repo_tests_skipped)
    assert len(runs) == 2
    (repo / "tests" / "test_geo.py").write_text(TESTS)
    assert _planned(repo).repo_tests is not None and len(runs) == 3
    (entry,) = (Path(os.environ["ASSIST_CACHE_DIR"]) / "picked-tests").glob("*.json")
    entry.write_text('{"args": "tests/test_geo.py::test_square", "ran_s": 0.5}')  # not a list: not believed
    plan = _planned(repo).repo_tests
    assert plan is not None and not plan.remembered and len(runs) == 4


def test_the_key_follows_the_interpreters_packages_and_the_newest_entries_are_kept(tmp_path, monkeypatch) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    packages = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    python.parent.mkdir(parents=True)
    python.write_text("")
    packages.mkdir(parents=True)
    (tmp_path / "mod.py").write_text("x = 1\n")

    def key(files: dict[str, str] | None = None, settings: str = "settings") -> str | None:
        return picked.picked_key(tmp_path, ["mod.py"], files or {}, python, (settings,))

    assert key() is None  # no pyvenv.cfg and an interpreter that does not run: its packages cannot be seen
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    first = key()
    assert first is not None and first == key()
    assert first != key({"mod.py": "x = 2\n"}) and first != key(settings="other settings")
    assert first != key({"ignored.py": "y = 1\n"})  # a file written over the copy counts, listed or not
    stamp = packages.stat().st_mtime_ns
    os.utime(packages, ns=(stamp, stamp + 1_000_000_000))  # a package installed or removed
    assert first != key()
    monkeypatch.setattr(picked, "KEEP", 2)
    for number, name in enumerate(("a", "b", "c")):  # each older than the next: "c" comes, "a" goes
        picked.remember(name, picked.Picked((f"t::{name}",), 0.1))
        entry = Path(os.environ["ASSIST_CACHE_DIR"]) / "picked-tests" / f"{name}.json"
        os.utime(entry, ns=(number * 10**9, number * 10**9))
    assert picked.recall("a") is None and picked.recall("b") == picked.Picked(("t::b",), 0.1)
    assert picked.recall("c") == picked.Picked(("t::c",), 0.1)


def test_only_node_ids_of_the_pools_test_files_become_pytest_arguments() -> None:
    files = ["tests/test_geo.py"]
    assert repo_tests._test_of("tests/test_geo.py::test_square[1-1]", files)
    for forged in ("-p evil", "tests/test_geo.py", "other.py::test_x", "tests/test_geo.py::test\x1b[2J"):
        assert not repo_tests._test_of(forged, files), forged
