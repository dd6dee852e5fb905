"""How often the run on the stub (`assistant.core.repo_tests.check_baseline`) keeps or refuses the tests `generate
--function` finds, on the function tasks of the repository benchmark's real projects.

    python benchmarks/baseline_rule.py [--projects all|held-out|NAMES] [--limit 15] [--json [OUT]]

For each project (prepared by `assist eval repo`, so run one of those first), its pristine tree is copied into a
fresh git repo; for the first `--limit` function tasks (the benchmark's: each task's own covering tests fail on the
stub), the file is stubbed as the task shows it (`...`) and `repo_tests(..., baseline=stub)` plans the tests that
mention the function with the project's interpreter, as a user's request would. Prints, per project, how many tasks
had tests found, kept, and refused by reason. Refusals here are the rule's false alarms unless the reason holds (a
test that passes on `...` does not check the function). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"


def _reason(message: str) -> str:
    """The kind of refusal, from its line."""
    for key, kind in (("do not run with", "no run"), ("already pass", "already pass"), ("skipped here", "skipped")):
        if key in message:
            return kind
    return "other: " + message[:80]


def _git_copy(root: Path, folder: Path) -> Path:
    """The pristine tree copied into `folder`, committed as a git repo (the tests run only in one)."""
    shutil.copytree(root, folder, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)
    return folder


def measure(projects: str, limit: int) -> dict:
    from assistant.core.repo_tests import repo_tests
    from assistant.errors import UsageError
    from assistant.evaluate.repo.projects import parse_projects, prepare
    from assistant.evaluate.repo.tasks import function_tasks

    report: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for spec in parse_projects(projects):
            project = prepare(spec)
            repo = _git_copy(project.root, Path(tmp) / spec.name)
            counts: Counter[str] = Counter()
            for task in function_tasks(project)[:limit]:
                counts["tasks"] += 1
                stub = task.stubbed((repo / task.path).read_text())
                try:
                    plan = repo_tests(repo, task.path, task.qualname, python=project.python, baseline=stub)
                except UsageError as exc:
                    counts["found"] += 1
                    counts["refused: " + _reason(str(exc))] += 1
                    continue
                if plan is None:
                    counts["none found"] += 1
                else:
                    counts["found"] += 1
                    counts["kept"] += 1
            report[spec.name] = dict(counts)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", default="all")
    parser.add_argument("--limit", type=int, default=15)
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    report = measure(args.projects, args.limit)
    if args.json == "-":
        print(json.dumps(report))
        return
    keys = sorted({key for counts in report.values() for key in counts} - {"tasks", "found", "kept", "none found"})
    print("| " + " | ".join(["project", "tasks", "tests found", "kept", "none found", *keys]) + " |")
    print("|---" * (5 + len(keys)) + "|")
    for name, counts in report.items():
        cells = [counts.get(key, 0) for key in ("tasks", "found", "kept", "none found", *keys)]
        print(f"| {name} | " + " | ".join(map(str, cells)) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
