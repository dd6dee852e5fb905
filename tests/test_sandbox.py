"""Tests for assistant.sandbox: normal results, and hostile candidates that must be contained."""

from __future__ import annotations

import ast
import os
import resource
import select
import socket
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from assistant.sandbox import Limits, SandboxResult, run, run_many
from tests.conftest import landlock_abi

ADD_ONE = "def f(x):\n    return x + 1\n"
ADD_ONE_TESTS = ["assert f(1) == 2", "assert f(2) == 3", "assert f(10) == 11"]
FAST = Limits(timeout_s=10.0, cpu_s=5)


def first_line(result: SandboxResult) -> str:
    """The first line the candidate printed (used to learn its cwd or pid)."""
    assert result.stdout, result
    return result.stdout.splitlines()[0]


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(entry))
    return found


# --- normal behaviour -------------------------------------------------------------------------


def test_correct_function_passes_all_asserts() -> None:
    result = run(ADD_ONE, ADD_ONE_TESTS, limits=FAST)
    assert result.ok
    assert (result.status, result.passed, result.total) == ("passed", 3, 3)
    assert result.failed_test is None and result.error_type is None
    assert result.duration_s > 0


def test_wrong_function_reports_first_failing_assert() -> None:
    result = run("def f(x):\n    return x + 1 if x < 2 else x\n", ADD_ONE_TESTS, limits=FAST)
    assert not result.ok
    assert (result.status, result.passed, result.total) == ("failed", 1, 3)
    assert result.failed_test == "assert f(2) == 3"
    assert result.error_type == "AssertionError"


def test_test_raising_other_exception_is_a_failure_with_its_type() -> None:
    result = run(ADD_ONE, ["assert f(1) == 2", "assert f(None) == 1"], limits=FAST)
    assert (result.status, result.passed) == ("failed", 1)
    assert result.error_type == "TypeError"
    assert result.failed_test == "assert f(None) == 1"


def test_syntax_error_in_code_is_an_error() -> None:
    result = run("def f(x)\n    return x\n", ADD_ONE_TESTS, limits=FAST)
    assert (result.status, result.passed, result.error_type) == ("error", 0, "SyntaxError")


def test_runtime_error_in_code_is_an_error_with_its_type() -> None:
    result = run("def f(x):\n    return x\nundefined_name + 1\n", ADD_ONE_TESTS, limits=FAST)
    assert (result.status, result.passed, result.error_type) == ("error", 0, "NameError")
    assert "undefined_name" in (result.error_message or "")


def test_no_tests_passes_when_code_runs_cleanly() -> None:
    result = run("print('hello')", limits=FAST)
    assert (result.status, result.total, result.stdout) == ("passed", 0, "hello\n")


def test_setup_runs_before_code() -> None:
    result = run("def f(x):\n    return sqrt(x)\n", ["assert f(9) == 3"], setup="from math import sqrt", limits=FAST)
    assert result.ok, result


def test_multi_line_test_chunk() -> None:
    check = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n"
    assert run(ADD_ONE, [check, "check(f)"], limits=FAST).ok
    failing = run("def f(x):\n    return x\n", [check, "check(f)"], limits=FAST)
    assert (failing.status, failing.passed, failing.failed_test) == ("failed", 1, "check(f)")


def test_stdlib_imports_and_sandbox_local_files_work() -> None:
    code = (
        "import math, re, collections, itertools, heapq, functools, json, dataclasses, typing\n"
        "import tempfile, pathlib\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    pathlib.Path(d, 'a.txt').write_text('a')\n"
        "with open('notes.txt', 'w') as fh:\n"
        "    fh.write('ok')\n"
        "os_free = open('notes.txt').read()\n"
    )
    result = run(code, ["assert os_free == 'ok'", "assert Point(1, 2).y == 2"], limits=FAST)
    assert result.ok, result


def test_asyncio_dataclasses_and_pickle_work() -> None:
    code = (
        "from __future__ import annotations\n"
        "import asyncio, dataclasses, pickle\n"
        "@dataclasses.dataclass\n"
        "class P:\n"
        "    x: int\n"
        "async def g():\n"
        "    await asyncio.sleep(0)\n"
        "    return 3\n"
    )
    tests = ["assert asyncio.run(g()) == 3", "assert pickle.loads(pickle.dumps(P(1))) == P(1)"]
    result = run(code, tests, limits=FAST)
    assert result.ok, result


def test_recursion_error_is_an_ordinary_failure() -> None:
    result = run("def f(n):\n    return f(n + 1)\n", ["f(0)"], limits=FAST)
    assert (result.status, result.error_type) == ("failed", "RecursionError")


def test_run_many_keeps_order_and_runs_in_parallel() -> None:
    jobs = [(f"import time\ntime.sleep(0.5)\nX = {i}\n", [f"assert X == {i}"], "") for i in range(4)]
    jobs.append(("X = 1", ["assert X == 2"], ""))
    start = time.monotonic()
    results = run_many(jobs, limits=FAST, workers=5)
    elapsed = time.monotonic() - start
    assert [r.status for r in results] == ["passed"] * 4 + ["failed"]
    assert elapsed < 1.6, f"jobs ran serially ({elapsed:.2f}s)"
    assert run_many([]) == []


# --- hostile candidates -----------------------------------------------------------------------


def test_infinite_loop_times_out_and_process_is_gone() -> None:
    code = "import os\nprint(os.getpid(), flush=True)\nwhile True:\n    pass\n"
    result = run(code, limits=Limits(timeout_s=1.5))
    assert result.status == "timeout"
    assert 1.4 < result.duration_s < 3.0
    assert not process_exists(int(first_line(result)))


def test_cpu_limit_is_a_resource_limit_not_a_timeout() -> None:
    result = run("while True:\n    pass\n", limits=Limits(timeout_s=8, cpu_s=1))
    assert result.status == "resource-limit"


def test_fork_bomb_is_blocked_and_leaves_no_processes() -> None:
    code = "import os\nprint(os.getcwd(), flush=True)\nwhile True:\n    os.fork()\n"
    result = run(code, limits=FAST)
    assert (result.status, result.error_type) == ("error", "PermissionError")
    assert processes_mentioning(first_line(result)) == []


def test_huge_allocation_is_a_resource_limit() -> None:
    result = run("x = bytearray(10 * 1024**3)", limits=FAST)
    assert (result.status, result.error_type) == ("resource-limit", "MemoryError")


def test_file_size_limit_is_a_resource_limit() -> None:
    code = "with open('big.bin', 'wb') as fh:\n    fh.write(b'x' * (3 * 1024 * 1024))\n"
    result = run(code, limits=Limits(file_size_mb=1))
    assert result.status == "resource-limit"


# Many files, each under the file size limit, written slowly enough that the watch looks several times before the
# loop ends: without the cap the run ends "passed" with 200 MB (or 5,000 files) written.
MANY_FILES = "import time\nfor i in range(200):\n    open(f'f{i}', 'wb').write(b'x' * 2**20)\n    time.sleep(0.01)\n"
MANY_NAMES = "import time\nfor i in range(5000):\n    open(f'f{i}', 'w').close()\n    time.sleep(0.0005)\n"


def test_what_a_run_writes_in_all_is_capped() -> None:
    result = run(MANY_FILES, limits=Limits(timeout_s=20, cpu_s=10, disk_mb=16))
    assert (result.status, result.error_type) == ("resource-limit", "DiskLimit"), result
    assert "more than 16 MB" in (result.error_message or "")
    assert result.duration_s < 2.5  # stopped at a look, not at the end of the loop
    result = run(MANY_NAMES, limits=Limits(timeout_s=20, cpu_s=10, max_files=200))
    assert (result.status, result.error_type) == ("resource-limit", "DiskLimit"), result
    assert "more than 200 files" in (result.error_message or "")
    assert run("open('a.txt', 'w').write('x' * 1000)\n", limits=Limits(max_files=5)).status == "passed"


def test_socket_connection_is_blocked_and_never_arrives() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        result = run(code, limits=FAST)
        assert (result.status, result.error_type) == ("error", "PermissionError")
        readable, _, _ = select.select([listener], [], [], 0.3)
        assert readable == [], "a connection reached the listener"


def test_dns_lookup_and_unix_socket_connect_are_blocked() -> None:
    for code in (
        "import socket\nsocket.getaddrinfo('localhost', 80)\n",
        "import socket\nsocket.socket(socket.AF_UNIX).connect('/var/run/docker.sock')\n",
    ):
        result = run(code, limits=FAST)
        assert (result.status, result.error_type) == ("error", "PermissionError"), code


def test_writing_outside_the_sandbox_is_blocked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    target = home / ".bashrc"
    result = run(f"open({str(target)!r}, 'w').write('pwned')", limits=FAST)
    assert (result.status, result.error_type) == ("error", "PermissionError")
    assert not target.exists()

    via_os = run(f"import os\nos.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)", limits=FAST)
    assert via_os.error_type == "PermissionError"
    assert not target.exists()


def test_deleting_or_changing_files_outside_is_blocked(tmp_path: Path) -> None:
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    for code in (
        f"import os\nos.remove({str(victim)!r})",
        f"import os\nos.rename({str(victim)!r}, 'stolen.txt')",
        f"import os\nos.chmod({str(victim)!r}, 0)",
        f"import os\nos.truncate({str(victim)!r}, 0)",
        f"import shutil\nshutil.rmtree({str(tmp_path)!r})",
        f"import os\nos.mkdir({str(tmp_path / 'new')!r})",
    ):
        result = run(code, limits=FAST)
        assert result.error_type == "PermissionError", (code, result)
    assert victim.read_text() == "precious"
    assert os.stat(victim).st_mode & 0o777 != 0
    assert not (tmp_path / "new").exists()


def test_symlink_escape_is_blocked(tmp_path: Path) -> None:
    code = f"import os\nos.symlink({str(tmp_path)!r}, 'escape')\nopen('escape/owned.txt', 'w').write('x')\n"
    result = run(code, limits=FAST)
    assert result.error_type == "PermissionError"
    assert not (tmp_path / "owned.txt").exists()


def test_subprocess_is_blocked() -> None:
    result = run("import subprocess\nsubprocess.run(['echo', 'hi'])\n", limits=FAST)
    assert (result.status, result.error_type) == ("error", "PermissionError")
    assert "hi" not in result.stdout
    assert run("import os\nos.system('echo hi')", limits=FAST).error_type == "PermissionError"


def test_signalling_the_parent_is_blocked() -> None:
    result = run("import os\nos.kill(os.getppid(), 0)\n", limits=FAST)
    assert (result.status, result.error_type) == ("error", "PermissionError")


def test_raising_resource_limits_is_blocked() -> None:
    code = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n"
    assert run(code, limits=FAST).error_type == "PermissionError"


def test_ctypes_is_blocked() -> None:
    assert run("import ctypes\nctypes.CDLL(None).fork()\n", limits=FAST).error_type == "PermissionError"


def test_secrets_in_parent_environment_do_not_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-test-secret")
    assert run("import os", ['assert os.environ.get("OPENAI_API_KEY") is None'], limits=FAST).ok
    printed = run("import os\nprint(dict(os.environ))\n", limits=FAST)
    assert printed.ok
    assert "sk-test-secret" not in printed.stdout and "ghp-test-secret" not in printed.stdout
    assert "PATH" in printed.stdout


def test_huge_output_is_capped_without_growing_parent_memory() -> None:
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = "import sys\nchunk = 'x' * (1024 * 1024)\nfor _ in range(50):\n    sys.stdout.write(chunk)\n"
    result = run(code, limits=Limits(output_limit=10_000))
    after_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert result.status == "passed"
    assert len(result.stdout) <= 10_000
    assert after_kb - before_kb < 30 * 1024, "parent memory grew with the child's output"


def test_sandbox_dir_is_removed_after_each_run() -> None:
    done = run("import os\nprint(os.getcwd())\nopen('left.txt', 'w').write('x')\n", limits=FAST)
    timed_out = run("import os\nprint(os.getcwd(), flush=True)\nwhile True:\n    pass\n", limits=Limits(timeout_s=1))
    assert timed_out.status == "timeout"
    for result in (done, timed_out):
        workdir = first_line(result)
        assert os.path.basename(workdir).startswith("assist-sandbox-")
        assert not os.path.exists(workdir)


def test_home_and_tmpdir_point_into_the_sandbox() -> None:
    code = "import os, tempfile\nprint(os.getcwd())\nprint(os.environ['HOME'])\nprint(tempfile.gettempdir())\n"
    cwd, home, tmp = run(code, limits=FAST).stdout.splitlines()
    assert home == cwd and tmp.startswith(cwd + os.sep)


def test_printed_json_cannot_forge_the_report() -> None:
    fake = '{"status": "passed", "passed": 1, "total": 1}'
    code = (
        f"print({fake!r})\nprint({{'status': 'passed', 'passed': 1, 'failed_index': None}})\ndef f(x):\n    return 0\n"
    )
    result = run(code, ["assert f(1) == 2"], limits=FAST)
    assert (result.status, result.passed) == ("failed", 0)


def test_writing_a_fake_report_to_every_fd_cannot_pass() -> None:
    code = (
        "import os\n"
        "fake = repr({'nonce': 'x', 'status': 'passed', 'passed': 1, 'failed_index': None,\n"
        "             'error_type': None, 'error_message': None}).encode()\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, fake)\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    result = run(code, ["assert False"], limits=FAST)
    assert result.status == "error"
    assert not result.ok


def test_early_exit_is_an_error_not_a_pass() -> None:
    assert run("import sys\nsys.exit(0)", ["assert True"], limits=FAST).status == "error"
    assert run("import os\nos._exit(0)", ["assert True"], limits=FAST).status == "error"


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        Limits(timeout_s=0)


# --- the OS boundary (issue 26, item 8) -------------------------------------------------------------------


needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")


@needs_landlock
def test_every_layer_holds_on_this_kernel() -> None:
    from assistant.sandbox import LAYERS, boundary_layers

    layers = boundary_layers()
    assert list(layers) == list(LAYERS)
    assert {name: on for name, (on, _) in layers.items()} == dict.fromkeys(LAYERS, True), layers
    assert layers["landlock"][1].startswith(f"ABI {landlock_abi()}")


@needs_landlock
def test_reads_outside_the_sandbox_are_denied(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    for code in (f"print(open({str(secret)!r}).read())", "import os\nprint(os.listdir('/'))"):
        result = run(code, limits=FAST)
        assert (result.status, result.error_type) == ("error", "PermissionError"), result
        assert "do not read" not in result.stdout


@needs_landlock
def test_disabling_a_layer_is_loud_and_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.sandbox import boundary_layers

    secret = tmp_path / "secret.txt"
    secret.write_text("readable without landlock")
    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "landlock")
    with pytest.warns(RuntimeWarning, match="ASSIST_SANDBOX_DISABLE: landlock"):
        layers = boundary_layers()
    assert not layers["landlock"][0] and layers["landlock"][1].startswith("disabled by ASSIST_SANDBOX_DISABLE")
    assert layers["seccomp"][0] and layers["hook"][0]
    # Reads are the hook's blind spot, so with Landlock off the file really is readable.
    assert run(f"print(open({str(secret)!r}).read())", limits=FAST).stdout == "readable without landlock\n"


def test_unknown_layer_name_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.errors import UsageError

    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "landlok")
    with pytest.raises(UsageError, match="landlok"):
        run("pass", limits=FAST)


def test_stdlib_that_looks_at_frames_still_works() -> None:
    # sys._getframe is denied with an error that is also a ValueError, which these modules catch.
    code = (
        "import collections, enum, inspect, logging, typing\n"
        "T = typing.TypeVar('T')\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "Color = enum.Enum('Color', 'RED GREEN')\n"
        "class Row(typing.NamedTuple):\n"
        "    a: int\n"
        "logging.getLogger('x').warning('logged')\n"
        "def f(a, b=2):\n"
        "    return a + b\n"
    )
    tests = ["assert Point(1, 2).y == 2 and Color.RED.value == 1", "assert str(inspect.signature(f)) == '(a, b=2)'"]
    result = run(code, tests, limits=FAST)
    assert result.ok, result
    assert "logged" in result.stderr


def test_candidate_replacing_exec_cannot_skip_the_tests() -> None:
    code = "import builtins\nbuiltins.exec = lambda *args, **kwargs: None\nbuiltins.compile = lambda *a, **k: None\n"
    result = run(code, ["assert False"], limits=FAST)
    assert (result.status, result.error_type) == ("failed", "AssertionError")


def test_exit_status_without_the_harness_proof_is_not_a_pass() -> None:
    # posix._exit is taken away, but a fresh posix module can be made; exiting with the "passed" code
    # without the proof the harness holds is an error.
    code = "import _imp, importlib.machinery as m\n_imp.create_builtin(m.ModuleSpec('posix', None))._exit(64)\n"
    result = run(code, ["assert False"], limits=FAST)
    assert (result.status, result.error_type) == ("error", "SandboxError")
    assert "without the harness's verdict" in (result.error_message or "")


def test_runner_is_stdlib_only_and_runs_by_path(tmp_path: Path) -> None:
    import marshal
    import subprocess

    from assistant.sandbox import RUNNER_PATH

    report_r, report_w = os.pipe()
    job = {
        "report_fd": report_w,
        "setup": "",
        "code": "def f():\n    return 1\n",
        "tests": ["assert f() == 1"],
        "memory_mb": 1024,
        "cpu_s": 5,
        "file_size_mb": 16,
        "deadline": time.monotonic() + 10,
        "disable": [],
    }
    payload = tmp_path / "job"
    payload.write_bytes(marshal.dumps(job))
    subprocess.run(
        [sys.executable, "-s", "-S", "-P", "-B", str(RUNNER_PATH), str(payload)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        pass_fds=(report_w,),
        check=True,
        timeout=20,
    )
    os.close(report_w)
    with os.fdopen(report_r, "rb") as handle:
        report = ast.literal_eval(handle.read().decode())
    assert (report["status"], report["passed"]) == ("passed", 1)
    assert not payload.exists()


def test_without_landlock_the_parent_makes_itself_non_dumpable() -> None:
    # In a child process: the guard changes the calling process for good.
    import subprocess

    probe = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from assistant import sandbox\nfrom assistant.sandbox import boundary\n"
        "before = boundary.dumpable()\n"
        "layers = sandbox.boundary_layers()\n"
        "print(before, boundary.dumpable(), layers['landlock'][1])\n"
    )
    env = {**os.environ, "ASSIST_SANDBOX_DISABLE": "landlock"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("True False disabled by ASSIST_SANDBOX_DISABLE; assist made itself non-dumpable")


def test_seccomp_filter_checks_the_architecture_first() -> None:
    import struct

    from assistant.sandbox import boundary

    for machine, arch in (("x86_64", 0xC000003E), ("aarch64", 0xC00000B7)):
        program = boundary.seccomp_program(4321, machine)
        code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
        assert code[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
        assert code[1] == (0x15, 1, 0, arch)  # this arch: go on; any other ...
        assert code[2] == (0x06, 0, 0, boundary.SECCOMP_RET_KILL_PROCESS)  # ... kills the process
        assert any(k == 4321 for _, _, _, k in code)  # signals only to our own pid
    assert not boundary.supported_arch("armv7l")


# --- memory that RLIMIT_AS does not count, deep trees (issue 67, items 1 and 2) ------------------------------------

SECCOMP = sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "aarch64")
needs_seccomp = pytest.mark.skipif(not SECCOMP, reason="no seccomp filter for this platform")
# 32 memfds of 16 MB: 512 MB of shared memory, twice the run's 256 MB limit, if memfd_create is allowed.
MEMFD_BOMB = (
    "import os\nheld = 0\nfor _ in range(32):\n    fd = os.memfd_create('x')\n"
    "    os.posix_fallocate(fd, 0, 16 << 20)\n    held += 16 << 20\n"
)


@needs_seccomp
@pytest.mark.parametrize("disable", ["", "hook"])
def test_memfd_pages_cannot_pass_the_memory_limit(disable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # RLIMIT_AS does not count a memfd's pages until they are mapped: a run held 2 GB under a 256 MB limit.
    if disable:
        monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", disable)  # the kernel's filter alone
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run(MEMFD_BOMB, ["assert held > 256 << 20"], limits=Limits(timeout_s=10.0, cpu_s=5, memory_mb=256))
    assert (result.status, result.error_type) == ("error", "PermissionError"), result


def test_open_files_are_capped_near_the_memory_limit() -> None:
    # A file deleted while open keeps its pages where neither RLIMIT_AS nor the disk watch sees them (RAM, on a
    # tmpfs /tmp): the run inherited 20,000 open files, 20,000 x 16 MB in all.
    code = "import os\nfds = []\nwhile True:\n    fds.append(os.open('/dev/null', os.O_RDONLY))\n"
    result = run(code, limits=FAST)
    assert (result.status, result.error_type) == ("resource-limit", "OSError"), result
    assert "Too many open files" in (result.error_message or "")
    opened = run("import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE))", limits=FAST)
    assert opened.stdout.strip() == "(64, 64)"  # 1,024 MB / 16 MB files, the default limits


def test_a_deep_tree_is_a_resource_limit_and_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # shutil.rmtree recurses in Python 3.11: 3,000 nested folders raised RecursionError out of sandbox.run and
    # left the run's folder behind.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
    result = run(code, ["assert True"], limits=FAST)
    assert (result.status, result.error_type) == ("resource-limit", "DiskLimit"), result
    assert "nested folders more than 64 deep" in (result.error_message or "")
    assert list(tmp_path.iterdir()) == []  # no assist-sandbox-* folder left


def test_the_project_filter_refuses_memfd_in_every_abi_and_allows_the_rest() -> None:
    import struct

    from assistant.sandbox import boundary

    enosys = boundary.SECCOMP_RET_ERRNO | 38
    for machine, arch, compat, numbers in (
        ("x86_64", 0xC000003E, 0x40000003, {319, 447, 0x40000000 | 319, 0x40000000 | 447, 356}),
        ("aarch64", 0xC00000B7, 0x40000028, {279, 447, 385}),
    ):
        program = boundary.memfd_program(machine)
        code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
        assert code[0] == (0x20, 0, 0, 4) and code[1][3] == arch and code[2][3] == compat  # the arch, first
        assert {k for op, _, _, k in code if op == 0x15} - {arch, compat} == numbers
        returns = [k for op, _, _, k in code if op == 0x06]
        assert returns.count(enosys) == 1 and boundary.SECCOMP_RET_KILL_PROCESS not in returns
        for index, (op, jt, _, k) in enumerate(code):  # every number jumps to the one ENOSYS return
            if op == 0x15 and k in numbers:
                assert code[index + 1 + jt] == (0x06, 0, 0, enosys)
