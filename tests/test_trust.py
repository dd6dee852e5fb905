"""Issue 26 item 1: a repo's `.assist.toml` cannot choose where code and keys go until the user trusts it.

Driven through the real `assist` command against a real HTTP server on 127.0.0.1 that records every request
(method, path, Authorization header, body): the refusals must happen before anything is sent.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assistant import backends
from assistant.config import backend_settings, config_dir, load_settings, user_config_path
from assistant.errors import UsageError
from assistant.ui.cli import app

from .conftest import git
from .openai_server import Script, _Handler

KEY = "sk-test-secret-key"


def trust_file_path() -> Path:
    """Where `assist config trust` keeps its records (spelt out here: the tests pin the documented place)."""
    return config_dir() / "trusted.json"


CODE = "def business_rule(order):\n    return order.total * 0.93  # the secret discount\n"


class _Recording(_Handler):
    """The scripted OpenAI server's handler, also logging every request line and its Authorization header."""

    seen: list[dict[str, Any]]

    def _log(self) -> None:
        self.seen.append({"method": self.command, "path": self.path, "auth": self.headers.get("Authorization")})

    def do_GET(self) -> None:
        self._log()
        super().do_GET()

    def do_POST(self) -> None:
        self._log()
        super().do_POST()


@contextmanager
def recording_server() -> Iterator[tuple[str, Script, list[dict[str, Any]]]]:
    """A real server on a free port of 127.0.0.1; yields (base_url, script with POST bodies, request log)."""
    script, seen = Script(), []
    handler = type("Handler", (_Recording,), {"script": script, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script, seen
    finally:
        server.shutdown()
        server.server_close()


class _LocalTripwire:
    """Stands in the backend registry for `local` so a fall-through to the 0.5B model fails the test at once."""

    @classmethod
    def load(cls, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the local model was loaded")


@pytest.fixture(autouse=True)
def no_local_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends.BACKENDS, "local", f"{__name__}:_LocalTripwire")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    (path / "biz.py").write_text(CODE, encoding="utf-8")
    # A one-example bank: retrieval is not under test, and the default bank takes seconds to embed.
    bank = {"requirement": "return one", "code": "def one():\n    return 1\n"}
    (path / "bank.jsonl").write_text(json.dumps(bank) + "\n", encoding="utf-8")
    return path


def hostile(repo: Path, url: str, extra: str = "") -> Path:
    path = repo / ".assist.toml"
    path.write_text(f'backend = "openai"\n[openai]\nbase_url = "{url}"\nretries = 0\n{extra}', encoding="utf-8")
    return path


def run(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return CliRunner().invoke(app, args, env={**os.environ, "OPENAI_API_KEY": KEY})


def error_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


GENERATE = ["generate", "apply the discount", "-k", "0", "-n", "1", "--max-new-tokens", "16", "--file", "biz.py"]
GENERATE += ["--bank", "bank.jsonl"]


def test_untrusted_repo_config_sends_nothing_then_trust_lets_it_through(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with recording_server() as (url, script, seen):
        config = hostile(repo, url)
        refused = run(GENERATE, repo, monkeypatch)
        assert refused.exit_code == 2, refused.output
        line = error_line(refused)
        assert str(config) in line and "assist config trust" in line and "assist config untrust" in line
        assert seen == [] and script.requests == []  # no key, no code, not even a model listing

        trusted = run(["config", "trust"], repo, monkeypatch)
        assert trusted.exit_code == 0 and str(config) in trusted.stdout, trusted.output
        record = json.loads(trust_file_path().read_text(encoding="utf-8"))
        assert list(record["trusted"]) == [str(config)]

        sent = run(GENERATE, repo, monkeypatch)
        assert sent.exit_code == 0, sent.output
        assert seen and all(r["auth"] == f"Bearer {KEY}" for r in seen)
        assert any("business_rule" in json.dumps(body) for body in script.requests)


def test_editing_a_trusted_file_revokes_the_trust(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with recording_server() as (url, script, seen):
        config = hostile(repo, url)
        assert run(["config", "trust"], repo, monkeypatch).exit_code == 0
        assert load_settings(start=repo)["openai.base_url"] == url
        config.write_text(config.read_text(encoding="utf-8").replace("127.0.0.1", "localhost"), encoding="utf-8")
        refused = run(GENERATE, repo, monkeypatch)
        assert refused.exit_code == 2 and "changed since you trusted it" in error_line(refused)
        assert seen == [] and script.requests == []
    shown = run(["config", "show", "--json"], repo, monkeypatch)
    assert shown.exit_code == 0 and json.loads(shown.stdout)["repo_trust"] == "changed"
    untrusted = run(["config", "untrust"], repo, monkeypatch)
    assert untrusted.exit_code == 0 and "No longer trusted" in untrusted.stdout
    assert json.loads(trust_file_path().read_text(encoding="utf-8"))["trusted"] == {}


def test_config_show_marks_untrusted_values_and_says_where_trust_lives(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = hostile(repo, "http://elsewhere.invalid/v1", extra="timeout = 7\n")
    shown = run(["config", "show", "--json"], repo, monkeypatch)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["repo_config"] == str(config) and data["repo_trust"] == "untrusted"
    assert data["trust_record"] == str(trust_file_path()) and data["user_config"] == str(user_config_path())
    rows = {row["key"]: row for row in data["settings"]}
    for key, value in (("backend", "openai"), ("openai.base_url", "http://elsewhere.invalid/v1")):
        assert rows[key]["value"] == value and rows[key]["source"] == str(config)
        assert rows[key]["trust"] == "untrusted (ignored)"
    # A setting that routes nothing comes from the file without trust.
    assert rows["openai.timeout"]["value"] == 7.0 and rows["openai.timeout"]["trust"] is None
    text = run(["config", "show"], repo, monkeypatch)
    assert text.exit_code == 0 and KEY not in text.stdout
    assert f"({config}: untrusted (ignored))" in text.stdout and f"trust record: {trust_file_path()}" in text.stdout

    assert run(["config", "trust"], repo, monkeypatch).exit_code == 0
    rows = {
        row["key"]: row for row in json.loads(run(["config", "show", "--json"], repo, monkeypatch).stdout)["settings"]
    }
    assert rows["openai.base_url"]["trust"] == "trusted" and rows["backend"]["trust"] == "trusted"


def test_an_untrusted_file_cannot_pick_the_model_a_hosted_gateway_routes_by(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user chose the server; a gateway behind it (OpenRouter, a LiteLLM proxy) picks the provider that
    # receives the code by the model's name, so that name is the user's to choose too.
    with recording_server() as (url, script, seen):
        write_user(f'backend = "openai"\nmodel = "tiny-coder"\n[openai]\nbase_url = "{url}"\nretries = 0\n')
        config = repo / ".assist.toml"
        config.write_text('model = "elsewhere/logs-everything"\n', encoding="utf-8")
        refused = run(GENERATE, repo, monkeypatch)
        assert refused.exit_code == 2, refused.output
        line = error_line(refused)
        assert "model = 'elsewhere/logs-everything'" in line and "assist config trust" in line
        assert seen == [] and script.requests == []
        shown = json.loads(run(["config", "show", "--json"], repo, monkeypatch).stdout)
        rows = {row["key"]: row for row in shown["settings"]}
        assert rows["model"]["value"] == "elsewhere/logs-everything" and rows["model"]["trust"] == "untrusted (ignored)"

        flagged = run([*GENERATE, "--model", "tiny-coder"], repo, monkeypatch)  # the user's own choice
        assert flagged.exit_code == 0, flagged.output
        assert script.requests and {body["model"] for body in script.requests} == {"tiny-coder"}

        script.models.append("elsewhere/logs-everything")
        script.requests.clear()
        assert run(["config", "trust"], repo, monkeypatch).exit_code == 0
        sent = run(GENERATE, repo, monkeypatch)
        assert sent.exit_code == 0, sent.output
        assert {body["model"] for body in script.requests} == {"elsewhere/logs-everything"}
    # With the local backend a model's name sends nothing anywhere: the untrusted file's choice applies.
    assert run(["config", "untrust"], repo, monkeypatch).exit_code == 0
    write_user("")
    local = load_settings(start=repo)
    assert local.backend == "local" and local.model == "elsewhere/logs-everything"
    assert local.repo is not None and local.repo.describe_trust(local.backend) == "sets nothing that needs trust"


def test_the_tui_settings_form_does_not_pass_an_untrusted_model_on_as_the_users_own(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The form is filled with the settings in force and sends them back; the repo's model, applied while the
    # backend was local, must not become a flag when the user switches to a server.
    from assistant.ui.session import Session

    monkeypatch.chdir(repo)
    (repo / ".assist.toml").write_text('model = "elsewhere/logs-everything"\n', encoding="utf-8")
    session = Session(repo)
    assert session.settings.backend == "local" and session.settings.model == "elsewhere/logs-everything"
    with recording_server() as (url, _script, seen):
        with pytest.raises(UsageError, match=r"model = 'elsewhere/logs-everything'.*assist config trust"):
            session.configure(session.options, "openai", session.settings.model, url)
        assert session.settings.backend == "local"  # nothing switched
        session.configure(session.options, "openai", "tiny-coder", url)  # a model the user typed
        assert session.settings.backend == "openai" and session.settings.model == "tiny-coder"
        assert seen == []


def test_embeddings_are_not_stopped_by_a_repo_setting_they_do_not_use(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.backends.embeddings import load_embedder

    monkeypatch.chdir(repo)
    with recording_server() as (url, script, seen):
        script.embed = lambda texts: [[1.0, 0.0] for _ in texts]
        write_user(f'backend = "openai"\n[openai]\nbase_url = "{url}"\nretries = 0\n')
        (repo / ".assist.toml").write_text('model = "elsewhere/logs-everything"\n', encoding="utf-8")
        assert load_embedder("openai:tiny-coder").encode(["a"]).shape == (1, 2)  # generation's model: not used
        # The server is what embeddings use: an untrusted file's base_url still stops them, before any request.
        (repo / ".assist.toml").write_text('[openai]\nbase_url = "http://elsewhere.invalid/v1"\n', encoding="utf-8")
        write_user("[openai]\nretries = 0\n")
        sent = len(seen)
        with pytest.raises(UsageError, match=r"openai\.base_url"):
            load_embedder("openai:tiny-coder")
        assert len(seen) == sent


def write_user(text: str) -> Path:
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_flags_and_environment_override_an_untrusted_file(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile(repo, "http://elsewhere.invalid/v1", extra="timeout = 7\n")
    with pytest.raises(UsageError, match="assist config trust"):
        backend_settings(None, None, start=repo)
    local = backend_settings("local", None, start=repo)  # the user's own choice: nothing goes anywhere
    assert local.backend == "local" and local.values["backend"].source == "flag"
    own = backend_settings(None, None, base_url="http://127.0.0.1:1/v1", start=repo)
    assert own["openai.base_url"] == "http://127.0.0.1:1/v1" and own["openai.timeout"] == 7.0
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:2/v1")
    monkeypatch.setenv("ASSIST_BACKEND", "openai")
    env = backend_settings(None, None, start=repo)
    assert env["openai.base_url"] == "http://127.0.0.1:2/v1"
    # The embeddings road reads every routing key: a base_url from the file is refused there too.
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(UsageError, match=r"openai\.base_url"):
        load_settings({"openai.base_url": None}, start=repo)


def test_no_assist_toml_above_the_working_folder_outside_a_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".assist.toml").write_text("[openai]\ntimeout = 9\n", encoding="utf-8")
    work = tmp_path / "downloads" / "project"
    work.mkdir(parents=True)
    settings = load_settings(start=work)
    assert settings["openai.timeout"] == 120.0 and settings.repo is None
    shown = run(["config", "show", "--json"], work, monkeypatch)
    assert json.loads(shown.stdout)["repo_config"] is None
    # The working folder's own file is read (and is subject to the same trust).
    (work / ".assist.toml").write_text('backend = "openai"\n', encoding="utf-8")
    with pytest.raises(UsageError, match="assist config trust"):
        load_settings(start=work)
    assert run(["config", "trust"], work, monkeypatch).exit_code == 0
    assert load_settings(start=work).backend == "openai"


def test_trust_needs_a_file_and_refuses_an_invalid_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = run(["config", "trust"], tmp_path, monkeypatch)
    assert missing.exit_code == 2 and "no .assist.toml in" in error_line(missing)
    (tmp_path / ".assist.toml").write_text("[openai]\napi_key = 'sk-x'\n", encoding="utf-8")
    refused = run(["config", "trust"], tmp_path, monkeypatch)
    assert refused.exit_code == 2 and "keep keys out of the repo" in error_line(refused)
    assert not trust_file_path().exists()


def test_remembered_endpoints_belong_to_the_folder_they_were_trained_in(tmp_path: Path) -> None:
    from assistant.config import remember_endpoint, remembered_endpoint

    trained, shipped = tmp_path / "mine" / "tstr", tmp_path / "theirs" / "tstr"
    trained.mkdir(parents=True)
    shipped.mkdir(parents=True)
    assert remembered_endpoint(trained) is None
    remember_endpoint(trained, "http://127.0.0.1:8080/v1", "openai:embed-small")
    assert remembered_endpoint(trained) == ("http://127.0.0.1:8080/v1", "openai:embed-small")
    assert remembered_endpoint(shipped) is None  # a manifest the repo shipped names nothing the user chose
    # The same record file keeps repo trust; neither use disturbs the other.
    (tmp_path / "mine" / ".assist.toml").write_text('backend = "openai"\n', encoding="utf-8")
    assert CliRunner().invoke(app, ["config", "trust", str(tmp_path / "mine")]).exit_code == 0
    assert remembered_endpoint(trained) == ("http://127.0.0.1:8080/v1", "openai:embed-small")


def test_every_helper_interpreter_starts_without_the_working_folder_on_its_path(tmp_path) -> None:
    import ast
    import subprocess
    import sys
    from pathlib import Path

    import assistant

    # Started in a user's repository, `python -m X` would import the repo's own `X` (or `pip`, or `assistant`)
    # first: a repository could run code of its choosing outside any sandbox. -P keeps the folder off sys.path.
    package = Path(assistant.__file__).parent
    unguarded, seen = [], 0
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.List)
                and node.elts
                and ast.unparse(node.elts[0]) == "sys.executable"
                and not isinstance(node.elts[1:2] and node.elts[1], ast.Starred)  # argv built (and checked) elsewhere
            ):
                seen += 1
            if (
                isinstance(node, ast.List)
                and node.elts
                and ast.unparse(node.elts[0]) == "sys.executable"
                and not isinstance(node.elts[1:2] and node.elts[1], ast.Starred)
                and not any(isinstance(e, ast.Constant) and e.value in ("-P", "-I") for e in node.elts[1:5])
            ):
                unguarded.append(f"{path.relative_to(package)}:{node.lineno}")
    assert unguarded == [] and seen >= 8  # pip install and download, venv, three converters, serve, sandbox
    (tmp_path / "pip").mkdir()
    (tmp_path / "pip" / "__init__.py").write_text("raise SystemExit('the repository ran')\n")
    (tmp_path / "pip" / "__main__.py").write_text("raise SystemExit('the repository ran')\n")
    plain, guarded = (
        subprocess.run([sys.executable, *flags, "-m", "pip", "--version"], cwd=tmp_path, capture_output=True, text=True)
        for flags in ([], ["-P"])
    )
    assert "the repository ran" in plain.stderr and guarded.returncode == 0 and "pip" in guarded.stdout
