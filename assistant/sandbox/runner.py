"""The sandbox runner: applies the OS boundary, runs the candidate in a child process, and decides the verdict.

:mod:`assistant.sandbox` starts it in the sandbox's temporary directory, in its own session, as
``python -s -S -P -B -c BOOTSTRAP JOB``: the bootstrap execs this module's code, compiled once per parent
process and shipped in the job file with ``boundary.py``'s (compiling both on every run cost 7 ms).
``python -s -S -P -B runner.py JOB`` works too, loading ``boundary.py`` from beside it. It must stay
standard-library-only and must not import the ``assistant`` package: it runs without site-packages.

Two processes, so that the code that decides the verdict never runs candidate code:

1. The runner (this process) reads the job, sets rlimits, ``PR_SET_NO_NEW_PRIVS``, ``PR_SET_DUMPABLE`` off,
   drops every capability and restricts itself with Landlock (read-only system paths and stdlib,
   read-write only the sandbox dir and /dev/null, no TCP, signals and abstract sockets scoped). These
   hold for everything it starts.
2. It forks one child per run. Before any candidate code runs the child closes the runner's report pipe,
   enters a nested Landlock scope (so it cannot signal the runner), installs the seccomp filter (no
   fork/exec, ptrace, sockets, new sessions, signals to other processes, ...), removes ``os._exit`` and
   friends, installs the audit hook (defence in depth) and runs setup, code and the tests in order in a
   separate thread, stopping at the first failing test.
3. The runner reads the verdict from the child's exit status: 64 passed, 65 a test failed, 66 setup or
   code raised, 67 a resource limit, 68 the harness itself failed; a signal (e.g. SIGXCPU) is read as
   before. Details (error type, message, failing test) come over a pipe and are only believed when they
   carry the proof below; they never turn a failure into a pass. The runner then writes the report for
   the parent on a pipe the child closed before anything else, so the old report nonce is gone.

One child runs setup, code and all tests (tests may build on earlier chunks, e.g. HumanEval's
``def check(candidate)`` then ``check(f)``): a child per test would re-run the code once per test and
multiply slow candidates' time; the proof below pins the count of passed tests instead.

The proof: before the candidate runs, the child's harness draws 16 random bytes for each possible number
of passed tests, sends them to the runner over a pipe it then closes, and keeps them only in a local
variable of the harness thread. Its final report carries the bytes for the count it reached. Exit status
alone would not do: a candidate can rebuild ``posix._exit`` (``_imp.create_builtin``) and exit with 64; it
also needs the bytes for "all passed", which only frame, ``gc`` or memory introspection would give it,
and those are what the audit hook denies (``sys._getframe``, ``tb_frame``/``gi_frame``, ``gc``, ``ctypes``,
``/proc``), while Landlock keeps ``/proc/self/mem`` closed. Running the candidate outside the main thread
means it cannot install a signal handler (whose frame argument would reach the harness's frames).

What a candidate can still do, said plainly:

* satisfy a test without being right, e.g. return an object whose ``__eq__`` is always True, or define
  names the tests use (it shares their namespace) -- the sandbox runs tests, it does not judge them;
* defeat the audit hook with crafted bytecode (``marshal``, a ``.pyc`` in its dir) or an interpreter bug,
  then read the proof from memory and choose its own verdict. It still cannot leave the sandbox: the
  Landlock, seccomp, capability and rlimit layers are enforced by the kernel, not by Python;
* use the CPU, memory and time its limits allow, print up to the output cap, and write inside its dir;
* learn whether a path outside its dir exists, and its size, owner, mode and times (``os.stat``: Landlock does
  not rule looking paths up, and stat raises no audit event), though not read it.

What the hook's denials cost honest candidates: no frame introspection (``sys._getframe``, a traceback's
or generator's frames, so ``traceback.format_exc()`` and ``inspect.stack()`` raise PermissionError;
``collections.namedtuple``/``Enum``/``TypeVar`` made by a call work but cannot be pickled), no
``sys.settrace``, no ``gc`` and, since it runs outside the main thread, no ``signal.signal``.

Where a layer is unavailable (an old kernel, another OS or CPU) the runner applies what there is and
says which layers held in its report; ``assist doctor`` shows it.
"""

import _signal
import _thread
import errno
import marshal
import os
import resource
import select
import sys
import time

EXIT_PASSED = 64
EXIT_FAILED = 65
EXIT_ERROR = 66
EXIT_RESOURCE = 67
EXIT_HARNESS = 68
EXIT_BOUNDARY = 69  # the child could not apply a layer the runner said was available
STATUS_BY_EXIT = {EXIT_PASSED: "passed", EXIT_FAILED: "failed", EXIT_ERROR: "error", EXIT_RESOURCE: "resource-limit"}
EXIT_BY_STATUS = {status: code for code, status in STATUS_BY_EXIT.items()}

PROOF_BYTES = 16
RECORD_TAG = b"\x00verdict "
DETAILS_LIMIT = 64_000  # bytes kept from the child's details pipe; a real record is far smaller
MESSAGE_LIMIT = 300
LIMIT_SIGNALS = (int(_signal.SIGXCPU), int(_signal.SIGXFSZ))
MIN_OPEN_FILES, MAX_OPEN_FILES = 32, 256

# System paths the interpreter may read (and map) after start-up. Not /proc, /root, $HOME or the repo.
SYSTEM_READ_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/localtime")
DEVICE_PATHS = ("/dev/null",)
DEVICE_READ_PATHS = ("/dev/urandom", "/dev/random", "/dev/zero")


# --- the runner ---------------------------------------------------------------------------------


def open_files(job):
    """RLIMIT_NOFILE for a run: a file deleted while open keeps its pages (in RAM where the sandbox dir is a tmpfs)
    and neither RLIMIT_AS nor the disk watch sees them, so open files times RLIMIT_FSIZE stays near the memory
    limit: 64 for the defaults (1024 MB, 16 MB files), never under 32 (the interpreter needs a few) nor over 256."""
    return max(MIN_OPEN_FILES, min(MAX_OPEN_FILES, job["memory_mb"] // max(1, job["file_size_mb"])))


def set_limits(job):
    """rlimits for the runner and, inherited, the child (RLIMIT_NPROC is the child's business)."""
    mb = 1024 * 1024
    files = open_files(job)
    wanted = [
        (resource.RLIMIT_AS, job["memory_mb"] * mb, job["memory_mb"] * mb),
        # SIGXCPU at the soft limit, SIGKILL one second later if the candidate ignores it.
        (resource.RLIMIT_CPU, job["cpu_s"], job["cpu_s"] + 1),
        (resource.RLIMIT_FSIZE, job["file_size_mb"] * mb, job["file_size_mb"] * mb),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, files, files),
    ]
    for which, soft, hard in wanted:
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            continue  # not supported here, or already stricter: keep what we have


def load_boundary(job):
    """The boundary module: compiled by the parent (in the job), else boundary.py from beside this file.

    The package itself is not importable here (no site-packages, and it needs third-party modules).
    """
    module = type(sys)("_assist_boundary")
    code = job.get("boundary_code")
    if code is None:
        from importlib.machinery import SourceFileLoader

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boundary.py")
        module.__file__ = path
        SourceFileLoader("_assist_boundary", path).exec_module(module)
    else:
        module.__file__ = code.co_filename
        exec(code, module.__dict__)
    return module


def read_paths():
    """What the candidate may read: the stdlib directories on sys.path and the system library dirs."""
    paths = [p for p in sys.path if os.path.isabs(p)]
    return paths + list(SYSTEM_READ_PATHS) + list(DEVICE_READ_PATHS)


def apply_boundary(job, layers):
    """Apply every layer the kernel offers and the job does not disable; record each in `layers`.

    Returns the plan for the child: (boundary module or None, Landlock ABI for its nested scope, seccomp?).
    """
    disabled = set(job["disable"])
    try:
        boundary = load_boundary(job)
    except Exception as exc:  # e.g. no ctypes on this build
        reason = f"boundary module unavailable: {describe(exc)[1]}"
        for name in ("no_new_privs", "dumpable", "caps", "landlock", "seccomp"):
            layers[name] = (False, reason)
        return None, 0, False
    if not boundary.LINUX:
        for name, (_, detail) in boundary.probe().items():
            layers[name] = (False, detail)
        return boundary, 0, False

    def attempt(name, action):
        # Apply one layer; its one-line description (or why it is off) goes into the report.
        return boundary.attempt_layer(layers, name, disabled, action, lambda exc: describe(exc)[1])

    def not_dumpable():
        boundary.set_dumpable(False)
        return "off: /proc/<pid> of the sandbox is root-only, ptrace needs CAP_SYS_PTRACE"

    nnp = attempt("no_new_privs", boundary.hold_no_new_privs)
    attempt("dumpable", not_dumpable)
    attempt("caps", boundary.drop_capabilities)
    abi = boundary.landlock_abi()
    landlock = False
    refusal = boundary.landlock_refusal("landlock" in disabled, abi, nnp)
    if refusal is not None:
        layers["landlock"] = (False, refusal)
    else:
        landlock = attempt(
            "landlock", lambda: boundary.apply_landlock(read_paths(), [os.getcwd()], list(DEVICE_PATHS), abi)
        )
    seccomp = False
    refusal = boundary.seccomp_refusal("seccomp" in disabled, nnp)
    if refusal is not None:
        layers["seccomp"] = (False, refusal)
    else:
        boundary.seccomp_program(os.getpid())  # build once here: a bug shows up as a runner error
        layers["seccomp"] = (True, f"{boundary.MACHINE} filter, installed in the candidate's process")
        seccomp = True
    return boundary, (abi if landlock else 0), seccomp


def memory_layer(job, seccomp):
    """What keeps the run inside its memory limit: (whether shared memory outside RLIMIT_AS is closed, detail)."""
    files = f"{open_files(job)} open files of {job['file_size_mb']} MB"
    if seccomp:
        where = "candidates and project test suites"
        return True, f"memfd_create denied by seccomp ({where}); RLIMIT_AS {job['memory_mb']} MB, {files}"
    return False, f"memfd_create open (no seccomp filter): RLIMIT_AS {job['memory_mb']} MB, {files}"


def describe(exc):
    """(type name, one-line message of at most ~300 characters) of an exception, never raising."""
    try:
        name = type(exc).__name__
        if not isinstance(name, str):
            name = "Exception"
    except BaseException:
        name = "Exception"
    try:
        message = str(exc)
        if not isinstance(message, str):
            message = ""
        message = " ".join(message.split())
    except BaseException:
        message = "<unprintable exception>"
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    return name, message


def judge(job, plan, report_fd):
    """Fork the child, wait for it (at most until the job's deadline) and turn its end into a result."""
    boundary, scope_abi, seccomp = plan
    tests = job["tests"]
    proof_r, proof_w = os.pipe()
    details_r, details_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        child(job, boundary, scope_abi, seccomp, (report_fd, proof_r, details_r), proof_w, details_w)
    os.close(proof_w)
    os.close(details_w)
    try:
        proof_size = PROOF_BYTES * (len(tests) + 1)
        proofs, details, wait_status, cpu_s = wait_child(pid, proof_r, details_r, proof_size, job["deadline"])
    finally:
        os.close(proof_r)
        os.close(details_r)
    result = {"status": "error", "passed": 0, "failed_index": None, "error_type": None, "error_message": None}
    if wait_status is None:
        result.update(status="timeout", error_type="Timeout")
        return result
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        limit = number in LIMIT_SIGNALS or (number == int(_signal.SIGKILL) and cpu_s >= job["cpu_s"])
        result.update(status="resource-limit" if limit else "error", error_type=f"signal {number}")
        result["signal"] = number
        return result
    code = os.WEXITSTATUS(wait_status)
    if code == EXIT_BOUNDARY:
        result.update(error_type="SandboxError", error_message="the child could not apply the sandbox boundary")
        return result
    record = find_record(details, proofs, len(tests))
    status = STATUS_BY_EXIT.get(code)
    if status is None or record is None or record[0] != status:
        # Exit 64 without the proof is a candidate that rebuilt _exit; anything else is an early exit.
        result.update(
            error_type="SandboxError",
            error_message=f"process exited with code {code} without the harness's verdict",
        )
        return result
    status, passed, failed_index, error_type, error_message = record
    result.update(status=status, passed=passed, failed_index=failed_index)
    result.update(error_type=error_type or None, error_message=error_message or None)
    return result


def wait_child(pid, proof_r, details_r, proof_size, deadline):
    """Read the proof and details pipes and reap the child; kill it at the deadline.

    Returns (proof bytes, details bytes, wait status or None on timeout, CPU seconds the child used).
    """
    caps = {proof_r: proof_size, details_r: DETAILS_LIMIT}
    buffers = {proof_r: bytearray(), details_r: bytearray()}
    try:
        pidfd = os.pidfd_open(pid)  # readable once the child exits (Linux 5.3+)
    except (AttributeError, OSError):
        pidfd = None
    poller = select.poll()
    for fd in buffers:
        poller.register(fd, select.POLLIN)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    open_fds = set(buffers)
    exited = None  # (wait status, cpu) once reaped
    delay = 0.001
    try:
        while exited is None or open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, _signal.SIGKILL)
                os.wait4(pid, 0)
                return bytes(buffers[proof_r]), bytes(buffers[details_r]), None, 0.0
            wait_ms = remaining if pidfd is not None else min(remaining, delay)
            delay = min(delay * 2, 0.05)
            for fd, _ in poller.poll(max(1, int(wait_ms * 1000))):
                if fd == pidfd:
                    poller.unregister(pidfd)
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                elif len(buffers[fd]) < caps[fd]:
                    buffers[fd] += chunk[: caps[fd] - len(buffers[fd])]
            if exited is None:
                reaped, status, usage = os.wait4(pid, os.WNOHANG)
                if reaped:
                    exited = (status, usage.ru_utime + usage.ru_stime)
                    if open_fds:
                        # Only the child held the write ends; whatever is left is already buffered.
                        drain(open_fds, buffers, caps)
                        open_fds.clear()
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return bytes(buffers[proof_r]), bytes(buffers[details_r]), exited[0], exited[1]


def drain(fds, buffers, caps):
    """Read what is left in pipes whose writers are gone, without blocking."""
    for fd in fds:
        os.set_blocking(fd, False)
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            if len(buffers[fd]) < caps[fd]:
                buffers[fd] += chunk[: caps[fd] - len(buffers[fd])]


def find_record(details, proofs, total):
    """The harness's record in the details bytes, if one carries the right proof; else None.

    Record: TAG proof-hex status passed index-or-"-" error-type-hex error-message-hex. Candidates can
    write to this pipe too; without the proof for the count they claim, their lines are ignored.
    """
    if len(proofs) != PROOF_BYTES * (total + 1):
        return None
    for line in details.split(b"\n"):
        start = line.find(RECORD_TAG)
        if start < 0:
            continue
        fields = line[start + len(RECORD_TAG) :].split(b" ")
        if len(fields) != 6:
            continue
        try:
            proof = bytes.fromhex(fields[0].decode("ascii"))
            status = fields[1].decode("ascii")
            passed = int(fields[2])
            index = None if fields[3] == b"-" else int(fields[3])
            error_type = bytes.fromhex(fields[4].decode("ascii")).decode("utf-8", "replace")
            error_message = bytes.fromhex(fields[5].decode("ascii")).decode("utf-8", "replace")
        except (ValueError, UnicodeDecodeError):
            continue
        if not 0 <= passed <= total or proof != proofs[PROOF_BYTES * passed : PROOF_BYTES * (passed + 1)]:
            continue
        if status not in EXIT_BY_STATUS or (status == "passed" and passed != total):
            continue
        if status == "failed" and index != passed:
            continue
        if index is not None and not 0 <= index < total:
            continue
        return status, passed, index, error_type[:100], error_message[:MESSAGE_LIMIT]
    return None


# --- the child ----------------------------------------------------------------------------------


def child(job, boundary, scope_abi, seccomp, runner_fds, proof_w, details_w):
    """The forked child: lock itself down, run the candidate in a thread, exit with the verdict."""
    _exit = os._exit
    try:
        for fd in runner_fds:
            os.close(fd)  # the runner's report pipe above all: nothing here may write the final report
        try:
            if scope_abi:
                boundary.restrict_scope(scope_abi)
            if seccomp:
                boundary.install_seccomp(os.getpid())
        except Exception:
            _exit(EXIT_BOUNDARY)
        hook = make_hook(os.path.realpath(os.getcwd())) if "hook" not in job["disable"] else None
        holder = []
        start, done = _thread.allocate_lock(), _thread.allocate_lock()
        start.acquire()
        done.acquire()
        body = make_body(job, proof_w, details_w, holder, start, done)
        prepare_interpreter()
        # SIGINT ignored: a candidate thread's interrupt_main() cannot disturb the wait below.
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
        _thread.start_new_thread(body, ())
        if not seccomp:
            # Without seccomp, RLIMIT_NPROC is the fork-bomb guard (for non-root users; it also stops
            # their threads, hence only now that the candidate's thread exists).
            try:  # noqa: SIM105 -- contextlib would cost the runner an import
                resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
            except (ValueError, OSError):
                pass
        if hook is not None:
            sys.addaudithook(hook)
        start.release()
        done.acquire()
        code = holder[0] if holder else EXIT_HARNESS
    except BaseException:
        code = EXIT_HARNESS
    _exit(code)


def prepare_interpreter():
    """Take away what the audit hook cannot see, and what the candidate must not reach."""
    import _posixsubprocess
    import posix

    # These create files (device nodes, FIFOs) or change the root without raising any audit event in
    # CPython 3.11; _exit would let the candidate end the run with a status of its choice.
    for name in ("mknod", "mkfifo", "chroot", "_exit"):
        for module in (os, posix):
            if hasattr(module, name):
                delattr(module, name)
    # subprocess calls this directly; the "subprocess.Popen" event stops normal use first. Defined in a
    # namespace of its own so that its __globals__ lead nowhere.
    namespace = {}
    exec(
        "def fork_exec(*args, **kwargs):\n    raise PermissionError('sandbox: process creation is not allowed')\n",
        namespace,
    )
    _posixsubprocess.fork_exec = namespace["fork_exec"]
    # Modules the runner loaded that the candidate must import afresh (and so meet the hook): the runner
    # itself, ctypes (the boundary module's), gc.
    for name in list(sys.modules):
        if name in ("__main__", "_assist_boundary", "gc", "_ctypes", "ctypes") or name.startswith("ctypes."):
            del sys.modules[name]
    sys.dont_write_bytecode = True
    sys.setrecursionlimit(1000)


def make_body(job, proof_w, details_w, holder, start, done):
    """The function the candidate's thread runs: setup, code, tests; then the record and the exit code."""
    setup, code, tests = job["setup"], job["code"], list(job["tests"])
    stdout, stderr = sys.stdout, sys.stderr

    def body():
        # Everything used after the candidate starts is bound here first: it may replace builtins
        # (exec, compile, ...) and module attributes (os.write, ...), never these locals.
        exec_, compile_, write, close, urandom = exec, compile, os.write, os.close, os.urandom
        base_exception, describe_, is_limit, range_, memoryview_ = (
            BaseException,
            describe,
            is_resource_limit,
            range,
            memoryview,
        )
        total = len(tests)
        exit_code = EXIT_HARNESS
        start.acquire()  # the main thread has finished locking the process down
        try:
            proofs = urandom(PROOF_BYTES * (total + 1))
            view = memoryview(proofs)
            while view:
                view = view[write(proof_w, view) :]
            close(proof_w)
            status, passed, index, error_type, error_message = "passed", 0, None, "", ""
            # A real module, so pickling, dataclasses and typing can find the candidate's classes. Not
            # "__main__" by name: candidates' demo blocks (often calling input()) should not run.
            module = type(sys)("__sandbox__")
            sys.modules["__sandbox__"] = sys.modules["__main__"] = module
            namespace = module.__dict__
            try:
                exec_(compile_(setup, "<setup>", "exec", dont_inherit=True, optimize=0), namespace)
                exec_(compile_(code, "<candidate>", "exec", dont_inherit=True, optimize=0), namespace)
            except base_exception as exc:
                status = "resource-limit" if is_limit(exc) else "error"
                error_type, error_message = describe_(exc)
            else:
                for number in range_(total):
                    try:
                        chunk = compile_(tests[number], f"<test {number}>", "exec", dont_inherit=True, optimize=0)
                        exec_(chunk, namespace)
                    except base_exception as exc:
                        status = "resource-limit" if is_limit(exc) else "failed"
                        index = number
                        error_type, error_message = describe_(exc)
                        break
                    passed += 1
            for stream in (stdout, stderr):
                try:  # noqa: SIM105
                    stream.flush()
                except base_exception:
                    pass
            record = b"%s%s %s %d %s %s %s\n" % (
                RECORD_TAG,
                proofs[PROOF_BYTES * passed : PROOF_BYTES * (passed + 1)].hex().encode(),
                status.encode(),
                passed,
                b"-" if index is None else b"%d" % index,
                error_type.encode("utf-8", "replace").hex().encode(),
                error_message.encode("utf-8", "replace").hex().encode(),
            )
            view = memoryview_(record)
            while view:
                view = view[write(details_w, view) :]
            exit_code = EXIT_BY_STATUS[status]
        except base_exception:
            exit_code = EXIT_HARNESS
        holder.append(exit_code)
        done.release()

    return body


def is_resource_limit(exc):
    """MemoryError: RLIMIT_AS; EFBIG ("File too large"): RLIMIT_FSIZE, as Python ignores SIGXFSZ; EMFILE ("Too many
    open files"): RLIMIT_NOFILE."""
    return isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.EMFILE))


class IntrospectionDenied(PermissionError, ValueError):
    """Raised by the hook for frame and object introspection.

    A ValueError too: typing, enum, collections.namedtuple and logging catch ValueError where
    sys._getframe is unavailable, so they keep working without it. Shown as a PermissionError.
    """


IntrospectionDenied.__name__ = IntrospectionDenied.__qualname__ = "PermissionError"


# Audit events the hook refuses whatever their arguments.
ALWAYS_DENIED_EVENTS = frozenset({
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
    # a sub-interpreter has no audit hook
    "cpython.PyInterpreterState_New",
})  # fmt: skip
# Ways to reach the harness's frames or objects (and from there its locals). Not "code.__new__" or
# setting __code__: types.coroutine (asyncio) does both, so crafted code objects stay possible.
INTROSPECTION_EVENTS = frozenset({
    "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})  # fmt: skip
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# Fresh imports of these would hand back what prepare_interpreter() took away, open files from C
# without an "open" event, or run code outside the hook (sub-interpreters, test helpers).
DENIED_IMPORTS = frozenset({
    "_ctypes", "ctypes", "_posixsubprocess", "posix", "_gdbm", "_dbm", "readline", "gc",
    "_xxsubinterpreters", "_xxinterpchannels", "_assist_boundary",
})  # fmt: skip
# event -> ((index of a path argument, index of its dir_fd argument or None), ...)
PATH_EVENTS = {
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
    # Landlock does not rule these (nor stat, which raises no audit event): they would list what is outside.
    "os.listxattr": ((0, None),),
    "os.getxattr": ((0, None),),
    "os.chflags": ((0, None),),
    "shutil.rmtree": ((0, 1),),
    "shutil.move": ((0, None), (1, None)),
    "shutil.copyfile": ((1, None),),
    "shutil.copytree": ((1, None),),
}

# Every make_* below binds what its functions call to locals when it runs, before the candidate does: the
# candidate may replace module attributes (os.path.realpath, ...), never these closures' cells.


def make_denials():
    """(deny, deny_introspection): each raises the hook's PermissionError for "sandbox: <what> is not allowed"."""
    denied_introspection = IntrospectionDenied

    def deny(what):
        raise PermissionError("sandbox: " + what + " is not allowed")

    def deny_introspection(what):
        raise denied_introspection("sandbox: " + what + " is not allowed")

    return deny, deny_introspection


def make_inside(root):
    """inside(path, dir_fd=None): whether a path (a descriptor, or relative to `dir_fd`) resolves to the sandbox
    directory `root`, below it, or to /dev/null. Symlinks are followed, so a link inside pointing out is out."""
    realpath, isabs, join = os.path.realpath, os.path.isabs, os.path.join
    fspath, fsdecode, readlink = os.fspath, os.fsdecode, os.readlink
    inside_prefix = root + os.sep

    def fd_target(fd):
        # Where an open descriptor points; None for pipes, sockets and the like.
        try:
            target = readlink(f"/proc/self/fd/{fd}")
        except (OSError, ValueError):
            return None
        return target if isabs(target) else None

    def resolve(path, dir_fd=None):
        if isinstance(path, int):
            return fd_target(path)
        path = "." if path is None else fsdecode(fspath(path))  # None: os.listxattr()'s working directory
        if not isabs(path) and isinstance(dir_fd, int) and dir_fd >= 0:
            base = fd_target(dir_fd)
            if base is None:
                return None
            path = join(base, path)
        # realpath follows symlinks, so a link inside pointing outside counts as outside.
        return realpath(path)

    def inside(path, dir_fd=None):
        path = resolve(path, dir_fd)
        return path is not None and (path == root or path.startswith(inside_prefix) or path == "/dev/null")

    return inside


def make_open_check(inside, deny):
    """check_open(args): the hook's ruling on an "open" event: nothing under /proc, and writes only inside."""
    realpath, isabs, fspath, fsdecode = os.path.realpath, os.path.isabs, os.fspath, os.fsdecode
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def check_open(args):
        path, mode, flags = args
        if isinstance(path, int):
            return
        resolved = realpath(fsdecode(fspath(path)))
        if resolved == "/proc" or resolved.startswith("/proc/"):
            deny(f"opening {path!r} (other processes' memory and environment live there)")
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & write_flags
        )
        if not writing:
            return
        # os.open() (mode is None) may carry a dir_fd that the event does not show, so a
        # relative path there cannot be checked.
        if mode is None and not isabs(fsdecode(fspath(path))):
            deny("os.open() for writing with a relative path")
        if not inside(path):
            deny(f"writing {path!r} outside the sandbox directory")

    return check_open


def make_hook(root):
    """The PEP 578 audit hook: defence in depth above the kernel's layers, and the only layer for some."""
    getpid = os.getpid
    unix_family = 1  # socket.AF_UNIX on every POSIX system; importing socket here costs time
    deny, deny_introspection = make_denials()
    inside = make_inside(root)
    check_open = make_open_check(inside, deny)
    always_denied, introspection, frame_attributes = ALWAYS_DENIED_EVENTS, INTROSPECTION_EVENTS, FRAME_ATTRIBUTES
    denied_imports, path_events = DENIED_IMPORTS, dict(PATH_EVENTS)

    def hook(event, args):
        if event in always_denied:
            deny(event)
        elif event in introspection:
            deny_introspection(event)
        elif event == "object.__getattr__":
            if args[1] in frame_attributes:
                deny_introspection("reading " + str(args[1]))
        elif event == "open":
            check_open(args)
        elif event in path_events:
            for path_index, fd_index in path_events[event]:
                dir_fd = args[fd_index] if fd_index is not None else None
                if not inside(args[path_index], dir_fd):
                    deny(f"{event} on {args[path_index]!r} outside the sandbox directory")
        elif event == "socket.__new__":
            # Unconnected AF_UNIX pairs are local plumbing (asyncio's self-pipe); every way to
            # reach anything else (connect, bind, sendto, sendmsg) is denied above.
            if args[1] != unix_family:
                deny("creating a network socket")
        elif event == "os.kill":
            if args[0] != getpid():
                deny("signalling another process")
        elif event == "import":
            name = args[0]
            if name in denied_imports or name.startswith(("_test", "_xx")):
                deny("importing " + name)
        elif event == "sqlite3.connect":
            database = args[0]
            if database not in (":memory:", "", b":memory:", b"") and not inside(database):
                deny("sqlite3 database outside the sandbox directory")

    return hook


# --- entry point --------------------------------------------------------------------------------


def main(payload_path):
    """Read the job, apply the boundary, judge the candidate, write the report, exit."""
    with open(payload_path, "rb") as f:
        job = marshal.load(f)
        if not isinstance(job, dict):  # started by sandbox.py's bootstrap: this module's code came first
            job = marshal.load(f)
    os.remove(payload_path)
    report_fd = job["report_fd"]
    layers = {}
    try:
        set_limits(job)
        plan = apply_boundary(job, layers)
        if "hook" in job["disable"]:
            layers["hook"] = (False, "disabled by ASSIST_SANDBOX_DISABLE")
        else:
            layers["hook"] = (True, "PEP 578 audit hook in the candidate's process")
        layers["memory"] = memory_layer(job, plan[2])
        result = judge(job, plan, report_fd)
    except BaseException as exc:  # a runner bug must read as an error, never as a pass
        error_type, message = describe(exc)
        result = {"status": "error", "passed": 0, "failed_index": None, "error_type": "SandboxError"}
        result["error_message"] = f"sandbox runner failed: {error_type}: {message}"
    result["layers"] = layers
    data = ascii(result).encode("ascii")
    try:
        while data:
            data = data[os.write(report_fd, data) :]
    except OSError:
        pass
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
