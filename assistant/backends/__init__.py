"""Generation backends: one interface, one module per backend, looked up by name.

A backend samples candidates for a :class:`~assistant.prompts.Prompt` and, where it can, scores a
continuation's token log-probabilities (what the log-probability ranker, LAIL labeling and JOINTCOM
training need). Backends are imported lazily: `torch` is only loaded when the local backend is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import UsageError
from ..prompts import Prompt


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


# progress(stage, done, total)
Progress = Callable[[str, int, int], None]


class Backend(Protocol):
    """What every backend offers."""

    name: str
    model: str
    context: int

    def count_tokens(self, prompt: Prompt) -> int:
        """Tokens the prompt takes (exact when the tokenizer is known)."""
        ...

    def sample(self, prompt: Prompt, params: SamplingParams) -> list[Completion]:
        """`params.n` continuations of the prompt."""
        ...

    def logprob(self, pairs: Sequence[tuple[Prompt, str]]) -> list[TokenLogprobs]:
        """Token log-probabilities of each continuation given its prompt, batched."""
        ...


BACKENDS: dict[str, str] = {
    "local": "assistant.backends.local:LocalBackend",
}


def load_backend(name: str, model: str | None = None, progress: Progress | None = None) -> Backend:
    """Create a registered backend (`local`, ...) for a model name; unknown names are a one-line error."""
    target = BACKENDS.get(name)
    if target is None:
        raise UsageError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.load(model, progress=progress)
