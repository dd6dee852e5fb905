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

import argparse
import ast
import gzip
import json
from pathlib import Path

from assistant.code.attributes import unknown_attributes
from assistant.evaluate.repo.replay import flagged_notes, moved_rows, source_tree

ROOT = Path(__file__).resolve().parent.parent
RUNS = [ROOT / "results" / "correctness-four-1.5b", ROOT / "results" / "correctness-heldout-1.5b"]

FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef


def sample_flags(code: str, module: ast.Module, qualname: str) -> list[str]:
    """What one sample's function reads through `self` that its class lacks (empty when it does not parse)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    leaf = qualname.rsplit(".", 1)[-1]
    function = next((n for n in ast.walk(tree) if isinstance(n, FUNCTIONS) and n.name == leaf), None)
    return [] if function is None else unknown_attributes(module, qualname, function)


def checkable(module: ast.Module, qualname: str) -> bool:
    """Whether the class can be read whole (a probe function that reads one unknown attribute is flagged)."""
    probe = ast.parse(f"def {qualname.rsplit('.', 1)[-1]}(self):\n    return self.assist_probe_attribute\n").body[0]
    assert isinstance(probe, ast.FunctionDef)
    return bool(unknown_attributes(module, qualname, probe))


def replay(run: Path, sdists: Path) -> dict:
    """Each method stub's flags, and how many methods could be checked."""
    config = json.loads((run / "config.json").read_text())
    versions = dict(spec.split("==") for spec in config["projects"])
    modules: dict[str, ast.Module] = {}
    with gzip.open(run / "function.jsonl.gz", "rt") as lines:
        records = [json.loads(line)["value"] for line in lines]
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, default=RUNS)
    parser.add_argument("--sdists", type=Path, default=Path.home() / ".cache" / "assist" / "undefined-names")
    args = parser.parse_args()
    args.sdists.mkdir(parents=True, exist_ok=True)
    data = {run: replay(run, args.sdists) for run in args.runs}
    print("| run | stubs | methods (checked) | samples | flagged | flagged that passed | ranker | picks flagged "
          "| pick passes: before → after | after − before (paired, 95%) | recorded picks matched |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run, found in data.items():
        records, flags = found["records"], found["flags"]
        samples = sum(len(r["samples"]) for r in records)
        flagged = sum(sum(flags[r["task_id"]]) for r in records)
        passed = sum(s["passed"] for r in records for s, f in zip(r["samples"], flags[r["task_id"]], strict=True) if f)
        for row in moved_rows(records, flags):
            print(f"| {run.name} | {len(records)} | {found['methods']} ({found['checked']}) | {samples} "
                  f"| {flagged} | {passed} | {row} |")  # fmt: skip
    for run, found in data.items():
        shown = {task: names for task, names in found["found"].items() if names}
        print(f"\n{run.name}: attributes flagged, by stub ({len(shown)} stubs)")
        for task, names in shown.items():
            print(f"  {task}: {', '.join(names)}")
        print("\n".join(flagged_notes(found["records"], found["flags"])))


if __name__ == "__main__":
    main()
