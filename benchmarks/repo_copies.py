"""Which `eval repo` function tasks have their hidden body copied, line for line, in another file of the project.

Such a task was a leak until 2026-11-28: the leak control dropped the target file and the covering tests' files
from the demonstrations, but not a copy elsewhere (boltons vendors `OrderedMultiDict` in `urlutils.py`), so a
retrieval strategy could be shown the answer while zero-shot could not. `eval repo` now drops copies too
(:func:`assistant.evaluate.repo.run.copied_tasks` is the same test); records made before hold the leak. This
script lists the tasks (one id a line, for `runs_versus.py --skip`) and, given results folders, pass@1 per
strategy with and without them, and each strategy's paired difference from zero-shot over the tasks without them.
It reads the projects' cached task lists (from the first `assist eval repo` run) and their trees, and asserts nothing.
From the repo root:

    .venv/bin/python benchmarks/repo_copies.py --list > copies.txt
    .venv/bin/python benchmarks/repo_copies.py results/repo-redraw-n5-seed0 [A+B+C] [--strategies ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from assistant.cache import JsonlCache, jsonl_exists
from assistant.evaluate.metrics import bootstrap_ci, interval_cell, paired_difference
from assistant.evaluate.repo.projects import PROJECTS, bench_dir
from assistant.evaluate.repo.run import copied_tasks, project_sources
from assistant.evaluate.repo.tasks import FunctionTask
from assistant.evaluate.report import complete_tasks


def copies() -> dict[str, list[str]]:
    """Per prepared project: its function tasks with a copy of the hidden body in another file."""
    found: dict[str, list[str]] = {}
    for spec in PROJECTS.values():
        root = bench_dir() / spec.key
        if not (root / "function-tasks.json").exists():
            print(
                f"{spec.name}: not checked (its tasks are not cached; `assist eval repo` prepares them)",
                file=sys.stderr,
            )
            continue
        tasks = [FunctionTask.from_json(t) for t in json.loads((root / "function-tasks.json").read_text())["tasks"]]
        functions, _ = project_sources(root / "src")  # the unpacked sdist the tasks were drawn from
        found[spec.name] = sorted(copied_tasks(tasks, functions))
    return found


def summarize(folders: str, strategies: list[str], skip: set[str]) -> dict:
    """pass@1 per strategy on all complete tasks of `folders` (one, or several of disjoint tasks joined by "+")
    and on those not in `skip`; each strategy's paired difference from zero-shot on both."""
    records = []
    for folder in folders.split("+"):
        path = Path(folder) / "function.jsonl"
        if not jsonl_exists(path):
            raise SystemExit(f"{folder} holds no `assist eval repo` function records")
        held = [r for r in JsonlCache(path).entries.values() if r.get("strategy") in strategies]
        missing = sorted(set(strategies) - {r["strategy"] for r in held})
        if missing:
            raise SystemExit(f"{folder} has no records of {missing[0]}")
        records += held
    records = complete_tasks(records)
    by: dict[str, dict[str, float]] = {s: {} for s in strategies}
    for r in records:
        by[r["strategy"]][r["task_id"]] = r["correct"] / r["n"] if r["n"] else 0.0
    tasks = sorted(by[strategies[0]])
    kept = [t for t in tasks if t not in skip]
    result: dict = {"folder": folders, "tasks": len(tasks), "without_copies": len(kept), "strategies": {}}
    for s in strategies:
        row = {
            "pass@1 all": bootstrap_ci([by[s][t] for t in tasks]),
            "pass@1 without copies": bootstrap_ci([by[s][t] for t in kept]),
        }
        if s != "zero" and "zero" in by:
            row["vs zero without copies"] = paired_difference(
                {t: by[s][t] for t in kept}, {t: by["zero"][t] for t in kept}
            )
            row["vs zero all"] = paired_difference({t: by[s][t] for t in tasks}, {t: by["zero"][t] for t in tasks})
        result["strategies"][s] = row
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", help="`eval repo` results folders (function tasks); A+B pools runs")
    parser.add_argument("--strategies", default="zero,bm25,hybrid")
    parser.add_argument("--list", action="store_true", help="print the task ids with a copy, one a line")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    found = copies()
    skip = {t for ids in found.values() for t in ids}
    if args.list:
        print("\n".join(sorted(skip)))
        return
    strategies = args.strategies.split(",")
    summaries = [summarize(folder, strategies, skip) for folder in args.folders]
    if args.json:
        print(json.dumps({"copies": found, "runs": summaries}))
        return
    counts = ", ".join(f"{name} {len(ids)}" for name, ids in found.items())
    print(f"function tasks whose hidden body another file holds: {len(skip)} ({counts})")
    for s in summaries:
        print(f"\n{s['folder']}: {s['tasks']} complete tasks, {s['without_copies']} without a copy\n")
        print("| strategy | pass@1 all | without copies | vs zero, all | vs zero, without copies |")
        print("|---|---|---|---|---|")
        for name, row in s["strategies"].items():
            cells = [interval_cell(row["pass@1 all"], 100.0), interval_cell(row["pass@1 without copies"], 100.0)]
            for key in ("vs zero all", "vs zero without copies"):
                cells.append(interval_cell(row[key], 100.0, signed=True) if key in row else "")
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
