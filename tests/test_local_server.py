"""`assist serve`'s built-in server: the real 0.5B model on the OpenVINO engine behind the OpenAI wire, driven by
assist's own `openai` backend (the real `openai` client) over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from assistant.backends import SamplingParams
from assistant.backends.local_server import LocalServer, RequestError, _sampling
from assistant.backends.prompts import build_prompt

from .conftest import PLUMBING_MODEL

REQUIREMENT = "Write a python function to add two numbers."


def test_sampling_settings_are_checked_with_one_line_each() -> None:
    params, stops = _sampling({"n": 3, "max_tokens": 40, "temperature": 0.5, "top_p": 0.9, "seed": 4, "stop": "```"})
    assert params == SamplingParams(n=3, temperature=0.5, top_p=0.9, max_new_tokens=40, seed=4)
    assert stops == ("```",)
    for body, message in [
        ({"n": 0}, "n must be an integer from 1 to 64"),
        ({"n": 2.5}, "n must be an integer from 1 to 64"),
        ({"stop": 5}, "stop must be a string or up to 4"),
        ({"seed": 2**32}, "seed must be an integer from 0 to 4294967295"),
        ({"temperature": "hot"}, "temperature must be a number"),
        ({"top_p": 0}, "top_p must be above 0"),
        ({"max_tokens": -1}, "max_tokens must be a positive integer"),
        ({"seed": True}, "seed must be an integer"),
        ({"stop": ["a", ""]}, "stop must be a string or up to 4"),
    ]:
        with pytest.raises(RequestError, match=message):
            _sampling(body)


@pytest.fixture(scope="module")
def served():
    from assistant.backends.ov import OpenVINOBackend

    backend = OpenVINOBackend.load(PLUMBING_MODEL, context=4096)
    with LocalServer(backend) as server:
        yield server, backend


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.mark.model
def test_the_openai_backend_gets_the_local_engines_samples_and_scores(served) -> None:
    from assistant.pipeline.pipeline import load_generator

    server, backend = served
    client = load_generator("openai", None, base_url=server.base_url, api="completions", retries=0)
    seeded = client.sample(build_prompt(REQUIREMENT), SamplingParams(n=1, max_new_tokens=8, seed=2**32 - 1))
    assert len(seeded) == 1  # assist's whole seed range is served
    assert client.model == backend.model and client.context == 4096 and client.tokenizer is not None
    prompt = build_prompt(REQUIREMENT)
    params = SamplingParams(n=3, temperature=0.8, max_new_tokens=64, seed=5)
    remote = client.sample(prompt, params)
    local = backend.sample(prompt, params)
    # The client renders the prompt with the model's chat template, as the local backend does: same samples.
    assert [c.text for c in remote] == [c.text for c in local]
    assert all(c.logprobs for c in remote)
    pairs = [(prompt, "def add(a, b):\n    return a + b\n"), (prompt, "x = 1\n")]
    for far, near in zip(client.logprob(pairs), backend.logprob(pairs), strict=True):
        # Same engine, but the server scores its own batch: OpenVINO's batched arithmetic is not batch-invariant on
        # every CPU (up to 0.02 a token measured on one without native bf16); a wrong prompt or text moves far more.
        assert far.logprobs == pytest.approx(near.logprobs, abs=0.05)


@pytest.mark.model
def test_chat_answers_and_bad_requests_get_a_400_with_a_message(served) -> None:
    server, backend = served
    status, answer = _post(
        f"{server.base_url}/chat/completions",
        {"messages": [{"role": "user", "content": REQUIREMENT}], "max_tokens": 48, "temperature": 0, "logprobs": True},
    )
    assert status == 200
    (choice,) = answer["choices"]
    assert "def " in choice["message"]["content"] and answer["usage"]["completion_tokens"] > 0
    status, answer = _post(f"{server.base_url}/completions", {"prompt": "a = 1\n" * 2000, "max_tokens": 8})
    assert status == 400 and "over the context of 4096" in answer["error"]["message"]
    status, answer = _post(f"{server.base_url}/completions", {"prompt": "def f():", "model": "gpt-4"})
    assert status == 400 and answer["error"]["message"] == f"this server serves {backend.model}, not gpt-4"
    status, answer = _post(f"{server.base_url}/embeddings", {"input": "x"})
    assert status == 404
    # What a web page could send is refused: a form-encoded body, or a request for another host name.
    form = urllib.request.Request(f"{server.base_url}/completions", b'{"prompt": "x"}', {"Content-Type": "text/plain"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(form, timeout=10)
    assert refused.value.code == 415
    rebound = urllib.request.Request(f"{server.base_url}/models", headers={"Host": "evil.example:80"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(rebound, timeout=10)
    assert refused.value.code == 403
