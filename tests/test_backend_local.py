"""The real local generator the tests run (conftest's PLUMBING_MODEL, Qwen2.5-Coder-0.5B-Instruct), loaded once
(see conftest), generating a little."""

import ast
import time

import pytest

from assistant.backends import SamplingParams
from assistant.backends.prompts import build_prompt
from assistant.errors import UsageError

pytestmark = pytest.mark.model

PROMPT = build_prompt(
    "Write a function add(a, b) that returns the sum of two numbers.", tests=["assert add(2, 3) == 5"]
)


def test_samples_n_candidates_with_recorded_logprobs_matching_a_forward_pass(backend):
    completions = backend.sample(PROMPT, SamplingParams(n=3, max_new_tokens=64, seed=0))
    assert len(completions) == 3
    parsed = 0
    for completion in completions:
        assert "```" not in completion.text  # cut at the closing fence
        assert completion.logprobs and all(v <= 0 for v in completion.logprobs)
        try:
            ast.parse(completion.text)
            parsed += 1
        except SyntaxError:
            pass
    assert parsed >= 1
    # The log-probabilities recorded while sampling are the model's own: a separate forward pass agrees.
    scored = backend.logprob([(PROMPT, c.text) for c in completions])
    for completion, result in zip(completions, scored, strict=True):
        assert len(result.logprobs) == len(completion.logprobs)
        assert result.mean == pytest.approx(sum(completion.logprobs) / len(completion.logprobs), abs=2e-3)


def test_logprob_prefers_the_correct_program(backend):
    right, wrong = backend.logprob(
        [(PROMPT, "def add(a, b):\n    return a + b\n"), (PROMPT, "def add(a, b):\n    return a ** b - 7\n")]
    )
    assert right.mean > wrong.mean


def test_greedy_returns_one_candidate_and_prompt_must_fit(backend):
    assert len(backend.sample(PROMPT, SamplingParams(n=4, temperature=0, max_new_tokens=40))) == 1
    huge = build_prompt("word " * 40_000)
    with pytest.raises(UsageError, match="context of"):
        backend.sample(huge, SamplingParams(n=1, max_new_tokens=8))


def test_a_requirement_over_the_local_context_setting_is_refused_before_prefill(backend, monkeypatch):
    """`local.context` (8192 by default, from the CLI's settings) caps what a request may take, well under the
    model's 32k window: 120 KB of text once took 8 minutes of prefill before any answer."""
    monkeypatch.setattr(backend, "context", 8192)
    long = build_prompt("add the numbers " * 3000)  # about 9,000 tokens: inside the window, over the setting
    started = time.perf_counter()
    with pytest.raises(UsageError, match=r"the limit is a context of 8192 \(the local.context setting"):
        backend.sample(long, SamplingParams(n=1, max_new_tokens=8))
    assert time.perf_counter() - started < 5  # refused after counting tokens, not after a prefill


def test_batched_prompts_sample_as_if_alone(backend):
    """Prompts of different lengths share one batched call (left-padded); greedy output is unchanged by it."""
    other = build_prompt("Write a python function to reverse the words of a sentence, keeping single spaces.")
    greedy = SamplingParams(n=1, temperature=0, max_new_tokens=24)
    alone = [backend.sample(PROMPT, greedy)[0], backend.sample(other, greedy)[0]]
    together = backend.sample_batch([PROMPT, other], greedy)
    assert [group[0].text for group in together] == [c.text for c in alone]
    for group, single in zip(together, alone, strict=True):
        assert group[0].logprobs == pytest.approx(single.logprobs, abs=1e-3)
    # Every prompt keeps its own seed: its samples are the same alone or batched with another prompt.
    params = SamplingParams(n=2, max_new_tokens=16)
    together = backend.sample_batch([PROMPT, other], params, seeds=[7, 8])
    alone = backend.sample_batch([other], params, seeds=[8])
    assert [len(group) for group in together] == [2, 2]
    assert [c.text for c in together[1]] == [c.text for c in alone[0]]
    assert together[1][0].text != together[1][1].text or together[1][0].logprobs != together[1][1].logprobs


def test_a_looping_row_leaves_the_batch_cut_off(backend):
    from dataclasses import replace

    prompt = build_prompt("Write a function series(r) that sums many range tuples.")
    head = "def series(r):\n    total = 0\n" + "".join(
        f"    total += sum(tuple(range(r - 1, {k}, -1)))\n" for k in range(3, 27)
    )
    prompt = replace(prompt, answer_prefix=prompt.answer_prefix + "```python\n" + head)
    (greedy,) = backend.sample(prompt, SamplingParams(n=1, temperature=0, max_new_tokens=800))
    assert greedy.cut_reason == "looping" and greedy.finish_reason == "length" and greedy.tokens < 400
