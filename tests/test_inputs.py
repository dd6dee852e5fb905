"""Hostile or damaged inputs (issue 26, items 2, 9, 10, 11): symlinks out of the repo, corrupt and raced indexes,
malformed banks and index metadata, undecodable text, oversized prompts, out-of-range numeric options.

Indexing tests use a tiny deterministic TextEncoder (hash → unit vector): they are about which files are read
and how the index directory is written, not about embeddings, and must stay fast.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from assistant.backends import SamplingParams, load_backend
from assistant.backends.prompts import build_prompt
from assistant.code.examples import Example, read_bank
from assistant.code.extract import extract_python, repo_functions
from assistant.core.generation import generate
from assistant.errors import UsageError
from assistant.indexing.index import Index, TextEncoder, index_bank, index_repo
from assistant.indexing.sources import open_source

from .conftest import git
from .openai_server import openai_server


class HashEncoder(TextEncoder):
    """Deterministic unit vectors from a text's sha256: the same text always gets the same vector."""

    name = "hash-test"
    dim = 16

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[: self.dim], dtype=np.uint8) for t in texts]
        vectors = np.asarray(rows, dtype="float32").reshape(len(texts), self.dim) + 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


ENCODER = HashEncoder()
SECRET = 'def steal_me():\n    """Return the private key."""\n    return "BEGIN PRIVATE KEY"\n'


def names(index: Index) -> list[str]:
    return sorted(e.name for e in index.examples)


# -- item 2: only files inside the repo are indexed --------------------------------------------------------------


def test_tracked_symlinks_out_of_the_repo_are_not_indexed(scratch_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "secret.py").write_text(SECRET)
    (outside / "pkg" / "words.py").write_text(SECRET.replace("steal_me", "steal_words"))
    (scratch_repo / "x.py").symlink_to(outside / "secret.py")  # a committed link to a file outside
    (scratch_repo / "alias.py").symlink_to("mathutils.py")  # a link inside: its target is indexed once, by name
    git(scratch_repo, "add", "x.py", "alias.py")
    git(scratch_repo, "commit", "-qm", "links")
    # A tracked folder swapped for a link after checkout: git still lists text/words.py.
    os.rename(scratch_repo / "text", tmp_path / "moved-text")
    (scratch_repo / "text").symlink_to(outside / "pkg")

    index, stats = index_repo(scratch_repo, ENCODER)
    assert names(index) == ["cube_all", "is_even"]
    assert stats.files_skipped == 3
    on_disk = Index.load(scratch_repo / ".assist" / "index")
    assert "PRIVATE KEY" not in json.dumps([e.to_json() for e in on_disk.examples])
    assert sorted(on_disk.meta["files"]) == ["mathutils.py"]
    # The other road from repo files to prompts and training: parsing the tracked files directly.
    assert sorted(e.name for e in repo_functions(scratch_repo)) == ["cube_all", "is_even"]


# -- item 9: a corrupt index is rebuilt; concurrent writers take turns --------------------------------------------


def test_index_rebuilds_an_unreadable_index_with_one_warning(
    scratch_repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    index_repo(scratch_repo, ENCODER)
    vectors = scratch_repo / ".assist" / "index" / "vectors.faiss"
    vectors.write_bytes(vectors.read_bytes()[:40])  # truncated, as by a full disk or a killed copy
    with pytest.raises(UsageError, match=r"truncated or corrupt.*rebuild it with `assist index`"):
        open_source(ENCODER, start=scratch_repo)  # generate and friends: one line saying what to do
    with caplog.at_level(logging.WARNING, logger="assistant"):
        index, stats = index_repo(scratch_repo, ENCODER)
    assert stats.rebuilt and stats.files_parsed == 2 and names(index) == ["cube_all", "is_even", "word_count"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "unreadable" in warning and "rebuilding it from scratch" in warning and "\n" not in warning
    assert len(Index.load(scratch_repo / ".assist" / "index")) == 3


@pytest.mark.parametrize(
    "meta",
    ["[1, 2]", '{"version": 1, "files": "abc"}', '{"version": 1, "files": {"a.py": 3}}', "{not json"],
    ids=["list", "files-a-string", "blob-a-number", "not-json"],
)
def test_malformed_meta_json_is_one_line_and_reindexing_repairs_it(scratch_repo: Path, meta: str) -> None:
    index_repo(scratch_repo, ENCODER)
    (scratch_repo / ".assist" / "index" / "meta.json").write_text(meta)
    with pytest.raises(UsageError, match=r"^the index at .* is unreadable \(.*\); rebuild it with `assist index`$"):
        Index.load(scratch_repo / ".assist" / "index")
    index, stats = index_repo(scratch_repo, ENCODER)
    assert stats.rebuilt and names(index) == ["cube_all", "is_even", "word_count"]


def test_examples_jsonl_with_wrong_types_is_unreadable_not_a_crash(scratch_repo: Path) -> None:
    index_repo(scratch_repo, ENCODER)
    path = scratch_repo / ".assist" / "index" / "examples.jsonl"
    lines = path.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "start_line": "x"})
    lines[1] = "[1, 2]"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError, match="unreadable"):
        Index.load(path.parent)


def test_cli_index_rebuilds_a_corrupt_index_saying_so_in_one_line(scratch_repo: Path) -> None:
    """`assist index` is what the error tells the user to run: it must not fail the same way."""
    index_repo(scratch_repo, ENCODER)  # an index of another encoder: rebuilt at this run in any case
    (scratch_repo / ".assist" / "index" / "vectors.faiss").write_bytes(b"\0" * 10)
    import assistant

    # The package under test (not whichever one the venv installed), run as a user runs it.
    env = {**os.environ, "PYTHONPATH": str(Path(assistant.__file__).parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "assistant", "index"],
        cwd=scratch_repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: the index at ") and "rebuilding it" in lines[0]
    assert "Indexed 3 functions" in result.stdout


SAVER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from assistant.code.examples import Example
    from assistant.indexing.index import Index

    directory, start, seconds, tag = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    examples = [Example(requirement=f"{tag} task {i}", code=f"def f{i}():\\n    return {i}") for i in range(20)]
    index = Index(examples, np.random.default_rng(0).random((20, 8), dtype="float32"), {"encoder": tag})
    while time.time() < start:
        time.sleep(0.005)
    saves = 0
    while time.time() < start + seconds:
        index.save(directory)
        saves += 1
    print(saves)
    """
)


def test_two_processes_saving_one_index_take_turns(tmp_path: Path) -> None:
    directory = tmp_path / "banks" / "index"
    start = time.time() + 1.5  # both have imported faiss by then
    import assistant

    env = {**os.environ, "PYTHONPATH": str(Path(assistant.__file__).parents[1])}  # the package under test
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SAVER, str(directory), str(start), "1.0", tag],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for tag in ("a", "b")
    ]
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    for code, stdout, stderr in results:
        assert code == 0, stderr.strip().splitlines()[-1:]
        assert int(stdout) > 5  # both really saved, repeatedly
    leftovers = sorted(p.name for p in directory.parent.iterdir())
    assert leftovers == ["index", "index.lock"]
    assert Index.load(directory).encoder_name in ("a", "b") and len(Index.load(directory)) == 20


HOLDER = textwrap.dedent(
    """
    import shutil, sys, time
    from assistant.indexing.index import index_lock

    directory, seconds, repair_from = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    with index_lock(directory):
        print("locked", flush=True)
        time.sleep(seconds)  # a writer at work (embedding, or between its two renames)
        if repair_from:
            shutil.rmtree(directory)
            shutil.copytree(repair_from, directory)
    """
)


def hold_lock(directory: Path, seconds: float, repair_from: Path | None = None) -> subprocess.Popen:
    """Another process holding the index's writer lock, as `assist index` does; returns once it holds it."""
    import assistant

    env = {**os.environ, "PYTHONPATH": str(Path(assistant.__file__).parents[1])}
    args = [sys.executable, "-c", HOLDER, str(directory), str(seconds), str(repair_from or "")]
    holder = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_readers_do_not_wait_for_a_long_indexing_run(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    Index([Example("r", "def f(): pass")], np.ones((1, 4), "float32"), {"encoder": "x"}).save(directory)
    holder = hold_lock(directory, 30)
    try:
        started = time.perf_counter()
        assert len(Index.load(directory)) == 1
        assert time.perf_counter() - started < 1
    finally:
        holder.kill()
        holder.wait()


def test_a_read_that_meets_a_writer_mid_swap_waits_and_reads_again(tmp_path: Path) -> None:
    good = tmp_path / "good"
    Index([Example("r", "def f(): pass")], np.ones((1, 4), "float32"), {"encoder": "x"}).save(good)
    directory = tmp_path / "index"
    shutil.copytree(good, directory)
    (directory / "vectors.faiss").write_bytes(b"")  # what a reader may see while a writer swaps directories
    holder = hold_lock(directory, 0.5, repair_from=good)
    try:
        assert len(Index.load(directory)) == 1  # waited for the writer, then read its index
    finally:
        holder.wait(timeout=30)


def test_a_save_removes_what_killed_writers_left(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    for stale in ("index.old-4242", "index.tmp-4243"):
        (tmp_path / stale).mkdir()
        (tmp_path / stale / "meta.json").write_text("{}")
    Index([Example("r", "def f(): pass")], np.ones((1, 4), "float32"), {"encoder": "x"}).save(directory)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "index.lock"]


# -- item 10: malformed banks, BOMs, U+2028, undecodable text, oversized prompts ----------------------------------


@pytest.mark.parametrize("line", ['"x"', "0", "-3", "1.5", "true", "[1]"])
def test_bank_line_must_be_a_positive_integer(tmp_path: Path, line: str) -> None:
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"requirement": "add", "code": "def add(a, b):\\n    return a + b", "line": ' + line + "}\n")
    with pytest.raises(UsageError, match=r"bank.jsonl:1: 'line' must be a positive integer"):
        read_bank(bank)


def test_bank_path_must_be_a_string(tmp_path: Path) -> None:
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"requirement": "add", "code": "x = 1", "path": {"a": 1}}\n')
    with pytest.raises(UsageError, match=r"bank.jsonl:1: 'path' must be a string"):
        read_bank(bank)


def test_bank_with_raw_line_separators_and_a_bom_is_read(tmp_path: Path) -> None:
    bank = tmp_path / "bank.jsonl"
    rows = [
        {"requirement": "split at\u2028line separators", "code": "def f(s):\n    return s.split('\u2028')"},
        {"requirement": "form\x0cfeed and \x1c too", "code": "def g():\n    return 1", "line": 7},
    ]
    # ensure_ascii=False writes U+2028 and \x1c... raw: valid JSON, but str.splitlines() breaks lines there.
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\r\n"
    bank.write_bytes(b"\xef\xbb\xbf" + text.encode())
    examples = read_bank(bank)
    assert [e.requirement for e in examples] == [rows[0]["requirement"], rows[1]["requirement"]]
    assert [e.start_line for e in examples] == [1, 7]
    _, stats = index_bank(bank, ENCODER)
    assert stats.examples == 2


def test_python_files_with_a_bom_are_indexed(scratch_repo: Path) -> None:
    source = 'def with_bom():\n    """Has a byte order mark."""\n    return 1\n'
    (scratch_repo / "bom.py").write_bytes(b"\xef\xbb\xbf" + source.encode())
    git(scratch_repo, "add", "bom.py")
    [example] = extract_python("\ufeff" + source, "bom.py")
    assert (example.name, example.start_line, example.requirement) == ("with_bom", 1, "Has a byte order mark.")
    index, _ = index_repo(scratch_repo, ENCODER)
    assert "with_bom" in names(index)
    assert "with_bom" in [e.name for e in repo_functions(scratch_repo)]


UNDECODABLE = "add \udcff\udcfe"  # what argv gives for the bytes b"add \xff\xfe" (surrogateescape)


def test_openai_backend_refuses_undecodable_text_before_sending() -> None:
    with openai_server() as (url, script):
        backend = load_backend("openai", None, base_url=url, retries=0, timeout=5.0)
        script.requests.clear()
        for call in (
            lambda: backend.sample(build_prompt(UNDECODABLE), SamplingParams(n=1)),
            lambda: backend.count_tokens(build_prompt(UNDECODABLE)),
            lambda: generate(UNDECODABLE, backend, k=0),  # the library API, as a script calls it
        ):
            with pytest.raises(UsageError, match=r"holds bytes that are not UTF-8 \(U\+DCFF at character \d+"):
                call()
        assert script.requests == []  # nothing reached the server


def test_openai_backend_refuses_a_prompt_far_over_the_context_before_sending() -> None:
    huge = build_prompt("add the numbers in a list " * 4600)  # 120 KB
    with openai_server() as (url, script):
        backend = load_backend("openai", None, base_url=url, retries=0, timeout=5.0, context=4096)
        script.requests.clear()
        with pytest.raises(UsageError, match=r"the prompt is about \d+ tokens .* far over the context of 4096"):
            backend.sample(huge, SamplingParams(n=1))
        assert script.requests == []


@pytest.mark.model
def test_local_backend_refuses_undecodable_text_with_one_line(backend) -> None:
    with pytest.raises(UsageError, match="holds bytes that are not UTF-8"):
        backend.sample(build_prompt(UNDECODABLE), SamplingParams(n=1, max_new_tokens=4))
    with pytest.raises(UsageError, match="holds bytes that are not UTF-8"):
        backend.count_tokens(build_prompt(UNDECODABLE))


# -- item 11: numeric options of eval and train are checked at the command line ----------------------------------

# Never a model load, even where an option went unchecked; results (if any) under OUT, which must stay absent.
UNREACHABLE = ["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--out", "OUT"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "codegen", "--limit", "0", *UNREACHABLE], "--limit must be at least 1, not 0"),
        (["eval", "codegen", "--limit", "-1", *UNREACHABLE], "--limit must be at least 1, not -1"),
        (
            ["eval", "codegen", "--temperature", "-1", *UNREACHABLE],
            "--temperature must be at least 0 and at most 2, not -1",
        ),
        (
            ["eval", "codegen", "--temperature", "nan", *UNREACHABLE],
            "--temperature must be at least 0 and at most 2, not nan",
        ),
        (["eval", "codegen", "--top-p", "0", *UNREACHABLE], "--top-p must be above 0 and at most 1, not 0"),
        (["eval", "codegen", "--top-p", "1.5", *UNREACHABLE], "--top-p must be above 0 and at most 1, not 1.5"),
        (["eval", "codegen", "--max-new-tokens", "0", *UNREACHABLE], "--max-new-tokens must be at least 1"),
        (["eval", "codegen", "-n", "0", "-k", "1", *UNREACHABLE], "-n must be at least 1 and at most 64, not 0"),
        (["eval", "codegen", "--demos", "-2", *UNREACHABLE], "--demos must be at least 0 and at most 64, not -2"),
        (["eval", "codegen", "--seed", "-1", *UNREACHABLE], "--seed must be at least 0 and at most 4294967295"),
        (["eval", "codegen", "--timeout", "0", *UNREACHABLE], "--timeout must be above 0 and at most 86400, not 0"),
        (["eval", "likelihood", "--limit", "0", "--backend", "openai", "--out", "OUT"], "--limit must be at least 1"),
        (["eval", "likelihood", "--demos", "-1", "--backend", "openai", "--out", "OUT"], "--demos must be at least 0"),
        (["eval", "retrieval", "--limit", "-1", "--dataset", "mbpp:/missing"], "--limit must be at least 1"),
        (["eval", "docstring", "--limit", "0", "--strategies", "zero", *UNREACHABLE], "--limit must be at least 1"),
        (["eval", "docstring", "-k", "-1", "--strategies", "zero", *UNREACHABLE], "-k must be at least 0"),
        (
            ["eval", "discriminator", "--epochs", "0", "--from-bank", "mbpp:/x", "--out", "OUT"],
            "--epochs must be at least",
        ),
        (
            ["eval", "discriminator", "--mutants", "-1", "--from-bank", "mbpp:/x", "--out", "OUT"],
            "--mutants must be at least 0",
        ),
        (["eval", "repo", "--tasks", "/missing/tasks.txt", *UNREACHABLE], "--tasks: cannot read /missing/tasks.txt"),
        (["train", "retriever", "lail", "--queries", "-1", "--bank", "/missing.jsonl"], "--queries must be at least 0"),
        (["train", "retriever", "--epochs", "0", "--bank", "/missing.jsonl"], "--epochs must be at least 1"),
        (["train", "retriever", "--seed", "-5", "--bank", "/missing.jsonl"], "--seed must be at least 0"),
        (
            ["train", "retriever", "lail", "--hard-negatives", "-1", "--bank", "/missing.jsonl"],
            "--hard-negatives must be",
        ),
        (
            ["train", "retriever", "lail", "--candidates", "0", "--bank", "/missing.jsonl"],
            "--candidates must be at least 1",
        ),
        (
            ["train", "discriminator", "--holdout", "1.5", "--from-bank", "mbpp:/missing"],
            "--holdout must be at least 0",
        ),
        (
            ["train", "discriminator", "--holdout", "-0.1", "--from-bank", "mbpp:/missing"],
            "--holdout must be at least 0",
        ),
        (["train", "discriminator", "--seed", "-1", "--from-bank", "mbpp:/missing"], "--seed must be at least 0"),
        (["train", "docstring-retriever", "/missing", "--limit", "-1"], "--limit must be at least 0"),
        (["train", "docstring-retriever", "/missing", "--seed", "-1"], "--seed must be at least 0"),
    ],
)
def test_numeric_options_out_of_range_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    result = CliRunner().invoke(app, [str(tmp_path / "out") if arg == "OUT" else arg for arg in args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_eval_subset_refuses_a_limit_below_one() -> None:
    from assistant.evaluate import subset

    with pytest.raises(UsageError, match=r"^limit must be at least 1, not -1$"):  # the CLI says --limit
        subset([], -1, 0)


def test_eval_codegen_extend_refuses_a_folder_it_cannot_extend_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    earlier = tmp_path / "n5"
    earlier.mkdir()
    settings = {"command": "codegen", "dataset": "humaneval", "split": "test", "seed": 0, "n": 5, "demos": 4}
    settings |= {"backend": "openai", "model": None, "temperature": 0.8, "top_p": 0.95, "max_new_tokens": 384}
    settings |= {"pool": "mbpp"}
    base = ["eval", "codegen", "--strategies", "zero", "--limit", "1", *UNREACHABLE]
    cases = [
        (None, ["-n", "10"], "not an `assist eval codegen` results folder (no config.json)"),
        ({**settings, "temperature": 0.2}, ["-n", "10"], "that run used other settings ("),
        (settings, ["-n", "5"], "that run already has n=5; ask for a larger -n"),
    ]
    for config, extra, message in cases:
        if config is not None:
            (earlier / "config.json").write_text(json.dumps(config))
        args = [*base, *extra, "--extend", str(earlier)]
        result = CliRunner().invoke(app, [str(tmp_path / "out") if arg == "OUT" else arg for arg in args])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], result.output
        assert not (tmp_path / "out").exists()


def test_a_tasks_file_lists_ids_and_an_empty_one_is_refused(tmp_path: Path) -> None:
    from assistant.ui.eval_cmd import _task_ids

    listed = tmp_path / "tasks.txt"
    listed.write_text("# unseen tasks\nclick:src/click/a.py::f\n\n  tabulate:tabulate/__init__.py::g  # two\n")
    assert _task_ids(listed) == {"click:src/click/a.py::f", "tabulate:tabulate/__init__.py::g"}
    listed.write_text("# nothing but a comment\n\n")
    with pytest.raises(UsageError, match="lists no task ids"):
        _task_ids(listed)
