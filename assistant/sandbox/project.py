"""Run a real project's pytest suite, with generated code written into a copy of it, inside the sandbox boundary.

:func:`run_pytest` copies the project into a fresh temporary directory (``<run>/project``; ``.git``,
caches, ``*.pyc`` and virtual environments such as ``.venv`` are left out), writes the given files over the copy, and
starts the project's own interpreter, isolated (``-I -S -B``: no PYTHON* variables, no site, so nothing of the
project or its venv runs before the boundary; no .pyc written), on :mod:`assistant.sandbox.project_launcher` in the
copy, in its own session, with stdin closed and an environment built from scratch (PATH, LANG, HOME and TMPDIR
inside the run dir, PYTHONPATH, PYTHONHASHSEED=0, no bytecode writes; nothing from our environment: no keys, tokens or
proxies). The launcher puts the boundary around itself and then execs ``python -m pytest -q -p
no:cacheprovider -p assist_pytest_plugin ...``, so pytest and everything it starts hold:

* where the kernel allows (root, or a user namespace), network, IPC and PID namespaces of the run's own: no
  network interface is up (no UDP or TCP to anywhere, loopback included; no abstract unix socket outside), no
  System V shared memory, semaphore or queue of any other process, and when pytest ends the kernel kills every
  process the run left (one that called ``setsid()`` included); then a mount namespace and a root of its own
  that holds only what Landlock grants below, read-only but the run's folder, so no other file is even there:
  no socket file of the host (a docker, tmux or D-Bus socket), which neither Landlock nor a network namespace
  rules (``ProjectRun.layers["root"]``);

* Landlock: read and execute on the interpreter (prefixes, venv, its ``sys.path``) and the system library
  dirs; every right on the run's directory and /dev/null; nothing else (not /proc, $HOME, /root or the
  pristine project, even when the venv's .pth names it, as an editable install's does, or names a folder
  holding it, as a monorepo's root: packages installed that way import from the copy only; a project under
  /usr stays readable through the system grant); no TCP bind or connect
  (ABI 4+); signals and abstract unix sockets scoped to the run (ABI 6+). Landlock also keeps the run from
  ptracing anything outside it;
* ``PR_SET_NO_NEW_PRIVS`` and every capability dropped (we may run as root); not ``PR_SET_DUMPABLE``, which
  the exec of pytest would undo (Landlock keeps the run away from our /proc and from ptrace instead);
* a seccomp filter with one purpose, kept across fork and exec: memfd_create and memfd_secret fail (ENOSYS),
  whose pages are shared memory that RLIMIT_AS does not count;
* rlimits: address space, CPU time, file size, 1,024 open files, no core dumps, and for non-root users a cap on
  processes; and a watch from outside on what the run writes in all (:mod:`assistant.sandbox.disk`: megabytes,
  files and folder depth added to its directory, checked a few times a second and once after the run, so a
  fast writer can pass the cap by what it writes between two looks);
* in pytest's process, the plugin's PEP 578 audit hook: no TCP/UDP connect, bind or sendto, no AF_UNIX
  connection to a socket file outside the run;
* a wall-clock timeout that kills the whole process group; output read in chunks and capped; the run's
  directory removed afterwards, always.

What a test run (the generated code, which runs inside pytest's process) can still do, said plainly:

* forge its own verdict: it shares the process with pytest and the plugin, so it can patch pytest, write
  the results file or exit early with status 0. The boundary guards the machine, not the verdict; a
  benchmark should treat ``passed`` as "the suite reported passing", not as proof;
* fork and exec anything readable (the seccomp filter here denies memfd only: test suites need subprocesses).
  What it starts keeps the Landlock, no_new_privs, seccomp and rlimit layers, not the audit hook;
* where namespaces are not available (``ProjectRun.layers["namespaces"]`` says why): send UDP from a
  subprocess or through ctypes (Landlock only rules TCP), use System V IPC, and start a child that calls
  ``setsid()``, leaves the process group and outlives the timeout until its CPU limit or its own end;
* where the run's own root did not hold (``ProjectRun.layers["root"]``: no namespaces, or the kernel refused
  the mounts): connect to a unix socket file it can reach by path (e.g. a docker socket: the hook stops this
  only in pytest's process);
* read other source trees the venv's .pth files name (editable installs of other projects), and use the CPU,
  memory, time and disk its limits allow: the memory limit is per process (there is no memory cgroup), so a
  suite that forks many processes can use that many times it;
* where the run's own root did not hold: learn whether a path outside exists, and its size, mode and times
  (``os.stat``: Landlock does not rule looking paths up), though not its content.

Without Landlock (old kernels, other OSes) the run still happens, :attr:`ProjectRun.layers` says so, and
this process makes itself non-dumpable so that the run cannot read /proc/<our pid>/environ.
``ASSIST_SANDBOX_DISABLE`` turns named layers off, with a warning, as for :func:`assistant.sandbox.run`.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from assistant.errors import UsageError
from assistant.paths import read_json_object
from assistant.sandbox import (
    _CANCEL_POLL_S,
    LAYERS,
    PROJECT_LAYERS,
    RunCancelled,
    _check_limits,
    _guard_parent_environment,
    _kill_group,
    _read_capped,
    _remove_tree,
    _start_reporting,
    disabled_layers,
)
from assistant.sandbox.disk import DiskWatch

LAUNCHER_PATH = Path(__file__).with_name("project_launcher.py")
PLUGIN_PATH = Path(__file__).with_name("pytest_plugin.py")
PLUGIN_MODULE = "assist_pytest_plugin"
STATUSES = ("passed", "failed", "error", "timeout", "resource-limit")
OUTCOMES = ("passed", "failed", "skipped", "error")
# Not copied: VCS data, caches, and virtual environments (a repo's own .venv can be hundreds of MB; the run
# reads its interpreter where it is, not from the copy). A venv is known by its pyvenv.cfg, whatever its name.
_SKIPPED_NAMES = frozenset(
    {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox", "node_modules", ".assist"}
)


def _ignored(folder: str, names: list[str]) -> set[str]:
    """What `copytree` leaves out of the copy (see _SKIPPED_NAMES)."""
    return {
        name
        for name in names
        if name in _SKIPPED_NAMES or name.endswith(".pyc") or os.path.isfile(os.path.join(folder, name, "pyvenv.cfg"))
    }


_REPORT_LIMIT = 64_000  # bytes accepted from the launcher's layer report
_DRAIN_AFTER_EXIT_S = 1.0  # how long to read output left in the pipe by stray children after pytest exits
MAX_RESULTS_BYTES = 512 * 2**20  # the results file, call maps included; a whole suite's are a few MB
_LIMIT_SIGNALS = (int(signal.SIGXCPU), int(signal.SIGXFSZ))


@dataclass(frozen=True)
class ProjectLimits:
    """Resource limits for one run of a project's test suite."""

    timeout_s: float = 60.0  # wall clock, from the start of the interpreter
    cpu_s: int = 60  # RLIMIT_CPU of pytest (and of each process it starts)
    memory_mb: int = 2048  # RLIMIT_AS
    file_size_mb: int = 64  # RLIMIT_FSIZE
    output_limit: int = 200_000  # bytes of pytest output kept
    disk_mb: int = 1024  # what the run may add to its directory in all (the copy made before it starts is free)
    max_files: int = 100_000  # files and directories it may add there

    def __post_init__(self) -> None:
        positive = (self.timeout_s, self.cpu_s, self.memory_mb)
        _check_limits("project sandbox", positive, (self.output_limit, self.file_size_mb, self.disk_mb, self.max_files))


@dataclass(frozen=True)
class Mark:
    """An audit event that code planted in a run fires (``sys.audit(event)``) to say it ran: the run records the
    tests during which it fired (:attr:`ProjectRun.marked`) and ends once `stop_after` of them failed (0: never),
    as ``--maxfail`` would, counting only those."""

    event: str
    stop_after: int = 0


@dataclass(frozen=True)
class ProjectRun:
    """What happened when a project's tests ran in the sandbox."""

    status: str  # one of STATUSES
    outcomes: dict[str, str]  # nodeid -> one of OUTCOMES
    calls: dict[str, list[tuple[str, int]]]  # nodeid -> (path relative to the project, first line); trace=True
    returncode: int | None  # pytest's exit status (negative: killed by that signal); None on timeout
    duration_s: float
    output: str  # pytest's stdout and stderr, at most ProjectLimits.output_limit bytes before decoding
    layers: dict[str, tuple[bool, str]] = field(default_factory=dict)  # layer -> (held, one-line detail)
    marked: frozenset[str] = frozenset()  # the tests during which the `mark` audit event fired; mark= only

    @property
    def ok(self) -> bool:
        """True when pytest exited cleanly and every asked test passed."""
        return self.status == "passed"

    def passed(self) -> list[str]:
        """Node ids of the tests that passed, in the order pytest reported them."""
        return [node for node, outcome in self.outcomes.items() if outcome == "passed"]

    def failed(self) -> list[str]:
        """Node ids of the tests that failed or errored (in setup or teardown)."""
        return [node for node, outcome in self.outcomes.items() if outcome in ("failed", "error")]


def run_pytest(
    project: Path,
    python: Path,
    node_ids: Sequence[str] = (),
    *,
    files: Mapping[str, str] | None = None,
    pythonpath: Sequence[str] = (),
    limits: ProjectLimits = ProjectLimits(),
    trace: bool = False,
    mark: Mark | None = None,
    stop_first: bool = False,
    extra_args: Sequence[str] = (),
    include: Sequence[str] | None = None,
    cancel: threading.Event | None = None,
) -> ProjectRun:
    """Run the project's pytest (``node_ids``, or its whole suite) on a sandboxed copy with ``files`` written over it.

    ``project`` is never modified. ``include`` limits the copy to these files (paths relative to the project,
    e.g. what git tracks, so that untracked secrets stay out); default: the whole tree less caches, VCS data and
    virtual environments. ``files`` maps paths relative to the project to new text; each must stay
    inside the copy and name an existing file or a new file in an existing directory (else UsageError).
    ``pythonpath`` lists dirs of the copy to put first on PYTHONPATH (e.g. "src"). ``trace`` records, per
    test, the project's functions it ran (:attr:`ProjectRun.calls`); ``mark``, the tests during which code ran
    ``sys.audit(mark.event)`` (:attr:`ProjectRun.marked`: a mark planted in ``files`` costs the run nothing else,
    where a trace slows every call), and ends the run after ``mark.stop_after`` of them failed. ``stop_first``
    passes ``-x``. Setting ``cancel`` (from another thread) ends the run at once: its process group is killed and
    RunCancelled raised, so a caller's Ctrl-C need not wait out runs that started in its worker threads.

    The status is "passed" when pytest exited 0, no test failed or errored, at least one passed and every
    asked node id has a result; "failed" when pytest ran the tests and some failed (or none passed);
    "error" for a collection, usage or internal error, or when the run left no results; "timeout" when
    ``limits.timeout_s`` ran out; "resource-limit" when pytest was killed for CPU time or file size, or stopped for
    what it wrote in all (``limits.disk_mb``, ``limits.max_files``; the output's last line says which).
    """
    project = Path(project)
    python = Path(os.path.abspath(python))  # absolute (the run's cwd differs), but not resolved: venvs are symlinks
    if not project.is_dir():
        raise UsageError(f"project directory {project} does not exist")
    if not python.exists():
        raise UsageError(f"interpreter {python} does not exist")
    files = dict(files or {})
    for relative in [*files, *pythonpath]:
        _check_relative(relative)
    disabled = disabled_layers()
    _guard_parent_environment(disabled)
    # Resolved: pytest names tests from the real path, and a temp dir reached through a symlink (macOS's
    # /var/folders, a TMPDIR under a linked home) would leave every asked node id unmatched.
    run_dir = Path(os.path.realpath(tempfile.mkdtemp(prefix="assist-pytest-")))
    try:
        copy = run_dir / "project"
        if include is None:
            shutil.copytree(project, copy, symlinks=True, ignore=_ignored)
        else:
            _copy_listed(project, copy, include)
        _write_files(copy, files)
        if cancel is not None and cancel.is_set():
            raise RunCancelled("the run was cancelled")
        return _run_in(
            run_dir,
            copy,
            python,
            node_ids,
            pythonpath,
            limits,
            trace,
            stop_first,
            extra_args,
            disabled,
            cancel,
            protect=project.resolve(),
            mark=mark,
        )
    finally:
        _remove_tree(str(run_dir))


def _copy_listed(project: Path, copy: Path, include: Sequence[str]) -> None:
    """Copy only the listed files (symlinks as links); a listed path that is missing or escapes is skipped."""
    copy.mkdir()
    for relative in include:
        path = PurePosixPath(relative)
        if not relative or path.is_absolute() or ".." in path.parts:
            continue
        source = project / relative
        if not (source.is_symlink() or source.is_file()):
            continue  # deleted since it was listed, or a submodule's folder
        target = copy / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)


def _check_relative(relative: str) -> None:
    """A path in ``files`` or ``pythonpath`` must be relative and stay inside the project."""
    path = PurePosixPath(relative)
    if not relative or path.is_absolute() or Path(relative).is_absolute() or ".." in path.parts:
        raise UsageError(f"path {relative!r} must be relative and inside the project")


def _write_files(copy: Path, files: Mapping[str, str]) -> None:
    """Write each file over the copy, checking that it resolves inside the copy (symlinks included)."""
    root = copy.resolve()
    for relative, text in files.items():
        target = copy / relative
        resolved = target.resolve()
        if not resolved.is_relative_to(root):
            raise UsageError(f"path {relative!r} leads outside the project")
        if resolved.exists() and not resolved.is_file():
            raise UsageError(f"path {relative!r} is not a file in the project")
        if not resolved.exists() and not resolved.parent.is_dir():
            raise UsageError(f"path {relative!r}: directory {Path(relative).parent} does not exist in the project")
        resolved.write_text(text, encoding="utf-8")


def _child_env(run_dir: Path, copy: Path, python: Path, pythonpath: Sequence[str], plugin_dir: Path) -> dict[str, str]:
    """The environment of the run, built from scratch so that no secret of ours reaches it."""
    paths = [str(copy / p) for p in pythonpath] + [str(plugin_dir)]
    return {
        "PATH": f"{python.parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(run_dir / "home"),
        "TMPDIR": str(run_dir / "tmp"),
        "USER": "sandbox",  # getpass.getuser() (pytest's tmp_path) would otherwise read /etc/passwd
        "LOGNAME": "sandbox",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join(paths),
    }


def _run_in(
    run_dir: Path,
    copy: Path,
    python: Path,
    node_ids: Sequence[str],
    pythonpath: Sequence[str],
    limits: ProjectLimits,
    trace: bool,
    stop_first: bool,
    extra_args: Sequence[str],
    disabled: frozenset[str],
    cancel: threading.Event | None,
    protect: Path | None = None,
    mark: Mark | None = None,
) -> ProjectRun:
    """Start the launcher in the copy, collect output and results, and build the run's account. `protect` (the
    original project) is never made readable to the run, even where the interpreter's venv names it; `trace` and
    `mark` as run_pytest takes them."""
    env, results_path = _prepare_run_dir(run_dir, copy, python, pythonpath, trace, disabled, mark)
    # --rootdir: the copy, as it would be in the project, even when the empty configuration above is the one found.
    argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN_MODULE, f"--rootdir={copy}"]
    if stop_first:
        argv.append("-x")
    argv += [*node_ids, *extra_args]
    report_r, report_w = os.pipe()
    job_path = run_dir / "job.json"
    job = {
        "report_fd": report_w,
        "argv": argv,
        "memory_mb": limits.memory_mb,
        "cpu_s": limits.cpu_s,
        "file_size_mb": limits.file_size_mb,
        "write_paths": [str(run_dir)],
        "root_mount": str(run_dir / "root"),  # where the launcher builds the run's own root (namespaces only)
        "protect": [str(protect)] if protect else [],
        "disable": sorted(disabled),
    }
    job_path.write_text(json.dumps(job), encoding="utf-8")

    watch = DiskWatch(str(run_dir), limits.disk_mb, limits.max_files)
    started = time.monotonic()
    # -I -S: nothing of the project runs before the boundary is up (no PYTHON* variables, no site, so
    # no sitecustomize or .pth of the interpreter's venv, no script folder or cwd on sys.path); pytest,
    # exec'd by the launcher inside the boundary, gets the environment and site back. -B: -I ignores
    # PYTHONDONTWRITEBYTECODE, and the launcher's import of boundary.py wrote a .pyc beside it on every run.
    launcher = [str(python), "-I", "-S", "-B", str(LAUNCHER_PATH), str(job_path)]
    proc = _start_reporting(launcher, report_r, report_w, cwd=copy, env=env, stderr=subprocess.STDOUT)
    deadline = started + limits.timeout_s
    try:
        output, report, timed_out, stopped = _collect(proc, report_r, deadline, limits.output_limit, cancel, watch)
    finally:
        _kill_group(proc.pid)
        wait_status, cpu_s = _reap(proc)
        if proc.stdout is not None:
            proc.stdout.close()
        os.close(report_r)
    duration = time.monotonic() - started
    if stopped is None and not timed_out:
        stopped = watch.final()  # what a run too quick for the watch's looks left (e.g. folders nested too deep)
    results = None if timed_out or stopped else _read_results(results_path)
    outcomes = _outcomes(results)
    status = _status(timed_out, wait_status, cpu_s, limits, results, outcomes, node_ids)
    text = output.decode("utf-8", errors="replace")
    return ProjectRun(
        status=status if stopped is None else "resource-limit",
        outcomes=outcomes,
        calls=_calls(results) if trace else {},
        returncode=None if timed_out else os.waitstatus_to_exitcode(wait_status),
        duration_s=duration,
        output=text if stopped is None else f"{text}\nassist stopped the run: {stopped}\n",
        layers=_layers(report, disabled, results),
        marked=_marked(results) if mark else frozenset(),
    )


def _prepare_run_dir(
    run_dir: Path,
    copy: Path,
    python: Path,
    pythonpath: Sequence[str],
    trace: bool,
    disabled: frozenset[str],
    mark: Mark | None = None,
) -> tuple[dict[str, str], Path]:
    """Make the run's folders, its empty pytest.ini and the plugin beside the copy: (the run's environment, where
    the plugin writes its results)."""
    for name in ("home", "tmp", "plugin", "root"):
        (run_dir / name).mkdir()
    # pytest looks for its configuration upwards from the tests: a project without one of its own would pick up
    # whatever pytest.ini lies above the temporary copy (another user's /tmp/pytest.ini could deselect or
    # rewrite the tests and forge the verdict). An empty one beside the copy ends the search here.
    (run_dir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    plugin_dir = run_dir / "plugin"
    shutil.copyfile(PLUGIN_PATH, plugin_dir / f"{PLUGIN_MODULE}.py")
    results_path = run_dir / "results.json"
    env = _child_env(run_dir, copy, python, pythonpath, plugin_dir)
    env.update(
        {
            "ASSIST_PYTEST_RESULTS": str(results_path),
            "ASSIST_PYTEST_ROOT": str(copy),
            "ASSIST_PYTEST_RUN_DIR": str(run_dir),
            "ASSIST_PYTEST_TRACE": "1" if trace else "0",
            "ASSIST_PYTEST_MARK": "" if mark is None else mark.event,
            "ASSIST_PYTEST_MARK_STOP": "0" if mark is None else str(mark.stop_after),
            "ASSIST_PYTEST_HOOK": "0" if "hook" in disabled else "1",
        }
    )
    return env, results_path


def _collect(
    proc: subprocess.Popen[bytes],
    report_r: int,
    deadline: float,
    output_limit: int,
    cancel: threading.Event | None = None,
    watch: DiskWatch | None = None,
) -> tuple[bytes, bytes, bool, str | None]:
    """Read the output and the launcher's report until pytest exits and the pipes close, the deadline, or
    ``watch`` finding the run past its disk caps. Raises RunCancelled within a tenth of a second of ``cancel``
    being set (the caller kills the group, as it does when the watch stops the run).

    Reads in chunks and drops what is past each cap, so the run never blocks on a full pipe. Once pytest
    has exited, output left by stray children is read for at most a second. Returns (output, report,
    timed_out, why the watch stopped the run or None).
    """
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    caps = {out_fd: output_limit, report_r: _REPORT_LIMIT}
    buffers = {fd: bytearray() for fd in caps}
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in caps:
            selector.register(fd, selectors.EVENT_READ)
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ)
        try:
            while True:
                pipes_open = any(key.fd in caps for key in selector.get_map().values())
                if exited_at is None and _exited(proc.pid):
                    exited_at = time.monotonic()
                    if pidfd is not None:
                        selector.unregister(pidfd)
                    _kill_group(proc.pid)  # stray children may hold the pipe: end them now that pytest is done
                if exited_at is not None and (not pipes_open or time.monotonic() - exited_at > _DRAIN_AFTER_EXIT_S):
                    return bytes(buffers[out_fd]), bytes(buffers[report_r]), False, None
                if cancel is not None and cancel.is_set():
                    raise RunCancelled("the run was cancelled")
                stopped = watch.check() if watch is not None and exited_at is None else None
                if stopped is not None:
                    return bytes(buffers[out_fd]), bytes(buffers[report_r]), False, stopped
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return bytes(buffers[out_fd]), bytes(buffers[report_r]), True, None
                wait = remaining if pidfd is not None and exited_at is None else min(remaining, 0.05)
                if cancel is not None:
                    wait = min(wait, _CANCEL_POLL_S)
                if watch is not None:
                    wait = min(wait, max(watch.wait(), 0.01))
                if not pipes_open and exited_at is None and pidfd is None:
                    time.sleep(wait)
                    continue
                for key, _ in selector.select(wait):
                    if key.fd != pidfd:  # pidfd: handled by _exited() above on the next turn
                        _read_capped(selector, key.fd, buffers, caps)
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (so its pid, the group id, stays ours)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _reap(proc: subprocess.Popen[bytes]) -> tuple[int, float]:
    """Reap pytest: (wait status, CPU seconds it and its waited-for children used)."""
    _, wait_status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    return wait_status, usage.ru_utime + usage.ru_stime


def _layers(report: bytes, disabled: frozenset[str], results: dict[str, object] | None) -> dict[str, tuple[bool, str]]:
    """The layers the launcher reported, in LAYERS order, then PROJECT_LAYERS; the hook's entry is what the plugin
    wrote in its `results`, where it did."""
    layers = _reported_layers(report, disabled)
    hook = results.get("hook") if results is not None else None
    if isinstance(hook, list) and len(hook) == 2:
        layers["hook"] = (bool(hook[0]), str(hook[1]))
    return layers


def _reported_layers(report: bytes, disabled: frozenset[str]) -> dict[str, tuple[bool, str]]:
    """The layers the launcher reported, in LAYERS order, then PROJECT_LAYERS (the hook's: the plugin did not
    report)."""
    try:
        raw = json.loads(report.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raw = None
    if not isinstance(raw, dict):
        return {name: (False, "the launcher did not report its layers") for name in LAYERS}
    layers: dict[str, tuple[bool, str]] = {}
    for name in LAYERS:
        value = raw.get(name)
        if isinstance(value, list) and len(value) == 2:
            layers[name] = (bool(value[0]), str(value[1]))
        elif name == "hook":
            reason = "disabled by ASSIST_SANDBOX_DISABLE" if "hook" in disabled else "the plugin did not report"
            layers[name] = (False, reason)
        else:
            layers[name] = (False, "not reported")
    for name in PROJECT_LAYERS:
        value = raw.get(name)
        if isinstance(value, list) and len(value) == 2:
            layers[name] = (bool(value[0]), str(value[1]))
    if "launcher" in raw:
        layers["launcher"] = (False, str(raw["launcher"]))
    return layers


def _read_results(path: Path) -> dict[str, object] | None:
    """The plugin's results, or None when missing, malformed, larger than MAX_RESULTS_BYTES, or not a regular
    file: the run folder is writable from inside, so the tests may have swapped the file for a link to
    `/dev/zero` (read forever) or a FIFO (open blocks forever)."""
    return read_json_object(path, MAX_RESULTS_BYTES)


def _outcomes(results: dict[str, object] | None) -> dict[str, str]:
    raw = results.get("outcomes") if results is not None else None
    if not isinstance(raw, dict):
        return {}
    return {str(node): outcome for node, outcome in raw.items() if outcome in OUTCOMES}


def _marked(results: dict[str, object] | None) -> frozenset[str]:
    raw = results.get("marked") if results is not None else None
    return frozenset(str(node) for node in raw) if isinstance(raw, list) else frozenset()


def _calls(results: dict[str, object] | None) -> dict[str, list[tuple[str, int]]]:
    raw = results.get("calls") if results is not None else None
    if not isinstance(raw, dict):
        return {}
    calls: dict[str, list[tuple[str, int]]] = {}
    for node, found in raw.items():
        if not isinstance(found, list):
            continue
        calls[str(node)] = [
            (pair[0], pair[1])
            for pair in found
            if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], int)
        ]
    return calls


def _matches(node: str, asked: str) -> bool:
    """Whether a collected node id falls under an asked one (a file, dir, class, test or parametrization)."""
    asked = asked.rstrip("/")
    return node == asked or node.startswith((asked + "::", asked + "[", asked + "/"))


def _status(
    timed_out: bool,
    wait_status: int,
    cpu_s: float,
    limits: ProjectLimits,
    results: dict[str, object] | None,
    outcomes: dict[str, str],
    node_ids: Sequence[str],
) -> str:
    if timed_out:
        return "timeout"
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        if number in _LIMIT_SIGNALS or (number == int(signal.SIGKILL) and cpu_s >= limits.cpu_s):
            return "resource-limit"
        return "error"
    code = os.WEXITSTATUS(wait_status)
    if results is None:
        return "error"
    if code == 1:
        return "failed"
    if code != 0:
        return "error"  # 2 interrupted (e.g. a collection error), 3 internal, 4 usage, 5 no tests, others
    if any(outcome in ("failed", "error") for outcome in outcomes.values()):
        return "failed"
    if "passed" not in outcomes.values():
        return "failed"  # everything skipped: nothing shows the code works
    for asked in node_ids:
        if not any(_matches(node, asked) for node in outcomes):
            return "error"
    return "passed"
