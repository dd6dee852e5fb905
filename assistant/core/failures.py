"""A failing test's report, trimmed to what matters: what a repair round shows the model (:mod:`assistant.core.repair`).

Kept with each candidate's test verdict (`Score.details["failure"]`) by the rankers that run tests: the project
sandbox's pytest output (:func:`pytest_failure`) and the exec sandbox's first failing test (:func:`sandbox_failure`).
"""

from __future__ import annotations

import re

FAILURE_CHARS = 1500  # the most characters of one failure shown to the model
FAILURE_LINES = 30  # the last lines of a failure's traceback kept (the frames nearest the error)


def trim(text: str, lines: int = FAILURE_LINES, chars: int = FAILURE_CHARS) -> str:
    """The last `lines` lines of `text`, at most `chars` characters (the end kept: the error is there)."""
    kept = "\n".join(text.strip("\n").splitlines()[-lines:])
    return kept if len(kept) <= chars else "..." + kept[-(chars - 3) :]


_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_BANNER = re.compile(r"^={3,}.*={3,}$")


def pytest_failure(output: str, lines: int = FAILURE_LINES, chars: int = FAILURE_CHARS) -> str:
    """The first failing test's report in pytest's output: its name, and the last `lines` of its traceback (the
    failing assertion's frame and `E` lines), at most `chars`. Without a failure report (a collection error, a
    timeout), the output's last lines."""
    text = output.splitlines()
    start = next((i for i, line in enumerate(text) if _SECTION.match(line)), None)
    if start is None:
        return trim(output, lines, chars)
    end = next((i for i in range(start + 1, len(text)) if _SECTION.match(text[i]) or _BANNER.match(text[i])), None)
    body = text[start + 1 : end]
    name = _SECTION.match(text[start])
    heading = f"{name.group(1) if name else 'test'} failed:"
    return heading + "\n" + trim("\n".join(body), lines, chars - len(heading) - 1)


def sandbox_failure(failed_test: str | None, error_type: str | None, error_message: str | None) -> str:
    """The exec sandbox's account of a failure: the first failing test and the error it raised."""
    parts = []
    if failed_test:
        parts.append(f"this test failed:\n{failed_test.strip()}")
    if error_type:
        parts.append(f"{error_type}: {error_message or ''}".rstrip(": "))
    return trim("\n".join(parts))


def collection_error(output: str) -> str:
    """The line that says why pytest collected nothing: its last `E   ` line (the exception), else its last
    `ERROR` line, else its last line; at most 200 characters."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    raised = [line[1:].strip() for line in lines if line.startswith("E ")]
    errors = [line for line in lines if line.startswith("ERROR")]
    found = (raised or errors or lines or ["no output"])[-1]
    return found[:200]
