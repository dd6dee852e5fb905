"""A request to fill a stub reads its file once and finds its stub once, whichever door it comes through: the TUI's
session (which asks for the query, then retrieves, then generates) and `assist generate --function` (run in
process with the scripted backend). A failing test makes a repair round run too, which used to find the stub again.

Counted by wrapping the one function that reads a target file (`read_target_source`) and `find_stub` wherever a
module of assist holds them; the candidates' tests run for real in the project sandbox."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assistant.code.edit import read_target_source
from assistant.core.stubs import find_stub
from assistant.pipeline import GenerationOptions
from assistant.ui.session import Session

from .conftest import ScriptedBackend, assist_here, commit_repo, register_scripted

MODULE = 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b."""\n    ...\n'
WRONG = "def add(a: int, b: int) -> int:\n    return a - b\n"
TEST = "assert add(1, 2) == 3"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with one stub, calc.add, and no tests of its own."""
    return commit_repo(tmp_path / "repo", {"calc.py": MODULE})


def counted(monkeypatch: pytest.MonkeyPatch, function: Callable[..., Any], file: Path) -> list[tuple]:
    """Every call of `function` that names `file` (first argument, or the stub's text), from any module of assist
    that holds it, recorded in the list returned."""
    import assistant.ui.cli  # noqa: F401  (every module that may hold the function is loaded, so all are wrapped)

    calls: list[tuple] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else None
        if first == MODULE or (isinstance(first, Path) and first.resolve() == file.resolve()):
            calls.append(args)
        return function(*args, **kwargs)

    for module in list(sys.modules.values()):
        if (
            getattr(module, "__name__", "").startswith("assistant")
            and getattr(module, function.__name__, None) is function
        ):
            monkeypatch.setattr(module, function.__name__, counting)
    return calls


def test_the_sessions_request_reads_its_file_once_and_finds_its_stub_once(repo: Path, monkeypatch) -> None:
    options = GenerationOptions(n=1, k=0, ranker="first", own_file=True, repair=1)
    backend = ScriptedBackend([WRONG])
    session = Session(repo, options=options, backend=backend)
    reads = counted(monkeypatch, read_target_source, repo / "calc.py")
    finds = counted(monkeypatch, find_stub, repo / "calc.py")
    # As the TUI's generate action calls it: the query, then the demonstrations, then the candidates.
    query = session.query("", "calc.py", "add")
    hits = session.retrieve(query, "calc.py", function="add")
    result = session.generate("", target="calc.py", tests=[TEST], demonstrations=hits, function="add")
    assert query == "Return the sum of a and b." and hits == []
    assert len(backend.prompts) == 2  # the first round and one repair round: the stub was used twice after it was found
    assert result.candidates and result.function["function"] == "add"
    assert (len(reads), len(finds)) == (1, 1)


def test_the_command_lines_request_reads_its_file_once_and_finds_its_stub_once(repo: Path, monkeypatch) -> None:
    backend = register_scripted(monkeypatch, ScriptedBackend([WRONG]))
    reads = counted(monkeypatch, read_target_source, repo / "calc.py")
    finds = counted(monkeypatch, find_stub, repo / "calc.py")
    args = ["generate", "--file", "calc.py", "--function", "add", "--backend", "scripted", "-k", "0", "-n", "1"]
    shown = assist_here(*args, "--ranker", "first", "--test", TEST, "--repair", "1", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert len(backend.prompts) == 2 and "none of the 1 candidate (repairs included) passed" in shown.stdout
    assert (len(reads), len(finds)) == (1, 1)
