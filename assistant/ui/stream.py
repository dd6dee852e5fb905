"""The first candidate as it is written: what the CLI and the TUI show while a request is still running.

The backends tell a `streaming` listener (:func:`assistant.backends.streaming`) the first row of each sampling call
as it grows; this module turns that into what a screen shows: the code without the answer's opening fence, its
last lines, and at most a few updates a second where an update costs a hop to another thread.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from assistant.ui.text import printable

# Lines of the growing candidate the CLI shows under its status line: enough to follow, few enough that the live
# display never scrolls the terminal.
SHOWN_LINES = 12
# Seconds between two updates handed to a UI thread (the TUI): the eye needs no more than ten a second.
EVERY_S = 0.1

_OPENING_FENCE = re.compile(r"\A```[\w+.-]*\n")


def shown_code(text: str) -> str:
    """A streamed row as code: without the answer's opening fence, control characters written out."""
    return printable(_OPENING_FENCE.sub("", text, count=1))


def last_lines(text: str, count: int = SHOWN_LINES) -> str:
    """The last `count` lines of `text` (the line being written is the last)."""
    return "\n".join(text.split("\n")[-count:])


class Throttled:
    """Passes the latest (call, text) on to `show` at most every `every` seconds; `flush` passes on what is left.
    Thread-safe: the backend calls it from the sampling thread."""

    def __init__(self, show: Callable[[int, str], None], every: float = EVERY_S) -> None:
        self.show = show
        self.every = every
        self._lock = threading.Lock()
        self._pending: tuple[int, str] | None = None
        self._last = float("-inf")

    def __call__(self, call: int, text: str) -> None:
        with self._lock:
            self._pending = (call, text)
            now = time.monotonic()
            if now - self._last < self.every:
                return
            self._last = now
        self.flush()

    def flush(self) -> None:
        """Pass on the text held back, if any."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self.show(*pending)
