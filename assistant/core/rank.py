"""Rankers: score candidates for a problem. One interface, `score(problem, candidates) -> list[Score]`.

`first` (sampling order), `random` (seeded), `logprob` (mean token log-probability under the local
model), `exec` (tests passed in the sandbox) and `repo-tests` (a filled stub's file through the repo's own tests, in
the project sandbox) live here; `condor` (p(correct) from the trained discriminator) in
:mod:`assistant.methods.condor.ranker`. The registry that builds them by name (`exec+logprob` orders by tests
passed, then by log-probability) is :mod:`assistant.pipeline.registry`.

A ranker scores bare candidates; what it needs beyond them travels in the :class:`Problem`. The repo's tests need
two things no other ranker does: the tests planned for the stub (`Problem.repo_tests`, found once by
:func:`assistant.core.repo_tests.repo_tests`) and each candidate's edited file (`Problem.edits`, by sample), so they
ride there too, and `repo-tests` is a ranker like the others: built by name, scored and sorted on one road
(:meth:`assistant.pipeline.Pipeline.rank`). It is never named in a spec by a person: the pipeline puts it first
whenever the repo's tests are planned (:func:`assistant.pipeline.registry.resolve_rankers`).
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from assistant.backends import Backend, Step
from assistant.backends.prompts import Prompt
from assistant.core.candidates import Candidate
from assistant.core.home import ModuleHome
from assistant.errors import UsageError

if TYPE_CHECKING:
    from assistant.code.edit import Edit
    from assistant.core.repo_tests import RepoTests
    from assistant.sandbox.project import ProjectRun


@dataclass(frozen=True)
class Problem:
    """What the candidates were generated for. `home`, for a stub's candidates, is their file in its project:
    where a ranker that runs them (`agree`) runs them, since a stub's body calls the rest of its module.
    `repo_tests` are the repo's own tests planned for a stub (None: none) and `edits` each candidate's edit of its
    file, by sample number: what the `repo-tests` ranker runs them on."""

    requirement: str
    prompt: Prompt
    tests: tuple[str, ...] = ()
    setup: str = ""
    home: ModuleHome | None = None
    repo_tests: RepoTests | None = None
    edits: Mapping[int, Edit] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Score:
    """A ranker's verdict on one candidate: higher is better; `why` is for people."""

    value: float
    why: str
    details: dict = field(default_factory=dict)


class Ranker(Protocol):
    """Scores candidates; `step`, when given, is told how far a ranker that calls the model has got (a callback
    that raises stops the call there, as the TUI's Escape does). A ranker whose steps are a stage of their own (the
    repo's tests: one test run per candidate) names it as a `stage` attribute, for progress to show under it."""

    name: str

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]: ...


# The rankers for a problem's candidates: given as objects, or chosen once the candidates are known (whether
# they carry log-probabilities decides what `auto` means).
ChooseRankers = Callable[[Problem, Sequence[Candidate]], Sequence[Ranker]]
Rankers = Sequence[Ranker] | ChooseRankers


def choose(rankers: Rankers | None, problem: Problem, candidates: Sequence[Candidate]) -> list[Ranker]:
    """The ranker objects for these candidates (none given: sampling order)."""
    if rankers is None:
        return [FirstRanker()]
    chosen = rankers(problem, candidates) if callable(rankers) else rankers
    return list(chosen)


class FirstRanker:
    """Keeps the sampling order: the baseline every other ranker must beat."""

    name = "first"

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        return [Score(-float(c.sample), f"sample #{c.sample + 1}") for c in candidates]


class RandomRanker:
    """A seeded random order (a baseline for evaluation)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        rng = random.Random(f"{self.seed}:{problem.requirement}")
        return [Score(rng.random(), "random draw") for _ in candidates]


class LogprobRanker:
    """Mean token log-probability of the candidate's code given the prompt.

    Uses the log-probabilities recorded while sampling when the backend reported them; the other
    candidates are scored in one batched forward pass.
    """

    name = "logprob"

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        values: dict[int, list[float]] = {i: list(c.logprobs) for i, c in enumerate(candidates) if c.logprobs}
        missing = [i for i in range(len(candidates)) if i not in values]
        if missing and not self.backend.can_score:
            model, why = self.backend.model, self.backend.scoring_unavailable
            raise UsageError(
                f"the logprob ranker is unavailable: {model} returned no log-probabilities and {why}; use the "
                "first ranker, or exec with tests",
                setting="ranker:logprob",
                values={"model": model, "why": why},
            )
        if missing:
            scored = self.backend.logprob([(problem.prompt, candidates[i].code) for i in missing])
            values.update({i: list(result.logprobs) for i, result in zip(missing, scored, strict=True)})
        scores = []
        for i in range(len(candidates)):
            logprobs = values[i]
            mean = sum(logprobs) / len(logprobs) if logprobs else float("-inf")
            scores.append(
                Score(mean, f"mean log-prob {mean:.3f} over {len(logprobs)} tokens", {"tokens": len(logprobs)})
            )
        return scores


class ExecRanker:
    """Fraction of the problem's tests a candidate passes, run in the sandbox (never in this process)."""

    name = "exec"

    def __init__(self, timeout_s: float = 10.0, memory_mb: int = 1024) -> None:
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        from assistant import sandbox
        from assistant.core.failures import sandbox_failure

        if not problem.tests:
            return [Score(0.0, "no tests") for _ in candidates]
        if problem.home is not None:
            return self._in_module(problem, candidates)
        limits = sandbox.Limits(timeout_s=self.timeout_s, cpu_s=int(self.timeout_s) + 1, memory_mb=self.memory_mb)
        results = sandbox.run_many([(c.code, problem.tests, problem.setup) for c in candidates], limits=limits)
        scores = []
        for result in results:
            why = f"{result.passed}/{result.total} tests passed"
            if result.status == "failed" and result.failed_test:
                why += f"; failed: {result.failed_test.strip().splitlines()[0][:80]}"
            elif result.status not in ("passed", "failed"):
                detail = f" ({result.error_type}: {result.error_message})" if result.error_type else ""
                why += f"; {result.status}{detail}"
            details = {"status": result.status}
            if result.status != "passed":  # what a repair round shows the model (assistant.core.repair)
                details["failure"] = sandbox_failure(result.failed_test, result.error_type, result.error_message)
            scores.append(Score(result.passed / max(result.total, 1), why, details))
        return scores

    def _in_module(self, problem: Problem, candidates: Sequence[Candidate]) -> list[Score]:
        """The tests run on each candidate's edited file in a copy of its project (`problem.home`), where the
        module's imports and names resolve, as :func:`assistant.core.module_runs.passed_in_module` runs them."""
        from assistant.core.failures import sandbox_failure
        from assistant.core.module_runs import passed_in_module

        assert problem.home is not None
        total = len(problem.tests)
        passed = passed_in_module(problem.home, [c.sample for c in candidates], problem.tests)
        if isinstance(passed, str):  # nothing ran
            details = {"status": "error", "not_run": passed}
            return [Score(0.0, f"0/{total} tests passed; {passed}", details) for _ in candidates]
        scores = []
        for tests_passed in passed:
            status = "passed" if len(tests_passed) == total else "failed"
            why = f"{len(tests_passed)}/{total} tests passed in its module"
            failed = [test for j, test in enumerate(problem.tests) if j not in tests_passed]
            details = {"status": status}
            if failed:
                why += f"; failed: {failed[0].strip().splitlines()[0][:80]}"
                details["failure"] = sandbox_failure(failed[0], None, None)  # what a repair round shows the model
            scores.append(Score(len(tests_passed) / total, why, details))
        return scores


REPO_TESTS = "repo-tests"  # the repo's own tests' ranker: first in a result's rankers once they ran


class RepoTestsRanker:
    """The share of the repo's own tests (`problem.repo_tests`) each candidate's edited file (`problem.edits`)
    passes, run in a sandboxed copy of the project (:func:`assistant.core.repo_tests.run_on`: Landlock, no network,
    rlimits); identical files run once, a candidate without an edit scores 0. Its steps (one per file run)
    are the `repo tests` progress stage."""

    name = REPO_TESTS
    stage = "repo tests"

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        tests = problem.repo_tests
        if tests is None:
            raise UsageError(
                "the repo-tests ranker runs the repo's tests planned for a filled stub, and none are planned here"
            )
        edits = [problem.edits.get(candidate.sample) for candidate in candidates]
        first = next((edit for edit in edits if edit is not None), None)
        if first is None:
            return [Score(0.0, "no edit to test") for _ in candidates]
        root = Path(os.path.realpath(tests.root))  # the edits' paths are resolved ones
        try:
            path = Path(first.path).relative_to(root)
        except ValueError:
            raise UsageError(f"{first.display_path} is outside {tests.root}; its tests cannot run there") from None
        texts = [edit.new if edit is not None else None for edit in edits]
        return score_texts(replace(tests, root=root), path, texts, step)


def verdict(run: ProjectRun) -> Score:
    """A run of the repo's tests as a ranker's score: the share of its tests that passed (0 when it could not run:
    a request's candidates' own doing, since its plan ran them on the file as it was first, `check_baseline`)."""
    from assistant.core.failures import pytest_failure

    total = len(run.outcomes)
    passed = len(run.passed())
    value = passed / total if total and run.status in ("passed", "failed") else 0.0
    counted = f"{passed}/{total} passed in {run.duration_s:.1f} s"
    # "2/2 passed", "1/2 passed" (the count says it failed), "timeout: 0/2 passed"
    why = counted if run.status in ("passed", "failed") else f"{run.status}: {counted}"
    failed = run.failed()[:3]
    details = {"status": run.status, "passed": passed, "total": total, "failed": failed}
    if run.status != "passed":  # what a repair round shows the model (assistant.core.repair)
        details["failure"] = pytest_failure(run.output)
    return Score(value, why, details)


RUN_WORKERS = 4  # at most this many runs of the repo's tests at once (never more than the cores)


def score_texts(
    tests: RepoTests, path: str | Path, texts: Sequence[str | None], step: Step | None = None
) -> list[Score]:
    """Each edited file `path` (relative to `tests.root`) as `texts` says through the repo's tests (None: no
    edit, scored 0); identical texts run once, as many at once as there are cores (each run is mostly an
    interpreter starting and pytest collecting). `step` hears 0, then each run that ends, of the distinct files."""
    from assistant.core.repo_tests import run_on

    report: Step = step or (lambda done, total: None)
    distinct = list(dict.fromkeys(text for text in texts if text is not None))
    report(0, len(distinct))
    cancel = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, min(len(distinct), os.cpu_count() or 1, RUN_WORKERS)))
    try:
        futures = {pool.submit(run_on, tests, path, text, cancel): text for text in distinct}
        seen: dict[str, Score] = {}
        for done, future in enumerate(as_completed(futures), start=1):
            seen[futures[future]] = verdict(future.result())
            if done < len(distinct):
                report(done, len(distinct))
    except BaseException:  # Ctrl-C, or a run that raised: end the runs in flight rather than wait out their limits
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    report(len(distinct), len(distinct))
    return [Score(0.0, "no edit to test") if text is None else seen[text] for text in texts]


# The scores that come from tests the user has (the repo's own, then given ones): a candidate passed them all when
# each of these that ran tests on it (a verdict: `details["status"]`) says "passed".
TEST_SCORES = (REPO_TESTS, "exec")


def verdicts_of(ranked: Ranked) -> list[Score]:
    """The candidate's test verdicts, the repo's tests' first: the scores in TEST_SCORES that ran tests on it (exec
    with no tests to run gives no verdict)."""
    found = (ranked.scores.get(name) for name in TEST_SCORES)
    return [score for score in found if score is not None and "status" in score.details]


def not_run(candidates: Sequence[Ranked]) -> str | None:
    """Why no test ran on any of the candidates, where every test verdict of every one says none ran in their
    module (`exec` there: the module does not import, which no candidate's body changes), else None."""
    return _why_none_ran([score for item in candidates for score in verdicts_of(item)])


def ran_on_none(candidates: Sequence[Ranked], ranker: str) -> str | None:
    """Why `ranker` ran its tests on none of the candidates (`agree` whose module does not import), where each of
    its scores says so, else None."""
    return _why_none_ran([item.scores.get(ranker) for item in candidates])


def _why_none_ran(scores: Sequence[Score | None]) -> str | None:
    """The first score's `details["not_run"]` where every one of `scores` has it (none ran), else None."""
    if not scores or any(score is None or "not_run" not in score.details for score in scores):
        return None
    return str(scores[0].details["not_run"])  # type: ignore[union-attr]


def passed_tests(ranked: Ranked) -> bool:
    """Whether a candidate passed every test it was run on (False when no tests ran on it). The one rule for
    "passed": what may be written (:func:`may_write`) and where repair stops (:mod:`assistant.core.repair`)."""
    verdicts = verdicts_of(ranked)
    return bool(verdicts) and all(score.details.get("status") == "passed" for score in verdicts)


@dataclass(frozen=True)
class Pick:
    """Which candidate may be written: `position` (into the ranked candidates) or None, and why."""

    position: int | None
    tested: bool  # tests existed, so only a candidate that passed them all may be written
    passed: int  # how many candidates passed every test
    undefined: bool = False  # no tests, and every candidate reads a name defined nowhere: none may be written
    not_run: str | None = None  # tests existed but none ran on any candidate, and why (:func:`not_run`)

    @property
    def refused(self) -> bool:
        """Tests existed and no candidate passed them, or none existed and every candidate reads a name defined
        nowhere: nothing may be written unless the user insists."""
        return self.position is None and (self.tested or self.undefined)


def may_write(candidates: Sequence[Ranked], tested: bool) -> Pick:
    """The candidate an apply may write: with tests (`tested`: the user's, the repo's, or typed in a session) the
    first that passed every one of them, else none (where none ran on any, `not_run` says why); without, the first
    whose edit reads no name (or `self.x`) defined nowhere (a NameError or AttributeError when it runs), else none.
    One rule for every door (the command line, the TUI, the evaluation), so that none writes code known to fail, or
    never checked by the tests it has, unless the user insists (`results/correctness-undefined-names`,
    `results/correctness-undefined-attributes`)."""
    if not tested:
        runs = [i for i, item in enumerate(candidates) if not item.candidate.undefined]
        return Pick(runs[0] if runs else None, False, 0, undefined=bool(candidates) and not runs)
    passing = [i for i, item in enumerate(candidates) if passed_tests(item)]
    return Pick(passing[0] if passing else None, True, len(passing), not_run=None if passing else not_run(candidates))


@dataclass(frozen=True)
class Ranked:
    """A candidate with every ranker's score; ranking is lexicographic in the rankers' order."""

    candidate: Candidate
    scores: dict[str, Score]

    def key(self, names: Sequence[str]) -> tuple[float, ...]:
        """Sort key, best first: the scores of the tests that rank first (the repo's, given ones: a leading run of
        TEST_SCORES in `names`, as `auto` orders them where tests exist); then a candidate whose edit reads a name
        defined nowhere after every other, then one that also wrote other definitions (dropped from its edit)
        after every one that did not, whatever their other scores; then the other scores in the rankers' order
        (negated); ties in sampling order.

        The tests run on what would be written (the edited file), so passing them outweighs what the edit says
        of the candidate. Copying a neighbour back is the likeliest text a small model can write, so its
        log-probability is high exactly when it went off task. A name defined nowhere is a NameError: of 105
        such samples of the 1.5B, 2 passed their tests (`results/correctness-undefined-names`)."""
        candidate = self.candidate
        lead = next((i for i, name in enumerate(names) if name not in TEST_SCORES), len(names))
        scores = [-self.scores[n].value for n in names]
        demoted = (float(bool(candidate.undefined)), float(bool(candidate.dropped)))
        return (*scores[:lead], *demoted, *scores[lead:], candidate.sample)


def rank(
    problem: Problem, candidates: Sequence[Candidate], rankers: Sequence[Ranker], step: Step | None = None
) -> list[Ranked]:
    """Score candidates with each ranker and sort best first (ties keep sampling order); `step` goes to each."""
    names = [r.name for r in rankers]
    return sorted(score_all(problem, candidates, rankers, step), key=lambda item: item.key(names))


def score_all(
    problem: Problem, candidates: Sequence[Candidate], rankers: Sequence[Ranker], step: Step | None = None
) -> list[Ranked]:
    """Each candidate with every ranker's score, in the candidates' order (unsorted: a caller that pairs them with
    their edits by position sorts both together)."""
    per_ranker = {r.name: r.score(problem, candidates, step) for r in rankers}
    return [Ranked(c, {name: scores[i] for name, scores in per_ranker.items()}) for i, c in enumerate(candidates)]
