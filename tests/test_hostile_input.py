"""Hostile input (issue 67, items 3, 4 and 7): numeric settings have upper bounds, an expression too deep to parse
is "does not parse" on every road, and bad paths, URLs and folders are one-line errors.

Each test here failed on the code before its fix (see the commits that added them).
"""

from __future__ import annotations

import re
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

    with pytest.raises(UsageError, match="n must be from 1 to 64"):
        GenerationOptions(n=10**12).check()
    with pytest.raises(UsageError, match="max new tokens must be from 1 to"):
        GenerationOptions(max_new_tokens=10**12).check()
