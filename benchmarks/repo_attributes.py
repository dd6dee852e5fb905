"""How often a method stub's prompt hides the attributes its class sets on `self`, with and without `+attrs`.

A method reads `self.sbuf`; its class sets `self.sbuf = []` in a long `__init__`, which the prompt's context shows
as an outline (signature and docstring summary) only, so the model guesses a name (`self._send_buffer`). `eval
repo`'s `+attrs` suffix (stub_context's `attributes`) shows what the class and its bases in the file set on `self`.
This script measures the gap on the benchmark's function tasks, from their reference bodies and no model: of the
method tasks whose reference reads an attribute that its file sets on `self` somewhere, how many see every such
name in the context (as `self.NAME` or an assignment to it), some of them, or none, with and without attributes;
and per project how many tasks' context (so prompt) `+attrs` changes, the tasks a `zero+attrs` run samples anew.
It reads the projects' cached task lists (from the first `assist eval repo` run), counts with the approximate
token counter (the model's tokenizer may fit a line more or less), and asserts nothing. From the repo root:

    .venv/bin/python benchmarks/repo_attributes.py [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import Counter

from assistant.core.stubs import find_functions, stub_context
from assistant.evaluate.repo.projects import PROJECTS, bench_dir
from assistant.evaluate.repo.tasks import FunctionTask

SET_ON_SELF = re.compile(r"self\.(\w+)\s*(?::[^=\n]*)?=(?!=)")


def _visible(name: str, context: str) -> bool:
    """`self.NAME` anywhere, or `NAME = ...` / `NAME: T` starting a line (a class attribute or annotation)."""
    return bool(re.search(rf"\bself\.{name}\b", context) or re.search(rf"^\s*{name}\s*(?::|=(?!=))", context, re.M))


def measure() -> dict:
    """Per prepared project: prompts changed by +attrs; over all, the method tasks' attribute visibility."""
    result: dict = {"projects": {}, "visibility": {"without": Counter(), "with": Counter()}}
    for spec in PROJECTS.values():
        root = bench_dir() / spec.key
        if not (root / "function-tasks.json").exists():
            print(
                f"{spec.name}: not measured (its tasks are not cached; `assist eval repo` prepares them)",
                file=sys.stderr,
            )
            continue
        changed = total = 0
        for data in json.loads((root / "function-tasks.json").read_text())["tasks"]:
            task = FunctionTask.from_json(data)
            pristine = (root / "src" / task.path).read_text(encoding="utf-8")
            text = task.stubbed(pristine)
            stub = next(
                s for s in find_functions(text, task.path) if (s.qualname, s.line) == (task.qualname, task.line)
            )
            contexts = {"without": stub_context(text, stub), "with": stub_context(text, stub, attributes=True)}
            total += 1
            changed += contexts["with"] != contexts["without"]
            reads = {
                n.attr
                for n in ast.walk(ast.parse(task.body))
                if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
                and isinstance(n.ctx, ast.Load)
            }
            wanted = reads & set(SET_ON_SELF.findall(text))  # not what only the hidden body sets
            if "." not in task.qualname or not wanted:
                continue
            for side, context in contexts.items():
                seen = sum(_visible(name, context) for name in wanted)
                result["visibility"][side]["all" if seen == len(wanted) else "some" if seen else "none"] += 1
        result["projects"][spec.name] = {"tasks": total, "context changed": changed}
    result["visibility"] = {side: dict(counts) for side, counts in result["visibility"].items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = measure()
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print("| project | function tasks | context changed by +attrs |\n|---|---|---|")
    for name, row in result["projects"].items():
        print(f"| {name} | {row['tasks']} | {row['context changed']} |")
    print("\nMethod tasks whose reference reads attributes its file sets on self: are they all in the context?")
    print("| context | all | some | none |\n|---|---|---|---|")
    for side, counts in result["visibility"].items():
        print(f"| {side} +attrs | {counts.get('all', 0)} | {counts.get('some', 0)} | {counts.get('none', 0)} |")


if __name__ == "__main__":
    main()
