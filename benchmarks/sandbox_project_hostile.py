"""Hostile tests inside a project's pytest run (the project sandbox), as a table: program | expected | got.

The candidates' sandbox has its table in ``python -m tests.test_sandbox_hostile``; this is its friend for
:func:`assistant.sandbox.project.run_pytest`, where a repo's own tests (or a model-written one) run with fork and
exec allowed. Each probe is one pytest file written into a tiny project; most assert, from inside, that the boundary
held (so "passed" is the expected status), and the deep tree must stop the run. After each run the table also checks
that no ``assist-pytest-*`` folder was left in $TMPDIR. It asserts nothing and exits 1 when a row is not as
expected. From the repo root (about 10 s):

    .venv/bin/python benchmarks/sandbox_project_hostile.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from assistant.sandbox.disk import remove_tree
from assistant.sandbox.project import run_pytest

HEADER = "import errno, os, resource, subprocess, sys\n\nimport pytest\n\n\n"
# name -> (test body, expected status)
PROBES: dict[str, tuple[str, str]] = {
    "memfd_in_pytest": (
        """
        def test_it():
            with pytest.raises(OSError) as caught:
                os.memfd_create("x")
            assert caught.value.errno == errno.ENOSYS
        """,
        "passed",
    ),
    "memfd_shmem_bomb": (  # 32 x 16 MB of shared memory that RLIMIT_AS (2 GB here) does not count
        """
        def test_it():
            held = 0
            try:
                for _ in range(32):
                    fd = os.memfd_create("x")
                    os.posix_fallocate(fd, 0, 16 << 20)
                    held += 16 << 20
            except OSError:
                pass
            assert held == 0
        """,
        "passed",
    ),
    "memfd_in_a_child": (
        """
        def test_it():
            probe = "import os\\ntry:\\n    os.memfd_create('x')\\nexcept OSError as e:\\n    print(e.errno)"
            out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
            assert out.strip() == str(errno.ENOSYS)
        """,
        "passed",
    ),
    "open_files_bomb": (
        """
        def test_it():
            files, error = [], None
            try:
                while len(files) < 20000:
                    files.append(open(os.devnull))
            except OSError as exc:
                error = exc.errno
            finally:
                for f in files:
                    f.close()  # pytest needs descriptors of its own afterwards
            assert error == errno.EMFILE and len(files) < 1024
        """,
        "passed",
    ),
    "deep_tree": (
        """
        def test_it():
            for _ in range(3000):
                os.mkdir("d")
                os.chdir("d")
        """,
        "resource-limit",
    ),
    "stat_outside": (  # Landlock does not rule stat; the run's own root leaves nothing outside to find
        """
        def test_it():
            assert os.path.exists("/etc/passwd") is os.path.exists("/etc/hostname") is False
        """,
        "passed",
    ),
    "listxattr_outside": (
        """
        def test_it():
            with pytest.raises(FileNotFoundError):
                os.listxattr("/etc/passwd")
        """,
        "passed",
    ),
}


def make_project(root: Path) -> Path:
    """A tiny project: one package, one passing test."""
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "tests" / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    return root


def main() -> int:
    """Run every probe; print the table; return the number of rows not as expected."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="assist-project-hostile-"))
    saved = tempfile.tempdir
    try:
        return table(work)
    finally:
        tempfile.tempdir = saved
        remove_tree(str(work))


def table(work: Path) -> int:
    """Run every probe with `work` as $TMPDIR's parent; print the table; return the rows not as expected."""
    project = make_project(work / "project")
    base = work / "tmp"
    base.mkdir()
    tempfile.tempdir = str(base)  # every run's assist-pytest-* folder lives here: the leftover check looks there
    rows, failures, started, layers = [], 0, time.monotonic(), {}
    for name, (body, expected) in PROBES.items():
        source = HEADER + textwrap.dedent(body).lstrip()
        test = f"tests/test_{name}.py"
        try:
            run = run_pytest(project, Path(sys.executable), [test], files={test: source})
            status, last, layers = run.status, run.output.strip().splitlines()[-1:], run.layers
        except Exception as exc:  # a crash of assist itself is a row of the table (the RecursionError of issue 67)
            status, last = f"assist raised {type(exc).__name__}", []
        left = sorted(p.name for p in base.iterdir())
        got = status + (f"; left in $TMPDIR: {', '.join(left)}" if left else "; nothing left")
        ok = status == expected and not left
        if not ok:
            got += f"  <-- NOT AS EXPECTED: {last}"
        failures += not ok
        rows.append((name, expected, got))
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    print(f"| {'program':<{width[0]}} | {'expected':<{width[1]}} | got |")
    print(f"|{'-' * (width[0] + 2)}|{'-' * (width[1] + 2)}|-----|")
    for name, expected, got in rows:
        print(f"| {name:<{width[0]}} | {expected:<{width[1]}} | {got} |")
    held = ", ".join(name for name, (on, _) in layers.items() if on)
    print(f"\n{len(rows)} programs, {failures} not as expected, {time.monotonic() - started:.0f}s; layers held: {held}")
    return failures


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
