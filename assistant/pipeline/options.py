"""What to generate with: the one home of the generation defaults, settable in config files and the environment.

`GenerationOptions()` holds the defaults (:mod:`assistant.config`'s constants); `GenerationOptions.from_settings`
takes the `[generate]` table of `~/.config/assist/config.toml` / `.assist.toml` and the `ASSIST_GENERATE_*`
environment variables, with command-line flags (None = not given) on top.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from assistant.backends import SamplingParams
from assistant.config import (
    DEFAULT_APIS,
    DEFAULT_FRAGMENTS,
    DEFAULT_K,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_N,
    DEFAULT_OWN_FILE,
    DEFAULT_RANKER,
    DEFAULT_REDRAW,
    DEFAULT_REPAIR,
    DEFAULT_RETRIEVER,
    DEFAULT_TEMPERATURE,
    DEFAULT_TESTS_IN_PROMPT,
    DEFAULT_TOP_P,
    MAX_K,
    MAX_N,
    MAX_NEW_TOKENS_LIMIT,
    MAX_REPAIR,
    MAX_TEMPERATURE,
    SEED_MAX,
    Settings,
)
from assistant.errors import UsageError


@dataclass(frozen=True)
class GenerationOptions:
    """How a request is generated: which retriever and rankers, how many candidates and demonstrations, and how
    to sample. `max_new_tokens=None` means 256 for free generation, sized to the docstring when filling a stub."""

    retriever: str = DEFAULT_RETRIEVER
    ranker: str = DEFAULT_RANKER
    n: int = DEFAULT_N
    k: int = DEFAULT_K
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_new_tokens: int | None = None
    seed: int | None = None
    apis: bool = DEFAULT_APIS  # filling a stub: show the repo's functions from other files that its file uses
    redraw: bool = DEFAULT_REDRAW  # filling a stub: draw once more each sample that wrote nothing
    # filling a stub: the repo's 20-line fragments of other files, found with the code before the body, instead of
    # demonstrations (RepoEval's context)
    fragments: bool = DEFAULT_FRAGMENTS
    own_file: bool = DEFAULT_OWN_FILE  # filling a stub: demonstrations may be its own file's other functions
    repair: int = DEFAULT_REPAIR  # with tests and no candidate passing: repair rounds (assistant.core.repair)
    tests_in_prompt: bool = DEFAULT_TESTS_IN_PROMPT  # filling a stub: the repo's tests that mention it, in the prompt

    @classmethod
    def from_settings(cls, settings: Settings | None, **overrides: Any) -> GenerationOptions:
        """The `generate.*` settings (defaults < user config < repo file < env), then `overrides` (flags; None =
        not given, so the setting stands)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown generation option {unknown[0]!r}")
        values: dict[str, Any] = {}
        if settings is not None:
            for name in names:
                key = f"generate.{name}"
                if key in settings.values:
                    values[name] = settings[key]
        values.update({name: value for name, value in overrides.items() if value is not None})
        return cls(**values)

    @property
    def sample_tokens(self) -> int:
        """The token limit of free generation (a stub's own limit is sized by :mod:`assistant.core.stubs`)."""
        return self.max_new_tokens or DEFAULT_MAX_NEW_TOKENS

    def params(self) -> SamplingParams:
        """Sampling parameters for free generation: n, temperature, top-p, token limit and seed."""
        return SamplingParams(
            n=self.n,
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.sample_tokens,
            seed=self.seed,
        )

    def check(self) -> GenerationOptions:
        """Refuse out-of-range numbers and unknown retriever or ranker names with one line; returns self."""
        from assistant.pipeline.registry import RETRIEVER_CHOICES, parse_rankers

        if self.retriever not in RETRIEVER_CHOICES:
            raise UsageError(f"unknown retriever {self.retriever!r}; choose from: {', '.join(RETRIEVER_CHOICES)}")
        if self.ranker != "auto":
            parse_rankers(self.ranker)
        tokens = self.max_new_tokens
        if not 1 <= self.n <= MAX_N or not 0 <= self.k <= MAX_K or not 0 <= self.temperature <= MAX_TEMPERATURE:
            raise UsageError(
                f"n must be from 1 to {MAX_N}, k from 0 to {MAX_K}, temperature from 0 to {MAX_TEMPERATURE:g}"
            )
        if tokens is not None and not 1 <= tokens <= MAX_NEW_TOKENS_LIMIT:
            raise UsageError(f"max new tokens must be from 1 to {MAX_NEW_TOKENS_LIMIT}")
        if not 0 < self.top_p <= 1:
            raise UsageError("top-p must be above 0 and at most 1")
        if not 0 <= self.repair <= MAX_REPAIR:
            raise UsageError(f"repair rounds must be from 0 to {MAX_REPAIR}")
        if self.seed is not None and not 0 <= self.seed <= SEED_MAX:
            raise UsageError(f"the seed must be from 0 to {SEED_MAX}")
        return self

    def but(self, **changes: Any) -> GenerationOptions:
        """A copy with some options changed (None leaves one as it is)."""
        return replace(self, **{name: value for name, value in changes.items() if value is not None})
