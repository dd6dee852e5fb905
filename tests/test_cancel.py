"""Ctrl-C in the CLI (issue 69, item 5): `assist generate`, the hook, and the `eval` and `train` commands, waiting on
a slow model server or on sandboxed test runs, end within seconds of SIGINT (under one on an idle machine:
benchmarks/cancel_latency.py), with a non-zero status and nothing of theirs left running; and the guard's deadline
holds while the main thread is inside a native call that a signal does not end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from assistant.ui.interrupt import EXIT_STATUS, FORCE_AFTER_S, FORCED_LINE, TRACE_VARIABLE

from .openai_server import Script, openai_server

# The hang these tests guard against lasted minutes. The under-a-second goal is a figure of
# benchmarks/cancel_latency.py on an idle machine; here a loaded test machine gets room for scheduling.
CANCEL_LIMIT_S = 3.0


def sigint_latency(cwd: Path, url: str, script: Script) -> tuple[float, int, bool]:
    """Start `assist generate` against `url`, press Ctrl-C (SIGINT to its process group, as a terminal does) once
    the server holds its request; (seconds to exit, exit status, whether any process of the group outlived it)."""
    command = [sys.executable, "-m", "assistant", "generate", "return a number", "-k", "0", "-n", "1"]
    command += ["--ranker", "first", "--base-url", url]
    env = {**os.environ, "ASSIST_OPENAI_API": "completions", TRACE_VARIABLE: "1"}
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not script.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert script.requests, process.communicate(timeout=5)
        pressed = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(timeout=10)
        seconds = time.monotonic() - pressed
        _warn_if_forced(process)
        time.sleep(0.1)
        try:
            os.killpg(process.pid, 0)  # any process of the group still there?
            left = True
        except ProcessLookupError:
            left = False
        return seconds, status, left
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=10)


def _warn_if_forced(process: subprocess.Popen[bytes], strict: bool = False) -> None:
    """The guard's deadline ended the command (it exits in time, but something waited): say where, as a warning,
    or as the test's failure when `strict` (where the unwinding alone must end the command).

    Reads what the process wrote (a child still holding its pipes leaves this to the `left` check)."""
    try:
        _, written = process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        return
    stderr = written.decode(errors="replace")
    if FORCED_LINE in stderr:
        message = f"Ctrl-C needed the guard's deadline; the stacks then:\n{stderr[-6000:]}"
        if strict:
            pytest.fail(message)
        warnings.warn(message, stacklevel=2)


def _interrupt_when_ready(argv: list[str], settle_s: float = 0.0) -> tuple[int, float, str]:
    """Start `argv` in a session of its own, and once it prints "ready" (and `settle_s` later) press Ctrl-C on its
    process group: (exit status, seconds from the press to its exit, its stderr)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        time.sleep(settle_s)
        pressed = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(timeout=30)
        seconds = time.monotonic() - pressed
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=10)
    return status, seconds, stderr.decode()


def _assert_ended_by_the_deadline(status: int, seconds: float, stderr: str) -> None:
    assert status == EXIT_STATUS
    assert FORCE_AFTER_S <= seconds < FORCE_AFTER_S + CANCEL_LIMIT_S
    assert FORCED_LINE in stderr


def test_a_command_whose_unwinding_hangs_still_ends_soon_after_ctrl_c(tmp_path: Path) -> None:
    # A non-daemon thread that sleeps a minute: Python's own exit waits for it, so plain Ctrl-C would take 60 s.
    program = (
        "import sys, threading, time\n"
        "from assistant.ui.interrupt import cancel_guard\n"
        "@cancel_guard\n"
        "def command():\n"
        "    threading.Thread(target=time.sleep, args=(60,)).start()\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
        "command()\n"
    )
    _assert_ended_by_the_deadline(*_interrupt_when_ready([sys.executable, "-c", program]))


def test_the_deadline_holds_while_the_main_thread_is_inside_a_native_call(tmp_path: Path) -> None:
    # SQLite's busy wait retries in C through every signal (as a torch operation or an engine's step runs on): Python
    # runs its handler only when the call returns, 60 s later here, so only a thread that hears the signal itself
    # can start the deadline. The call lets go of the GIL, as those do.
    program = (
        "import sqlite3, sys\n"
        "from assistant.ui.interrupt import cancel_guard\n"
        "holder = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "holder.execute('create table t (x)')\n"
        "holder.execute('begin exclusive')\n"
        "@cancel_guard\n"
        "def command():\n"
        "    waiter = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)\n"
        "    print('ready', flush=True)\n"
        "    waiter.execute('insert into t values (1)')\n"
        "command()\n"
    )
    argv = [sys.executable, "-c", program, str(tmp_path / "held.db")]
    _assert_ended_by_the_deadline(*_interrupt_when_ready(argv, settle_s=0.3))  # 0.3 s: inside the busy wait


def test_ctrl_c_ends_generate_within_seconds_with_nothing_left(tmp_path: Path) -> None:
    with openai_server(Script(delay_s=30.0)) as (url, script):
        seconds, status, left = sigint_latency(tmp_path, url, script)
    assert seconds < CANCEL_LIMIT_S
    assert status != 0
    assert not left


def _group_left(group: int, pressed: float) -> str:
    """What of process group `group` still runs CANCEL_LIMIT_S after Ctrl-C was pressed ("" when nothing)."""
    time.sleep(max(0.0, pressed + CANCEL_LIMIT_S - time.monotonic()))
    found = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-g", str(group)], capture_output=True, text=True)
    # A zombie has ended: git left its hook to be reaped by init, which in a container may never reap it.
    return "\n".join(line for line in found.stdout.splitlines() if not line.split()[1].startswith("Z"))


def test_ctrl_c_ends_the_writing_hook_within_seconds_with_nothing_left(scratch_repo: Path) -> None:
    from .conftest import git
    from .test_docstrings import _run

    assert _run(["hook", "install"], scratch_repo).exit_code == 0
    (scratch_repo / "bare.py").write_text("def add(a, b):\n    return a + b\n")  # no docstring: the hook writes one
    git(scratch_repo, "add", "bare.py")
    head = git(scratch_repo, "rev-parse", "HEAD")
    with openai_server(Script(delay_s=30.0)) as (url, script):
        env = {**os.environ, "ASSIST_BACKEND": "openai", "OPENAI_BASE_URL": url, "ASSIST_OPENAI_API": "completions"}
        commit = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "work"]
        process = subprocess.Popen(
            commit, cwd=scratch_repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 60
            while not script.requests and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.02)
            assert script.requests, process.communicate(timeout=5)
            pressed = time.monotonic()
            os.killpg(process.pid, signal.SIGINT)
            status = process.wait(timeout=10)
            seconds = time.monotonic() - pressed
            left = _group_left(process.pid, pressed)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=10)
    assert seconds < CANCEL_LIMIT_S and status != 0
    assert not left, left
    assert git(scratch_repo, "rev-parse", "HEAD") == head  # nothing committed
    assert (scratch_repo / "bare.py").read_text() == "def add(a, b):\n    return a + b\n"


def interrupt_when(
    command: list[str], cwd: Path, env: dict[str, str], ready: Callable[[], bool], strict: bool = False
) -> tuple[float, int, str]:
    """Start `assist COMMAND`, press Ctrl-C (SIGINT to its process group) once `ready()`; (seconds to exit, exit
    status, what is left of its process group CANCEL_LIMIT_S after the press: "" when nothing). With `strict` the
    test fails if the guard's deadline, not the unwinding, ended the command."""
    process = subprocess.Popen(
        [sys.executable, "-m", "assistant", *command],
        cwd=cwd,
        env={**env, TRACE_VARIABLE: "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30  # well before a discriminator command would go on to load a model
        while not ready() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert ready(), process.communicate(timeout=5)
        pressed = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(timeout=30)
        seconds = time.monotonic() - pressed
        _warn_if_forced(process, strict)
        return seconds, status, _group_left(process.pid, pressed)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=10)


def test_ctrl_c_ends_eval_docstring_waiting_on_the_server_with_nothing_left(tmp_path: Path) -> None:
    env = {**os.environ, "ASSIST_OPENAI_API": "completions"}
    with openai_server(Script(delay_s=30.0)) as (url, script):
        command = ["eval", "docstring", "--strategies", "zero", "--limit", "2", "--backend", "openai"]
        command += ["--model", "tiny-coder", "--base-url", url, "--out", str(tmp_path / "run")]
        seconds, status, left = interrupt_when(command, tmp_path, env, lambda: bool(script.requests))
    assert seconds < CANCEL_LIMIT_S and status == EXIT_STATUS
    assert not left, left
    assert not (tmp_path / "run" / "docstrings.jsonl").exists()  # nothing recorded for the request cut short


def test_ctrl_c_ends_generate_waiting_on_concurrent_single_requests_by_unwinding(tmp_path: Path) -> None:
    # A server that ignores `n` (llama.cpp, Ollama): after the first request, the other samples are sent one per
    # request from a pool of threads, which the server holds. Ctrl-C must end the command by itself, without the
    # wait for those threads that only the guard's deadline would cut.
    env = {**os.environ, "ASSIST_OPENAI_API": "completions"}
    with openai_server(Script(honour_n=False, delay_s=30.0, delay_after=1)) as (url, script):
        command = ["generate", "return a number", "-k", "0", "-n", "3", "--ranker", "first", "--base-url", url]
        ready = lambda: len(script.requests) >= 3  # noqa: E731 - the first request, then the two single ones
        seconds, status, left = interrupt_when(command, tmp_path, env, ready, strict=True)
        assert [request["n"] for request in script.requests] == [3, 1, 1]
    assert seconds < CANCEL_LIMIT_S and status == EXIT_STATUS
    assert not left, left


def _sandbox_runs(folder: Path) -> str:
    """The sandboxed runs started under the temporary folder `folder` that still run (each in a session of its own,
    out of the command's process group; its job file, in its folder, is on its command line)."""
    found = subprocess.run(["ps", "-ww", "-eo", "pid=,stat=,args="], capture_output=True, text=True).stdout
    return "\n".join(line for line in found.splitlines() if str(folder) in line and not line.split()[1].startswith("Z"))


@pytest.mark.parametrize("group", ["train", "eval"])
def test_ctrl_c_ends_a_discriminator_command_in_sandboxed_runs_with_nothing_left(tmp_path: Path, group: str) -> None:
    # Condor's training data: mutants of MBPP programs, labelled by running their tests in the sandbox; these sleep
    # to the runs' 10 s limit, so the command is waiting on sandboxed runs when Ctrl-C comes.
    words = ("reverse", "double", "count", "first")
    records = [
        {"task_id": 601 + i, "text": f"Write a function to {w} a list.",
         "code": f"def {w}(xs):\n    import time\n    time.sleep(60)\n    return [x + {i} for x in xs if x > 0]\n",
         "test_list": [f"assert {w}([1]) == [{1 + i}]"]}
        for i, w in enumerate(words)
    ]  # fmt: skip
    bank = tmp_path / "mbpp.jsonl"
    bank.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    temporary = tmp_path / "tmp"  # the sandboxed runs' folders go here, so they can be told from any other
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}
    command = [group, "discriminator", "--from-bank", f"mbpp:{bank}", "--mutants", "1", "--out", str(tmp_path / "d")]
    seconds, status, left = interrupt_when(command, tmp_path, env, lambda: bool(_sandbox_runs(temporary)))
    assert seconds < CANCEL_LIMIT_S and status == EXIT_STATUS
    assert not left, left
    assert not _sandbox_runs(temporary)
    assert list(temporary.iterdir()) == []  # their folders removed too


def _wakeup_fd() -> int:
    """The process's wakeup descriptor now (-1: none); setting one is the only way to read it."""
    current = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(current)
    return current


def test_a_watch_whose_thread_cannot_start_leaves_the_wakeup_fd_and_no_socket_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A thread that fails to start (no threads left to the process) must not leave the interpreter writing every
    # signal to a socket pair that nobody reads or closes.
    import socket
    import threading

    from assistant.ui.interrupt import _SignalWatch, cancel_guard

    made: list[socket.socket] = []
    socketpair = socket.socketpair

    def recorded_socketpair(*args: object) -> tuple[socket.socket, socket.socket]:
        pair = socketpair(*args)  # type: ignore[arg-type]
        made.extend(pair)
        return pair

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    assert _wakeup_fd() == -1
    handler = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(socket, "socketpair", recorded_socketpair)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    monkeypatch.setattr(_SignalWatch, "active", None)  # put back as it was whatever happens
    try:
        with pytest.raises(RuntimeError, match="can't start new thread"):
            _SignalWatch.start()
        assert _wakeup_fd() == -1
        assert len(made) == 2 and all(s.fileno() == -1 for s in made)  # the pair closed
        assert _SignalWatch.active is None
        with pytest.raises(RuntimeError, match="can't start new thread"):
            cancel_guard(lambda: None)()
        assert _wakeup_fd() == -1
        assert len(made) == 4 and all(s.fileno() == -1 for s in made)
        assert signal.getsignal(signal.SIGINT) is handler  # the guard's handler taken back too
    finally:
        signal.set_wakeup_fd(-1)  # a failure here must not leave the descriptor to the tests after it
        signal.signal(signal.SIGINT, handler)
