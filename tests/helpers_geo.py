"""geo.py, the module whose stub `square` the repo-tests tests fill (tests/test_answer.py, tests/test_repair.py,
tests/test_repo_tests.py, tests/test_repo_tests_ranker.py), and the bodies a model writes for it; each test file
writes its own tests of it."""

from __future__ import annotations

SQUARE_MODULE = '''"""Geometry helpers."""


def square(x: float) -> float:
    """Return x times x."""
    ...
'''
# The stub, and a working function beside it that the tests also call.
GEO_MODULE = (
    SQUARE_MODULE
    + '''

def cube(x: float) -> float:
    """Return x to the third power."""
    return x * x * x
'''
)
WRONG = "def square(x: float) -> float:\n    return x + x\n"  # passes square(2) and square(0), not square(3)
RIGHT = "def square(x: float) -> float:\n    return x * x\n"
