"""What each ranker adds to a request on this machine: seconds per task to rank one task's n candidates.

Uses the default local engine (OpenVINO int8, as `assist generate` does; --engine to change). Takes real
candidates from a committed `assist eval codegen` folder (HumanEval by default: five samples per task
from the default 0.5B model) and ranks each task's parsable samples with each ranker on its own, as `assist
generate` would after sampling: `logprob` uses the log-probabilities recorded while sampling (so it costs nearly
nothing), `agree` asks the model for tests (no cache, as in `generate`) and runs every candidate on each in the
sandbox, `reviewer` makes one batched scoring call, `coder-reviewer` the same plus the recorded log-probs (timed
on its own: nothing is reused from the reviewer's run). The first task warms up and is not counted. It asserts
nothing. Run it on an idle machine, from the repo root:

    .venv/bin/python benchmarks/ranker_cost.py [--results DIR] [--tasks 20] [--rankers first,...] [--engine E] [--json]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from assistant.backends import load_backend
from assistant.cache import JsonlCache
from assistant.config import DEFAULT_ENGINE, LOCAL_ENGINES
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem
from assistant.core.review import forget_reviews
from assistant.evaluate import load_dataset
from assistant.evaluate.codegen import sample_candidates
from assistant.pipeline.registry import make_rankers

DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / "results" / "codegen-humaneval-all-n5-ov-seed0"
DEFAULT_RANKERS = "first,random,logprob,agree,reviewer,coder-reviewer"


def _problems(folder: Path, count: int) -> list[tuple[Problem, list[Candidate]]]:
    """The first `count` tasks of the folder's records (in task order) as (problem, parsable candidates)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tasks = {t.task_id: t for t in load_dataset(config["dataset"], config["split"])}
    entries = JsonlCache(folder / "records.jsonl").entries.values()
    records = sorted(
        (r for r in entries if isinstance(r, dict) and r.get("strategy") == "zero"), key=lambda r: r["task_id"]
    )
    chosen = []
    for record in records:
        task = tasks[record["task_id"]]
        candidates = sample_candidates(record["samples"], task.prefix)
        if len(candidates) >= 2:
            problem = Problem(requirement=task.requirement, prompt=task.prompt([]), setup=task.setup)
            chosen.append((problem, candidates))
        if len(chosen) == count + 1:
            break
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="an `assist eval codegen` folder")
    parser.add_argument("--tasks", type=int, default=20, help="tasks timed (after one warm-up task)")
    parser.add_argument("--rankers", default=DEFAULT_RANKERS, help="comma-separated rankers to time")
    parser.add_argument("--engine", choices=sorted(LOCAL_ENGINES), default=DEFAULT_ENGINE, help="the local engine")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    problems = _problems(args.results, args.tasks)
    started = time.perf_counter()
    backend = load_backend(LOCAL_ENGINES[args.engine])
    load_s = time.perf_counter() - started
    rows = []
    for name in [n.strip() for n in args.rankers.split(",") if n.strip()]:
        (ranker,) = make_rankers(name, backend)  # a fresh object: no scores or tests kept from another ranker
        seconds = []
        for position, (problem, candidates) in enumerate(problems):
            began = time.perf_counter()
            ranker.score(problem, candidates)
            if position:  # the first task warms up
                seconds.append(time.perf_counter() - began)
        forget_reviews(backend)  # the next ranker pays for its own scoring calls
        rows.append(
            {
                "ranker": name,
                "tasks": len(seconds),
                "mean_s": round(statistics.mean(seconds), 3),
                "median_s": round(statistics.median(seconds), 3),
                "max_s": round(max(seconds), 3),
            }
        )
    candidates = sum(len(c) for _, c in problems[1:])
    result = {
        "results": str(args.results),
        "backend": backend.identity.label,
        "load_s": round(load_s, 1),
        "candidates_per_task": round(candidates / max(len(problems) - 1, 1), 2),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['backend']} on {result['cores']} cores; {rows[0]['tasks'] if rows else 0} tasks from "
        f"{args.results.name}, {result['candidates_per_task']} parsable candidates per task; model load {load_s:.1f} s"
    )
    print("| ranker | tasks | mean s/task | median s/task | max s/task |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['ranker']} | {row['tasks']} | {row['mean_s']:.3f} | {row['median_s']:.3f} | {row['max_s']:.3f} |"
        )


if __name__ == "__main__":
    main()
