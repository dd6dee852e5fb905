"""What a stricter straggler rule would save, replayed from the samples an `eval repo` function run recorded.

A request's five rows decode together, so its sampling time follows its longest row. The engines end a row that
runs far past its finished siblings (`assistant.backends.loops.ran_past`: more than half ended, and longer than
PAST_FACTOR times their median and PAST_FLOOR tokens). This replays each task's recorded row lengths under other
(factor, floor) pairs, the rows ending in length order as they do in a batch, and prints per rule: the longest
row's tokens per task (p50, p90, mean: the decode steps a request waits for) and how many samples that passed
the task's tests the rule would have cut; first, how long the passing samples are. No model runs; it asserts
nothing. From the repo root:

    .venv/bin/python benchmarks/straggler_rule.py results/correctness-four-1.5b [results/correctness-heldout-1.5b]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from assistant.backends import loops
from assistant.cache import JsonlCache

LONG = 200  # a sample this long (tokens) is counted apart: how often does one that long pass?
RULES = ((loops.PAST_FACTOR, loops.PAST_FLOOR), (2.0, 192), (2.0, 128), (1.5, 128))


def replay(lengths: list[int], factor: float, floor: int) -> list[int]:
    """Each row's length under the rule, rows sorted by length (the order they end in a batch)."""
    ordered = sorted(lengths)
    kept = list(ordered)
    for i, length in enumerate(ordered):
        ended = ordered[:i]
        if 2 * len(ended) > len(ordered):
            kept[i] = min(length, int(max(floor, factor * statistics.median(ended))))
    return kept


def quantile(values: list[int], share: float) -> int:
    return sorted(values)[int(share * (len(values) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval repo folders holding function.jsonl")
    args = parser.parse_args()
    for folder in args.runs:
        records = list(JsonlCache(folder / "function.jsonl").entries.values())
        samples = [s for r in records for s in r["samples"]]
        passing = [s["tokens"] for s in samples if s["passed"]]
        long = [s for s in samples if s["tokens"] > LONG]
        print(f"{folder}: {len(records)} tasks, {len(samples)} samples; {len(passing)} passed, the longest of them "
              f"{max(passing, default=0)} tokens; {len(long)} over {LONG} tokens, of which "
              f"{sum(s['passed'] for s in long)} passed")  # fmt: skip
        print("| factor | floor | longest row p50 | p90 | mean | passing samples cut |")
        print("|---|---|---|---|---|---|")
        for factor, floor in RULES:
            longest, cut = [], 0
            for record in records:
                samples = sorted(record["samples"], key=lambda s: s["tokens"])
                kept = replay([s["tokens"] for s in samples], factor, floor)
                longest.append(max(kept))
                cut += sum(1 for s, k in zip(samples, kept, strict=True) if k < s["tokens"] and s["passed"])
            mean = statistics.mean(longest)
            print(f"| {factor} | {floor} | {quantile(longest, 0.5)} | {quantile(longest, 0.9)} | {mean:.1f} | {cut} |")
        print()


if __name__ == "__main__":
    main()
