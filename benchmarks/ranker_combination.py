"""Can a learned combination of rankers beat each of them? Fitted on one `assist eval codegen` folder, judged on
others.

Reads the per-sample scores an evaluation recorded (`assist eval codegen --rankers agree,reviewer,coder-reviewer`
stores every ranker's score of every sample in records.jsonl) and fits a logistic regression on the training
folder's samples: p(sample passes) from its agreement score, and its log-probability and reviewer score taken
relative to the mean of its task's samples (only the order within a task matters to a ranker). On each held-out
folder it picks each task's likeliest sample and reports pass@1 after ranking for first, random, each part,
`agree+logprob` (what `auto` does without tests: agreement, ties broken by log-probability), the combination,
and the oracle, with 95% bootstrap intervals, the paired differences against the first sample and of the
combination against each ranker, and the share of the first-to-oracle gap closed. It asserts nothing. From
the repo root:

    .venv/bin/python benchmarks/ranker_combination.py --train results/codegen-mbpp-train-n5-ov-seed0 \\
        --test results/codegen-mbpp-test-all-n5-ov-seed0 results/codegen-humaneval-all-n5-ov-seed0 [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from assistant.cache import JsonlCache
from assistant.evaluate.metrics import bootstrap_ci, interval_cell, paired_difference

FEATURES = ("agree", "logprob", "reviewer")
PARTS = ("logprob", "reviewer", "coder-reviewer", "agree")


def _records(folder: Path) -> list[dict]:
    """The folder's zero-shot records whose samples every part scored."""
    entries = JsonlCache(folder / "records.jsonl").entries.values()
    found = []
    for record in entries:
        if not isinstance(record, dict) or record.get("strategy") != "zero":
            continue
        scores = record.get("scores", {})
        if all(name in scores for name in ("agree", "reviewer")) and any(s["parsed"] for s in record["samples"]):
            found.append(record)
    return sorted(found, key=lambda r: r["task_id"])


def _task_features(record: dict) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(parsed sample indices, features, passed) for one task: agreement as it is, the likelihoods centred."""
    parsed = [i for i, s in enumerate(record["samples"]) if s["parsed"]]
    # A sample without a log-probability (a server that returned none) counts as the task's least likely.
    known = [record["samples"][i]["logprob"] for i in parsed if record["samples"][i]["logprob"] is not None]
    floor = min(known) if known else 0.0
    logprob = np.array([_value(record["samples"][i]["logprob"], floor) for i in parsed])
    reviewer = np.array([record["scores"]["reviewer"][i] for i in parsed], dtype=float)
    agree = np.array([record["scores"]["agree"][i] for i in parsed], dtype=float)
    columns = [agree, logprob - logprob.mean(), reviewer - reviewer.mean()]
    passed = np.array([float(record["samples"][i]["passed"]) for i in parsed])
    return parsed, np.stack(columns, axis=1), passed


def fit(records: list[dict], l2: float = 1.0, steps: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logistic regression by Newton's method on standardized features: (weights, feature means, scales)."""
    rows = [_task_features(r) for r in records]
    x = np.concatenate([f for _, f, _ in rows])
    y = np.concatenate([p for _, _, p in rows])
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    design = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    weights = np.zeros(design.shape[1])
    penalty = np.diag([0.0, *([l2] * x.shape[1])])  # the intercept is not shrunk
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ weights))
        gradient = design.T @ (p - y) + penalty @ weights
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        weights -= np.linalg.solve(hessian, gradient)
    return weights, mean, scale


def _value(value: float | None, missing: float) -> float:
    return missing if value is None else value


def _pick(values: list[tuple[float | None, ...]], indices: list[int]) -> int:
    """The sample with the best score tuple (lexicographic; a missing score is the worst), ties in sampling
    order (as `rank` sorts)."""
    pairs = zip(values, indices, strict=True)
    return min(pairs, key=lambda item: (*(-_value(v, -np.inf) for v in item[0]), item[1]))[1]


def picks(record: dict, model: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, int]:
    """Each ranker's pick for one task, from the recorded scores."""
    parsed, features, passed = _task_features(record)
    weights, mean, scale = model
    combined = weights[0] + ((features - mean) / scale) @ weights[1:]
    scores = record["scores"]
    chosen = {"first": parsed[0]}
    for name in ("random", *PARTS):
        if name in scores:
            chosen[name] = _pick([(scores[name][i],) for i in parsed], parsed)
    samples = record["samples"]
    order = [(scores["agree"][i], samples[i]["logprob"]) for i in parsed]
    chosen["agree+logprob"] = _pick(order, parsed)
    chosen["combination"] = _pick([(v,) for v in combined], parsed)
    correct = [i for i, ok in zip(parsed, passed, strict=True) if ok]
    chosen["oracle"] = correct[0] if correct else parsed[0]
    return chosen


def judge(records: list[dict], model: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[dict]:
    """pass@1 after each ranker on these records, against first and against the best single part."""
    chosen = {r["task_id"]: picks(r, model) for r in records}
    tasks = sorted(chosen)
    names = list(next(iter(chosen.values())))
    passed = {
        name: {t: float(r["samples"][chosen[t][name]]["passed"]) for t, r in zip(tasks, records, strict=True)}
        for name in names
    }
    first, oracle = passed["first"], passed["oracle"]
    gap = sum(oracle[t] - first[t] for t in tasks)
    best_part = max((n for n in PARTS if n in passed), key=lambda n: sum(passed[n].values()))
    rows = []
    for name in names:
        values = passed[name]
        rows.append(
            {
                "ranker": name,
                "tasks": len(tasks),
                "pass@1": bootstrap_ci([values[t] for t in tasks]),
                "vs_first": paired_difference(values, first),
                # How far the combination is ahead of this ranker, paired by task.
                "combination_ahead": paired_difference(passed["combination"], values)
                if name != "combination"
                else None,
                "gap_closed": sum(values[t] - first[t] for t in tasks) / gap if gap else None,
            }
        )
    return [{**row, "best_part": best_part} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, required=True, help="the folder the combination is fitted on")
    parser.add_argument("--test", type=Path, nargs="+", required=True, help="held-out folders")
    parser.add_argument("--l2", type=float, default=1.0, help="ridge penalty on the standardized weights")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    train = _records(args.train)
    if not train:
        parser.error(f"{args.train} has no records scored by agree and reviewer")
    model = fit(train, args.l2)
    weights = dict(zip(["intercept", *FEATURES], (round(float(w), 3) for w in model[0]), strict=True))
    results = {"train": str(args.train), "train_tasks": len(train), "weights": weights, "test": {}}
    for folder in args.test:
        records = _records(folder)
        results["test"][str(folder)] = judge(records, model) if records else []
    if args.json:
        print(json.dumps(results))
        return
    print(f"fitted on {len(train)} tasks of {args.train.name}; standardized weights {weights}")
    for folder, rows in results["test"].items():
        if not rows:
            print(f"\n{folder}: no records scored by agree and reviewer")
            continue
        print(f"\n{Path(folder).name}: {rows[0]['tasks']} tasks; best single part: {rows[0]['best_part']}")
        print("| ranker | pass@1 | vs first | gap closed | combination − this |")
        print("|---|---|---|---|---|")
        for row in rows:
            gap = f"{row['gap_closed']:.0%}" if row["gap_closed"] is not None else ""
            cells = [
                row["ranker"],
                interval_cell(row["pass@1"]),
                interval_cell(row["vs_first"], signed=True) if row["ranker"] != "first" else "",
                gap,
                interval_cell(row["combination_ahead"], signed=True),
            ]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
