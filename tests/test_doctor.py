"""Tests for assistant.ui.doctor: each line says what is true of this install, and what to do when it is not."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from assistant.backends.models import DEFAULT_GENERATOR, REGISTRY
from assistant.code.extract import git_blob_hash
from assistant.indexing.index import Index
from assistant.ui import doctor
from assistant.ui.doctor import Check
from tests.conftest import SCRATCH_FILES, landlock_abi


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


@pytest.fixture
def empty_models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A models dir of our own (conftest's points at the user's shared cache)."""
    path = tmp_path / "models"
    path.mkdir()
    monkeypatch.setenv("ASSIST_MODELS_DIR", str(path))
    return path


# --- sandbox --------------------------------------------------------------------------------------------


@pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")
def test_sandbox_lines_are_ok_with_every_layer_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSIST_SANDBOX_DISABLE", raising=False)
    checks = by_name(doctor.sandbox_checks())
    assert checks["sandbox landlock"].ok is True
    assert checks["sandbox landlock"].detail.startswith(f"ABI {landlock_abi()}")
    for layer in ("seccomp", "no_new_privs", "caps", "dumpable", "hook"):
        assert checks[f"sandbox {layer}"].ok is True, checks[f"sandbox {layer}"]
    namespaces = checks["sandbox namespaces"]
    assert namespaces.ok in (True, None) and "namespaces" in namespaces.detail
    root = checks["sandbox root"]
    assert root.ok is (True if namespaces.ok else None), root  # the root needs the namespaces, and holds with them
    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "namespaces")
    with pytest.warns(RuntimeWarning, match="namespaces"):
        off = by_name(doctor.sandbox_checks())
    assert off["sandbox namespaces"].ok is None and off["sandbox root"].ok is None


@pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")
def test_sandbox_line_reports_a_disabled_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "landlock,hook")
    with pytest.warns(RuntimeWarning, match="landlock"):
        checks = by_name(doctor.sandbox_checks())
    for layer in ("landlock", "hook"):
        check = checks[f"sandbox {layer}"]
        assert check.ok is None and "ASSIST_SANDBOX_DISABLE" in check.detail
        assert check.fix and "unset ASSIST_SANDBOX_DISABLE" in check.fix
    assert checks["sandbox seccomp"].ok is True
    assert "WARN  sandbox landlock" in doctor.render(list(checks.values()))


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="no seccomp filter for this CPU")
def test_the_memory_line_says_which_boundary_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    # RLIMIT_AS misses memfd pages (issue 67): the line names what closes that gap, and the memory cgroup's state.
    monkeypatch.delenv("ASSIST_SANDBOX_DISABLE", raising=False)
    check = by_name(doctor.sandbox_checks())["sandbox memory"]
    assert check.ok is True and check.detail.startswith("memfd_create denied by seccomp"), check
    assert "64 open files of 16 MB" in check.detail and "memory cgroup" in check.detail
    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "seccomp")
    with pytest.warns(RuntimeWarning, match="seccomp"):
        off = by_name(doctor.sandbox_checks())["sandbox memory"]
    assert off.ok is None and off.detail.startswith("memfd_create open") and off.fix, off


def test_bad_disable_value_fails_the_sandbox_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSIST_SANDBOX_DISABLE", "landlok")
    (check,) = doctor.sandbox_checks()
    assert check.ok is False and "landlok" in check.detail


# --- models -----------------------------------------------------------------------------------------------


def test_models_line_when_the_models_dir_is_empty(empty_models_dir: Path) -> None:
    checks = by_name(doctor.model_checks())
    generator = checks[f"model {DEFAULT_GENERATOR}"]
    assert generator.ok is False
    assert generator.fix == f"assist models pull {DEFAULT_GENERATOR}"
    assert "default generator" in generator.detail
    optional = checks["model qwen2.5-coder-0.5b"]  # the fast, low-memory choice
    # Not downloaded, an optional model is no problem: an OK line that says how to get it (it was a warning).
    assert optional.ok is True and "optional" in optional.detail and "fast, low-memory" in optional.detail
    assert "assist models pull qwen2.5-coder-0.5b" in optional.detail


def test_models_line_verifies_the_converted_files(empty_models_dir: Path) -> None:
    spec = REGISTRY[DEFAULT_GENERATOR]
    hf = spec.cache_dir / "hf"
    hf.mkdir(parents=True)
    (hf / "model.safetensors").write_bytes(b"x" * 10)
    manifest = {"name": spec.name, "gguf_sha256": spec.sha256, "files": {"model.safetensors": 10}}
    (spec.cache_dir / "manifest.json").write_text(json.dumps(manifest))
    assert by_name(doctor.model_checks())[f"model {spec.name}"].ok is True

    (hf / "model.safetensors").write_bytes(b"x" * 9)  # truncated since conversion
    check = by_name(doctor.model_checks())[f"model {spec.name}"]
    assert check.ok is False and "missing or corrupt" in check.detail
    assert check.fix == f"assist models pull {spec.name} --force"


# --- index ------------------------------------------------------------------------------------------------


def write_index(root: Path, files: dict[str, str]) -> Path:
    """An index of `root` recording these files' blobs (no encoder needed: no examples, zero vectors)."""
    directory = root / ".assist" / "index"
    meta = {"source": {"kind": "repo", "path": str(root)}, "files": files, "encoder": "all-minilm-l6-v2"}
    Index(examples=[], vectors=np.zeros((0, 384), dtype="float32"), meta=meta).save(directory)
    return directory


def tracked_blobs(root: Path) -> dict[str, str]:
    return {rel: git_blob_hash((root / rel).read_bytes()) for rel in SCRATCH_FILES if rel.endswith(".py")}


def test_index_line_outside_a_repo_is_a_warning(tmp_path: Path) -> None:
    (check,) = doctor.index_checks(tmp_path)
    assert check.ok is None and "not in a git repo" in check.detail


def test_tests_python_line_says_which_interpreter_runs_the_repos_tests(
    scratch_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (check,) = doctor.tests_python_checks(scratch_repo)
    assert check.ok and check.detail.startswith(f"{sys.executable}, assist's own") and "--python" in check.detail
    venv = tmp_path / "env"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    (check,) = doctor.tests_python_checks(scratch_repo)
    assert check.detail.startswith(f"{venv / 'bin' / 'python'}, the active virtualenv")
    assert doctor.tests_python_checks(tmp_path / "env") == []  # no git repo: no repo tests to run


def test_index_line_when_the_repo_is_not_indexed(scratch_repo: Path) -> None:
    (check,) = doctor.index_checks(scratch_repo)
    assert (check.ok, check.fix) == (None, "assist index")
    assert not (scratch_repo / ".assist").exists(), "the doctor must not write into the repo"


def test_index_line_up_to_date_then_stale(scratch_repo: Path) -> None:
    write_index(scratch_repo, tracked_blobs(scratch_repo))
    (check,) = doctor.index_checks(scratch_repo / "text")
    assert check.ok is True and "up to date" in check.detail

    (scratch_repo / "mathutils.py").write_text("def changed():\n    return 1\n")
    (check,) = doctor.index_checks(scratch_repo)
    assert check.ok is None and "1 file changed" in check.detail and check.fix == "assist index"


def test_index_line_passes_over_a_name_the_index_leaves_out(scratch_repo: Path) -> None:
    """A file whose name is not UTF-8 is never indexed, so it is no change since the index was built."""
    (scratch_repo / b"bad\xff.py".decode("utf-8", "surrogateescape")).write_bytes(b"def f():\n    return 1\n")
    write_index(scratch_repo, tracked_blobs(scratch_repo))
    (check,) = doctor.index_checks(scratch_repo)
    assert check.ok is True and "up to date" in check.detail, check.detail


def test_index_line_when_the_index_is_unreadable(scratch_repo: Path) -> None:
    directory = write_index(scratch_repo, tracked_blobs(scratch_repo))
    (directory / "vectors.faiss").write_bytes(b"truncated")
    (check,) = doctor.index_checks(scratch_repo)
    assert check.ok is False and "assist index" in (check.fix or "")


# --- config, extras, output --------------------------------------------------------------------------------


def test_config_error_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_dir = Path(os.environ["ASSIST_CONFIG_DIR"])
    (config_dir / "config.toml").write_text("backend = [not toml\n")
    monkeypatch.chdir(tmp_path)
    (check,) = doctor.config_checks()
    assert check.ok is False and "config.toml" in check.detail


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("ASSIST_BACKEND", "nope", "unknown backend 'nope'"),
        ("ASSIST_GENERATE_RANKER", "nope", "unknown ranker 'nope'"),
        ("ASSIST_GENERATE_RETRIEVER", "nope", "unknown retriever 'nope'"),
    ],
)
def test_a_setting_generate_would_refuse_fails_the_config_line(
    variable: str, value: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    (check,) = doctor.config_checks()
    assert check.ok is False and message in check.detail


def test_config_line_names_where_settings_come_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASSIST_BACKEND", "openai")
    (check,) = doctor.config_checks()
    assert check.ok is True and "backend openai (env ASSIST_BACKEND)" in check.detail


def test_a_missing_extra_is_not_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """`assist serve` runs on the built-in OpenVINO engine: without llama_cpp the line is OK, names the one engine
    that needs it and how to install it (it used to warn that llama_cpp was "needed for `assist serve`")."""
    monkeypatch.setattr(doctor.importlib.util, "find_spec", lambda name: None)
    checks = by_name(doctor.extra_checks())
    serve, charts = checks["extra serve"], checks["extra eval"]
    assert serve.ok is True and charts.ok is True
    assert "--engine llama.cpp" in serve.detail and "built-in OpenVINO engine" in serve.detail
    assert "needed for `assist serve`" not in serve.detail
    assert "pip install -e '.[serve]'" in serve.detail and "pip install -e '.[eval]'" in charts.detail
    assert "assist[" not in serve.detail + charts.detail  # not on PyPI: the checkout's extras
    assert "0 failed, 0 to look at" in doctor.render(list(checks.values()))


def test_an_installed_extra_says_what_it_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor.importlib.util, "find_spec", lambda name: object())
    serve = by_name(doctor.extra_checks())["extra serve"]
    assert serve.ok is True and serve.detail.startswith("llama_cpp installed: `assist serve --engine llama.cpp`")


def test_render_json_and_exit_code() -> None:
    checks = [
        Check("a", True, "fine"),
        Check("bb", None, "meh", "do this"),
        Check("c", False, "broken", "do that"),
    ]
    text = doctor.render(checks)
    assert text.splitlines()[0] == "OK    a   fine"
    assert "-> do this" in text and "-> do that" in text
    assert text.splitlines()[-1] == "3 checks: 1 failed, 1 to look at"
    assert json.loads(doctor.to_json(checks))[2] == {"name": "c", "ok": False, "detail": "broken", "fix": "do that"}
    assert doctor.exit_code(checks) == 1 and doctor.exit_code(checks[:2]) == 0


def test_whole_report_is_fast_and_complete(empty_models_dir: Path, tmp_path: Path) -> None:
    import time

    started = time.monotonic()
    checks = doctor.doctor_report(tmp_path)
    assert time.monotonic() - started < 5
    names = [check.name for check in checks]
    assert names[0].startswith("model ") and "index" in names and "config" in names
    assert "sandbox landlock" in names and names[-1] == "extra serve"


def test_an_untrusted_repo_file_is_a_warning_until_trusted(scratch_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.config import trust_repo_config

    (scratch_repo / ".assist.toml").write_text('backend = "openai"\n[openai]\nbase_url = "http://127.0.0.1:9/v1"\n')
    monkeypatch.chdir(scratch_repo)
    line = {c.name: c for c in doctor.config_checks()}["repo config"]
    assert line.ok is None and "not trusted" in line.detail and "assist config trust" in line.fix
    trust_repo_config(scratch_repo)
    line = {c.name: c for c in doctor.config_checks()}["repo config"]
    assert line.ok is True and line.detail.endswith("trusted")


def test_assist_doctor_command_prints_json_and_exits_by_the_worst_check(
    empty_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["doctor", "--json"])
    checks = json.loads(result.output)
    names = {c["name"] for c in (checks["checks"] if isinstance(checks, dict) else checks)}
    assert {"config", "sandbox landlock", "sandbox seccomp"} <= names
    assert result.exit_code == 1  # the default generator is not ready in an empty models dir
    text = CliRunner().invoke(app, ["doctor"])
    assert "sandbox landlock" in text.output and text.exit_code == result.exit_code
