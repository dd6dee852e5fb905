"""A request that found its stub once passes it down: `prepare_stub` and `fill_stub` take the stub already found
(`stub=`) with the file already read (`target=`), and use that one rather than finding it again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from assistant.core.stubs import fill_stub, find_stub, prepare_stub
from assistant.core.target import Target

from .conftest import ScriptedBackend

SOURCE = '''import math


def area(radius: float) -> float:
    """Return the area of a circle of this radius."""
    ...
'''


def _target(tmp_path: Path) -> Target:
    path = tmp_path / "shapes.py"
    path.write_text(SOURCE)
    return Target.read(path)


def test_prepare_stub_uses_the_stub_it_is_given_and_builds_the_same_prompt(tmp_path: Path) -> None:
    target = _target(tmp_path)
    backend = ScriptedBackend(prefills_answer=True)
    found = find_stub(target.text, "area", target.display(None), tree=target.tree)
    given = prepare_stub("area", backend, target, stub=found)
    again = prepare_stub("area", backend, target)
    assert given.stub is found and again.stub is not found  # the given one, not a second finding
    assert given.prompt == again.prompt and given.limit == again.limit and given.existing == again.existing


def test_fill_stub_reads_the_requirement_from_the_stub_it_is_given(tmp_path: Path) -> None:
    target = _target(tmp_path)
    backend = ScriptedBackend(["    return math.pi * radius**2\n"], prefills_answer=True)
    found = find_stub(target.text, "area", target.display(None), tree=target.tree)
    plain = fill_stub("area", backend, target=target, run_in_module=False)
    same = fill_stub("area", backend, target=target, stub=found, run_in_module=False)
    assert plain.requirement == same.requirement == "Return the area of a circle of this radius."
    assert [e.new for e in plain.edits] == [e.new for e in same.edits] and same.edits
    # A stub described otherwise (its docstring) shows that the given one is what the request is built from.
    other = fill_stub(
        "area", backend, target=target, stub=replace(found, docstring="Pi r squared."), run_in_module=False
    )
    assert other.requirement == "Pi r squared." and other.function["docstring"] == "Pi r squared."
