"""What the settings form (ctrl+o) changed, written to the user's config file so that it survives a restart.

Only the user config (:func:`assistant.config.user_config_path`) is written, never a repo's `.assist.toml`, and
only the keys whose value the user changed in the form: a value the form showed as it was (from a repo file, the
environment or a flag) stays where it came from. The file's other keys and tables are kept; it is written
atomically.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assistant.config import Settings, user_config_path
from assistant.errors import UsageError
from assistant.paths import atomic_write_text

FORM_KEYS = {"backend": "backend", "model": "model", "base_url": "openai.base_url"}  # the rest are generate.*


def form_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings form's values under their config keys ("n" is "generate.n", "base_url" "openai.base_url")."""
    return {FORM_KEYS.get(name, f"generate.{name}"): value for name, value in values.items()}


def changed_keys(settings: Settings, values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings keys (e.g. "generate.n") among `values` whose value differs from what `settings` hold."""
    return {key: value for key, value in values.items() if key not in settings.values or settings[key] != value}


def save_user_settings(values: Mapping[str, Any], path: Path | None = None) -> Path:
    """Merge `values` (dotted keys; None removes a key) into the user config file and write it atomically."""
    path = path or user_config_path()
    table: dict[str, Any] = {}
    if path.is_file():
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot update {path}: {exc}") from exc
    for key, value in values.items():
        *parents, name = key.split(".")
        node = table
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(name, None)
        else:
            node[name] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, dump_toml(table))
    return path


def dump_toml(table: Mapping[str, Any]) -> str:
    """A TOML document of scalars, lists of scalars and nested tables (what a config file holds)."""
    lines: list[str] = []
    _dump_table(table, [], lines)
    return "\n".join(lines).strip("\n") + "\n"


def _dump_table(table: Mapping[str, Any], prefix: list[str], lines: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    if prefix and scalars:
        lines.extend(["", f"[{'.'.join(_key(part) for part in prefix)}]"])
    lines.extend(f"{_key(key)} = {_value(value)}" for key, value in scalars.items())
    for key, value in table.items():
        if isinstance(value, Mapping):
            _dump_table(value, [*prefix, key], lines)


def _key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "-_" for c in key) and key.isascii() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string (\uXXXX escapes included)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise UsageError(f"cannot write {value!r} to the config file")
