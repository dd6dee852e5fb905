"""The watchdog that turns a stuck native call (an OpenVINO deadlock) into a one-line error and an exit."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from assistant.backends.watchdog import EXIT_STALLED, Watchdog, stall_limit
from assistant.errors import UsageError


def test_a_call_past_its_limit_is_reported_once_and_calls_in_time_are_not() -> None:
    stalls: list[str] = []
    seen = threading.Event()

    def on_stall(message: str) -> None:
        stalls.append(message)
        seen.set()

    dog = Watchdog(0.3, "the test engine", on_stall)
    for _ in range(20):  # many quick calls, as a decode's steps: none is a stall
        with dog.watch():
            time.sleep(0.01)
    time.sleep(0.5)  # idle past the limit: nothing is watched, nothing to report
    assert stalls == []
    started = time.monotonic()
    with dog.watch():
        assert seen.wait(3.0)
        waited = time.monotonic() - started
    assert 0.25 <= waited < 1.5
    assert len(stalls) == 1 and stalls[0].startswith("the test engine stopped responding (one step ran past 0.3 s)")


def stalled(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` (a watched call that never returns) in its own Python; it must end within 10 s."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=25)
    assert time.monotonic() - started < 10
    return result


def test_a_stalled_call_ends_the_process_with_one_line_and_its_own_status() -> None:
    code = (
        "import time\n"
        "from assistant.backends.watchdog import Watchdog\n"
        "with Watchdog(0.2, 'the test engine').watch():\n"
        "    time.sleep(30)\n"
    )
    result = stalled(code)
    assert result.returncode == EXIT_STALLED
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("assist: error: the test engine stopped responding")


def test_a_stall_that_holds_the_gil_still_ends_the_process() -> None:
    # ctypes.PyDLL keeps the GIL through the call, as the OpenVINO binding's step() did when it deadlocked: the
    # watchdog's Python thread cannot run, so the faulthandler backstop must end the process.
    code = (
        "import ctypes\n"
        "from assistant.backends import watchdog\n"
        "watchdog.BACKSTOP_GRACE_S = 0.5\n"
        "with watchdog.Watchdog(0.2, 'the test engine').watch():\n"
        "    ctypes.PyDLL(None).sleep(30)\n"
    )
    result = stalled(code)
    assert result.returncode != 0 and "Timeout" in result.stderr


def test_the_limit_comes_from_the_environment_or_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("ASSIST_STALL_S", raising=False)
    assert stall_limit(300.0) == 300.0
    monkeypatch.setenv("ASSIST_STALL_S", "900")
    assert stall_limit(300.0) == 900.0
    for bad in ("0", "-5", "soon", "nan", "inf"):
        monkeypatch.setenv("ASSIST_STALL_S", bad)
        with pytest.raises(UsageError, match="ASSIST_STALL_S must be a positive number"):
            stall_limit(300.0)


def test_a_stall_while_the_tui_runs_gives_the_terminal_back_before_the_error(tmp_path) -> None:
    pty = pytest.importorskip("pty")
    import os
    import select

    # A real Textual app on a real pseudo-terminal, with the TUI's restorer; a watched call stalls in a worker.
    code = (
        "import threading, time\n"
        "from textual.app import App\n"
        "from assistant.backends import watchdog\n"
        "from assistant.ui.tui.app import terminal_restorer\n"
        "class Stalls(App):\n"
        "    def on_mount(self):\n"
        "        def stall():\n"
        "            with watchdog.Watchdog(0.5, 'the test engine').watch():\n"
        "                time.sleep(30)\n"
        "        threading.Thread(target=stall, daemon=True).start()\n"
        "app = Stalls()\n"
        "watchdog.before_exit.append(terminal_restorer(app))\n"
        "app.run()\n"
    )
    pid, fd = pty.fork()
    if pid == 0:  # the child: nothing of pytest's may run here
        os.execv(sys.executable, [sys.executable, "-c", code])
    seen = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child is gone
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == EXIT_STALLED
    assert b"\x1b[?1049h" in seen  # it did take the alternate screen
    after = seen.rsplit(b"\x1b[?1049l", 1)[-1]  # what follows leaving it: the cursor back, then the error
    assert b"\x1b[?25h" in after and b"assist: error: the test engine stopped responding" in after
