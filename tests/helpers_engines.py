"""What every int8 local engine (tests/test_backend_ov.py, tests/test_backend_ct2.py) is held to against the
transformers fp32 backend on the same model: the prompts, and the checks whose tolerances the engines share (a
check takes the engine's own where they differ). They run with the model-backed tests."""

from __future__ import annotations

import time
from typing import Any

import pytest

from assistant.backends import Backend, Completion, SamplingParams
from assistant.backends.prompts import Prompt, build_prompt
from assistant.errors import Cancelled

REQUIREMENTS = [
    "Write a python function to add two numbers.",
    "Write a function to find the shared elements from the given two lists.",
]


def first_difference(a: str, b: str) -> int:
    """The first character at which two texts differ (the shorter one's length where one begins the other)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def check_teacher_forced_scores(engine: Backend, fp32: Any, likely_within: float) -> None:
    """Scores of likely answers match fp32's (the same tokens, means within `likely_within`), unlikely ones within
    0.15; an empty text scores -inf; scoring the engine's own greedy sample gives back what sampling recorded."""
    answers = ["def add(a, b):\n    return a + b\n", "def similar(a, b):\n    return set(a) & set(b)\n"]
    pairs = [(build_prompt(r), code) for r, code in zip(REQUIREMENTS, answers, strict=True)]
    pairs.append((build_prompt(REQUIREMENTS[0]), ""))
    fast, slow = engine.logprob(pairs), fp32.logprob(pairs)
    for a, b in zip(fast[:-1], slow[:-1], strict=True):
        assert a.tokens == b.tokens
        assert abs(a.mean - b.mean) < likely_within
    # Unlikely text: an answer to the other prompt, and a line that answers neither.
    far = [(build_prompt(REQUIREMENTS[1 - i]), code) for i, code in enumerate(answers)] + [
        (build_prompt(REQUIREMENTS[0]), "x = 1\n")
    ]
    for a, b in zip(engine.logprob(far), fp32.logprob(far), strict=True):
        assert abs(a.mean - b.mean) < 0.15
    assert fast[-1].logprobs == [] and fast[-1].mean == float("-inf")
    # Scoring its own sample gives back (nearly) the log-probabilities recorded while sampling.
    prompt = build_prompt(REQUIREMENTS[0])
    (sample,) = engine.sample(prompt, SamplingParams(n=1, temperature=0, max_new_tokens=160))
    (scored,) = engine.logprob([(prompt, sample.text)])
    assert abs(scored.mean - sum(sample.logprobs) / len(sample.logprobs)) < 0.03


def check_seeded_samples(engine: Backend) -> tuple[Prompt, list[Completion]]:
    """Four samples at temperature 0.8 differ, carry log-probabilities, and the same seed draws them again; returns
    the prompt and the samples for the engine's own further checks."""
    prompt = build_prompt(REQUIREMENTS[1])
    params = SamplingParams(n=4, temperature=0.8, top_p=0.95, max_new_tokens=48, seed=7)
    first = engine.sample(prompt, params)
    assert len(first) == 4 and len({c.text for c in first}) > 1
    assert all(c.logprobs and len(c.logprobs) <= c.tokens and all(v <= 0 for v in c.logprobs) for c in first)
    assert [c.text for c in engine.sample(prompt, params)] == [c.text for c in first]
    return prompt, first


def check_cancel_at_next_token(engine: Backend) -> None:
    """A step that raises stops sampling at the next token, within seconds, and the engine samples again after."""
    seen = []

    def step(done: int, total: int) -> None:
        seen.append((done, total))
        if done >= 3:
            raise Cancelled("stopped")

    started = time.perf_counter()
    with pytest.raises(Cancelled):
        engine.sample(build_prompt(REQUIREMENTS[1]), SamplingParams(n=2, max_new_tokens=300, seed=1), step)
    assert time.perf_counter() - started < 10
    assert seen[0] == (0, 300) and seen[-1] == (3, 300)
    # The backend is usable after a cancelled call.
    (again,) = engine.sample(build_prompt(REQUIREMENTS[0]), SamplingParams(n=1, temperature=0, max_new_tokens=8))
    assert again.tokens == 8 and again.finish_reason == "length"
