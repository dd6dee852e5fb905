"""Which of the repo's tests check a stub: today's name match against pools of test files found by static callers,
and the traced run on a raising stub that picks the tests inside a pool (plan: results/correctness-test-finding/).

    python benchmarks/test_finding.py [--projects all|held-out|NAMES] [--probe-tasks 5] [--pool NAME] [--json [OUT]]

For each project (prepared by `assist eval repo`, so run one of those first) and each function task, the pools of
test files (`name`, `callers-1..3`, `all`; :func:`assistant.core.reach.reaching_files`) are compared with the task's
covering tests (recall: a covering test in the pool's files; size: the tests those files hold), beside today's
`find_tests`. Then, on the first `--probe-tasks` tasks, the pool (`--pool`, else the plan's rule: the smallest whose
recall on these projects is within 5 points of the best) runs once on the file with the body raising, traced
(:func:`assistant.core.repo_tests.probe`): its wall time, the tests kept, and how many of them are covering tests.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"
POOLS = ("name", "callers-1", "callers-2", "callers-3", "all")


def _bare(node: str) -> str:
    """A node id without its parameters: what a static reading of the file can name."""
    return node.split("[", 1)[0]


def _pools(project, task, test_files: list[str]) -> dict[str, list[str]]:
    """Each pool's test files for `task`."""
    from assistant.core.reach import mentioned, parsed, reaching_files

    name = task.qualname.rpartition(".")[2]
    files = project.all_files()
    pools = {"all": list(test_files)}
    pools["name"] = [f for f in test_files if (tree := parsed(project.root, f)) and name in mentioned(tree)]
    for depth in (1, 2, 3):
        pools[f"callers-{depth}"] = reaching_files(project.root, task.path, task.qualname, files, test_files, depth)
    return pools


def static(projects: str) -> dict:
    """Per project and pool: tasks with a covering test in the pool's files, and the pool's size in tests."""
    from assistant.core.repo_tests import find_tests, test_files
    from assistant.evaluate.repo.projects import parse_projects, prepare
    from assistant.evaluate.repo.tasks import function_tasks

    report: dict[str, dict] = {}
    for spec in parse_projects(projects):
        project = prepare(spec)
        tests = [f.as_posix() for f in test_files(project.root)]
        per_file = Counter(node.split("::", 1)[0] for node in project.calls)
        rows: dict[str, dict] = {pool: {"found": 0, "sizes": []} for pool in (*POOLS, "today")}
        for task in function_tasks(project):
            covering = {_bare(node) for node in task.tests}
            covering_files = {node.split("::", 1)[0] for node in covering}
            for pool, files in _pools(project, task, tests).items():
                rows[pool]["found"] += bool(covering_files & set(files))
                rows[pool]["sizes"].append(sum(per_file[f] for f in files))
            today = find_tests(project.root, task.path, task.qualname)
            rows["today"]["found"] += bool(covering & set(today))
            rows["today"]["sizes"].append(len(today))
        report[spec.name] = {"tasks": len(function_tasks(project)), "pools": rows}
    return report


def choose(report: dict) -> str:
    """The plan's rule: the smallest pool whose recall over the projects is within 5 points of the best."""
    tasks = sum(project["tasks"] for project in report.values())
    recall = {pool: sum(p["pools"][pool]["found"] for p in report.values()) / tasks for pool in POOLS}
    best = max(recall.values())
    return next(pool for pool in POOLS if recall[pool] >= best - 0.05)


def probe_runs(projects: str, pool: str, count: int) -> dict:
    """The probe over `pool` on the first `count` tasks per project: seconds, tests kept, covering among them."""
    from assistant.core.repo_tests import RepoTests, find_tests, probe, stub_raising, test_files
    from assistant.evaluate.repo.projects import parse_projects, prepare
    from assistant.evaluate.repo.tasks import function_tasks

    report: dict[str, list] = {}
    for spec in parse_projects(projects):
        project = prepare(spec)
        tests = [f.as_posix() for f in test_files(project.root)]
        report[spec.name] = []
        for task in function_tasks(project)[:count]:
            files = _pools(project, task, tests)[pool]
            text = (project.root / task.path).read_text()
            raising = stub_raising(text, task._stub(text))
            plan = RepoTests(project.root, project.python, tuple(files), tuple(spec.pythonpath))
            started = time.perf_counter()
            kept, run = probe(plan, task.path, raising) if files else ([], None)
            seconds = time.perf_counter() - started
            today = find_tests(project.root, task.path, task.qualname)
            covering = set(task.tests)
            report[spec.name].append(
                {
                    "task": task.task_id,
                    "files": len(files),
                    "ran": 0 if run is None else len(run.outcomes),
                    "status": None if run is None else run.status,
                    "seconds": round(seconds, 2),
                    "kept": len(kept),
                    "kept_covering": len(covering & set(kept)),
                    "today": len(today),
                    "today_covering": len({_bare(n) for n in covering} & set(today)),
                }
            )
    return report


def _print_static(report: dict) -> None:
    print("| project | tasks | " + " | ".join(f"{pool}: found, median tests" for pool in (*POOLS, "today")) + " |")
    print("|---" * (2 + len(POOLS) + 1) + "|")
    for name, project in report.items():
        cells = []
        for pool in (*POOLS, "today"):
            row = project["pools"][pool]
            cells.append(f"{row['found']}, {statistics.median(row['sizes']):g}")
        print(f"| {name} | {project['tasks']} | " + " | ".join(cells) + " |")


def _print_probe(report: dict, pool: str) -> None:
    print(f"\nprobe over {pool}:")
    print("| task | files | tests ran | status | seconds | kept | kept covering | today found | today covering |")
    print("|---|---|---|---|---|---|---|---|---|")
    seconds = []
    for rows in report.values():
        for row in rows:
            cells = [row[key] for key in ("files", "ran", "status", "seconds", "kept", "kept_covering")]
            print(f"| {row['task']} | " + " | ".join(map(str, [*cells, row["today"], row["today_covering"]])) + " |")
            seconds.append(row["seconds"])
    kept = sum(row["kept"] for rows in report.values() for row in rows)
    covering = sum(row["kept_covering"] for rows in report.values() for row in rows)
    middle = statistics.median(seconds)
    print(f"\nseconds: median {middle:.2f}, max {max(seconds):.2f}; kept {kept}, covering {covering}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", default="all")
    parser.add_argument("--probe-tasks", type=int, default=5)
    parser.add_argument("--pool", choices=POOLS, default=None, help="the pool to probe (default: the plan's rule)")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    report = static(args.projects)
    pool = args.pool or choose(report)
    probed = probe_runs(args.projects, pool, args.probe_tasks)
    result = {"static": report, "pool": pool, "probe": probed}
    if args.json == "-":
        print(json.dumps(result))
        return
    _print_static(report)
    _print_probe(probed, pool)
    if args.json:
        Path(args.json).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
