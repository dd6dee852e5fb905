"""The kernel's sandbox layers, reached through ctypes: Landlock, seccomp-BPF, no_new_privs, dumpable, capabilities,
and (for project test suites, which may fork) namespaces.

Standard library only and free of package imports: the sandbox runner loads this file by path inside a
``python -S`` child, and ``assist doctor`` imports it as ``assistant.sandbox.boundary`` to say what the kernel offers.

Why plain ctypes: PyPI's ``landlock`` is a 1.0.0.dev release and ``pyseccomp`` needs libseccomp's shared
library at run time; the three Landlock system calls, one ``prctl`` and a hand-assembled BPF program are a
few hundred lines that the tests exercise on this kernel.

* Landlock (Linux 5.13+, no root needed): an allow-list of filesystem rights per directory or file, TCP
  bind/connect rights (ABI 4+) and scoping of signals and abstract unix sockets to the domain (ABI 6+).
  :func:`apply_landlock` handles every right the running kernel's ABI knows (1..7), so a right the kernel
  knows is denied unless a rule grants it.
* seccomp-BPF (x86_64 and aarch64 only, checked against the audit arch so the filter never reads the
  wrong syscall table): :func:`install_seccomp` makes a fixed list of dangerous system calls fail with
  EPERM (no fork or exec, no ptrace, no new sessions, no sockets but socketpairs, no mounts, no
  signals to other processes, ...).
* ``PR_SET_NO_NEW_PRIVS`` (needed by both), ``PR_SET_DUMPABLE`` off, and all capabilities dropped
  (we may run as root, and root with capabilities could mount, reboot or read any process's memory).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from collections.abc import Callable

LINUX = sys.platform.startswith("linux")
MACHINE = os.uname().machine if hasattr(os, "uname") else ""

# --- prctl and capabilities ------------------------------------------------------------------

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_READ = 23
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_KEEP_CAPS, each with its _LOCKED bit: root
# regains nothing through execve or setuid.
_SECUREBITS_LOCKED_DOWN = 0x3F
_CAPABILITY_VERSION_3 = 0x20080522

# --- Landlock ----------------------------------------------------------------------------------

SYS_LANDLOCK_CREATE_RULESET = 444  # the same numbers on x86_64 and aarch64 (the unified table)
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR

# --- seccomp -----------------------------------------------------------------------------------

SECCOMP_MODE_FILTER = 2
SECCOMP_GET_ACTION_AVAIL = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
_EPERM, _ENOSYS = 1, 38
_X32_SYSCALL_BIT = 0x40000000
CLONE_THREAD = 0x00010000
# Namespace flags: a "thread" clone may not carry any of them.
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# BPF opcodes (linux/bpf_common.h)
_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06

# seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64); little-endian only.
_OFF_NR, _OFF_ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index


def _arg_high(index: int) -> int:
    return 16 + 8 * index + 4


# Per architecture: the audit arch value and the system call numbers we refer to (from the kernel's
# unistd headers). aarch64 uses the generic table: no fork, vfork, iopl or ioperm there.
_X86_64_TABLE = """
ptrace=101 process_vm_readv=310 process_vm_writev=311 pidfd_getfd=438 pidfd_open=434
pidfd_send_signal=424 kcmp=312 execve=59 execveat=322 fork=57 vfork=58 clone=56 clone3=435
setsid=112 setpgid=109 mount=165 umount2=166 pivot_root=155 chroot=161 unshare=272 setns=308 bpf=321
perf_event_open=298 add_key=248 request_key=249 keyctl=250 init_module=175 finit_module=313
delete_module=176 kexec_load=246 kexec_file_load=320 reboot=169 io_uring_setup=425
io_uring_enter=426 io_uring_register=427 userfaultfd=323 open_by_handle_at=304 name_to_handle_at=303
personality=135 socket=41 connect=42 bind=49 listen=50 sendmsg=46 sendmmsg=307 sendto=44 kill=62
tkill=200 tgkill=234 rt_sigqueueinfo=129 rt_tgsigqueueinfo=297 fanotify_init=300 open_tree=428
move_mount=429 fsopen=430 fsconfig=431 fsmount=432 fspick=433 mount_setattr=442 swapon=167
swapoff=168 acct=163 settimeofday=164 clock_settime=227 clock_adjtime=305 adjtimex=159
sethostname=170 setdomainname=171 quotactl=179 vhangup=153 syslog=103 iopl=172 ioperm=173
lookup_dcookie=212 seccomp=317 shmget=29 shmat=30 shmctl=31 semget=64 semop=65 semctl=66
semtimedop=220 msgget=68 msgsnd=69 msgrcv=70 msgctl=71 memfd_create=319 memfd_secret=447
"""

_AARCH64_TABLE = """
ptrace=117 process_vm_readv=270 process_vm_writev=271 pidfd_getfd=438 pidfd_open=434
pidfd_send_signal=424 kcmp=272 execve=221 execveat=281 clone=220 clone3=435 setsid=157 setpgid=154
mount=40 umount2=39 pivot_root=41 chroot=51 unshare=97 setns=268 bpf=280 perf_event_open=241
add_key=217 request_key=218 keyctl=219 init_module=105 finit_module=273 delete_module=106
kexec_load=104 kexec_file_load=294 reboot=142 io_uring_setup=425 io_uring_enter=426
io_uring_register=427 userfaultfd=282 open_by_handle_at=265 name_to_handle_at=264 personality=92
socket=198 connect=203 bind=200 listen=201 sendmsg=211 sendmmsg=269 sendto=206 kill=129 tkill=130
tgkill=131 rt_sigqueueinfo=138 rt_tgsigqueueinfo=240 fanotify_init=262 open_tree=428 move_mount=429
fsopen=430 fsconfig=431 fsmount=432 fspick=433 mount_setattr=442 swapon=224 swapoff=225 acct=89
settimeofday=170 clock_settime=112 clock_adjtime=266 adjtimex=171 sethostname=161 setdomainname=162
quotactl=60 vhangup=58 syslog=116 lookup_dcookie=18 seccomp=277 shmget=194 shmat=196 shmctl=195
semget=190 semop=193 semctl=191 semtimedop=192 msgget=186 msgsnd=189 msgrcv=188 msgctl=187 memfd_create=279
memfd_secret=447
"""


def _table(text: str) -> dict[str, int]:
    return {name: int(number) for name, _, number in (word.partition("=") for word in text.split())}


_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, _table(_X86_64_TABLE)),
    "aarch64": (0xC00000B7, _table(_AARCH64_TABLE)),
}
_ARCHES["arm64"] = _ARCHES["aarch64"]

# Fail with EPERM: process creation and exec, debugging other processes, leaving the process group,
# namespaces and mounts, kernel objects (bpf, keys, modules, io_uring, perf), host settings, System V IPC
# (shared memory, semaphores and queues other processes of the machine use), every socket but
# socketpair() (so no network and no connecting to unix sockets such as docker's), and memfd_create/memfd_secret:
# their pages are shared memory that RLIMIT_AS does not count until mapped (a run held 2 GB under a 256 MB limit).
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "pidfd_open", "pidfd_send_signal",
    "kcmp", "execve", "execveat", "fork", "vfork", "setsid", "setpgid", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "bpf", "perf_event_open", "add_key", "request_key", "keyctl",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "open_by_handle_at",
    "name_to_handle_at", "personality", "socket", "connect", "bind", "listen", "sendmsg", "sendmmsg",
    "tkill", "fanotify_init", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "sethostname", "setdomainname", "quotactl", "vhangup", "syslog", "iopl", "ioperm",
    "lookup_dcookie", "shmget", "shmat", "shmctl", "semget", "semop", "semctl", "semtimedop", "msgget",
    "msgsnd", "msgrcv", "msgctl", "memfd_create", "memfd_secret",
)  # fmt: skip
# What the project sandbox's filter denies (it must let test suites fork and exec): memory outside RLIMIT_AS.
MEMFD_SYSCALLS = ("memfd_create", "memfd_secret")
# 32-bit processes a 64-bit kernel also runs (a test suite may exec one): their audit arch and numbers.
_COMPAT: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0x40000003, {"memfd_create": 356, "memfd_secret": 447}),  # i386
    "aarch64": (0x40000028, {"memfd_create": 385}),  # arm (no memfd_secret there)
}
_COMPAT["arm64"] = _COMPAT["aarch64"]
# ENOSYS, not EPERM: glibc then falls back to clone(), whose flags the filter can read (clone3 passes
# them in memory, out of a BPF program's reach).
ENOSYS_SYSCALLS = ("clone3",)
# Allowed only when their first argument is our own pid (signals stay inside the process).
SELF_ONLY_SYSCALLS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


def supported_arch(machine: str = MACHINE) -> bool:
    """Whether :func:`seccomp_program` knows this CPU's system call table."""
    return machine in _ARCHES


# --- ctypes plumbing ---------------------------------------------------------------------------

_libc_handle: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _libc_handle
    if _libc_handle is None:
        _libc_handle = ctypes.CDLL(None, use_errno=True)
        _libc_handle.syscall.restype = ctypes.c_long
        _libc_handle.prctl.restype = ctypes.c_int
    return _libc_handle


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


def _syscall(number: int, *args: object) -> int:
    """A raw system call; ints travel as C longs, buffers as pointers. Raises OSError on failure."""
    converted = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return _check(_libc().syscall(ctypes.c_long(number), *converted), f"syscall {number}")


def _prctl(option: int, *args: int) -> int:
    values = [ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:4]]
    return _check(_libc().prctl(ctypes.c_int(option), *values), f"prctl {option}")


# --- no_new_privs, dumpable, capabilities ------------------------------------------------------


def set_no_new_privs() -> None:
    """PR_SET_NO_NEW_PRIVS: execve can never grant privileges again; Landlock and seccomp need it."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def hold_no_new_privs() -> str:
    """Set no_new_privs for the runner and the project launcher; the layer's line in their report."""
    set_no_new_privs()
    return "set: nothing started here can gain privileges"


def attempt_layer(
    layers: dict[str, tuple[bool, str]],
    name: str,
    disabled: set[str],
    action: Callable[[], str],
    explain: Callable[[BaseException], str],
) -> bool:
    """Apply layer `name` with `action` (which returns its one-line description) unless `disabled` names it, and
    record the outcome in `layers`: why it is off, or "failed: " and `explain` of the error. True when it held."""
    if name in disabled:
        layers[name] = (False, "disabled by ASSIST_SANDBOX_DISABLE")
        return False
    try:
        layers[name] = (True, action())
    except Exception as exc:
        layers[name] = (False, f"failed: {explain(exc)}")
        return False
    return True


def no_new_privs() -> bool:
    """Whether no_new_privs is set on this process."""
    return LINUX and _prctl(PR_GET_NO_NEW_PRIVS) == 1


def set_dumpable(on: bool) -> None:
    """PR_SET_DUMPABLE: off makes /proc/<pid> root-owned and ptrace need CAP_SYS_PTRACE."""
    _prctl(PR_SET_DUMPABLE, 1 if on else 0)


def dumpable() -> bool:
    """Whether this process is dumpable."""
    return _prctl(PR_GET_DUMPABLE) == 1


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def capabilities() -> tuple[int, int]:
    """(effective, permitted) capability masks of this process."""
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc().capget(ctypes.byref(header), data), "capget")
    effective = data[0].effective | (data[1].effective << 32)
    permitted = data[0].permitted | (data[1].permitted << 32)
    return effective, permitted


def drop_capabilities() -> str:
    """Drop every capability for good (bounding set, ambient set, effective/permitted/inheritable).

    Returns what was done, for the doctor: "dropped (was privileged)" or "none held". Raises OSError
    when capabilities remain afterwards.
    """
    held = capabilities() != (0, 0)
    if held:
        # Needs CAP_SETPCAP, so before the capset below; each step may be refused by an older kernel.
        try:  # noqa: SIM105 -- contextlib would cost the runner an import
            _prctl(PR_SET_SECUREBITS, _SECUREBITS_LOCKED_DOWN)
        except OSError:
            pass
        cap = 0
        while True:
            try:
                _prctl(PR_CAPBSET_READ, cap)
            except OSError:
                break  # EINVAL past the last capability the kernel knows
            try:  # noqa: SIM105
                _prctl(PR_CAPBSET_DROP, cap)
            except OSError:
                pass
            cap += 1
    try:  # noqa: SIM105
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # before Linux 4.3
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()  # all zero
    _check(_libc().capset(ctypes.byref(header), data), "capset")
    if capabilities() != (0, 0):
        raise OSError("capabilities remain after capset")
    return "dropped (the process was privileged)" if held else "none held"


# --- Landlock ----------------------------------------------------------------------------------


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers (1..), or 0 when Landlock is missing or disabled."""
    if not LINUX:
        return 0
    try:
        return _syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    except OSError:
        return 0


def landlock_refusal(disabled: bool, abi: int, no_new_privs: bool) -> str | None:
    """Why no Landlock ruleset can go in here (the sandbox's layer line), or None when one can."""
    if disabled:
        return "disabled by ASSIST_SANDBOX_DISABLE"
    if abi < 1:
        return "the kernel has no Landlock"
    if not no_new_privs:
        return "needs no_new_privs"
    return None


def fs_rights(abi: int) -> int:
    """Every filesystem right this ABI can restrict."""
    if abi >= 5:
        return (1 << 16) - 1
    if abi >= 3:
        return (1 << 15) - 1
    if abi == 2:
        return (1 << 14) - 1
    return (1 << 13) - 1


def _ruleset_attr(abi: int, fs: int, net: int, scoped: int) -> tuple[ctypes.Array[ctypes.c_char], int]:
    # struct landlock_ruleset_attr grew with the ABI: handled_access_fs (1), _net (4), scoped (6).
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    return ctypes.create_string_buffer(struct.pack("=QQQ", fs, net, scoped)[:size], size), size


def _create_ruleset(abi: int, fs: int, net: int, scoped: int) -> int:
    attr, size = _ruleset_attr(abi, fs, net, scoped)
    return _syscall(SYS_LANDLOCK_CREATE_RULESET, attr, size, 0)


def _add_path_rule(ruleset: int, path: str, rights: int) -> bool:
    """Allow `rights` beneath `path` (a directory) or on it (a file); False when the path does not exist."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS  # directory rights on a file are refused (EINVAL)
        # struct landlock_path_beneath_attr is packed: u64 allowed_access, s32 parent_fd.
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        _syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, attr, 0)
    finally:
        os.close(fd)
    return True


def apply_landlock(
    read_paths: list[str],
    write_paths: list[str],
    device_paths: list[str] | tuple[str, ...] = (),
    abi: int | None = None,
) -> str:
    """Restrict this process (and its future children) with Landlock, using everything the ABI offers.

    ``read_paths`` get read and execute rights, ``write_paths`` every right, ``device_paths`` (files such
    as /dev/null) read, write and truncate. Everything else on the filesystem is denied, and with ABI 4+
    so are TCP bind and connect; with ABI 6+ signals and abstract unix socket connections cannot leave
    the domain. no_new_privs must be set first. Returns a one-line description of what is enforced.
    """
    abi = landlock_abi() if abi is None else abi
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    handled = fs_rights(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    ruleset = _create_ruleset(abi, handled, net, scoped)
    try:
        for path in read_paths:
            _add_path_rule(ruleset, path, READ_RIGHTS & handled)
        for path in write_paths:
            _add_path_rule(ruleset, path, handled)
        for path in device_paths:
            _add_path_rule(ruleset, path, (FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV) & handled)
        _syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    parts = ["filesystem"]
    if net:
        parts.append("TCP bind/connect")
    if scoped:
        parts.append("signal and abstract-socket scoping")
    return f"ABI {abi}: " + ", ".join(parts)


def restrict_scope(abi: int | None = None) -> bool:
    """Start a nested Landlock domain that only scopes signals and abstract sockets (ABI 6+).

    Run in the candidate's process: it can then no longer signal the runner that started it (which sits
    in the outer domain). Returns False when the ABI has no scoping.
    """
    abi = landlock_abi() if abi is None else abi
    if abi < 6:
        return False
    ruleset = _create_ruleset(abi, 0, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    try:
        _syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return True


# --- seccomp -----------------------------------------------------------------------------------


def seccomp_available() -> bool:
    """Whether this kernel can install a seccomp filter returning errno, on an architecture we know."""
    if not LINUX or not supported_arch():
        return False
    action = ctypes.c_uint32(SECCOMP_RET_ERRNO)
    try:
        _syscall(_ARCHES[MACHINE][1]["seccomp"], SECCOMP_GET_ACTION_AVAIL, 0, ctypes.byref(action))
    except OSError:
        return False
    return True


def seccomp_refusal(disabled: bool, no_new_privs: bool) -> str | None:
    """Why no seccomp filter can go in here (the sandbox's layer line), or None when one can."""
    if disabled:
        return "disabled by ASSIST_SANDBOX_DISABLE"
    if not supported_arch():
        return f"no filter written for {MACHINE} (x86_64 and aarch64 only)"
    if not no_new_privs:
        return "needs no_new_privs"
    if not seccomp_available():
        return "the kernel refuses seccomp filters"
    return None


def seccomp_program(pid: int, machine: str = MACHINE) -> bytes:
    """The BPF filter for a candidate process `pid`, as packed ``struct sock_filter`` entries.

    Checks the audit arch first (any other arch, e.g. a 32-bit syscall, kills the process) and, on
    x86_64, refuses x32 system calls, whose numbers would otherwise slip past the table.
    """
    arch, numbers = _ARCHES[machine]
    code: list[tuple[int, object, object, int]] = []  # (opcode, jump-true label, jump-false label, k)
    labels: dict[str, int] = {}

    def emit(op: int, k: int, jt: object = 0, jf: object = 0) -> None:
        code.append((op, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(code)

    emit(_LD_W_ABS, _OFF_ARCH)
    emit(_JEQ_K, arch, 1, 0)
    emit(_RET_K, SECCOMP_RET_KILL_PROCESS)
    emit(_LD_W_ABS, _OFF_NR)
    if machine == "x86_64":
        emit(_JGE_K, _X32_SYSCALL_BIT, "eperm", 0)
    for name in DENIED_SYSCALLS:
        if name in numbers:
            emit(_JEQ_K, numbers[name], "eperm", 0)
    for name in ENOSYS_SYSCALLS:
        emit(_JEQ_K, numbers[name], "enosys", 0)
    for name in SELF_ONLY_SYSCALLS:
        emit(_JEQ_K, numbers[name], "self_only", 0)
    emit(_JEQ_K, numbers["clone"], "clone", 0)
    emit(_JEQ_K, numbers["sendto"], "sendto", 0)
    emit(_RET_K, SECCOMP_RET_ALLOW)
    label("eperm")
    emit(_RET_K, SECCOMP_RET_ERRNO | _EPERM)
    label("enosys")
    emit(_RET_K, SECCOMP_RET_ERRNO | _ENOSYS)
    # kill/tgkill/rt_(tg)sigqueueinfo: the kernel reads the pid as a 32-bit int, so compare the low half.
    label("self_only")
    emit(_LD_W_ABS, _arg_low(0))
    emit(_JEQ_K, pid & 0xFFFFFFFF, 0, 1)
    emit(_RET_K, SECCOMP_RET_ALLOW)
    emit(_RET_K, SECCOMP_RET_ERRNO | _EPERM)
    # clone: threads only (CLONE_THREAD set, no namespace flags); fork-style clones fail.
    label("clone")
    emit(_LD_W_ABS, _arg_low(0))
    emit(_ALU_AND_K, CLONE_THREAD | _CLONE_NAMESPACES)
    emit(_JEQ_K, CLONE_THREAD, 0, 1)
    emit(_RET_K, SECCOMP_RET_ALLOW)
    emit(_RET_K, SECCOMP_RET_ERRNO | _EPERM)
    # sendto: only without a destination address (send() on a socketpair).
    label("sendto")
    emit(_LD_W_ABS, _arg_low(4))
    emit(_JEQ_K, 0, 0, 3)
    emit(_LD_W_ABS, _arg_high(4))
    emit(_JEQ_K, 0, 0, 1)
    emit(_RET_K, SECCOMP_RET_ALLOW)
    emit(_RET_K, SECCOMP_RET_ERRNO | _EPERM)

    packed = bytearray()
    for index, (op, jt, jf, k) in enumerate(code):
        offsets = []
        for target in (jt, jf):
            offset = labels[target] - index - 1 if isinstance(target, str) else int(target)  # type: ignore[arg-type]
            if not 0 <= offset <= 255:
                raise ValueError(f"BPF jump out of range at instruction {index}")
            offsets.append(offset)
        packed += struct.pack("=HBBI", op, offsets[0], offsets[1], k)
    return bytes(packed)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def memfd_program(machine: str = MACHINE) -> bytes:
    """The project sandbox's BPF filter: memfd_create and memfd_secret fail with ENOSYS (so a library falls back to
    a file, which the disk watch counts), in 64-bit, x32 and 32-bit processes alike; everything else is allowed.
    Packed ``struct sock_filter`` entries."""
    arch, numbers = _ARCHES[machine]
    compat_arch, compat = _COMPAT.get(machine, (0, {}))
    native = [numbers[name] for name in MEMFD_SYSCALLS if name in numbers]
    if machine == "x86_64":
        native += [number | _X32_SYSCALL_BIT for number in native]
    compat_numbers = list(compat.values())
    code: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, _OFF_ARCH)]
    # native arch: jump over the compat block; compat: fall into it; any other: allow.
    code.append((_JEQ_K, 0, 0, arch))
    native_at = len(code)
    code.append((_JEQ_K, 0, 0, compat_arch))
    allow_other = len(code)
    code.append((_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    compat_at = len(code)
    code.append((_LD_W_ABS, 0, 0, _OFF_NR))
    code += [(_JEQ_K, 0, 0, number) for number in compat_numbers]
    code.append((_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    native_block = len(code)
    code.append((_LD_W_ABS, 0, 0, _OFF_NR))
    code += [(_JEQ_K, 0, 0, number) for number in native]
    code.append((_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    deny = len(code)
    code.append((_RET_K, 0, 0, SECCOMP_RET_ERRNO | _ENOSYS))
    packed = bytearray()
    for index, (op, _, _, k) in enumerate(code):
        jt = jf = 0
        if index == native_at - 1:  # arch == native: to the native block
            jt = native_block - index - 1
        elif index == native_at:  # arch == compat: to the compat block, else allow
            jt, jf = compat_at - index - 1, allow_other - index - 1
        elif op == _JEQ_K:  # a number to deny
            jt = deny - index - 1
        packed += struct.pack("=HBBI", op, jt, jf, k)
    return bytes(packed)


def install_memfd_filter() -> str:
    """Install :func:`memfd_program` on this process (no_new_privs must be set); kept across fork and exec."""
    if not LINUX or not supported_arch():
        raise OSError(f"seccomp filter not written for this platform ({sys.platform} {MACHINE})")
    _load_filter(memfd_program())
    return "memfd_create and memfd_secret fail (ENOSYS): pages RLIMIT_AS would not count"


def _load_filter(program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


def install_seccomp(pid: int | None = None) -> str:
    """Install :func:`seccomp_program` on this process (no_new_privs must be set). Returns a description."""
    if not LINUX or not supported_arch():
        raise OSError(f"seccomp filter not written for this platform ({sys.platform} {MACHINE})")
    program = seccomp_program(os.getpid() if pid is None else pid)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
    return f"{MACHINE} filter: {len(DENIED_SYSCALLS)} system calls denied, fork/exec/signals to others refused"


# --- namespaces (the project sandbox) --------------------------------------------------------------

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000


def _write_proc(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_namespaces() -> str:
    """Put this process in new network and System V IPC namespaces, and make its next child the first process
    of a new PID namespace. There is then no network at all (no interface is up: UDP and TCP, loopback
    included, and abstract unix sockets are cut off), no shared memory, semaphore or queue of any other
    process, and when that child exits the kernel kills every process left in its namespace (one that left
    the process group with setsid included). Root does it directly; another user through a new user namespace
    that maps only itself. Raises OSError where the kernel refuses (no user namespaces for unprivileged users,
    a container's seccomp profile). Returns a description."""
    if not LINUX:
        raise OSError(f"namespaces are Linux only ({sys.platform})")
    flags = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID
    if os.getuid() == 0:
        _check(_libc().unshare(flags), "unshare")
        return "own network, IPC and PID namespaces: no network, no shared IPC, no process outlives the run"
    uid, gid = os.getuid(), os.getgid()
    _check(_libc().unshare(flags | CLONE_NEWUSER), "unshare")
    _write_proc("/proc/self/setgroups", "deny")  # needed before gid_map; keeps supplementary groups as they are
    _write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")
    return (
        "own user (mapping only itself), network, IPC and PID namespaces: no network, no shared IPC, no process "
        "outlives the run"
    )


MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_RELATIME = 0x200000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    _check(_libc().mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)), target)


def _private_mounts() -> None:
    """Nothing mounted in the new mount namespace propagates back to the host's (systemd shares /)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def _read_only(target: str) -> None:
    """Remount the bind at `target` read-only, keeping the flags a user namespace may not drop (nosuid, ...)."""
    kept = os.statvfs(target).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY
    for st_flag, ms_flag in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME), (2048, MS_NODIRATIME)):
        if kept & st_flag:
            flags |= ms_flag
    if kept & 4096:  # ST_RELATIME
        flags |= MS_RELATIME
    _mount(None, target, None, flags)


def _mirror(path: str, root: str, placed: set[str], writable: frozenset[str], depth: int = 0) -> None:
    """Make `path` resolve under `root` as it does on the host: each symlink on the way is recreated, and the
    real folder or file it ends at is bind-mounted, read-only unless it is one of `writable` (Landlock gives
    the rights; the read-only bind is a second lock)."""
    if depth > 40:
        raise OSError(f"too many symlinks under {path}")
    parts = [part for part in path.split("/") if part]
    current = ""
    for index, part in enumerate(parts):
        current += "/" + part
        if os.path.islink(current):
            target = os.readlink(current)
            if root + current not in placed:
                os.makedirs(os.path.dirname(root + current), exist_ok=True)
                if not os.path.lexists(root + current):
                    os.symlink(target, root + current)
                placed.add(root + current)
            rest = "/".join(parts[index + 1 :])
            resolved = os.path.normpath(os.path.join(os.path.dirname(current), target, rest))
            _mirror(resolved, root, placed, writable, depth + 1)
            return
    if (
        not os.path.exists(current)
        or root + current in placed
        or any((root + current).startswith(done + "/") for done in placed)
    ):
        return  # missing here, or inside something already mounted
    if os.path.isdir(current):
        os.makedirs(root + current, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(root + current), exist_ok=True)
        open(root + current, "a").close()  # a bind mount needs a file to cover
    # Recursive (a user namespace may not bind a folder without what is mounted under it), except for the folder
    # that holds the new root's own mount point: the run's, whose copy would otherwise hold the root again.
    holds_root = os.path.commonpath([root, current]) == current
    _mount(current, root + current, None, MS_BIND if holds_root else MS_BIND | MS_REC)
    placed.add(root + current)
    if current not in writable:
        _read_only(root + current)


def enter_root(paths: list[str], writable: list[str], mountpoint: str) -> str:
    """Move into a mount namespace and a root of our own holding only `paths` and `writable` (what Landlock will
    grant: the interpreter, the system libraries, the run's folder, a few devices; all but `writable` bound
    read-only), leaving the host's root behind. Socket files the run could otherwise connect to by path (a docker
    or tmux socket, the user's D-Bus), which neither Landlock nor a network namespace rules, are then not there.
    Needs privilege in the current user namespace (root, or after :func:`enter_namespaces`; call it before
    dropping capabilities). `mountpoint`: an empty folder of the run's, covered by the new root's tmpfs.

    Raises OSError. A failure before the switch takes the half-built root away again (nothing of it stays
    reachable through the run's folder) and leaves this process where it was; the mount namespace itself, once
    made, stays (it only ever held private mounts). Returns a description."""
    number = _ARCHES.get(MACHINE, (0, {}))[1].get("pivot_root")
    if number is None:
        raise OSError(f"pivot_root: no system call number known for {MACHINE or 'this CPU'}")
    mountpoint = os.path.realpath(mountpoint)  # compared with resolved paths below
    _check(_libc().unshare(CLONE_NEWNS), "unshare")
    _private_mounts()  # before the first mount: nothing propagates back to the host's namespace
    cwd = os.getcwd()
    _mount("tmpfs", mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    try:
        placed: set[str] = set()
        writes = frozenset(os.path.realpath(p) for p in writable)
        # Shortest first, so a folder inside one already mounted is not mounted again.
        for path in sorted({os.path.abspath(p) for p in [*paths, *writable]}, key=lambda p: (p.count("/"), p)):
            _mirror(path, mountpoint, placed, writes)
        _mount(None, mountpoint, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
        os.chdir(mountpoint)
        _syscall(number, b".", b".")  # the old root now lies on top of the new one, at /
    except BaseException:
        os.chdir(cwd)
        _check(_libc().umount2(mountpoint.encode(), ctypes.c_int(MNT_DETACH)), "umount2")
        raise
    _check(_libc().umount2(b".", ctypes.c_int(MNT_DETACH)), "umount2")
    try:
        os.chdir(cwd)  # the same path in the new root, where it is one of `paths` or under one
    except OSError:
        os.chdir("/")
    return (
        f"a mount namespace and a root of its own: {len(placed)} paths of the host (what Landlock grants, read-only "
        "but the run's folder), no other file or socket"
    )


def _in_child(action: Callable[[], str]) -> tuple[bool, str]:
    """Run `action` in a forked child (this process is left as it is): whether it returned, and its description
    or the exception it raised."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's report comes back through the pipe
        os.close(read)
        try:
            detail, code = action(), 0
        except BaseException as exc:
            detail, code = f"{type(exc).__name__}: {exc}", 1
        os.write(write, detail.encode()[:4000])
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        detail = stream.read().decode(errors="replace")
    _, status = os.waitpid(child, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, detail or "the probe reported nothing"


def namespaces_available() -> tuple[bool, str]:
    """Whether :func:`enter_namespaces` works here, tried in a forked child."""
    if not LINUX:
        return False, f"Linux only ({sys.platform})"
    return _in_child(enter_namespaces)


def root_available() -> tuple[bool, str]:
    """Whether :func:`enter_root` works here after :func:`enter_namespaces`, tried in a forked child that builds a
    root of /usr and an empty folder."""
    if not LINUX:
        return False, f"Linux only ({sys.platform})"
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="assist-root-probe-")
    os.mkdir(os.path.join(folder, "root"))

    def build() -> str:
        enter_namespaces()
        enter_root(["/usr"], [folder], os.path.join(folder, "root"))
        if not os.path.isdir(folder) or os.path.exists("/proc/self"):
            raise OSError("the host showed through")
        return "a root holding only what it was given"

    try:
        return _in_child(build)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- memory cgroup ------------------------------------------------------------------------------


def memory_cgroup() -> tuple[bool, str]:
    """Whether a cgroup v2 memory controller is delegated below this process's cgroup and writable (what a per-run
    memory cgroup needs), and why not. Probes only: nothing is created."""
    if not LINUX:
        return False, f"Linux only ({sys.platform})"
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as stream:
            lines = stream.read().splitlines()
    except OSError as exc:
        return False, f"cannot read /proc/self/cgroup ({exc.strerror})"
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = next(
        (m for m in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified") if os.path.isfile(m + "/cgroup.controllers")), None
    )
    if own is None or mount is None:
        return False, "no cgroup v2 hierarchy here"
    folder = os.path.normpath(mount + "/" + own.lstrip("/"))
    if "memory" not in _words(os.path.join(folder, "cgroup.controllers")):
        if any(line.split(":")[1:2] == ["memory"] for line in lines):
            return False, "the memory controller is on a cgroup v1 hierarchy, not v2"
        return False, f"cgroup v2 offers no memory controller to {own}"
    if "memory" not in _words(os.path.join(folder, "cgroup.subtree_control")):
        return False, f"memory is not delegated below {own} (a cgroup holding processes cannot delegate it)"
    if not os.access(folder, os.W_OK):
        return False, f"{folder} is not writable"
    return True, f"memory controller delegated below {own}"


def _words(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read().split()
    except OSError:
        return []


# --- what the kernel offers --------------------------------------------------------------------


def probe() -> dict[str, tuple[bool, str]]:
    """What this kernel and platform offer, without applying anything: layer -> (available, detail)."""
    if not LINUX:
        missing = f"not available on {sys.platform} (Linux only)"
        return {name: (False, missing) for name in ("landlock", "seccomp", "no_new_privs", "caps", "dumpable")}
    abi = landlock_abi()
    if abi >= 6:
        landlock = (True, f"ABI {abi}: filesystem, TCP bind/connect, signal and abstract-socket scoping")
    elif abi >= 4:
        landlock = (True, f"ABI {abi}: filesystem and TCP bind/connect (no scoping before ABI 6)")
    elif abi >= 1:
        landlock = (True, f"ABI {abi}: filesystem only (no TCP rules before ABI 4, no scoping before ABI 6)")
    else:
        landlock = (False, "the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= list)")
    if not supported_arch():
        seccomp = (False, f"no filter written for {MACHINE or 'this CPU'} (x86_64 and aarch64 only)")
    elif seccomp_available():
        seccomp = (True, f"{MACHINE} filter supported")
    else:
        seccomp = (False, "the kernel refuses seccomp filters")
    try:
        effective, permitted = capabilities()
        caps = (True, "held now; the runner drops them all" if (effective or permitted) else "none held")
    except OSError as exc:
        caps = (False, f"capget failed: {exc}")
    return {
        "landlock": landlock,
        "seccomp": seccomp,
        "no_new_privs": (True, "prctl(PR_SET_NO_NEW_PRIVS)"),
        "caps": caps,
        "dumpable": (True, "prctl(PR_SET_DUMPABLE, 0)"),
    }
