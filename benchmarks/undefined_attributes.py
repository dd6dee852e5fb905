"""A method that reads `self.x` its class defines nowhere, ranked after the others: replayed on the committed
candidates of the 1.5B's correctness runs (no model runs).

    .venv/bin/python benchmarks/undefined_attributes.py [RUN ...] [--sdists DIR]

As `benchmarks/undefined_names.py` (same runs, same pinned sdists), but each method stub's samples are read with
`assistant.code.attributes.unknown_attributes` against the class in its module (the stubbed method's own old body
left out). Prints per run: the methods checked and not checked (a class that cannot be read whole), the samples
flagged and how many of them passed the project's tests, each ranker's pick pass rate before and after moving
flagged samples last (paired, 95% bootstrap), and the stubs where every sample is flagged.
Plan: `results/correctness-undefined-attributes/plan.md`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from assistant.code.attributes import unknown_attributes
from assistant.evaluate.repo.replay import flag_replay_main, read_run, sample_function, source_tree

ROOT = Path(__file__).resolve().parent.parent
RUNS = [ROOT / "results" / "correctness-four-1.5b", ROOT / "results" / "correctness-heldout-1.5b"]

FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef


def sample_flags(code: str, module: ast.Module, qualname: str) -> list[str]:
    """What one sample's function reads through `self` that its class lacks (empty when it does not parse)."""
    function = sample_function(code, qualname)
    return [] if function is None else unknown_attributes(module, qualname, function)


def checkable(module: ast.Module, qualname: str) -> bool:
    """Whether the class can be read whole (a probe function that reads one unknown attribute is flagged)."""
    probe = ast.parse(f"def {qualname.rsplit('.', 1)[-1]}(self):\n    return self.assist_probe_attribute\n").body[0]
    assert isinstance(probe, ast.FunctionDef)
    return bool(unknown_attributes(module, qualname, probe))


def replay(run: Path, sdists: Path) -> dict:
    """Each method stub's flags, and how many methods could be checked."""
    versions, records = read_run(run)
    modules: dict[str, ast.Module] = {}
    flags, found, counts = {}, {}, {"methods": 0, "checked": 0}
    for record in records:
        project, rest = record["task_id"].split(":", 1)
        path, qualname = rest.split("::")
        names: list[list[str]] = [[] for _ in record["samples"]]
        if "." in qualname:
            if path not in modules:
                modules[path] = ast.parse((source_tree(project, versions[project], sdists) / path).read_text("utf-8"))
            counts["methods"] += 1
            if checkable(modules[path], qualname):
                counts["checked"] += 1
                names = [sample_flags(s["code"], modules[path], qualname) for s in record["samples"]]
        flags[record["task_id"]] = [bool(n) for n in names]
        found[record["task_id"]] = sorted({name for n in names for name in n})
    return {"records": records, "flags": flags, "found": found, **counts}


def main() -> None:
    flag_replay_main(__doc__.splitlines()[0], RUNS, replay, "attributes")


if __name__ == "__main__":
    main()
