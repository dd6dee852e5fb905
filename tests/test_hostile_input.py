"""Hostile input (issue 67, items 3, 4 and 7): numeric settings have upper bounds, an expression too deep to parse
is "does not parse" on every road, and bad paths, URLs and folders are one-line errors.

Each test here failed on the code before its fix (see the commits that added them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.config import load_settings
from assistant.errors import UsageError
from assistant.ui.cli import app

from .conftest import git


def one_line_error(args: list[str], *, code: int = 2) -> str:
    """Run `assist ARGS` in-process; it must fail with exactly one `error: ...` line. Returns that line."""
    result = CliRunner().invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


# -- item 3: every numeric setting has an upper bound, checked where it enters -------------------------------------


def test_a_repo_file_cannot_ask_for_a_trillion_candidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No trust is needed to set n, so an untrusted repo could once make `assist generate` build 10^12 seeds.
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".assist.toml").write_text("[generate]\nn = 1000000000000\n", encoding="utf-8")
    monkeypatch.chdir(repo)
    line = one_line_error(["generate", "add two numbers", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"])
    assert "generate.n" in line and "from 1 to 64" in line and ".assist.toml" in line, line


@pytest.mark.parametrize(
    ("key", "env", "raw"),
    [
        ("generate.n", "ASSIST_GENERATE_N", "65"),
        ("generate.k", "ASSIST_GENERATE_K", "1000000"),
        ("generate.max_new_tokens", "ASSIST_GENERATE_MAX_NEW_TOKENS", "1000000000000"),
        ("generate.temperature", "ASSIST_GENERATE_TEMPERATURE", "1e300"),
        ("openai.timeout", "ASSIST_OPENAI_TIMEOUT", "1e300"),
        ("openai.retries", "ASSIST_OPENAI_RETRIES", "1000000"),
        ("openai.concurrency", "ASSIST_OPENAI_CONCURRENCY", "100000"),
        ("openai.context", "ASSIST_OPENAI_CONTEXT", "1000000000000"),
        ("local.context", "ASSIST_LOCAL_CONTEXT", "1000000000000"),
    ],
)
def test_every_numeric_setting_has_an_upper_bound(
    key: str, env: str, raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env, raw)
    with pytest.raises(UsageError, match=rf"bad value for {re.escape(key)} from env {env}: expected .* (to|at most) "):
        load_settings(start=Path("/"))


UNREACHABLE = ["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["generate", "x", "-n", "1000000000000", *UNREACHABLE], "-n must be at least 1 and at most 64"),
        (["generate", "x", "-n", "9" * 400, *UNREACHABLE], "-n must be at least 1 and at most 64, not 999999999999"),
        (["generate", "x", "-k", "100000", *UNREACHABLE], "-k must be at least 0 and at most 64"),
        (["generate", "x", "--max-new-tokens", "10000000", *UNREACHABLE], "--max-new-tokens must be at least 1 and"),
        (["generate", "x", "--temperature", "1e9", *UNREACHABLE], "--temperature must be at least 0 and at most 2"),
        (["generate", "x", "--timeout", "1e300", *UNREACHABLE], "--timeout must be above 0 and at most 86400"),
        (["serve", "--engine", "none", "--threads", "100000000"], "--threads must be at least 1 and at most"),
        (["serve", "--engine", "none", "--context", "100000000000"], "--context must be at least 1 and at most"),
        (["eval", "codegen", "-n", "1000000000000", *UNREACHABLE, "--out", "OUT"], "-n must be at least 1 and"),
        (["eval", "codegen", "--demos", "100000", *UNREACHABLE, "--out", "OUT"], "--demos must be at least 0 and"),
        (["docstring", "f.py", "-k", "100000"], "-k must be at least 0 and at most 64"),
    ],
)
def test_numeric_flags_have_upper_bounds(tmp_path: Path, args: list[str], message: str) -> None:
    line = one_line_error([str(tmp_path / "out") if arg == "OUT" else arg for arg in args])
    assert message in line, line
    assert not (tmp_path / "out").exists()


def test_the_library_refuses_a_trillion_candidates() -> None:
    from assistant.pipeline.options import GenerationOptions

    with pytest.raises(UsageError, match=r"^n must be at least 1 and at most 64, not 1000000000000$"):
        GenerationOptions(n=10**12).check()
    with pytest.raises(UsageError, match=r"^max_new_tokens must be at least 1 and at most"):
        GenerationOptions(max_new_tokens=10**12).check()


# -- item 4: an expression too deep to parse is "does not parse" on every road ---------------------------------------

# What crashed `ast.parse` (RecursionError, MemoryError), and a tree that parses but overflows `ast.unparse`,
# `copy.deepcopy`, NodeVisitors and `compile` after it.
DEEP = {
    "5000 terms": "x = 1" + " + 1" * 5000,
    "20000 minus signs": "x = " + "-" * 20000 + "1",
    "3000 lambdas": "f = " + "lambda: " * 3000 + "0",
    "600 terms": "x = 1" + " + 1" * 600,
}


@pytest.fixture(params=list(DEEP))
def deep(request: pytest.FixtureRequest) -> str:
    return DEEP[request.param]


def test_parse_python_turns_every_deep_source_into_a_syntax_error(deep: str) -> None:
    from assistant.code.parse import Unparsable, parse_python, try_parse

    with pytest.raises(Unparsable):
        parse_python(deep)
    assert try_parse(deep) is None
    assert try_parse("def f():\n    return 1 + 2\n") is not None


def test_index_skips_and_counts_a_file_too_deep_to_parse(scratch_repo: Path, deep: str) -> None:
    from assistant.indexing.index import index_repo

    from .test_inputs import ENCODER

    (scratch_repo / "deep.py").write_text(f"def deep():\n    {deep}\n", encoding="utf-8")
    git(scratch_repo, "add", "deep.py")
    index, stats = index_repo(scratch_repo, ENCODER)
    assert stats.files_unparsed == 1
    assert index.examples and "deep" not in {e.name for e in index.examples}  # the other files are indexed


def test_cli_index_says_how_many_files_did_not_parse(scratch_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import assistant.pipeline.pipeline

    from .test_inputs import ENCODER

    monkeypatch.setattr(assistant.pipeline.pipeline, "load_encoder", lambda *a, **k: ENCODER)
    (scratch_repo / "deep.py").write_text(DEEP["5000 terms"] + "\n", encoding="utf-8")
    git(scratch_repo, "add", "deep.py")
    result = CliRunner().invoke(app, ["index", str(scratch_repo)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "skipped 1 file(s) that do not parse" in result.output


def test_docstring_check_and_generate_file_say_a_deep_file_does_not_parse(tmp_path: Path, deep: str) -> None:
    path = tmp_path / "deep.py"
    path.write_text(f"def f():\n    {deep}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["docstring", "--check", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert "deep.py does not parse (too deeply nested" in result.output or "levels deep" in result.output
    line = one_line_error(["generate", "add two numbers", "--file", str(path), *UNREACHABLE])
    assert "does not parse" in line, line


def test_the_users_test_too_deep_to_parse_is_one_line(deep: str) -> None:
    line = one_line_error(["generate", "add two numbers", "--test", f"assert {deep[4:]}", *UNREACHABLE])
    assert "does not parse" in line, line


def test_a_candidate_too_deep_to_parse_is_dropped(deep: str) -> None:
    from assistant.backends import Completion
    from assistant.core.candidates import collect
    from assistant.methods.condor.data import normal_form

    kept, dropped = collect([Completion(f"```python\n{deep}\n```", 10, "stop"), Completion("y = 2\n", 3, "stop")])
    assert [c.code.strip() for c in kept] == ["y = 2"] and dropped["syntax"] == 1
    assert normal_form(deep) == deep  # condor's: the raw text when it does not parse


def test_a_model_written_test_too_deep_to_parse_is_dropped(deep: str) -> None:
    from assistant.core.agreement import tests_request, written_tests
    from assistant.core.rank import Problem

    from .conftest import ScriptedBackend

    replies = (f"assert add(1, 2) == 3\nassert add(0, 0) == ({deep[4:]})\n",)
    backend = ScriptedBackend(replies)
    prompt = tests_request("add two numbers", "add", "def add(a, b):", backend.model, 1, 64)[0]
    problem = Problem("add two numbers", prompt)
    tests = written_tests(problem, "add", "def add(a, b):", backend, samples=1, tokens=30000)  # none cut short
    assert tests == ["assert add(1, 2) == 3"]


@pytest.mark.parametrize("mode", [["--check"], ["--write", "--fail-on-change", *UNREACHABLE]])
def test_the_pre_commit_hook_says_a_deep_staged_file_does_not_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: list[str]
) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "deep.py").write_text(f"def f():\n    {DEEP['5000 terms']}\n", encoding="utf-8")
    git(tmp_path, "add", "deep.py")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["docstring", "--staged", *mode])  # what the hook runs
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "deep.py does not parse (too deeply nested or too long to parse)" in result.output, result.output


# -- item 7: bad paths, URLs, folders and names are one line, never a traceback, a hang or gigabytes ----------------


@pytest.mark.parametrize("url", ["http://[::1", "http://h:abc/v1", "http://[::1]:99999/v1", "http://", "ftp://h/v1"])
def test_a_malformed_base_url_is_one_line(url: str) -> None:
    line = one_line_error(["generate", "add two numbers", "--base-url", url])
    assert f"the base URL {url!r} is not a server's URL" in line, line


def test_config_trust_with_a_config_folder_it_cannot_write_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".assist.toml").write_text("[generate]\nn = 3\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASSIST_CONFIG_DIR", "/proc/assist-config")  # nobody, root included, can create it
    line = one_line_error(["config", "trust"])
    assert "cannot write the trust record /proc/assist-config/trusted.json" in line, line


def test_hook_install_when_the_hooks_folder_is_a_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(tmp_path, "init", "-q")
    hooks = tmp_path / ".git" / "hooks"
    shutil.rmtree(hooks, ignore_errors=True)
    hooks.write_text("not a folder\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    line = one_line_error(["hook", "install"])
    assert f"{hooks} is not a folder" in line, line
    assert hooks.read_text(encoding="utf-8") == "not a folder\n"


def test_tests_from_a_device_or_a_fifo_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "tests.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    for path in ("/dev/zero", str(fifo)):  # /dev/zero filled 5 GB in 3 s; a FIFO with no writer hung
        line = one_line_error(["generate", "add", "--tests", path, *UNREACHABLE])
        assert f"tests file {path} does not exist or is not a regular file" in line, line
    assert time.monotonic() - started < 30


def test_a_tests_file_linked_to_a_device_or_too_large_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "tests.py"
    link.symlink_to("/dev/zero")
    line = one_line_error(["generate", "add", "--tests", str(link), *UNREACHABLE])
    assert "is not a regular file" in line, line
    huge = tmp_path / "huge.py"
    with huge.open("wb") as handle:
        handle.truncate(64 << 20)  # sparse: no disk used
    line = one_line_error(["generate", "add", "--tests", str(huge), *UNREACHABLE])
    assert f"tests file {huge} is larger than 16 MB" in line, line
    ok = tmp_path / "ok.py"
    ok.write_text("assert add(1, 2) == 3\n", encoding="utf-8")
    from assistant.core.generation import read_tests

    assert read_tests(ok) == ["assert add(1, 2) == 3"]


def test_models_pull_refuses_an_empty_name() -> None:
    line = one_line_error(["models", "pull", ""])
    assert "the model name is empty" in line, line


FULL_DISK = r"""
import hashlib, subprocess, sys
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

import assistant.pipeline.pipeline
from assistant.indexing.index import TextEncoder, load_repo_index
from assistant.ui.cli import app


class Wide(TextEncoder):
    name, dim = "wide-test", int(sys.argv[2])

    def encode(self, texts, progress=None):
        rows = [np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).random(self.dim)
                for t in texts]
        vectors = np.asarray(rows, dtype="float32").reshape(len(texts), self.dim) + 0.1
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


assistant.pipeline.pipeline.load_encoder = lambda *a, **k: Wide()
repo = Path(sys.argv[1])
first = CliRunner().invoke(app, ["index", str(repo)])
assert first.exit_code == 0, first.output
before = sorted(e.name for e in load_repo_index(repo).examples)
many = "".join(f"def function_{i}(x):\n    '''Return x plus {i}, written out at length.'''\n    return x + {i}\n\n"
               for i in range(int(sys.argv[3])))
(repo / "many.py").write_text(many)
subprocess.run(["git", "add", "many.py"], cwd=repo, check=True)
second = CliRunner().invoke(app, ["index", str(repo)])
print("EXIT", second.exit_code, repr(second.exception))
print("OUTPUT", second.output.strip())
assert sorted(e.name for e in load_repo_index(repo).examples) == before  # the old index is whole
print("INTACT")
"""


@pytest.mark.parametrize(
    ("dim", "functions", "says"),
    [(16, 3000, "No space left on device"), (8192, 8, "faiss:")],  # examples.jsonl, then the vectors, fill it
)
def test_a_full_disk_while_indexing_is_one_line_and_the_old_index_stays(
    scratch_repo: Path, dim: int, functions: int, says: str
) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("needs unshare -rm (user and mount namespaces) to mount a small tmpfs")
    folder = scratch_repo / ".assist"
    folder.mkdir(exist_ok=True)
    script = f'mount -t tmpfs -o size=256k tmpfs "{folder}" && exec "{sys.executable}" -c "$0" "$@"'
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, FULL_DISK, str(scratch_repo), str(dim), str(functions)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"},
    )
    assert "INTACT" in result.stdout, result.stdout + result.stderr
    output = result.stdout.split("OUTPUT ", 1)[1].split("\nINTACT")[0]
    assert "EXIT 1 SystemExit" in result.stdout and len(output.splitlines()) == 1, result.stdout
    assert output.startswith("error: cannot write the index to ") and says in output, output
    assert "the index there before is unchanged" in output


def test_a_repo_test_file_too_deep_to_parse_is_passed_over(scratch_repo: Path, deep: str) -> None:
    from assistant.core.repo_tests import find_tests
    from assistant.core.spec_tests import tests_source

    tests = scratch_repo / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_deep.py").write_text(f"def test_add():\n    add(1, 2)\n    {deep}\n", encoding="utf-8")
    (tests / "test_ok.py").write_text("def test_add():\n    assert add(1, 2) == 3\n", encoding="utf-8")
    git(scratch_repo, "add", "tests")
    assert find_tests(scratch_repo, "util.py", "add") == ["tests/test_ok.py::test_add"]
    assert tests_source(scratch_repo, ["tests/test_deep.py::test_add"]) == ""


def test_a_huge_repo_config_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    with (tmp_path / ".assist.toml").open("wb") as handle:
        handle.truncate(4 << 30)  # sparse: a 4 GB file that uses no disk, and would use 4 GB of memory
    with pytest.raises(UsageError, match=r"\.assist\.toml is larger than 1 MB"):
        load_settings(start=tmp_path)
