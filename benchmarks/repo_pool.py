"""Pool `assist eval repo` function-level runs of disjoint tasks into one table: the whole benchmark's figures.

A benchmark is sometimes run in parts (a seeded subset first, then other tasks into other folders). Each
function task is sampled with its own seed (from the run's seed and the task id), so parts run with the same
settings hold the same records one run over all their tasks would hold, and can be pooled. This script checks
that the folders' settings agree and that no task is in two of them, keeps the strategies every folder ran (or
`--strategies`), and prints over the tasks every kept strategy finished:

- per strategy: pass@1 and pass@5, and the candidate each ranker puts first (first sample, mean log-probability,
  and, where every record holds agree's scores, agree and auto: what `assist generate` shows first), in percent
  with 95% bootstrap intervals;
- each strategy's paired difference, by task, against zero-shot and against bm25, for pass@1 and for each pick.

It reads records and asserts nothing. From the repo root:

    .venv/bin/python benchmarks/repo_pool.py results/repo-n5-seed0 results/repo-callees-n5-seed0 \\
        results/repo-rest-n5-seed0 --strategies zero,bm25,hybrid [--json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from assistant.evaluate.metrics import bootstrap_ci, interval_cell, paired_difference, pass_at_k
from assistant.evaluate.repo.run import _picked_passes
from assistant.evaluate.report import _read_records, complete_tasks

# The settings that change what a task's samples are; the others (strategies, limit, task list) may differ.
SAME = ("projects", "seed", "n", "demos", "backend", "model", "temperature", "top_p")
BASELINES = ("zero", "bm25")


def pooled_records(folders: Sequence[Path], strategies: Sequence[str] | None) -> tuple[list[dict], dict]:
    """The function records of `folders` (checked: same settings, disjoint tasks) for `strategies` (default:
    those every folder ran), over the tasks every one of them finished; and how many tasks each folder gave."""
    configs = []
    for folder in folders:
        path = folder / "config.json"
        if not path.exists():
            raise SystemExit(f"{folder} is not an assist results folder (no config.json)")
        configs.append(json.loads(path.read_text(encoding="utf-8")))
    for folder, config in zip(folders[1:], configs[1:], strict=True):
        differ = [key for key in SAME if config.get(key) != configs[0].get(key)]
        if differ:
            raise SystemExit(f"{folder} was run with other settings than {folders[0]} ({', '.join(differ)})")
    by_folder = []
    for folder in folders:
        records = _read_records(folder / "function.jsonl")
        if not records:
            raise SystemExit(f"{folder} holds no function-level records")
        by_folder.append(records)
    every = [{r["strategy"] for r in records} for records in by_folder]
    wanted = list(strategies) if strategies else sorted(set.intersection(*every), key=_order)
    for folder, ran in zip(folders, every, strict=True):
        missing = [s for s in wanted if s not in ran]
        if missing:
            raise SystemExit(f"{folder} has no records of {missing[0]}")
    kept_by_folder = [complete_tasks([r for r in records if r["strategy"] in wanted]) for records in by_folder]
    seen: Counter[str] = Counter()
    for kept in kept_by_folder:
        seen.update({r["task_id"] for r in kept})
    twice = sorted(task for task, count in seen.items() if count > 1)
    if twice:
        raise SystemExit(f"task {twice[0]} is in more than one folder: pool runs of disjoint tasks")
    counts = {
        str(folder): len({r["task_id"] for r in kept}) for folder, kept in zip(folders, kept_by_folder, strict=True)
    }
    return [r for kept in kept_by_folder for r in kept], counts


def _order(strategy: str) -> tuple[int, str]:
    return (BASELINES.index(strategy) if strategy in BASELINES else len(BASELINES), strategy)


def summarize(records: Sequence[dict]) -> dict:
    """Per strategy and metric: the mean with its interval, and the paired differences against the baselines."""
    strategies = sorted({r["strategy"] for r in records}, key=_order)
    pickers = ["first", "logprob"]
    if all("agree" in r["picks"] for r in records):
        pickers += ["agree", "auto"]
    metrics = {
        "pass@1": lambda r: pass_at_k(r["n"], r["correct"], 1),
        "pass@5": lambda r: pass_at_k(r["n"], r["correct"], 5) if r["n"] >= 5 else None,
        **{f"{p} pick": (lambda r, p=p: float(_picked_passes(r, p))) for p in pickers},
    }
    per_task = {
        (strategy, name): {
            r["task_id"]: value for r in records if r["strategy"] == strategy and (value := metric(r)) is not None
        }
        for strategy in strategies
        for name, metric in metrics.items()
    }
    rows = []
    for strategy in strategies:
        row: dict = {"strategy": strategy, "tasks": len(per_task[(strategy, "pass@1")])}
        for name in metrics:
            values = per_task[(strategy, name)]
            row[name] = bootstrap_ci([values[t] for t in sorted(values)]) if values else None
            for base in BASELINES:
                if base != strategy and base in strategies and name != "pass@5":
                    row[f"{name} vs {base}"] = paired_difference(values, per_task[(base, name)])
        rows.append(row)
    return {"metrics": list(metrics), "rows": rows}


def render(summary: dict, counts: dict) -> str:
    parts = ", ".join(f"{folder} {tasks}" for folder, tasks in counts.items())
    lines = [f"{sum(counts.values())} function tasks ({parts}); percent, 95% bootstrap intervals", ""]
    metrics = summary["metrics"]
    lines += ["| strategy | tasks | " + " | ".join(metrics) + " |", "|" + "---|" * (2 + len(metrics))]
    for row in summary["rows"]:
        cells = [interval_cell(row[m], 100, 1) for m in metrics]
        lines.append(f"| {row['strategy']} | {row['tasks']} | " + " | ".join(cells) + " |")
    lines += ["", "Paired by task (points):", ""]
    compared = [m for m in metrics if m != "pass@5"]
    heads = [f"{m} vs {b}" for b in BASELINES for m in compared]
    lines += ["| strategy | " + " | ".join(heads) + " |", "|" + "---|" * (1 + len(heads))]
    for row in summary["rows"]:
        cells = [interval_cell(row.get(h), 100, 1, signed=True) for h in heads]
        lines.append(f"| {row['strategy']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="`assist eval repo` folders of disjoint function tasks")
    parser.add_argument("--strategies", default="", help="comma-separated (default: those every folder ran)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()] or None
    records, counts = pooled_records(args.folders, strategies)
    summary = summarize(records)
    print(json.dumps({"tasks": counts, **summary}, indent=1) if args.json else render(summary, counts))


if __name__ == "__main__":
    main()
