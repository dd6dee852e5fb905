"""Examples: the (requirement, code) pairs that assist retrieves as demonstrations, and JSONL banks of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from assistant.errors import UsageError


@dataclass(frozen=True)
class Example:
    """One demonstration: what was asked (`requirement`) and the code that does it.

    Examples extracted from a repo carry their origin (`path`, line span, the file's git `blob`);
    examples from a bank carry optional `tests` (assert statements) and an `entry_point`. `kind` is "function"
    for a demonstration, "fragment" for a window of a file's lines (:mod:`assistant.indexing.fragments`).
    """

    requirement: str
    code: str
    name: str = ""
    path: str = ""
    start_line: int = 0
    end_line: int = 0
    language: str = "python"
    blob: str = ""
    tests: tuple[str, ...] = field(default_factory=tuple)
    entry_point: str = ""
    kind: str = "function"

    @property
    def source(self) -> str:
        """Where the example came from, as `path:line` (or the bank line)."""
        return f"{self.path}:{self.start_line}" if self.path else "(bank)"

    def to_json(self) -> dict:
        """A JSON-ready dict (tests as a list)."""
        data = asdict(self)
        data["tests"] = list(self.tests)
        return data

    @classmethod
    def from_json(cls, data: dict) -> Example:
        """Inverse of :meth:`to_json`; unknown keys are ignored, a field of the wrong type is a ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"an example must be a JSON object, not {type(data).__name__}")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key, value in known.items():
            kind = int if key in ("start_line", "end_line") else list if key == "tests" else str
            if key == "tests":
                ok = value is None or (isinstance(value, list) and all(isinstance(t, str) for t in value))
            else:
                ok = isinstance(value, kind) and not isinstance(value, bool)
            if not ok:
                raise ValueError(f"an example's {key!r} is a {type(value).__name__}, not a {kind.__name__}")
        known["tests"] = tuple(known.get("tests") or ())
        return cls(**known)


def read_bank(path: str | Path) -> list[Example]:
    """Read a JSONL bank: one object per line with `requirement` and `code`, optional `tests`, `entry_point`,
    and `path`/`line` saying where the example came from.

    MBPP-style keys (`text`, `test_list`) are accepted too. Blank lines are skipped. Any malformed line
    raises :class:`UsageError` naming the file and line, so nothing is indexed from a half-read bank.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"bank {path} does not exist or is not a file")
    return list(_iter_bank(path))


def _line_number(value: object, where: str, default: int) -> int:
    """A record's `line` (where the example came from): a positive integer, or absent."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where}: 'line' must be a positive integer, not {json.dumps(value)[:40]}")
    return value


def _iter_bank(path: Path) -> Iterator[Example]:
    try:
        # utf-8-sig: a BOM that editors put first is not part of line 1's JSON.
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"bank {path} cannot be read ({exc.strerror})") from None
    # JSONL records end at "\n" only: str.splitlines() also breaks at U+2028, \x1c, form feed..., which are
    # valid raw inside a JSON string. A "\r" left by CRLF is JSON whitespace.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            # exc.msg may end in "at" already ("Unterminated string starting at"): the column follows it directly.
            at = "" if exc.msg.endswith(" at") else " at"
            raise UsageError(f"{where}: not valid JSON ({exc.msg}{at} column {exc.colno})") from None
        if not isinstance(record, dict):
            raise UsageError(f"{where}: expected a JSON object, got {type(record).__name__}")
        requirement = record.get("requirement", record.get("text"))
        code = record.get("code")
        if not isinstance(requirement, str) or not requirement.strip():
            raise UsageError(f"{where}: missing a non-empty string 'requirement'")
        if not isinstance(code, str) or not code.strip():
            raise UsageError(f"{where}: missing a non-empty string 'code'")
        tests = record.get("tests", record.get("test_list", []))
        if isinstance(tests, str):
            tests = [tests]
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            raise UsageError(f"{where}: 'tests' must be a list of strings")
        for key in ("path", "entry_point", "name"):
            if record.get(key) is not None and not isinstance(record[key], str):
                raise UsageError(f"{where}: {key!r} must be a string")
        # A bank may record where each example came from; otherwise it is the bank's own line.
        line_number = _line_number(record.get("line"), where, number)
        yield Example(
            requirement=requirement.strip(),
            code=code.replace("\r\n", "\n").strip("\n"),
            name=record.get("entry_point") or record.get("name") or "",
            path=record.get("path") or path.name,
            start_line=line_number,
            end_line=line_number,
            tests=tuple(tests),
            entry_point=record.get("entry_point") or "",
        )
