"""The pytest plugin of :mod:`assistant.sandbox.project`: outcomes per test, a socket audit hook, call traces, marks.

Standard library only and free of package imports: :func:`assistant.sandbox.project.run_pytest` copies this
file next to the project copy as ``assist_pytest_plugin.py`` and starts pytest with ``-p assist_pytest_plugin``,
under the project's own interpreter. It is driven by environment variables:

* ``ASSIST_PYTEST_RESULTS``: where to write the JSON results at the end of the session,
  ``{"outcomes": {nodeid: outcome}, "calls": {nodeid: [[relpath, firstlineno], ...]}, "marked": [nodeid, ...],
  "hook": [on, detail]}``.
  A test's outcome is "passed" when its setup, call and teardown all passed, "failed" when its call
  failed (a strict XPASS included), "error" when its setup or teardown failed, "skipped" when it was
  skipped or was an expected failure (xfail).
* ``ASSIST_PYTEST_ROOT``: the project copy's directory (traced paths are relative to it).
* ``ASSIST_PYTEST_TRACE=1``: record, for each test, the Python functions under the project copy that ran
  during its setup, call and teardown (``sys.setprofile`` and ``threading.setprofile``; ``<module>`` code is
  left out).
* ``ASSIST_PYTEST_MARK=EVENT``: record the tests during whose setup, call or teardown code raised the audit
  event EVENT (``sys.audit(EVENT)``, from any thread): code a caller planted says it ran, at no cost to the
  rest of the run, where a trace makes every Python call slower (click's tests: 6.9 s against 12.6 s traced).
* ``ASSIST_PYTEST_MARK_STOP=N``: end the run once N of the marked tests failed, as ``--maxfail`` would, but
  counting only those: tests that fail without running the marked code (a network the sandbox denies, a flaky
  test) do not end it.
* ``ASSIST_PYTEST_HOOK=0``: do not install the socket audit hook (``ASSIST_SANDBOX_DISABLE=hook``); marks are
  heard by a hook of their own.

The audit hook (PEP 578) denies ``socket.connect``, ``socket.bind`` and ``socket.sendto`` for every socket
family but AF_UNIX, and AF_UNIX connections to socket files outside the run's directory. It is defence in
depth beside Landlock's TCP rules and the only thing here that stops UDP, but it lives in pytest's process
only (a subprocess does not inherit it) and code running there can get around it (ctypes, for one).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

import pytest

RESULTS_ENV = "ASSIST_PYTEST_RESULTS"
ROOT_ENV = "ASSIST_PYTEST_ROOT"
TRACE_ENV = "ASSIST_PYTEST_TRACE"
MARK_ENV = "ASSIST_PYTEST_MARK"
MARK_STOP_ENV = "ASSIST_PYTEST_MARK_STOP"
HOOK_ENV = "ASSIST_PYTEST_HOOK"
RUN_DIR_ENV = "ASSIST_PYTEST_RUN_DIR"

_ROOT = os.path.realpath(os.environ.get(ROOT_ENV) or os.getcwd())
_RUN_DIR = os.path.realpath(os.environ.get(RUN_DIR_ENV) or _ROOT)

_outcomes: dict[str, str] = {}
_calls: dict[str, list[list[object]]] = {}
_marked: set[str] = set()
_node: list[str | None] = [None]  # the node id of the test whose protocol runs now
_hook_state: list[object] = [False, "not installed"]


# --- the audit hook ------------------------------------------------------------------------------

_SOCKET_EVENTS = frozenset(("socket.connect", "socket.bind", "socket.sendto"))


def _unix_address_allowed(address: object) -> bool:
    """AF_UNIX: abstract names (Landlock scopes them) and socket files inside the run's directory only."""
    if isinstance(address, bytes):
        if address.startswith(b"\0") or not address:
            return True
        address = os.fsdecode(address)
    if not isinstance(address, str):
        return False
    if address.startswith("\0") or not address:
        return True
    path = os.path.realpath(address)
    return path == _RUN_DIR or path.startswith(_RUN_DIR + os.sep)


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event not in _SOCKET_EVENTS:
        return
    sock, address = args[0], args[1]
    family = getattr(sock, "family", None)
    if family == socket.AF_UNIX and _unix_address_allowed(address):
        return
    raise PermissionError(f"sandbox: {event} is not allowed ({getattr(family, 'name', family)} {address!r})")


def _install_hook() -> None:
    if os.environ.get(HOOK_ENV, "1") == "0":
        _hook_state[:] = [False, "disabled by ASSIST_SANDBOX_DISABLE"]
        return
    sys.addaudithook(_audit)
    _hook_state[:] = [True, "PEP 578 audit hook in pytest's process: no TCP/UDP connect, bind or sendto"]


_install_hook()


# --- outcomes ------------------------------------------------------------------------------------


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Fold each phase's report into the test's outcome: the worst phase decides."""
    nodeid = report.nodeid
    previous = _outcomes.get(nodeid)
    if report.failed:
        outcome = "failed" if report.when == "call" else "error"
    elif report.skipped:
        outcome = "skipped"
    elif report.when == "call" and report.passed:
        outcome = "passed"
    else:
        outcome = previous or "passed"  # setup or teardown passed: keep what we have
    # failed/error beat skipped, skipped beats passed (a test skipped in setup has no call phase).
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 2}
    if previous is None or rank[outcome] > rank[previous]:
        _outcomes[nodeid] = outcome
    if report.failed and nodeid in _marked:
        _marked_failure(nodeid)


# --- tracing -------------------------------------------------------------------------------------

_TRACE = os.environ.get(TRACE_ENV) == "1"
_code_cache: dict[int, tuple[object, tuple[str, int] | None]] = {}
_current: list[set[tuple[str, int]] | None] = [None]
_ROOT_PREFIX = _ROOT + os.sep


def _locate(code: object) -> tuple[str, int] | None:
    """(path relative to the project copy, first line) of a code object under the copy, else None."""
    filename = getattr(code, "co_filename", "")
    if getattr(code, "co_name", "") == "<module>" or not filename or filename.startswith("<"):
        return None
    path = filename if filename.startswith(_ROOT_PREFIX) else os.path.realpath(filename)
    if not path.startswith(_ROOT_PREFIX):
        return None
    return os.path.relpath(path, _ROOT).replace(os.sep, "/"), int(code.co_firstlineno)  # type: ignore[attr-defined]


def _profile(frame: object, event: str, arg: object) -> None:
    if event != "call":
        return
    code = frame.f_code  # type: ignore[attr-defined]
    entry = _code_cache.get(id(code))
    if entry is None:
        # The code object is kept alive with its answer, so its id cannot be reused by another one.
        entry = (code, _locate(code))
        _code_cache[id(code)] = entry
    found = entry[1]
    if found is not None:
        calls = _current[0]
        if calls is not None:
            calls.add(found)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    """Name the test that runs (for marks) and trace the functions it runs during its whole protocol (setup,
    call, teardown)."""
    _node[0] = item.nodeid
    calls: set[tuple[str, int]] = set()
    if _TRACE:
        _current[0] = calls
        threading.setprofile(_profile)
        sys.setprofile(_profile)
    try:
        yield
    finally:
        _node[0] = None
        if _TRACE:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
            _current[0] = None
            merged = {tuple(pair) for pair in _calls.get(item.nodeid, ())} | calls
            _calls[item.nodeid] = [list(pair) for pair in sorted(merged)]


# --- marks --------------------------------------------------------------------------------------

_MARK = os.environ.get(MARK_ENV) or None


def _mark(event: str, args: tuple[object, ...]) -> None:
    if event == _MARK and _node[0] is not None:
        _marked.add(_node[0])


if _MARK is not None and hasattr(sys, "addaudithook"):  # Python 3.8+: before it, nothing is marked
    sys.addaudithook(_mark)

_MARK_STOP = int(os.environ.get(MARK_STOP_ENV) or 0)  # 0: the marked tests' failures never end the run
_failed_marked: set[str] = set()
_session: list[pytest.Session | None] = [None]


def pytest_sessionstart(session: pytest.Session) -> None:
    _session[0] = session


def _marked_failure(nodeid: str) -> None:
    """Count a marked test that failed; at the MARK_STOP-th, end the run after this test (as --maxfail does)."""
    _failed_marked.add(nodeid)
    session = _session[0]
    if _MARK_STOP and len(_failed_marked) >= _MARK_STOP and session is not None:
        session.shouldfail = f"stopping after {_MARK_STOP} failures of tests that ran the marked code"


# --- the results file ----------------------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the outcomes (and traces) where the parent asked, atomically."""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    data = {"outcomes": _outcomes, "calls": _calls, "marked": sorted(_marked), "hook": _hook_state}
    data["exitstatus"] = int(exitstatus)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(partial, path)
