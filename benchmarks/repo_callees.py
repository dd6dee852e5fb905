"""Can retrieval fetch what a hidden function calls? The project helpers of `eval repo`'s function tasks, and
whether each strategy's demonstrations held one.

For each function task of a results folder, the calls in its hidden body are matched by name to the project's own
functions and methods (outside its tests; names of builtins and of the methods of builtin types are left out,
since `d.get(...)` is rarely the project's `get`; a name defined twice counts both definitions). So the figures
are approximate, by name. Each task then falls into one of three kinds:

- it calls no project helper;
- its helpers are all in its own file, which the prompt shows as an outline and from which demonstrations are
  excluded (the leak control), so retrieval cannot add them;
- it calls a helper defined in another file: the only kind where retrieval can bring an API into the prompt.

For every strategy it prints how often the demonstrations included such a helper's definition, and pass@1 on
each kind of task (percent, 95% bootstrap intervals) with the difference from zero-shot, paired by task. It
reads the records and the projects' cached task lists and indexes (from the first `assist eval repo` run) and
asserts nothing. From the repo root:

    .venv/bin/python benchmarks/repo_callees.py results/repo-n5-seed0 [--json]
    .venv/bin/python benchmarks/repo_callees.py results/repo-n5-seed0 --list-unseen > unseen.txt
    .venv/bin/python benchmarks/repo_callees.py results/repo-redraw-n5-seed0 --skip copies.txt  # repo_copies.py
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Sequence
from pathlib import Path

from assistant.cache import JsonlCache
from assistant.core.usages import COMMON, is_test_path
from assistant.evaluate.metrics import bootstrap_ci, interval_cell, paired_difference, pass_at_k
from assistant.evaluate.repo.projects import bench_dir, parse_projects
from assistant.evaluate.report import complete_tasks

KINDS = ("no project helper", "helpers in its own file only", "a helper in another file")


def _called(body: str) -> set[str]:
    """The names the body calls: `f(...)` and `x.f(...)` give "f"."""
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
    return names - COMMON


def _definitions(index_file: Path) -> dict[str, list[tuple[str, int]]]:
    """The project's functions and methods outside its tests, by their last name: [(path, first line)]."""
    found: dict[str, list[tuple[str, int]]] = {}
    with index_file.open(encoding="utf-8") as handle:
        for line in handle:
            example = json.loads(line)
            if example.get("kind", "function") == "function" and not is_test_path(example["path"]):
                found.setdefault(example["name"].rsplit(".", 1)[-1], []).append(
                    (example["path"], int(example["start_line"]))
                )
    return found


def classify(folder: Path) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Each task's kind (an index into KINDS) and the `path:line` of the helpers it calls in other files."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    kinds: dict[str, int] = {}
    elsewhere: dict[str, set[str]] = {}
    for spec in parse_projects(",".join(p.split("==")[0] for p in config["projects"])):
        root = bench_dir() / spec.key
        definitions = _definitions(root / "index" / "functions" / "examples.jsonl")
        for task in json.loads((root / "function-tasks.json").read_text(encoding="utf-8"))["tasks"]:
            spots = {
                spot
                for name in _called(task["body"])
                for spot in definitions.get(name, ())
                if not (spot[0] == task["path"] and task["start"] <= spot[1] <= task["end"])  # itself
            }
            others = {f"{path}:{line}" for path, line in spots if path != task["path"]}
            kinds[task["task_id"]] = 2 if others else (1 if spots else 0)
            elsewhere[task["task_id"]] = others
    return kinds, elsewhere


def unseen(folder: Path) -> list[str]:
    """The function tasks of the folder's projects that call a helper from another file and that the folder
    never ran: a fresh set on which to confirm what the folder's figures suggest for that kind."""
    kinds, _ = classify(folder)
    ran = {record["task_id"] for record in JsonlCache(folder / "function.jsonl").entries.values()}
    return sorted(task for task, kind in kinds.items() if kind == 2 and task not in ran)


def summarize(folder: Path, skip: frozenset[str] = frozenset()) -> dict:
    """Per kind of task: how many, and per strategy pass@1, its difference from zero-shot, and how often the
    demonstrations held a called helper from another file; the tasks in `skip` left out."""
    entries = JsonlCache(folder / "function.jsonl").entries.values()
    records = complete_tasks([r for r in entries if r["task_id"] not in skip])
    kinds, elsewhere = classify(folder)
    strategies = list(dict.fromkeys(r["strategy"] for r in records))
    pass1 = {s: {r["task_id"]: pass_at_k(r["n"], r["correct"], 1) for r in records if r["strategy"] == s}
             for s in strategies}  # fmt: skip
    tasks = sorted(pass1[strategies[0]])
    summary: dict = {"tasks": len(tasks), "kinds": {}}
    for number, kind in enumerate(KINDS):
        mine = [t for t in tasks if kinds.get(t) == number]
        rows = {}
        for strategy in strategies:
            row: dict = {"pass@1": bootstrap_ci([pass1[strategy][t] for t in mine])}
            if strategy != "zero" and "zero" in pass1:
                row["vs_zero"] = paired_difference(
                    {t: pass1[strategy][t] for t in mine}, {t: pass1["zero"][t] for t in mine}
                )
            if number == 2:
                mine_records = [r for r in records if r["strategy"] == strategy and r["task_id"] in mine]
                row["fetched"] = sum(bool(set(r["demonstrations"]) & elsewhere[r["task_id"]]) for r in mine_records)
            rows[strategy] = row
        summary["kinds"][kind] = {"tasks": len(mine), "strategies": rows}
    return summary


def render(summary: dict) -> str:
    """The tables, one per kind of task."""
    lines = [f"{summary['tasks']} function tasks that every strategy ran", ""]
    for kind, part in summary["kinds"].items():
        if not part["tasks"]:  # e.g. a folder that ran one kind only (`--list-unseen`'s tasks)
            continue
        lines += [f"## {kind}: {part['tasks']} tasks", ""]
        fetched = kind == KINDS[2]
        lines += ["| strategy | pass@1 | vs zero |" + (" demonstrations held a called helper |" if fetched else ""),
                  "|---|---|---|" + ("---|" if fetched else "")]  # fmt: skip
        for strategy, row in part["strategies"].items():
            cells = [strategy, interval_cell(row["pass@1"]), interval_cell(row.get("vs_zero"), signed=True)]
            if fetched:
                cells.append("" if strategy == "zero" else f"{row['fetched']} of {part['tasks']}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="an `assist eval repo` results folder with function tasks")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--list-unseen",
        action="store_true",
        help="print instead the ids of the tasks that call a helper from another file and that the folder never "
        "ran, one per line (for `assist eval repo --tasks FILE`)",
    )
    parser.add_argument("--skip", type=Path, help="a file of task ids to leave out, one a line")
    args = parser.parse_args(argv)
    if args.list_unseen:
        print("\n".join(unseen(args.folder)))
        return
    try:
        skip = frozenset(args.skip.read_text(encoding="utf-8").split()) if args.skip else frozenset()
    except OSError as exc:
        raise SystemExit(f"--skip {args.skip}: {exc.strerror}") from None
    summary = summarize(args.folder, skip)
    print(json.dumps(summary, indent=1) if args.json else render(summary))


if __name__ == "__main__":
    main()
