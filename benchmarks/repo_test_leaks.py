"""Which `eval repo` function records showed the model code from a covering test's file.

Until 2026-11-28 the leak control dropped the files named by a task's covering tests' node ids, not the other
test files whose code those tests run (a mixin's test methods, a shared helper); it now drops every test file the
call map shows a covering test running (:func:`assistant.evaluate.repo.run.covering_test_files`). Records made
before hold such prompts. For each results folder this prints, over the latest record of each (task, strategy),
how many showed a demonstration or fragment from such a file, per strategy, and with `--records` each of them
with what it showed and its passing samples. It reads the projects' cached tasks and call maps (from the first
`assist eval repo` run) and asserts nothing. From the repo root:

    .venv/bin/python benchmarks/repo_test_leaks.py results/repo-n5-seed0 results/repo-redraw-n5-seed0 [--records]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from assistant.cache import JsonlCache, jsonl_exists


def leaked(folder: Path, covering: dict[str, set[str]]) -> tuple[list[tuple[str, str, list[str], int]], int]:
    """(task, strategy, what it showed from a covering test's file, passing samples) for each latest record that
    showed such code, and how many records are of tasks `covering` (task id → those files) does not know."""
    path = folder / "function.jsonl"
    if not jsonl_exists(path):
        raise SystemExit(f"{folder} holds no `assist eval repo` function records")
    found = []
    unknown = 0
    for record in JsonlCache(path).entries.values():  # insertion order: the latest record of a pair wins below
        files = covering.get(record.get("task_id", ""))
        if files is None:
            unknown += 1
            continue
        shown = [
            s for s in record.get("demonstrations", []) + record.get("fragments", []) if s.rsplit(":", 1)[0] in files
        ]
        found.append((record["task_id"], record["strategy"], shown, record.get("correct", 0)))
    latest = {(task, strategy): (task, strategy, shown, correct) for task, strategy, shown, correct in found}
    return [row for row in latest.values() if row[2]], unknown


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="`assist eval repo` results folders")
    parser.add_argument("--records", action="store_true", help="list each leaking record")
    parser.add_argument("--json", action="store_true", help="one JSON object: folder → strategy → count")
    args = parser.parse_args(argv)

    from assistant.evaluate.repo.projects import PROJECTS, bench_dir, prepare
    from assistant.evaluate.repo.run import covering_test_files
    from assistant.evaluate.repo.tasks import function_tasks

    covering: dict[str, set[str]] = {}
    for spec in PROJECTS.values():
        if not (bench_dir() / spec.key / "function-tasks.json").exists():  # preparing it would take an hour
            print(
                f"{spec.name}: its tasks are not cached (`assist eval repo` prepares them): not read", file=sys.stderr
            )
            continue
        project = prepare(spec)
        covering.update({t.task_id: covering_test_files(t, project) for t in function_tasks(project)})
    counts = {}
    for folder in args.folders:
        rows, unknown = leaked(folder, covering)
        counts[str(folder)] = dict(Counter(strategy for _, strategy, _, _ in rows))
        if args.json:
            continue
        passing = [row for row in rows if row[3]]
        print(
            f"{folder}: {len(rows)} records showed a covering test's file {counts[str(folder)]}; "
            f"{len(passing)} of them hold a passing sample ({sum(row[3] for row in passing)} samples)"
            + (f"; {unknown} records of projects not read" if unknown else "")
        )
        if args.records:
            for task, strategy, shown, correct in rows:
                print(f"    {task} {strategy} {', '.join(shown)} ({correct} passed)")
    if args.json:
        json.dump(counts, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
