"""The target file's outline in a prompt is capped by tokens: a large module does not cost thousands of them."""

from __future__ import annotations

import argparse as big_module
import inspect
import textwrap
from pathlib import Path

from assistant.core.generation import FILE_CONTEXT_TOKENS, file_context
from assistant.core.target import Target
from assistant.core.tokens import approximate_tokens


def test_a_small_file_is_outlined_whole(tmp_path: Path) -> None:
    path = tmp_path / "shapes.py"
    path.write_text('import math\n\n\ndef area(r):\n    """Area of a circle."""\n    return math.pi * r * r\n')
    assert (
        file_context(Target.read(path), "perimeter")
        == 'import math\n\ndef area(r):\n    """Area of a circle."""\n    ...'
    )


def test_a_large_module_keeps_imports_and_the_definitions_closest_to_the_request(tmp_path: Path) -> None:
    source = inspect.getsource(big_module)  # ~2,600 lines: even its 200-line outline is ~1,400 tokens
    path = tmp_path / "big.py"
    path.write_text(source)
    whole = file_context(Target.read(path), "", budget=10**9)
    assert approximate_tokens(whole) > 1.5 * FILE_CONTEXT_TOKENS

    outline = file_context(Target.read(path), "add a mutually exclusive group of arguments")
    assert approximate_tokens(outline) <= FILE_CONTEXT_TOKENS
    assert outline.startswith("import os as _os") or "import" in outline.splitlines()[0]
    assert "def add_mutually_exclusive_group" in outline  # shares the request's words
    assert outline.rstrip().endswith("in this file, not shown")
    # What is shown keeps the file's order.
    shown = [line for line in outline.splitlines() if line.startswith(("def ", "class "))]
    order = [source.index("\n" + line.split("(")[0].split(":")[0]) for line in shown]
    assert order == sorted(order)


def test_the_budget_counts_with_the_given_counter(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent("".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(50))))
    words = file_context(Target.read(path), "f49", budget=40, count=lambda text: len(text.split()))
    assert "def f49(x):" in words and len(words.split()) <= 40
