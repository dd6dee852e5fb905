"""What redrawing the samples that wrote nothing costs, with and without the engine's prefix caching.

`generate --redraw` (and `eval repo --redraw`) draws each sample that wrote nothing once more, with the same
prompt. Without prefix caching the engine reads that prompt again (1,500-2,000 tokens for a stub in a real
repository: most of a CPU's sampling time); with it (the OpenVINO engine's default) the prompt's attention cache
is reused and only the new sample is decoded.

For the first `--tasks` function tasks of `assist eval repo`'s benchmark, in its seeded order (seed 0, as the
results folders), it builds the default strategy's prompt (hybrid, k = 4, n = 5, temperature 0.8, each task's
seed as `eval repo` gives it) exactly as `eval repo` does, then on two OpenVINO engines loaded side by side, one
reading every prompt afresh and one caching prefixes, task by task in turn: times the first five samples
(`sample_stubs`) and then the redraw (`redraw_empty`). It prints, per engine, the seconds of each and the redraw's
share of the sampling time, over all tasks and over those that had a sample to redraw. It asserts nothing. The
benchmark projects must have been built once (`assist eval repo` does that). From the repo root:

    .venv/bin/python benchmarks/redraw_cost.py [--tasks 20] [--json]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import random
import time
from dataclasses import replace

from assistant.backends import SamplingParams
from assistant.backends.ov import OpenVINOBackend
from assistant.core.stubs import redraw_empty, sample_stubs, wrote_nothing
from assistant.evaluate.codegen import task_seed
from assistant.evaluate.repo.projects import parse_projects, prepare
from assistant.evaluate.repo.run import _retriever, index_project, task_request, task_target
from assistant.evaluate.repo.tasks import function_tasks
from assistant.pipeline import Pipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20, help="function tasks, from the start of the seeded order")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    projects = [prepare(spec) for spec in parse_projects(None)]
    every = [t for p in projects for t in function_tasks(p)]
    order = sorted(every, key=lambda t: t.task_id)
    random.Random(0).shuffle(order)  # eval repo's seeded order
    tasks = order[: args.tasks]
    pipeline = Pipeline()
    encoder = pipeline.encoder()
    indexes = {p.name: index_project(p, encoder) for p in projects}
    retrievers = {name: _retriever("hybrid", ix.functions, ix.encoder) for name, ix in indexes.items()}
    engines = {
        "prompt read afresh": OpenVINOBackend.load(prefix_caching=False),
        "prefix caching": OpenVINOBackend.load(prefix_caching=True),
    }
    totals = {
        name: {
            "first_s": 0.0,
            "redraw_s": 0.0,
            "redrawn": 0,
            "with_redraw": 0,
            "first_s_there": 0.0,
            "redraw_s_there": 0.0,
        }
        for name in engines
    }
    for number, task in enumerate(tasks, 1):
        ix = indexes[task.project]
        target = task_target(task, ix.project)
        # One prompt for both engines (they share the tokenizer), built as `eval repo` builds it.
        request = task_request(task, ix, target, "hybrid", retrievers[task.project], engines["prefix caching"], 4)
        params = SamplingParams(n=5, temperature=0.8, top_p=0.95, seed=task_seed(0, task.task_id))
        for name, backend in engines.items():
            started = time.perf_counter()
            ((completions, limit),) = sample_stubs([request], backend, [params])
            first_s = time.perf_counter() - started
            empty = sum(wrote_nothing(c, request) for c in completions)
            started = time.perf_counter()
            redraw_empty([request], [completions], backend, [replace(params, max_new_tokens=limit)])
            redraw_s = time.perf_counter() - started
            row = totals[name]
            row["first_s"] += first_s
            row["redraw_s"] += redraw_s
            row["redrawn"] += empty
            if empty:
                row["with_redraw"] += 1
                row["first_s_there"] += first_s
                row["redraw_s_there"] += redraw_s
            print(
                f"[{number}/{len(tasks)}] {task.task_id} {name}: {request.prompt_tokens} prompt tokens, "
                f"first {first_s:.1f} s, {empty} redrawn in {redraw_s:.1f} s",
                flush=True,
            )
    for row in totals.values():
        row["share"] = row["redraw_s"] / row["first_s"] if row["first_s"] else None
        row["share_there"] = row["redraw_s_there"] / row["first_s_there"] if row["first_s_there"] else None
    if args.json:
        print(json.dumps({"tasks": len(tasks), "engines": totals}, indent=2))
        return
    print(f"\n{len(tasks)} function tasks (hybrid, n = 5), one run, the two engines in turn on each task")
    print(
        "| engine | first samples s | redraw s | redraw / first | tasks with a redraw | samples redrawn "
        "| redraw / first, on those tasks |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, row in totals.items():
        share = "-" if row["share"] is None else f"{row['share']:.2f}"
        there = "-" if row["share_there"] is None else f"{row['share_there']:.2f}"
        print(
            f"| {name} | {row['first_s']:.1f} | {row['redraw_s']:.1f} | {share} | {row['with_redraw']} | "
            f"{row['redrawn']} | {there} |"
        )


if __name__ == "__main__":
    main()
