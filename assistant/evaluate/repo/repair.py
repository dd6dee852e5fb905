"""Repair rounds in `assist eval repo`, measured as `generate` runs them (:mod:`assistant.core.repair`).

With the covering tests visible, what `--apply` would write is the first sample that passes them; when none
does, repair rounds show the model the best failing sample and pytest's report of its first failure, sample
again, and test the new bodies the same way. A task's record keeps both results apart: `tests_first` (a sample
of the first round passed, so one would be written) and `tests_repaired` (after the rounds), with the rounds
(candidates, passes, seconds) and the seconds of sampling, testing and repair.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from assistant.backends import Backend, Completion, SamplingParams
from assistant.cache import JsonlCache, cache_key
from assistant.code.edit import Edit
from assistant.core.candidates import Candidate
from assistant.core.failures import pytest_failure
from assistant.core.generation import GenerateResult
from assistant.core.rank import REPO_TESTS, Ranked, Score
from assistant.core.repair import RepairOptions, RepairTask, repair
from assistant.core.stubs import StubRequest, collect_stub, plan_fill
from assistant.core.target import Target
from assistant.evaluate.repo.projects import Project
from assistant.evaluate.repo.tasks import FunctionTask
from assistant.sandbox.project import ProjectLimits


def tested(
    task: FunctionTask, project: Project, text: str, tests_cache: JsonlCache, limits: ProjectLimits, failure: bool
) -> dict:
    """The covering tests' verdict on the task's file as `text` ({status, seconds}, and with `failure` pytest's
    report of the first failure), run once per distinct text and cached; a cached verdict without the report it
    now needs is run again."""
    key = cache_key(kind="repo-test", task=task.task_id, text=text)
    cached = tests_cache.get(key) if key in tests_cache else None
    if cached is not None and (not failure or cached["status"] == "passed" or "failure" in cached):
        return cached
    run = project.run_tests(task.tests, task.path, text, limits)
    verdict = {"status": run.status, "seconds": round(run.duration_s, 2)}
    if run.status != "passed":
        verdict["failure"] = pytest_failure(run.output)
    tests_cache.put(key, verdict)
    return verdict


def _score(verdict: dict) -> Score:
    """A cached verdict as the `repo-tests` score (1 or 0). The evaluation runs each task's covering tests itself
    (:func:`tested`, cached per file text, which its records were made with), not the ranker, whose score is the
    share passed with its time in `why`."""
    passed = verdict["status"] == "passed"
    details = {"status": verdict["status"], "failure": verdict.get("failure", "")}
    return Score(1.0 if passed else 0.0, verdict["status"], details)


def first_round(
    request: StubRequest,
    completions: Sequence[Completion],
    target: Target,
    root: Path,
    backend: Backend,
    verdict_of: Callable[[str], dict],
) -> GenerateResult:
    """The task's samples as `generate --function` ranks them by the repo's tests: each body in its file (the
    project at `root`), its covering tests' verdict (`verdict_of` the file's text, with the failure's report) as
    the `repo-tests` score, passing ones first."""
    candidates: list[Ranked] = []
    edits: list[Edit | None] = []
    for number, completion in enumerate(completions):
        kept, _, _ = collect_stub([completion], request.stub, request.prefix, request.existing)
        if not kept:
            continue
        candidate, taken = kept[0]
        edit = plan_fill(target, request.stub, taken, root)
        verdict = verdict_of(edit.new)
        candidates.append(Ranked(replace(candidate, sample=number), {REPO_TESTS: _score(verdict)}))
        edits.append(edit)
    order = sorted(range(len(candidates)), key=lambda i: candidates[i].key([REPO_TESTS]))
    return GenerateResult(
        requirement=request.query,
        model=backend.model,
        backend=backend.name,
        retriever="",
        rankers=[REPO_TESTS],
        demonstrations=list(request.hits),
        candidates=[candidates[i] for i in order],
        edits=[edits[i] for i in order],
        prompt=request.prompt,
        prompt_tokens=request.prompt_tokens,
        samples=len(completions),
        dropped={},
        max_new_tokens=request.limit,
    )


def repair_record(
    task: FunctionTask,
    request: StubRequest,
    completions: Sequence[Completion],
    target: Target,
    project: Project,
    backend: Backend,
    params: SamplingParams,
    tests_cache: JsonlCache,
    limits: ProjectLimits,
    options: RepairOptions,
) -> dict:
    """The record's repair fields: `tests_first`, `tests_repaired`, `repair` (rounds, stopped, seconds) and
    `testing_seconds` (the first round's test runs, cached ones cost nothing)."""

    def verdict_of(text: str) -> dict:
        return tested(task, project, text, tests_cache, limits, failure=True)

    started = time.perf_counter()
    result = first_round(request, completions, target, project.root, backend, verdict_of)
    testing_s = time.perf_counter() - started

    def score(candidates: list[Candidate], edits: list[Edit | None]) -> list[Ranked]:
        verdicts = [verdict_of(e.new) if e else None for e in edits]
        return [
            Ranked(c, {REPO_TESTS: _score(v or {"status": "error"})}) for c, v in zip(candidates, verdicts, strict=True)
        ]

    task_of = RepairTask(target=target, function=task.qualname, root=project.root, params=params)
    repaired = repair(task_of, result, backend, options, score)
    return {
        "tests_first": repaired.first_passed,
        "tests_repaired": repaired.passed,
        "repair": {**repaired.to_json(), "n": options.n, "budget_s": options.budget_s},
        "testing_seconds": round(testing_s, 2),
        "repair_seconds": round(repaired.seconds, 2),
    }
