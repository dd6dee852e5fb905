"""Does agree earn its call when a stub is filled without tests? Replayed from recorded `eval repo` function runs.

`generate --function` with no tests ranks a stub's candidates by `auto`: agree (the model writes tests, each
candidate runs them in its module's copy), ties broken by log-probability. Agree costs a second model call and the
runs; the log-probability is known from sampling. This reads what each task recorded (every sample's verdict on the
project's hidden tests, and each ranker's scores) and prints, per folder and pooled: the pass rate of the auto pick
and of the log-probability pick, their paired difference (95% bootstrap over tasks), the tasks each wins alone, how
many tasks agree could not rank (methods: their tests would need an instance) and the rank stage's recorded seconds
on the tasks it did rank; then the same over the functions alone (on a method the two picks are the same by
construction, so only the functions can tell agree's worth). No model runs; it asserts nothing. From the repo root:

    .venv/bin/python benchmarks/agree_stubs.py results/correctness-four-1.5b results/correctness-heldout-1.5b
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from assistant.cache import JsonlCache
from assistant.evaluate.codegen import auto_pick
from assistant.evaluate.metrics import bootstrap_ci, paired_difference


def is_method(task_id: str) -> bool:
    """A task names `Class.method` after `::`: agree leaves methods to the log-probability."""
    return "." in task_id.split("::", 1)[1]


def passes(record: dict, pick: int | None) -> float:
    return float(pick is not None and bool(record["samples"][pick]["passed"]))


def row(name: str, records: list[dict]) -> str:
    auto = {r["task_id"]: passes(r, auto_pick(r)) for r in records}
    logprob = {r["task_id"]: passes(r, r["picks"].get("logprob")) for r in records}
    diff = paired_difference(auto, logprob)
    assert diff is not None
    wins = sum(auto[t] > logprob[t] for t in auto)
    losses = sum(auto[t] < logprob[t] for t in auto)
    functions = [r for r in records if not is_method(r["task_id"])]
    seconds = [r["ranking_seconds"] for r in functions if r.get("ranking_seconds") is not None]
    a, lp = bootstrap_ci(list(auto.values())), bootstrap_ci(list(logprob.values()))
    return (
        f"| {name} | {len(records)} | {len(records) - len(functions)} | {100 * a[0]:.1f} | {100 * lp[0]:.1f} "
        f"| {100 * diff[0]:+.1f} [{100 * diff[1]:+.1f}, {100 * diff[2]:+.1f}] | {wins} | {losses} "
        f"| {statistics.median(seconds) if seconds else float('nan'):.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval repo folders holding function.jsonl(.gz)")
    args = parser.parse_args()
    print("| run | tasks | methods (agree skips) | auto % | logprob % | auto − logprob [95%] | auto alone right "
          "| logprob alone right | rank stage s, p50 (functions) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    runs = {folder.name: list(JsonlCache(folder / "function.jsonl").entries.values()) for folder in args.runs}
    # the same task in two folders stays two tasks when pooled
    pooled = [{**r, "task_id": f"{name}/{r['task_id']}"} for name, records in runs.items() for r in records]
    for name, records in runs.items():
        print(row(name, records))
    if len(runs) > 1:
        print(row("pooled", pooled))
    # On a method agree scores every candidate 0, so auto's pick is logprob's: only the functions can differ.
    for name, records in runs.items():
        print(row(f"{name}, functions", [r for r in records if not is_method(r["task_id"])]))
    if len(runs) > 1:
        print(row("pooled, functions", [r for r in pooled if not is_method(r["task_id"].split("/", 1)[1])]))


if __name__ == "__main__":
    main()
