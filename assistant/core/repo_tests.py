"""A repository's own tests for a function it fills: found, and run on each candidate in the project sandbox.

`assist generate --file F --function NAME` finds the repo's tests that check a stub: the test files that reach it
(:func:`assistant.core.reach.reaching_files`: they name it, its class, or what calls it, two steps up) run once
on the file with the stub saying it ran, then raising, and the tests that fail having run it are kept
(:func:`probe`; what a run picked is remembered for the same files: :mod:`assistant.core.picked`). For a
function with a body (a requirement rewrites it) the tests are those that name it (test functions of `test_*.py` /
`*_test.py` files whose code mentions it: a call, an attribute or a reference). Or it takes the
pytest arguments of `--test-cmd`, and runs them on each candidate's edited file in a throwaway copy of the repo
(:func:`assistant.sandbox.project.run_pytest`: Landlock, no network, rlimits, a scrubbed environment). The
interpreter is the one that has the project's dependencies: `--python`, else the repo's own `.venv`/`venv`,
else the active virtualenv, else the one running assist. What is found is a plan (:class:`RepoTests`); the
`repo-tests` ranker (:class:`assistant.core.rank.RepoTestsRanker`) runs it on each candidate (the passing ones
first) and the output shows each one's verdict.
"""

from __future__ import annotations

import ast
import os
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, TypeVar

from assistant.core.failures import collection_error
from assistant.core.home import git_files, project_python, search_path, too_wide, unwalled
from assistant.core.picked import Picked, picked_key, recall, remember
from assistant.core.reach import mentioned, parsed, reaching_files
from assistant.errors import UsageError
from assistant.progress import Progress
from assistant.sandbox import disabled_layers
from assistant.sandbox.project import Mark, ProjectLimits, ProjectRun, run_pytest

if TYPE_CHECKING:
    from assistant.core.stubs.find import Stub

_T = TypeVar("_T")

# Directories never searched for tests (environments, caches, vendored trees).
SKIPPED_DIRS = frozenset(
    [
        ".git",
        ".hg",
        ".venv",
        "venv",
        "env",
        ".tox",
        ".nox",
        "node_modules",
        "site-packages",
        "__pycache__",
        "build",
        "dist",
        ".assist",
    ]
)
MAX_TESTS = 50  # the found tests a candidate runs at most (the nearest files first)
REPO_TEST_LIMITS = ProjectLimits(timeout_s=60, cpu_s=60, memory_mb=2048)
# Steps up the static call graph to the test files that may reach a stub: 97% of the benchmark's tasks have a
# covering test within two (results/correctness-test-finding).
REACH_DEPTH = 2
# The stub's body for the run that picks the tests that check it: it says it ran (an audit event the run's pytest
# plugin hears, naming the test that runs), then raises. Traced instead, click's run took 12.6 s, not 6.9.
RAN_EVENT = "assist.stub.ran"
RAISING = f"__import__('sys').audit({RAN_EVENT!r})\nraise NotImplementedError"
# That run: 0.4-0.5 s median on the benchmark's projects (results/correctness-test-finding, run 4), 6.9 s for
# 2,182 of click's tests. Past this, the tests that name the function are taken instead.
PROBE_LIMITS = ProjectLimits(timeout_s=15, cpu_s=30, memory_mb=2048)
# A candidate's run of the repo's tests may take this many times as long as their run on the stub (the one that
# picked them ran the whole pool), at least CANDIDATE_FLOOR_S: a wrong body that loops or waits on a lock
# fails there, not after a minute.
CANDIDATE_FACTOR = 3
CANDIDATE_FLOOR_S = 10.0


@dataclass(frozen=True)
class RepoTests:
    """What to run for one function: pytest arguments (node ids first) in `root` with `python`."""

    root: Path
    python: Path
    args: tuple[str, ...]
    pythonpath: tuple[str, ...] = ()
    found: bool = True  # False: given by a test command (`test_cmd`)
    limits: ProjectLimits = field(default=REPO_TEST_LIMITS)
    include: tuple[str, ...] | None = None  # the files the run's copy holds (git's view); None: the whole tree
    picked: bool = False  # found by the run on the stub raising (:func:`checking_tests`), not by name
    remembered: bool = False  # picked by an earlier run on the same files (:mod:`assistant.core.picked`)
    took_s: float | None = None  # how long finding and checking them took in this request

    def describe(self, given: str = "your test command") -> str:
        """One line for people: what runs, and with which interpreter; `given`: how the door names tests the
        user gave (a test command), where tests found say "found" (and how, where a run on the stub picked them)."""
        count = "1 test that fails" if len(self.args) == 1 else f"{len(self.args)} tests that fail"
        origin = f"found {count} with the stub raising" if self.picked else "found" if self.found else given
        origin += " (remembered)" if self.remembered else ""
        shown = " ".join(self.args[:3]) + (f" (+{len(self.args) - 3} more)" if len(self.args) > 3 else "")
        return f"{origin}: pytest {shown} with {self.python}"


def is_test_file(path: PurePath) -> bool:
    """A file pytest collects by default: `test_*.py` or `*_test.py`."""
    return path.suffix == ".py" and (path.name.startswith("test_") or path.stem.endswith("_test"))


def test_files(root: Path) -> list[Path]:
    """The repo's test files (relative paths, sorted), outside environments and caches."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = Path(folder, name)
            if is_test_file(path):
                found.append(path.relative_to(root))
    return found


def _is_test_case(node: ast.ClassDef) -> bool:
    """A class pytest collects whatever its name: a `unittest.TestCase` (or `SomethingTestCase`) subclass."""
    names = (base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "") for base in node.bases)
    return any(name.endswith("TestCase") for name in names)


def _test_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """pytest's default collection, statically: module-level `test*` functions and `test*` methods of `Test*`
    classes and of unittest TestCase classes, each with its node id prefix (inherited tests are not seen)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            found.append(("", node))
        elif isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or _is_test_case(node)):
            found += [(f"{node.name}::", item) for item in node.body
                      if isinstance(item, functions) and item.name.startswith("test")]  # fmt: skip
    return found


def find_tests(root: Path, path: str | Path, function: str) -> list[str]:
    """Node ids of the repo's test functions that mention `function` (its last name part for `Class.method`),
    the test files nearest the function's file first, at most MAX_TESTS."""
    name = function.rpartition(".")[2]
    target = Path(path)
    nodes: list[tuple[int, str]] = []
    for rel in test_files(root):
        tree = parsed(root, rel.as_posix())  # not a link (to /dev/zero, say), nor outside the repo
        if tree is None:
            continue
        # Nearness: the test file's name names the module (test_util.py for util.py), then shared folders.
        distance = 0 if rel.stem in (f"test_{target.stem}", f"{target.stem}_test") else 1
        for prefix, test in _test_functions(tree):
            if name in mentioned(test):
                nodes.append((distance, f"{rel.as_posix()}::{prefix}{test.name}"))
    nodes.sort(key=lambda pair: pair[0])  # stable: file order within a distance
    return [node for _, node in nodes[:MAX_TESTS]]


def parse_test_cmd(command: str) -> tuple[str, ...]:
    """The pytest arguments of a test command ("pytest tests/test_x.py -k name", or `python -m pytest ...`).
    Only pytest runs: the sandbox starts it itself, with these arguments."""
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise UsageError(
            f"the test command is not a valid command line: {error}",
            setting="test_cmd:invalid",
            values={"error": error},
        ) from None
    if len(words) >= 3 and words[1:3] == ["-m", "pytest"] and Path(words[0]).name.startswith("python"):
        args = words[3:]
    elif words and Path(words[0]).name in ("pytest", "py.test"):
        args = words[1:]
    else:
        shown = words[0] if words else "nothing"
        raise UsageError(
            f"the test command runs pytest only, not {shown!r}; e.g. 'pytest tests/test_util.py'",
            setting="test_cmd:not_pytest",
            values={"shown": shown},
        )
    operators = [word for word in args if word in ("&&", "||", ";", "|", ">", "<", "&")]
    if operators:
        raise UsageError(
            f"the test command is one pytest command; {operators[0]!r} is shell, which is not run",
            setting="test_cmd:shell",
            values={"operator": operators[0]},
        )
    return tuple(args)


# pytest options whose value follows as the next word (a value such as `--ignore old.py` is not a test to run).
_VALUE_OPTIONS = frozenset(
    ("-k", "-m", "-p", "-c", "-o", "-W", "--ignore", "--ignore-glob", "--deselect", "--rootdir", "--confcutdir")
)


def _check_test_paths(root: Path, args: Sequence[str], include: Sequence[str]) -> None:
    """Refuse, before any model work, a test file the test command names that the run's copy of the repo (`include`,
    relative to `root`, where pytest runs) will not hold: pytest would only say "file or directory not found"
    after the sampling. A file git ignores is not copied either."""
    copied = set(include)
    after_option = False
    for word in args:
        if word.startswith("-"):
            after_option = word in _VALUE_OPTIONS
            continue
        path = word.split("::", 1)[0]
        if not after_option and path.endswith(".py") and _relative(root, path) not in copied:
            exists = (root / path).exists()
            why = "git ignores, so the test run's copy leaves it out" if exists else f"does not exist in {root}"
            raise UsageError(
                f"the test command names {path}, which {why}",
                setting="test_cmd:not_copied",
                values={"path": path, "why": why},
            )
        after_option = False


def _relative(root: Path, path: str) -> str:
    """`path` as git lists it: relative to `root`, in `/` form, without `./` or `..` steps."""
    return os.path.relpath(os.path.normpath(root / path), root).replace(os.sep, "/")


def repo_tests(
    root: Path,
    path: str | Path,
    function: str,
    *,
    test_cmd: str | None = None,
    python: str | Path | None = None,
    baseline: str | None = None,
    stub: Stub | None = None,
    progress: Progress | None = None,
) -> RepoTests | None:
    """What to run for `function` of `path` (relative to `root`, a git work tree): `test_cmd`'s arguments, else
    the tests found (None when none reach it). With `baseline`, the file's text as it is, and `stub`, the function
    as found there: where it is a stub, the test files that reach it run once on it raising, and the tests that
    check it are kept (:func:`checking_tests`); otherwise (a test command, a body a requirement rewrites, no
    `stub` given) the tests run once on `baseline` and are refused where they cannot rank candidates
    (:func:`check_baseline`; a function is taken for a stub unless `stub` says it has a body). `progress` hears
    either run, and may raise to stop it.
    Outside a git work tree, or when the work tree is the home folder or `/`, nothing runs: the copy would be the
    whole folder, with whatever else it holds. Tests found (not named by `test_cmd`) run only where the kernel
    has Landlock: elsewhere (macOS, an old kernel) the sandbox has no filesystem wall, and the repo's own code
    would run as you."""
    started = time.perf_counter()
    root = Path(root)
    include = _work_tree(root)
    probing = baseline is not None and stub is not None and stub.is_stub and test_cmd is None
    if test_cmd is not None:
        args, found = parse_test_cmd(test_cmd), False
        _check_test_paths(root, args, include)
    else:
        args, found = _reaching(root, path, function, include) if probing else find_tests(root, path, function), True
        if not args:
            return None
        _check_walled()
    tests = RepoTests(root, project_python(root, python), tuple(args), search_path(root, path), found, include=include)
    if probing:
        assert baseline is not None and stub is not None
        checked = checking_tests(tests, path, stub_raising(baseline, stub), function, progress)
        if checked is not None:
            return replace(checked, took_s=time.perf_counter() - started)
        tests = replace(tests, args=tuple(find_tests(root, path, function)))  # cannot pick: those naming it
        if not tests.args:
            return None
    if baseline is not None:
        ran = check_baseline(tests, path, baseline, function, stub is None or stub.is_stub, progress)
        tests = replace(tests, limits=candidate_limits(ran.duration_s))
    return replace(tests, took_s=time.perf_counter() - started)


def _work_tree(root: Path) -> tuple[str, ...]:
    """The files of the git work tree at `root` (what a run's copy holds); refused outside one, or when it is the
    home folder or `/` (the copy would be the whole folder, with whatever else it holds)."""
    if too_wide(root):
        raise UsageError(f"{root} is your home folder or /; the repo's tests run only in a project's git work tree")
    include = git_files(root)
    if include is None:
        raise UsageError(
            f"{root} is not a git work tree; the repo's tests run only in one (or turn the repo's tests off)",
            setting="repo_tests:not_git",
            values={"root": root},
        )
    return include


def _check_walled() -> None:
    """Tests found, not asked for, run only behind Landlock: elsewhere a clone's conftest.py would run with your
    files in reach."""
    why = unwalled()
    if why is not None:
        raise UsageError(
            f"{why}, so a clone's conftest.py would run as you; a test command naming them runs them anyway",
            setting="test_cmd:unwalled",
            values={"why": why},
        )


def _reaching(root: Path, path: str | Path, function: str, include: Sequence[str]) -> list[str]:
    """The test files (that the run's copy holds) that may reach `function`, nearest first."""
    copied = set(include)
    tests = [name for rel in test_files(root) if (name := rel.as_posix()) in copied]
    return reaching_files(root, Path(path).as_posix(), function, include, tests, REACH_DEPTH)


def stub_raising(text: str, stub: Stub) -> str:
    """`text` with the stub's body saying it ran (RAN_EVENT), then raising NotImplementedError."""
    from assistant.core.stubs.body import fill_body  # not at the top: core.stubs reaches this module

    return fill_body(text, stub, RAISING)


def checking_tests(
    tests: RepoTests,
    path: str | Path,
    raising: str,
    function: str,
    progress: Progress | None = None,
) -> RepoTests | None:
    """The tests of `tests` (the files that reach `function`) that check it (:func:`probe`, on `raising`, the file
    with it raising: :func:`stub_raising`), at most MAX_TESTS, nearest first. None where that run cannot pick
    them: it ran past PROBE_LIMITS; no test ran for an error that may be the stub's own (called as its module
    imports, it raised); or tests failed but none was seen running it (run in a subprocess, or imported through a
    link under another path). Refused with one line where none ran for another reason (see
    :func:`check_baseline`), or none fails with it raising: none checks it."""
    probed = replace(tests, limits=PROBE_LIMITS)
    key = _picked_key(probed, path, raising, function)
    known = None if key is None else recall(key)
    if known is not None:
        return replace(tests, args=known.args, picked=True, remembered=True, limits=candidate_limits(known.ran_s))
    kept, run = _watched(lambda cancel: probe(probed, path, raising, cancel), progress, "find tests")
    if run.status in ("timeout", "resource-limit"):
        return None
    outcomes = list(run.outcomes.values())
    if not outcomes:
        _refuse_unrun(tests, run)
        return None
    _refuse_skipped(outcomes, function)
    if not kept and run.failed():
        return None
    if not kept and len(outcomes) == 1:
        raise UsageError(f"the 1 test that reaches {function} does not check it: it does not fail with it raising")
    if not kept:
        raise UsageError(f"none of the {len(outcomes)} tests that reach {function} checks it: none fails with it "
                         "raising")  # fmt: skip
    picked = Picked(tuple(kept[:MAX_TESTS]), run.duration_s)
    if key is not None:
        remember(key, picked)
    return replace(tests, args=picked.args, picked=True, limits=candidate_limits(picked.ran_s))


def _picked_key(tests: RepoTests, path: str | Path, raising: str, function: str) -> str | None:
    """The key of the run that picks (:func:`assistant.core.picked.picked_key`): its copy's files, `path` raising
    `function`, its tests, interpreter and settings; None where it cannot be made (nothing is remembered)."""
    if tests.include is None:
        return None
    name = Path(path).as_posix()
    layers = sorted(disabled_layers())
    settings = (tests.args, tests.pythonpath, name, function, tests.limits, MAX_TESTS, RAISING, layers)
    return picked_key(tests.root, tests.include, {name: raising}, tests.python, settings)


def candidate_limits(ran_in_s: float) -> ProjectLimits:
    """How long a candidate's run of the repo's tests may take, given how long their run on the stub took (the
    one that picked them, or the check of tests named otherwise): CANDIDATE_FACTOR times it, at least
    CANDIDATE_FLOOR_S, at most REPO_TEST_LIMITS' (a body that loops holds a request that long: with 60 s, one
    request of results/speed-in-project-2026-12-07 took 80.8 s against a median of 19.4)."""
    seconds = min(REPO_TEST_LIMITS.timeout_s, max(CANDIDATE_FLOOR_S, CANDIDATE_FACTOR * ran_in_s))
    return replace(REPO_TEST_LIMITS, timeout_s=seconds)


def check_baseline(
    tests: RepoTests,
    path: str | Path,
    text: str,
    function: str,
    stub: bool = True,
    progress: Progress | None = None,
) -> ProjectRun:
    """Run `tests` once on the file as it is (`text`) and refuse them, with one line, where they cannot rank its
    candidates: none of them ran (the module or the tests do not import with `tests.python`, e.g. a dependency
    it lacks, or pytest itself is missing there; or the arguments select no test), every one is skipped, or,
    where `function` is a `stub` still, every one passed (they do not check it; working code a requirement
    rewrites passes them, as it should). Either way every candidate would get the same verdict, and "none
    passed" or "passed the tests" would be said of code the tests never told apart. `progress` hears ("repo
    tests", 0, 1) every POLL_S while the run lasts; what it raises ends the run at once (a cancel). The run, where
    they may rank."""
    run = _watched(lambda cancel: run_on(tests, path, text, cancel), progress, "repo tests")
    outcomes = list(run.outcomes.values())
    if not outcomes:
        _refuse_unrun(tests, run)
    _refuse_skipped(outcomes, function)
    if stub and run.status == "passed" and all(outcome == "passed" for outcome in outcomes):
        one = tests.found and len(outcomes) == 1
        which = f"the {len(outcomes)} tests found" if tests.found else "the test command's tests"
        said = "the 1 test found already passes" if one else f"{which} already pass"
        raise UsageError(f"{said} with {function} as it is now: {'it does' if one else 'they do'} not check it")
    return run


def _refuse_skipped(outcomes: Sequence[str], function: str) -> None:
    """Refuse tests that are every one skipped here (a marker, a platform, a missing extra)."""
    if outcomes and all(outcome == "skipped" for outcome in outcomes):
        raise UsageError(f"every one of the {len(outcomes)} tests for {function} is skipped here: none can check it")


POLL_S = 0.1  # how often a run that a person may cancel asks its progress callback


def _watched(work: Callable[[threading.Event], _T], progress: Progress | None, stage: str) -> _T:
    """`work` (a run that ends when its event is set) in a worker thread, with `progress` hearing (`stage`, 0, 1)
    every POLL_S and (`stage`, 1, 1) at its end; what it raises (Cancelled) ends the run's processes at once and
    is raised here. Without `progress`, just `work`."""
    cancel = threading.Event()
    if progress is None:
        return work(cancel)
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(work, cancel)
        try:
            while True:
                try:
                    done = future.result(timeout=POLL_S)
                    break
                except TimeoutError:
                    progress(stage, 0, 1)
        except BaseException:
            cancel.set()
            raise
    progress(stage, 1, 1)
    return done


def _refuse_unrun(tests: RepoTests, run: ProjectRun) -> None:
    """Refuse tests that ran none on the file as it is, where no candidate could change that: an import that
    fails (only that: another error as the module imports may be the stub's own, e.g. one called at import that
    raises NotImplementedError, which a candidate would not repeat), or arguments pytest selects nothing by or
    refuses (exit status 5, or 4 for a usage error)."""
    reason = collection_error(run.output)
    if reason.startswith(("ModuleNotFoundError", "ImportError")) or "No module named" in reason:
        raise UsageError(
            f"the repo's tests do not run with {tests.python} ({reason}); name the interpreter that has the "
            "project's dependencies",
            setting="repo_tests:no_run",
            values={"python": tests.python, "reason": reason},
        )
    # 5: nothing selected; 4: a usage error, unless it is node ids that a collection error left unfound.
    if run.returncode == 5 or (run.returncode == 4 and "found no collectors" not in run.output):
        which = "the tests found" if tests.found else "the test command"
        raise UsageError(f"pytest ran no test of {which} ({' '.join(tests.args[:3])}: {reason})")


def probe(
    tests: RepoTests, path: str | Path, raising: str, cancel: threading.Event | None = None
) -> tuple[list[str], ProjectRun]:
    """The tests of `tests` that check a function: run once on the file `path` with the function saying it ran,
    then raising (`raising`: :func:`stub_raising`), they failed having run it. A test that passes with it raising
    does not check it; one that fails without running it fails for another reason. The run stops at the
    MAX_TESTS-th failure of a test that ran it (no more are kept; a function everything calls fails hundreds);
    failures of tests that never ran it (a network the sandbox denies, a flaky test) do not count. Node ids in the
    order pytest ran them, and the run."""
    # A test file that does not import (an optional extra missing) must not keep the others from running.
    more = ("--continue-on-collection-errors",)
    run = run_on(tests, path, raising, cancel, mark=Mark(RAN_EVENT, stop_after=MAX_TESTS), more=more)
    return [node for node in run.failed() if node in run.marked and _test_of(node, tests.args)], run


def _test_of(node: str, files: Sequence[str]) -> bool:
    """Whether `node` is a node id of a test in one of `files`, to be handed to pytest as an argument: the run's
    results come from the repo's own code, which could write anything there (an option, a control character)."""
    path, _, rest = node.partition("::")
    return path in files and bool(rest) and node.isprintable()


def run_on(
    tests: RepoTests,
    path: str | Path,
    text: str,
    cancel: threading.Event | None = None,
    *,
    mark: Mark | None = None,
    more: Sequence[str] = (),
) -> ProjectRun:
    """`tests` on a sandboxed copy of the repo with `path` (relative to its root) replaced by `text`; setting
    `cancel` ends the run at once (RunCancelled). `mark` records the tests during which code raised its audit
    event (and may end the run); `more` are pytest arguments after the tests'."""
    return run_pytest(
        tests.root,
        tests.python,
        (),
        files={Path(path).as_posix(): text},
        pythonpath=tests.pythonpath,
        limits=tests.limits,
        mark=mark,
        extra_args=(*tests.args, *more),
        include=tests.include,
        cancel=cancel,
    )
