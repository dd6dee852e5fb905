"""Settings layering: defaults < user config < repo .assist.toml < environment < flags, with sources."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.config import load_settings, user_config_path
from assistant.errors import UsageError
from assistant.ui.cli import app

from .conftest import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    return path


def write_user(text: str) -> Path:
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSIST_LOCAL_WARM")  # the tests' own setting (conftest)
    settings = load_settings(start=Path("/"))
    assert settings.backend == "local" and settings.model is None
    assert settings.values["openai.timeout"].source == "default"
    local = {"context": 8192, "engine": "openvino", "decoding": "auto", "weights": "auto", "tests_model": "auto"}
    local["warm"] = "start"
    assert settings.backend_options() == local  # the local table


def test_layers_override_in_order(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = write_user('backend = "openai"\n[openai]\nbase_url = "http://user/v1"\ntimeout = 30\nretries = 5\n')
    (repo / ".assist.toml").write_text('[openai]\nbase_url = "http://repo/v1"\ntimeout = 20\n', encoding="utf-8")
    (repo / "sub").mkdir()
    monkeypatch.setenv("ASSIST_OPENAI_TIMEOUT", "10")
    with pytest.raises(UsageError, match="assist config trust"):  # the repo's base_url needs trust (test_trust.py)
        load_settings(start=repo / "sub")
    assert CliRunner().invoke(app, ["config", "trust", str(repo / "sub")]).exit_code == 0
    settings = load_settings({"openai.api": "completions", "model": None}, start=repo / "sub")
    assert settings.values["backend"].source == str(user)
    assert settings["openai.retries"] == 5 and settings.values["openai.retries"].source == str(user)
    assert settings["openai.base_url"] == "http://repo/v1"
    assert settings.values["openai.base_url"].source == str(repo / ".assist.toml")
    assert (
        settings["openai.timeout"] == 10.0 and settings.values["openai.timeout"].source == "env ASSIST_OPENAI_TIMEOUT"
    )
    assert settings["openai.api"] == "completions" and settings.values["openai.api"].source == "flag"
    options = settings.backend_options()
    assert options["base_url"] == "http://repo/v1" and options["api"] == "completions"


def test_a_key_in_the_repo_config_is_refused(repo: Path) -> None:
    (repo / ".assist.toml").write_text('[openai]\napi_key = "sk-secret"\n', encoding="utf-8")
    with pytest.raises(UsageError, match="keep keys out of the repo"):
        load_settings(start=repo)


def test_unknown_keys_and_bad_values_name_the_file(repo: Path) -> None:
    (repo / ".assist.toml").write_text('[openai]\nbse_url = "x"\n', encoding="utf-8")
    with pytest.raises(
        UsageError,
        match=r"unknown setting 'openai.bse_url' in .*\.assist\.toml; did you mean openai.base_url\? "
        r"\(`assist config show` lists all \d+\)$",
    ):
        load_settings(start=repo)
    (repo / ".assist.toml").write_text("[openai]\nretries = -1\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad value for openai\.retries"):
        load_settings(start=repo)
    (repo / ".assist.toml").write_text("backend = \n", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_settings(start=repo)


def test_config_show_never_prints_the_key(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_user('[openai]\napi_key = "sk-user-secret"\n')
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["config", "show", "--json"], env={**os.environ})
    assert result.exit_code == 0, result.output
    assert "sk-user-secret" not in result.output
    rows = {row["key"]: row for row in json.loads(result.output)["settings"]}
    assert rows["openai.api_key"]["value"] == "(set)"
    assert rows["openai.base_url"] == {
        "key": "openai.base_url",
        "value": "http://127.0.0.1:9/v1",
        "source": "env OPENAI_BASE_URL",
        "trust": None,
        "help": rows["openai.base_url"]["help"],
        "unset": "the openai backend needs one",
    }
    table = CliRunner().invoke(app, ["config", "show"])
    assert table.exit_code == 0 and "sk-user-secret" not in table.output and "openai.base_url" in table.output


def test_config_show_says_what_an_unset_value_means(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not "(unset)": the value in effect (the default model by name, the token limit, a fresh seed)."""
    from assistant.backends.models import DEFAULT_GENERATOR

    monkeypatch.chdir(repo)
    lines = {
        line.split("=")[0].strip(): line for line in CliRunner().invoke(app, ["config", "show"]).output.splitlines()
    }
    assert f"(unset: {DEFAULT_GENERATOR}, the default)" in lines["model"]
    assert "(unset: 256; filling a stub: sized to its docstring)" in lines["generate.max_new_tokens"]
    assert "(unset: a fresh seed each run)" in lines["generate.seed"]
    assert "(unset)" not in "".join(lines.values())  # every setting that may be unset says what that means


@pytest.mark.parametrize("raw", ["nan", "inf", "-1", "0"])
def test_a_timeout_must_be_a_finite_positive_number(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSIST_OPENAI_TIMEOUT", raw)
    with pytest.raises(UsageError, match=r"bad value for openai\.timeout from env ASSIST_OPENAI_TIMEOUT"):
        load_settings(start=Path("/"))


def test_local_context_reaches_the_local_backend_and_is_checked(monkeypatch) -> None:
    from assistant.config import backend_settings

    assert backend_settings("local", None).backend_options() == {
        "context": 8192,
        "engine": "openvino",
        "decoding": "auto",
        "weights": "auto",
        "tests_model": "auto",
        "warm": "off",  # the tests' setting (conftest)
    }
    monkeypatch.setenv("ASSIST_LOCAL_CONTEXT", "4096")
    settings = backend_settings("local", None)
    options = settings.backend_options()
    same = {"engine": "openvino", "decoding": "auto", "weights": "auto", "tests_model": "auto", "warm": "off"}
    assert options == {"context": 4096, **same}
    assert settings.values["local.context"].source == "env ASSIST_LOCAL_CONTEXT"
    monkeypatch.setenv("ASSIST_LOCAL_CONTEXT", "12")
    with pytest.raises(UsageError, match=r"local\.context"):
        backend_settings("local", None)


def test_own_file_is_on_by_default_and_the_setting_turns_it_off(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.pipeline.options import GenerationOptions

    assert GenerationOptions.from_settings(load_settings(start=repo)).own_file is True
    (repo / ".assist.toml").write_text("[generate]\nown_file = false\n", encoding="utf-8")  # no trust needed
    assert GenerationOptions.from_settings(load_settings(start=repo)).own_file is False
    monkeypatch.setenv("ASSIST_GENERATE_OWN_FILE", "1")
    assert GenerationOptions.from_settings(load_settings(start=repo)).own_file is True


def test_local_engine_setting_picks_the_backend(monkeypatch, tmp_path):
    """`local.engine` (ASSIST_LOCAL_ENGINE, --engine) loads the local model through its engine's backend, OpenVINO
    by default, with the local context limit; anything else is a one-line error."""
    import assistant.pipeline.pipeline as pipeline
    from assistant.config import backend_settings

    loaded = []
    monkeypatch.setattr(
        pipeline, "load_backend", lambda name, model, progress=None, **options: loaded.append((name, options))
    )
    settings = backend_settings("local", None)
    pipeline.load_generator(settings.backend, settings.model, **settings.backend_options())
    monkeypatch.setenv("ASSIST_LOCAL_ENGINE", "ct2")
    settings = backend_settings("local", None)
    pipeline.load_generator(settings.backend, settings.model, **settings.backend_options())
    settings = backend_settings("local", None, engine="transformers")  # the --engine flag wins
    pipeline.load_generator(settings.backend, settings.model, **settings.backend_options(), precision="fp32")
    assert loaded == [
        ("local-ov", {"context": 8192, "decoding": "auto", "weights": "auto"}),  # the openvino engine's two
        ("local-ct2", {"context": 8192}),
        ("local", {"context": 8192, "precision": "fp32"}),
    ]
    monkeypatch.setenv("ASSIST_LOCAL_ENGINE", "llama")
    with pytest.raises(UsageError, match="ASSIST_LOCAL_ENGINE"):
        backend_settings("local", None)
