"""Settings, layered: defaults < user config < the repo's `.assist.toml` < environment < command-line flags.

The user config is `~/.config/assist/config.toml` (XDG; `ASSIST_CONFIG_DIR` overrides the folder). Both files
use the same keys::

    backend = "openai"            # or "local"
    model = "qwen2.5-coder-0.5b"  # local default: qwen2.5-coder-1.5b; the 0.5B is the fast, low-memory one

    [openai]
    base_url = "http://127.0.0.1:8080/v1"
    api = "chat"                  # or "completions"
    timeout = 120                 # seconds per request
    retries = 3                   # on 429, 5xx and dropped connections, with exponential backoff
    concurrency = 4               # parallel requests when the server ignores `n`
    context = 4096                # the server's context window, in tokens (checked before sending)
    logprobs = true               # ask for token log-probabilities (the logprob ranker needs them)
    tokenizer = "qwen2.5-coder-1.5b"   # count tokens exactly with this local model's tokenizer (the 0.5B's is the same)
    api_key = "..."               # user config only; never in a repo's .assist.toml

    [generate]                    # what `assist generate`, the TUI and the library's Pipeline generate with
    retriever = "auto"            # bm25, dense, hybrid, lail, tstr, selfracg
    ranker = "auto"               # first, random, logprob, exec, agree, condor; combine with +
    n = 5                         # candidates to sample
    k = 4                         # demonstrations to retrieve (0: zero-shot)
    temperature = 0.8
    top_p = 0.95
    max_new_tokens = 256          # unset: 256 for free generation, sized to the docstring when filling a stub
    seed = 1                      # unset: a fresh seed each time

    [docstring]                   # what `assist docstring` and the hook write with
    exemplars = "bm25"            # or "jointcom": the repo's trained JOINTCOM retriever picks them
    tests = false                 # true: the hook documents staged test files too

Every value remembers where it came from, so `assist config show` can say why a setting is what it is.

Repo trust: a repo's `.assist.toml` is written by whoever wrote the repo, so the settings that decide where code
and keys go (`backend`, `openai.base_url`: ROUTING_KEYS; and `model` with a hosted server, where a gateway picks
the provider by it) are taken from it only after the user has trusted that file once with `assist config trust`.
The record lives in the user config folder (`trusted.json`), keyed by the file's path and the sha256 of its
bytes, as direnv and mise do: editing the file revokes the trust. A command whose effective routing setting
would come from an untrusted file is refused with one line (never silently ignored: the user would not know
where their code goes); other settings (timeouts, `n`, the api flavour, a local model's name) come from the
file without trust. Outside a git repo only the working folder's own `.assist.toml` is read.
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
import math
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from assistant.errors import UsageError, install_extra

REPO_CONFIG = ".assist.toml"

# Generation defaults: the one home of these numbers (`GenerationOptions` and `SamplingParams` read them here).
# Temperature and top-p follow the LAIL paper.
DEFAULT_RETRIEVER = "auto"
DEFAULT_RANKER = "auto"
DEFAULT_N = 5
DEFAULT_K = 4
# Filling a stub: its prompt shows its own file already, and two demonstrations cost no correctness against four
# on 106 unseen stubs while shortening the prompt by a fifth (results/correctness-stub-demos-1.5b).
DEFAULT_STUB_K = 2
DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_P = 0.95
DEFAULT_MAX_NEW_TOKENS = 256  # free generation; filling a stub sizes the limit to its docstring instead
DEFAULT_REDRAW = True  # filling a stub: draw again the samples that wrote nothing (cheap with prefix caching)
DEFAULT_APIS = False  # filling a stub: show the project's functions from other files that the file uses
DEFAULT_FRAGMENTS = False  # filling a stub: show the repo's code fragments instead of demonstrations
# Filling a stub: the demonstrations may be the stub's own file's other functions (the stub itself never is).
# On since its planned test (results/repo-redraw-n5-seed0/plan-own-file.md): +1.8 [+0.6, +3.2] points of pass@1
# over other files only, on 373 tasks of four real projects (docs/results/repo-benchmark/own-file.md).
DEFAULT_OWN_FILE = True
# With tests and no candidate passing them: repair rounds (the model sees the failure and samples again), each of
# REPAIR_N samples, all within REPAIR_BUDGET_S seconds (checked before each round; `assistant.core.repair`).
# Off by default by its planned test's rule (results/correctness-1.5b-plan/plan.md, decided before reading): with
# the 1.5B on 150 tasks of four real projects, 2 rounds raised what --apply writes with the tests visible from 32.0
# to 34.0%, +2.0 [+0.0, +4.7] points, an interval that does not lie above 0, for 14.6 s more a task.
DEFAULT_REPAIR = 0
MAX_REPAIR = 5
REPAIR_N = 3
REPAIR_BUDGET_S = 120.0
# Filling a stub: the repo's test functions that mention it are shown in the prompt as its specification.
DEFAULT_TESTS_IN_PROMPT = True
SEED_MAX = 2**32 - 1  # numpy's and torch's seeds
# Upper bounds of the numeric settings, checked where a value enters (config files, environment, flags): a
# repo's `.assist.toml` needs no trust to set `n`, and `n = 10**12` once built 10^12 seeds until memory ran out.
MAX_N = 64  # candidates per request (`assist serve` caps a request's n at the same)
MAX_K = 64  # demonstrations: more never fit a context window
MAX_NEW_TOKENS_LIMIT = 32768  # the longest answer of any model assist runs
MAX_CONTEXT = 1 << 20  # tokens in a context window
MAX_TEMPERATURE = 2.0  # OpenAI's own bound; above it samples are noise
MAX_TIMEOUT = 86400.0  # seconds per request: a day
MAX_RETRIES = 10  # the backoff doubles each time: ten retries already wait many minutes
MAX_CONCURRENCY = 64
# The local model's engines, by the backend each one is: openvino is several times faster on a CPU than
# transformers fp32, which stays for what needs the model's internals (training, hidden states, bf16 labeling).
LOCAL_ENGINES = {"openvino": "local-ov", "transformers": "local", "ct2": "local-ct2"}
DEFAULT_ENGINE = "openvino"
# How the openvino engine decodes: plain; speculative (a smaller model drafts tokens the generator checks);
# prompt-lookup (the prompt drafts them); auto: what measured faster for the model (assistant.backends.ov).
LOCAL_DECODINGS = ("auto", "plain", "speculative", "prompt-lookup")
LOCAL_WEIGHTS = ("auto", "int8", "int4")
TRUST_FILE = "trusted.json"
TRUST_HINT = "`assist config trust` (undo: `assist config untrust`)"


@dataclass(frozen=True)
class Field:
    """One setting: its key (dotted for tables), type, default, environment variable and meaning."""

    key: str
    parse: Callable[[Any], Any]
    default: Any
    env: str | None
    help: str
    secret: bool = False
    user_only: bool = False  # never from a repo file: what runs in the background on this user's machine
    routes: bool = False  # decides where code and keys are sent: from a repo file only once it is trusted
    # ... only with these backends: a hosted gateway (OpenRouter, a LiteLLM proxy) picks the provider that
    # receives the code by the model's name, while a local model name sends nothing anywhere.
    routes_with: tuple[str, ...] = ()
    unset: str = ""  # what leaving it unset means, for `assist config show`

    def routes_for(self, backend: str | None) -> bool:
        """Whether this setting decides where code and keys go with `backend` (None: with some backend)."""
        return self.routes or (backend in self.routes_with if backend is not None else bool(self.routes_with))


def _str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def _number(value: Any, expected: str, whole: bool = False) -> float:
    """`value` (a TOML number, or text from the environment) as a number, or a ValueError that says `expected`:
    "abc" once said "invalid literal for int() with base 10", Python's words, not the setting's."""
    if isinstance(value, bool) or (whole and isinstance(value, float) and not value.is_integer()):
        raise ValueError(expected)
    try:
        return int(value) if whole else float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: float(10**400)
        raise ValueError(expected) from None


def _positive_float(maximum: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        expected = f"expected a finite number above 0 and at most {maximum:g}"
        number = _number(value, expected)
        if not math.isfinite(number) or not 0 < number <= maximum:  # NaN and inf pass `<= 0`: refuse them by name
            raise ValueError(expected)
        return number

    return parse


def _count(minimum: int, maximum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        expected = f"expected a whole number from {minimum} to {maximum}"
        number = int(_number(value, expected, whole=True))
        if not minimum <= number <= maximum:
            raise ValueError(expected)
        return number

    return parse


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _temperature(value: Any) -> float:
    expected = f"expected a number from 0 to {MAX_TEMPERATURE:g}"
    number = _number(value, expected)
    if not math.isfinite(number) or not 0 <= number <= MAX_TEMPERATURE:
        raise ValueError(expected)
    return number


def _probability(value: Any) -> float:
    expected = "expected a number above 0 and at most 1"
    number = _number(value, expected)
    if not math.isfinite(number) or not 0 < number <= 1:
        raise ValueError(expected)
    return number


def _seed(value: Any) -> int:
    return _count(0, SEED_MAX)(value)


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _str(value)
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


FIELDS: tuple[Field, ...] = (
    Field("backend", _str, "local", "ASSIST_BACKEND", "generation backend: local or openai", routes=True),
    Field(
        "model",
        _str,
        None,
        "ASSIST_MODEL",
        "model name (local: see `assist models list`; openai: the server's)",
        routes_with=("openai",),
        unset="the default local model; with openai, the one the server serves",
    ),
    Field(
        "openai.base_url",
        _str,
        None,
        "OPENAI_BASE_URL",
        "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1",
        routes=True,
        unset="the openai backend needs one",
    ),
    Field(
        "local.context",
        _count(256, MAX_CONTEXT),
        8192,
        "ASSIST_LOCAL_CONTEXT",
        "tokens (prompt + answer) the local model may take; its window is larger, but a CPU needs minutes for more",
    ),
    Field(
        "local.engine",
        _choice(*LOCAL_ENGINES),
        DEFAULT_ENGINE,
        "ASSIST_LOCAL_ENGINE",
        "the local engine: openvino (int8, the fast default), transformers (fp32; what training uses) or ct2 "
        f"(CTranslate2 int8; {install_extra('fast')})",
    ),
    Field(
        "local.decoding",
        _choice(*LOCAL_DECODINGS),
        "auto",
        "ASSIST_LOCAL_DECODING",
        "how the openvino engine decodes: auto (what measured faster for the model), plain, speculative (the 0.5B "
        "drafts for the 1.5B) or prompt-lookup (the prompt drafts)",
    ),
    Field(
        "local.weights",
        _choice(*LOCAL_WEIGHTS),
        "auto",
        "ASSIST_LOCAL_WEIGHTS",
        "the openvino engine's weights: auto (int8 for every model today), int8, or int4 (a 1.5B stub request "
        "about 1.7 s faster, pass@1 1.8 points lower; converted on first use, about 40 s)",
    ),
    Field(
        "local.tests_model",
        _str,
        "auto",
        "ASSIST_LOCAL_TESTS_MODEL",
        "the local model that writes agree's tests: auto (the generator, for every model today), same (the "
        "generator), or a model's name (e.g. qwen2.5-coder-0.5b: faster tests for the 1.5B)",
    ),
    Field(
        "local.warm",
        _choice("auto", "off", "start"),
        "start",
        "ASSIST_LOCAL_WARM",
        "a warm model (`assist serve`): start uses one of the same model and settings, or starts one in the "
        "background (it stops after 15 min idle); auto only uses one that runs; off never (user config or env only)",
        user_only=True,
    ),
    Field("openai.api_key", _str, None, "OPENAI_API_KEY", "API key (user config or environment only)", secret=True),
    Field("openai.api", _choice("chat", "completions"), "chat", "ASSIST_OPENAI_API", "chat or completions endpoint"),
    Field(
        "openai.timeout",
        _positive_float(MAX_TIMEOUT),
        120.0,
        "ASSIST_OPENAI_TIMEOUT",
        "seconds to wait for one request",
    ),
    Field(
        "openai.retries",
        _count(0, MAX_RETRIES),
        3,
        "ASSIST_OPENAI_RETRIES",
        "retries on 429/5xx/connection errors (backoff)",
    ),
    Field(
        "openai.concurrency",
        _count(1, MAX_CONCURRENCY),
        4,
        "ASSIST_OPENAI_CONCURRENCY",
        "parallel requests when n is ignored",
    ),
    Field(
        "openai.context",
        _count(1, MAX_CONTEXT),
        None,
        "ASSIST_OPENAI_CONTEXT",
        "the server's context window, in tokens",
        unset="the server's, where it lists it; else not checked",
    ),
    Field("openai.logprobs", _bool, True, "ASSIST_OPENAI_LOGPROBS", "ask for token log-probabilities"),
    Field(
        "openai.tokenizer",
        _str,
        None,
        "ASSIST_OPENAI_TOKENIZER",
        "local model whose tokenizer counts tokens",
        unset="the model's, where it names a local model; else estimated",
    ),
    # What generation does (not where it goes): a repo file may set these without trust.
    Field(
        "generate.retriever",
        _str,
        DEFAULT_RETRIEVER,
        "ASSIST_GENERATE_RETRIEVER",
        "auto, bm25, dense, hybrid, lail, tstr, selfracg or selfracg-init (auto: hybrid; a trained one serves "
        "only when named)",
    ),
    Field(
        "generate.ranker",
        _str,
        DEFAULT_RANKER,
        "ASSIST_GENERATE_RANKER",
        "auto, first, random, logprob, exec, agree, reviewer, coder-reviewer or condor; combine with + "
        "(e.g. exec+logprob)",
    ),
    Field("generate.n", _count(1, MAX_N), DEFAULT_N, "ASSIST_GENERATE_N", "candidates to sample"),
    Field(
        "generate.k",
        _count(0, MAX_K),
        None,
        "ASSIST_GENERATE_K",
        "demonstrations to retrieve (0: zero-shot)",
        unset=f"{DEFAULT_K}; filling a stub: {DEFAULT_STUB_K}",
    ),
    Field(
        "generate.temperature",
        _temperature,
        DEFAULT_TEMPERATURE,
        "ASSIST_GENERATE_TEMPERATURE",
        "sampling temperature (0: greedy, one candidate)",
    ),
    Field("generate.top_p", _probability, DEFAULT_TOP_P, "ASSIST_GENERATE_TOP_P", "nucleus sampling threshold"),
    Field(
        "generate.max_new_tokens",
        _count(1, MAX_NEW_TOKENS_LIMIT),
        None,
        "ASSIST_GENERATE_MAX_NEW_TOKENS",
        "longest candidate in tokens",
        unset=f"{DEFAULT_MAX_NEW_TOKENS}; filling a stub: sized to its docstring",
    ),
    Field(
        "generate.seed",
        _seed,
        None,
        "ASSIST_GENERATE_SEED",
        "random seed for repeatable samples",
        unset="a fresh seed each run",
    ),
    Field(
        "generate.apis",
        _bool,
        DEFAULT_APIS,
        "ASSIST_GENERATE_APIS",
        "filling a stub: also show the repo's functions from other files that its file uses (needs `assist index`)",
    ),
    Field(
        "generate.own_file",
        _bool,
        DEFAULT_OWN_FILE,
        "ASSIST_GENERATE_OWN_FILE",
        "filling a stub: demonstrations may be the stub's own file's other functions, whole (else other files only)",
    ),
    Field(
        "generate.fragments",
        _bool,
        DEFAULT_FRAGMENTS,
        "ASSIST_GENERATE_FRAGMENTS",
        "filling a stub: show 20-line fragments of the repo's other files, found with the code before the body, "
        "instead of demonstrations (needs `assist index`)",
    ),
    Field(
        "generate.redraw",
        _bool,
        DEFAULT_REDRAW,
        "ASSIST_GENERATE_REDRAW",
        "filling a stub: draw once more each sample that wrote nothing (re-typed the stub)",
    ),
    Field(
        "generate.repair",
        _count(0, MAX_REPAIR),
        DEFAULT_REPAIR,
        "ASSIST_GENERATE_REPAIR",
        f"with tests and no candidate passing: repair rounds (0: none), {REPAIR_N} samples each, within "
        f"{REPAIR_BUDGET_S:g} s",
    ),
    Field(
        "generate.tests_in_prompt",
        _bool,
        DEFAULT_TESTS_IN_PROMPT,
        "ASSIST_GENERATE_TESTS_IN_PROMPT",
        "filling a stub: show the repo's test functions that mention it in the prompt",
    ),
    Field(
        "docstring.exemplars",
        _choice("bm25", "jointcom"),
        "bm25",
        "ASSIST_DOCSTRING_EXEMPLARS",
        "the docstring writer's exemplars: bm25 (the repo's documented functions nearest by code tokens) or "
        "jointcom (found by the repo's trained JOINTCOM retriever, `assist train docstring-retriever`)",
    ),
    Field(
        "docstring.tests",
        _bool,
        False,
        "ASSIST_DOCSTRING_TESTS",
        "the pre-commit hook documents staged test files too (test_*.py, *_test.py, conftest.py); a test file "
        "named to `assist docstring` always is",
    ),
)
FIELD_BY_KEY = {f.key: f for f in FIELDS}
ROUTING_KEYS = tuple(f.key for f in FIELDS if f.routes)


@dataclass(frozen=True)
class Setting:
    """A setting's effective value and where it came from ("default", a file path, "env NAME", "flag")."""

    value: Any
    source: str


def config_dir() -> Path:
    """The user config folder: `ASSIST_CONFIG_DIR`, else the XDG config dir (`~/.config/assist`)."""
    override = os.environ.get("ASSIST_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir("assist"))


def user_config_path() -> Path:
    """The user's own config file (always trusted: the user wrote it)."""
    return config_dir() / "config.toml"


def trust_file_path() -> Path:
    """Where `assist config trust` records the repo files the user trusts."""
    return config_dir() / TRUST_FILE


def repo_config_path(start: Path) -> Path | None:
    """The nearest `.assist.toml` from `start` up to the top of its git repo; outside a repo, only `start`'s own.

    A folder above the working directory outside a repo (a shared /tmp, a downloads folder) is nobody's
    project config, so it is never read.
    """
    here = start.resolve()
    if here.is_file():
        here = here.parent
    folders: list[Path] = []
    for folder in (here, *here.parents):
        folders.append(folder)
        if (folder / ".git").exists():
            break
    else:
        folders = [here]  # no repo above: the working folder's own file only
    for folder in folders:
        if (folder / REPO_CONFIG).is_file():
            return folder / REPO_CONFIG
    return None


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


CONFIG_BYTES = 1 << 20  # a settings file is a few lines; a repo's gigabyte .assist.toml is not read into memory


class ConfigFileError(UsageError):
    """A settings file that cannot be used: the file (`path`) and, where known, the `line` to fix (None: not
    known), so a door can point at the file itself (`assist config show` fails on the same file)."""

    def __init__(self, message: str, path: Path, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


def _special_kind(info: os.stat_result) -> str | None:
    """What a file of status `info` is when it is not a regular file ("a folder", "a named pipe", ...); None for
    a regular file, and for the null device: it reads as empty at once, and a config linked there is a config
    switched off, as before."""
    if stat.S_ISREG(info.st_mode):
        return None
    if stat.S_ISCHR(info.st_mode) and info.st_rdev == os.stat(os.devnull).st_rdev:
        return None
    if stat.S_ISDIR(info.st_mode):
        return "a folder"
    kinds = {stat.S_ISFIFO: "a named pipe", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device"}
    return next((kind for test, kind in kinds.items() if test(info.st_mode)), "a device")


class _SpecialFile(Exception):
    """A settings or trust path that is not a regular file: `kind` says what it is."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def _read_settings(path: Path, limit: int | None = CONFIG_BYTES + 1) -> bytes:
    """At most `limit` bytes of `path` (None: all of it; a link is followed), when it is a regular file or the null
    device; else _SpecialFile. A folder was once passed over in silence and a named pipe opened, which waits for a
    writer forever: its status is looked at first, so no device is opened, and again on the open file, so a name
    swapped for a pipe in between is refused too (the open itself does not wait: O_NONBLOCK). OSError (missing,
    unreadable) goes to the caller."""
    try:
        kind = _special_kind(path.stat())
    except OSError:
        kind = None  # opening it says why
    if kind is not None:
        raise _SpecialFile(kind)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if (kind := _special_kind(os.fstat(fd))) is not None:
            raise _SpecialFile(kind)
        return handle.read(-1 if limit is None else limit)


def _read_bytes(path: Path) -> bytes:
    try:
        data = _read_settings(path)
    except _SpecialFile as special:
        raise ConfigFileError(
            f"{path} is {special.kind}, not a settings file; move it away or make it a TOML file", path
        ) from None
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc.strerror or exc}", path) from None
    if len(data) > CONFIG_BYTES:
        raise ConfigFileError(f"{path} is larger than {CONFIG_BYTES >> 20} MB; a settings file is a few lines", path)
    return data


def _parse_layer(path: Path, data: bytes, repo: bool) -> dict[str, Any]:
    """The settings a config file's bytes set, checked. The caller hashes the same bytes (no read-twice race)."""
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc}", path) from None
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)  # Python 3.14+; before, the message alone says "(at line N, ...)"
        if line is None and (found := re.search(r"\(at line (\d+)", str(exc))):
            line = int(found.group(1))
        raise ConfigFileError(f"{path} is not valid TOML: {exc}", path, line) from None
    values = {}
    for key, raw in _flatten(table).items():
        field_ = FIELD_BY_KEY.get(key)
        if field_ is None:
            close = difflib.get_close_matches(key, FIELD_BY_KEY, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            listed = f"`assist config show` lists all {len(FIELD_BY_KEY)}"
            raise ConfigFileError(f"unknown setting {key!r} in {path}; {hint}({listed})", path)
        if field_.secret and repo:
            raise ConfigFileError(
                f"{path} sets {key}: keep keys out of the repo; put it in {user_config_path()} or the "
                f"{field_.env} environment variable",
                path,
            )
        if field_.user_only and repo:
            raise ConfigFileError(
                f"{path} sets {key}: a repo's settings cannot decide that; put it in {user_config_path()} or the "
                f"{field_.env} environment variable",
                path,
            )
        try:
            values[key] = _parse(field_, raw, str(path))
        except UsageError as exc:
            raise ConfigFileError(str(exc), path) from None
    return values


def _read_file(path: Path, repo: bool) -> dict[str, Any]:
    return _parse_layer(path, _read_bytes(path), repo)


# The error's `setting` when a value given for one of these settings on a command is refused: a door says it with
# its own word for the setting (the flag) and the value typed.
GIVEN = {
    "backend": "backend:given",
    "model": "model:given",
    "openai.base_url": "openai.base_url:given",
    "openai.api": "openai.api:given",
    "openai.timeout": "openai.timeout:given",
    "local.engine": "local.engine:given",
}


def _parse(field_: Field, raw: Any, source: str) -> Any:
    try:
        return field_.parse(raw)
    except (TypeError, ValueError, OverflowError) as exc:  # float(10**400) overflows
        why = str(exc)
        shown = "" if field_.secret else f", not {raw!r}"  # a key is never echoed
        raise UsageError(f"bad value for {field_.key} from {source}: {why}{shown}", values={"why": why}) from None


# --- repo trust -------------------------------------------------------------------------------------------


def _trust_key(path: Path) -> str:
    """A repo file's identity in the trust record: its folder's resolved path (the file itself may be a link)."""
    return str(path.parent.resolve() / path.name)


def _load_trust() -> dict[str, Any]:
    path = trust_file_path()
    try:  # read as the settings files are: a named pipe there would wait for a writer forever
        data = json.loads(_read_settings(path, limit=None).decode("utf-8"))  # assist's own record: all of it
    except _SpecialFile as special:
        raise UsageError(
            f"the trust record {path} is {special.kind}, not assist's record; move it away or delete it"
        ) from None
    except FileNotFoundError:
        return {"version": 1, "trusted": {}}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot read the trust record {path} ({exc}); fix or delete it") from None
    if not isinstance(data, dict) or not isinstance(data.get("trusted"), dict):
        raise UsageError(f"the trust record {path} is not assist's format; fix or delete it")
    return data


def _save_trust(data: dict[str, Any]) -> None:
    from assistant.paths import atomic_write_text

    path = trust_file_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    except OSError as exc:  # a read-only or missing config folder (ASSIST_CONFIG_DIR): nothing was recorded
        raise UsageError(f"cannot write the trust record {path}: {exc.strerror or exc}; nothing was changed") from None


@dataclass(frozen=True)
class RepoConfig:
    """A repo's `.assist.toml` as read: where, the sha256 of the bytes read, and whether the user trusts them.

    `trust` is "trusted", "untrusted" (never trusted) or "changed" (trusted once, edited since).
    """

    path: Path
    sha256: str
    trust: str
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def trusted(self) -> bool:
        return self.trust == "trusted"

    def routing(self, backend: str | None = None) -> dict[str, Any]:
        """The settings this file sets that decide where code and keys go with `backend` (None: with any)."""
        return {key: value for key, value in self.values.items() if FIELD_BY_KEY[key].routes_for(backend)}

    def describe_trust(self, backend: str | None = None) -> str:
        """One phrase for `assist config show` and `assist doctor` (with the backend in use, when known)."""
        if not self.routing(backend):
            return "sets nothing that needs trust"
        if self.trusted:
            return "trusted"
        if self.trust == "changed":
            return f"changed since you trusted it: review it, then run {TRUST_HINT}"
        return f"not trusted: review it, then run {TRUST_HINT}"


def read_repo_config(path: Path) -> RepoConfig:
    """Read and check a repo's `.assist.toml`, and look its bytes up in the trust record."""
    data = _read_bytes(path)
    values = _parse_layer(path, data, repo=True)
    digest = hashlib.sha256(data).hexdigest()
    record = _load_trust()["trusted"].get(_trust_key(path))
    if isinstance(record, dict) and record.get("sha256") == digest:
        trust = "trusted"
    else:
        trust = "changed" if record is not None else "untrusted"
    return RepoConfig(path=path, sha256=digest, trust=trust, values=values)


def _find_repo_config(start: Path) -> Path:
    path = repo_config_path(start)
    if path is None:
        raise UsageError(f"no {REPO_CONFIG} in {start.resolve()} (or above it, up to the top of its git repo)")
    return path


def trust_repo_config(start: Path) -> RepoConfig:
    """Trust the `.assist.toml` that governs `start`, as its bytes are now (an edit revokes it)."""
    config = read_repo_config(_find_repo_config(start))  # an invalid file is refused, not trusted
    data = _load_trust()
    data["version"] = 1
    data["trusted"][_trust_key(config.path)] = {
        "sha256": config.sha256,
        "trusted_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    _save_trust(data)
    return RepoConfig(path=config.path, sha256=config.sha256, trust="trusted", values=config.values)


def untrust_repo_config(start: Path) -> tuple[Path, bool]:
    """Forget the trust in the `.assist.toml` that governs `start`; returns it and whether it was trusted."""
    path = _find_repo_config(start)
    data = _load_trust()
    removed = data["trusted"].pop(_trust_key(path), None) is not None
    if removed:
        _save_trust(data)
    return path, removed


def remember_endpoint(artifact: Path, url: str, embedder: str) -> None:
    """Record that the user trained `artifact` (a folder) against the server `url` and its model `embedder`, in
    the user's trust record.

    A trained artifact inside a repo (`.assist/retrievers/...`) is a file the repo can ship, so the server and
    model its manifest names must not be believed (a gateway routes by the model's name): query-time code asks
    :func:`remembered_endpoint` instead.
    """
    data = _load_trust()
    data.setdefault("endpoints", {})[str(artifact.resolve())] = {"url": url, "embedder": embedder}
    _save_trust(data)


def remembered_endpoint(artifact: Path) -> tuple[str, str] | None:
    """The server and embeddings model the user trained `artifact` against on this machine, or None (never, or
    recorded by an older assist without the model: send nothing)."""
    record = _load_trust().get("endpoints", {}).get(str(artifact.resolve()))
    if isinstance(record, dict) and isinstance(record.get("url"), str) and isinstance(record.get("embedder"), str):
        return record["url"], record["embedder"]
    return None


def untrusted_message(config: RepoConfig, keys: list[str]) -> UsageError:
    """The one-line error that refuses an untrusted routing setting and says how to trust the file, or override
    it (`setting` "trust:override", `values["refusal"]`: the line up to the override, for a door's own wording)."""
    what = ", ".join(f"{key} = {config.values[key]!r}" for key in keys)
    why = "changed since you trusted it" if config.trust == "changed" else "is not trusted"
    refusal = (
        f"{config.path} sets {what} (where your code and keys are sent) and this file {why}; review it, then run "
        f"`assist config trust` in {config.path.parent} (undo: `assist config untrust`)"
    )
    message = f"{refusal}, or override it with your own setting or the environment"
    return UsageError(message, setting="trust:override", values={"refusal": refusal})


@dataclass(frozen=True)
class Settings:
    """The effective settings, each with its source; `ignored` holds untrusted routing values not applied."""

    values: Mapping[str, Setting]
    repo: RepoConfig | None = None
    ignored: Mapping[str, Setting] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key].value

    @property
    def backend(self) -> str:
        return self["backend"]

    @property
    def model(self) -> str | None:
        return self["model"]

    def backend_options(self) -> dict[str, Any]:
        """Keyword arguments for the chosen backend's `load` (its table's keys, e.g. `[openai]`)."""
        prefix = f"{self.backend}."
        return {key[len(prefix) :]: s.value for key, s in self.values.items() if key.startswith(prefix)}

    def blocked(self, keys: Iterable[str] | None = None) -> list[str]:
        """Routing keys (of `keys`; default all) an untrusted repo file sets that no env or flag overrides."""
        wanted = set(self.ignored if keys is None else keys)
        return [key for key in self.ignored if key in wanted and not _overrides(self.values[key].source)]

    def routing_in_use(self) -> list[str]:
        """The routing keys generation uses: the backend, its own table's (openai.base_url for openai), and
        those that route with it (the model, on a hosted server)."""
        prefix = f"{self.backend}."
        own = [key for key in ROUTING_KEYS if key == "backend" or key.startswith(prefix)]
        return own + [f.key for f in FIELDS if self.backend in f.routes_with]

    def check_trust(self, keys: Iterable[str] | None = None) -> None:
        """Refuse, with one line, settings whose destination would come from an untrusted repo file."""
        blocked = self.blocked(keys)
        if blocked and self.repo is not None:
            raise untrusted_message(self.repo, blocked)

    def describe(self) -> list[dict[str, Any]]:
        """Rows for `assist config show`: key, value (secrets masked), source, trust (for repo values), meaning, and
        what an unset value means."""
        rows = []
        blocked = self.blocked()
        for field_ in FIELDS:
            setting = self.ignored[field_.key] if field_.key in blocked else self.values[field_.key]
            value = setting.value
            if field_.secret:
                value = "(set)" if value else "(not set)"
            trust = None
            if field_.key in blocked:
                trust = "untrusted (ignored)"
            elif field_.routes_for(self.backend) and self.repo is not None and setting.source == str(self.repo.path):
                trust = "trusted"
            rows.append(
                {
                    "key": field_.key,
                    "value": value,
                    "source": setting.source,
                    "trust": trust,
                    "help": field_.help,
                    "unset": field_.unset or None,  # what a value of None means
                }
            )
        return rows


def _overrides(source: str) -> bool:
    """Whether a setting from `source` sits above the repo file (the environment or a flag)."""
    return source == "flag" or source.startswith("env ")


def load_settings(
    flags: Mapping[str, Any] | None = None, start: Path | None = None, *, check_trust: bool = True
) -> Settings:
    """Resolve every setting. `flags` maps keys (e.g. "openai.base_url") to command-line values; None = not given.

    With `check_trust` (every command but `assist config show`), a routing setting that would come from an
    untrusted repo file is refused with one line (a UsageError) before anything is sent anywhere.
    """
    values = {f.key: Setting(f.default, "default") for f in FIELDS}
    user = user_config_path()
    if user.exists():  # a folder there is an error (_read_bytes), not a file that is not there
        values.update({key: Setting(value, str(user)) for key, value in _read_file(user, repo=False).items()})
    below_repo = dict(values)  # what an untrusted repo value that turns out to route falls back to
    repo: RepoConfig | None = None
    ignored: dict[str, Setting] = {}
    path = repo_config_path(start or Path.cwd())
    if path is not None:
        repo = read_repo_config(path)
        for key, value in repo.values.items():
            if FIELD_BY_KEY[key].routes and not repo.trusted:
                ignored[key] = Setting(value, str(path))
            else:
                values[key] = Setting(value, str(path))
    for field_ in FIELDS:
        raw = os.environ.get(field_.env) if field_.env else None
        if raw is not None and raw.strip():
            values[field_.key] = Setting(_parse(field_, raw, f"env {field_.env}"), f"env {field_.env}")
    for key, raw in (flags or {}).items():
        if raw is None:
            continue
        try:
            values[key] = Setting(_parse(FIELD_BY_KEY[key], raw, "the command line"), "flag")
        except UsageError as exc:  # the door says it with its flag's name and the value typed
            said = {"value": raw, "why": exc.values["why"]}
            raise UsageError(str(exc), setting=GIVEN.get(key), values=said) from None
    if repo is not None and not repo.trusted:
        # Settings that route only with some backends (`model` on a hosted gateway) are known to route once
        # the backend is: the untrusted file's value then goes where its other routing values went.
        backend = values["backend"].value
        for field_ in FIELDS:
            if backend in field_.routes_with and values[field_.key].source == str(repo.path):
                ignored[field_.key] = values[field_.key]
                values[field_.key] = below_repo[field_.key]
    settings = Settings(values, repo=repo, ignored=ignored)
    if check_trust:
        settings.check_trust()
    return settings


def backend_settings(
    backend: str | None,
    model: str | None,
    base_url: str | None = None,
    api: str | None = None,
    timeout: float | None = None,
    start: Path | None = None,
    engine: str | None = None,
) -> Settings:
    """Settings with these flags on top of env, the repo's `.assist.toml` and the user config, for generation.

    An untrusted repo file's routing settings are refused only where generation would use them: with
    `--backend local` its `openai.base_url` routes nothing, so it does not stop the command.
    """
    if base_url is not None and backend is None:
        backend = "openai"  # a server URL on the command line says which backend is meant
    flags: dict[str, Any] = {
        "backend": backend,
        "model": model,
        "openai.base_url": base_url,
        "openai.api": api,
        "openai.timeout": timeout,
        "local.engine": engine,
    }
    settings = load_settings(flags, start=start, check_trust=False)
    settings.check_trust(settings.routing_in_use())
    return settings
