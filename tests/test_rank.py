import pytest

from assistant.backends import TokenLogprobs
from assistant.backends.prompts import build_prompt
from assistant.core.candidates import Candidate
from assistant.core.rank import ExecRanker, FirstRanker, LogprobRanker, Problem, rank
from assistant.errors import UsageError
from assistant.pipeline.registry import make_rankers

GOOD = Candidate("def add(a, b):\n    return a + b", sample=1)
BAD = Candidate("def add(a, b):\n    return a - b", sample=0)
PROBLEM = Problem(
    "add two numbers", build_prompt("add two numbers"), tests=("assert add(0, 0) == 0", "assert add(1, 2) == 3")
)


def test_exec_ranker_runs_tests_in_the_sandbox_and_outranks_sampling_order():
    ranked = rank(PROBLEM, [BAD, GOOD], [ExecRanker(timeout_s=5), FirstRanker()])
    assert [r.candidate for r in ranked] == [GOOD, BAD]
    assert ranked[0].scores["exec"].value == 1.0 and ranked[0].scores["exec"].why == "2/2 tests passed"
    assert ranked[1].scores["exec"].value == 0.5 and "failed: assert add(1, 2) == 3" in ranked[1].scores["exec"].why


class FakeScorer:
    """Isolates LogprobRanker from a real model: returns fixed log-probabilities and records what it was asked."""

    name = "fake"
    can_score = True

    def __init__(self):
        self.asked = []

    def logprob(self, pairs):
        self.asked.extend(code for _, code in pairs)
        return [TokenLogprobs(tokens=["a", "b"], logprobs=[-2.0, -2.0]) for _ in pairs]


def test_logprob_ranker_uses_recorded_logprobs_and_scores_only_the_rest():
    scorer = FakeScorer()
    recorded = Candidate("x = 1", sample=0, logprobs=(-0.1, -0.3))
    plain = Candidate("x = 2", sample=1)
    scores = LogprobRanker(scorer).score(PROBLEM, [recorded, plain])
    assert scorer.asked == ["x = 2"]
    assert scores[0].value == pytest.approx(-0.2) and scores[1].value == pytest.approx(-2.0)


def test_make_rankers_parses_combinations_and_rejects_unknown():
    assert [r.name for r in make_rankers("exec+first", None)] == ["exec", "first"]
    with pytest.raises(UsageError, match="unknown ranker 'condr'"):
        make_rankers("exec+condr", None)
    with pytest.raises(UsageError, match="needs a backend"):
        make_rankers("logprob", None)
