"""Ctrl-C ends a request within seconds, whatever it was waiting on (issue 69, item 5).

Python's own Ctrl-C raises KeyboardInterrupt in the main thread, and the command then unwinds: `finally` blocks,
context managers, then the interpreter's exit, which joins every non-daemon thread. Each of those may wait (a thread
pool's worker still reading a server that holds its answer, a lock taken by a thread that will never give it back),
and then Ctrl-C appears to do nothing. The guard keeps Python's unwinding, which normally ends the command in well
under a second, and adds a deadline: FORCE_AFTER_S after the first Ctrl-C, or at once on a second one, the process
ends with status 130. Files are written atomically everywhere (a temporary file renamed into place), so an exit
in the middle of a write leaves the old file or the new one, never half of one.

Only the commands a user waits on at the terminal install it (`generate`, `docstring` and so the hook): `serve`,
`train` and `eval` have their own longer, orderly stops.
"""

from __future__ import annotations

import faulthandler
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

FORCE_AFTER_S = 2.0
EXIT_STATUS = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C
# Set (to anything) to have the stacks of every thread written to stderr when the deadline ends a command: what
# was still waiting is the bug to fix (the cancel tests set it).
TRACE_VARIABLE = "ASSIST_CANCEL_TRACE"
FORCED_LINE = "interrupted: still busy after Ctrl-C, ended"

F = TypeVar("F", bound=Callable[..., Any])

_state = threading.Lock()
_deadline: threading.Timer | None = None


def cancel_guard(command: F) -> F:
    """Run `command` with Ctrl-C (SIGINT) ending the process within FORCE_AFTER_S, or at once when pressed a second
    time; the previous handler is back when the command returns (so a test calling it in-process keeps its own).

    Outside the main thread (where no signal handler can be set) the command runs as it is."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return command(*args, **kwargs)
        previous = signal.signal(signal.SIGINT, _on_interrupt)
        try:
            return command(*args, **kwargs)
        finally:
            signal.signal(signal.SIGINT, previous)

    return wrapper  # type: ignore[return-value]


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    global _deadline
    with _state:
        first = _deadline is None
        if first:
            _deadline = threading.Timer(FORCE_AFTER_S, _force_exit)
            _deadline.daemon = True  # never itself a thread the exit waits for
            _deadline.start()
    if not first:
        _force_exit()
    raise KeyboardInterrupt


def _force_exit() -> None:
    """End the process now: the stacks first when asked for (TRACE_VARIABLE), then one line, then status 130."""
    try:
        if os.environ.get(TRACE_VARIABLE):
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.write(FORCED_LINE + "\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_STATUS)
