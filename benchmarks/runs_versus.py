"""One strategy of one `assist eval` run against one of another run, paired by task.

Two runs are needed when what differs cannot share a run: two models (`eval codegen --model 1.5b` against the
default), or SelfRACG's adapters before and after stage 2 (both named `selfracg`, the second trained after the
first run was made). Reads each folder's records, keeps the tasks both hold, and prints each metric of each run
(95% bootstrap intervals) and the paired difference, first minus second:

- `eval codegen` folders (records.jsonl) and `eval repo` function-level folders (function.jsonl): pass@1 (each
  task's share of correct samples) and, for every ranker both runs recorded, top-1 after ranking; where both ran
  `eval repo --repair N`, top-1 with the covering tests visible (what `--apply` writes: a passing sample, else
  nothing, a miss) before and after the repair rounds;
- `eval repo --task retrieval` folders (line-retrieval.jsonl): R@1, R@10 and MRR@10 of the positive fragment.

A side may pool runs of disjoint tasks, their folders joined by "+" (`A+B+C:hybrid`). `--skip FILE` leaves out
the task ids it lists, one a line (e.g. `benchmarks/repo_copies.py --list`'s). It asserts nothing.
From the repo root:

    .venv/bin/python benchmarks/runs_versus.py \\
        results/codegen-humaneval-all-n5-ov-1.5b-seed0:zero results/codegen-humaneval-all-n5-ov-seed0:zero [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from assistant.cache import JsonlCache, jsonl_exists
from assistant.evaluate.codegen import auto_pick
from assistant.evaluate.metrics import bootstrap_ci, interval_cell, paired_difference

RETRIEVAL: dict[str, Callable[[dict], float]] = {
    "R@1": lambda r: float(r["rank"] == 1),
    "R@10": lambda r: float(r["rank"] is not None and r["rank"] <= 10),
    "MRR@10": lambda r: 1.0 / r["rank"] if r["rank"] else 0.0,
}


def _pick_passed(ranker: str) -> Callable[[dict], float]:
    def value(r: dict) -> float:
        pick = r.get("picks", {}).get(ranker)
        return float(pick is not None and bool(r["samples"][pick]["passed"]))

    return value


# The first file a folder holds decides; an `eval repo` folder holding both reads its line retrieval by --retrieval.
KINDS = (("codegen", "records.jsonl"), ("codegen", "function.jsonl"), ("retrieval", "line-retrieval.jsonl"))


def records(spec: str, retrieval: bool = False) -> tuple[str, dict[str, dict]]:
    """`FOLDER[+FOLDER...]:STRATEGY` → the runs' kind ("codegen" or "retrieval") and their records of that
    strategy, by task."""
    folders, _, strategy = spec.rpartition(":")
    if not folders or not strategy:
        raise SystemExit(f"expected FOLDER:STRATEGY, got {spec!r}")
    kinds: set[str] = set()
    found: dict[str, dict] = {}
    for folder in folders.split("+"):
        kind, held = _folder_records(folder, strategy, retrieval)
        if set(held) & set(found):
            raise SystemExit(f"{folder} repeats tasks of the folders before it; pool only runs of disjoint tasks")
        kinds.add(kind)
        found.update(held)
    if len(kinds) > 1:
        raise SystemExit(f"{folders} mixes kinds of runs: {', '.join(sorted(kinds))}")
    return kinds.pop(), found


def _folder_records(folder: str, strategy: str, retrieval: bool) -> tuple[str, dict[str, dict]]:
    for kind, name in KINDS[2:] if retrieval else KINDS:
        path = Path(folder) / name
        if jsonl_exists(path):
            found = {r["task_id"]: r for r in JsonlCache(path).entries.values() if r.get("strategy") == strategy}
            if not found:
                raise SystemExit(f"{folder} has no records of {strategy!r}")
            return kind, found
    raise SystemExit(f"{folder} holds no `assist eval codegen`, `eval repo` or `eval repo --task retrieval` records")


def metrics(kind: str, first: dict[str, dict], second: dict[str, dict]) -> dict[str, Callable[[dict], float]]:
    """What to compare: retrieval's ranks, or pass@1 and the top-1 of every ranker both codegen runs recorded."""
    if kind == "retrieval":
        return RETRIEVAL
    chosen: dict[str, Callable[[dict], float]] = {"pass@1": lambda r: r["correct"] / r["n"] if r["n"] else 0.0}
    rankers = [set().union(*(r.get("picks", {}) for r in run.values())) for run in (first, second)]
    for ranker in sorted(rankers[0] & rankers[1]):
        chosen[f"top-1 by {ranker}"] = _pick_passed(ranker)
    if all("agree" in r.get("scores", {}) for run in (first, second) for r in run.values()):
        chosen["top-1 by auto"] = _auto_passed  # what `generate` shows first: agree, ties by log-probability
    if all("tests_repaired" in r for run in (first, second) for r in run.values()):  # `eval repo --repair N`
        chosen["top-1 with tests, first round"] = lambda r: float(r["tests_first"])
        chosen["top-1 with tests, after repair"] = lambda r: float(r["tests_repaired"])
    return chosen


def _auto_passed(record: dict) -> float:
    pick = auto_pick(record)
    return float(pick is not None and bool(record["samples"][pick]["passed"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", help="FOLDER:STRATEGY")
    parser.add_argument("second", help="FOLDER:STRATEGY (the baseline)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--retrieval", action="store_true", help="read `eval repo` folders' line retrieval")
    parser.add_argument("--skip", type=Path, help="a file of task ids to leave out, one a line")
    args = parser.parse_args()
    (kind, a), (other, b) = records(args.first, args.retrieval), records(args.second, args.retrieval)
    if kind != other:
        raise SystemExit(f"{args.first} is a {kind} run and {args.second} a {other} run")
    try:
        skip = set(args.skip.read_text(encoding="utf-8").split()) if args.skip else set()
    except OSError as exc:
        raise SystemExit(f"--skip {args.skip}: {exc.strerror}") from None
    shared = sorted((set(a) & set(b)) - skip)
    scale = 1.0 if kind == "retrieval" else 100.0
    result: dict = {"tasks": len(shared), "skipped": len((set(a) & set(b)) & skip), "first": args.first}
    result.update({"second": args.second, "metrics": {}})
    for name, value in metrics(kind, a, b).items():
        mine = {t: value(a[t]) for t in shared}
        theirs = {t: value(b[t]) for t in shared}
        result["metrics"][name] = {
            "first": bootstrap_ci(list(mine.values())),
            "second": bootstrap_ci(list(theirs.values())),
            "difference": paired_difference(mine, theirs),
        }
    if kind == "codegen":  # what each run spent drawing samples, on the shared tasks (a cache hit costs ~0)
        for part in ("sampling", "ranking", "testing", "repair"):  # all but sampling: where the records keep them
            key = f"{part}_seconds"
            if part == "sampling" or any(key in run[t] for run in (a, b) for t in shared):
                result[key] = {
                    side: sum(run[t].get(key, 0.0) for t in shared) for side, run in (("first", a), ("second", b))
                }
    if args.json:
        print(json.dumps(result))
        return
    left_out = f" ({result['skipped']} more left out by --skip)" if args.skip else ""
    print(f"{len(shared)} tasks both runs hold{left_out}; first = {args.first}, second = {args.second}\n")
    print("| metric | first | second | first − second (paired) |\n|---|---|---|---|")
    digits = 3 if kind == "retrieval" else 1
    for name, row in result["metrics"].items():
        cells = [
            interval_cell(row[key], scale, digits, signed=key == "difference")
            for key in ("first", "second", "difference")
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    parts = [part for part in ("sampling", "ranking", "testing", "repair") if f"{part}_seconds" in result]
    if parts:
        print()
    for part in parts:
        spent, count = result[f"{part}_seconds"], max(1, len(shared))
        print(f"{part} seconds per task: first {spent['first'] / count:.1f}, second {spent['second'] / count:.1f}")


if __name__ == "__main__":
    main()
