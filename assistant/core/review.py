"""`reviewer` and `coder-reviewer`: rank candidates by how well each explains the requirement.

Coder-Reviewer reranking (Zhang et al., 2022): a candidate that does what was asked makes the request itself
likely. The reviewer score is the mean token log-probability of the requirement given the candidate,
log p(requirement | code), under the same model (`review_request.jinja`); `coder-reviewer` adds the usual
coder score, the mean log-probability of the code given the prompt (the `logprob` ranker's). Both are means
per token, the paper's normalized variant. The candidate is shown without docstrings or comments: one that
copied the requirement into its docstring would otherwise explain it perfectly whatever its body does. No
training, no execution: one batched scoring call over the candidates.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence

from assistant.backends import Backend, Step
from assistant.backends.prompts import build_review_prompt
from assistant.cache import JsonlCache, LayeredCache, cache_key
from assistant.code.docstrings import bare_code
from assistant.core.candidates import Candidate
from assistant.core.rank import LogprobRanker, Problem, Score
from assistant.errors import UsageError

# Recent reviewer scores per backend, by (code, requirement): `reviewer` and `coder-reviewer` ranking the same
# candidates (an evaluation measures both) make the scoring call once. The memo goes with its backend.
_MEMO: weakref.WeakKeyDictionary[Backend, OrderedDict[tuple[str, str], float]] = weakref.WeakKeyDictionary()
_MEMO_SIZE = 4096


def review_key(backend: Backend, requirement: str, bare: str) -> str:
    """Where a reviewer score is kept in a persistent cache: the model, the scoring prompt and the requirement.
    `bare` is the candidate as the reviewer sees it (`bare_code` of its code, applied once)."""
    prompt = build_review_prompt(bare)
    return cache_key(kind="review", model=backend.model, prompt=prompt.to_json(), requirement=requirement)


def review_scores(
    backend: Backend, requirement: str, codes: Sequence[str], cache: JsonlCache | LayeredCache | None = None
) -> list[float]:
    """Mean log p(requirement | code) for each code, one batched call for those not scored recently (nor kept in
    `cache`, an evaluation's: a resumed or extended run scores each candidate once)."""
    memo = _MEMO.setdefault(backend, OrderedDict())
    keys = [(bare_code(code), requirement) for code in codes]
    todo = list(dict.fromkeys(key for key in keys if key not in memo))
    stored = {key: review_key(backend, key[1], key[0]) for key in todo} if cache is not None else {}
    for key, where in stored.items():
        if where in cache:
            memo[key] = cache.get(where)
            todo.remove(key)
    if todo:
        results = backend.logprob([(build_review_prompt(code), text) for code, text in todo])
        for key, result in zip(todo, results, strict=True):
            memo[key] = result.mean
            if cache is not None:
                cache.put(stored[key], result.mean)
    for key in keys:
        memo.move_to_end(key)
    while len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)
    return [memo[key] for key in keys]


def forget_reviews(backend: Backend) -> None:
    """Drop the scores kept for `backend` (a benchmark timing each ranker alone needs every call made)."""
    _MEMO.pop(backend, None)


class ReviewerRanker:
    """log p(requirement | code) per token; with `coder`, plus log p(code | prompt) per token."""

    def __init__(self, backend: Backend, coder: bool = False) -> None:
        if not backend.can_score:
            raise UsageError(
                f"the reviewer rankers are unavailable with {backend.model}: {backend.scoring_unavailable}; "
                "use the agree ranker, or logprob",
                setting="ranker:reviewer",
                values={"model": backend.model, "why": backend.scoring_unavailable},
            )
        self.backend = backend
        self.coder = LogprobRanker(backend) if coder else None
        self.name = "coder-reviewer" if coder else "reviewer"
        self.cache: JsonlCache | LayeredCache | None = None  # an evaluation's; `generate` scores each time

    def score(self, problem: Problem, candidates: Sequence[Candidate], step: Step | None = None) -> list[Score]:
        if not candidates:
            return []
        reviews = review_scores(self.backend, problem.requirement.strip(), [c.code for c in candidates], self.cache)
        if self.coder is None:
            return [
                Score(value, f"requirement given the code: mean log-prob {value:.3f}", {"reviewer": value})
                for value in reviews
            ]
        coded = self.coder.score(problem, candidates, step)
        return [
            Score(
                review + code.value,
                f"code given the prompt {code.value:.3f} + requirement given the code {review:.3f}",
                {"coder": code.value, "reviewer": review},
            )
            for review, code in zip(reviews, coded, strict=True)
        ]
