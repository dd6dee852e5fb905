"""`agree` on requests in plain words, where each sample names the function its own way: before and after binding
each candidate's main function to the name the tests call.

`assist generate "check whether a number is greater than every element of a list"` (the README's first command)
gives the model no function name, so its samples name the function anew (`is_greater`, `check_greater`...).
`agree` asks the model for tests of one name (the one most candidates share, the first sampled's among equals)
and runs every candidate on them: until 2026-11-29 a candidate that chose another name failed every test, so the
ranking went by name, not by behaviour. Now each candidate's main function answers to the tests' name
(`agreement.under_name`), and the main function is the one no other function of the candidate calls (before: the
first defined, which is a helper as often as not).

This runs that job on MBPP tasks stated in their own words only (no tests, no name shown): `assist generate`'s
defaults (hybrid retrieval from the embedded standard-library bank, 4 demonstrations, n = 5, temperature 0.8,
seed 0, the default model), then scores each task's candidates with the model's tests both ways, and judges
every candidate on MBPP's hidden tests with its main function bound to MBPP's name. It prints, per pick rule,
the share of tasks whose pick passes, with 95% bootstrap intervals and paired differences:

- `first`: the first sampled candidate; `logprob`: the highest mean log-probability;
- `agree(before)+logprob`: the rule before (first defined function, no binding), ties by log-probability;
- `agree+logprob`: what `generate` ranks by now when no tests are given;
- `oracle`: any candidate passes (the ceiling of any pick).

Records are kept per task in `--out` (samples, tests, runs), so a stopped run resumes; Ctrl-C prints the figures
of the tasks finished, and `--report` prints them without running anything. From the repo root:

    .venv/bin/python benchmarks/agree_names.py --limit 100 [--dataset mbpp:PATH] [--out DIR] [--json]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import ast
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assistant import sandbox
from assistant.cache import JsonlCache
from assistant.core import agreement
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem
from assistant.evaluate import load_dataset
from assistant.evaluate.metrics import bootstrap_ci, interval_cell, paired_difference
from assistant.pipeline.options import GenerationOptions
from assistant.pipeline.pipeline import Pipeline, Request

ROOT = Path(__file__).resolve().parent.parent
PICKS = ("first", "logprob", "agree(before)+logprob", "agree+logprob", "oracle")


def first_defined(candidates: Sequence[Candidate]) -> str | None:
    """The rule before 2026-11-29: the first top-level function most candidates share."""
    names: Counter[str] = Counter()
    for candidate in candidates:
        try:
            tree = ast.parse(candidate.code)
        except (SyntaxError, ValueError):
            continue
        first = next((n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
        if first:
            names[first] += 1
    return names.most_common(1)[0][0] if names else None


def _passes(jobs: list[tuple[str, Sequence[str], str]], timeout: float) -> list[bool]:
    limits = sandbox.Limits(timeout_s=timeout, cpu_s=int(timeout), memory_mb=1024)
    return [r.status == "passed" for r in sandbox.run_many(jobs, limits=limits)]


def _agree(
    ranker: agreement.AgreementRanker,
    problem: Problem,
    candidates: list[Candidate],
    name: str,
    bind: Callable[[str, str], str],
) -> dict[str, Any]:
    """The tests written for `name` and each candidate's agree score, each run as `bind` makes it."""
    _, tests, examples_used = ranker.tests(problem, candidates, name=name)
    if not tests:
        return {"name": name, "tests": [], "scores": [0.0] * len(candidates)}
    jobs = [(bind(c.code, name), [t], problem.setup) for c in candidates for t in tests]
    ok = _passes(jobs, float(agreement.TEST_SECONDS))
    width = len(tests)
    passed = [frozenset(j for j in range(width) if ok[i * width + j]) for i in range(len(candidates))]
    scores = agreement.cluster_scores(candidates, tests, passed, examples_used)
    return {"name": name, "tests": tests, "scores": [s.value for s in scores]}


def run_task(pipeline: Pipeline, ranker: agreement.AgreementRanker, task: Any) -> dict[str, Any]:
    """Sample the task as `generate` does, score its candidates both ways, judge them on MBPP's tests."""
    started = time.perf_counter()
    result = pipeline.generate(Request(requirement=task.requirement))
    candidates = sorted((r.candidate for r in result.candidates), key=lambda c: c.sample)
    logprob = {r.candidate.sample: r.scores["logprob"].value for r in result.candidates}
    record: dict[str, Any] = {
        "task_id": task.task_id,
        "entry_point": task.entry_point,
        "samples": result.samples,
        "candidates": [
            {"sample": c.sample, "code": c.code, "main": agreement.main_function(c.code), "logprob": logprob[c.sample]}
            for c in candidates
        ],
    }
    sampled = time.perf_counter()
    if len(candidates) > 1:
        problem = Problem(requirement=task.requirement, prompt=result.prompt)
        now = agreement.entry_point(candidates)
        before = first_defined(candidates)
        if now is not None:
            record["agree"] = _agree(ranker, problem, candidates, now, agreement.under_name)
        if before is not None:
            record["agree_before"] = _agree(ranker, problem, candidates, before, lambda code, name: code)
    ranked = time.perf_counter()
    jobs = [(agreement.under_name(c.code, task.entry_point), list(task.tests), task.setup) for c in candidates]
    record["passed"] = _passes(jobs, 10.0)
    record["seconds"] = {
        "sample": round(sampled - started, 2),
        "agree": round(ranked - sampled, 2),
        "judge": round(time.perf_counter() - ranked, 2),
    }
    return record


def picks(record: dict[str, Any]) -> dict[str, float]:
    """Whether each pick rule's candidate passes MBPP's tests (1.0 or 0.0); no candidate counts as a fail."""
    rows = record["candidates"]
    passed = record["passed"]
    if not rows:
        return dict.fromkeys(PICKS, 0.0)

    def best(key: Callable[[int], tuple]) -> float:
        return float(passed[max(range(len(rows)), key=key)])

    def agree_key(field: str) -> Callable[[int], tuple]:
        scores = record.get(field, {}).get("scores") or [0.0] * len(rows)
        return lambda i: (scores[i], rows[i]["logprob"], -rows[i]["sample"])

    return {
        "first": best(lambda i: (-rows[i]["sample"],)),
        "logprob": best(lambda i: (rows[i]["logprob"], -rows[i]["sample"])),
        "agree(before)+logprob": best(agree_key("agree_before")),
        "agree+logprob": best(agree_key("agree")),
        "oracle": float(any(passed)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mbpp", help="mbpp or mbpp:PATH (default: the shared data's)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=100, help="a seeded subset of this many tasks")
    parser.add_argument("--seed", type=int, default=0, help="the subset's seed (sampling is seeded with 0)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "agree-names-mbpp-seed0")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--report", action="store_true", help="only the figures of the tasks already run")
    args = parser.parse_args()

    from assistant.datasets import subset

    tasks = subset(load_dataset(args.dataset, args.split), args.limit, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    records = JsonlCache(args.out / "records.jsonl")
    todo = [t for t in tasks if t.task_id not in records]
    if todo and not args.report:
        options = GenerationOptions(ranker="logprob", seed=0)  # agree is scored here, both ways
        pipeline = Pipeline(options, start=tempfile.gettempdir())  # outside any indexed repo: the embedded bank
        ranker = agreement.AgreementRanker(pipeline.backend(), cache=JsonlCache(args.out / "agree-tests.jsonl"))
        try:
            for number, task in enumerate(todo, start=1):
                record = run_task(pipeline, ranker, task)
                records.put(task.task_id, record)
                print(f"[{number}/{len(todo)}] {task.task_id} {record['seconds']}", file=sys.stderr, flush=True)
        except KeyboardInterrupt:  # a planned stop: the figures of the tasks finished
            print("stopped: the figures below are of the tasks finished", file=sys.stderr)
    done = [records.get(t.task_id) for t in tasks if t.task_id in records]
    if not done:
        raise SystemExit("no task finished")
    outcome = {r["task_id"]: picks(r) for r in done}
    by_rule = {rule: {task: row[rule] for task, row in outcome.items()} for rule in PICKS}
    names = [len({c["main"] for c in r["candidates"]}) for r in done if len(r["candidates"]) > 1]
    differ = [r for r in done if len({c["main"] for c in r["candidates"]}) > 1]
    summary = {
        "dataset": args.dataset,
        "split": args.split,
        "tasks": len(done),
        "tasks_with_two_or_more_candidates": len(names),
        "tasks_whose_candidates_name_the_function_differently": len(differ),
        "mean_distinct_names": round(statistics.fmean(names), 2) if names else None,
        "seconds_per_task": {
            stage: round(statistics.fmean(r["seconds"][stage] for r in done), 1) for stage in ("sample", "agree")
        },
        "rules": {rule: bootstrap_ci(list(by_rule[rule].values())) for rule in PICKS},
        "agree - agree(before)": paired_difference(by_rule["agree+logprob"], by_rule["agree(before)+logprob"]),
        "agree - logprob": paired_difference(by_rule["agree+logprob"], by_rule["logprob"]),
        "agree - first": paired_difference(by_rule["agree+logprob"], by_rule["first"]),
        "agree(before) - logprob": paired_difference(by_rule["agree(before)+logprob"], by_rule["logprob"]),
    }
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(
        f"{args.dataset} {args.split}: {summary['tasks']} tasks in plain words; "
        f"{summary['tasks_with_two_or_more_candidates']} with two or more candidates, "
        f"{summary['tasks_whose_candidates_name_the_function_differently']} of them naming the function differently "
        f"(mean {summary['mean_distinct_names']} names); per task: sampling {summary['seconds_per_task']['sample']} s, "
        f"agree both ways {summary['seconds_per_task']['agree']} s"
    )
    print("\n| pick | passes MBPP's tests (%) |\n|---|---|")
    for rule in PICKS:
        print(f"| {rule} | {interval_cell(summary['rules'][rule])} |")
    print("\n| paired difference (points) | |\n|---|---|")
    for key in ("agree - agree(before)", "agree - logprob", "agree - first", "agree(before) - logprob"):
        print(f"| {key} | {interval_cell(summary[key], signed=True)} |")


if __name__ == "__main__":
    main()
