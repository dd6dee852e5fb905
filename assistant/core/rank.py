"""Rankers: score candidates for a problem. One interface, `score(problem, candidates) -> list[Score]`.

`first` (sampling order), `random` (seeded), `logprob` (mean token log-probability under the local
model), `exec` (tests passed in the sandbox) and `condor` (p(correct) from the trained discriminator,
:mod:`assistant.methods.condor.model`). Rankers combine with `+`: `exec+logprob` orders by tests passed, then by
log-probability.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from assistant.backends import Backend
from assistant.backends.prompts import Prompt
from assistant.core.candidates import Candidate
from assistant.errors import UsageError


@dataclass(frozen=True)
class Problem:
    """What the candidates were generated for."""

    requirement: str
    prompt: Prompt
    tests: tuple[str, ...] = ()
    setup: str = ""


@dataclass(frozen=True)
class Score:
    """A ranker's verdict on one candidate: higher is better; `why` is for people."""

    value: float
    why: str
    details: dict = field(default_factory=dict)


class Ranker(Protocol):
    name: str

    def score(self, problem: Problem, candidates: Sequence[Candidate]) -> list[Score]: ...


class FirstRanker:
    """Keeps the sampling order: the baseline every other ranker must beat."""

    name = "first"

    def score(self, problem: Problem, candidates: Sequence[Candidate]) -> list[Score]:
        return [Score(-float(c.sample), f"sample #{c.sample + 1}") for c in candidates]


class RandomRanker:
    """A seeded random order (a baseline for evaluation)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def score(self, problem: Problem, candidates: Sequence[Candidate]) -> list[Score]:
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

    def score(self, problem: Problem, candidates: Sequence[Candidate]) -> list[Score]:
        values: dict[int, list[float]] = {i: list(c.logprobs) for i, c in enumerate(candidates) if c.logprobs}
        missing = [i for i in range(len(candidates)) if i not in values]
        if missing and not self.backend.can_score:
            raise UsageError(
                f"the logprob ranker is unavailable: {self.backend.model} returned no log-probabilities and "
                f"{self.backend.scoring_unavailable}; use --ranker first, or exec with --test"
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

    def score(self, problem: Problem, candidates: Sequence[Candidate]) -> list[Score]:
        from assistant import sandbox

        if not problem.tests:
            return [Score(0.0, "no tests") for _ in candidates]
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
            scores.append(Score(result.passed / max(result.total, 1), why, {"status": result.status}))
        return scores


class CondorRanker:
    """p(correct) from the trained discriminator (Condor): no execution, no tests needed."""

    name = "condor"

    def __init__(self, start: Path | None = None) -> None:
        from assistant.methods.condor.model import Condor

        self.model = Condor.locate(start)

    def score(self, problem: Problem, candidates: Sequence[Candidate]) -> list[Score]:
        probabilities = self.model.probabilities(problem.requirement, [c.code for c in candidates])
        return [Score(p, f"p(correct) {p:.2f} by Condor", {"p": round(p, 4)}) for p in probabilities]


def condor_available(start: Path | None = None) -> bool:
    """Whether a trained discriminator exists for `start` (the working directory by default)."""
    from assistant.methods.condor.model import find_discriminator

    return find_discriminator(start) is not None


RankerFactory = Callable[[Backend | None], Ranker]


def _needs_backend(backend: Backend | None) -> Backend:
    if backend is None or not hasattr(backend, "logprob"):
        raise UsageError("the logprob ranker needs a backend that returns log-probabilities")
    return backend


RANKERS: dict[str, RankerFactory] = {
    "first": lambda backend: FirstRanker(),
    "random": lambda backend: RandomRanker(),
    "logprob": lambda backend: LogprobRanker(_needs_backend(backend)),
    "exec": lambda backend: ExecRanker(),
    "condor": lambda backend: CondorRanker(),
}


def parse_rankers(spec: str) -> list[str]:
    """`exec+logprob` → ["exec", "logprob"]; empty or unknown names are a one-line error."""
    names = [part.strip() for part in spec.split("+") if part.strip()]
    if not names:
        raise UsageError("no ranker given")
    unknown = [n for n in names if n not in RANKERS]
    if unknown:
        raise UsageError(f"unknown ranker {unknown[0]!r}; choose from: {', '.join(RANKERS)} (combine with +)")
    return names


def make_rankers(spec: str, backend: Backend | None) -> list[Ranker]:
    """`exec+logprob` → [ExecRanker, LogprobRanker]."""
    return [RANKERS[n](backend) for n in parse_rankers(spec)]


@dataclass(frozen=True)
class Ranked:
    """A candidate with every ranker's score; ranking is lexicographic in the rankers' order."""

    candidate: Candidate
    scores: dict[str, Score]

    def key(self, names: Sequence[str]) -> tuple[float, ...]:
        """Sort key, best first: a candidate that also wrote other definitions (dropped from its edit) after every
        one that did not, whatever its scores; then scores in the rankers' order (negated); ties in sampling order.

        Copying a neighbour back is the likeliest text a small model can write, so its log-probability is
        high exactly when it went off task."""
        return (float(bool(self.candidate.dropped)), *(-self.scores[n].value for n in names), self.candidate.sample)


def rank(problem: Problem, candidates: Sequence[Candidate], rankers: Sequence[Ranker]) -> list[Ranked]:
    """Score candidates with each ranker and sort best first (ties keep sampling order)."""
    per_ranker = {r.name: r.score(problem, candidates) for r in rankers}
    ranked = [Ranked(c, {name: scores[i] for name, scores in per_ranker.items()}) for i, c in enumerate(candidates)]
    names = [r.name for r in rankers]
    return sorted(ranked, key=lambda item: item.key(names))
