"""Pool `assist eval repo` function-level runs of disjoint tasks into one set of records: the whole benchmark.

A benchmark is sometimes run in parts (a seeded subset first, then other tasks into other folders). Each function
task is sampled with its own seed (from the run's seed and the task id), so parts run with the same settings hold
the records one run over all their tasks would hold, and can be pooled: `assist eval report A B C`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from assistant.errors import UsageError
from assistant.evaluate.report import complete_tasks, read_records

# The settings that change what a task's samples are; the others (strategies, limit, task list) may differ.
SAME = ("projects", "seed", "n", "demos", "backend", "model", "temperature", "top_p", "redraw")
LEGACY = {"redraw": False}  # what a folder written before a setting was recorded ran with
RECORDED_LATER = ("engine",)  # compared only where both folders record it (older folders do not say)


def pooled_records(folders: Sequence[Path], strategies: Sequence[str] | None = None) -> tuple[list[dict], dict]:
    """The function records of `folders` for `strategies` (default: those every folder ran), over the tasks every
    one of them finished in each folder; and how many tasks each folder gave. Refused in one line: folders run
    with other settings, a task in two folders, a strategy some folder lacks."""
    configs = []
    for folder in folders:
        path = folder / "config.json"
        if not path.exists():
            raise UsageError(f"{folder} is not an assist results folder (no config.json)")
        configs.append({**LEGACY, **json.loads(path.read_text(encoding="utf-8"))})
    for folder, config in zip(folders[1:], configs[1:], strict=True):
        differ = [key for key in SAME if config.get(key) != configs[0].get(key)]
        differ += [k for k in RECORDED_LATER if k in config and k in configs[0] and config[k] != configs[0][k]]
        if differ:
            raise UsageError(f"{folder} was run with other settings than {folders[0]} ({', '.join(differ)})")
    by_folder = []
    for folder in folders:
        records = read_records(folder / "function.jsonl")
        if not records:
            raise UsageError(f"{folder} holds no function-level records of `assist eval repo`")
        by_folder.append(records)
    every = [list(dict.fromkeys(r["strategy"] for r in records)) for records in by_folder]
    wanted = list(strategies) if strategies else [s for s in every[0] if all(s in ran for ran in every)]
    if not wanted:
        raise UsageError("the folders have no strategy in common")
    for folder, ran in zip(folders, every, strict=True):
        missing = [s for s in wanted if s not in ran]
        if missing:
            raise UsageError(f"{folder} has no records of {missing[0]}")
    kept_by_folder = [complete_tasks([r for r in records if r["strategy"] in wanted]) for records in by_folder]
    seen: Counter[str] = Counter()
    for kept in kept_by_folder:
        seen.update({r["task_id"] for r in kept})
    twice = sorted(task for task, count in seen.items() if count > 1)
    if twice:
        raise UsageError(f"task {twice[0]} is in more than one folder: pool runs of disjoint tasks")
    counts = {
        str(folder): len({r["task_id"] for r in kept}) for folder, kept in zip(folders, kept_by_folder, strict=True)
    }
    order = {strategy: position for position, strategy in enumerate(wanted)}
    pooled = sorted((r for kept in kept_by_folder for r in kept), key=lambda r: order[r["strategy"]])
    return pooled, counts
