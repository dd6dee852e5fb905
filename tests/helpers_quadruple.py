"""The stub that the `agree` tests fill (tests/test_agreement_module.py, tests/test_agree_batched.py): quadruple,
whose body must call the rest of its module (`_double`, `SCALE`), the replies a model gives for it, and a committed
repo holding it as pkg/geo.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import commit_repo

QUADRUPLE_MODULE = '''"""Geometry helpers."""

SCALE = 2


def _double(x):
    return x * SCALE


def quadruple(x):
    """Return x times four.

    >>> quadruple(3)
    12
    """
    ...
'''

# Replies as a chat model writes them after the prompt's opening fence (the scripted backend stops at the closing).
WRONG = "def quadruple(x):\n    return _double(x)\n```\n"  # sampled first, wrong
RIGHT_A = "def quadruple(x):\n    return _double(_double(x))\n```\n"
RIGHT_B = "def quadruple(x):\n    return 2 * _double(x)\n```\n"
WRITTEN = "assert quadruple(1) == 4\nassert quadruple(0) == 0\nassert quadruple(-2) == -8\n```\n"
# A ScriptedBackend's script: agree's tests, and three samples of the body (the first wrong).
SCRIPT = {"Tests of quadruple": [WRITTEN], "write this body": [WRONG, RIGHT_A, RIGHT_B]}


def quadruple_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str) -> Path:
    """A committed repo whose package `pkg` holds `module` as pkg/geo.py; the interpreter that runs its tests is the
    one running these tests (no VIRTUAL_ENV)."""
    path = commit_repo(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/geo.py": module})
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    return path
