"""The project test-suite sandbox: real pytest runs of a tiny project, under the real boundary."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

from assistant.errors import UsageError
from assistant.sandbox import LAYERS, runner
from assistant.sandbox import project_launcher as launcher
from assistant.sandbox.project import Mark, ProjectLimits, RunCancelled, run_pytest
from tests.conftest import landlock_abi, write_files

PYTHON = Path(sys.executable)
ABI = landlock_abi()
SECCOMP = sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "aarch64")

MODULE = '"""A tiny module."""\n\n\ndef add(a, b):\n    return a + b\n'
ADD_LINE = 4
TESTS = textwrap.dedent(
    """
    from pkg.mod import add


    def test_ok():
        assert add(1, 2) == 3


    def test_bad():
        assert add(1, 2) == 4
    """
)
OK, BAD = "tests/test_mod.py::test_ok", "tests/test_mod.py::test_bad"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_files(tmp_path / "project", {"pkg/__init__.py": "", "pkg/mod.py": MODULE, "tests/test_mod.py": TESTS})


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_outcomes_traces_and_layers(project: Path) -> None:
    before = snapshot(project)
    run = run_pytest(project, PYTHON, trace=True)
    assert run.status == "failed" and not run.ok, run.output
    assert run.outcomes == {OK: "passed", BAD: "failed"}
    assert (run.passed(), run.failed(), run.returncode) == ([OK], [BAD], 1)
    assert ("pkg/mod.py", ADD_LINE) in run.calls[OK]
    assert ("pkg/mod.py", ADD_LINE) in run.calls[BAD]
    assert "1 failed, 1 passed" in run.output
    assert list(run.layers)[: len(LAYERS)] == list(LAYERS)
    assert run.layers["hook"][0] and run.layers["no_new_privs"][0] and run.layers["caps"][0]
    assert run.layers["seccomp"][0] == SECCOMP  # memfd_create only: the suite may fork and exec
    if ABI >= 1:
        assert run.layers["landlock"] == (True, run.layers["landlock"][1]), run.layers
        assert run.layers["landlock"][1].startswith(f"ABI {ABI}")
    assert snapshot(project) == before  # the pristine project is never touched


def test_marks_name_the_tests_during_which_the_event_fired_in_any_thread(project: Path) -> None:
    marking = "import sys\n\n\ndef add(a, b):\n    sys.audit('seen')\n    return a + b\n"
    threaded = TESTS + textwrap.dedent(
        """

        def test_in_a_thread():
            import threading
            worker = threading.Thread(target=add, args=(1, 1))
            worker.start()
            worker.join()


        def test_without():
            assert True
        """
    )
    files = {"pkg/mod.py": marking, "tests/test_mod.py": threaded}
    run = run_pytest(project, PYTHON, files=files, mark=Mark("seen"))
    assert len(run.outcomes) == 4, run.output
    assert run.marked == {OK, BAD, "tests/test_mod.py::test_in_a_thread"}
    assert run.calls == {}  # not traced
    assert run_pytest(project, PYTHON, files=files).marked == frozenset()  # not asked: nothing heard
    assert run_pytest(project, PYTHON, files=files, mark=Mark("other")).marked == frozenset()
    # Ended after the first marked test that failed (test_ok passed, marked; test_bad failed, marked): no more ran.
    stopped = run_pytest(project, PYTHON, files=files, mark=Mark("seen", stop_after=1))
    assert stopped.outcomes == {OK: "passed", BAD: "failed"} and stopped.marked == {OK, BAD}, stopped.output


def test_files_override_a_module_and_node_ids_select(project: Path) -> None:
    before = snapshot(project)
    broken = {"pkg/mod.py": "def add(a, b):\n    return 4\n"}
    run = run_pytest(project, PYTHON, files=broken)
    assert run.outcomes == {OK: "failed", BAD: "passed"}, run.output
    run = run_pytest(project, PYTHON, [BAD], files=broken, trace=False)
    assert (run.status, run.outcomes, run.calls, run.returncode) == ("passed", {BAD: "passed"}, {}, 0), run.output
    assert run.ok
    assert snapshot(project) == before


def test_escapes_are_denied(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSIST_FAKE_SECRET", "sk-do-not-leak")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("api key")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = textwrap.dedent(
            f"""
            import os, socket
            import pytest


            def test_env():
                assert "ASSIST_FAKE_SECRET" not in os.environ
                assert "sk-do-not-leak" not in repr(os.environ)


            def test_tcp():
                with pytest.raises(OSError):
                    socket.create_connection(("127.0.0.1", {port}), timeout=2)


            # Not there, in the run's own root (namespaces); else there, and Landlock's to refuse.
            def test_write_outside():
                with pytest.raises((PermissionError, FileNotFoundError)):
                    open({str(outside / "x.txt")!r}, "w")


            def test_read_secret():
                with pytest.raises((PermissionError, FileNotFoundError)):
                    open({str(secret)!r}).read()
            """
        )
        run = run_pytest(project, PYTHON, ["tests/test_escape.py"], files={"tests/test_escape.py": code})
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    got = {node.rpartition("::")[2]: outcome for node, outcome in run.outcomes.items()}
    assert (got["test_env"], got["test_tcp"]) == ("passed", "passed"), run.output
    if ABI < 1:
        pytest.skip("the kernel has no Landlock: reads and writes outside the copy are not confined")
    assert (got["test_write_outside"], got["test_read_secret"]) == ("passed", "passed"), run.output
    assert run.ok
    assert list(outside.iterdir()) == []


@pytest.mark.skipif(ABI < 4, reason="the kernel's Landlock has no TCP rules (ABI 4+)")
def test_landlock_alone_denies_tcp(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "hook")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = (
            "import socket\n\n\ndef test_tcp():\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "sandbox layers disabled", once per process
            run = run_pytest(project, PYTHON, ["tests/test_tcp.py"], files={"tests/test_tcp.py": code})
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert run.layers["hook"] == (False, "disabled by ASSIST_SANDBOX_DISABLE")
    assert run.outcomes == {"tests/test_tcp.py::test_tcp": "failed"}
    assert "PermissionError" in run.output, run.output


def test_an_infinite_loop_times_out(project: Path) -> None:
    code = "def test_loop():\n    while True:\n        pass\n"
    run = run_pytest(
        project, PYTHON, ["tests/test_loop.py"], files={"tests/test_loop.py": code}, limits=ProjectLimits(timeout_s=2)
    )
    assert (run.status, run.returncode, run.outcomes) == ("timeout", None, {})
    assert run.duration_s < 3.0


def test_a_cancelled_run_ends_at_once(project: Path) -> None:
    # What Ctrl-C during agree's module runs relies on: the worker threads' runs stop, they are not waited out.
    code = "import time\n\n\ndef test_sleep():\n    time.sleep(60)\n"
    cancel = threading.Event()
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(
                run_pytest(project, PYTHON, ["tests/test_sleep.py"], files={"tests/test_sleep.py": code}, cancel=cancel)
            )
        except RunCancelled as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    started = time.monotonic()
    worker.start()
    time.sleep(1.5)  # pytest is up and inside the sleeping test
    cancel.set()
    worker.join(timeout=20)
    assert not worker.is_alive() and isinstance(outcome[0], RunCancelled), outcome
    assert time.monotonic() - started < 10


def test_what_a_test_run_writes_in_all_is_capped(project: Path) -> None:
    # Each file is under the file size limit; together they pass the disk cap, and the run stops at a look.
    code = "import time\n\n\ndef test_fill(tmp_path):\n    for i in range(300):\n"
    code += "        (tmp_path / f'f{i}').write_bytes(b'x' * 2**20)\n        time.sleep(0.01)\n"
    files = {"tests/test_fill.py": code}
    run = run_pytest(project, PYTHON, ["tests/test_fill.py"], files=files, limits=ProjectLimits(disk_mb=32))
    assert run.status == "resource-limit", run.output
    assert run.output.rstrip().endswith("assist stopped the run: disk limit: wrote more than 32 MB in its directory")
    assert run_pytest(project, PYTHON, [OK], limits=ProjectLimits(disk_mb=32)).status == "passed"


def test_cpu_limit_and_collection_error(project: Path) -> None:
    code = "def test_loop():\n    while True:\n        pass\n"
    limits = ProjectLimits(timeout_s=10, cpu_s=1)
    run = run_pytest(project, PYTHON, ["tests/test_loop.py"], files={"tests/test_loop.py": code}, limits=limits)
    assert run.status == "resource-limit", (run.returncode, run.output)
    # A test that ignores SIGXCPU is killed (SIGKILL) a second later: still the CPU limit, whatever relays it.
    code = "import signal\n\n\ndef test_loop():\n    signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
    code += "    while True:\n        pass\n"
    limits = ProjectLimits(timeout_s=20, cpu_s=3)  # room for pytest's start-up (about a CPU second) first
    run = run_pytest(project, PYTHON, ["tests/test_loop.py"], files={"tests/test_loop.py": code}, limits=limits)
    assert (run.status, run.returncode) == ("resource-limit", -9), (run.returncode, run.output)
    run = run_pytest(project, PYTHON, files={"tests/test_mod.py": "def test_x(:\n"})
    assert (run.status, run.returncode) == ("error", 2), run.output


def test_paths_escaping_the_copy_are_usage_errors(project: Path, tmp_path: Path) -> None:
    (project / "link").symlink_to(tmp_path)
    for bad in ("../evil.py", "/etc/passwd", "pkg/../../evil.py", "nodir/new.py", "pkg", "link/evil.py"):
        with pytest.raises(UsageError):
            run_pytest(project, PYTHON, files={bad: "x = 1\n"})
    with pytest.raises(UsageError):
        run_pytest(project, PYTHON, pythonpath=["../elsewhere"])
    assert not (tmp_path / "evil.py").exists()


def test_the_launcher_reads_the_runners_paths() -> None:
    assert launcher.SYSTEM_READ_PATHS == runner.SYSTEM_READ_PATHS
    assert launcher.DEVICE_PATHS == runner.DEVICE_PATHS
    assert launcher.DEVICE_READ_PATHS == runner.DEVICE_READ_PATHS


@pytest.mark.skipif(ABI < 1, reason="needs Landlock")
def test_nothing_of_the_project_runs_before_the_boundary(project: Path, tmp_path: Path) -> None:
    # A repo's sitecustomize.py on PYTHONPATH would run at interpreter start-up: it must find the boundary up.
    outside = tmp_path / "escaped"
    (project / "sitecustomize.py").write_text(
        f"try:\n    open({str(outside)!r}, 'w').write('out')\nexcept OSError:\n    pass\n"
    )
    run = run_pytest(project, PYTHON, [OK], pythonpath=["."])
    assert run.status == "passed", run.output
    assert not outside.exists()


def test_include_copies_only_the_listed_files(project: Path) -> None:
    (project / "secret.env").write_text("TOKEN=1\n")
    probe = "import pathlib\n\ndef test_secret():\n    assert not pathlib.Path('secret.env').exists()\n"
    (project / "tests" / "test_probe.py").write_text(probe)
    listed = ["pkg/__init__.py", "pkg/mod.py", "tests/test_mod.py", "tests/test_probe.py", "../outside", "gone.py"]
    run = run_pytest(project, PYTHON, ["tests/test_probe.py"], pythonpath=["."], include=listed)
    assert run.status == "passed", run.output
    whole = run_pytest(project, PYTHON, ["tests/test_probe.py"], pythonpath=["."])
    assert whole.status == "failed"  # without the list the copy holds it


def test_a_configuration_above_the_copy_is_not_read(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The copy is made in the temporary folder; one of its parents holds a hostile pytest.ini and conftest.py
    # (another user's /tmp/pytest.ini) that would deselect the failing test and so forge a pass.
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "pytest.ini").write_text("[pytest]\naddopts = -k test_ok\n")
    (outer / "conftest.py").write_text("def pytest_collection_modifyitems(items):\n    items[:] = items[:1]\n")
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(outer))
    run = run_pytest(project, PYTHON)
    assert run.outcomes == {OK: "passed", BAD: "failed"}, run.output


def _held(run, name: str) -> None:
    held, detail = run.layers.get(name, (False, "not reported"))
    if not held:
        pytest.skip(f"{name} did not hold here: {detail}")


def test_no_udp_no_shared_memory_and_nothing_started_outlives_the_run(project: Path) -> None:
    # Landlock has rules for TCP only and none for System V IPC; a test may leave its own session (setsid).
    # The run's network, IPC and PID namespaces close all three.
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x41000000 + os.getpid() % 0xFFFFFF
    segment = libc.shmget(key, 4096, 0o600 | 0o1000)  # IPC_CREAT: a segment another program of ours holds
    assert segment >= 0, os.strerror(ctypes.get_errno())
    marker = f"time.sleep({60 + os.getpid() % 1000}.25)"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.setblocking(False)
            port = listener.getsockname()[1]
            code = textwrap.dedent(
                f"""
                import ctypes, subprocess, sys


                def test_udp():  # from a process of its own: the plugin's audit hook guards pytest's only
                    send = "import socket; socket.socket(2, 2).sendto(b'leak', ('127.0.0.1', {port}))"
                    subprocess.run([sys.executable, "-c", send])


                def test_shared_memory():
                    assert ctypes.CDLL(None).shmget({key}, 0, 0) == -1


                def test_a_process_of_its_own_session():
                    subprocess.Popen([sys.executable, "-c", "import time; {marker}"], start_new_session=True)
                """
            )
            run = run_pytest(project, PYTHON, ["tests/test_ns.py"], files={"tests/test_ns.py": code})
            with pytest.raises(BlockingIOError):
                listener.recv(16)  # nothing arrived
        _held(run, "namespaces")
        assert run.ok and len(run.outcomes) == 3, run.output
        time.sleep(0.5)  # the kernel's kill of the namespace is asynchronous
        survivors = [p for p in Path("/proc").glob("[0-9]*") if marker.encode() in _cmdline(p)]
        assert survivors == []
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID
        for path in Path("/proc").glob("[0-9]*"):
            if marker.encode() in _cmdline(path):
                os.kill(int(path.name), signal.SIGKILL)


def test_no_socket_file_of_the_host_can_be_reached(project: Path, tmp_path: Path) -> None:
    # A docker, tmux or D-Bus socket is a file: neither Landlock nor a network namespace rules connecting to one,
    # and a subprocess is past the audit hook. In the run's own root the file is not there.
    path = tmp_path / "host.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen(1)
        listener.setblocking(False)
        connect = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r}); print('CONNECTED')"
        code = textwrap.dedent(
            f"""
            import subprocess, sys


            def test_connect():
                done = subprocess.run([sys.executable, "-c", {connect!r}], capture_output=True, text=True)
                assert "CONNECTED" not in done.stdout, done.stderr
            """
        )
        run = run_pytest(project, PYTHON, ["tests/test_sock.py"], files={"tests/test_sock.py": code})
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    if not run.layers["namespaces"][0]:
        pytest.skip(f"no namespaces here: {run.layers['namespaces'][1]}")
    assert run.layers["root"][0], run.layers["root"]  # namespaces held, so the root must
    assert run.ok, run.output


def test_shell_scripts_and_shell_true_still_run(project: Path) -> None:
    # The run's own root holds /bin (scripts' `#!/bin/sh`, `shell=True`): click's pager tests write such a script.
    code = textwrap.dedent(
        """
        import subprocess


        def test_script(tmp_path):
            script = tmp_path / "pager"
            script.write_text("#!/bin/sh\\ncat\\n")
            script.chmod(0o755)
            assert subprocess.run([str(script)], input=b"hi", capture_output=True).stdout == b"hi"
            assert subprocess.run("echo $((6 * 7))", shell=True, capture_output=True).stdout == b"42\\n"
        """
    )
    run = run_pytest(project, PYTHON, ["tests/test_sh.py"], files={"tests/test_sh.py": code})
    assert run.ok, run.output


def test_a_temp_dir_reached_through_a_symlink(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest names tests from the real path: the asked node ids went unmatched (status "error", as on macOS's
    # /var/folders). And the run's folder is bound into its root: through a symlink, binding it with what is mounted
    # under it would bring the half-built root along (the venv and /usr, writable through it).
    import tempfile

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "link"))
    code = "import os\n\n\ndef test_empty():\n"
    code += "    assert os.listdir(os.environ['ASSIST_PYTEST_RUN_DIR'] + '/root') == []\n"
    run = run_pytest(project, PYTHON, ["tests/test_r.py"], files={"tests/test_r.py": code})
    assert run.ok, run.output


@pytest.mark.skipif(os.getuid() != 0, reason="builds a root directly: needs root")
def test_a_root_that_fails_half_built_is_taken_away(tmp_path: Path) -> None:
    from assistant.sandbox import boundary

    mountpoint = tmp_path / "root"
    mountpoint.mkdir()
    child = os.fork()
    if child == 0:  # pragma: no cover - reports through its exit status
        code = 1
        try:
            boundary._syscall = lambda *args: (_ for _ in ()).throw(OSError("pivot_root refused"))
            try:
                boundary.enter_root(["/usr"], [str(tmp_path)], str(mountpoint))
            except OSError:
                code = 0 if os.listdir(mountpoint) == [] and os.getcwd() != str(mountpoint) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # 2: the half-built root (its /usr bind) was left in place


NON_ROOT_PROBE = """
import os, socket, sys
sys.path.insert(0, sys.argv[1])
import boundary
run = sys.argv[2]
boundary.enter_namespaces()
if os.fork() == 0:
    boundary.enter_root(["/usr", "/lib", "/lib64", "/etc/ld.so.cache"], [run, "/dev/null"], run + "/root")
    try:
        socket.socket(socket.AF_UNIX).connect(sys.argv[3])
        print("CONNECTED", flush=True)
    except FileNotFoundError:
        print("NOT THERE", sorted(os.listdir("/")), flush=True)
    open(run + "/written", "w").close()
    os._exit(0)
os.wait()
"""


@pytest.mark.skipif(
    os.getuid() != 0 or not Path("/usr/bin/setpriv").exists() or not Path("/usr/bin/python3").exists(),
    reason="runs a probe as nobody: needs root, setpriv and a system python3",
)
def test_a_user_without_privileges_gets_the_same_root_through_a_user_namespace() -> None:
    # What a developer's machine runs (assist as themself): the user namespace path, probed as nobody.
    import shutil
    import tempfile

    from assistant.sandbox import boundary

    folder = Path(tempfile.mkdtemp(prefix="assist-nonroot-"))  # not under pytest's root-only tmp_path
    try:
        shutil.copy(boundary.__file__, folder / "boundary.py")
        (folder / "probe.py").write_text(NON_ROOT_PROBE)
        run = folder / "run"
        (run / "root").mkdir(parents=True)
        os.chmod(folder, 0o755)
        os.chmod(run, 0o777)
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(folder / "host.sock"))
            os.chmod(folder / "host.sock", 0o777)
            listener.listen(1)
            command = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3"]
            command += ["-I", str(folder / "probe.py"), str(folder), str(run), str(folder / "host.sock")]
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if "unshare" in done.stderr and "Operation not permitted" in done.stderr:
            pytest.skip(f"no user namespaces for nobody here: {done.stderr.strip().splitlines()[-1]}")
        assert done.returncode == 0 and done.stdout.startswith("NOT THERE"), (done.stdout, done.stderr)
        assert (run / "written").exists()  # the run's folder is there, and writable
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _cmdline(path: Path) -> bytes:
    try:
        return (path / "cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.skipif(ABI < 1, reason="needs Landlock")
def test_an_editable_install_of_the_project_does_not_open_it_to_the_run(project: Path, tmp_path: Path) -> None:
    # `pip install -e .` into the repo's venv writes a .pth naming the checkout; the venv is read where it is,
    # but the checkout (its untracked secret.env) must stay out of the run's reach: the copy is what it tests.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # pytest, from ours
    (site / "__editable__.pkg-0.1.pth").write_text(f"{project}\n")
    (project / "secret.env").write_text("TOKEN=1\n")
    secret = str(project / "secret.env")
    probe = "import pytest\n\n\ndef test_secret():\n    with pytest.raises((PermissionError, FileNotFoundError)):\n"
    probe += f"        open({secret!r})\n"
    (project / "tests" / "test_probe.py").write_text(probe)
    listed = ["pkg/__init__.py", "pkg/mod.py", "tests/test_mod.py", "tests/test_probe.py"]
    run = run_pytest(project, venv / "bin" / "python", ["tests/test_probe.py", OK], include=listed)
    assert run.ok and len(run.outcomes) == 2, run.output


# --- memory outside RLIMIT_AS, deep trees, bytecode (issue 67, items 1, 2 and 10) ----------------------------------


@pytest.mark.skipif(not SECCOMP, reason="no seccomp filter for this platform")
def test_memfd_is_refused_in_pytest_and_what_it_starts(project: Path) -> None:
    # A memfd's pages are shared memory RLIMIT_AS does not count: a repo's test held 2 GB under the limit. The
    # filter refuses memfd_create in pytest's process and in what it forks and execs; fork and exec still work.
    code = textwrap.dedent(
        """
        import errno, os, resource, subprocess, sys

        import pytest


        def test_memfd_in_pytest():
            with pytest.raises(OSError) as caught:
                os.memfd_create("x")
            assert caught.value.errno == errno.ENOSYS


        def test_memfd_in_a_child():
            probe = "import os\\ntry:\\n    os.memfd_create('x')\\nexcept OSError as e:\\n    print(e.errno)"
            out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
            assert out.strip() == str(errno.ENOSYS)


        def test_open_files_are_capped():
            assert resource.getrlimit(resource.RLIMIT_NOFILE) == (1024, 1024)
        """
    )
    run = run_pytest(project, PYTHON, ["tests/test_memfd.py"], files={"tests/test_memfd.py": code})
    assert run.ok and len(run.outcomes) == 3, run.output
    assert run.layers["seccomp"][0] and "memfd_create" in run.layers["seccomp"][1], run.layers


def test_a_deep_tree_is_a_resource_limit_and_is_removed(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # shutil.rmtree recurses in Python 3.11: a test nesting 3,000 folders raised RecursionError out of run_pytest
    # and left its assist-pytest-* folder behind.
    code = "import os\n\n\ndef test_deep():\n    for _ in range(3000):\n        os.mkdir('d')\n        os.chdir('d')\n"
    base = tmp_path / "base"
    base.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    run = run_pytest(project, PYTHON, ["tests/test_deep.py"], files={"tests/test_deep.py": code})
    assert run.status == "resource-limit", run.output
    assert run.output.rstrip().endswith("assist stopped the run: disk limit: nested folders more than 64 deep")
    assert list(base.iterdir()) == []


def test_the_launcher_writes_no_bytecode(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `python -I` ignores PYTHONDONTWRITEBYTECODE: the launcher's import of boundary.py wrote a .pyc beside it (in
    # the installed package) on every run.
    from assistant.sandbox import project as project_module

    folder = tmp_path / "launcher"
    folder.mkdir()
    for name in ("project_launcher.py", "boundary.py"):
        (folder / name).write_bytes((Path(project_module.__file__).parent / name).read_bytes())
    monkeypatch.setattr(project_module, "LAUNCHER_PATH", folder / "project_launcher.py")
    assert run_pytest(project, PYTHON, [OK]).ok
    assert sorted(p.name for p in folder.iterdir()) == ["boundary.py", "project_launcher.py"]
