"""Ctrl-C ends a command within seconds, whatever it was waiting on (issue 69, item 5).

Python's own Ctrl-C raises KeyboardInterrupt in the main thread, and the command then unwinds: `finally` blocks,
context managers, then the interpreter's exit, which joins every non-daemon thread. Each of those may wait (a thread
pool's worker still reading a server that holds its answer, a lock taken by a thread that will never give it back),
and then Ctrl-C appears to do nothing. Worse, Python runs its signal handler only between bytecodes of the main
thread: while that thread is inside one long native call (a torch operation over a 1.5B model's vocabulary, a
backward pass, an engine's step), the KeyboardInterrupt waits until the call returns, seconds or minutes later.

The guard keeps Python's unwinding, which normally ends the command in well under a second, and adds a deadline:
FORCE_AFTER_S after the first Ctrl-C, or at once on a second one, the process ends with status 130. The signal is
heard by a thread of the guard's own (through `signal.set_wakeup_fd`, written by the interpreter's C-level handler
whatever the main thread is doing), so the deadline holds during a native call too, as long as that call lets go
of the GIL (torch and the engines do; a call that holds it cannot be interrupted from Python at all).

What a command writes while it runs is either written atomically (a temporary file renamed into place) or appended
a record a line at a time (`assistant.cache.JsonlCache`, whose reader skips a torn last line), so an exit in the
middle of a write leaves the old file or the new one, or every whole record before it, and a rerun resumes. An
index is written into a folder beside the old one and swapped in with renames (a swap cut between its two renames
is put back by the next reader); a model's assembled file and its conversions are made under temporary names,
renamed into place, with the manifest that says they are complete written last.

These commands install it: `generate`, `docstring` (and so the hook), `index`, `models pull`, and every `eval` and
`train` command.
`serve` keeps its own stop: Ctrl-C ends its serving loop, which runs in the main thread, and the threads answering
requests are daemons that the exit does not wait for.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import signal
import socket
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
        watch = None
        try:
            watch = _SignalWatch.start()  # inside the `try`: a watch that fails to start gives the handler back too
            return command(*args, **kwargs)
        finally:
            if watch is not None:
                watch.stop()
            signal.signal(signal.SIGINT, previous)

    return wrapper  # type: ignore[return-value]


class _SignalWatch:
    """A daemon thread that hears each SIGINT as it arrives, through the interpreter's wakeup file descriptor: the
    first arms the deadline, a second ends the process, even while the main thread is inside a native call."""

    active: _SignalWatch | None = None

    def __init__(self, reader: socket.socket, writer: socket.socket, previous: int) -> None:
        self.reader, self.writer, self.previous = reader, writer, previous
        self.heard = 0
        self.thread = threading.Thread(target=self._run, name="assist-cancel", daemon=True)

    @classmethod
    def start(cls) -> _SignalWatch | None:
        """Watch from now on; None (the handler alone then) where the wakeup descriptor is someone else's."""
        reader, writer = socket.socketpair()
        writer.setblocking(False)  # the C handler must never block on it
        try:
            previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):
            previous = None
        if previous != -1:  # None: it could not be set
            if previous is not None:
                signal.set_wakeup_fd(previous)  # an event loop's: its signals must still reach it
            reader.close()
            writer.close()
            return None
        try:
            watch = cls(reader, writer, previous)
            cls.active = watch
            watch.thread.start()
        except BaseException:
            # No thread (the process has none left, say): nothing may stay behind, or every signal from now on
            # would be written to a socket that no one reads.
            cls.active = None
            signal.set_wakeup_fd(previous)
            reader.close()
            writer.close()
            raise
        return watch

    def _run(self) -> None:
        while True:
            try:
                data = self.reader.recv(64)
            except OSError:
                return
            if not data:
                return  # stopped: the writer was closed
            for number in data:
                if number == signal.SIGINT:
                    self.heard += 1
                    if self.heard == 1:
                        _arm_deadline()
                    else:
                        _force_exit()

    def stop(self) -> None:
        """Give the wakeup descriptor back and end the thread."""
        _SignalWatch.active = None
        signal.set_wakeup_fd(self.previous)
        with contextlib.suppress(OSError):
            self.writer.shutdown(socket.SHUT_RDWR)  # wakes the thread's recv with an end of file
        self.thread.join(timeout=1.0)
        self.writer.close()
        self.reader.close()


def _arm_deadline() -> bool:
    """Start the deadline unless it runs already; whether this call started it."""
    global _deadline
    with _state:
        if _deadline is not None:
            return False
        _deadline = threading.Timer(FORCE_AFTER_S, _force_exit)
        _deadline.daemon = True  # never itself a thread the exit waits for
        _deadline.start()
        return True


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    # With the watch running, it counts the presses (it hears each one, even those this handler runs late for).
    first = _arm_deadline()
    if _SignalWatch.active is None and not first:
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
