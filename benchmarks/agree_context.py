"""Agree's test-writing call shown the stub's context, on the committed samples of the 1.5B's function stubs.

    .venv/bin/python benchmarks/agree_context.py [--limit N] [--out DIR] [--sdists DIR]

For every function stub of the three correctness runs (methods are left to the log-probability, as `auto` does),
the 1.5B writes agree's tests again with the code around the stub (`stub_context`, 384 tokens) before the usual
request; the asserts run on every recorded sample in its module (the pinned sdist as a git work tree), and the
new `auto` pick (agree, then log-probability) is read against the project's hidden-test verdict the run recorded,
paired with the pick of the same call written without the context here (the `plain` arm; the run's own pick is
printed too). The model's texts are kept in OUT/written.jsonl (a rerun resumes).
Plan: `results/agree-context-1.5b/plan.md`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from assistant.backends import SamplingParams, load_backend
from assistant.backends.prompts import build_tests_prompt
from assistant.cache import JsonlCache
from assistant.code.fences import code_span
from assistant.core.agreement import (
    TEST_SAMPLES,
    TEST_TOKENS,
    TESTS_WANTED,
    _assert_lines,
    cluster_scores,
    entry_point,
    example_tests,
    signature,
    test_texts,
)
from assistant.core.candidates import Candidate
from assistant.core.home import module_home
from assistant.core.module_runs import passed_in_module
from assistant.core.stubs import find_stub, plan_fill, take_body
from assistant.core.stubs.body import Taken, fill_body
from assistant.core.stubs.context import stub_context
from assistant.core.target import Target
from assistant.evaluate.metrics import interval_cell, paired_difference
from assistant.evaluate.repo.replay import ranking, read_run, recorded, source_tree, work_tree

ROOT = Path(__file__).resolve().parent.parent
RUNS = [
    ROOT / "results" / run
    for run in ("correctness-four-1.5b", "correctness-heldout-1.5b", "correctness-functions-1.5b")
]
CONTEXT_TOKENS = 384


def written(backend, requirement: str, name: str, sig: str, context: str, cache: JsonlCache, key: str) -> list[str]:
    """The asserts agree reads from the test-writing call (the context, when given, opens the user message)."""
    if key not in cache:
        prompt = build_tests_prompt(requirement, sig, name, TESTS_WANTED)
        if context:
            system, user = prompt.messages
            shown = f"The code around it:\n\n```python\n{context}```\n\n{user['content']}"
            prompt = dataclasses.replace(prompt, messages=(system, {**user, "content": shown}))
        params = SamplingParams(n=TEST_SAMPLES, temperature=0.8, top_p=0.95, max_new_tokens=TEST_TOKENS, seed=0)
        cache.put(key, test_texts(prompt, backend.sample(prompt, params), backend))
    asserts: list[str] = []
    for text in cache.get(key):
        start, end = code_span(text)
        asserts += _assert_lines(text[start:end], name)
    return list(dict.fromkeys(asserts))


def agree_values(record: dict, tree: Path, backend, cache: JsonlCache, with_context: bool) -> list[float | None]:
    """Agree's score of each sample (None where it did not parse), its tests written as the arm says."""
    path, qualname = record["task_id"].split(":", 1)[1].split("::")
    target = Target.read(tree / path)
    stub = find_stub(target.text, qualname, requirement_given=True, tree=target.tree)
    stubbed = fill_body(target.text, stub, "...\n")  # the file as the run showed it: the body is the task
    context = stub_context(stubbed, find_stub(stubbed, qualname), budget=CONTEXT_TOKENS) if with_context else ""
    planned, candidates = {}, []
    for number, sample in enumerate(record["samples"]):
        taken = take_body(sample["code"], stub.name, [], finished=True) if sample["parsed"] else None
        if isinstance(taken, Taken):
            planned[number] = plan_fill(target, stub, taken, tree).new
            candidates.append(Candidate(sample["code"], number))
    values: list[float | None] = [None] * len(record["samples"])
    name = entry_point(candidates)
    if name is None:
        return values
    requirement = stub.docstring or stub.name
    key = f"{record['task_id']}|{'context' if with_context else 'plain'}"
    found = written(backend, requirement, name, signature(candidates, name), context, cache, key)
    examples = example_tests(requirement, name)
    tests = (examples + [t for t in found if t not in examples])[:TESTS_WANTED]
    if not tests:
        return [0.0 if s["parsed"] else None for s in record["samples"]]
    home = module_home(target.path, stub.qualname, planned, sys.executable)
    assert home is not None, record["task_id"]
    passed = passed_in_module(home, [c.sample for c in candidates], tests)
    if isinstance(passed, str):
        return [0.0 if s["parsed"] else None for s in record["samples"]]
    for candidate, score in zip(
        candidates, cluster_scores(candidates, tests, passed, min(len(examples), 8)), strict=True
    ):
        values[candidate.sample] = score.value
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="Only the first N function stubs.")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "agree-context-1.5b")
    parser.add_argument("--sdists", type=Path, default=Path.home() / ".cache" / "assist" / "undefined-names")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = JsonlCache(args.out / "written.jsonl")
    backend = load_backend("local-ov", "qwen2.5-coder-1.5b")
    rows = []
    started = time.perf_counter()
    tasks = []
    for run in RUNS:
        versions, records = read_run(run)
        tasks += [(run.name, versions, r) for r in records if "." not in r["task_id"].split("::", 1)[1]]
    tasks = tasks[: args.limit]
    for number, (run, versions, record) in enumerate(tasks):
        project = record["task_id"].split(":", 1)[0]
        tree = work_tree(source_tree(project, versions[project], args.sdists))
        picks = {"recorded": recorded(record, "auto")}
        for arm in ("plain", "context"):
            values = agree_values(record, tree, backend, cache, with_context=arm == "context")
            picks[arm] = (ranking({**record, "scores": {**record["scores"], "agree": values}}, "auto") or [None])[0]
        passes = {arm: float(pick is not None and record["samples"][pick]["passed"]) for arm, pick in picks.items()}
        rows.append((run, f"{run}:{record['task_id']}", passes))
        shown = ", ".join(f"{arm} {value:.0f}" for arm, value in passes.items())
        print(f"{number + 1}/{len(tasks)} {rows[-1][1]}: {shown} ({time.perf_counter() - started:.0f} s)", flush=True)
    print("\n| tasks | recorded auto % | plain auto % | context auto % | context − plain (paired, 95%) "
          "| context alone right | plain alone right |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for label, keep in (("all", lambda r: True), ("held-out pair", lambda r: r == "correctness-heldout-1.5b")):
        chosen = [row for row in rows if keep(row[0])]
        if not chosen:
            continue
        rate = {arm: 100 * sum(p[arm] for _, _, p in chosen) / len(chosen) for arm in ("recorded", "plain", "context")}
        before = {t: p["plain"] for _, t, p in chosen}
        after = {t: p["context"] for _, t, p in chosen}
        cell = interval_cell(paired_difference(after, before), signed=True)
        wins = sum(after[t] > before[t] for t in before)
        losses = sum(after[t] < before[t] for t in before)
        print(f"| {label} ({len(chosen)}) | {rate['recorded']:.1f} | {rate['plain']:.1f} | {rate['context']:.1f} "
              f"| {cell} | {wins} | {losses} |")  # fmt: skip


if __name__ == "__main__":
    main()
