"""The `openai` backend: any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, LM Studio).

What servers differ on, and how this backend copes:

- `n` candidates per request: asked for first; when a server returns fewer (llama.cpp and Ollama ignore `n`),
  the rest are sent as single requests with distinct seeds, concurrently (`concurrency` at a time), and the
  server is remembered as one that ignores `n`.
- Context: servers like Ollama truncate a long prompt silently. When the tokenizer is known (the model, or
  the `tokenizer` setting, names a local model that is converted) the prompt is counted before sending and
  refused if it does not fit `context`; otherwise an estimate only warns.
- Log-probabilities: requested when `logprobs` is on, kept where returned (chat: only the tokens inside
  the code block). Scoring given text (`logprob()`, what LAIL's labeler and `eval likelihood` need) works
  only with `api = "completions"` on a server that echoes the prompt's log-probabilities (`echo`, as
  OpenAI's legacy endpoint and vLLM do). Before the first score the server is probed: the echo must cover
  the prompt, and in a counting sequence with one planted odd word the least likely token must be that
  word's first. Servers that ignore `echo` or return misaligned values are refused with a one-line error.
- Retries (429, 5xx, dropped connections, timeouts) are the `openai` client's own, with exponential backoff
  and `Retry-After` honoured; failures that remain become one-line errors that say what to do.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import queue
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from types import SimpleNamespace
from typing import Any, Generic, TypeVar

from assistant.backends import (
    Backend,
    BackendIdentity,
    Completion,
    Progress,
    RowStream,
    SamplingParams,
    Step,
    TokenLogprobs,
    Usage,
    check_prompt,
    check_text,
    row_stream,
)
from assistant.backends.prompts import Prompt
from assistant.errors import Cancelled, ModelError, UsageError

log = logging.getLogger("assistant")

CHARS_PER_TOKEN = 3.0  # a conservative estimate for code, used only when the tokenizer is unknown
# An estimate this many times over the context cannot fit under any real tokenizer (that would take over
# 9 characters per token): refuse it rather than send it to be cut or rejected.
ESTIMATE_SURE_OVER = 3.0

T = TypeVar("T")
POLL_S = 0.1  # how often a wait on a held request asks its progress callback whether to go on
# The command that starts an OpenAI-compatible server of the local model (docs/guides/serving.md); plain
# `assist serve` starts the warm one on a Unix socket, which an http(s) URL cannot reach.
SERVE_ON_A_PORT = "`assist serve --port 8080`"
# Why a chat endpoint cannot score given text (`scoring_unavailable`), which other refusals quote after a colon.
CHAT_CANNOT_SCORE = (
    "chat endpoints cannot score given text; use the completions API (openai.api = completions) with a server that "
    "echoes prompt log-probabilities (vLLM, OpenAI's legacy completions)"
)


class OpenAIBackend(Backend):
    """Sampling through the `openai` client against `base_url`.

    Capabilities depend on the settings: with `api = "completions"` it continues the answer prefix and may score
    given text (`can_score`, once the server's echo passes its probe); `logprobs` (ask for sampled tokens'
    log-probabilities) is the setting, or True when it can score. Prompts are sampled one at a time.
    """

    name = "openai"
    description = "any OpenAI-compatible server: OpenAI, vLLM, llama.cpp, Ollama, LM Studio, `assist serve`"
    # Inside a `streaming` block the first request of a sampling call is sent with `stream`: the same request
    # otherwise, so the same samples; a server that answers it with plain JSON is read as before.
    streams = True

    def __init__(
        self,
        client: Any,
        model: str,
        *,
        base_url: str,
        api: str = "chat",
        concurrency: int = 4,
        context: int | None = None,
        logprobs: bool = True,
        tokenizer: Any = None,
        timeout: float = 120.0,
        retries: int = 3,
    ) -> None:
        self.client = client
        self.model = model
        self.base_url = base_url
        self.api = api
        self.concurrency = concurrency
        self.context = context
        self.sample_logprobs = logprobs  # ask for the sampled tokens' log-probabilities
        self.tokenizer = tokenizer
        self.timeout = timeout
        self.retries = retries
        self.usage = Usage()
        self.honours_n: bool | None = None  # learnt from the first multi-candidate request
        # Scoring given text needs the completions endpoint's `echo`; whether the server's echo is usable is
        # learnt from a probe before the first score.
        self.can_score = api == "completions"
        self.prefills_answer = api == "completions"  # chat messages cannot end inside the answer
        self.scoring_unavailable = "" if self.can_score else CHAT_CANNOT_SCORE
        self.logprobs = logprobs or self.can_score
        self.echo_checked = False

    @property
    def identity(self) -> BackendIdentity:
        """The model and the endpoint kind, which changes the samples (the prompt is templated by the server or
        here); manifests record only the backend and model, as before."""
        return BackendIdentity(self.name, self.model, kind=f"openai-{self.api}", label=f"{self.name}:{self.model}")

    @classmethod
    def load(
        cls,
        model: str | None = None,
        progress: Progress | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api: str = "chat",
        timeout: float = 120.0,
        retries: int = 3,
        concurrency: int = 4,
        context: int | None = None,
        logprobs: bool = True,
        tokenizer: str | None = None,
    ) -> OpenAIBackend:
        """Connect, check the server answers and serves the model (the only one it serves, if none is named)."""
        if api not in ("chat", "completions"):
            raise UsageError(
                f"openai.api must be chat or completions, not {api!r}", setting="api:choice", values={"api": api}
            )
        client, url = make_client(base_url, api_key, timeout, retries, what="the openai backend")
        backend = cls(
            client,
            model or "",
            base_url=url,
            api=api,
            concurrency=concurrency,
            context=context,
            logprobs=logprobs,
            timeout=timeout,
            retries=retries,
        )
        served = backend._served_models()
        if model is None:
            if served is None:
                raise UsageError(
                    f"{url} does not list its models; name one in the model setting",
                    setting="model:unlisted",
                    values={"url": url},
                )
            if len(served) != 1:
                names = ", ".join(sorted(served)[:10]) or "none"
                raise UsageError(
                    f"{url} serves {len(served)} models; choose one in the model setting ({names})",
                    setting="model:several",
                    values={"url": url, "count": len(served), "names": names},
                )
            model = next(iter(served))
            backend.model = model
        elif served is not None and model not in served:
            names = ", ".join(sorted(served)[:10]) or "none"
            raise ModelError(f"{url} does not serve model {model!r}; it serves: {names}")
        if backend.context is None and served:
            backend.context = served.get(model)
        backend.tokenizer = _local_tokenizer(tokenizer or model, explicit=tokenizer is not None)
        return backend

    # -- token counting -------------------------------------------------------------------------------

    def render(self, prompt: Prompt) -> str:
        """The prompt as plain text for the completions endpoint: the model's chat template when known."""
        check_prompt(prompt)
        if self.tokenizer is not None and getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
            return text + prompt.answer_prefix
        return "\n\n".join(m["content"] for m in prompt.messages) + "\n\n" + prompt.answer_prefix

    def count_tokens(self, prompt: Prompt) -> int:
        """Exact with a known tokenizer, else an estimate from the length of the text."""
        check_prompt(prompt)  # before any tokenizer or request: sampling always counts first
        if self.tokenizer is not None:
            if self.api == "chat" and getattr(self.tokenizer, "chat_template", None):
                text = self.tokenizer.apply_chat_template(
                    list(prompt.messages), tokenize=False, add_generation_prompt=True
                )
            else:
                text = self.render(prompt)
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return math.ceil(len(self.render(prompt)) / CHARS_PER_TOKEN)

    def check_fits(self, prompt: Prompt, new_tokens: int) -> int:
        """Refuse a prompt that cannot fit (exact count, or an estimate far over), warn when it may not."""
        used = self.count_tokens(prompt)
        if self.context is None or used + new_tokens <= self.context:
            return used
        if self.tokenizer is not None:
            raise UsageError(
                f"the prompt takes {used} tokens and {new_tokens} more are asked for, but {self.model} at "
                f"{self.base_url} has a context of {self.context}; use fewer demonstrations or a smaller file",
                setting="k:server_context",
                values={
                    "used": used,
                    "new_tokens": new_tokens,
                    "model": self.model,
                    "url": self.base_url,
                    "context": self.context,
                },
            )
        if used > ESTIMATE_SURE_OVER * self.context:
            raise UsageError(
                f"the prompt is about {used} tokens (estimated from {len(self.render(prompt))} characters), far over "
                f"the context of {self.context} of {self.model} at {self.base_url}; shorten the requirement or the file"
            )
        log.warning(
            "the prompt is about %d tokens (estimated) plus %d new, over the server's context of %d: "
            "some servers cut it silently; use fewer demonstrations",
            used,
            new_tokens,
            self.context,
            extra={
                "setting": "k:server_estimate",
                "values": {"used": used, "new_tokens": new_tokens, "context": self.context},
            },
        )
        return used

    # -- sampling -------------------------------------------------------------------------------------

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        """`params.n` completions: one request with `n` when the server honours it, else n seeded requests.

        `step(done, n)` is called as completions arrive; if it raises, no further request is sent.
        """
        report: Step = step or (lambda done, total: None)
        self.check_fits(prompt, params.max_new_tokens)
        greedy = params.temperature <= 0
        wanted = 1 if greedy else params.n
        base_seed = params.seed if params.seed is not None else random.randrange(2**31)
        completions: list[Completion] = []
        report(0, wanted)
        # The first row of the first request is told to a `streaming` listener as it arrives; a chat answer is
        # shown whole (its opening fence is no stop).
        stream = row_stream(prompt.answer_prefix, prompt.stop) if self.prefills_answer else row_stream("", ())
        if wanted == 1 or self.honours_n is not False:
            completions = self._request(prompt, params, wanted, base_seed, stream)
            if wanted > 1 and self.honours_n is None:
                self.honours_n = len(completions) >= wanted
            completions = completions[:wanted]
            report(len(completions), wanted)
        missing = wanted - len(completions)
        if missing > 0:
            seeds = [base_seed + len(completions) + i for i in range(missing)]
            calls = [
                functools.partial(self._request, prompt, params, 1, seed, None if completions or i else stream)
                for i, seed in enumerate(seeds)
            ]
            with _FanOut(calls, min(self.concurrency, missing)) as fan_out:
                for result in fan_out.results(poll=lambda: report(len(completions), wanted)):
                    completions.extend(result[:1])
                    report(len(completions), wanted)
        return completions

    def _request(
        self, prompt: Prompt, params: SamplingParams, n: int, seed: int, stream: RowStream | None = None
    ) -> list[Completion]:
        """One request for `n` candidates; with `stream`, sent streamed and its first choice told as it grows."""
        greedy = params.temperature <= 0
        common: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_new_tokens,
            "temperature": 0.0 if greedy else params.temperature,
            "seed": seed,
            "n": n,
        }
        if not greedy:
            common["top_p"] = params.top_p
        started = time.perf_counter()
        if self.api == "chat":
            if self.sample_logprobs:
                common["logprobs"] = True
            response = self._send(
                self.client.chat.completions.create, stream, messages=[dict(m) for m in prompt.messages], **common
            )
            completions = [self._from_chat(choice) for choice in _choices(response, self.base_url)]
        else:
            if self.sample_logprobs:
                common["logprobs"] = 1
            response = self._send(
                self.client.completions.create, stream, prompt=self.render(prompt), stop=list(prompt.stop), **common
            )
            completions = [self._from_text(choice, prompt) for choice in _choices(response, self.base_url)]
        usage = getattr(response, "usage", None)
        self.usage.add(
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0) or sum(c.tokens for c in completions),
            time.perf_counter() - started,
        )
        return completions

    def _send(self, create: Callable[..., Any], stream: RowStream | None, **kwargs: Any) -> Any:
        """`create(**kwargs)`'s response; with `stream`, asked for as server-sent events, read as they come (the
        first choice's text told to `stream`) and put together as the plain response would have been."""
        if stream is None:
            return self._call(create, **kwargs)

        def streamed(**kwargs: Any) -> Any:
            import openai

            try:
                events = create(stream=True, stream_options={"include_usage": True}, **kwargs)
            except openai.BadRequestError:
                # A server that refuses to stream (or the usage option): the plain request, whose error is the one
                # to report if it fails too.
                return create(**kwargs)
            return _assembled(events, stream)

        return self._call(streamed, **kwargs)

    def _from_chat(self, choice: Any) -> Completion:
        from assistant.code.fences import code_span

        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        entries = getattr(getattr(choice, "logprobs", None), "content", None) or []
        logprobs = None
        if entries:
            # Keep the tokens inside the code block: the fence and any prose around it are not the program.
            start, end = code_span(text)
            kept, offset = [], 0
            for entry in entries:
                token = entry.token or ""
                if start <= offset < end and entry.logprob is not None:
                    kept.append(float(entry.logprob))
                offset += len(token)
            logprobs = tuple(kept) or None
        return Completion(
            text=text,
            tokens=len(entries) or self._count_text(text),
            finish_reason=_finish(getattr(choice, "finish_reason", None)),
            logprobs=logprobs,
        )

    def _from_text(self, choice: Any, prompt: Prompt) -> Completion:
        text = getattr(choice, "text", None) or ""
        values = getattr(getattr(choice, "logprobs", None), "token_logprobs", None) or []
        # Servers differ on whether the stop string is included; cut at it either way.
        cut = min((text.find(s) for s in prompt.stop if s in text), default=-1)
        finish = _finish(getattr(choice, "finish_reason", None))
        if cut >= 0:
            text, finish = text[:cut], "stop"
        logprobs = tuple(float(v) for v in values if v is not None) or None
        return Completion(
            text=text, tokens=len(values) or self._count_text(text), finish_reason=finish, logprobs=logprobs
        )

    def _count_text(self, text: str) -> int:
        if self.tokenizer is not None:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def logprob(self, pairs: Sequence[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        """Token log-probabilities of each continuation given its prompt, from the server's echoed prompt
        log-probabilities (completions API only; the server is probed first, see `check_echo`)."""
        if not self.can_score:
            raise ModelError(f"the openai backend cannot score given text: {self.scoring_unavailable}")
        for _, continuation in pairs:
            check_text(continuation, "the scored text")
        self.check_echo()
        calls = [functools.partial(self._score, self.render(prompt), continuation) for prompt, continuation in pairs]
        with _FanOut(calls, max(1, min(self.concurrency, len(calls)))) as fan_out:
            return list(fan_out.results())

    def check_echo(self) -> None:
        """Refuse a server whose echoed prompt log-probabilities are missing or misaligned (once per backend).

        The probe counts from 1 to 30 with one number replaced by an unrelated word: any language model finds
        the numbers easy and that word's first token the hardest of all (its later tokens are already less of a
        surprise). A server that ignores `echo` returns no values for the prompt; one whose values are a
        token off puts the minimum beside it.
        """
        if self.echo_checked:
            return
        numbers = [str(i) for i in range(1, 31)]
        numbers[20] = "zebra"
        text = "Counting: " + ", ".join(numbers)
        start = text.index("zebra")
        offsets, values = self._echo(text)
        scored = [(o, v) for o, v in zip(offsets, values, strict=True) if 0 <= o < len(text) and v is not None]
        where = f"{self.base_url} ({self.model})"
        if len(scored) < 20:
            raise ModelError(
                f"{where} does not return the prompt's log-probabilities (`echo`), so it cannot score given text; "
                "use the local backend, or a server that does (vLLM)"
            )
        if any(not math.isfinite(v) or v > 1e-3 for _, v in scored):
            raise ModelError(f"{where} returns echoed log-probabilities that are not log-probabilities (> 0 or NaN)")
        # Tokens after the first numbers, where the pattern is established.
        tail = [(o, v) for o, v in scored if o >= text.index("10")]
        lowest = min(tail, key=lambda item: item[1])[0]
        starts = sorted(o for o, _ in scored)
        token_end = next((o for o in starts if o > lowest), len(text))
        if not lowest <= start < token_end:  # the word's first token (a token later, it is merely unlikely)
            raise ModelError(
                f"{where} returns misaligned echoed log-probabilities (the least likely token of a probe is not "
                "the planted word's first), so it cannot score given text; use the local backend, or vLLM"
            )
        self.echo_checked = True

    def _echo(self, text: str) -> tuple[list[int], list[float | None]]:
        """Character offsets and log-probabilities of the tokens of `text`, as the server echoes them."""
        response = self._call(
            self.client.completions.create,
            model=self.model,
            prompt=text,
            echo=True,
            max_tokens=1,  # some servers refuse 0; the generated token lies past the text and is dropped
            temperature=0.0,
            logprobs=0,
        )
        choices = _choices(response, self.base_url)
        logprobs = getattr(choices[0], "logprobs", None) if choices else None
        tokens = list(getattr(logprobs, "tokens", None) or [])
        values = list(getattr(logprobs, "token_logprobs", None) or [])
        offsets = list(getattr(logprobs, "text_offset", None) or [])
        if len(values) != len(tokens):
            return [], []
        if len(offsets) != len(tokens):  # no offsets: recover them from the token texts
            offsets, at = [], 0
            for token in tokens:
                offsets.append(at)
                at += len(token or "")
        return [int(o) for o in offsets], [None if v is None else float(v) for v in values]

    def _score(self, prompt_text: str, continuation: str) -> TokenLogprobs:
        text = prompt_text + continuation
        offsets, values = self._echo(text)
        kept = [
            (o, v) for o, v in zip(offsets, values, strict=True) if len(prompt_text) <= o < len(text) and v is not None
        ]
        if continuation and not kept:
            raise ModelError(f"{self.base_url} echoed no log-probabilities for the scored text")
        bounds = [o for o, _ in kept] + [len(text)]
        return TokenLogprobs(
            tokens=[text[a:b] for a, b in itertools.pairwise(bounds)],
            logprobs=[v for _, v in kept],
        )

    # -- errors ---------------------------------------------------------------------------------------

    def _served_models(self) -> dict[str, int | None] | None:
        """Model ids the server lists, each with its context length when the server says (vLLM does); None
        when the server has no model list."""
        import openai

        try:
            page = self._call(self.client.models.list)
        except ModelError as exc:
            if isinstance(exc.__cause__, openai.NotFoundError):
                return None
            raise
        served: dict[str, int | None] = {}
        for item in getattr(page, "data", None) or []:
            extra = getattr(item, "model_extra", None) or {}
            length = extra.get("max_model_len") or extra.get("context_length")
            served[str(item.id)] = int(length) if isinstance(length, int) else None
        return served

    def _call(self, method: Callable[..., Any], **kwargs: Any) -> Any:
        return call_api(method, url=self.base_url, timeout=self.timeout, retries=self.retries, **kwargs)


class _FanOut(Generic[T]):
    """`calls` run `workers` at a time, on daemon threads, their results (or the first error) taken in order.

    What a thread pool does, except at an interruption: the pool's `with` block, then the interpreter's exit, wait
    for every request still held by the server, so Ctrl-C (or the TUI's Escape, `Cancelled` from a progress
    callback) would wait for them too. Here leaving the block drops the calls not started; on an error it waits for
    the running ones, as the pool did, but on an interruption it leaves them to their daemon threads, which the
    exit does not wait for (their results are not used)."""

    def __init__(self, calls: Sequence[Callable[[], T]], workers: int) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")  # as a pool refuses, rather than wait forever
        self.futures: list[Future[T]] = [Future() for _ in calls]
        self.queue: queue.SimpleQueue[tuple[Future[T], Callable[[], T]]] = queue.SimpleQueue()
        for future, call in zip(self.futures, calls, strict=True):
            self.queue.put((future, call))
        self.threads = [
            threading.Thread(target=self._work, name=f"assist-openai-{i}", daemon=True) for i in range(workers)
        ]

    def __enter__(self) -> _FanOut[T]:
        try:
            for thread in self.threads:
                thread.start()
        except BaseException:
            # `__exit__` is not run for a failed `__enter__`: drop the calls not sent, or the threads already
            # started would go on to send every one of them for no one.
            for future in self.futures:
                future.cancel()
            raise
        return self

    def _work(self) -> None:
        while True:
            try:
                future, call = self.queue.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue  # dropped before it was sent
            try:
                result = call()
            except BaseException as exc:  # handed to the caller, as a pool's worker does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def results(self, poll: Callable[[], None] = lambda: None) -> Iterator[T]:
        """Each call's result in the order of the calls; the first call that failed raises its error. While the next
        one is held, `poll` is called each POLL_S: a progress callback that raises (the TUI's Escape) ends the wait
        at once, not when the server answers."""
        for future in self.futures:
            while not wait([future], timeout=POLL_S).done:
                poll()
            yield future.result()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
        for future in self.futures:
            future.cancel()  # requests not yet sent are dropped
        if isinstance(error, Exception) and not isinstance(error, Cancelled):
            wait(self.futures)  # an error: the requests already sent end first, as before


def make_client(
    base_url: str | None, api_key: str | None, timeout: float, retries: int, *, what: str
) -> tuple[Any, str]:
    """An `openai` client for `base_url` (None: api.openai.com, which needs a key) and its URL as errors name it.

    `what` names the user of the server in the error for a missing URL, e.g. "the openai backend"."""
    import openai

    if base_url is None and api_key is None:
        raise UsageError(
            f"{what} needs a server URL (the openai.base_url setting, e.g. http://127.0.0.1:8080/v1, which "
            f"{SERVE_ON_A_PORT} starts) or OPENAI_API_KEY for api.openai.com",
            setting="base_url:missing",
            values={"what": what},
        )
    if base_url is not None:
        check_base_url(base_url)
    client = openai.OpenAI(
        base_url=base_url,
        api_key=api_key or "not-needed",  # local servers take any key; the client insists on one
        timeout=timeout,
        max_retries=retries,
    )
    return client, str(client.base_url).rstrip("/")


def check_base_url(base_url: str) -> None:
    """Refuse, with one line, a server URL that is not http(s)://host[:port]/...: `http://[::1` once reached the
    HTTP client, whose InvalidURL was a traceback."""
    problem = None
    try:
        parts = urllib.parse.urlsplit(base_url)
        parts.port  # noqa: B018 - a port that is not a number from 0 to 65535 raises here
    except ValueError as exc:
        problem = str(exc)
    else:
        if parts.scheme.lower() not in ("http", "https"):
            problem = "not an http(s) URL"
        elif not parts.hostname or any(c.isspace() for c in base_url):
            problem = "no host" if not parts.hostname else "it holds a space"
    if problem is not None:
        raise UsageError(f"the base URL {base_url!r} is not a server's URL ({problem}); e.g. http://127.0.0.1:8080/v1")


def call_api(
    method: Callable[..., Any],
    *,
    url: str,
    timeout: float,
    retries: int,
    too_long: str | None = None,
    **kwargs: Any,
) -> Any:
    """Call an `openai` client method, turning its exceptions into one-line errors that say what to do
    (`too_long`: what to do when the server says the input is too long; None: use fewer demonstrations)."""
    import openai

    try:
        return method(**kwargs)
    except openai.APITimeoutError:
        raise ModelError(
            f"{url} did not answer within {timeout:g} s ({retries} retries); raise the openai.timeout setting or "
            "check the server",
            setting="timeout:expired",
            values={"url": url, "timeout": timeout, "retries": retries},
        ) from None
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise ModelError(
            f"cannot reach {url} ({type(cause).__name__}); is the server running? {SERVE_ON_A_PORT} starts a "
            "local one at http://127.0.0.1:8080/v1"
        ) from None
    except openai.AuthenticationError:
        raise ModelError(f"{url} refused the API key; set OPENAI_API_KEY (or openai.api_key in the config)") from None
    except openai.NotFoundError as exc:
        model = kwargs.get("model")
        what = f"does not know model {model!r}" if model else "has no such endpoint"
        message = _message(exc)
        error = ModelError(
            f"{url} {what} (404: {message}); check the model and openai.base_url settings (usually …/v1)",
            setting="model:not_found",
            values={"url": url, "what": what, "message": message},
        )
        raise error from exc
    except openai.RateLimitError:
        raise ModelError(
            f"{url} is rate-limiting requests (429 after {retries} retries); try later or lower openai.concurrency"
        ) from None
    except openai.BadRequestError as exc:
        text = _message(exc)
        if any(word in text.lower() for word in ("context", "too long", "maximum", "exceed")):
            if too_long is None:  # the prompt's demonstrations are what a user can cut
                raise UsageError(
                    f"{url} says the input is too long: {text}; use fewer demonstrations",
                    setting="k:server_too_long",
                    values={"url": url, "text": text},
                ) from None
            raise UsageError(f"{url} says the input is too long: {text}; {too_long}") from None
        raise ModelError(f"{url} rejected the request: {text}") from None
    except openai.APIStatusError as exc:
        raise ModelError(f"{url} failed with HTTP {exc.status_code} after {retries} retries: {_message(exc)}") from None
    except (openai.APIResponseValidationError, ValueError) as exc:
        raise ModelError(f"{url} sent a response that is not valid OpenAI JSON ({type(exc).__name__})") from None


def _assembled(events: Any, stream: RowStream) -> Any:
    """A streamed response put together as the plain one reads (choices with their text or message, log-probabilities
    and finish reason; usage), its first choice's text told to `stream` as it grows. A server that ignored `stream`
    and answered JSON is read as JSON."""
    with events:
        if "text/event-stream" not in events.response.headers.get("content-type", ""):
            return _namespace(json.loads(events.response.read()))
        return _gathered(events, stream)


def _gathered(events: Any, stream: RowStream) -> Any:
    """The events of a streamed response as one response (see `_assembled`)."""
    texts: dict[int, str] = {}
    entries: dict[int, list[Any]] = {}  # chat: one entry per token; completions: the token log-probabilities
    finish: dict[int, Any] = {}
    usage, chat = None, False
    for event in events:
        usage = getattr(event, "usage", None) or usage
        for choice in getattr(event, "choices", None) or []:
            index = choice.index
            delta = getattr(choice, "delta", None)
            chat = chat or delta is not None
            piece = (getattr(delta, "content", None) if delta is not None else getattr(choice, "text", None)) or ""
            texts[index] = texts.get(index, "") + piece
            logprobs = getattr(choice, "logprobs", None)
            values = getattr(logprobs, "content" if delta is not None else "token_logprobs", None) or []
            entries.setdefault(index, []).extend(values)
            finish[index] = getattr(choice, "finish_reason", None) or finish.get(index)
            if index == 0 and piece:
                stream.text(texts[0])
    choices = []
    for index in sorted(texts):
        if chat:
            logprobs = SimpleNamespace(content=entries[index])
            choices.append(SimpleNamespace(message=SimpleNamespace(content=texts[index]), logprobs=logprobs))
        else:
            choices.append(SimpleNamespace(text=texts[index], logprobs=SimpleNamespace(token_logprobs=entries[index])))
        choices[-1].finish_reason = finish[index]
    return SimpleNamespace(choices=choices, usage=usage)


def _namespace(value: Any) -> Any:
    """Parsed JSON with attribute access, as the `openai` client's objects are read here."""
    if isinstance(value, dict):
        return SimpleNamespace(**{str(key): _namespace(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_namespace(item) for item in value]
    return value


def _choices(response: Any, url: str) -> list[Any]:
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        raise ModelError(f"{url} sent a response without choices; is it an OpenAI-compatible server?")
    return choices


def _finish(reason: Any) -> str:
    return "length" if reason == "length" else "stop"


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:200]
        if isinstance(inner, str):
            return inner[:200]
    return str(getattr(exc, "message", exc))[:200]


def _local_tokenizer(name: str, explicit: bool) -> Any:
    """The tokenizer of a registered local model that is already converted, or None (counts are estimates)."""
    from assistant.backends.models import generator_dir, ready_tokenizer_dir, resolve

    try:
        spec = resolve(name, "generator")
    except UsageError:
        if explicit:
            raise
        return None
    try:
        directory = generator_dir(spec)
    except ModelError:
        # A fresh install that ran only the default engine has the tokenizer without the transformers copy.
        directory = ready_tokenizer_dir(spec)
        if directory is None:
            if explicit:
                raise
            log.info("token counts are estimates: run `assist models pull %s` to count exactly", spec.name)
            return None
    from assistant.backends.tokenizer import ChatTokenizer

    return ChatTokenizer(directory)
