"""Generation backends: one interface, one module per backend, looked up by name.

A backend (a subclass of :class:`Backend`) samples candidates for a :class:`~assistant.backends.prompts.Prompt`
and, where it can, scores a continuation's token log-probabilities (what the log-probability ranker, LAIL labeling
and JOINTCOM training need); it declares what it can do as attributes (`batches_prompts`, `logprobs`, `can_score`,
`prefills_answer`, `streams`) and says who it is for caches (`identity`). `BACKENDS` is the one registry (name →
class); `describe_backends()` lists it, `load_backend()` creates one. Backends are imported lazily: `torch` is only
loaded when the local backend is used. `streaming()` lets a terminal show the first row of each sampling call as it
is written.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from assistant.backends.prompts import Prompt
from assistant.config import DEFAULT_MAX_NEW_TOKENS, DEFAULT_N, DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from assistant.errors import ModelError, UsageError
from assistant.lazy import Lazy
from assistant.progress import Progress


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. The defaults are the settings' (:mod:`assistant.config`, after the LAIL paper: temperature 0.8,
    top-p 0.95); a request's own come from :class:`~assistant.pipeline.options.GenerationOptions`."""

    n: int = DEFAULT_N
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    seed: int | None = None


@dataclass(frozen=True)
class SampleGroup:
    """Prompts sampled with one setting, each with its own seed (`seeds`, default `params.seed` for all): one part
    of a :meth:`Backend.sample_groups` call, which decodes several such parts together."""

    prompts: tuple[Prompt, ...]
    params: SamplingParams
    seeds: tuple[int | None, ...] | None = None


@dataclass(frozen=True)
class Completion:
    """One sampled continuation (the text after the answer prefix, cut at the stop string)."""

    text: str
    tokens: int
    finish_reason: str  # "stop" (closing fence) or "length"
    # Raw log-probabilities of the text's tokens, when the backend reports them (free with local sampling).
    logprobs: tuple[float, ...] | None = None
    # Why the engine ended the row before its end ("looping", "ran past the others": `assistant.backends.loops`);
    # `finish_reason` is then "length", so every caller treats the row as unfinished, as one cut by the limit.
    cut_reason: str | None = None


@dataclass(frozen=True)
class TokenLogprobs:
    """Log-probabilities of a continuation's tokens given a prompt."""

    tokens: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        """Mean token log-probability (LAIL's G); -inf for an empty continuation."""
        return sum(self.logprobs) / len(self.logprobs) if self.logprobs else float("-inf")


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(text: str, what: str = "the prompt") -> None:
    """Refuse text that is not valid Unicode with one clear line, before a tokenizer or a server sees it.

    Undecodable bytes reach Python strings as lone surrogates (argv and file names use `surrogateescape`):
    tokenizers then fail with a TypeError and the `openai` client with an encoding error that looks like a
    bad server reply.
    """
    found = _SURROGATE.search(text)
    if found is None:
        return
    at = found.start()
    raise UsageError(
        f"{what} holds bytes that are not UTF-8 (U+{ord(found.group()):04X} at character {at + 1}, after "
        f"{text[max(0, at - 20) : at]!r}); give the text as UTF-8"
    )


def check_prompt(prompt: Prompt) -> None:
    """:func:`check_text` for every part of a prompt a backend sends."""
    for message in prompt.messages:
        check_text(str(message.get("content", "")))
    check_text(prompt.answer_prefix)


# step(done, total) while sampling: tokens generated (local) or requests answered (servers). A step
# callback that raises stops the sampling there, which is how interactive callers cancel it.
Step = Callable[[int, int], None]

# A seed for each prompt of a sampling call, in the prompts' order (None: that prompt draws afresh).
Seeds = Sequence[int | None]


def check_seeds(prompts: Sequence[Prompt], seeds: Seeds | None) -> None:
    """Refuse seeds that are not one per prompt (every backend's `sample_batch` and `sample_groups` ask this)."""
    if seeds is not None and len(seeds) != len(prompts):
        raise ValueError("one seed per prompt")


# on_text(call, text) inside a `streaming` block: the first row of the block's `call`-th sampling call (0, 1, ...)
# as it is written, i.e. the answer's opening (`Prompt.answer_prefix`) and the text decoded so far, cut at the stop
# string. Display only: the samples are the same with or without a listener. If it raises, sampling stops there.
OnText = Callable[[int, str], None]


class _Listener:
    """Who hears the rows of a `streaming` block, and how many sampling calls it has seen."""

    def __init__(self, on_text: OnText) -> None:
        self.on_text = on_text
        self.calls = 0


_listener: ContextVar[_Listener | None] = ContextVar("assist_streaming", default=None)


@contextmanager
def streaming(on_text: OnText) -> Iterator[None]:
    """Within the block, each sampling call (of a backend that `streams`, on this thread) tells `on_text` its first
    row as it grows: what a terminal shows while the whole request is still running. A context variable rather than
    a parameter: the pipeline and its stages between the door and the backend need not carry it."""
    token = _listener.set(_Listener(on_text))
    try:
        yield
    finally:
        _listener.reset(token)


class RowStream:
    """One sampling call's first row, told to the `streaming` listener as it grows (made by :func:`row_stream`)."""

    def __init__(self, on_text: OnText, call: int, lead: str, stops: Sequence[str]) -> None:
        self.on_text, self.call, self.lead, self.stops = on_text, call, lead, tuple(stops)
        self.shown: str | None = None

    def text(self, text: str) -> None:
        """The row's text so far (after the answer prefix): told to the listener, cut at the first stop string,
        when it changed."""
        cut = min((text.find(stop) for stop in self.stops if stop in text), default=-1)
        shown = self.lead + (text[:cut] if cut >= 0 else text)
        if shown != self.shown:
            self.shown = shown
            self.on_text(self.call, shown)


def row_stream(lead: str, stops: Sequence[str]) -> RowStream | None:
    """The stream of the sampling call starting now (its first row's text is `lead` and what is decoded after it),
    or None when no `streaming` block listens: a backend then does no extra work."""
    listener = _listener.get()
    if listener is None:
        return None
    listener.calls += 1
    return RowStream(listener.on_text, listener.calls - 1, lead, stops)


def first_row_stream(prompts: Sequence[Prompt]) -> RowStream | None:
    """`row_stream` for a call that samples `prompts` together: a listener hears the first prompt's first row (None
    for no prompts, which start no sampling call, or no listener)."""
    return row_stream(prompts[0].answer_prefix, prompts[0].stop) if prompts else None


class Usage:
    """Running totals of what a backend did: requests, tokens in and out, wall time. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.seconds = 0.0

    def add(self, prompt_tokens: int, completion_tokens: int, seconds: float, requests: int = 1) -> None:
        with self._lock:
            self.requests += requests
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.seconds += seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
        }

    def since(self, before: dict[str, Any]) -> dict[str, Any]:
        """What was used after `before` (an earlier `to_json()`)."""
        now = self.to_json()
        return {key: round(now[key] - before.get(key, 0), 3) for key in now}


@dataclass(frozen=True)
class BackendIdentity:
    """Who makes a backend's samples and scores, as caches and trained-artifact manifests record it.

    Equal identities mean the same samples for the same prompt, parameters and seed, and the same scores, as far as
    assist can tell: an identity holds the model name and the settings that change outputs (local precision, a
    server's endpoint kind), not threads, context limits, timeouts or URLs (a server is known by the model name it
    serves). Its strings are the ones caches already hold, so committed caches stay valid. Hashable and comparable.
    """

    backend: str  # the registered name: local, openai
    model: str
    # The `backend` part of `eval codegen`'s sample keys: `local`, `openai-chat`, `openai-completions`. It does not
    # tell local fp32 from bf16 (every committed local cache is fp32).
    kind: str
    # One string naming who produced a score (LAIL's label cache keys): the local model's plain name in fp32,
    # `model@bf16` in bf16, `backend:model` for a server.
    label: str
    # What manifests record beside the backend and model, e.g. the local precision; (name, value) pairs.
    details: tuple[tuple[str, str], ...] = ()

    def manifest(self) -> dict[str, str]:
        """The `labeler` / `generator` entry of a trained artifact's manifest."""
        return {"backend": self.backend, "model": self.model, **dict(self.details)}

    def __str__(self) -> str:
        return self.label


class Backend:
    """Base class of every backend: what it can do, declared as attributes, and the calls it offers.

    A subclass declares its capabilities as class attributes, or sets them per instance where they depend on its
    settings (a server's endpoint kind), implements `load`, `count_tokens` and `sample`, and `logprob` when it
    scores given text. Callers test the capabilities, never `hasattr`:

    - `batches_prompts`: `sample_batch` decodes several prompts together, so grouping prompts is worth it (the
      default `sample_batch` samples them one after the other).
    - `batches_groups`: `sample_groups` decodes groups of prompts with different settings together, so a side
      request (agree's tests) may ride along with a sampling call at little cost (the default `sample_groups`
      samples the groups one after the other).
    - `logprobs`: it reports token log-probabilities, with its samples (`Completion.logprobs`) or by scoring
      given text (`can_score`): the logprob ranker can work. `can_score` implies `logprobs`.
    - `can_score`: `logprob()` scores given text (the logprob ranker's fallback, LAIL labeling, `eval
      likelihood`, JOINTCOM); when False, `scoring_unavailable` says why, in words that fit after a colon.
    - `prefills_answer`: the model continues from `prompt.answer_prefix` (local, completions endpoints) rather
      than starting its answer afresh (chat endpoints): callers may put words in its mouth only if so.
    - `streams`: inside a :func:`streaming` block, its sampling calls tell the listener their first row as it is
      decoded; others tell nothing until the call ends.
    - `identity`: a :class:`BackendIdentity`, what caches and manifests record.
    """

    name: ClassVar[str] = ""  # the name it is registered under in BACKENDS
    description: ClassVar[str] = ""  # one line for the settings screen (default: the docstring's first line)

    batches_prompts: bool = False
    batches_groups: bool = False
    logprobs: bool = False
    can_score: bool = False
    scoring_unavailable: str = "this backend does not score given text"
    prefills_answer: bool = False
    streams: bool = False

    model: str = ""
    context: int | None = None  # tokens; None when the server does not say
    usage: Usage

    @classmethod
    def load(cls, model: str | None = None, progress: Progress | None = None, **options: Any) -> Backend:
        """Create the backend for a model name (None: its default) with its own settings; see `load_backend`."""
        raise NotImplementedError

    @property
    def identity(self) -> BackendIdentity:
        """What caches and manifests record (the registered name and the model, by default)."""
        return BackendIdentity(self.name, self.model, kind=self.name, label=f"{self.name}:{self.model}")

    def count_tokens(self, prompt: Prompt) -> int:
        """Tokens the prompt takes (exact when the tokenizer is known)."""
        raise NotImplementedError

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        """`params.n` continuations of the prompt; `step` is told how far sampling has got (and may raise to stop)."""
        raise NotImplementedError

    def sample_batch(
        self, prompts: Sequence[Prompt], params: SamplingParams, step: Step | None = None, seeds: Seeds | None = None
    ) -> list[list[Completion]]:
        """`params.n` continuations for each prompt, in order; `seeds` gives each prompt its own seed (default:
        `params.seed` for all), so a prompt's samples do not depend on which prompts share the call.

        This default samples the prompts one after the other through `sample`; `step` sees the whole call's
        progress (prompt i's (done, total) as (i * total + done, len(prompts) * total)). Backends that decode
        several prompts together override it and set `batches_prompts`.
        """
        check_seeds(prompts, seeds)
        results = []
        for position, prompt in enumerate(prompts):
            own = params if seeds is None else replace(params, seed=seeds[position])
            results.append(self.sample(prompt, own, None if step is None else _offset(step, position, len(prompts))))
        return results

    def sample_groups(self, groups: Sequence[SampleGroup], step: Step | None = None) -> list[list[list[Completion]]]:
        """Each group's `sample_batch` (its prompts, parameters and seeds), in order: a group's samples are what
        `sample_batch` gives it alone. A `streaming` listener hears the first group's first row (from this default,
        each group's in turn, as sampling calls of their own).

        This default samples the groups one after the other; `step` sees the whole call's progress (group i's
        (done, total) as (i * total + done, len(groups) * total)). Backends that decode the groups together
        override it and set `batches_groups`."""
        return [
            self.sample_batch(
                group.prompts,
                group.params,
                None if step is None else _offset(step, position, len(groups)),
                None if group.seeds is None else list(group.seeds),
            )
            for position, group in enumerate(groups)
        ]

    def logprob(self, pairs: Sequence[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        """Token log-probabilities of each continuation given its prompt, batched (when `can_score`)."""
        raise ModelError(f"the {self.name} backend cannot score given text: {self.scoring_unavailable}")


def _offset(step: Step, position: int, count: int) -> Step:
    """`step` for the `position`-th of `count` calls made one after another: progress over the whole run."""

    def report(done: int, total: int) -> None:
        step(position * total + done, count * total)

    return report


BACKENDS: dict[str, str] = {
    "local": "assistant.backends.local:LocalBackend",
    "openai": "assistant.backends.openai_api:OpenAIBackend",
    "local-ov": "assistant.backends.ov:OpenVINOBackend",  # the default local engine
    "local-ct2": "assistant.backends.ct2:CT2Backend",  # optional extra: pip install -e '.[fast]' (ctranslate2)
}
# The backends a person names (the docs' `local` and `openai`). `local-ov` and `local-ct2` are the local backend's
# engines as registered (what `local` becomes with the engine setting, and what results record): they keep
# working by name, but an unknown name's error lists only these.
NAMED_BACKENDS = ("local", "openai")


def backend_class(name: str) -> type[Backend]:
    """The class registered as `name`; unknown names are a one-line error."""
    target = BACKENDS.get(name)
    if target is None:
        raise UsageError(f"unknown backend {name!r}; available: {', '.join(NAMED_BACKENDS)}")
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def describe_backends() -> dict[str, str]:
    """Every registered backend, in registration order, with one line saying what it is (for settings screens).

    Imports each backend's module (cheap: none loads a model or torch on import); a backend whose module cannot
    be imported is listed with the reason.
    """
    described = {}
    for name in BACKENDS:
        try:
            cls = backend_class(name)
        except Exception as exc:  # a broken or missing optional module must not hide the others
            described[name] = f"unavailable: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}"
            continue
        doc = (cls.__doc__ or "").strip().splitlines()
        described[name] = getattr(cls, "description", "") or (doc[0] if doc else "")
    return described


def load_backend(name: str, model: str | None = None, progress: Progress | None = None, **options: Any) -> Backend:
    """Create a registered backend (`local`, `openai`) for a model name; unknown names are a one-line error.

    `options` are the backend's own settings (for `openai`: base_url, api_key, api, timeout, retries,
    concurrency, context, logprobs, tokenizer); see :mod:`assistant.config`.
    """
    return backend_class(name).load(model, progress=progress, **options)


class LazyBackend(Lazy[Backend]):
    """A backend that loads on first use, its model's name known before: a second model only some requests call
    (the one that writes agree's tests, where it is not the generator). Everything but `model` loads it."""

    def __init__(self, model: str, load: Callable[[], Backend]) -> None:
        super().__init__(load)
        self.model = model
