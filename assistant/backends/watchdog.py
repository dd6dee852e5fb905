"""A watchdog for native calls that can hang: it ends the process with a one-line error instead of waiting forever.

OpenVINO GenAI 2026.4 has deadlocked in long benchmark runs (a 20-minute hang that a restart cleared, and on
2026-11-28 one caught in the act after ~1,000 requests): the main thread waited in `ContinuousBatchingImpl::step`
for the sampler, and the sampler's thread waited forever for the detokenizer while matching stop strings. A step
runs in native code with the GIL released, so nothing in Python can interrupt it, and the engine's state cannot be
trusted after it; the only way out is to end the process. Every result store assist writes is written record by
record (or atomically), so a rerun resumes where it stopped.

Since 2026-12-05 the engine no longer matches the stop strings of one-row requests (every greedy request, and
every sampled row when the prefix cache is on, the default): `assistant.backends.ov` matches them between steps,
by the engine's own rule, so the deadlock's path is not taken there. Only a request for several rows at once
(sampling with the prefix cache off) still has the engine match them, since its rows cannot be read mid-way. The
watchdog stays, as the backstop for that path and for any other hang in a step.

The watchdog's own thread is Python, so it needs the GIL; on 2026-11-29 a hang in `step()` held it (the binding
does not release it while the sampler waits), and that thread never ran again. So a watched call also arms
`faulthandler`'s timer, a C thread that needs no GIL: BACKSTOP_GRACE_S after the limit it prints every thread's
stack and ends the process (status 1), where the friendly path could not.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import threading
import time
from collections.abc import Callable, Iterator

from assistant.errors import UsageError

EXIT_STALLED = 3  # the exit status when a watched call stalled (1 and 2 are assist's other errors)
BACKSTOP_GRACE_S = 30.0  # the GIL-free backstop fires this long after the limit (the one-line error comes first)

# Called (in order, errors ignored) just before the process ends: the TUI restores the terminal here.
before_exit: list[Callable[[], None]] = []


def _end_process(message: str) -> None:
    for hook in list(before_exit):
        with contextlib.suppress(Exception):
            hook()
    with contextlib.suppress(Exception):
        # To file descriptor 2 itself: a running TUI has replaced sys.stderr with its own capture.
        os.write(2, f"assist: error: {message}\n".encode("utf-8", "replace"))
    os._exit(EXIT_STALLED)


class Watchdog:
    """Ends the process when a call made under :meth:`watch` runs past `limit` seconds.

    One daemon thread, started on first use, wakes at the watched call's deadline (or every `limit` seconds while
    nothing is watched) and reads the deadline then: arming and disarming are one assignment each, cheap enough
    for every step of a decode. `on_stall` receives the message (the default prints it and ends the process)."""

    def __init__(self, limit: float, what: str, on_stall: Callable[[str], None] = _end_process) -> None:
        if not 0 < limit < float("inf"):
            raise ValueError("a watchdog's limit is a positive number of seconds")
        self.limit = limit
        self.what = what
        self.on_stall = on_stall
        self.backstop = on_stall is _end_process  # a test's own on_stall must not end its process
        self._deadline: float | None = None
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Watch the calls made inside this block (one watched block at a time)."""
        self._deadline = time.monotonic() + self.limit
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="assist-watchdog", daemon=True)
                    self._thread.start()
        armed = False
        if self.backstop:
            with contextlib.suppress(Exception):  # e.g. no usable stderr: the Python watchdog still stands
                faulthandler.dump_traceback_later(self.limit + BACKSTOP_GRACE_S, exit=True, file=2)
                armed = True
        try:
            yield
        finally:
            self._deadline = None
            if armed:
                faulthandler.cancel_dump_traceback_later()

    def _run(self) -> None:
        while True:
            # A deadline read here that has passed belongs to a call still running when it was read: one that
            # returned would have cleared it, and a newer one's lies `limit` ahead.
            deadline = self._deadline
            now = time.monotonic()
            if deadline is None:
                time.sleep(self.limit)
            elif now < deadline:
                time.sleep(deadline - now)
            else:
                break
        self.on_stall(
            f"{self.what} stopped responding (one step ran past {self.limit:g} s) and cannot be resumed in this "
            "process; run the command again (finished work is kept), or set ASSIST_STALL_S to allow longer steps"
        )


def stall_limit(default: float) -> float:
    """Seconds one watched step may take: `ASSIST_STALL_S` when set (a positive number), else `default`."""
    raw = os.environ.get("ASSIST_STALL_S", "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise UsageError(f"ASSIST_STALL_S must be a positive number of seconds, not {raw!r}")
    return value
