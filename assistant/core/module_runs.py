"""Tests run inside a candidate's own module: each candidate's whole file in a sandboxed copy of its project
(:class:`~assistant.core.home.ModuleHome`), the tests as pytest functions with the module's globals in scope.

What `agree` runs its model-written tests with, and what `exec` runs the user's tests with when the candidates have a
home (a stub's, or a plain request's for a target file): there the module's imports and names resolve.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from assistant.core.home import ModuleHome

TEST_SECONDS = 5  # each test's limit (its own in a module run, which runs them all in one process)
MODULE_TEST_FILE = "test_assist_agree.py"  # the tests' file in the project's copy
MODULE_WORKERS = 4  # at most this many module runs at once (never more than the cores)


def module_test_file(module: str, tests: Sequence[str]) -> str:
    """A pytest file that runs each test as its own test function, in a copy of `module`'s globals (as the
    function's own code sees them), with a time limit per test. Each test is compiled when it runs, so one that
    does not compile (`await` outside an async function, a `from m import *`) fails alone; the module's names
    never become the file's own, so none of them is taken by pytest for a test or a setup hook."""
    lines = [
        "import importlib as _assist_importlib",
        "import signal as _assist_signal",
        "",
        f"_assist_module = _assist_importlib.import_module({module!r})",
        "",
        "",
        "def _assist_expire(signum, frame):",
        f"    raise TimeoutError('the test ran over {TEST_SECONDS} s')",
        "",
        "",
        "def _assist_run(test):",
        "    scope = dict(vars(_assist_module))",
        "    _assist_signal.signal(_assist_signal.SIGALRM, _assist_expire)",
        f"    _assist_signal.alarm({TEST_SECONDS})",
        "    try:",
        "        exec(compile(test, '<model-written test>', 'exec'), scope)",
        "    finally:",
        "        _assist_signal.alarm(0)",
    ]
    for number, test in enumerate(tests):
        lines += ["", "", f"def test_{number}():", f"    _assist_run({test!r})"]
    return "\n".join(lines) + "\n"


def passed_in_module(home: ModuleHome, samples: Sequence[int], tests: Sequence[str]) -> list[frozenset[int]] | str:
    """The tests (by position) each sample's file passes, run in a sandboxed copy of its project (one pytest run
    per distinct file, as many at once as there are cores; a sample with no file in `home` passes none). When
    no run reports any of the tests, nor a run on the file as the project has it (the module does not import
    there, the project's pytest setup gets in the way, or the copy cannot be made), the reason instead, in one
    line."""
    from assistant.core.failures import collection_error
    from assistant.errors import AssistError
    from assistant.sandbox.project import ProjectLimits, run_pytest

    test_file = module_test_file(home.module, tests)
    limits = ProjectLimits(timeout_s=30.0 + TEST_SECONDS * len(tests), cpu_s=30 + TEST_SECONDS * len(tests))
    nodes = [f"{MODULE_TEST_FILE}::test_{j}" for j in range(len(tests))]
    texts = list(dict.fromkeys(t for t in (home.texts.get(sample) for sample in samples) if t is not None))

    cancel = threading.Event()

    def run(text: str | None) -> Any:  # None: the file as the project has it (the stub)
        files = {MODULE_TEST_FILE: test_file} if text is None else {home.path: text, MODULE_TEST_FILE: test_file}
        return run_pytest(
            home.root,
            home.python,
            [MODULE_TEST_FILE],
            files=files,
            pythonpath=home.pythonpath,
            limits=limits,
            include=home.include,
            extra_args=["-o", "python_functions=test_*"],  # a project's own naming rule does not apply
            cancel=cancel,
        )

    # The runs are separate sandboxed processes, mostly interpreter start-up and collection: one per core.
    pool = ThreadPoolExecutor(max_workers=max(1, min(len(texts), os.cpu_count() or 1, MODULE_WORKERS)))
    try:
        futures = [(text, pool.submit(run, text)) for text in texts]
        wait([future for _, future in futures])
    except BaseException:  # Ctrl-C: end the runs in flight now rather than wait out their time limits
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    seen: dict[str, frozenset[int]] = {}
    reported = False
    trouble = ""
    for text, future in futures:
        try:
            result = future.result()
        except AssistError as exc:
            return f"cannot run in its module: {exc}"
        reported = reported or any(node in result.outcomes for node in nodes)
        trouble = trouble or collection_error(result.output)
        seen[text] = frozenset(j for j, node in enumerate(nodes) if result.outcomes.get(node) == "passed")
    passed = [seen.get(home.texts.get(sample), frozenset()) for sample in samples]  # no file: none
    # None ran on any candidate. Where they run on the file as the project has it, the candidates broke their
    # module's import themselves (an import each added): each failed them all. Else it is the module's, unfilled.
    if seen and not reported and not _reports(lambda: run(None), nodes):
        return f"the project's pytest ran none of the tests ({trouble.strip()[:160]})"
    return passed


def _reports(run: Any, nodes: Sequence[str]) -> bool:
    """Whether `run()` reports any of the test `nodes` (a run that cannot start reports none)."""
    from assistant.errors import AssistError

    try:
        return any(node in run().outcomes for node in nodes)
    except AssistError:
        return False
