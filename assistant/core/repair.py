"""Repair from the test output: when tests exist and no candidate passes them, show the model its best failing
candidate(s) and what failed, sample again, test the new candidates, and stop at the first round where one passes.

This is Self-Debugging's loop (Chen et al., 2023) and Aider's `--auto-test` in one library call: the prompt is
the first round's conversation (the requirement or the stub, with everything it showed) followed by the best
failing candidate as the model's answer and a user turn (`prompts/repair.jinja`) with the failing assertion or
traceback, trimmed to what matters (:mod:`assistant.core.failures`). The new candidates are
scored by the first round's rankers and tests (the caller's `score`), merged with the first round's and ranked
again, so a passing repair ranks first and is what `--apply` writes.

Defaults (:class:`RepairOptions`): up to 2 rounds of 3 samples each, within 120 s. The budget is checked before
each round starts (a round that started finishes: its samples are already paid for), so a round that begins
just before the budget ends can run past it by one round's time.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.backends import Backend, Completion, Prompt, SamplingParams
from assistant.backends.prompts import ANSWER_PREFIX, render
from assistant.code.edit import Edit
from assistant.config import DEFAULT_REPAIR, DEFAULT_TEMPERATURE, REPAIR_BUDGET_S, REPAIR_N
from assistant.core.candidates import Candidate, collect, normal_form
from assistant.core.generation import GenerateResult, plan_candidates
from assistant.core.rank import Ranked, Score, may_write, passed_tests, verdicts_of
from assistant.core.target import Target
from assistant.errors import AssistError, Cancelled
from assistant.progress import Progress

if TYPE_CHECKING:
    from assistant.core.stubs import Stub

SHOWN_FAILING = 2  # failing candidates shown in a repair prompt: the best as the model's answer, one more in the turn

# Scores the new candidates of a round (with their edits, None without a target file) as the first round's were:
# the same rankers and tests, same names. Returns them ranked or not; the loop sorts.
ScoreNew = Callable[[list[Candidate], list[Edit | None]], list[Ranked]]


@dataclass(frozen=True)
class RepairOptions:
    """How much repair: `rounds` (0: none), `budget_s` (seconds for all rounds, checked before each), `n`
    (samples per round)."""

    rounds: int = DEFAULT_REPAIR
    budget_s: float = REPAIR_BUDGET_S
    n: int = REPAIR_N


@dataclass(frozen=True)
class RepairTask:
    """What the candidates were for: the target file as read (None without one), the stub filled (its
    qualified name; None for a plain requirement), where display paths are relative to, the first round's
    sampling parameters (temperature, top-p, token limit and seed carry over), the file's definitions a plain
    request's candidates may replace (the request's: a repair's edits follow the first round's rule), and the
    stub as the request found it (None: found again in `target`)."""

    target: Target | None = None
    function: str | None = None
    root: Path | None = None
    params: SamplingParams = field(default_factory=SamplingParams)
    replace: tuple[str, ...] = ()
    stub: Stub | None = field(default=None, repr=False)


@dataclass(frozen=True)
class RepairRound:
    """One round: how many new candidates it gave, how many passed every test, and its seconds."""

    number: int
    candidates: int
    passes: int
    seconds: float
    best: str = ""  # the best new candidate's test verdict, for people
    repeats: int = 0  # samples that were a candidate already held (same syntax tree): the model did not move

    def to_json(self) -> dict:
        return {
            "round": self.number,
            "candidates": self.candidates,
            "passes": self.passes,
            "seconds": round(self.seconds, 3),
            "best": self.best,
            "repeats": self.repeats,
        }


@dataclass
class Repaired:
    """The result after repair (the first round's candidates and the repairs, ranked together), each round, why
    the loop stopped, and which candidates (by sample number) each round added."""

    result: GenerateResult
    rounds: list[RepairRound]
    # "passed", "rounds", "budget", "off", "no candidate", "no tests", "already passed", or "error: ..."
    stopped: str
    seconds: float = 0.0
    first_passed: bool = False  # whether a first-round candidate passed every test
    origin: dict[int, int] = field(default_factory=dict)  # sample number -> the round that made it
    error: AssistError | None = None  # what stopped it when `stopped` is "error: ...", for a door's own wording

    @property
    def passed(self) -> bool:
        """Whether a candidate now passes every test, so that one may be written (:func:`may_write`)."""
        return may_write(self.result.candidates, tested=True).position is not None

    def to_json(self) -> dict:
        return {
            "rounds": [r.to_json() for r in self.rounds],
            "stopped": self.stopped,
            "seconds": round(self.seconds, 3),
            "first_passed": self.first_passed,
            "passed": self.passed,
            "repaired_samples": {str(sample): number for sample, number in sorted(self.origin.items())},
        }


def verdict(item: Ranked) -> Score | None:
    """The candidate's first failing test verdict, else its first (None: no tests ran on it)."""
    scores = verdicts_of(item)
    failing = [score for score in scores if score.details.get("status") != "passed"]
    return (failing or scores or [None])[0]


def failure_of(item: Ranked) -> str:
    """What the tests said of a failing candidate: the failure kept with its verdict, else its one-line why."""
    score = verdict(item)
    if score is None:
        return ""
    return str(score.details.get("failure") or score.why)


def repair_prompt(result: GenerateResult, failing: Sequence[Ranked], function: str | None) -> Prompt:
    """The first round's prompt, then the best failing candidate as the model's answer and a user turn
    (`repair.jinja`) with its failure and the next failing candidate's; the answer starts as the first round's did
    (a stub's own head, where the backend prefills)."""
    best, *others = failing
    prefilled = function is not None and result.prompt.answer_prefix != ANSWER_PREFIX
    name = function.rsplit(".", 1)[-1] if function else ""
    turn = render(
        "repair.jinja",
        failure=failure_of(best),
        others=[{"code": item.candidate.code.strip("\n"), "failure": failure_of(item)} for item in others],
        name=name,
        prefilled=prefilled,
    )
    answer = render("answer.jinja", code=best.candidate.code.strip("\n"))
    messages = (*result.prompt.messages, {"role": "assistant", "content": answer}, {"role": "user", "content": turn})
    return replace(result.prompt, messages=messages)


def read_candidates(
    completions: Sequence[Completion], result: GenerateResult, task: RepairTask, first: int
) -> tuple[list[Candidate], list[Edit | None], int]:
    """The round's new candidates (numbered from sample `first`) and their edits, read as the first round's
    were: a stub's bodies put into its file, a plain request's code merged into the target file (if any) by the
    first round's rule (:func:`plan_candidates`, with the definitions `task.replace` names). Candidates the result
    already holds (same syntax tree) are dropped, and counted (the last value)."""
    seen = {normal_form(item.candidate.code) for item in result.candidates}
    if task.function is not None and task.target is not None:
        pairs = _stub_candidates(completions, result, task)
    else:
        kept, planned, *_ = plan_candidates(collect(completions)[0], task.target, task.root, task.replace)
        pairs = [(candidate, planned.get(candidate.sample)) for candidate in kept]
    fresh = [(c, e) for c, e in pairs if normal_form(c.code) not in seen]
    return [replace(c, sample=first + c.sample) for c, _ in fresh], [e for _, e in fresh], len(pairs) - len(fresh)


def _stub_candidates(
    completions: Sequence[Completion], result: GenerateResult, task: RepairTask
) -> list[tuple[Candidate, Edit | None]]:
    from assistant.core.stubs import collect_stub, find_stub
    from assistant.core.stubs.fill import plan_candidates as plan_stub_candidates

    assert task.target is not None and task.function is not None
    target = task.target
    stub = task.stub or find_stub(
        target.text, task.function, str(target.given), requirement_given=True, tree=target.tree
    )
    prefix = result.prompt.answer_prefix.removeprefix(ANSWER_PREFIX)
    defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    existing = [n.name for n in ast.walk(target.tree) if isinstance(n, defined) and n.name != stub.name]
    kept, _, _ = collect_stub(completions, stub, prefix, existing)
    return plan_stub_candidates(target, stub, kept, task.root)


def _merge(result: GenerateResult, new: Sequence[Ranked], edits: Sequence[Edit | None], samples: int) -> GenerateResult:
    """`result` with the new candidates added and everything ranked again by the result's rankers."""
    by_sample = {item.candidate.sample: edit for item, edit in zip(result.candidates, result.edits, strict=True)}
    by_sample.update({item.candidate.sample: edit for item, edit in zip(new, edits, strict=True)})
    ranked = sorted([*result.candidates, *new], key=lambda item: item.key(result.rankers))
    return replace(
        result,
        candidates=ranked,
        edits=[by_sample[item.candidate.sample] for item in ranked],
        samples=result.samples + samples,
    )


def _round_params(task: RepairTask, options: RepairOptions, result: GenerateResult, number: int) -> SamplingParams:
    """Sampling for a round: `options.n` samples, never greedy (n greedy samples would be one), the first
    round's token limit, and a seed moved per round."""
    first = task.params
    return replace(
        first,
        n=options.n,
        temperature=first.temperature or DEFAULT_TEMPERATURE,
        max_new_tokens=result.max_new_tokens or first.max_new_tokens,
        seed=None if first.seed is None else first.seed + 104729 * number,
    )


def _sample_round(
    task: RepairTask, result: GenerateResult, backend: Backend, options: RepairOptions, number: int, report: Progress
) -> list[Completion]:
    """One round's samples from :func:`repair_prompt` on the best failing candidates; its stage names the round,
    so a status line shows it live."""
    stage = f"repair round {number} of {options.rounds}: sampling again from the test output"
    report(stage, 0, options.n)
    failing = [item for item in result.candidates if verdicts_of(item) and not passed_tests(item)]
    # The best by tests passed (the ranking may put another ranker first); ties keep the ranking's order.
    failing = sorted(failing, key=lambda item: -min(score.value for score in verdicts_of(item)))[:SHOWN_FAILING]
    prompt = repair_prompt(result, failing, task.function)
    params = _round_params(task, options, result, number)
    return backend.sample(prompt, params, step=lambda done, total: report(stage, done, total))


def _score_round(
    task: RepairTask, result: GenerateResult, completions: Sequence[Completion], score: ScoreNew
) -> tuple[GenerateResult, list[Ranked], int]:
    """The round's new candidates scored (`score`) and ranked with the others; also the new ones alone, and how
    many samples repeated a candidate already held."""
    first = max((item.candidate.sample for item in result.candidates), default=-1) + 1
    candidates, edits, repeats = read_candidates(completions, result, task, first)
    ranked = score(candidates, edits) if candidates else []
    by_sample = dict(zip((c.sample for c in candidates), edits, strict=True))
    merged = _merge(result, ranked, [by_sample[item.candidate.sample] for item in ranked], len(completions))
    return merged, ranked, repeats


def _checked(result: GenerateResult, options: RepairOptions) -> Repaired | None:
    """The answer when no round should run (off, nothing to repair, no tests, one passes already), else None."""
    first_passed = may_write(result.candidates, tested=True).position is not None
    if options.rounds <= 0:
        return Repaired(result, [], "off", first_passed=first_passed)
    if not result.candidates:
        return Repaired(result, [], "no candidate")
    if not any(verdicts_of(item) for item in result.candidates):
        return Repaired(result, [], "no tests")
    if first_passed:
        return Repaired(result, [], "already passed", first_passed=True)
    return None


def repair(
    task: RepairTask,
    result: GenerateResult,
    backend: Backend,
    options: RepairOptions,
    score: ScoreNew,
    *,
    progress: Progress | None = None,
    on_round: Callable[[RepairRound], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Repaired:
    """Repair rounds on `result` (its candidates ranked, with their test verdicts) until a candidate passes every
    test, `options.rounds` ran, or `options.budget_s` is spent (checked before each round). Each round samples
    `options.n` candidates from :func:`repair_prompt`, scores them with `score` and ranks them with the others;
    `on_round` hears each round as it ends. Nothing runs without tests, or when a candidate already passes."""
    done = _checked(result, options)
    if done is not None:
        return done
    report = progress or (lambda stage, done, total: None)
    started = clock()
    rounds: list[RepairRound] = []
    origin: dict[int, int] = {}
    stopped, error = "rounds", None
    for number in range(1, options.rounds + 1):
        if clock() - started >= options.budget_s:
            stopped = "budget"
            break
        round_started = clock()
        try:
            completions = _sample_round(task, result, backend, options, number, report)
        except Cancelled:
            raise
        except AssistError as exc:  # the longer prompt no longer fits, a server failed: the first round's stand
            stopped, error = f"error: {exc}", exc
            break
        result, ranked, repeats = _score_round(task, result, completions, score)
        origin.update({item.candidate.sample: number for item in ranked})
        good = sum(passed_tests(item) for item in ranked)
        top = verdict(min(ranked, key=lambda item: item.key(result.rankers))) if ranked else None
        shown = top.why if top is not None else "no new candidate"
        rounds.append(RepairRound(number, len(ranked), good, clock() - round_started, shown, repeats))
        if on_round is not None:
            on_round(rounds[-1])
        if good:
            stopped = "passed"
            break
    seconds = clock() - started
    result = replace(result, timings={**result.timings, "repair": seconds})
    return Repaired(result, rounds, stopped, seconds, False, origin, error)
