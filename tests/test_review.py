"""The `reviewer` and `coder-reviewer` rankers (Coder-Reviewer): log p(requirement | code) from a scorer that
stands in for the model here (the real model's scores are checked in test_backend_ov.py)."""

from __future__ import annotations

import pytest

from assistant.backends import TokenLogprobs
from assistant.backends.prompts import Prompt
from assistant.core.agreement import AgreementRanker, free_names
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem, rank
from assistant.core.review import ReviewerRanker, forget_reviews
from assistant.errors import UsageError
from assistant.pipeline.registry import make_rankers

from .conftest import ScriptedBackend

REQUIREMENT = "Return the largest of three numbers."
RIGHT = 'def biggest(a, b, c):\n    """Return the largest of three numbers."""\n    return max(a, b, c)  # easy\n'
WRONG = 'def biggest(a, b, c):\n    """Return the largest of three numbers."""\n    return a\n'


class ReviewScorer:
    """Isolates the ranker from a model: the requirement is likelier after code that calls `max`; records the
    prompts it scored."""

    model = "review-scorer"
    can_score = True
    scoring_unavailable = ""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def logprob(self, pairs: list[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        results = []
        for prompt, text in pairs:
            shown = prompt.messages[-1]["content"]
            self.shown.append(shown)
            value = -0.5 if "max(" in shown else -1.5
            results.append(TokenLogprobs(tokens=text.split(), logprobs=[value] * len(text.split())))
        return results


def problem() -> Problem:
    return Problem(requirement=REQUIREMENT, prompt=Prompt(messages=({"role": "user", "content": REQUIREMENT},)))


def test_the_reviewer_prefers_the_code_that_explains_the_requirement_and_hides_docstrings() -> None:
    scorer = ReviewScorer()
    ranker = make_rankers("reviewer", scorer)[0]
    ranked = rank(problem(), [Candidate(WRONG, 0), Candidate(RIGHT, 1)], [ranker])
    assert [r.candidate.sample for r in ranked] == [1, 0]
    assert ranked[0].scores["reviewer"].value == pytest.approx(-0.5)
    assert "requirement given the code" in ranked[0].scores["reviewer"].why
    # Neither the docstring (a copy of the requirement) nor the comment reaches the model.
    assert len(scorer.shown) == 2 and all(REQUIREMENT not in shown and "# easy" not in shown for shown in scorer.shown)


def test_coder_reviewer_adds_the_code_likelihood_and_reuses_the_reviewers_scores() -> None:
    scorer = ReviewScorer()
    reviewer, both = make_rankers("reviewer+coder-reviewer", scorer)
    # The coder score favours the wrong one by less than the reviewer favours the right one.
    candidates = [Candidate(WRONG, 0, logprobs=(-0.2,)), Candidate(RIGHT, 1, logprobs=(-0.6,))]
    reviewer.score(problem(), candidates)
    scores = both.score(problem(), candidates)
    assert len(scorer.shown) == 2  # the second ranker asked the model nothing new
    forget_reviews(scorer)  # as a benchmark timing each ranker alone does: the next one pays again
    reviewer.score(problem(), candidates)
    assert len(scorer.shown) == 4
    assert [s.value for s in scores] == [pytest.approx(-1.7), pytest.approx(-1.1)]
    assert scores[1].details == {"coder": pytest.approx(-0.6), "reviewer": pytest.approx(-0.5)}


def test_a_backend_that_cannot_score_is_a_one_line_error() -> None:
    with pytest.raises(UsageError, match="reviewer rankers are unavailable"):
        ReviewerRanker(ScriptedBackend(scores=False))
    with pytest.raises(UsageError, match="the coder-reviewer ranker needs a backend"):
        make_rankers("coder-reviewer", None)


def test_free_names_are_what_code_needs_from_elsewhere() -> None:
    code = (
        "import os\nfrom typing import List as L\n"
        "def f(a: L[int], *b, **c):\n    x = [y for y in a]\n    try:\n        pass\n"
        "    except ValueError as e:\n        print(e)\n    return helper(x) + os.sep + CONST\n"
    )
    assert free_names(code) == {"helper", "CONST"}
    assert free_names(RIGHT) == set() and free_names("not python (") == set()


def test_agree_asks_the_model_nothing_when_no_candidate_can_run_alone() -> None:
    backend = ScriptedBackend(["assert biggest(1, 2, 3) == 3\n```"])
    needs_file = "def biggest(a, b, c):\n    return _pick(a, b, c)\n"
    scores = AgreementRanker(backend).score(problem(), [Candidate(needs_file, 0), Candidate(needs_file, 1)])
    assert backend.calls == 0 and [s.value for s in scores] == [0.0, 0.0]
    assert scores[0].why == "cannot run alone: needs _pick from elsewhere"
