"""Run untrusted generated code and its test asserts in a separate, locked-down Python process.

Each call to :func:`run` starts a fresh interpreter (``sys.executable``) in its own temporary
directory and session, with:

* a scrubbed environment built from scratch (no API keys, tokens or other secrets are passed);
* ``resource`` limits on address space, CPU time, file size, core dumps and process count;
* an audit hook (PEP 578), installed before any candidate code runs, that raises
  ``PermissionError`` on network sockets and DNS look-ups, on process creation (fork, exec, spawn,
  ``subprocess``, ``os.system``), on signalling other processes, on ``ctypes``, on raising
  resource limits, and on writing, creating, deleting or changing files outside the sandbox dir;
* a wall-clock timeout that kills the whole process group;
* stdout/stderr read in chunks and capped, so a chatty candidate cannot exhaust our memory;
* the structured report sent over a private pipe and tagged with a random nonce, so nothing the
  candidate prints can be mistaken for it.

The child is started without ``site`` (``-S``): candidates get the standard library only, which is
what MBPP / HumanEval style tasks need, and start-up is about twice as fast.

Limits of this design: the audit hook is a tripwire that stops accidental and naive hostile code,
not a hard security boundary (PEP 578 says as much). Code that deliberately digs into interpreter
internals (for instance re-creating an extension module through ``_imp``) can get around it, and
can also tamper with the in-process runner. The process boundary, the rlimits, the scrubbed
environment and the timeout still bound the damage; for stronger isolation run the whole tool
inside a container or as an unprivileged user.
"""

from __future__ import annotations

import ast
import contextlib
import marshal
import os
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

STATUSES = ("passed", "failed", "error", "timeout", "resource-limit")

_MESSAGE_LIMIT = 300  # characters kept of an error message
_REPORT_LIMIT = 64_000  # bytes accepted on the report pipe; a real report is far smaller
_READ_CHUNK = 65_536

# Signals the kernel sends when RLIMIT_CPU (soft) or RLIMIT_FSIZE is exceeded. A SIGKILL counts
# as a resource limit only when the child used up its CPU time (the RLIMIT_CPU hard limit).
_LIMIT_SIGNALS = {int(signal.SIGXCPU), int(signal.SIGXFSZ)}


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

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.cpu_s <= 0 or self.memory_mb <= 0:
            raise ValueError("sandbox limits must be positive")
        if self.output_limit < 0 or self.file_size_mb < 0:
            raise ValueError("sandbox output and file size limits must not be negative")


# The program the child interpreter runs (via ``-c``). It reads its job from a marshal file,
# deletes it, sets rlimits, installs the audit hook, then runs setup, code and each test, and
# finally writes a report (``ascii()`` of a dict of plain values) to the report pipe.
_RUNNER_SOURCE = r"""
import errno
import marshal
import os
import resource
import sys

import _posixsubprocess


def deny(what):
    raise PermissionError("sandbox: " + what + " is not allowed")


def set_limits(job):
    mb = 1024 * 1024
    wanted = [
        (resource.RLIMIT_AS, job["memory_mb"] * mb, job["memory_mb"] * mb),
        # SIGXCPU at the soft limit, SIGKILL one second later if the candidate ignores it.
        (resource.RLIMIT_CPU, job["cpu_s"], job["cpu_s"] + 1),
        (resource.RLIMIT_FSIZE, job["file_size_mb"] * mb, job["file_size_mb"] * mb),
        (resource.RLIMIT_CORE, 0, 0),
        # Not enforced for root (the audit hook covers that case); for other users it also
        # stops the candidate from starting threads.
        (resource.RLIMIT_NPROC, 0, 0),
    ]
    for which, soft, hard in wanted:
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            pass  # not supported here, or already stricter: keep what we have


def remove_unaudited_functions():
    # These create files (device nodes, FIFOs) or change the root without raising any audit
    # event in CPython 3.11, so take them away instead.
    import posix
    for name in ("mknod", "mkfifo", "chroot"):
        for module in (os, posix):
            if hasattr(module, name):
                delattr(module, name)

    # subprocess calls this directly; the "subprocess.Popen" event stops normal use first.
    def fork_exec(*args, **kwargs):
        deny("process creation")

    _posixsubprocess.fork_exec = fork_exec


def make_hook(root):
    realpath, isabs, join = os.path.realpath, os.path.isabs, os.path.join
    fspath, fsdecode, readlink, getpid = os.fspath, os.fsdecode, os.readlink, os.getpid
    inside_prefix = root + os.sep
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    unix_family = 1  # socket.AF_UNIX on every POSIX system; importing socket here costs time

    always_denied = frozenset({
        # process creation
        "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system",
        "os.startfile", "subprocess.Popen", "pty.spawn", "os.killpg",
        # network and name look-ups
        "socket.connect", "socket.bind", "socket.getaddrinfo",
        "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo",
        "socket.sethostname", "socket.sendto", "socket.sendmsg",
        # native code and raising our own limits
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function", "ctypes.cdata",
        "resource.setrlimit", "resource.prlimit",
    })
    # Fresh imports of these would hand back what remove_unaudited_functions() took away, or
    # open files from C without an "open" event.
    denied_imports = frozenset({"_ctypes", "_posixsubprocess", "posix", "_gdbm", "_dbm", "readline"})
    # event -> ((index of a path argument, index of its dir_fd argument or None), ...)
    path_events = {
        "os.mkdir": ((0, 2),),
        "os.remove": ((0, 1),),
        "os.rmdir": ((0, 1),),
        "os.rename": ((0, 2), (1, 3)),
        "os.link": ((0, 2), (1, 3)),
        "os.symlink": ((1, 2),),
        "os.chmod": ((0, 2),),
        "os.chown": ((0, 3),),
        "os.utime": ((0, 3),),
        "os.truncate": ((0, None),),
        "os.setxattr": ((0, None),),
        "os.removexattr": ((0, None),),
        "os.chflags": ((0, None),),
        "shutil.rmtree": ((0, 1),),
        "shutil.move": ((0, None), (1, None)),
        "shutil.copyfile": ((1, None),),
        "shutil.copytree": ((1, None),),
    }

    def fd_target(fd):
        # Where an open descriptor points; None for pipes, sockets and the like.
        try:
            target = readlink("/proc/self/fd/%d" % fd)
        except (OSError, ValueError):
            return None
        return target if isabs(target) else None

    def inside(path, dir_fd=None):
        if isinstance(path, int):
            path = fd_target(path)
            if path is None:
                return False
        else:
            path = fsdecode(fspath(path))
            if not isabs(path) and isinstance(dir_fd, int) and dir_fd >= 0:
                base = fd_target(dir_fd)
                if base is None:
                    return False
                path = join(base, path)
        # realpath follows symlinks, so a link inside pointing outside counts as outside.
        path = realpath(path)
        return path == root or path.startswith(inside_prefix) or path == "/dev/null"

    def hook(event, args):
        if event in always_denied:
            deny(event)
        elif event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags
            )
            if not writing or isinstance(path, int):
                return
            # os.open() (mode is None) may carry a dir_fd that the event does not show, so a
            # relative path there cannot be checked.
            if mode is None and not isabs(fsdecode(fspath(path))):
                deny("os.open() for writing with a relative path")
            if not inside(path):
                deny("writing %r outside the sandbox directory" % (path,))
        elif event in path_events:
            for path_index, fd_index in path_events[event]:
                dir_fd = args[fd_index] if fd_index is not None else None
                if not inside(args[path_index], dir_fd):
                    deny("%s on %r outside the sandbox directory" % (event, args[path_index]))
        elif event == "socket.__new__":
            # Unconnected AF_UNIX pairs are local plumbing (asyncio's self-pipe); every way to
            # reach anything else (connect, bind, sendto, sendmsg) is denied above.
            if args[1] != unix_family:
                deny("creating a network socket")
        elif event == "os.kill":
            if args[0] != getpid():
                deny("signalling another process")
        elif event == "import":
            if args[0] in denied_imports:
                deny("importing " + args[0])
        elif event == "sqlite3.connect":
            database = args[0]
            if database not in (":memory:", "", b":memory:", b"") and not inside(database):
                deny("sqlite3 database outside the sandbox directory")

    return hook


def describe(exc):
    try:
        message = " ".join(str(exc).split())
    except BaseException:
        message = "<unprintable exception>"
    if len(message) > 300:
        message = message[:297] + "..."
    return type(exc).__name__, message


def is_resource_limit(exc):
    # MemoryError: RLIMIT_AS; EFBIG ("File too large"): RLIMIT_FSIZE, as Python ignores SIGXFSZ.
    return isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.EFBIG)


def main(payload_path):
    with open(payload_path, "rb") as f:
        job = marshal.load(f)
    os.remove(payload_path)  # the nonce must not be readable by the candidate
    report = {"nonce": job["nonce"], "status": "passed", "passed": 0, "failed_index": None,
              "error_type": None, "error_message": None}
    report_fd = job["report_fd"]

    set_limits(job)
    remove_unaudited_functions()
    sys.dont_write_bytecode = True
    sys.setrecursionlimit(1000)
    sys.addaudithook(make_hook(os.path.realpath(os.getcwd())))

    # A real module, so pickling, dataclasses and typing can find the candidate's classes. Not
    # "__main__": candidates' demo blocks (often calling input()) should not run.
    module = type(sys)("__sandbox__")
    sys.modules["__sandbox__"] = module
    namespace = module.__dict__
    try:
        exec(compile(job["setup"], "<setup>", "exec"), namespace)
        exec(compile(job["code"], "<candidate>", "exec"), namespace)
    except BaseException as exc:
        report["status"] = "resource-limit" if is_resource_limit(exc) else "error"
        report["error_type"], report["error_message"] = describe(exc)
    else:
        for index, test in enumerate(job["tests"]):
            try:
                exec(compile(test, "<test %d>" % index, "exec"), namespace)
            except BaseException as exc:
                report["status"] = "resource-limit" if is_resource_limit(exc) else "failed"
                report["failed_index"] = index
                report["error_type"], report["error_message"] = describe(exc)
                break
            report["passed"] += 1

    data = ascii(report).encode("ascii")
    try:
        while data:
            data = data[os.write(report_fd, data):]
    except OSError:
        pass  # the candidate closed or broke the pipe: the parent reports a missing report
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    # Skip interpreter shutdown: no atexit handlers or lingering threads of the candidate.
    os._exit(0)


main(sys.argv[1])
"""


def run(code: str, tests: Sequence[str] = (), *, setup: str = "", limits: Limits = Limits()) -> SandboxResult:
    """Run ``setup``, then ``code``, then each test statement in a fresh sandboxed process.

    Each element of ``tests`` is one chunk of source (an ``assert`` line, or a multi-line block
    such as ``def check(candidate): ...``) executed in the candidate's namespace, in order;
    execution stops at the first test that raises. The returned status is "passed" when the
    code runs cleanly and every test passes, "failed" when a test raises (``failed_test`` is
    its source), "error" when ``setup`` or ``code`` raises (including SyntaxError), "timeout"
    when ``limits.timeout_s`` of wall clock ran out, and "resource-limit" when memory, CPU time
    or file size limits were hit.
    """
    tests = [str(test) for test in tests]
    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="assist-sandbox-")
    try:
        return _run_in(workdir, code, tests, setup, limits, started)
    finally:
        _remove_tree(workdir)


def run_many(
    jobs: Sequence[tuple[str, Sequence[str], str]],
    *,
    limits: Limits = Limits(),
    workers: int | None = None,
) -> list[SandboxResult]:
    """Run (code, tests, setup) jobs concurrently, returning results in input order.

    A thread pool drives the subprocesses (each thread just waits on its child), with
    ``workers`` threads (default ``os.cpu_count()``). Every job gets the same ``limits``.
    """
    jobs = list(jobs)
    if not jobs:
        return []
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        raise ValueError("workers must be at least 1")

    def run_job(job: tuple[str, Sequence[str], str]) -> SandboxResult:
        code, tests, setup = job
        return run(code, tests, setup=setup, limits=limits)

    with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        return list(pool.map(run_job, jobs))


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


def _run_in(workdir: str, code: str, tests: list[str], setup: str, limits: Limits, started: float) -> SandboxResult:
    """Start the runner in ``workdir``, collect its output and report, and build the result."""
    tmpdir = os.path.join(workdir, "tmp")
    os.mkdir(tmpdir)
    nonce = secrets.token_hex(16)
    report_r, report_w = os.pipe()
    payload_path = os.path.join(workdir, f".job-{secrets.token_hex(8)}")
    with open(payload_path, "wb") as f:
        marshal.dump(
            {
                "nonce": nonce,
                "report_fd": report_w,
                "setup": setup,
                "code": code,
                "tests": tests,
                "memory_mb": limits.memory_mb,
                "cpu_s": limits.cpu_s,
                "file_size_mb": limits.file_size_mb,
            },
            f,
        )

    # Not -I: it implies -E, which would ignore PYTHONHASHSEED; the environment is ours anyway.
    # -s: no user site, -S: no site-packages, -P: no cwd on sys.path, -B: no .pyc writes.
    argv = [sys.executable, "-s", "-S", "-P", "-B", "-c", _RUNNER_SOURCE, payload_path]
    deadline = started + limits.timeout_s
    try:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=_child_env(workdir, tmpdir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(report_w,),
            start_new_session=True,  # own process group, so a timeout kills everything it started
        )
    except BaseException:
        os.close(report_r)
        os.close(report_w)
        raise
    os.close(report_w)  # only the child holds the write end now, so EOF means it is gone

    try:
        out, err, report_bytes, timed_out = _collect(proc, report_r, deadline, limits.output_limit)
        if not timed_out:
            timed_out = not _wait_exited(proc.pid, deadline)
    finally:
        # The child is not reaped yet, so its pid (= the process group id) cannot have been
        # reused: killing the group is safe and takes any stray descendants with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        cpu_s = _reap(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        os.close(report_r)

    report = None if timed_out else _parse_report(report_bytes, nonce, len(tests))
    status, passed, failed_test, error_type, error_message = _outcome(
        report, tests, timed_out, proc.returncode, cpu_s, limits
    )
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
    proc: subprocess.Popen[bytes], report_r: int, deadline: float, output_limit: int
) -> tuple[bytes, bytes, bytes, bool]:
    """Read stdout, stderr and the report pipe until all three close or the deadline passes.

    Reads in chunks and drops everything past each cap, so the child never blocks on a full
    pipe and our memory stays bounded. Returns (stdout, stderr, report, timed_out).
    """
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    caps = {out_fd: output_limit, err_fd: output_limit, report_r: _REPORT_LIMIT}
    buffers = {fd: bytearray() for fd in caps}
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in caps:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                room = caps[key.fd] - len(buffers[key.fd])
                if room > 0:
                    buffers[key.fd] += chunk[:room]
    return bytes(buffers[out_fd]), bytes(buffers[err_fd]), bytes(buffers[report_r]), timed_out


def _wait_exited(pid: int, deadline: float) -> bool:
    """Wait (without reaping) until ``pid`` exits; False if the deadline passes first."""
    if not hasattr(os, "waitid"):  # e.g. macOS: the caller's killpg + wait still cleans up
        return True
    delay = 0.0005
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)
    return True


@dataclass(frozen=True)
class _Report:
    """The runner's account of a run that finished (checked, not yet trusted for the status)."""

    status: str
    passed: int
    failed_index: int | None
    error_type: str | None
    error_message: str | None


def _reap(proc: subprocess.Popen[bytes]) -> float:
    """Reap the child, set its returncode, and return the CPU seconds it used."""
    try:
        _, wait_status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:  # already reaped elsewhere; let Popen settle the returncode
        proc.wait()
        return 0.0
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    return usage.ru_utime + usage.ru_stime


def _parse_report(data: bytes, nonce: str, total: int) -> _Report | None:
    """Decode and check the runner's report; None if it is missing, malformed or not ours."""
    try:
        raw = ast.literal_eval(data.decode("ascii"))
    except (ValueError, TypeError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("nonce") != nonce:
        return None
    status, passed, index = raw.get("status"), raw.get("passed"), raw.get("failed_index")
    error_type, error_message = raw.get("error_type"), raw.get("error_message")
    if status not in ("passed", "failed", "error", "resource-limit"):
        return None
    if not isinstance(passed, int) or not 0 <= passed <= total:
        return None
    if (status == "passed" and passed != total) or (status == "failed" and passed == total):
        return None
    if index is not None and not (isinstance(index, int) and 0 <= index < total):
        return None
    if not all(value is None or isinstance(value, str) for value in (error_type, error_message)):
        return None
    return _Report(status, passed, index, error_type, error_message)


def _outcome(
    report: _Report | None,
    tests: list[str],
    timed_out: bool,
    returncode: int,
    cpu_s: float,
    limits: Limits,
) -> tuple[str, int, str | None, str | None, str | None]:
    """Status, passed, failed_test, error_type and error_message for one finished run."""
    if timed_out:
        return "timeout", 0, None, "Timeout", f"wall-clock limit of {limits.timeout_s:g}s exceeded"
    if report is not None:
        failed_test = tests[report.failed_index] if report.failed_index is not None else None
        message = _one_line(report.error_message) if report.error_message else None
        return report.status, report.passed, failed_test, report.error_type, message
    # No usable report: the process died, left early (os._exit) or garbled the report pipe.
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if -returncode in _LIMIT_SIGNALS or (-returncode == signal.SIGKILL and cpu_s >= limits.cpu_s):
            return "resource-limit", 0, None, name, f"killed by {name} (resource limit)"
        return "error", 0, None, name, f"killed by {name}"
    return "error", 0, None, "SandboxError", f"process exited with code {returncode} without a valid report"


def _one_line(message: str) -> str:
    """Collapse whitespace and truncate to about _MESSAGE_LIMIT characters."""
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 3] + "..."


def _remove_tree(path: str) -> None:
    """Remove the sandbox dir, even if the candidate made parts of it unreadable or read-only."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    # Only matters when not running as root: give ourselves access back, then try again.
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, name), stat.S_IRWXU, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)
