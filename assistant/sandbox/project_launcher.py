"""Start a project's pytest inside the sandbox boundary: ``python project_launcher.py JOB``.

:func:`assistant.sandbox.project.run_pytest` starts this script with the project's own interpreter, in the
run's directory and its own session. It must stay standard-library-only and must not import the
``assistant`` package (the project's venv does not have it). It:

1. reads the job (JSON) and deletes it;
2. enters network, IPC and PID namespaces of its own where the kernel allows (:func:`boundary.enter_namespaces`):
   then it forks the run's first process and stays outside, waiting, to exit as pytest did; that first process
   waits for pytest as the namespace's init, and when it exits the kernel kills whatever the run left behind.
   Pytest's process then moves into a mount namespace and a root of its own that holds only what step 4 grants
   (:func:`boundary.enter_root`), so no socket file of the host can be reached by path;
3. sets rlimits (address space, CPU time, file size, no core dumps, a cap on processes for non-root users),
   ``PR_SET_NO_NEW_PRIVS`` and drops every capability (not ``PR_SET_DUMPABLE``: exec would undo it);
4. restricts itself with Landlock: read and execute on the interpreter (its prefixes, the venv and what its
   ``sys.path`` holds, never the original project: see :func:`read_paths`) and the system library dirs, every
   right on the run's directory and /dev/null only, no TCP bind or connect (ABI 4+), signals and abstract unix
   sockets scoped (ABI 6+);
5. writes which layers held, as JSON, to the report pipe the parent passed (and closes it, so nothing it
   starts can write there), then ``os.execv``s ``python -m pytest ...``. Everything pytest and the tests
   start inherits the boundary. The only seccomp filter denies memfd_create and memfd_secret (shared memory
   that RLIMIT_AS does not count): pytest and projects' tests may fork and exec.

``boundary.py`` is loaded from beside this file, the way :func:`assistant.sandbox.runner.load_boundary` does.
"""

import json
import os
import resource
import signal
import struct
import sys

# The same values as assistant/sandbox/runner.py (a test checks they agree).
SYSTEM_READ_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/localtime")
# Only here (a candidate never execs): what `#!/bin/sh` lines, `shell=True` and Debian's alternatives (symlinks
# such as /usr/bin/awk -> /etc/alternatives/awk) name. Where /bin is a link to usr/bin, the link is all it adds.
EXEC_READ_PATHS = ("/bin", "/etc/alternatives")
DEVICE_PATHS = ("/dev/null",)
DEVICE_READ_PATHS = ("/dev/urandom", "/dev/random", "/dev/zero")
NPROC_HEADROOM = 256  # processes and threads a run may add to what its user already has
# Open files per process: the usual default soft limit, so suites that run on a workstation run here; it bounds
# what files deleted while open can hold (their pages are in RAM where the run's folder is a tmpfs).
OPEN_FILES = 1024


def describe(exc):
    """One line about an exception."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message[:300]}"


def count_user_tasks(uid):
    """Threads of every process of `uid` (RLIMIT_NPROC counts them all), or None when /proc cannot say."""
    total = 0
    try:
        entries = os.scandir("/proc")
    except OSError:
        return None
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid != uid:
                    continue
                total += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return total


def set_limits(job, layers):
    """rlimits for pytest and everything it starts."""
    mb = 1024 * 1024
    wanted = [
        (resource.RLIMIT_AS, job["memory_mb"] * mb, job["memory_mb"] * mb),
        # SIGXCPU at the soft limit, SIGKILL one second later if ignored.
        (resource.RLIMIT_CPU, job["cpu_s"], job["cpu_s"] + 1),
        (resource.RLIMIT_FSIZE, job["file_size_mb"] * mb, job["file_size_mb"] * mb),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, OPEN_FILES, OPEN_FILES),
    ]
    uid = os.getuid()
    if uid != 0:  # root is never held to RLIMIT_NPROC, and it counts every task of the user system-wide
        tasks = count_user_tasks(uid)
        if tasks is not None:
            cap = tasks + NPROC_HEADROOM
            wanted.append((resource.RLIMIT_NPROC, cap, cap))
    applied = []
    for which, soft, hard in wanted:
        try:
            current_hard = resource.getrlimit(which)[1]
            if current_hard != resource.RLIM_INFINITY:
                hard = min(hard, current_hard)
                soft = min(soft, hard)
            resource.setrlimit(which, (soft, hard))
            applied.append(which)
        except (ValueError, OSError):
            continue  # not supported here, or already stricter: keep what we have
    nproc = "a process cap" if resource.RLIMIT_NPROC in applied else "no process cap (root is exempt)"
    layers["rlimits"] = (
        True,
        f"address space {job['memory_mb']} MB, CPU {job['cpu_s']} s, files {job['file_size_mb']} MB, "
        f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]} open files, no core dumps, {nproc}",
    )


_boundary = None


def load_boundary():
    """boundary.py from beside this file (the package itself is not importable here), loaded once: after
    :func:`enter_root` this file's folder is no longer there to read."""
    global _boundary
    if _boundary is None:
        from importlib.machinery import SourceFileLoader

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boundary.py")
        module = type(sys)("_assist_boundary")
        module.__file__ = path
        SourceFileLoader("_assist_boundary", path).exec_module(module)
        _boundary = module
    return _boundary


def venv_paths(executable):
    """The venv around `executable` and the folders its .pth files name: what `site` puts on pytest's sys.path.

    The launcher runs with -S (no site, so nothing of the venv runs before the boundary), so it reads the .pth
    files itself: their path lines only; `import` lines are code and are left to pytest's own start."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(executable)))
    if not os.path.isfile(os.path.join(root, "pyvenv.cfg")):
        return []
    found = [root]
    lib = os.path.join(root, "lib")
    for version in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        site_dir = os.path.join(lib, version, "site-packages")
        if not os.path.isdir(site_dir):
            continue
        for name in sorted(os.listdir(site_dir)):
            if not name.endswith(".pth"):
                continue
            try:
                with open(os.path.join(site_dir, name), encoding="utf-8", errors="replace") as stream:
                    lines = stream.read().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    path = line if os.path.isabs(line) else os.path.join(site_dir, line)
                    if os.path.isdir(path):
                        found.append(path)
    return found


def _inside(path, folder):
    return os.path.commonpath([path, folder]) == folder


def _exposes(path, protected, venv):
    """Whether granting `path` would show a `protected` folder's files: it is one, holds one, or lies inside one
    without being part of the interpreter's `venv` (a repository's own .venv is read where it is)."""
    real = os.path.realpath(path)
    for root in protected:
        if _inside(root, real):
            return True
        if _inside(real, root) and not (venv and _inside(real, venv)):
            return True
    return False


def read_paths(protected=()):
    """What the interpreter needs to read: its prefixes, its binary's dir, sys.path, system libraries.

    A folder a .pth file names that is, holds or lies inside a `protected` one (the original project) is left
    out: an editable install's .pth names the project's own checkout, and reading it would show the run the
    untracked files (secrets) the copy leaves out. The copy, first on PYTHONPATH, is what the tests import."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    for executable in (sys.executable, os.path.realpath(sys.executable)):
        paths.append(os.path.dirname(executable))
    paths += [p for p in sys.path if os.path.isabs(p) and os.path.realpath(p) != os.path.realpath(here)]
    venv = venv_paths(sys.executable)  # its root, then the folders its .pth files name
    protected = [os.path.realpath(p) for p in protected]
    root = os.path.realpath(venv[0]) if venv else None
    paths += venv[:1] + [p for p in venv[1:] if not _exposes(p, protected, root)]
    paths += list(SYSTEM_READ_PATHS) + list(EXEC_READ_PATHS) + list(DEVICE_READ_PATHS)
    unique = []
    for path in paths:
        if path and path not in unique:
            unique.append(path)
    return unique


def apply_boundary(job, layers):
    """Apply every layer the kernel offers and the job does not disable; record each in `layers`."""
    disabled = set(job["disable"])
    layers["seccomp"] = (False, "not available here")
    try:
        boundary = load_boundary()
    except Exception as exc:  # e.g. no ctypes on this build
        for name in ("no_new_privs", "dumpable", "caps", "landlock"):
            layers[name] = (False, f"boundary module unavailable: {describe(exc)}")
        return
    if not boundary.LINUX:
        for name, (_, detail) in boundary.probe().items():
            if name != "seccomp":
                layers[name] = (False, detail)
        return

    def attempt(name, action):
        return boundary.attempt_layer(layers, name, disabled, action, describe)

    nnp = attempt("no_new_privs", boundary.hold_no_new_privs)
    # Not applied: exec of the (readable) interpreter sets it back, so pytest would be dumpable anyway. What
    # it guards in the runner, our process's /proc and ptrace, Landlock guards here (or our own
    # non-dumpable state, where Landlock is missing).
    layers["dumpable"] = (
        False,
        "not kept across exec: pytest is dumpable to its own user; Landlock keeps the run from ptracing or "
        "reading /proc outside it",
    )
    attempt("caps", boundary.drop_capabilities)
    memfd_filter(boundary, disabled, nnp, layers)
    abi = boundary.landlock_abi()
    refusal = boundary.landlock_refusal("landlock" in disabled, abi, nnp)
    if refusal is not None:
        layers["landlock"] = (False, refusal)
    else:
        attempt(
            "landlock",
            lambda: boundary.apply_landlock(
                read_paths(job.get("protect", ())), list(job["write_paths"]), list(DEVICE_PATHS), abi
            ),
        )


def memfd_filter(boundary, disabled, nnp, layers):
    """A seccomp filter with one purpose (pytest and the tests may fork and exec, so not the candidates' filter):
    memfd_create fails, whose pages RLIMIT_AS does not count (a run held 2 GB under a 256 MB limit)."""
    refusal = boundary.seccomp_refusal("seccomp" in disabled, nnp)
    if refusal is not None:
        layers["seccomp"] = (False, refusal)
    else:
        try:
            layers["seccomp"] = (True, boundary.install_memfd_filter() + "; fork and exec stay allowed")
        except Exception as exc:
            layers["seccomp"] = (False, f"failed: {describe(exc)}")


def enter_root(job, layers):
    """Move pytest's process into a root holding only what Landlock will grant (see the module's docstring)."""
    if "root" in set(job["disable"]):
        layers["root"] = (False, "disabled by ASSIST_SANDBOX_DISABLE")
        return
    paths = read_paths(job.get("protect", ()))
    try:
        layers["root"] = (
            True,
            load_boundary().enter_root(paths, list(job["write_paths"]) + list(DEVICE_PATHS), job["root_mount"]),
        )
    except Exception as exc:
        layers["root"] = (False, f"failed: {describe(exc)}")


def report(fd, layers):
    """Write the layers to the parent's report pipe and close it."""
    data = json.dumps({name: list(value) for name, value in layers.items()}).encode("utf-8")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass
    finally:
        os.close(fd)


def isolate(job, layers):
    """Enter namespaces of our own (see the module's docstring); True when it held.

    Root's `unshare` either holds whole or fails, leaving this process as it was. Another user goes through a user
    namespace, and the kernel may let it create one but not map itself into it (Ubuntu's AppArmor restriction):
    a forked child tries that first, so this process is never left half inside. Failing after the child
    succeeded raises (the run must not go on in a half-made namespace)."""
    if "namespaces" in set(job["disable"]):
        layers["namespaces"] = (False, "disabled by ASSIST_SANDBOX_DISABLE")
        return False
    try:
        boundary = load_boundary()
        if os.getuid() == 0:
            layers["namespaces"] = (True, boundary.enter_namespaces())
            return True
        works, detail = boundary.namespaces_available()
    except Exception as exc:
        works, detail = False, describe(exc)
    if not works:
        layers["namespaces"] = (False, f"not available: {detail}")
        return False
    layers["namespaces"] = (True, boundary.enter_namespaces())
    return True


def wait_as_init(pytest_pid, status_fd):
    """The namespace's first process: reap whatever ends (orphans are re-parented here) until pytest does, hand
    its wait status to the launcher outside, and exit, which ends every process left in the namespace."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # init dies only by exiting (a test could signal it)
        while True:
            pid, status = os.wait()
            if pid == pytest_pid:
                os.write(status_fd, struct.pack("=i", status))
                break
    finally:
        os._exit(0)


def exit_as(status):
    """End this process the way the wait `status` says its child ended: the same signal, or the same code."""
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    if number:
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU, SIGXFSZ: no core dump in the copy,
            load_boundary().set_dumpable(False)  # nor a piped core_pattern helper started for it
            if number not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, nor reset
                signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
        except BaseException:
            pass
    os._exit(128 + number if number else 70)


def supervise(report_fd):
    """With namespaces: fork the namespace's init, which forks pytest's process. This (outside) process waits
    and exits as pytest did; only pytest's process returns from here. The other two never return: whatever
    happens to them ends in `os._exit`."""
    status_r, status_w = os.pipe()
    init = os.fork()
    if init == 0:
        pytest = -1  # no pytest: init then finds no child and exits without a status
        try:
            os.close(status_r)
            pytest = os.fork()
            if pytest == 0:
                os.close(status_w)
                return
            os.close(report_fd)
            load_boundary().drop_capabilities()  # it runs nothing of the project's, and needs no privilege
        except BaseException:
            pass
        wait_as_init(pytest, status_w)
    try:
        os.close(status_w)
        os.close(report_fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.waitpid(init, 0)
        data = b""
        while len(data) < 4:
            chunk = os.read(status_r, 4 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) < 4:
            sys.stderr.write("assist sandbox launcher: the run ended without a status\n")
            os._exit(70)
        exit_as(struct.unpack("=i", data)[0])
    except BaseException as exc:
        sys.stderr.write(f"assist sandbox launcher failed: {describe(exc)}\n")
    finally:
        os._exit(70)


def main(job_path):
    """Read the job, isolate the run, apply the boundary, report the layers and exec pytest."""
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    os.remove(job_path)
    layers = {}
    report_fd = job["report_fd"]
    try:
        # Limits first: RLIMIT_NPROC set before a user namespace is made caps what the run adds on the host (in
        # the namespace the count starts afresh).
        set_limits(job, layers)
        if isolate(job, layers):
            supervise(report_fd)
            enter_root(job, layers)
        else:
            layers["root"] = (False, "needs the namespaces")
        apply_boundary(job, layers)
    except BaseException as exc:  # a launcher bug must not run the tests outside the boundary
        layers["launcher"] = (False, f"failed: {describe(exc)}")
        report(report_fd, layers)
        sys.stderr.write(f"assist sandbox launcher failed: {describe(exc)}\n")
        os._exit(70)
    report(report_fd, layers)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *job["argv"]])


if __name__ == "__main__":
    main(sys.argv[1])
