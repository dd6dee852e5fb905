"""Build `index/default_bank.jsonl`, assist's embedded default example bank, from the Python standard library.

Run from the repo root:  python index/build_default_bank.py

It keeps the standard library's public, documented, top-level functions that are short and self-contained
(3 to 30 lines, a docstring summary of 4 words or more), which makes them useful demonstrations for
small requirement → function tasks. The result is deterministic for a given Python version.
"""

from __future__ import annotations

import ast
import json
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from assistant.extract import extract_python

SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "lib2to3",
    "ensurepip",
    "site-packages",
    "turtledemo",
    "pydoc_data",
    "__pycache__",
    "dist-packages",
    "distutils",
    "config-3.11-x86_64-linux-gnu",
}
SKIP_FILES = {"this.py", "antigravity.py", "__main__.py", "turtle.py"}


def main() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    records = []
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if SKIP_DIRS & set(rel.parts[:-1]) or rel.name in SKIP_FILES or rel.name.startswith("_"):
            continue
        if any(part.startswith("_") for part in rel.parts[:-1]):
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for example in extract_python(source, str(rel)):
            lines = example.code.count("\n") + 1
            if "." in example.name or example.name.startswith("_") or not 3 <= lines <= 30:
                continue
            function = ast.parse(example.code).body[0]
            if not ast.get_docstring(function) or len(example.requirement.split()) < 4:
                continue
            if "self" in example.code.split("\n", 1)[0] or example.code.lstrip().startswith("@"):
                continue
            records.append(
                {
                    "requirement": example.requirement,
                    "code": example.code,
                    "entry_point": example.name,
                    "path": f"Lib/{rel}",
                    "line": example.start_line,
                }
            )
    out = Path(__file__).resolve().parent / "default_bank.jsonl"
    with open(out, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} examples from Python {sys.version.split()[0]} to {out}")


if __name__ == "__main__":
    main()
