"""Settings, layered: defaults < user config < the repo's `.assist.toml` < environment < command-line flags.

The user config is `~/.config/assist/config.toml` (XDG; `ASSIST_CONFIG_DIR` overrides the folder). Both files
use the same keys::

    backend = "openai"            # or "local"
    model = "qwen2.5-coder-0.5b"

    [openai]
    base_url = "http://127.0.0.1:8080/v1"
    api = "chat"                  # or "completions"
    timeout = 120                 # seconds per request
    retries = 3                   # on 429, 5xx and dropped connections, with exponential backoff
    concurrency = 4               # parallel requests when the server ignores `n`
    context = 4096                # the server's context window, in tokens (checked before sending)
    logprobs = true               # ask for token log-probabilities (the logprob ranker needs them)
    tokenizer = "qwen2.5-coder-0.5b"   # count tokens exactly with this local model's tokenizer
    api_key = "..."               # user config only; never in a repo's .assist.toml

Every value remembers where it came from, so `assist config show` can say why a setting is what it is.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from .errors import UsageError

REPO_CONFIG = ".assist.toml"


@dataclass(frozen=True)
class Field:
    """One setting: its key (dotted for tables), type, default, environment variable and meaning."""

    key: str
    parse: Callable[[Any], Any]
    default: Any
    env: str | None
    help: str
    secret: bool = False


def _str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def _positive_float(value: Any) -> float:
    number = float(value)
    if number <= 0:
        raise ValueError("expected a number above 0")
    return number


def _count(minimum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError("expected a whole number")
        number = int(value)
        if number < minimum:
            raise ValueError(f"expected a whole number of at least {minimum}")
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


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _str(value)
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


FIELDS: tuple[Field, ...] = (
    Field("backend", _str, "local", "ASSIST_BACKEND", "generation backend: local or openai"),
    Field("model", _str, None, "ASSIST_MODEL", "model name (local: see `assist models list`; openai: the server's)"),
    Field(
        "openai.base_url", _str, None, "OPENAI_BASE_URL", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1"
    ),
    Field("openai.api_key", _str, None, "OPENAI_API_KEY", "API key (user config or environment only)", secret=True),
    Field("openai.api", _choice("chat", "completions"), "chat", "ASSIST_OPENAI_API", "chat or completions endpoint"),
    Field("openai.timeout", _positive_float, 120.0, "ASSIST_OPENAI_TIMEOUT", "seconds to wait for one request"),
    Field("openai.retries", _count(0), 3, "ASSIST_OPENAI_RETRIES", "retries on 429/5xx/connection errors (backoff)"),
    Field("openai.concurrency", _count(1), 4, "ASSIST_OPENAI_CONCURRENCY", "parallel requests when n is ignored"),
    Field("openai.context", _count(1), None, "ASSIST_OPENAI_CONTEXT", "the server's context window, in tokens"),
    Field("openai.logprobs", _bool, True, "ASSIST_OPENAI_LOGPROBS", "ask for token log-probabilities"),
    Field("openai.tokenizer", _str, None, "ASSIST_OPENAI_TOKENIZER", "local model whose tokenizer counts tokens"),
)
FIELD_BY_KEY = {f.key: f for f in FIELDS}


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
    return config_dir() / "config.toml"


def repo_config_path(start: Path) -> Path | None:
    """The nearest `.assist.toml` from `start` up to the top of its git repo (None outside a repo or if absent)."""
    here = start.resolve()
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        if (folder / REPO_CONFIG).is_file():
            return folder / REPO_CONFIG
        if (folder / ".git").exists():
            return None
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


def _read_file(path: Path, repo: bool) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    values = {}
    for key, raw in _flatten(data).items():
        field = FIELD_BY_KEY.get(key)
        if field is None:
            raise UsageError(f"unknown setting {key!r} in {path}; known settings: {', '.join(FIELD_BY_KEY)}")
        if field.secret and repo:
            raise UsageError(
                f"{path} sets {key}: keep keys out of the repo; put it in {user_config_path()} or the "
                f"{field.env} environment variable"
            )
        values[key] = _parse(field, raw, str(path))
    return values


def _parse(field: Field, raw: Any, source: str) -> Any:
    try:
        return field.parse(raw)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"bad value for {field.key} from {source}: {exc}") from None


@dataclass(frozen=True)
class Settings:
    """The effective settings, each with its source."""

    values: Mapping[str, Setting]

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

    def describe(self) -> list[dict[str, Any]]:
        """Rows for `assist config show`: key, value (secrets masked), source, meaning."""
        rows = []
        for field in FIELDS:
            setting = self.values[field.key]
            value = setting.value
            if field.secret:
                value = "(set)" if value else "(not set)"
            rows.append({"key": field.key, "value": value, "source": setting.source, "help": field.help})
        return rows


def load_settings(flags: Mapping[str, Any] | None = None, start: Path | None = None) -> Settings:
    """Resolve every setting. `flags` maps keys (e.g. "openai.base_url") to command-line values; None = not given."""
    values = {f.key: Setting(f.default, "default") for f in FIELDS}
    user = user_config_path()
    layers: list[tuple[dict[str, Any], str]] = []
    if user.is_file():
        layers.append((_read_file(user, repo=False), str(user)))
    repo = repo_config_path(start or Path.cwd())
    if repo is not None:
        layers.append((_read_file(repo, repo=True), str(repo)))
    for layer, source in layers:
        values.update({key: Setting(value, source) for key, value in layer.items()})
    for field in FIELDS:
        raw = os.environ.get(field.env) if field.env else None
        if raw is not None and raw.strip():
            values[field.key] = Setting(_parse(field, raw, f"env {field.env}"), f"env {field.env}")
    for key, raw in (flags or {}).items():
        if raw is None:
            continue
        field = FIELD_BY_KEY[key]
        values[key] = Setting(_parse(field, raw, "the command line"), "flag")
    return Settings(values)


def backend_settings(
    backend: str | None,
    model: str | None,
    base_url: str | None = None,
    api: str | None = None,
    timeout: float | None = None,
    start: Path | None = None,
) -> Settings:
    """Settings with these flags on top of env, the repo's `.assist.toml` and the user config."""
    if base_url is not None and backend is None:
        backend = "openai"  # a server URL on the command line says which backend is meant
    flags: dict[str, Any] = {
        "backend": backend,
        "model": model,
        "openai.base_url": base_url,
        "openai.api": api,
        "openai.timeout": timeout,
    }
    return load_settings(flags, start=start)
