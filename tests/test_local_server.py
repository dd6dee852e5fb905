"""`assist serve`'s built-in server: the real 0.5B model on the OpenVINO engine behind the OpenAI wire, driven by
assist's own `openai` backend (the real `openai` client) over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import urllib.error
import urllib.request

import pytest

from assistant.backends import Completion, SamplingParams
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


# -- clients that leave (issue 67, item 8) ---------------------------------------------------------------------


class _SlowEngine:
    """Stands in for the engine alone (the HTTP layer is what is tested): one generation at a time, 100 decoding steps
    of 30 ms, reporting to `step` after each as the OpenVINO backend does, and stopping when it raises."""

    name, model, context = "slow", "slow-coder", 4096

    def __init__(self) -> None:
        self.steps = 0
        self.finished = 0
        self.lock = threading.Lock()

    def tokenizer(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": text.split()}

    def echo(self, prompt: str) -> list:
        return []

    def sample_texts(self, texts, params, stops, step=None, seeds=None, prompt_tokens=None):
        with self.lock:
            for done in range(100):
                if step is not None:
                    step(done, 100)
                self.steps += 1
                time.sleep(0.03)
            self.finished += 1
        return [[Completion("x = 1\n", 4, "stop") for _ in range(params.n)]]


def _request(port: int, body: dict) -> bytes:
    data = json.dumps(body).encode()
    head = f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    return (head + f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a RST
    sock.close()


def test_clients_that_leave_get_no_traceback_and_their_generation_stops(capfd: pytest.CaptureFixture[str]) -> None:
    engine = _SlowEngine()
    with LocalServer(engine) as server:
        request = _request(server.port, {"prompt": "def f():", "max_tokens": 8})
        # A client that asks for a generation, then hangs up before the answer.
        left = socket.create_connection(("127.0.0.1", server.port))
        left.sendall(request)
        time.sleep(0.3)
        left.close()
        # Clients that leave mid-request: reset after part of the headers, after the whole request, or closing
        # before the body is complete.
        for number in range(30):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(request[: (30, len(request), len(request) - 3)[number % 3]])
            if number % 3 == 2:
                sock.close()
            else:
                _reset(sock)
        started = time.monotonic()
        status, answer = _post(f"{server.base_url}/completions", {"prompt": "def g():", "max_tokens": 8})
        waited = time.monotonic() - started
    assert status == 200 and answer["choices"][0]["text"] == "x = 1\n"
    # The abandoned generation stopped within a few steps instead of running its 100 (3 s) while the next request
    # waited; the next one ran whole. A request reset after its body may have queued one too, stopped at once.
    assert engine.finished == 1 and engine.steps < 100 + 30, engine.steps
    assert waited < 3.0 + 1.5, waited
    logged = capfd.readouterr()
    assert "Traceback" not in logged.err + logged.out and "Error" not in logged.err, logged.err[-2000:]


def test_a_client_that_hangs_up_is_seen_and_one_that_sends_ahead_is_not() -> None:
    from assistant.backends.local_server import hung_up

    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    served, _ = listener.accept()
    with listener, served:
        assert not hung_up(served)
        client.sendall(b"GET / HTTP/1.1\r\n")  # a pipelined request is data, not a hang-up
        time.sleep(0.05)
        assert not hung_up(served) and served.recv(100).startswith(b"GET")
        client.close()
        time.sleep(0.05)
        assert hung_up(served)


@pytest.mark.model
def test_the_real_engine_stops_a_generation_whose_client_left(served) -> None:
    server, _ = served
    long = {"prompt": "1, 2, 3, 4, 5, 6, 7, 8,", "max_tokens": 2000, "temperature": 0}  # counts on for minutes
    left = socket.create_connection(("127.0.0.1", server.port))
    left.sendall(_request(server.port, long))
    time.sleep(1.0)
    left.close()
    started = time.monotonic()
    status, answer = _post(f"{server.base_url}/completions", {"prompt": "def add(a, b):", "max_tokens": 4})
    assert status == 200 and answer["usage"]["completion_tokens"] >= 1
    assert time.monotonic() - started < 10.0  # not the abandoned generation's 2,000 tokens first


# -- streamed answers, as editors' OpenAI clients ask for them -------------------------------------------------

STREAMED_ROW = "def café(a, b):\n    return a + b\n```\nprose after the fence"


class _Tokenizer:
    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": text.split()}

    def apply_chat_template(self, messages: list, tokenize: bool = False, add_generation_prompt: bool = True) -> str:
        return "\n".join(m["content"] for m in messages)


class _StreamingEngine:
    """Stands in for the engine alone (the HTTP layer is what is tested): its first row grows a character a step
    and tells the row stream, as the OpenVINO backend does; half-way through a character it says U+FFFD, as a
    decoder does with part of a token. The row ends at the stop string, which the final text leaves out."""

    name, model, context = "streamer", "stream-coder", 4096
    tokenizer = _Tokenizer()

    def echo(self, prompt: str) -> list:
        return []

    def sample_texts(self, texts, params, stops, step=None, seeds=None, prompt_tokens=None, stream=None):
        for end in range(1, len(STREAMED_ROW) + 1):
            if step is not None:
                step(end, len(STREAMED_ROW))
            if stream is not None:
                partial = STREAMED_ROW[:end]
                stream.text(partial[:-1] + "\ufffd" if partial.endswith("é") else partial)
        final = STREAMED_ROW[: STREAMED_ROW.index("```")]
        first = Completion(final, 9, "stop", logprobs=tuple(-0.1 * i for i in range(9)))
        return [[first, Completion("def other():\n    pass\n", 5, "length", logprobs=(-1.0,) * 5)][: params.n]]


def test_a_streamed_answer_is_the_answer_in_chunks_for_the_openai_client() -> None:
    import openai

    with LocalServer(_StreamingEngine()) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        messages = [{"role": "user", "content": "add two numbers"}]
        asked = {"model": "stream-coder", "messages": messages, "stop": ["```"]}
        chunks = list(client.chat.completions.create(**asked, stream=True, stream_options={"include_usage": True}))
        whole = client.chat.completions.create(**asked)
        pieces = [c.choices[0].delta.content for c in chunks if c.choices]
        # Many chunks, as the row grew, which together are the unstreamed answer: no chunk took back a thing, none
        # sent part of the stop string (held back until the row showed it was not one) or a half character.
        assert len(pieces) > 20 and "".join(pieces) == whole.choices[0].message.content
        assert not any("`" in p or "\ufffd" in p for p in pieces)
        assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].object == "chat.completion.chunk"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 9
        # The completions endpoint, two choices: the first as it grows, the second whole at the end.
        streamed = client.completions.create(model="stream-coder", prompt="def f():", n=2, stop="```", stream=True)
        texts: dict[int, str] = {}
        for chunk in streamed:
            for choice in chunk.choices:
                texts[choice.index] = texts.get(choice.index, "") + choice.text
        unstreamed = client.completions.create(model="stream-coder", prompt="def f():", n=2, stop="```")
        assert texts == {c.index: c.text for c in unstreamed.choices}
        # Log-probabilities asked for come with each choice's last chunk: joined, they are the unstreamed ones
        # (assist's own `openai` backend streams its first request and ranks by them).
        asked = {"model": "stream-coder", "prompt": "def f():", "n": 2, "stop": "```", "logprobs": 1}
        values: dict[int, list[float]] = {}
        for chunk in client.completions.create(**asked, stream=True):
            for choice in chunk.choices:
                values.setdefault(choice.index, []).extend(choice.logprobs.token_logprobs if choice.logprobs else [])
        plain = client.completions.create(**asked).choices
        assert values == {c.index: c.logprobs.token_logprobs for c in plain} and len(values[0]) == 9
        # What is refused before any chunk is the usual error, with its message.
        with pytest.raises(openai.BadRequestError, match="this server serves stream-coder, not gpt-4"):
            client.completions.create(model="gpt-4", prompt="x", stream=True)
        with pytest.raises(openai.BadRequestError, match="echo scores the prompt"):
            client.completions.create(model="stream-coder", prompt="x", stream=True, echo=True)


@pytest.mark.model
def test_the_real_engine_streams_what_it_answers_unstreamed(served) -> None:
    import openai

    server, backend = served
    client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    asked = {"model": backend.model, "messages": [{"role": "user", "content": REQUIREMENT}], "max_tokens": 48}
    chunks = list(client.chat.completions.create(**asked, temperature=0, stream=True))
    whole = client.chat.completions.create(**asked, temperature=0)
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert len(pieces) > 5 and "".join(pieces) == whole.choices[0].message.content
    # assist's own client streams its first request on a terminal: the same samples, their log-probabilities kept.
    from assistant.backends import streaming
    from assistant.pipeline.pipeline import load_generator

    remote = load_generator("openai", None, base_url=server.base_url, api="completions", retries=0)
    prompt, params = build_prompt(REQUIREMENT), SamplingParams(n=2, temperature=0.8, max_new_tokens=32, seed=3)
    shown: list[str] = []
    with streaming(lambda call, text: shown.append(text)):
        streamed = remote.sample(prompt, params)
    local = backend.sample(prompt, params)
    assert len(shown) > 3 and [c.text for c in streamed] == [c.text for c in local]
    for far, near in zip(streamed, local, strict=True):
        assert far.logprobs is not None and far.logprobs == pytest.approx(near.logprobs, abs=1e-4)
