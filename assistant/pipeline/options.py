"""What to generate with: the one home of the generation defaults, settable in config files and the environment.

`GenerationOptions()` holds the defaults (:mod:`assistant.config`'s constants); `GenerationOptions.from_settings`
takes the `[generate]` table of `~/.config/assist/config.toml` / `.assist.toml` and the `ASSIST_GENERATE_*`
environment variables, with command-line flags (None = not given) on top.
"""

from __future__ import annotations

import math
from collections.abc import Collection
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
    DEFAULT_STUB_K,
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

# The numeric settings' bounds, in the order they are checked: (setting, low, high, low end open).
RANGES: tuple[tuple[str, float, float, bool], ...] = (
    ("n", 1, MAX_N, False),
    ("k", 0, MAX_K, False),
    ("max_new_tokens", 1, MAX_NEW_TOKENS_LIMIT, False),
    ("seed", 0, SEED_MAX, False),
    ("temperature", 0, MAX_TEMPERATURE, False),
    ("top_p", 0, 1, True),
    ("repair", 0, MAX_REPAIR, False),
)
# Settings that only mean something when filling a stub, in the order they are checked.
STUB_ONLY = ("apis", "redraw", "fragments", "own_file", "tests_in_prompt")


class SettingError(UsageError):
    """A generation setting the library refuses, worded with the setting's name (the `generate.*` setting's).

    `setting` names it, or the settings that do not go together joined by "+" ("fragments+bank"); `bounds` is a
    range's "must be ..., not X". Enough for a door to say the same line in its own terms (the CLI's flags).
    """

    def __init__(self, message: str, setting: str, bounds: str = "") -> None:
        super().__init__(message, setting=setting)
        self.setting: str = setting
        self.bounds = bounds


def out_of_range(
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> str | None:
    """None when `value` lies in [low, high] (or an open end) or is None (not given); else the phrase that says
    so, "must be at least 1 and at most 64, not 0". NaN and infinity are refused."""
    if value is None:
        return None
    ok = isinstance(value, int) or math.isfinite(value)  # a 400-digit int overflows isfinite: compare it whole
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if ok:
        return None
    bounds = []
    if low is not None:
        bounds.append(f"above {show_number(low)}" if low_open else f"at least {show_number(low)}")
    if high is not None:
        bounds.append(f"below {show_number(high)}" if high_open else f"at most {show_number(high)}")
    return f"must be {' and '.join(bounds) or 'a finite number'}, not {show_number(value)}"


def show_number(value: float) -> str:
    """A number as the user would type it: 1 rather than 1.0, whole numbers in full (a huge one cut short)."""
    if isinstance(value, int):
        return str(value) if abs(value) < 10**30 else f"{str(value)[:12]}... ({len(str(abs(value)))} digits)"
    if math.isfinite(value) and value.is_integer():
        return str(int(value))
    return f"{value:g}"


def _check_name(setting: str, value: str) -> None:
    """Refuse an unknown retriever or ranker name (`setting`) with the registry's one line."""
    from assistant.pipeline.registry import RETRIEVER_CHOICES, check_rankers

    if setting == "retriever" and value not in RETRIEVER_CHOICES:
        raise UsageError(f"unknown retriever {value!r}; choose from: {', '.join(RETRIEVER_CHOICES)}")
    if setting == "ranker" and value != "auto":
        check_rankers(value)


def _check_environment() -> None:
    """The environment variables read deep in a request (`ASSIST_AGREE_BATCH` when agree ranks, `ASSIST_STALL_S`
    when the OpenVINO engine loads), refused here with their one line: before any model loads, and whichever
    engine or ranker this request ends up with."""
    from assistant.backends.watchdog import stall_limit
    from assistant.core.agreement import batching_on

    batching_on()
    stall_limit(1.0)


def _check_names_from(settings: Settings, skip: Collection[str]) -> None:
    """The retriever and ranker names `settings` hold, checked where they came from (not the `skip`ped ones, which
    the request sets itself): an unknown name in a config file or the environment names that file or variable
    and the setting, as a bad number there does ("bad value for generate.n from ...")."""
    for name in ("retriever", "ranker"):
        setting = settings.values.get(f"generate.{name}")
        if name in skip or setting is None or setting.source == "default":
            continue
        try:
            _check_name(name, setting.value)
        except UsageError as exc:
            raise UsageError(f"bad value for generate.{name} from {setting.source}: {exc}") from None


@dataclass(frozen=True)
class GenerationOptions:
    """How a request is generated: which retriever and rankers, how many candidates and demonstrations, and how
    to sample. `max_new_tokens=None` means 256 for free generation, sized to the docstring when filling a stub."""

    retriever: str = DEFAULT_RETRIEVER
    ranker: str = DEFAULT_RANKER
    n: int = DEFAULT_N
    k: int | None = None  # None: DEFAULT_K, or DEFAULT_STUB_K filling a stub (:meth:`k_for`)
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
        given = {name: value for name, value in overrides.items() if value is not None}
        if settings is not None:
            _check_names_from(settings, skip=set(given))
        values.update(given)
        return cls(**values)

    def k_for(self, stub: bool) -> int:
        """Demonstrations to retrieve for a request: `k` where set, else the default for its kind (fewer for a
        stub, whose prompt shows its own file already)."""
        if self.k is not None:
            return self.k
        return DEFAULT_STUB_K if stub else DEFAULT_K

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

    def check(
        self,
        *,
        explicit: Collection[str] = (),
        stub: bool | None = None,
        bank: bool = False,
        tests: bool | None = None,
    ) -> GenerationOptions:
        """Refuse out-of-range numbers, unknown retriever or ranker names and contradicting settings with one
        line (a :class:`SettingError`, or the registry's UsageError for a name); returns self.

        The combinations are checked only among the `explicit` settings (those the request set itself, not the
        config's): stub-only settings without a stub (`stub` False; None: not known), fragments or own_file with
        a `bank`, own_file with fragments, fragments with k = 0, repair rounds with no tests to repair against
        (`tests` False and no stub, whose repo's tests may run; None: not known).
        """
        for name, low, high, low_open in RANGES:
            phrase = out_of_range(getattr(self, name), low, high, low_open=low_open)
            if phrase is not None:
                raise SettingError(f"{name} {phrase}", name, bounds=phrase)
        self._check_combinations(set(explicit), stub, bank, tests)
        _check_name("retriever", self.retriever)
        _check_name("ranker", self.ranker)
        _check_environment()
        return self

    def _check_combinations(self, explicit: set[str], stub: bool | None, bank: bool, tests: bool | None) -> None:
        """The combinations :meth:`check` refuses, among the `explicit` settings."""
        said = {name for name in explicit if getattr(self, name) is True}  # switched on by the request
        if "repair" in explicit and self.repair > 0 and stub is False and tests is False:
            why = "repair rounds rerun tests on a new candidate: give tests to repair against"
            raise SettingError(why, "repair+tests")
        if "fragments" in said and "k" in explicit and self.k == 0:
            raise SettingError("fragments shows k retrieved fragments; k = 0 would show none", "fragments+k")
        for name in STUB_ONLY if stub is False else ():
            if name in said:
                raise SettingError(f"{name} is for filling a stub, not free generation", name)
        if bank and "fragments" in said:
            raise SettingError("fragments retrieves the repository's code, not a bank's", "fragments+bank")
        if bank and "own_file" in said:
            raise SettingError("own_file takes demonstrations from the repository's index, not a bank", "own_file+bank")
        if {"own_file", "fragments"} <= said:
            raise SettingError(
                "fragments shows fragments instead of demonstrations: own_file would change nothing",
                "own_file+fragments",
            )

    def but(self, **changes: Any) -> GenerationOptions:
        """A copy with some options changed (None leaves one as it is)."""
        return replace(self, **{name: value for name, value in changes.items() if value is not None})
