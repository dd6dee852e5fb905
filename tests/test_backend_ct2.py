"""The CTranslate2 engine (`local-ct2`) against the transformers fp32 backend, on the real 0.5B model.

Skipped where the optional `fast` extra (ctranslate2) is not installed. The first run converts the model to
CTranslate2 int8 once (~20 s). Tolerances are the measured differences with some headroom: int8 weights move a
token's log-probability by about 0.01 on average (0.13 at most on these prompts) and the mean over a continuation
by 0.003 to 0.031 (unlikely text by up to 0.1).
"""

from __future__ import annotations

import pytest

from assistant.backends import SamplingParams
from assistant.backends.prompts import build_prompt

from .conftest import PLUMBING_MODEL
from .helpers_engines import (
    REQUIREMENTS,
    check_cancel_at_next_token,
    check_seeded_samples,
    check_teacher_forced_scores,
    first_difference,
)

pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def ct2():
    from assistant.backends.ct2 import CT2Backend

    return CT2Backend.load(PLUMBING_MODEL)


def test_identity_keeps_its_samples_and_scores_apart_from_transformers(ct2, fp32) -> None:
    assert ct2.identity.kind == "local-ct2" != fp32.identity.kind
    assert ct2.identity.label == "qwen2.5-coder-0.5b@ct2-int8" != fp32.identity.label
    assert ct2.count_tokens(build_prompt(REQUIREMENTS[0])) == fp32.count_tokens(build_prompt(REQUIREMENTS[0]))


@pytest.mark.parametrize(
    ("requirement", "agree"),
    # The second prompt's int8 greedy answer takes another word in a comment at character 298 ("Use" for
    # "Using", a near tie), then runs on its own way; everything before that matches.
    [(REQUIREMENTS[0], None), (REQUIREMENTS[1], 250)],
)
def test_greedy_output_and_its_logprobs_match_transformers_fp32(ct2, fp32, requirement: str, agree) -> None:
    prompt = build_prompt(requirement)
    params = SamplingParams(n=1, temperature=0, max_new_tokens=160)
    (fast,) = ct2.sample(prompt, params)
    (slow,) = fp32.sample(prompt, params)
    at = first_difference(fast.text, slow.text)
    if agree is None:
        assert fast.text == slow.text, f"int8 diverges at character {at}: {fast.text[at - 20 : at + 20]!r}"
        assert fast.tokens == slow.tokens
        shared = len(fast.logprobs)
    else:
        assert at >= agree
        shared = len(fp32.tokenizer(fast.text[:at], add_special_tokens=False)["input_ids"]) - 1
    assert fast.finish_reason == slow.finish_reason == "stop"
    assert shared > 5
    differences = [abs(a - b) for a, b in zip(fast.logprobs[:shared], slow.logprobs[:shared], strict=True)]
    assert sum(differences) / len(differences) < 0.03
    assert max(differences) < 0.3
    mean = sum(fast.logprobs[:shared]) / shared - sum(slow.logprobs[:shared]) / shared
    assert abs(mean) < 0.03


def test_teacher_forced_scores_match_transformers_fp32(ct2, fp32) -> None:
    # Likely answers' means, measured: 0.003 and 0.031 on one CPU, up to 0.067 on one without native bf16 (int8
    # kernels differ by CPU). Unlikely text moves more: tokens at log-probability -8 to -20 differ by up to 0.8 in
    # int8 (an answer to the other prompt: `similar` after "add two numbers"), so a short unlikely continuation's
    # mean moves by ~0.1.
    check_teacher_forced_scores(ct2, fp32, likely_within=0.1)


def test_samples_differ_at_temperature_and_a_seed_reproduces_them(ct2) -> None:
    check_seeded_samples(ct2)


def test_a_step_that_raises_cancels_at_the_next_token(ct2) -> None:
    check_cancel_at_next_token(ct2)
