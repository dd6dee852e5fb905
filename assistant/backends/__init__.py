"""Generation backends: one interface, one module per backend, looked up by name.

A backend samples candidates for a :class:`~assistant.backends.prompts.Prompt` and, where it can, scores a
continuation's token log-probabilities (what the log-probability ranker, LAIL labeling and JOINTCOM
training need). Backends are imported lazily: `torch` is only loaded when the local backend is used.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from assistant.backends.prompts import Prompt
from assistant.errors import UsageError
from assistant.progress import Progress


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: defaults follow the LAIL paper (temperature 0.8, top-p 0.95)."""

    n: int = 5
    temperature: float = 0.8
    top_p: float = 0.95
    max_new_tokens: int = 256
    seed: int | None = None


@dataclass(frozen=True)
class Completion:
    """One sampled continuation (the text after the answer prefix, cut at the stop string)."""

    text: str
    tokens: int
    finish_reason: str  # "stop" (closing fence) or "length"
    # Raw log-probabilities of the text's tokens, when the backend reports them (free with local sampling).
    logprobs: tuple[float, ...] | None = None


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


class Backend(Protocol):
    """What every backend offers."""

    name: str
    model: str
    context: int | None  # tokens; None when the server does not say
    usage: Usage
    # Whether `logprob()` can score given text; when False, `scoring_unavailable` says why.
    can_score: bool
    scoring_unavailable: str
    # Whether the model continues from `prompt.answer_prefix` (local, completions endpoints) rather than
    # starting its answer afresh (chat endpoints): callers may put words in the model's mouth only if so.
    prefills_answer: bool

    def count_tokens(self, prompt: Prompt) -> int:
        """Tokens the prompt takes (exact when the tokenizer is known)."""
        ...

    def sample(self, prompt: Prompt, params: SamplingParams, step: Step | None = None) -> list[Completion]:
        """`params.n` continuations of the prompt; `step` is told how far sampling has got."""
        ...

    def logprob(self, pairs: Sequence[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        """Token log-probabilities of each continuation given its prompt, batched."""
        ...


BACKENDS: dict[str, str] = {
    "local": "assistant.backends.local:LocalBackend",
    "openai": "assistant.backends.openai_api:OpenAIBackend",
}


def load_backend(name: str, model: str | None = None, progress: Progress | None = None, **options: Any) -> Backend:
    """Create a registered backend (`local`, `openai`) for a model name; unknown names are a one-line error.

    `options` are the backend's own settings (for `openai`: base_url, api_key, api, timeout, retries,
    concurrency, context, logprobs, tokenizer); see :mod:`assistant.config`.
    """
    target = BACKENDS.get(name)
    if target is None:
        raise UsageError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.load(model, progress=progress, **options)
