"""Run untrusted generated code and its test asserts in a separate, locked-down Python process.

Each call to :func:`run` starts a fresh interpreter (``sys.executable``) running
:mod:`assistant.sandbox.runner` in its own temporary directory and session, with a scrubbed environment
built from scratch (no API keys, tokens or other secrets are passed). The runner puts a kernel boundary
around itself and everything it starts, where the kernel offers one (see :mod:`assistant.sandbox.boundary`):

* Landlock: read-only access to the interpreter's stdlib and system library dirs, read-write access to
  the sandbox dir and /dev/null only (not /proc, $HOME, /root or the repo), no TCP bind/connect, and
  signals and abstract unix sockets scoped to the sandbox;
* ``PR_SET_NO_NEW_PRIVS``, ``PR_SET_DUMPABLE`` off, every capability dropped (we may run as root); where
  Landlock is missing, this process also makes itself non-dumpable, so that a candidate (same user, no
  capabilities) cannot read ``/proc/<our pid>/environ``;
* in the candidate's process, a seccomp filter: no fork/exec, ptrace, sockets, new sessions or
  process groups, mounts, signals to other processes, io_uring, bpf, memfd_create (shared memory that
  RLIMIT_AS does not count), ...;
* ``resource`` limits on address space, CPU time, file size, open files (so that files deleted while open
  cannot hold much more than the memory limit) and core dumps, and a watch from outside on what the run
  writes in all and how deep it nests folders (:mod:`assistant.sandbox.disk`, which also removes the run's
  folder without recursion); :func:`memory_boundary` says what keeps runs inside their memory limit here;
* a PEP 578 audit hook above all that, as defence in depth (and the main layer where the kernel has
  none of the above: macOS, old kernels, other CPUs).

The runner never runs candidate code itself: it forks a child for that and reads the verdict from the
child's exit status, checked against a proof only the child's harness holds (the module docstring of
:mod:`assistant.sandbox.runner` says how, and what a candidate can still do). A wall-clock timeout kills
the whole process group; stdout/stderr are read in chunks and capped. The runner's report comes over a
pipe the candidate's process never holds.

The child is started without ``site`` (``-S``): candidates get the standard library only, which is
what MBPP / HumanEval style tasks need, and start-up is about twice as fast. :func:`boundary_layers`
says which layers held on this machine (``assist doctor`` prints it). ``ASSIST_SANDBOX_DISABLE`` (a
comma-separated list of layer names, for tests and for kernels that misbehave) turns layers off, with a
warning, and the doctor shows it.
"""

from __future__ import annotations

import ast
import contextlib
import marshal
import os
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

from assistant.errors import UsageError
from assistant.sandbox.disk import DiskWatch, remove_tree

STATUSES = ("passed", "failed", "error", "timeout", "resource-limit")
# The layers the runner reports on, in the order `assist doctor` shows them.
LAYERS = ("landlock", "seccomp", "no_new_privs", "caps", "dumpable", "hook")
# Only project test suites have these: resource limits, and namespaces (they may fork, where seccomp forbids it).
PROJECT_LAYERS = ("namespaces", "root", "rlimits")
DISABLE_ENV = "ASSIST_SANDBOX_DISABLE"
RUNNER_PATH = Path(__file__).with_name("runner.py")
BOUNDARY_PATH = Path(__file__).with_name("boundary.py")
# Runs the runner's code, which the job file carries compiled (see runner.py's docstring).
_BOOTSTRAP = "import marshal, sys\nwith open(sys.argv[1], 'rb') as f:\n    code = marshal.load(f)\nexec(code)\n"
# Seconds the runner gets past the deadline to kill its child and report, before we kill it too.
_RUNNER_GRACE_S = 2.0

_CANCEL_POLL_S = 0.1  # how often a cancellable run looks at its event
_MESSAGE_LIMIT = 300  # characters kept of an error message
_REPORT_LIMIT = 64_000  # bytes accepted on the report pipe; a real report is far smaller
_READ_CHUNK = 65_536


class RunCancelled(Exception):
    """A run stopped because its caller set the ``cancel`` event (its process group is killed first)."""


@dataclass(frozen=True)
class SandboxResult:
    """What happened when a candidate and its tests ran in the sandbox."""

    status: str  # one of STATUSES
    passed: int  # number of test statements that passed
    total: int  # number of test statements
    failed_test: str | None  # source of the first failing test
    error_type: str | None  # e.g. "NameError", "MemoryError", "PermissionError"
    error_message: str | None  # one line, at most ~300 characters
    duration_s: float
    stdout: str  # captured, at most Limits.output_limit bytes before decoding
    stderr: str

    @property
    def ok(self) -> bool:
        """True when the code ran cleanly and every test passed."""
        return self.status == "passed"


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed run."""

    timeout_s: float = 10.0  # wall clock, including interpreter start-up
    cpu_s: int = 10  # RLIMIT_CPU
    memory_mb: int = 1024  # RLIMIT_AS
    output_limit: int = 64_000  # bytes kept of stdout and of stderr, each
    file_size_mb: int = 16  # RLIMIT_FSIZE
    disk_mb: int = 256  # what the run may add to its directory in all (assistant.sandbox.disk)
    max_files: int = 10_000  # files and directories it may add there

    def __post_init__(self) -> None:
        positive = (self.timeout_s, self.cpu_s, self.memory_mb)
        _check_limits("sandbox", positive, (self.output_limit, self.file_size_mb, self.disk_mb, self.max_files))


def _check_limits(kind: str, positive: Sequence[float], non_negative: Sequence[float]) -> None:
    """ValueError, naming the `kind` of limits, unless the time, CPU and memory ones are positive and the output,
    file size and disk ones not negative (:class:`Limits`, :class:`assistant.sandbox.project.ProjectLimits`)."""
    if any(value <= 0 for value in positive):
        raise ValueError(f"{kind} limits must be positive")
    if any(value < 0 for value in non_negative):
        raise ValueError(f"{kind} output, file size and disk limits must not be negative")


def run(code: str, tests: Sequence[str] = (), *, setup: str = "", limits: Limits = Limits()) -> SandboxResult:
    """Run ``setup``, then ``code``, then each test statement in a fresh sandboxed process.

    Each element of ``tests`` is one chunk of source (an ``assert`` line, or a multi-line block
    such as ``def check(candidate): ...``) executed in the candidate's namespace, in order;
    execution stops at the first test that raises. The returned status is "passed" when the
    code runs cleanly and every test passes, "failed" when a test raises (``failed_test`` is
    its source), "error" when ``setup`` or ``code`` raises (including SyntaxError and SystemExit,
    or when the process ends without the harness's verdict), "timeout" when ``limits.timeout_s`` of
    wall clock ran out, and "resource-limit" when memory, CPU time or file size limits were hit, or the run
    wrote more in all than ``limits.disk_mb`` or ``limits.max_files`` allow (error_type "DiskLimit").
    """
    return _execute(code, [str(test) for test in tests], setup, limits)[0]


def run_many(
    jobs: Sequence[tuple[str, Sequence[str], str]],
    *,
    limits: Limits = Limits(),
    workers: int | None = None,
) -> list[SandboxResult]:
    """Run (code, tests, setup) jobs concurrently, returning results in input order.

    A thread pool drives the subprocesses (each thread just waits on its child), with
    ``workers`` threads (default ``os.cpu_count()``). Every job gets the same ``limits``. When the wait is
    interrupted (Ctrl-C), the runs in flight are ended within a tenth of a second, not waited out.
    """
    jobs = list(jobs)
    if not jobs:
        return []
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        raise ValueError("workers must be at least 1")

    cancel = threading.Event()

    def run_job(job: tuple[str, Sequence[str], str]) -> SandboxResult:
        code, tests, setup = job
        return _execute(code, [str(test) for test in tests], setup, limits, cancel)[0]

    pool = ThreadPoolExecutor(max_workers=min(workers, len(jobs)))
    try:
        return list(pool.map(run_job, jobs))
    except BaseException:  # Ctrl-C: end the runs in flight now (their results are not wanted) rather than wait
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def boundary_layers() -> dict[str, tuple[bool, str]]:
    """Which layers held in a real sandbox run on this machine: layer -> (on, one-line detail).

    Runs a trivial candidate (about 30 ms). Layers are those of :data:`LAYERS`; a layer that is off says
    why (missing from the kernel, unsupported CPU, disabled by ``ASSIST_SANDBOX_DISABLE``, failed).
    """
    result, layers = _execute("pass", [], "", Limits(timeout_s=10.0, cpu_s=5))
    if not layers:
        detail = f"the sandbox did not report its layers ({result.status}: {result.error_message})"
        return {name: (False, detail) for name in LAYERS}
    layers = {name: layers.get(name, (False, "not reported")) for name in LAYERS}
    if not layers["landlock"][0] and _parent_guarded:
        on, detail = layers["landlock"]
        layers["landlock"] = (on, detail + "; assist made itself non-dumpable, so /proc/<its pid> stays closed")
    return layers


def memory_boundary() -> tuple[bool, str]:
    """What keeps a sandboxed run inside its memory limit on this machine, as a real run reported it: (whether
    memory outside RLIMIT_AS, memfd_create's, is closed to runs, one line saying what holds). Runs a trivial
    candidate (about 30 ms) and probes for a cgroup v2 memory controller."""
    from assistant.sandbox import boundary

    result, layers = _execute("pass", [], "", Limits(timeout_s=10.0, cpu_s=5))
    on, detail = layers.get(
        "memory", (False, f"the sandbox did not report it ({result.status}: {result.error_message})")
    )
    cgroup_on, why = boundary.memory_cgroup()
    if cgroup_on:
        cgroup = f"a memory cgroup could bound a whole run ({why}), but assist does not make one yet"
    else:
        cgroup = f"no memory cgroup ({why}): a project suite's processes are bounded one by one"
    return on, f"{detail}; {cgroup}"


_warned_disabled: set[frozenset[str]] = set()


def disabled_layers() -> frozenset[str]:
    """The layers ``ASSIST_SANDBOX_DISABLE`` turns off (e.g. "landlock,seccomp"); warns once per value.

    An unknown name is a UsageError: a typo must not leave the user believing a layer is off, or on.
    """
    raw = os.environ.get(DISABLE_ENV, "")
    names = frozenset(name.strip().lower() for name in raw.split(",") if name.strip())
    known = (*LAYERS, "namespaces", "root")
    unknown = sorted(names - set(known))
    if unknown:
        raise UsageError(f"{DISABLE_ENV} names unknown sandbox layers {', '.join(unknown)}; known: {', '.join(known)}")
    if names and names not in _warned_disabled:
        _warned_disabled.add(names)
        warnings.warn(
            f"sandbox layers disabled by {DISABLE_ENV}: {', '.join(sorted(names))}", RuntimeWarning, stacklevel=3
        )
    return names


_parent_guarded = False


def _guard_parent_environment(disabled: frozenset[str]) -> bool:
    """Where Landlock cannot close /proc, make this process non-dumpable; True once it is.

    A candidate runs as our user, so without Landlock it could open /proc/<our pid>/environ (our API keys)
    or /proc/<our pid>/mem. Once we are not dumpable, that needs CAP_SYS_PTRACE, which the runner drops.
    The cost: no core dumps of assist, and debuggers need root to attach to it.
    """
    global _parent_guarded
    if _parent_guarded or not sys.platform.startswith("linux"):
        return _parent_guarded
    from assistant.sandbox import boundary

    if "landlock" not in disabled and boundary.landlock_abi() >= 1:
        return False
    try:
        boundary.set_dumpable(False)
    except OSError:
        return False
    _parent_guarded = True
    return True


def _execute(
    code: str, tests: list[str], setup: str, limits: Limits, cancel: threading.Event | None = None
) -> tuple[SandboxResult, dict[str, tuple[bool, str]]]:
    """One sandboxed run in a fresh temporary directory: the result and the layers the runner reported. Setting
    `cancel` (from another thread) kills the run and raises RunCancelled."""
    disabled = disabled_layers()
    _guard_parent_environment(disabled)
    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="assist-sandbox-")
    try:
        return _run_in(workdir, code, tests, setup, limits, started, disabled, cancel)
    finally:
        _remove_tree(workdir)


_compiled: dict[tuple[Path, int], CodeType] = {}


def _compiled_code(path: Path) -> CodeType:
    """`path` compiled, once per process and version of the file (the child cannot cache .pyc files)."""
    key = (path, path.stat().st_mtime_ns)
    code = _compiled.get(key)
    if code is None:
        code = compile(path.read_text(encoding="utf-8"), str(path), "exec", dont_inherit=True)
        _compiled[key] = code
    return code


def _child_env(workdir: str, tmpdir: str) -> dict[str, str]:
    """A minimal environment built from scratch, so no secret of ours reaches the candidate."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": tmpdir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


def _run_in(
    workdir: str,
    code: str,
    tests: list[str],
    setup: str,
    limits: Limits,
    started: float,
    disabled: frozenset[str],
    cancel: threading.Event | None = None,
) -> tuple[SandboxResult, dict[str, tuple[bool, str]]]:
    """Start the runner in ``workdir``, collect its output and report, and build the result."""
    tmpdir = os.path.join(workdir, "tmp")
    os.mkdir(tmpdir)
    report_r, report_w = os.pipe()
    payload_path = os.path.join(workdir, f".job-{secrets.token_hex(8)}")
    deadline = started + limits.timeout_s
    job = {
        "boundary_code": _compiled_code(BOUNDARY_PATH),
        "report_fd": report_w,
        "setup": setup,
        "code": code,
        "tests": tests,
        "memory_mb": limits.memory_mb,
        "cpu_s": limits.cpu_s,
        "file_size_mb": limits.file_size_mb,
        "deadline": deadline,  # time.monotonic() is system-wide, so the runner can use it as is
        "disable": sorted(disabled),
    }
    with open(payload_path, "wb") as f:
        marshal.dump(_compiled_code(RUNNER_PATH), f)
        marshal.dump(job, f)

    watch = DiskWatch(workdir, limits.disk_mb, limits.max_files)
    # Not -I: it implies -E, which would ignore PYTHONHASHSEED; the environment is ours anyway.
    # -s: no user site, -S: no site-packages, -P: no script dir on sys.path, -B: no .pyc writes.
    argv = [sys.executable, "-s", "-S", "-P", "-B", "-c", _BOOTSTRAP, payload_path]
    env = _child_env(workdir, tmpdir)
    proc = _start_reporting(argv, report_r, report_w, cwd=workdir, env=env, stderr=subprocess.PIPE)
    # The runner kills its child at the deadline and reports; we stop waiting a little later.
    out, err, report_bytes, timed_out, stopped = _wait_runner(
        proc, report_r, deadline + _RUNNER_GRACE_S, limits.output_limit, watch, cancel
    )
    report = None if timed_out else _parse_report(report_bytes, len(tests))
    if stopped is None and not timed_out:
        stopped = watch.final()  # what a run too quick for the watch's looks left (e.g. folders nested too deep)
    result = _result(report, tests, timed_out, stopped, proc.returncode, limits, started, out, err)
    return result, (report.layers if report is not None else {})


def _start_reporting(argv: list[str], report_r: int, report_w: int, **popen: Any) -> subprocess.Popen[bytes]:
    """Start `argv` (the runner, or a project's launcher) with stdin closed, stdout piped and the report pipe's
    write end passed, in a session of its own, so a timeout kills everything it started; then close our copy
    of that end, so EOF on `report_r` means it is gone. Both ends are closed when it cannot start."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            pass_fds=(report_w,),
            start_new_session=True,
            **popen,
        )
    except BaseException:
        os.close(report_r)
        os.close(report_w)
        raise
    os.close(report_w)
    return proc


def _kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads, if it is still there. Safe while its leader is not reaped: the pid
    (= the process group id) cannot have been reused, and stray descendants go with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _wait_runner(
    proc: subprocess.Popen[bytes],
    report_r: int,
    deadline: float,
    output_limit: int,
    watch: DiskWatch,
    cancel: threading.Event | None = None,
) -> tuple[bytes, bytes, bytes, bool, str | None]:
    """:func:`_collect` the runner's output and report until `deadline`, then kill its group, reap it and close the
    pipes, whatever happened (RunCancelled from `cancel` too): (stdout, stderr, report, timed_out, why the disk
    watch stopped it)."""
    try:
        out, err, report_bytes, timed_out, stopped = _collect(proc, report_r, deadline, output_limit, watch, cancel)
        if not timed_out and stopped is None:
            timed_out = not _wait_exited(proc.pid, deadline, cancel)
    finally:
        _kill_group(proc.pid)
        _reap(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        os.close(report_r)
    return out, err, report_bytes, timed_out, stopped


def _result(
    report: _Report | None,
    tests: list[str],
    timed_out: bool,
    stopped: str | None,
    returncode: int,
    limits: Limits,
    started: float,
    out: bytes,
    err: bytes,
) -> SandboxResult:
    """The run's result from the runner's report; a run the disk watch `stopped` is a resource limit whatever the
    report says (its group was killed for what it wrote)."""
    if stopped is not None:
        status, passed, failed_test, error_type, error_message = "resource-limit", 0, None, "DiskLimit", stopped
    else:
        status, passed, failed_test, error_type, error_message = _outcome(report, tests, timed_out, returncode, limits)
    return SandboxResult(
        status=status,
        passed=passed,
        total=len(tests),
        failed_test=failed_test,
        error_type=error_type,
        error_message=error_message,
        duration_s=time.monotonic() - started,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
    )


def _collect(
    proc: subprocess.Popen[bytes],
    report_r: int,
    deadline: float,
    output_limit: int,
    watch: DiskWatch | None = None,
    cancel: threading.Event | None = None,
) -> tuple[bytes, bytes, bytes, bool, str | None]:
    """Read stdout, stderr and the report pipe until all three close, the deadline passes or ``watch`` finds the
    run past its disk caps (then its process group is killed at once). Raises RunCancelled within a tenth of a
    second of ``cancel`` being set (the caller kills the group).

    Reads in chunks and drops everything past each cap, so the child never blocks on a full
    pipe and our memory stays bounded. Returns (stdout, stderr, report, timed_out, why the watch stopped it).
    """
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    caps = {out_fd: output_limit, err_fd: output_limit, report_r: _REPORT_LIMIT}
    buffers = {fd: bytearray() for fd in caps}
    timed_out = False
    stopped: str | None = None
    with selectors.DefaultSelector() as selector:
        for fd in caps:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            stopped = watch.check() if watch is not None else None
            if stopped is not None:
                _kill_group(proc.pid)
                break
            if cancel is not None and cancel.is_set():
                raise RunCancelled("the run was cancelled")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            wait = remaining if watch is None else min(remaining, max(watch.wait(), 0.01))
            if cancel is not None:
                wait = min(wait, _CANCEL_POLL_S)
            for key, _ in selector.select(wait):
                _read_capped(selector, key.fd, buffers, caps)
    return bytes(buffers[out_fd]), bytes(buffers[err_fd]), bytes(buffers[report_r]), timed_out, stopped


def _read_capped(
    selector: selectors.BaseSelector, fd: int, buffers: dict[int, bytearray], caps: dict[int, int]
) -> None:
    """Read a chunk from the readable pipe `fd` into its buffer, dropping what is past its cap (so the writer never
    blocks on a full pipe, and our memory stays bounded); at EOF, stop watching it."""
    chunk = os.read(fd, _READ_CHUNK)
    if not chunk:
        selector.unregister(fd)
        return
    room = caps[fd] - len(buffers[fd])
    if room > 0:
        buffers[fd] += chunk[:room]


def _wait_exited(pid: int, deadline: float, cancel: threading.Event | None = None) -> bool:
    """Wait (without reaping) until ``pid`` exits; False if the deadline passes first. Raises RunCancelled once
    ``cancel`` is set (the caller kills the group)."""
    if not hasattr(os, "waitid"):  # e.g. macOS: the caller's killpg + wait still cleans up
        return True
    delay = 0.0005  # doubles to at most 0.05 s, within the cancel poll
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if cancel is not None and cancel.is_set():
            raise RunCancelled("the run was cancelled")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)
    return True


@dataclass(frozen=True)
class _Report:
    """The runner's account of a run (the runner decided it; the candidate cannot write this pipe)."""

    status: str
    passed: int
    failed_index: int | None
    error_type: str | None
    error_message: str | None
    signal: int | None
    layers: dict[str, tuple[bool, str]]


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Reap the runner and set its returncode."""
    try:
        _, wait_status = os.waitpid(proc.pid, 0)
    except ChildProcessError:  # already reaped elsewhere; let Popen settle the returncode
        proc.wait()
        return
    proc.returncode = os.waitstatus_to_exitcode(wait_status)


def _parse_layers(raw: object) -> dict[str, tuple[bool, str]]:
    if not isinstance(raw, dict):
        return {}
    return {
        str(name): (bool(value[0]), str(value[1]))
        for name, value in raw.items()
        if isinstance(value, tuple) and len(value) == 2
    }


def _parse_report(data: bytes, total: int) -> _Report | None:
    """Decode and check the runner's report; None if it is missing or malformed (the runner died)."""
    try:
        raw = ast.literal_eval(data.decode("ascii"))
    except (ValueError, TypeError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    status, passed, index = raw.get("status"), raw.get("passed"), raw.get("failed_index")
    error_type, error_message, number = raw.get("error_type"), raw.get("error_message"), raw.get("signal")
    if status not in STATUSES:
        return None
    if not isinstance(passed, int) or not 0 <= passed <= total:
        return None
    if (status == "passed" and passed != total) or (status == "failed" and passed == total):
        return None
    if index is not None and not (isinstance(index, int) and 0 <= index < total):
        return None
    if not all(value is None or isinstance(value, str) for value in (error_type, error_message)):
        return None
    if number is not None and not isinstance(number, int):
        return None
    return _Report(status, passed, index, error_type, error_message, number, _parse_layers(raw.get("layers")))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _outcome(
    report: _Report | None,
    tests: list[str],
    timed_out: bool,
    returncode: int,
    limits: Limits,
) -> tuple[str, int, str | None, str | None, str | None]:
    """Status, passed, failed_test, error_type and error_message for one finished run."""
    timeout = ("timeout", 0, None, "Timeout", f"wall-clock limit of {limits.timeout_s:g}s exceeded")
    if timed_out or (report is not None and report.status == "timeout"):
        return timeout
    if report is not None:
        if report.signal is not None:
            name = _signal_name(report.signal)
            if report.status == "resource-limit":
                return "resource-limit", 0, None, name, f"killed by {name} (resource limit)"
            return "error", 0, None, name, f"killed by {name}"
        failed_test = tests[report.failed_index] if report.failed_index is not None else None
        message = _one_line(report.error_message) if report.error_message else None
        return report.status, report.passed, failed_test, report.error_type, message
    # No usable report: the runner itself died (or garbled its report).
    if returncode < 0:
        name = _signal_name(-returncode)
        return "error", 0, None, name, f"sandbox runner killed by {name}"
    return "error", 0, None, "SandboxError", f"sandbox runner exited with code {returncode} without a report"


def _one_line(message: str) -> str:
    """Collapse whitespace and truncate to about _MESSAGE_LIMIT characters."""
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 3] + "..."


def _remove_tree(path: str) -> None:
    """Remove a run's folder, however deep the run nested it and whatever rights it left (no recursion, no link
    followed: :func:`assistant.sandbox.disk.remove_tree`)."""
    remove_tree(path)
