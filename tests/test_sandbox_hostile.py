"""Hostile programs through the real entry point, `assistant.sandbox.run`, each checked from outside.

Every program runs in a helper parent process (a small Python that sets OPENAI_API_KEY=sk-canary-... in its
own environment and calls `sandbox.run`), so "the parent" the candidate attacks is a real one holding a
real secret. After each run the test checks, whatever the candidate claims:

* the expected outcome (status, and error type where it says something);
* the parent is alive and its secret appears nowhere in the candidate's output or error;
* a directory outside the sandbox is unchanged (its canary file's content, mode and mtime, no new files);
* nothing reached our TCP, UDP, unix and abstract-unix listeners;
* no process is left over: none whose command line names this run's sandbox dir or the program's marker.

Programs with `disable` run with those layers off (ASSIST_SANDBOX_DISABLE), to show that the kernel's
layers hold on their own; `needs` names what must exist on this kernel for that, else the test skips and
says why. `python -m tests.test_sandbox_hostile` prints the table program | expected | got.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import landlock_abi as _landlock_abi

REPO = Path(__file__).resolve().parent.parent

# The helper parent: imports only assistant.sandbox (not the package's heavy __init__), runs one program.
HELPER = r"""
import json, os, sys, tempfile, types
config = json.load(sys.stdin)
package = types.ModuleType("assistant")
package.__path__ = [os.path.join(os.getcwd(), "assistant")]
sys.modules["assistant"] = package
from assistant import sandbox
tempfile.tempdir = config["base"]  # every sandbox dir of this run lives here: the orphan check looks for it
code = config["code"].replace("@PARENT_PID@", str(os.getpid()))
limits = sandbox.Limits(**config["limits"])
result = sandbox.run(code, config["tests"], limits=limits)
print(json.dumps({"status": result.status, "passed": result.passed, "total": result.total,
                  "error_type": result.error_type, "error_message": result.error_message,
                  "failed_test": result.failed_test, "stdout": result.stdout, "stderr": result.stderr}))
"""


@dataclass(frozen=True)
class Hostile:
    """One hostile program and what must come of it."""

    name: str
    code: str
    expected: str  # the status
    error_type: str | None = None  # checked when given
    tests: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # kernel layers it relies on when the hook is off: landlock, scope, seccomp
    disable: tuple[str, ...] = ()  # layers turned off for this run
    limits: dict[str, float] = field(default_factory=dict)
    category: str = ""


PERMISSION = "PermissionError"
MEMFD_BOMB = (
    "import os\nheld = 0\nfor _ in range(32):\n    fd = os.memfd_create('x')\n"
    "    os.posix_fallocate(fd, 0, 16 << 20)\n    held += 16 << 20\nprint(held >> 20, 'MB held')\n"
)
EXPECTED_LIMITS = {"timeout_s": 8.0, "cpu_s": 5}

# Placeholders: @OUTSIDE@ (a dir outside the sandbox, holding canary.txt), @CANARY@, @PARENT_PID@ (the
# helper), @MARKER@ (a unique number, usable as `sleep` seconds), @TCP_PORT@, @UDP_PORT@, @UNIX_PATH@ and
# @UNIX_DGRAM@ (unix stream and datagram listeners),
# @ABSTRACT@ (an abstract unix socket name), @REPO@ (this repo), @HOME@ (the real home directory).
PROGRAMS: list[Hostile] = [
    # --- network and name look-ups ---
    Hostile("tcp_connect", "import socket\nsocket.create_connection(('127.0.0.1', @TCP_PORT@), timeout=2)",
            "error", PERMISSION, category="network"),
    Hostile("tcp_connect_raw_socket_module",
            "import _socket\ns = _socket.socket()\ns.settimeout(2)\ns.connect(('127.0.0.1', @TCP_PORT@))",
            "error", PERMISSION, category="network"),
    Hostile("udp_sendto", "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', "
            "('127.0.0.1', @UDP_PORT@))", "error", PERMISSION, category="network"),
    Hostile("tcp_bind_listen", "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()",
            "error", PERMISSION, category="network"),
    Hostile("http_urlopen", "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:@TCP_PORT@/', timeout=2)",
            "error", "URLError", category="network"),
    Hostile("dns_getaddrinfo", "import socket\nsocket.getaddrinfo('localhost', 80)", "error", PERMISSION,
            category="network"),
    Hostile("dns_gethostbyname", "import socket\nsocket.gethostbyname('example.com')", "error", PERMISSION,
            category="network"),
    Hostile("unix_socket_connect", "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('@UNIX_PATH@')",
            "error", PERMISSION, category="network"),
    Hostile("abstract_unix_socket_connect",
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0@ABSTRACT@')",
            "error", PERMISSION, category="network"),
    Hostile("socketpair_dgram_redirect",
            "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
            "a.sendto(b'x', '@UNIX_DGRAM@')", "error", PERMISSION, category="network"),
    # --- process creation ---
    Hostile("subprocess_run", "import subprocess\nsubprocess.run(['sleep', '@MARKER@'])", "error", PERMISSION,
            category="process"),
    Hostile("os_system", "import os\nos.system('setsid sleep @MARKER@ &')", "error", PERMISSION, category="process"),
    Hostile("os_fork", "import os\nif os.fork() == 0:\n    import time\n    time.sleep(30)\n", "error", PERMISSION,
            category="process"),
    Hostile("fork_bomb", "import os\nwhile True:\n    os.fork()\n", "error", PERMISSION, category="process"),
    Hostile("os_execv", "import os\nos.execv('/bin/sleep', ['sleep', '@MARKER@'])", "error", PERMISSION,
            category="process"),
    Hostile("os_posix_spawn", "import os\nos.posix_spawn('/bin/sleep', ['sleep', '@MARKER@'], {})", "error",
            PERMISSION, category="process"),
    Hostile("os_spawnv", "import os\nos.spawnv(os.P_NOWAIT, '/bin/sleep', ['sleep', '@MARKER@'])", "error",
            PERMISSION, category="process"),
    Hostile("pty_spawn", "import pty\npty.spawn(['sleep', '@MARKER@'])", "error", PERMISSION, category="process"),
    Hostile("multiprocessing_process", "import multiprocessing, time\n"
            "multiprocessing.Process(target=time.sleep, args=(30,)).start()", "error", PERMISSION,
            category="process"),
    Hostile("posixsubprocess_fork_exec", "import _posixsubprocess\n_posixsubprocess.fork_exec()", "error",
            PERMISSION, category="process"),
    Hostile("setsid_escape_process_group", "import os\nos.setsid()", "error", PERMISSION, category="process"),
    Hostile("setpgid_escape_process_group", "import os\nos.setpgid(0, 0)", "error", PERMISSION, category="process"),
    Hostile("thread_outlives_the_tests", "import threading, time\n"
            "threading.Thread(target=time.sleep, args=(30,), daemon=False).start()\ndef f():\n    return 1\n",
            "passed", tests=("assert f() == 1",), category="threads"),
    Hostile("thread_storm", "import threading\nthreads = [threading.Thread(target=sum, args=(range(1000),)) "
            "for _ in range(200)]\nfor t in threads:\n    t.start()\nfor t in threads:\n    t.join()\n",
            "passed", category="threads"),
    # --- signals ---
    Hostile("kill_parent", "import os, signal\nos.kill(@PARENT_PID@, signal.SIGKILL)", "error", PERMISSION,
            category="signals"),
    Hostile("kill_runner_ppid", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "error", PERMISSION,
            category="signals"),
    Hostile("kill_everything", "import os, signal\nos.kill(-1, signal.SIGKILL)", "error", PERMISSION,
            category="signals"),
    Hostile("killpg_own_group", "import os, signal\nos.killpg(0, signal.SIGKILL)", "error", PERMISSION,
            category="signals"),
    Hostile("kill_init", "import os, signal\nos.kill(1, signal.SIGTERM)", "error", PERMISSION, category="signals"),
    Hostile("escape_a_pidfd_kill_parent", "import os, signal\n"
            "signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)\n"
            "signal.pidfd_send_signal(os.pidfd_open(@PARENT_PID@), signal.SIGKILL)", "error", PERMISSION,
            category="escape (a)"),
    Hostile("escape_a_pidfd_kill_parent_no_hook", "import os, signal\n"
            "signal.pidfd_send_signal(os.pidfd_open(@PARENT_PID@), signal.SIGKILL)", "error", PERMISSION,
            needs=("seccomp",), disable=("hook",), category="escape (a)"),
    Hostile("kill_parent_no_hook", "import os, signal\nos.kill(@PARENT_PID@, signal.SIGKILL)", "error", PERMISSION,
            needs=("seccomp",), disable=("hook",), category="signals"),
    Hostile("kill_parent_landlock_scope_only", "import os, signal\nos.kill(@PARENT_PID@, signal.SIGKILL)", "error",
            PERMISSION, needs=("scope",), disable=("hook", "seccomp"), category="signals"),
    Hostile("signal_handler_frame_walk", "import signal\nsignal.signal(signal.SIGUSR1, lambda n, f: None)", "error",
            "ValueError", category="introspection"),
    # --- native code, rlimits, interpreter internals ---
    Hostile("ctypes_fork", "import ctypes\nctypes.CDLL(None).fork()", "error", PERMISSION, category="ctypes"),
    Hostile("ctypes_via_imp_create_dynamic", "import _imp, importlib.machinery as m, sys\n"
            "spec = m.PathFinder.find_spec('_ctypes', sys.path)\n_imp.create_dynamic(spec).dlopen(None, 0)", "error",
            PERMISSION,
            category="ctypes"),
    Hostile("rebuilt_posix_exit_forges_pass", "import _imp, importlib.machinery as m\n"
            "posix = _imp.create_builtin(m.ModuleSpec('posix', None))\nposix._exit(64)", "error", "SandboxError",
            tests=("assert False",), category="forgery"),
    Hostile("subinterpreter_without_hook", "import _xxsubinterpreters as x\n"
            "x.run_string(x.create(), 'import os; os._exit(64)')", "error", PERMISSION, category="forgery"),
    Hostile("raise_rlimit_as", "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))", "error",
            PERMISSION, category="rlimits"),
    Hostile("prlimit_cpu", "import resource\nresource.prlimit(0, resource.RLIMIT_CPU, (-1, -1))", "error",
            PERMISSION, category="rlimits"),
    # --- files outside the sandbox ---
    Hostile("write_outside_open", "open('@OUTSIDE@/pwned.txt', 'w').write('x')", "error", PERMISSION,
            category="files"),
    Hostile("overwrite_canary", "open('@CANARY@', 'w').write('pwned')", "error", PERMISSION, category="files"),
    Hostile("append_canary", "open('@CANARY@', 'a').write('pwned')", "error", PERMISSION, category="files"),
    Hostile("write_outside_os_open", "import os\nos.open('@OUTSIDE@/pwned.txt', os.O_WRONLY | os.O_CREAT)", "error",
            PERMISSION, category="files"),
    Hostile("write_outside_dir_fd", "import os\nfd = os.open('@OUTSIDE@', os.O_RDONLY | os.O_DIRECTORY)\n"
            "os.open('pwned.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd)", "error", PERMISSION, category="files"),
    Hostile("write_outside_pathlib", "import pathlib\npathlib.Path('@OUTSIDE@', 'pwned.txt').write_text('x')",
            "error", PERMISSION, category="files"),
    Hostile("delete_canary", "import os\nos.remove('@CANARY@')", "error", PERMISSION, category="files"),
    Hostile("rename_canary_inside", "import os\nos.rename('@CANARY@', 'stolen.txt')", "error", PERMISSION,
            category="files"),
    Hostile("chmod_canary", "import os\nos.chmod('@CANARY@', 0)", "error", PERMISSION, category="files"),
    Hostile("chown_canary", "import os\nos.chown('@CANARY@', 65534, 65534)", "error", PERMISSION, category="files"),
    Hostile("utime_canary", "import os\nos.utime('@CANARY@', (0, 0))", "error", PERMISSION, category="files"),
    Hostile("truncate_canary", "import os\nos.truncate('@CANARY@', 0)", "error", PERMISSION, category="files"),
    Hostile("rmtree_outside", "import shutil\nshutil.rmtree('@OUTSIDE@')", "error", PERMISSION, category="files"),
    Hostile("mkdir_outside", "import os\nos.mkdir('@OUTSIDE@/new')", "error", PERMISSION, category="files"),
    Hostile("symlink_escape", "import os\nos.symlink('@OUTSIDE@', 'escape')\nopen('escape/pwned.txt', 'w')",
            "error", PERMISSION, category="files"),
    Hostile("hardlink_canary_then_write", "import os\nos.link('@CANARY@', 'alias')\nopen('alias', 'w').write('x')",
            "error", PERMISSION, category="files"),
    # (d) The hook checks realpath("cur/l/...") and then the kernel opens it: cur flips between A (A/l is a dir
    # inside) and B (B/l links outside), so a check that saw A can be followed by an open through B.
    Hostile("escape_d_symlink_swap_race", """
import os, sys, threading, time
sys.setswitchinterval(1e-6)
os.makedirs('A/l')
os.mkdir('B')
os.symlink('@OUTSIDE@', 'B/l')
os.symlink('A', 'cur')
stop = []
def swap():
    flip = 0
    while not stop:
        try:
            os.symlink('B' if flip else 'A', 'next')
            os.replace('next', 'cur')
        except OSError:
            pass
        flip ^= 1
thread = threading.Thread(target=swap)
thread.start()
attempts, deadline = 0, time.monotonic() + 3
while attempts < 3000 and time.monotonic() < deadline:
    attempts += 1
    try:
        with open('cur/l/raced.txt', 'w') as handle:
            handle.write('x')
    except OSError:
        pass
stop.append(True)
thread.join()
print('attempts', attempts)
""", "passed", needs=("landlock",), category="escape (d)"),
    Hostile("write_outside_no_hook", "open('@OUTSIDE@/pwned.txt', 'w').write('x')", "error", PERMISSION,
            needs=("landlock",), disable=("hook",), category="files"),
    Hostile("write_outside_landlock_only", "open('@OUTSIDE@/pwned.txt', 'w').write('x')", "error", PERMISSION,
            needs=("landlock",), disable=("hook", "seccomp"), category="files"),
    Hostile("delete_canary_no_hook", "import os\nos.remove('@CANARY@')", "error", PERMISSION, needs=("landlock",),
            disable=("hook",), category="files"),
    # --- sqlite ---
    Hostile("sqlite_connect_outside", "import sqlite3\nsqlite3.connect('@OUTSIDE@/db.sqlite').execute('create table "
            "t(x)')", "error", PERMISSION, category="sqlite"),
    Hostile("escape_c_sqlite_attach", "import sqlite3\ndb = sqlite3.connect(':memory:')\n"
            "db.execute(\"attach database '@OUTSIDE@/attached.db' as x\")\ndb.execute('create table x.t(v)')",
            "error", "OperationalError", needs=("landlock",), category="escape (c)"),
    Hostile("escape_c_sqlite_vacuum_into", "import sqlite3\ndb = sqlite3.connect(':memory:')\n"
            "db.execute('create table t(v)')\ndb.execute(\"vacuum into '@OUTSIDE@/vacuumed.db'\")",
            "error", "OperationalError", needs=("landlock",), category="escape (c)"),
    Hostile("sqlite_connect_outside_no_hook", "import sqlite3\nsqlite3.connect('@OUTSIDE@/db.sqlite')"
            ".execute('create table t(x)')", "error", "OperationalError", needs=("landlock",), disable=("hook",),
            category="sqlite"),
    # --- reading what is not the candidate's ---
    Hostile("escape_b_parent_environ", "print(open('/proc/@PARENT_PID@/environ').read())", "error", PERMISSION,
            category="escape (b)"),
    Hostile("escape_b_parent_environ_no_hook", "print(open('/proc/@PARENT_PID@/environ').read())", "error",
            PERMISSION, needs=("landlock",), disable=("hook",), category="escape (b)"),
    # Without Landlock (and without the hook), /proc/<parent>/environ stays closed: the runner drops every
    # capability (enough against a root parent, which holds more) and assist makes itself non-dumpable
    # (what protects a non-root user's parent).
    Hostile("escape_b_parent_environ_no_landlock_no_hook", "print(open('/proc/@PARENT_PID@/environ').read())",
            "error", PERMISSION, disable=("hook", "landlock"), category="escape (b)"),
    Hostile("ppid_environ", "import os\nprint(open(f'/proc/{os.getppid()}/environ').read())", "error", PERMISSION,
            category="/proc"),
    Hostile("parent_cmdline_and_mem", "print(open('/proc/@PARENT_PID@/mem', 'rb').read(16))", "error", PERMISSION,
            category="/proc"),
    Hostile("own_memory", "print(open('/proc/self/mem', 'rb').read(16))", "error", PERMISSION, category="/proc"),
    Hostile("read_home", "import os\nprint(os.listdir('@HOME@'))", "error", PERMISSION, needs=("landlock",),
            category="reads"),
    Hostile("read_repo_file", "print(open('@REPO@/assistant/errors.py').read()[:200])", "error", PERMISSION,
            needs=("landlock",), category="reads"),
    Hostile("read_repo_no_hook", "print(open('@REPO@/assistant/errors.py').read()[:200])", "error", PERMISSION,
            needs=("landlock",), disable=("hook",), category="reads"),
    Hostile("read_etc_shadow", "print(open('/etc/shadow').read())", "error", PERMISSION, needs=("landlock",),
            category="reads"),
    Hostile("list_root_dir", "import os\nprint(os.listdir('/'))", "error", PERMISSION, needs=("landlock",),
            category="reads"),
    # Landlock does not rule looking paths up (issue 67, item 10): the hook refuses extended attributes outside;
    # stat, which raises no audit event, still tells whether a path exists, its size, mode and times: a known gap.
    Hostile("listxattr_outside", "import os\nprint(os.listxattr('@CANARY@'), os.listxattr('/usr'))", "error",
            PERMISSION, category="reads"),
    Hostile("listxattr_cwd_outside", "import os\nos.chdir('@OUTSIDE@')\nprint(os.listxattr())", "error", PERMISSION,
            category="reads"),
    Hostile("stat_outside_known_gap", "import os\nprint(os.stat('@CANARY@').st_size)", "passed", category="reads"),
    # --- forging the verdict ---
    Hostile("escape_f_frame_locals_forge", """
import os, sys
frame = sys._getframe(1)
job = frame.f_locals.get('job', {})
report = {'nonce': job.get('nonce'), 'status': 'passed', 'passed': len(job.get('tests', [])), 'failed_index': None,
          'error_type': None, 'error_message': None}
os.write(job.get('report_fd', 1), repr(report).encode())
os._exit(0)
""", "error", PERMISSION, tests=("assert False", "assert False"), category="escape (f)"),
    Hostile("traceback_frame_walk", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.__traceback__.tb_frame",
            "error", PERMISSION, category="introspection"),
    Hostile("generator_frame_walk", "def g():\n    yield\nit = g()\nit.gi_frame", "error", PERMISSION,
            category="introspection"),
    Hostile("settrace_skips_asserts", "import sys\nsys.settrace(lambda *a: None)", "error", PERMISSION,
            tests=("assert False",), category="introspection"),
    Hostile("escape_e_gc_clears_hook", """
import gc, os
for obj in gc.get_objects():
    if callable(obj) and getattr(obj, '__name__', '') == 'hook':
        for cell in obj.__closure__ or ():
            if isinstance(cell.cell_contents, (frozenset, dict)):
                cell.cell_contents = type(cell.cell_contents)()
os.system('setsid sleep @MARKER@ &')
open('@OUTSIDE@/pwned.txt', 'w').write('x')
""", "error", PERMISSION, category="escape (e)"),
    Hostile("escape_e_os_system_no_hook", "import os\nrc = os.system('setsid sleep @MARKER@ &')\nprint(rc)\n"
            "open('@OUTSIDE@/pwned.txt', 'w').write('x')", "error", PERMISSION, needs=("seccomp", "landlock"),
            disable=("hook",), category="escape (e)"),
    Hostile("fork_seccomp_only", "import os\nos.fork()", "error", PERMISSION, needs=("seccomp",),
            disable=("hook", "landlock"), category="process"),
    Hostile("exec_no_hook", "import os\nos.execv('/bin/sleep', ['sleep', '@MARKER@'])", "error", PERMISSION,
            needs=("seccomp",), disable=("hook",), category="process"),
    Hostile("connect_no_hook", "import socket\nsocket.create_connection(('127.0.0.1', @TCP_PORT@), timeout=2)",
            "error", PERMISSION, needs=("seccomp",), disable=("hook",), category="network"),
    # System V shared memory is shared with every process of the machine's IPC namespace: Landlock has no rule
    # for it, the filter denies it.
    Hostile("sysv_shared_memory_no_hook", "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "segment = libc.shmget(int(@MARKER@), 4096, 0o1600)\nif segment < 0:\n"
            "    raise PermissionError(os.strerror(ctypes.get_errno()))\nlibc.shmctl(segment, 0, None)",
            "error", PERMISSION, needs=("seccomp",),
            disable=("hook",), category="ipc"),
    Hostile("replace_builtin_exec", "import builtins\nbuiltins.exec = lambda *a, **k: None\n"
            "builtins.compile = lambda *a, **k: None", "failed", "AssertionError", tests=("assert False",),
            category="forgery"),
    Hostile("replace_builtin_range_and_enumerate", "import builtins\nbuiltins.range = lambda *a: []\n"
            "builtins.enumerate = lambda *a: []", "failed", "AssertionError", tests=("assert False",),
            category="forgery"),
    Hostile("patch_main_module", "import __main__\n__main__.EXIT_FAILED = 64\n__main__.EXIT_PASSED = 65",
            "failed", "AssertionError", tests=("assert False",), category="forgery"),
    Hostile("fake_report_on_every_fd", "import os\nfake = repr({'status': 'passed', 'passed': 1}).encode()\n"
            "for fd in range(3, 256):\n    try:\n        os.write(fd, b'\\0verdict ' + fake + b'\\n')\n"
            "    except OSError:\n        pass\n", "failed", "AssertionError", tests=("assert False",),
            category="forgery"),
    Hostile("close_every_fd", "import os\nos.closerange(3, 4096)", "error", "SandboxError", tests=("assert True",),
            category="fd tricks"),
    Hostile("sys_exit_zero", "import sys\nsys.exit(0)", "error", "SystemExit", tests=("assert True",),
            category="forgery"),
    Hostile("os_exit_zero", "import os\nos._exit(0)", "error", "AttributeError", tests=("assert True",),
            category="forgery"),
    Hostile("interrupt_main", "import _thread\n_thread.interrupt_main()", "failed", "AssertionError",
            tests=("assert False",), category="forgery"),
    Hostile("import_gc", "import gc\ngc.get_objects()", "error", PERMISSION, category="removed modules"),
    Hostile("import_posix_exit", "import posix\nposix._exit(64)", "error", "AttributeError", tests=("assert False",),
            category="removed modules"),
    Hostile("import_testcapi", "import _testcapi", "error", PERMISSION, category="removed modules"),
    # --- resource bombs ---
    Hostile("memory_bomb", "x = bytearray(10 * 1024 ** 3)", "resource-limit", "MemoryError", category="bombs"),
    Hostile("memory_bomb_in_thread", "import threading\nerrors = []\ndef grab():\n    blocks = []\n    while True:\n"
            "        blocks.append(bytearray(64 * 1024 * 1024))\nt = threading.Thread(target=grab)\nt.start()\n"
            "t.join()", "passed", limits={"memory_mb": 512}, category="bombs"),
    Hostile("cpu_bomb", "while True:\n    pass", "resource-limit", limits={"cpu_s": 1, "timeout_s": 8},
            category="bombs"),
    Hostile("wall_clock_sleep", "import time\ntime.sleep(60)", "timeout", "Timeout", limits={"timeout_s": 1.5},
            category="bombs"),
    Hostile("file_size_bomb", "open('big.bin', 'wb').write(b'x' * (3 * 1024 * 1024))", "resource-limit",
            limits={"file_size_mb": 1}, category="bombs"),
    Hostile("stdout_bomb", "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(50):\n    sys.stdout.write(chunk)",
            "passed", limits={"output_limit": 10_000}, category="bombs"),
    Hostile("recursion_bomb", "import sys\nsys.setrecursionlimit(10 ** 7)\ndef f(n):\n    return f(n + 1)\nf(0)",
            "resource-limit", limits={"cpu_s": 1, "memory_mb": 256}, category="bombs"),
    # --- memory RLIMIT_AS does not count, deep trees (issue 67) ---
    # A memfd's pages count against RLIMIT_AS only once mapped: 32 x 16 MB, twice the limit, held unmapped.
    Hostile("memfd_shmem_bomb", MEMFD_BOMB, "error", PERMISSION, limits={"memory_mb": 256}, category="bombs"),
    Hostile("memfd_shmem_bomb_no_hook", MEMFD_BOMB, "error", PERMISSION, needs=("seccomp",), disable=("hook",),
            limits={"memory_mb": 256}, category="bombs"),
    # Files deleted while open keep their pages (RAM on a tmpfs /tmp): open files are capped near the memory limit.
    Hostile("open_files_bomb", "import os\nfiles = []\nwhile True:\n    files.append(open('f', 'wb'))\n"
            "    os.unlink('f')\n", "resource-limit", "OSError", category="bombs"),
    # shutil.rmtree recursed: the parent's cleanup raised RecursionError and left the folder behind.
    Hostile("deep_tree", "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n",
            "resource-limit", "DiskLimit", tests=("assert True",), category="bombs"),
    Hostile("deep_tree_read_only", "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
            "open('f', 'w').close()\nos.chmod('.', 0o500)\nos.chmod('..', 0o500)\n", "resource-limit", "DiskLimit",
            tests=("assert True",), category="bombs"),
]  # fmt: skip

NAMES = [program.name for program in PROGRAMS]
assert len(NAMES) == len(set(NAMES)), "program names must be unique"


# --- what this kernel offers (probed here, independently of the code under test) ---------------------------


def _seccomp() -> bool:
    if not sys.platform.startswith("linux") or os.uname().machine not in ("x86_64", "aarch64"):
        return False
    return "Seccomp:" in Path("/proc/self/status").read_text()


ABI = _landlock_abi()
KERNEL = {"landlock": ABI >= 1, "scope": ABI >= 6, "seccomp": _seccomp()}
WHY_MISSING = {
    "landlock": "the kernel has no Landlock",
    "scope": f"Landlock ABI {ABI} has no signal scoping (needs 6)",
    "seccomp": "no seccomp filter for this platform",
}


def missing(program: Hostile) -> str | None:
    """Why this kernel cannot hold the program without the layers it disables; None when it can."""
    for need in program.needs:
        if not KERNEL[need]:
            return WHY_MISSING[need]
    return None


# --- the outside: listeners, a canary dir, a helper parent ----------------------------------------------------


class Outside:
    """Everything outside the sandbox that a program may attack, and the checks that it was not reached."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "outside"
        self.dir.mkdir(parents=True)
        self.canary = self.dir / "canary.txt"
        self.canary.write_text("precious")
        self.canary.chmod(0o644)
        self.canary_stat = self.canary.stat()
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix_path = str(root / "listener.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen()
        self.abstract_name = f"assist-hostile-{secrets.token_hex(6)}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen()
        self.unix_dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.unix_dgram_path = str(root / "listener-dgram.sock")
        self.unix_dgram.bind(self.unix_dgram_path)

    def close(self) -> None:
        for sock in (self.tcp, self.udp, self.unix, self.abstract, self.unix_dgram):
            sock.close()

    def substitute(self, code: str, marker: str) -> str:
        values = {
            "@OUTSIDE@": str(self.dir),
            "@CANARY@": str(self.canary),
            "@MARKER@": marker,
            "@TCP_PORT@": str(self.tcp.getsockname()[1]),
            "@UDP_PORT@": str(self.udp.getsockname()[1]),
            "@UNIX_PATH@": self.unix_path,
            "@UNIX_DGRAM@": self.unix_dgram_path,
            "@ABSTRACT@": self.abstract_name,
            "@REPO@": str(REPO),
            "@HOME@": str(Path.home()),
        }
        for key, value in values.items():
            code = code.replace(key, value)
        return code

    def violations(self) -> list[str]:
        """What the last program changed or reached outside; empty when it was contained."""
        found = []
        names = sorted(p.name for p in self.dir.iterdir()) if self.dir.exists() else None
        if names != ["canary.txt"]:
            found.append(f"outside dir now holds {names}")
        try:
            stat = self.canary.stat()
            if self.canary.read_text() != "precious":
                found.append("canary content changed")
            if (stat.st_mode, stat.st_mtime_ns, stat.st_uid) != (
                self.canary_stat.st_mode,
                self.canary_stat.st_mtime_ns,
                self.canary_stat.st_uid,
            ):
                found.append("canary mode, mtime or owner changed")
        except OSError as exc:
            found.append(f"canary gone ({exc})")
        readable, _, _ = select.select([self.tcp, self.udp, self.unix, self.abstract, self.unix_dgram], [], [], 0)
        for sock in readable:
            found.append(f"something reached our listener {sock.getsockname()!r}")
        return found


def processes_mentioning(*texts: str) -> list[int]:
    """Pids of live processes (zombies aside) whose command line contains any of ``texts``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
            state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(text.encode() in cmdline for text in texts):
            found.append(int(entry))
    return found


@dataclass
class Outcome:
    """What happened to one program, seen from outside."""

    status: str
    error_type: str | None
    violations: list[str]
    result: dict

    def got(self) -> str:
        text = self.status + (f" ({self.error_type})" if self.error_type else "")
        return text + ("; " + "; ".join(self.violations) if self.violations else "; contained")


def run_hostile(program: Hostile, outside: Outside, base: Path) -> Outcome:
    """Run one program from a helper parent holding a secret; check the outside afterwards."""
    marker = f"29.{secrets.randbelow(10**9):09d}"  # also a valid `sleep` duration, so it shows in argv
    secret = f"sk-canary-{secrets.token_hex(12)}"
    base.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "ASSIST_SANDBOX_DISABLE"}
    env["OPENAI_API_KEY"] = secret
    env["PYTHONWARNINGS"] = "ignore::RuntimeWarning"  # the disabled-layer warning, expected here
    if program.disable:
        env["ASSIST_SANDBOX_DISABLE"] = ",".join(program.disable)
    config = {
        "code": outside.substitute(program.code, marker),
        "tests": list(program.tests),
        "limits": {**EXPECTED_LIMITS, **program.limits},
        "base": str(base),
    }
    helper = subprocess.run(
        [sys.executable, "-c", HELPER],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    violations = outside.violations()
    leftovers = processes_mentioning(str(base), marker)
    for pid in leftovers:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if leftovers:
        violations.append(f"{len(leftovers)} process(es) left running")
    folders = sorted(p.name for p in base.iterdir())
    if folders:
        violations.append(f"left in $TMPDIR: {', '.join(folders)}")
    if helper.returncode != 0:
        violations.append(f"the parent died (exit {helper.returncode}): {helper.stderr.strip()[-300:]}")
        return Outcome("parent killed", None, violations, {})
    result = json.loads(helper.stdout.splitlines()[-1])
    shown = " ".join(str(result.get(key) or "") for key in ("stdout", "stderr", "error_message"))
    if secret in shown:
        violations.append("the parent's OPENAI_API_KEY reached the candidate's output")
    if result["status"] == "passed" and program.tests and program.expected != "passed":
        violations.append(f"forged a pass ({result['passed']}/{result['total']})")
    return Outcome(result["status"], result["error_type"], violations, result)


@pytest.mark.parametrize("program", PROGRAMS, ids=NAMES)
def test_hostile_program_is_contained(program: Hostile, tmp_path: Path) -> None:
    reason = missing(program)
    if reason:
        pytest.skip(reason)
    outside = Outside(tmp_path)
    try:
        outcome = run_hostile(program, outside, tmp_path / "sandboxes")
    finally:
        outside.close()
    assert outcome.violations == [], outcome.got()
    assert outcome.status == program.expected, outcome.result
    if program.error_type:
        assert outcome.error_type == program.error_type, outcome.result


def test_the_suite_covers_every_category_and_the_six_escapes() -> None:
    categories = {program.category for program in PROGRAMS}
    for needed in ("network", "process", "signals", "ctypes", "rlimits", "files", "sqlite", "fd tricks", "bombs",
                   "threads", "removed modules", "/proc", "reads", "forgery", "introspection", "ipc"):  # fmt: skip
        assert needed in categories
    for escape in "abcdef":
        assert f"escape ({escape})" in categories
    assert len(PROGRAMS) >= 64


def print_table() -> int:
    """Run every program and print program | expected | got; returns the number not contained."""
    import tempfile

    failures = 0
    rows = []
    root = Path(tempfile.mkdtemp(prefix="assist-hostile-"))
    started = time.monotonic()
    for number, program in enumerate(PROGRAMS):
        expected = program.expected + (f" ({program.error_type})" if program.error_type else "")
        if program.disable:
            expected += f" [off: {','.join(program.disable)}]"
        reason = missing(program)
        if reason:
            rows.append((program.name, expected, f"skipped: {reason}"))
            continue
        outside = Outside(root / str(number))
        try:
            outcome = run_hostile(program, outside, root / str(number) / "sandboxes")
        finally:
            outside.close()
        ok = not outcome.violations and outcome.status == program.expected
        ok = ok and (not program.error_type or outcome.error_type == program.error_type)
        failures += not ok
        rows.append((program.name, expected, outcome.got() + ("" if ok else "  <-- NOT AS EXPECTED")))
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    print(f"| {'program':<{width[0]}} | {'expected':<{width[1]}} | got |")
    print(f"|{'-' * (width[0] + 2)}|{'-' * (width[1] + 2)}|-----|")
    for name, expected, got in rows:
        print(f"| {name:<{width[0]}} | {expected:<{width[1]}} | {got} |")
    print(f"\n{len(rows)} programs, {failures} not as expected, {time.monotonic() - started:.0f}s; "
          f"Landlock ABI {ABI}, seccomp {'yes' if KERNEL['seccomp'] else 'no'}")  # fmt: skip
    return failures


if __name__ == "__main__":
    sys.exit(1 if print_table() else 0)
