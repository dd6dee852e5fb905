"""Seconds per task, by part, from the records of `eval repo` function runs (the correctness study's metric 5).

    python benchmarks/run_seconds.py FOLDER [FOLDER ...] [--strategy hybrid+file] [--leave-out TASK_ID ...]

Per folder: the mean (and median) seconds a task spent sampling (with the redraw), running the covering tests,
ranking (agree's model call and its runs) and repairing, and the whole task, over the tasks whose samples were
drawn in their own run. A task re-run after a stop reads its samples from the cache, so its sampling costs
nothing: such records (no model request in their usage) are left out, as are the task ids given with
`--leave-out` (a task in flight at a stop whose first requests were cached only in part); the count says how many
remain. The last column, when two folders are given, is the first's mean over the second's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path
from typing import Any

PARTS = ("sampling_seconds", "testing_seconds", "ranking_seconds", "repair_seconds", "seconds")
NAMES = {
    "sampling_seconds": "sampling (with the redraw)",
    "testing_seconds": "the covering tests",
    "ranking_seconds": "ranking (agree's model call and runs)",
    "repair_seconds": "repair",
    "seconds": "the whole task",
}


def records(folder: Path, strategy: str) -> list[dict[str, Any]]:
    """The folder's function-task records of `strategy` (the store is `function.jsonl`, or its gzip copy)."""
    plain, packed = folder / "function.jsonl", folder / "function.jsonl.gz"
    if plain.exists():
        lines = plain.read_text(encoding="utf-8").splitlines()
    elif packed.exists():
        lines = gzip.decompress(packed.read_bytes()).decode("utf-8").splitlines()
    else:
        raise SystemExit(f"error: {folder} holds no function.jsonl(.gz)")
    values = [json.loads(line)["value"] for line in lines if line.strip()]
    return [value for value in values if value.get("strategy") == strategy]


def timed(found: list[dict[str, Any]], leave_out: set[str]) -> list[dict[str, Any]]:
    """The records whose samples were drawn in their own run (a model request made, not left out by id)."""
    return [r for r in found if (r.get("usage") or {}).get("requests") and r["task_id"] not in leave_out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--strategy", default="hybrid+file")
    parser.add_argument("--leave-out", nargs="*", default=[], metavar="TASK_ID")
    args = parser.parse_args()
    tables = []
    for folder in args.folders:
        found = records(folder, args.strategy)
        kept = timed(found, set(args.leave_out))
        if not kept:
            raise SystemExit(f"error: no timed {args.strategy} record in {folder}")
        tables.append((folder, len(found), kept))
    header = "| part | " + " | ".join(f"{f.name} ({len(k)} of {n} tasks)" for f, n, k in tables) + " |"
    ratio = len(tables) == 2
    print(header + (" ratio |" if ratio else ""))
    print("|---" * (len(tables) + 1 + ratio) + "|")
    for part in PARTS:
        means = [statistics.fmean(float(r.get(part) or 0.0) for r in kept) for _, _, kept in tables]
        cells = [f"{m:.1f}" for m in means]
        if part == "seconds":
            medians = [statistics.median(float(r[part]) for r in kept) for _, _, kept in tables]
            cells = [f"{m:.1f} (median {d:.1f})" for m, d in zip(means, medians, strict=True)]
        row = f"| {NAMES[part]} | " + " | ".join(cells) + " |"
        print(row + (f" {means[0] / means[1]:.1f} |" if ratio and means[1] else (" |" if ratio else "")))


if __name__ == "__main__":
    main()
