"""The OpenVINO engine (`local-ov`, the default local engine) against the transformers fp32 backend, on the real
0.5B model.

The first run converts the model to OpenVINO int8 once (~30 s). Tolerances are the measured differences with some
headroom (see each test).
"""

from __future__ import annotations

import time

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

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def ov():
    from assistant.backends.ov import OpenVINOBackend

    return OpenVINOBackend.load(PLUMBING_MODEL)


def test_identity_keeps_its_samples_and_scores_apart_from_transformers(ov, fp32) -> None:
    assert ov.identity.kind == "local-ov-kvf16" != fp32.identity.kind
    assert ov.identity.label == "qwen2.5-coder-0.5b@ov-int8-kvf16" != fp32.identity.label
    assert ov.count_tokens(build_prompt(REQUIREMENTS[0])) == fp32.count_tokens(build_prompt(REQUIREMENTS[0]))


@pytest.mark.parametrize(
    ("requirement", "agree"),
    # Greedy int8 output leaves fp32's at a near tie within the first line or two (measured: "Add" for "Adds" at
    # character 38; at character 58 for the second prompt), then runs on its own way, still a correct answer.
    [(REQUIREMENTS[0], 30), (REQUIREMENTS[1], 50)],
)
def test_greedy_output_and_its_logprobs_match_transformers_fp32(ov, fp32, requirement: str, agree: int) -> None:
    prompt = build_prompt(requirement)
    params = SamplingParams(n=1, temperature=0, max_new_tokens=160)
    (fast,) = ov.sample(prompt, params)
    (slow,) = fp32.sample(prompt, params)
    at = first_difference(fast.text, slow.text)
    assert at >= agree
    assert fast.finish_reason == slow.finish_reason == "stop"
    assert fast.text.startswith("def ") and "return" in fast.text
    shared = len(fp32.tokenizer(fast.text[:at], add_special_tokens=False)["input_ids"]) - 1
    assert shared > 5
    # Measured on the shared tokens: a mean difference of 0.005-0.007, 0.036 at most.
    differences = [abs(a - b) for a, b in zip(fast.logprobs[:shared], slow.logprobs[:shared], strict=True)]
    assert sum(differences) / len(differences) < 0.03
    assert max(differences) < 0.3


def test_teacher_forced_scores_match_transformers_fp32(ov, fp32) -> None:
    # Likely answers' means, measured: 0.007 and 0.027; unlikely text (an answer to the other prompt) moves more:
    # measured 0.001 to 0.039.
    check_teacher_forced_scores(ov, fp32, likely_within=0.05)


def test_samples_differ_at_temperature_and_a_seed_reproduces_them(ov) -> None:
    prompt, first = check_seeded_samples(ov)
    # The recorded values are the model's raw log-probabilities, not the tempered ones: scoring the samples gives
    # them back (measured within 0.005 on average; tempering at 0.8 would move them by a quarter).
    for sample, scored in zip(first, ov.logprob([(prompt, c.text) for c in first]), strict=True):
        assert abs(scored.mean - sum(sample.logprobs) / len(sample.logprobs)) < 0.03


def test_a_step_that_raises_cancels_at_the_next_token(ov) -> None:
    check_cancel_at_next_token(ov)


def test_a_prompts_samples_do_not_depend_on_its_batch_neighbours(ov) -> None:
    prompts = [build_prompt(r) for r in REQUIREMENTS]
    params = SamplingParams(n=3, temperature=0.8, top_p=0.95, max_new_tokens=40)
    together = ov.sample_batch(prompts, params, seeds=[11, 12])
    alone = ov.sample(prompts[1], SamplingParams(n=3, temperature=0.8, top_p=0.95, max_new_tokens=40, seed=12))
    assert [c.text for c in together[1]] == [c.text for c in alone]
    assert len(together) == 2 and all(len(own) == 3 for own in together)


def test_load_generator_picks_the_engine(ov) -> None:
    from assistant.errors import UsageError
    from assistant.pipeline.pipeline import load_generator

    assert load_generator("local", engine="openvino", context=4096).name == "local-ov"
    with pytest.raises(UsageError, match="unknown local engine 'vllm'"):
        load_generator("local", engine="vllm")


def test_the_reviewer_finds_each_requirement_likeliest_after_the_code_that_does_it(ov) -> None:
    from assistant.core.candidates import Candidate
    from assistant.core.rank import Problem
    from assistant.core.review import ReviewerRanker

    codes = ["def f(a, b):\n    return a + b\n", "def f(a, b):\n    return list(set(a) & set(b))\n"]
    candidates = [Candidate(code, i) for i, code in enumerate(codes)]
    ranker = ReviewerRanker(ov)
    for right, requirement in enumerate(REQUIREMENTS):
        scores = ranker.score(Problem(requirement, build_prompt(requirement)), candidates)
        # Measured: the matching code makes its requirement's tokens 1.4 and 0.8 nats likelier on average.
        assert scores[right].value > scores[1 - right].value + 0.2, [s.value for s in scores]


def test_a_cut_off_greedy_sample_carried_on_equals_a_greedy_draw_at_the_larger_limit(ov) -> None:
    # What generate's retry of a cut-off greedy sample rests on: carrying the 40-token text on for 40 more tokens
    # (it joins the answer's prefill) gives the 80-token greedy draw, without decoding the first 40 again.
    from assistant.core.stubs import carry_on

    prompt = build_prompt(REQUIREMENTS[1])
    (short,) = ov.sample(prompt, SamplingParams(n=1, temperature=0, max_new_tokens=40))
    (whole,) = ov.sample(prompt, SamplingParams(n=1, temperature=0, max_new_tokens=80))
    (carried,) = carry_on(ov, prompt, [short], SamplingParams(n=1, temperature=0, max_new_tokens=40))
    assert short.finish_reason == "length" and short.tokens == 40 and carried.tokens == 80
    assert carried.text == whole.text and len(carried.text) > len(short.text)
    # Measured: the summed log-probabilities differ by 0.03 nats (the re-read prefix is computed in one pass).
    assert sum(carried.logprobs) == pytest.approx(sum(whole.logprobs), abs=0.2)


def test_scores_stay_whole_when_the_prompt_was_read_before(ov) -> None:
    # Sampling reuses a prompt's attention cache (prefix caching); teacher-forced scoring must not, or the positions
    # it reused would come back without their log-probabilities. Score, sample the same prompt, score again.
    prompt = build_prompt(REQUIREMENTS[0])
    pairs = [(prompt, "def add(a, b):\n    return a + b\n")]
    (first,) = ov.logprob(pairs)
    ov.sample(prompt, SamplingParams(n=2, temperature=0.8, max_new_tokens=8, seed=3))
    (again,) = ov.logprob(pairs)
    assert again.tokens == first.tokens and len(again.logprobs) == len(first.logprobs) > 5
    assert again.logprobs == pytest.approx(first.logprobs, abs=1e-4)
    text = ov.render(prompt)  # the text sampling just read: echo gives every token's value, each time
    echoed = ov.echo(text)
    assert all(value is not None for _, _, value in echoed[1:]) and ov.echo(text) == echoed


def test_an_engine_that_reads_every_prompt_afresh_scores_on_its_one_pipeline(ov) -> None:
    from assistant.backends.ov import OpenVINOBackend

    afresh = OpenVINOBackend.load(PLUMBING_MODEL, prefix_caching=False)
    pairs = [(build_prompt(REQUIREMENTS[0]), "def add(a, b):\n    return a + b\n")]
    (scored,) = afresh.logprob(pairs)
    assert afresh._scoring_pipeline() is afresh.pipeline  # no second copy of the model
    assert ov._scoring_pipeline() is not ov.pipeline  # the default caches prefixes, so it cannot score on it
    assert scored.logprobs == pytest.approx(ov.logprob(pairs)[0].logprobs, abs=1e-4)


def test_the_default_16_bit_attention_cache_is_keyed_apart_from_u8_and_samples_as_it_does(ov) -> None:
    from assistant.backends.ov import OpenVINOBackend

    # The default (f16) is marked, so nothing drawn with u8 (every cache before it) is taken for its draws.
    assert ov.attention_cache == "f16" and ("attention cache", "f16") in ov.identity.details
    narrow = OpenVINOBackend.load(PLUMBING_MODEL, attention_cache="u8")
    assert narrow.identity.kind == "local-ov" and narrow.identity.label == "qwen2.5-coder-0.5b@ov-int8"
    assert "attention cache" not in dict(narrow.identity.details)
    # Greedy answers of both caches agree on their start (they part by rounding at near ties, if anywhere).
    params = SamplingParams(n=1, temperature=0, max_new_tokens=24)
    (narrow_answer,), (wide_answer,) = (engine.sample(build_prompt(REQUIREMENTS[0]), params) for engine in (narrow, ov))
    assert wide_answer.text[:20] == narrow_answer.text[:20] and wide_answer.tokens > 0
    assert OpenVINOBackend.load(PLUMBING_MODEL, attention_cache=None).identity == narrow.identity  # the x86 default
    with pytest.raises(ValueError, match="attention_cache is one of u8, f16"):
        OpenVINOBackend.load(PLUMBING_MODEL, attention_cache="i4")


# A child process that loads the default engine afresh and prints a digest of the five samples of the prompt in
# the file it is given (seed 0).
_DRAW = """
import hashlib, sys
from assistant.backends import SamplingParams
from assistant.backends.ov import OpenVINOBackend
engine = OpenVINOBackend.load(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
params = SamplingParams(n=5, temperature=0.8, top_p=0.95, max_new_tokens=160, seed=0)
(rows,) = engine.sample_texts([text], params, [("```",)], seeds=[0])
print(hashlib.sha256("\\0".join(row.text for row in rows).encode()).hexdigest())
"""


def test_a_seed_gives_the_same_samples_in_a_fresh_process(ov, tmp_path) -> None:
    """With OpenVINO's u8 attention cache, a prompt whose length is a whole number of the cache's 32-token blocks
    drew other samples in every process for the same seed (three processes, three sets of rows); the default f16
    cache draws the same. The prompt here is cut to such a length."""
    import inspect
    import subprocess
    import sys
    import textwrap

    source, end = inspect.getsource(textwrap), 2500
    while True:
        request = f"Given this module:\n{source[:end]}\nWrite a function that splits a paragraph into sentences."
        text = ov.render(build_prompt(request))
        if len(ov.tokenizer(text, add_special_tokens=False)["input_ids"]) % 32 == 0:
            break
        end -= 1
    path = tmp_path / "prompt.txt"
    path.write_text(text, encoding="utf-8")
    argv = [sys.executable, "-c", _DRAW, PLUMBING_MODEL, str(path)]
    digests = [subprocess.run(argv, capture_output=True, text=True, check=True).stdout for _ in range(2)]
    assert digests[0] == digests[1] and len(digests[0].strip()) == 64


def test_int4_weights_are_converted_once_keyed_apart_and_answer_as_int8_does(ov) -> None:
    from assistant.backends import models
    from assistant.backends.ov import OpenVINOBackend

    small = OpenVINOBackend.load(PLUMBING_MODEL, weights="int4")  # converted on first use (~20 s for the 0.5B)
    assert models.ov_ready(small.spec, "int4") and small.directory.name == "ov-int4"
    assert small.identity.kind == "local-ov-int4-kvf16" and small.identity.label == "qwen2.5-coder-0.5b@ov-int4-kvf16"
    assert ("precision", "int4") in small.identity.details and ov.identity.label == "qwen2.5-coder-0.5b@ov-int8-kvf16"
    # Half the bytes of int8 (the token embedding stays 8-bit), and the same model: greedy answers start alike.
    int8_bytes = (ov.directory / "openvino_model.bin").stat().st_size
    assert (small.directory / "openvino_model.bin").stat().st_size < 0.75 * int8_bytes
    params = SamplingParams(n=1, temperature=0, max_new_tokens=24)
    (wide_answer,), (small_answer,) = (engine.sample(build_prompt(REQUIREMENTS[0]), params) for engine in (ov, small))
    assert small_answer.text.startswith("def ") and wide_answer.text.startswith("def ")
    assert OpenVINOBackend.load(PLUMBING_MODEL, weights="auto").identity == ov.identity  # the 0.5B's auto: int8


def _looping_prompt():
    """A prompt the 0.5B answers by counting on, line after line, with a number changing in every line (measured:
    greedy, it was still counting at 500 tokens before the straggler check)."""
    from dataclasses import replace

    prompt = build_prompt("Write a function series(r) that sums many range tuples.")
    head = "def series(r):\n    total = 0\n" + "".join(
        f"    total += sum(tuple(range(r - 1, {k}, -1)))\n" for k in range(3, 27)
    )
    return replace(prompt, answer_prefix=prompt.answer_prefix + "```python\n" + head)


def test_a_looping_sample_is_cut_off_early_and_says_why(ov) -> None:
    started = time.perf_counter()
    (greedy,) = ov.sample(_looping_prompt(), SamplingParams(n=1, temperature=0, max_new_tokens=800))
    assert greedy.cut_reason == "looping" and greedy.finish_reason == "length"
    assert greedy.tokens < 400  # measured: 209
    assert "total += sum(tuple(range(r - 1, 30, -1)))" in greedy.text
    # Sampled rows are one-row requests, each watched on its own and seeded by its number.
    params = SamplingParams(n=3, temperature=0.8, top_p=0.95, max_new_tokens=800, seed=4)
    sampled = ov.sample(_looping_prompt(), params)
    assert len(sampled) == 3 and any(c.cut_reason == "looping" for c in sampled)
    assert all(c.tokens < 800 for c in sampled)
    assert [c.text for c in ov.sample(_looping_prompt(), params)] == [c.text for c in sampled]
    assert time.perf_counter() - started < 240


@pytest.mark.parametrize("decoding", ["speculative", "prompt-lookup"])
def test_drafted_decoding_follows_the_plain_greedy_answer(ov, decoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The 0.5B drafting for itself runs the same plumbing as the 0.5B drafting for the 1.5B, at a test's cost.
    from assistant.backends import ov as engine

    monkeypatch.setitem(engine.DRAFT_MODELS, PLUMBING_MODEL, PLUMBING_MODEL)
    drafted = engine.OpenVINOBackend.load(PLUMBING_MODEL, decoding=decoding)
    assert drafted.identity.kind == f"local-ov-{decoding}-kvf16" and drafted.identity.label == ov.identity.label
    prompt = build_prompt(REQUIREMENTS[1])
    params = SamplingParams(n=1, temperature=0, max_new_tokens=80)
    (fast,), (plain,) = drafted.sample(prompt, params), ov.sample(prompt, params)
    # Not the same text: the generator checks a draft in one pass over several tokens, whose float noise parts
    # from plain decoding at a near tie (measured: at character 243 of this answer, "the two lists" for "list1
    # and list2"), so `local.decoding = "auto"` never drafts a greedy request.
    at = first_difference(fast.text, plain.text)
    assert at >= 100
    shared = len(ov.tokenizer(fast.text[:at], add_special_tokens=False)["input_ids"]) - 1
    # The recorded log-probabilities are the generator's own, as plain decoding records them (up to the same float
    # noise: measured 0.05 at most with prompt lookup).
    differences = [abs(a - b) for a, b in zip(fast.logprobs[:shared], plain.logprobs[:shared], strict=True)]
    assert sum(differences) / len(differences) < 0.02 and max(differences) < 0.2
    # Sampled rows are one-row requests, which drafted decoding takes (it refuses requests for several rows).
    rows = drafted.sample(prompt, SamplingParams(n=3, temperature=0.8, max_new_tokens=24, seed=2))
    assert len(rows) == 3 and all(c.tokens > 0 for c in rows)


def test_auto_drafts_sampled_rows_only_and_keeps_greedy_answers_plain(ov, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.backends import ov as engine

    monkeypatch.setitem(engine.AUTO_DECODING, PLUMBING_MODEL, "prompt-lookup")
    auto = engine.OpenVINOBackend.load(PLUMBING_MODEL, decoding="auto")
    assert auto.identity.kind == "local-ov-prompt-lookup-kvf16" and auto._lanes["plain"][0] is auto.pipeline
    prompt = build_prompt(REQUIREMENTS[1])
    params = SamplingParams(n=1, temperature=0, max_new_tokens=80)
    (greedy,), (plain,) = auto.sample(prompt, params), ov.sample(prompt, params)
    assert greedy.text == plain.text and greedy.logprobs == plain.logprobs
    rows = auto.sample(prompt, SamplingParams(n=3, temperature=0.8, max_new_tokens=24, seed=2))
    assert len(rows) == 3 and all(c.tokens > 0 for c in rows)
