"""The Condor ranker: p(correct) from the trained discriminator, as a :class:`~assistant.core.rank.Ranker`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from assistant.backends import Step
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem, Score


class CondorRanker:
    """p(correct) from the trained discriminator (Condor): no execution, no tests needed."""

    name = "condor"

    def __init__(self, start: Path | None = None, generator: str | None = None) -> None:
        """The discriminator for `start` trained for `generator`, the model whose candidates it ranks (None:
        whichever is there)."""
        from assistant.methods.condor.model import Condor

        self.model = Condor.locate(start, generator)

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        probabilities = self.model.probabilities(problem.requirement, [c.code for c in candidates])
        return [Score(p, f"p(correct) {p:.2f} by Condor", {"p": round(p, 4)}) for p in probabilities]


def condor_available(start: Path | None = None, generator: str | None = None) -> bool:
    """Whether a trained discriminator exists for `start` (the working directory by default) that serves
    `generator` (None: any)."""
    from assistant.methods.condor.model import find_discriminator

    return find_discriminator(start, generator) is not None
