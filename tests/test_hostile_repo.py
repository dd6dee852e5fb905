"""A hostile repository's files, read by assist outside any sandbox: links and special files are never read.

A repo can commit `tests/test_util.py -> /dev/zero` (read forever, until memory runs out), a FIFO (open blocks
forever) or a link to a file elsewhere on the machine. Each reader of repo files here must skip them. The FIFO
cases run under an alarm, so a regression fails instead of hanging the suite; no test links to `/dev/zero`,
since a regression would then fill the machine's memory before anything could stop it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.code.docstrings import repo_docstrings
from assistant.code.extract import read_repo_file
from assistant.core.repo_tests import find_tests
from assistant.paths import read_regular_file

OUTSIDE_TEST = "from geo import square\n\n\ndef test_outside():\n    assert square(2) == 4\n"
OUTSIDE_MODULE = 'def secret():\n    """Text from outside the repo."""\n'


class Blocked(Exception):
    """Not an OSError: the readers under test swallow those."""


@contextlib.contextmanager
def deadline(seconds: int = 5) -> Iterator[None]:
    """Fail (rather than hang) when the block blocks, e.g. opening a FIFO."""

    def expire(signum: int, frame: object) -> None:
        raise Blocked(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "geo.py").write_text('def square(x):\n    """Square."""\n    return x * x\n')
    (root / "tests" / "test_geo.py").write_text("from geo import square\n\n\ndef test_square():\n    square(3)\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "test_outside.py").write_text(OUTSIDE_TEST)
    (outside / "module.py").write_text(OUTSIDE_MODULE)
    return root


def test_found_tests_skip_a_linked_test_file(repo: Path, tmp_path: Path) -> None:
    (repo / "tests" / "test_linked.py").symlink_to(tmp_path / "elsewhere" / "test_outside.py")
    assert find_tests(repo, "geo.py", "square") == ["tests/test_geo.py::test_square"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_found_tests_skip_a_fifo(repo: Path) -> None:
    os.mkfifo(repo / "tests" / "test_fifo.py")
    with deadline():
        assert find_tests(repo, "geo.py", "square") == ["tests/test_geo.py::test_square"]


def test_repo_docstrings_skip_links_and_special_files(repo: Path, tmp_path: Path) -> None:
    (repo / "linked.py").symlink_to(tmp_path / "elsewhere" / "module.py")
    paths = [repo / "geo.py", repo / "linked.py"]
    if hasattr(os, "mkfifo"):
        os.mkfifo(repo / "fifo.py")
        paths.append(repo / "fifo.py")
    with deadline():
        assert repo_docstrings(paths) == ["Square."]


def test_regular_file_reader(repo: Path, tmp_path: Path) -> None:
    (repo / "linked.py").symlink_to(tmp_path / "elsewhere" / "module.py")
    assert read_regular_file(repo / "geo.py") == (repo / "geo.py").read_bytes()
    assert read_regular_file(repo / "linked.py") is None
    assert read_regular_file(repo / "missing.py") is None
    assert read_regular_file(repo) is None  # a directory
    assert read_repo_file(repo, "geo.py") == (repo / "geo.py").read_bytes()
    assert read_repo_file(repo, "linked.py") is None
    assert read_repo_file(repo, "../elsewhere/module.py") is None


def test_sandboxed_results_skip_links_fifos_and_oversized_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run folder is writable from inside the project sandbox: its tests may swap the results file.
    from assistant.sandbox import project

    results = tmp_path / "results.json"
    results.write_text('{"outcomes": {"t.py::test_a": "passed"}}')
    assert project._read_results(results) == {"outcomes": {"t.py::test_a": "passed"}}
    monkeypatch.setattr(project, "MAX_RESULTS_BYTES", 16)
    assert project._read_results(results) is None
    monkeypatch.undo()
    linked = tmp_path / "linked.json"
    linked.symlink_to(results)
    assert project._read_results(linked) is None
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.json"
        os.mkfifo(fifo)
        with deadline():
            assert project._read_results(fifo) is None


def test_sandbox_cleanup_walks_past_a_link_to_a_directory(tmp_path: Path) -> None:
    # A folder the candidate made read-only, holding its link to a directory: cleanup gives the folder its rights
    # back (chmod on a link itself raised NotImplementedError on Linux) and never follows the link.
    import assistant.sandbox as sandbox

    (tmp_path / "keep.txt").write_text("x")
    work = tmp_path / "assist-sandbox-x"
    (work / "d").mkdir(parents=True)
    (work / "d" / "f").write_text("x")
    (work / "d" / "l").symlink_to(tmp_path)
    (work / "d").chmod(0o500)
    sandbox._remove_tree(str(work))
    assert not work.exists() and (tmp_path / "keep.txt").read_text() == "x"


def test_an_assist_folder_the_repo_ships_is_refused_not_loaded(tmp_path: Path) -> None:
    # A clone's tracked .assist/ (a trained retriever, a discriminator, an index) would decide what reaches the
    # prompt and which candidate --apply writes; assist's own .assist/ is never tracked (its .gitignore is `*`).
    import subprocess

    from assistant.errors import UsageError
    from assistant.paths import repo_dir

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    assert repo_dir(tmp_path, create=True) == tmp_path / ".assist"
    manifest = tmp_path / ".assist" / "retrievers" / "lail" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    assert repo_dir(tmp_path) == tmp_path / ".assist"  # untracked: the user's own
    git("add", "-f", ".assist/retrievers/lail/manifest.json")
    with pytest.raises(UsageError, match=r"manifest\.json is a file the repo ships \(git tracks 1 in \.assist/\)"):
        repo_dir(tmp_path)
    from types import SimpleNamespace

    from assistant.methods.artifacts import artifact_dir  # every artifact is found through repo_dir

    index = SimpleNamespace(meta={"source": {"kind": "repo", "path": str(tmp_path)}})
    with pytest.raises(UsageError, match="loads no index or trained model a repository brings"):
        artifact_dir(index, "lail")  # type: ignore[arg-type]


def test_a_manifest_that_is_not_a_json_object_reads_as_none(tmp_path: Path) -> None:
    # `[]` made condor_available() true and load_manifest a traceback; a link or FIFO must not be read either.
    from assistant.methods.artifacts import read_manifest

    for text, expected in (("[]", None), ("not json", None), ('{"method": "lail"}', {"method": "lail"})):
        (tmp_path / "manifest.json").write_text(text)
        assert read_manifest(tmp_path) == expected
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "manifest.json").symlink_to(tmp_path / "manifest.json")
    assert read_manifest(linked) is None


def test_the_tui_shows_control_characters_written_out_and_no_shipped_history(tmp_path: Path) -> None:
    import json
    import subprocess

    from assistant.ui.session import Session
    from assistant.ui.tui.widgets.candidate_view import _syntax

    shown = _syntax("x = '\x1b]0;TITLE\x1b\\\\'  # \u202e", "python").code
    assert "\x1b" not in shown and "\u202e" not in shown and "\\u001b]0;TITLE" in shown
    root = tmp_path / "clone"
    (root / ".assist").mkdir(parents=True)
    entry = {"event": "generate", "requirement": "shipped \x1b[8m text", "target": "x.py"}
    (root / ".assist" / "history.jsonl").write_text(json.dumps(entry) + "\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    assert Session(root).history()[0]["requirement"] == entry["requirement"]  # untracked: the user's own
    subprocess.run(["git", "add", "-f", ".assist/history.jsonl"], cwd=root, check=True)
    assert Session(root).history() == [] and Session(root).requirements() == []
