"""The openai backend against a real HTTP server on 127.0.0.1, driven by the real `openai` client."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from assistant.backends import SamplingParams, load_backend
from assistant.backends.openai_api import OpenAIBackend
from assistant.backends.prompts import build_prompt
from assistant.code.fences import extract_code
from assistant.core.candidates import collect
from assistant.core.rank import Problem, rank
from assistant.errors import Cancelled, ModelError, UsageError
from assistant.pipeline.registry import make_rankers
from assistant.ui.errors import said_line, said_with_flags

from .openai_server import Script, model_echo, openai_server

PROMPT = build_prompt("return a number")


def connect(url: str, **options) -> OpenAIBackend:
    options.setdefault("retries", 2)
    options.setdefault("timeout", 5.0)
    backend = load_backend("openai", options.pop("model", None), base_url=url, **options)
    assert isinstance(backend, OpenAIBackend)
    return backend


def test_n_honoured_is_one_request_with_distinct_candidates() -> None:
    with openai_server() as (url, script):
        backend = connect(url)
        completions = backend.sample(PROMPT, SamplingParams(n=3, seed=10))
    assert backend.model == "tiny-coder"  # the only model the server lists
    posts = [r for r in script.requests if r["path"].endswith("/chat/completions")]
    assert len(posts) == 1 and posts[0]["n"] == 3
    codes = [extract_code(c.text) for c in completions]
    assert codes == ["def f():\n    return 10", "def f():\n    return 11", "def f():\n    return 12"]
    assert backend.honours_n is True


def test_n_ignored_falls_back_to_seeded_requests_and_remembers() -> None:
    with openai_server(Script(honour_n=False)) as (url, script):
        backend = connect(url, concurrency=2)
        first = backend.sample(PROMPT, SamplingParams(n=3, seed=5))
        assert backend.honours_n is False
        assert len(script.requests) == 3
        script.requests.clear()
        second = backend.sample(PROMPT, SamplingParams(n=3, seed=7))
    assert len({extract_code(c.text) for c in first}) == 3
    # Known to ignore n: straight to three single requests with distinct seeds.
    assert sorted(r["seed"] for r in script.requests) == [7, 8, 9]
    assert all(r["n"] == 1 for r in script.requests)
    assert len({extract_code(c.text) for c in second}) == 3


def test_a_cancelled_fan_out_returns_without_waiting_for_the_requests_the_server_holds() -> None:
    # The TUI's Escape raises Cancelled from the progress callback; the single requests already sent are left to
    # their threads (they hold nothing of the process), not waited for to the server's answer 30 s later.
    def step(done: int, total: int) -> None:
        if done == 2:
            while len(script.requests) < 3:  # the third request is sent, and held
                time.sleep(0.01)
            raise Cancelled("Generating cancelled")

    with openai_server(Script(honour_n=False, delay_s=30.0, delay_seeds=frozenset({7}))) as (url, script):
        backend = connect(url, concurrency=2, timeout=60.0, retries=0)
        backend.honours_n = False  # known to ignore n: three single requests (seeds 5, 6, 7), two at a time
        started = time.monotonic()
        with pytest.raises(Cancelled):
            backend.sample(PROMPT, SamplingParams(n=3, seed=5), step)
        assert time.monotonic() - started < 5.0


def test_a_fan_out_whose_second_thread_cannot_start_drops_the_calls_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    # `__exit__` is not run when `__enter__` raises: the thread already started must not go on to send every call.
    from assistant.backends.openai_api import _FanOut

    release = threading.Event()
    sent: list[int] = []

    def call(i: int) -> int:
        sent.append(i)
        release.wait(5.0)
        return i

    start = threading.Thread.start
    started: list[threading.Thread] = []

    def start_once(self: threading.Thread) -> None:
        if started:
            raise RuntimeError("can't start new thread")
        started.append(self)
        start(self)

    fan_out = _FanOut([lambda i=i: call(i) for i in range(4)], 2)
    monkeypatch.setattr(threading.Thread, "start", start_once)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        fan_out.__enter__()
    monkeypatch.undo()
    release.set()
    started[0].join(5.0)
    assert not started[0].is_alive()
    assert sent in ([], [0])  # at most the call the thread had taken before the others were dropped
    assert all(future.done() for future in fan_out.futures)


def test_escape_while_the_next_request_in_order_is_held_returns_at_once() -> None:
    # The first single request is answered, the second (next in order) held 30 s: the progress callback is asked
    # while the wait goes on, so Escape (Cancelled from it) ends the wait then, not when the server answers.
    escaped = threading.Event()

    def step(done: int, total: int) -> None:
        if escaped.is_set():
            raise Cancelled("Generating cancelled")

    with openai_server(Script(honour_n=False, delay_s=30.0, delay_seeds=frozenset({6}))) as (url, script):
        backend = connect(url, concurrency=2, timeout=60.0, retries=0)
        backend.honours_n = False  # seeds 5, 6, 7: the second in order is held
        threading.Timer(1.0, escaped.set).start()  # pressed a second after the requests went out
        started = time.monotonic()
        with pytest.raises(Cancelled):
            backend.sample(PROMPT, SamplingParams(n=3, seed=5), step)
        assert time.monotonic() - started < 5.0
    assert len(script.requests) >= 2  # the held one had been sent


def test_429_then_success_is_retried() -> None:
    with openai_server(Script(fail=[429, 503])) as (url, script):
        backend = connect(url)
        completions = backend.sample(PROMPT, SamplingParams(n=2, seed=1))
    assert len(completions) == 2
    assert len([r for r in script.requests if "n" in r]) == 3  # two failures, then the answer


def test_500_forever_gives_up_with_a_clear_error() -> None:
    with openai_server(Script(fail_forever=500)) as (url, script):
        backend = connect(url, retries=2)
        with pytest.raises(ModelError, match=r"failed with HTTP 500 after 2 retries: the server is broken"):
            backend.sample(PROMPT, SamplingParams(n=1))
    assert len(script.requests) == 3


def test_slow_server_times_out() -> None:
    with openai_server(Script(delay_s=2.0)) as (url, _):
        backend = connect(url, timeout=0.5, retries=0)
        started = time.perf_counter()
        with pytest.raises(ModelError, match=r"did not answer within 0.5 s") as caught:
            backend.sample(PROMPT, SamplingParams(n=1))
    assert time.perf_counter() - started < 2.0
    head = f"{backend.base_url} did not answer within 0.5 s (0 retries); raise "
    assert str(caught.value) == head + "the openai.timeout setting or check the server"
    said = said_with_flags(caught.value)  # the command line's line, as before; still a ModelError (exit code 1)
    assert str(said) == head + "--timeout or check the server" and isinstance(said, ModelError)


def test_malformed_json_is_reported() -> None:
    with openai_server(Script(malformed=True)) as (url, _):
        backend = connect(url)
        with pytest.raises(ModelError, match="not valid OpenAI JSON"):
            backend.sample(PROMPT, SamplingParams(n=1))


def test_unknown_model_is_refused_at_load_listing_what_is_served() -> None:
    with openai_server() as (url, _), pytest.raises(ModelError, match=r"does not serve model 'gpt-9'.*tiny-coder"):
        connect(url, model="gpt-9")


def test_unknown_model_without_a_model_list_fails_on_the_request() -> None:
    with openai_server(Script(list_models=False)) as (url, _):
        backend = connect(url, model="gpt-9")
        with pytest.raises(ModelError, match=r"does not know model 'gpt-9'") as caught:
            backend.sample(PROMPT, SamplingParams(n=1))
    message = str(caught.value)
    assert message.endswith("; check the model and openai.base_url settings (usually …/v1)"), message
    head = message.removesuffix("; check the model and openai.base_url settings (usually …/v1)")
    assert str(said_with_flags(caught.value)) == head + "; check --model and --base-url (usually …/v1)"


def test_unreachable_server() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelError, match=r"cannot reach http://127.0.0.1:\d+/v1 .*assist serve"):
        connect(f"http://127.0.0.1:{port}/v1", retries=0)


def test_missing_base_url_and_key_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UsageError, match=r"the openai\.base_url setting") as caught:
        load_backend("openai")
    assert str(said_with_flags(caught.value)) == (
        "the openai backend needs --base-url (e.g. http://127.0.0.1:8080/v1, which `assist serve --port 8080` starts) "
        "or OPENAI_API_KEY for api.openai.com"
    )
    with pytest.raises(UsageError, match=r"openai\.api must be chat or completions, not 'json'") as caught:
        load_backend("openai", base_url="http://127.0.0.1:9/v1", api="json")
    assert str(said_with_flags(caught.value)) == "--api must be chat or completions, not 'json'"
    with pytest.raises(UsageError, match="'notaurl' is not a server's URL"):  # at once, not after retries
        load_backend("openai", base_url="notaurl")


def test_chat_logprobs_cover_only_the_code_and_feed_the_ranker() -> None:
    with openai_server() as (url, _):
        backend = connect(url)
        completions = backend.sample(PROMPT, SamplingParams(n=2, seed=3))
    # The fake model gives -0.1 to code lines, -3 to prose and fences: only the code's tokens are kept.
    assert all(c.logprobs == (-0.1, -0.1) for c in completions)
    candidates, _ = collect(completions)
    ranked = rank(Problem("return a number", PROMPT), candidates, make_rankers("logprob", backend))
    assert ranked[0].scores["logprob"].value == pytest.approx(-0.1)


def test_without_logprobs_the_ranker_says_it_is_unavailable() -> None:
    with openai_server(Script(logprobs=False)) as (url, _):
        backend = connect(url)
        completions = backend.sample(PROMPT, SamplingParams(n=2, seed=3))
    assert all(c.logprobs is None for c in completions)
    candidates, _ = collect(completions)
    with pytest.raises(UsageError, match="logprob ranker is unavailable") as caught:
        rank(Problem("return a number", PROMPT), candidates, make_rankers("logprob", backend))
    assert "--" not in str(caught.value)  # the library's words: the settings, by name
    assert str(said_with_flags(caught.value)) == (  # the CLI's line, the chat endpoint's reason quoted, as before
        "the logprob ranker is unavailable: tiny-coder returned no log-probabilities and chat endpoints cannot score "
        "given text; use --api completions with a server that echoes prompt log-probabilities (vLLM, OpenAI's legacy "
        "completions); use --ranker first, or exec with --test"
    )


def test_completions_api_renders_text_and_cuts_at_the_stop_string() -> None:
    with openai_server() as (url, script):
        backend = connect(url, api="completions")
        completions = backend.sample(PROMPT, SamplingParams(n=2, seed=20))
    request = script.requests[-1]
    assert request["path"].endswith("/v1/completions")
    assert request["prompt"].endswith("```python\n") and request["stop"] == ["```"]
    assert [c.text for c in completions] == ["def f():\n    return 20\n", "def f():\n    return 21\n"]
    assert completions[0].logprobs == (-0.2, -0.2)


def test_context_overflow_from_the_server_is_a_usage_error() -> None:
    with openai_server(Script(context=50)) as (url, _):
        backend = connect(url)
        with pytest.raises(UsageError, match="input is too long") as caught:
            backend.sample(PROMPT, SamplingParams(n=1))
    message = str(caught.value)
    assert message.endswith("; use fewer demonstrations"), message
    assert str(said_with_flags(caught.value)) == message + " (-k)"


def test_estimated_overflow_warns_before_sending(caplog: pytest.LogCaptureFixture) -> None:
    with openai_server() as (url, _):
        backend = connect(url, context=100)
        with caplog.at_level(logging.WARNING, logger="assistant"):
            backend.sample(PROMPT, SamplingParams(n=1, max_new_tokens=64))
    assert "estimated" in caplog.text and "context of 100" in caplog.text
    [record] = [r for r in caplog.records if "estimated" in r.getMessage()]
    message = record.getMessage()
    assert message.endswith("some servers cut it silently; use fewer demonstrations"), message
    # The CLI's warning handler says it as before, with the flag.
    assert said_line(message, record.setting, record.values) == message + " (-k)"


def test_a_server_of_no_model_list_or_several_asks_for_the_model_setting() -> None:
    with openai_server(Script(list_models=False)) as (url, _), pytest.raises(UsageError) as caught:
        connect(url)
    assert str(caught.value) == f"{url} does not list its models; name one in the model setting"
    assert str(said_with_flags(caught.value)) == f"{url} does not list its models; name one with --model"
    with openai_server(Script(models=["b", "a"])) as (url, _), pytest.raises(UsageError) as caught:
        connect(url)
    assert str(caught.value) == f"{url} serves 2 models; choose one in the model setting (a, b)"
    assert str(said_with_flags(caught.value)) == f"{url} serves 2 models; choose one with --model (a, b)"


def test_the_exact_context_refusal_names_the_setting_and_the_cli_the_flag() -> None:
    backend = OpenAIBackend.__new__(OpenAIBackend)  # no server: only what check_fits reads
    backend.model, backend.base_url, backend.context, backend.tokenizer = "m", "http://h/v1", 100, object()
    backend.count_tokens = lambda prompt: 90  # type: ignore[method-assign]
    with pytest.raises(UsageError) as caught:
        backend.check_fits(PROMPT, 20)
    head = "the prompt takes 90 tokens and 20 more are asked for, but m at http://h/v1 has a context of 100; use "
    assert str(caught.value) == head + "fewer demonstrations or a smaller file"
    assert str(said_with_flags(caught.value)) == head + "fewer demonstrations (-k) or a smaller file"


def test_a_chat_endpoint_says_why_it_cannot_score_with_the_setting_and_the_cli_with_the_flag() -> None:
    with openai_server() as (url, _):
        backend = connect(url)
    assert "--api" not in backend.scoring_unavailable and "openai.api = completions" in backend.scoring_unavailable
    with pytest.raises(ModelError) as caught:
        backend.logprob([(PROMPT, "x = 1\n")])
    assert str(said_with_flags(caught.value)) == (
        "the openai backend cannot score given text: chat endpoints cannot score given text; use --api completions "
        "with a server that echoes prompt log-probabilities (vLLM, OpenAI's legacy completions)"
    )


def test_usage_is_summed_over_requests() -> None:
    with openai_server(Script(honour_n=False)) as (url, _):
        backend = connect(url)
        backend.sample(PROMPT, SamplingParams(n=3, seed=1))
    usage = backend.usage.to_json()
    assert usage["requests"] == 3
    assert usage["completion_tokens"] == 36 and usage["prompt_tokens"] > 0
    assert usage["seconds"] > 0


def test_scoring_given_text_is_refused() -> None:
    with openai_server() as (url, _):
        backend = connect(url)
    assert backend.can_score is False
    with pytest.raises(ModelError, match="cannot score"):
        backend.logprob([(PROMPT, "def f(): pass")])


def test_a_completions_server_that_ignores_echo_is_refused_for_scoring() -> None:
    # Without an echo scorer the test server answers `echo=True` with the generated tokens' values only.
    with openai_server() as (url, script):
        backend = connect(url, api="completions")
        assert backend.can_score
        with pytest.raises(ModelError, match="does not return the prompt's log-probabilities"):
            backend.logprob([(PROMPT, "def f(): pass")])
    assert script.requests[-1]["echo"] is True


PAIRS = [
    (build_prompt("Add two numbers.", []), "def add(a, b):\n    return a + b\n"),
    (build_prompt("Reverse a string.", []), "def rev(s):\n    return s[::-1]\n"),
]


def _character_value(text: str, at: int) -> float:
    """A scripted echo's log-probability of the character-token at `at`: the probe's planted word the least likely."""
    return -9.0 if text.startswith("zebra", at) else -(ord(text[at]) % 10) / 10 - 0.01


def _character_echo(text: str) -> tuple[list[str], list[float | None], list[int]]:
    """What a server whose tokens are characters echoes for `text`."""
    return list(text), [None] + [_character_value(text, at) for at in range(1, len(text))], list(range(len(text)))


def test_scores_come_back_in_the_order_asked_through_concurrent_requests() -> None:
    pairs = [(build_prompt(f"Task {i}.", []), f"def f{i}():\n    return {'xyz'[: i % 4]!r}\n") for i in range(6)]
    with openai_server(Script(echo=_character_echo)) as (url, script):
        scored = connect(url, api="completions", concurrency=3).logprob(pairs)
    assert sum(1 for r in script.requests if r.get("echo")) == 1 + len(pairs)  # the probe, then one per pair
    for (_, continuation), score in zip(pairs, scored, strict=True):
        assert score.tokens == list(continuation)
        assert score.logprobs == [_character_value(continuation, at) for at in range(len(continuation))]


@pytest.mark.model
def test_echoed_log_probabilities_score_like_the_local_model(backend) -> None:
    with openai_server(Script(models=[backend.model], echo=model_echo(backend))) as (url, script):
        remote = connect(url, api="completions", model=backend.model, timeout=120.0)
        scored = remote.logprob(PAIRS)
        probes = sum(1 for r in script.requests if r["prompt"].startswith("Counting:"))
        remote.logprob(PAIRS[:1])  # the server is probed once per backend
        assert sum(1 for r in script.requests if r["prompt"].startswith("Counting:")) == probes == 1
        script.echo_shift = True  # values one token off: a buggy server
        with pytest.raises(ModelError, match="misaligned"):
            connect(url, api="completions", model=backend.model, timeout=120.0).logprob(PAIRS)
    local = backend.logprob(PAIRS)
    for mine, theirs in zip(scored, local, strict=True):
        assert len(mine.logprobs) == len(theirs.logprobs) > 5
        assert mine.mean == pytest.approx(theirs.mean, abs=2e-3)
