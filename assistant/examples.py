"""Examples: the (requirement, code) pairs that assist retrieves as demonstrations, and JSONL banks of them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import UsageError


@dataclass(frozen=True)
class Example:
    """One demonstration: what was asked (`requirement`) and the code that does it.

    Examples extracted from a repo carry their origin (`path`, line span, the file's git `blob`);
    examples from a bank carry optional `tests` (assert statements) and an `entry_point`.
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
        """Inverse of :meth:`to_json`; unknown keys are ignored."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
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


def _iter_bank(path: Path) -> Iterator[Example]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
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
        yield Example(
            requirement=requirement.strip(),
            code=code.replace("\r\n", "\n").strip("\n"),
            name=str(record.get("entry_point") or record.get("name") or ""),
            # A bank may record where each example came from; otherwise it is the bank's own line.
            path=str(record.get("path") or path.name),
            start_line=int(record.get("line") or number),
            end_line=int(record.get("line") or number),
            tests=tuple(tests),
            entry_point=str(record.get("entry_point") or ""),
        )
