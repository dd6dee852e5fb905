"""The `assist` command as a user runs it: a real subprocess (`assist`), or in-process through Typer's CliRunner
(`assist_here`) where the process boundary is not the point; real models, a real server, a scratch git repo."""

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PLUMBING_MODEL, assist, assist_here, git


def one_line_error(result, code, fragment):
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_help_explains_the_commands(tmp_path):
    result = assist("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in ("index", "generate", "models"):
        assert command in result.stdout
    from importlib.metadata import version

    assert assist("--version", cwd=tmp_path).stdout.strip() == f"assist {version('assist')}"


def test_a_mistyped_command_line_is_one_line_with_a_pointer_to_the_help(tmp_path):
    """Click's own usage errors (an unknown option or command, a value of the wrong type) are one line as well,
    naming the help to read; a group called alone still prints its help."""
    one_line_error(assist("generate", "x", "--bogus", cwd=tmp_path), 2, "No such option: --bogus (see `assist generate")
    one_line_error(assist("eval", "repo", "--limit", "x", cwd=tmp_path), 2, "'--limit'")
    one_line_error(assist("nosuch", cwd=tmp_path), 2, "No such command 'nosuch'")
    alone = assist("eval", cwd=tmp_path)
    assert alone.returncode == 2 and "Usage: assist eval" in alone.stderr + alone.stdout


def test_bad_input_gives_one_line_errors_and_writes_nothing(tmp_path):
    one_line_error(assist_here("index", str(tmp_path), cwd=tmp_path), 2, "is not inside a git repository")
    one_line_error(assist_here("index", str(tmp_path / "missing"), cwd=tmp_path), 2, "does not exist")
    one_line_error(assist_here("generate", "   ", cwd=tmp_path), 2, "the requirement is empty")
    one_line_error(assist_here("generate", "x", "--apply", cwd=tmp_path), 2, "--apply needs --file")
    one_line_error(assist_here("generate", "x", "--test", "assert (", cwd=tmp_path), 2, "test 1 does not parse")
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"requirement": "a", "code": "x = 1"}\nnot json\n')
    one_line_error(assist_here("index", "--bank", str(bank), cwd=tmp_path), 2, "bank.jsonl:2: not valid JSON")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank.jsonl"]


@pytest.mark.parametrize(
    ("engine", "folder", "damaged"),
    [("transformers", "hf", "model.safetensors"), ("openvino", "ov-int8", "openvino_model.xml")],
)
def test_corrupt_model_file_is_reported_with_the_fix(tmp_path, backend, engine, folder, damaged):
    from assistant.backends.models import ov_path

    ov_path(backend.spec)  # converted already, or now (once)
    models = tmp_path / "models"
    source = backend.spec.cache_dir
    target = models / source.name
    for name in ("hf", "ov-int8"):
        (target / name).mkdir(parents=True)
        for item in (source / name).iterdir():
            if item.name != damaged:
                (target / name / item.name).symlink_to(item)
    size = (source / folder / damaged).stat().st_size
    with open(target / folder / damaged, "wb") as handle:  # right size, garbage content
        handle.truncate(size)
    for manifest in ("manifest.json", "ov-int8.json"):
        (target / manifest).write_text((source / manifest).read_text())
    command = ["generate", "add two numbers", "-k", "0", "--engine", engine, "--model", backend.model]
    result = assist_here(*command, cwd=tmp_path, env={"ASSIST_MODELS_DIR": str(models)})
    one_line_error(result, 1, f"run `assist models pull {backend.model} --force`")


@pytest.mark.model
def test_a_fresh_cache_generates_on_the_default_engine_without_the_transformers_conversion(tmp_path):
    """A new user's first command: the GGUF is assembled and verified, converted to OpenVINO and its tokenizer read;
    the transformers copy (a minute or two, 4 GB of memory) is not made until something needs it."""
    models = tmp_path / "models"
    command = ["generate", "add two numbers", "-k", "0", "-n", "2", "--max-new-tokens", "160", "--seed", "3", "--json"]
    result = assist_here(*command, cwd=tmp_path, env={"ASSIST_MODELS_DIR": str(models)})
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["candidates"] and data["backend"] == "local-ov"
    (folder,) = models.iterdir()
    # (each conversion's lock file stays beside it: removing one while a process waits on it would let two convert)
    assert sorted(p.name for p in folder.iterdir() if p.suffix != ".lock") == [
        "model.gguf",
        "ov-int8",
        "ov-int8.json",
        "tokenizer",
        "tokenizer.json",
    ]
    listed = assist_here("models", "list", "--json", cwd=tmp_path, env={"ASSIST_MODELS_DIR": str(models)})
    (row,) = [r for r in json.loads(listed.stdout) if r["name"] == PLUMBING_MODEL]  # what the tests run
    assert row["status"] == "ready (openvino)"


@pytest.mark.model
def test_index_generate_json_and_apply_in_a_scratch_repo(scratch_repo):
    result = assist("index", "--json", cwd=scratch_repo)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["examples"] == 3

    request = ["generate", "return the squares of the even numbers in a list", "--json", "--max-new-tokens", "64"]
    result = assist(*request, "-n", "2", "--seed", "0", cwd=scratch_repo)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {d["source"] for d in data["demonstrations"]} == {"mathutils.py:1", "mathutils.py:6", "text/words.py:1"}
    best = data["candidates"][0]
    ast.parse(best["code"])
    assert isinstance(best["score"], float) and best["scores"]["logprob"]["why"].startswith("mean log-prob")
    assert git(scratch_repo, "status", "--porcelain") == ""  # no --apply: nothing written

    result = assist(*request, "-n", "2", "--seed", "0", "--file", "mathutils.py", "--apply", cwd=scratch_repo)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["applied"] is True and data["candidates"]
    # The target file's own functions are in the prompt already, so they are not demonstrations too.
    assert [d["source"] for d in data["demonstrations"]] == ["text/words.py:1"]
    best = data["candidates"][0]

    # Only the target file changed, and git shows exactly the printed diff.
    assert git(scratch_repo, "status", "--porcelain") == " M mathutils.py\n"
    printed = [line for line in best["edit"]["diff"].splitlines() if not line.startswith(("---", "+++", "@@"))]
    shown = [
        line
        for line in git(scratch_repo, "diff").splitlines()
        if line[:1] in " +-" and not line.startswith(("---", "+++"))
    ]
    assert printed == shown


def test_unparsable_target_file_fails_before_any_model_loads(tmp_path):
    (tmp_path / "broken.py").write_text("def broken(:\n")
    result = assist("generate", "add two numbers", "--file", "broken.py", cwd=tmp_path)
    one_line_error(result, 2, "broken.py does not parse (line 1")


def test_generate_through_an_openai_compatible_server(scratch_repo):
    from .openai_server import Script, openai_server

    assert assist_here("index", "--json", cwd=scratch_repo).returncode == 0
    request = ["generate", "return a number", "-n", "3", "--seed", "4", "--json"]
    with openai_server(Script(honour_n=False)) as (url, script):
        result = assist_here(*request, "--base-url", url, cwd=scratch_repo)
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["backend"] == "openai" and data["model"] == "tiny-coder"
        assert sorted(c["code"] for c in data["candidates"]) == [f"def f():\n    return {i}" for i in (4, 5, 6)]
        # auto without tests: agree (the server's replies hold no asserts, so it ties) and then logprob decide.
        assert data["rankers"] == ["agree", "logprob"]
        assert data["candidates"][0]["scores"]["agree"]["why"] == "the model wrote no usable test"
        # Usage counts the 3 samples and agree's 2 test-writing samples (12 tokens each).
        assert data["usage"]["requests"] == 5 and data["usage"]["completion_tokens"] == 60
        # The same server without log-probabilities: ranked in sampling order, not by a guess.
        script.logprobs = False
        result = assist_here(*request, "--base-url", url, cwd=scratch_repo)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["rankers"] == ["agree", "first"]
    # Unknown models and unreachable servers: one-line errors, tested on the backend (test_openai_backend.py).
    assert git(scratch_repo, "status", "--porcelain") == ""


MBPP = Path(__file__).resolve().parents[2] / "shared" / "data" / "mbpp.jsonl"


@pytest.mark.skipif(not MBPP.exists(), reason=f"MBPP not found at {MBPP} (../shared/data)")
def test_eval_through_a_server_that_dies_resumes_without_repeating_requests(tmp_path):
    from .openai_server import Script, openai_server

    command = [
        "eval",
        "codegen",
        "--dataset",
        "humaneval",
        "--limit",
        "4",
        "--strategies",
        "zero",
        "-n",
        "2",
    ]
    command += ["--pool", f"mbpp:{MBPP}", "--out", str(tmp_path / "run"), "--json"]
    env = {"ASSIST_OPENAI_RETRIES": "0"}
    with openai_server(Script(down_after=2)) as (url, script):
        died = assist_here(*command, "--base-url", url, cwd=tmp_path, env=env)
        assert died.returncode == 1
        # Progress lines, then one error line.
        assert died.stderr.strip().splitlines()[-1].startswith(f"error: cannot reach {url}"), died.stderr
        assert script.answered == 2  # two tasks finished before the server died
        script.down_after = None
        resumed = assist_here(*command, "--base-url", url, cwd=tmp_path, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert script.answered == 4  # only the two unfinished tasks were requested again
    summary = json.loads(resumed.stdout)
    assert summary["tasks"] == 4 and summary["rows"][0]["usage"]["requests"] == 4
    # No -k with 2 samples: pass@1 and pass@2 (the default's pass@5 would need 5; it was an error before).
    assert json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))["ks"] == [1, 2]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed (pip install -e '.[serve]')"
)
def test_generate_against_assist_serve(scratch_repo):
    from assistant.backends.serve import LlamaServer

    with LlamaServer(port=0, log_file=scratch_repo.parent / "serve.log") as server:
        request = ["generate", "return the sum of the squares of a list of numbers", "-n", "3", "--seed", "1"]
        result = assist(*request, "--backend", "openai", "--base-url", server.base_url, "--json", cwd=scratch_repo)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["model"] == "qwen2.5-coder-0.5b" and data["samples"] == 3
    assert data["usage"]["requests"] == 3  # llama.cpp ignores n: three seeded requests
    assert len({c["code"] for c in data["candidates"]}) >= 2
    for candidate in data["candidates"]:
        ast.parse(candidate["code"])
    assert server.process.returncode is not None  # stopped on leaving the block


class _Tripwire:
    """Stands where a model or server would load: reaching it means a bad option got past the CLI boundary."""

    def __init__(self, *args, **kwargs):
        raise AssertionError("a model or server was loaded before the options were checked")

    @classmethod
    def load(cls, *args, **kwargs):
        raise AssertionError("a model was loaded before the options were checked")


@pytest.fixture
def nothing_loads(monkeypatch):
    """In-process `assist` with every model and server loader replaced by a tripwire."""
    from assistant import backends

    monkeypatch.setattr("assistant.backends.encoder.Encoder.load", _Tripwire.load)
    monkeypatch.setattr("assistant.backends.serve.LlamaServer", _Tripwire)
    monkeypatch.setitem(backends.BACKENDS, "local", f"{__name__}:_Tripwire")
    monkeypatch.setitem(backends.BACKENDS, "openai", f"{__name__}:_Tripwire")


BAD_NUMBERS = [
    (["generate", "x", "-n", "0"], "-n must be at least 1 and at most 64, not 0"),
    (["generate", "x", "-n", "-3"], "-n must be at least 1 and at most 64, not -3"),
    (["generate", "x", "-k", "-1"], "-k must be at least 0 and at most 64, not -1"),
    (["generate", "x", "--temperature", "-1"], "--temperature must be at least 0 and at most 2, not -1"),
    (["generate", "x", "--temperature", "nan"], "--temperature must be at least 0 and at most 2, not nan"),
    (["generate", "x", "--top-p", "0"], "--top-p must be above 0 and at most 1, not 0"),
    (["generate", "x", "--top-p", "1.5"], "--top-p must be above 0 and at most 1, not 1.5"),
    (["generate", "x", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1 and at most 32768, not 0"),
    (["generate", "x", "--seed", "-1"], "--seed must be at least 0 and at most 4294967295, not -1"),
    (["generate", "x", "--seed", str(2**64)], "--seed must be at least 0 and at most"),
    (["generate", "x", "--timeout", "0"], "--timeout must be above 0 and at most 86400, not 0"),
    (["generate", "x", "--timeout", "inf"], "--timeout must be above 0 and at most 86400, not inf"),
    (["tui", "-n", "0"], "-n must be at least 1 and at most 64, not 0"),
    (["tui", "-k", "-2"], "-k must be at least 0 and at most 64, not -2"),
    (["tui", "--max-new-tokens", "-5"], "--max-new-tokens must be at least 1 and at most 32768, not -5"),
    (["tui", "--timeout", "-1"], "--timeout must be above 0 and at most 86400, not -1"),
    (["serve", "--port", "70000"], "--port must be at least 0 and at most 65535, not 70000"),
    (["serve", "--threads", "0"], "--threads must be at least 1 and at most 4096, not 0"),
    (["serve", "--context", "0"], "--context must be at least 1 and at most 1048576, not 0"),
    # A choice its setting refuses: said with the flag and the value typed, not the setting's key.
    (["generate", "x", "--engine", "bogus"], "--engine 'bogus': expected one of openvino, transformers, ct2"),
    (["generate", "x", "--api", "bogus"], "--api 'bogus': expected one of chat, completions"),
]


@pytest.mark.parametrize(("args", "message"), BAD_NUMBERS, ids=[" ".join(a[:1] + a[-2:]) for a, _ in BAD_NUMBERS])
def test_numeric_options_are_checked_at_the_boundary(args, message, nothing_loads, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr


def test_a_greedy_request_says_that_n_is_not_used(nothing_loads, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["generate", "add two numbers", "-k", "0", "-n", "5", "--temperature", "0"])
    assert "note: --temperature 0 gives one greedy candidate; -n 5 is not used" in result.stderr
    result = CliRunner().invoke(app, ["generate", "add two numbers", "-k", "0", "--temperature", "0"])
    assert "is not used" not in result.stderr


def test_repair_without_tests_to_repair_against_is_refused(nothing_loads, tmp_path, monkeypatch):
    # Repair reruns tests on a new candidate; with none given and no stub (whose repo's tests may run) it would
    # silently do nothing.
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    refused = runner.invoke(app, ["generate", "add two numbers", "-k", "0", "--repair", "2"])
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        "error: --repair reruns tests on a new candidate: give --test or --tests "
        "(or --function, whose repo's tests run)"
    )
    for fine in (["--repair", "0"], ["--repair", "2", "--test", "assert add(1, 2) == 3"]):
        result = runner.invoke(app, ["generate", "add two numbers", "-k", "0", *fine])
        assert "--repair" not in result.stderr  # it gets past the check, to the model (a tripwire here)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("ASSIST_AGREE_BATCH", "maybe", "ASSIST_AGREE_BATCH must be on or off, not 'maybe'"),
        ("ASSIST_STALL_S", "abc", "ASSIST_STALL_S must be a positive number of seconds, not 'abc'"),
    ],
)
def test_a_bad_environment_variable_is_refused_before_any_model_and_doctor_says_so(
    variable, value, message, nothing_loads, tmp_path, monkeypatch
):
    # Both are read deep in a request (agree's ranking, the OpenVINO engine's load): checked up front instead.
    from typer.testing import CliRunner

    from assistant.ui.cli import app
    from assistant.ui.doctor import config_checks

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    result = CliRunner().invoke(app, ["generate", "add two numbers", "-k", "0"])
    assert result.exit_code == 2 and result.stderr.strip() == f"error: {message}", result.stderr
    (check,) = config_checks()[:1]
    assert check.ok is False and check.detail == message and check.fix.startswith("fix or unset the variable")


def test_requirement_and_tests_with_invalid_utf8_are_refused_before_any_model(tmp_path):
    # Real argv bytes, decoded by Python with surrogateescape. A models dir that cannot exist makes any
    # model load fail at once, so reaching one shows up as a different error, not as minutes of loading.
    env = {"ASSIST_MODELS_DIR": str(tmp_path / "README.md" / "models")}
    (tmp_path / "README.md").write_text("not a folder\n")
    result = subprocess.run(
        [sys.executable, "-m", "assistant", "generate", b"add \xff\xfe", "-k", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    one_line_error(result, 2, "the requirement is not valid UTF-8 (bytes ff fe at character 5)")
    result = assist("generate", "add", "--test", "assert f() == '\udcff'", cwd=tmp_path, env=env)
    one_line_error(result, 2, "test 1 is not valid UTF-8 (bytes ff at character 16)")
    (tmp_path / "latin1_tests.py").write_bytes(b"assert f() == 'caf\xe9'\n")
    result = assist("generate", "add", "--tests", "latin1_tests.py", cwd=tmp_path, env=env)
    one_line_error(result, 2, "tests file latin1_tests.py is not UTF-8 text")


def test_files_generate_must_not_write_are_refused_before_any_model(nothing_loads, scratch_repo, monkeypatch):
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    monkeypatch.chdir(scratch_repo)
    (scratch_repo / "settings.json").write_text('{"name": "demo"}\n')  # parses as Python; is not a place for code
    (scratch_repo / "mathutils.py").write_text((scratch_repo / "mathutils.py").read_text() + "# mine\n")
    (scratch_repo / "manage").write_text("#!/usr/bin/env python3\nimport sys\n")  # a script: Python by its shebang
    git(scratch_repo, "add", "manage")
    git(scratch_repo, "commit", "-qm", "script")
    for args, message in (
        (["--file", "settings.json"], "settings.json is not a Python file"),
        (["--file", "mathutils.py", "--apply"], "refusing to modify mathutils.py: "),  # unstaged work
        (["--file", "manage", "--function", "main", "--python", "/nonexistent/python"], "/nonexistent/python does not"),
        (["--file", "manage", "--python", "/usr/bin/python3"], "--python names the interpreter"),
        (["--file", "manage", "--function", "main", "--fragments", "-k", "0"], "-k 0 would show none"),
    ):
        result = CliRunner().invoke(app, ["generate", "add two numbers", "-k", "0", *args])
        assert result.exit_code == 2, (result.output, result.exception)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], result.stderr
    assert (scratch_repo / "settings.json").read_text() == '{"name": "demo"}\n'


def test_eval_report_on_a_damaged_config_is_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    for damaged in ("{bad", "[1, 2]"):
        (tmp_path / "run" / "config.json").write_text(damaged)
        one_line_error(assist_here("eval", "report", "run", cwd=tmp_path), 2, "config.json")


def test_index_and_train_check_their_input_before_loading_the_encoder(nothing_loads, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    monkeypatch.chdir(tmp_path)
    for args, message in (
        (["index", "--bank", "nope.jsonl"], "nope.jsonl"),
        (["train", "retriever", "--bank", "nope.jsonl"], "nope.jsonl"),
        (["train", "retriever", "."], "is not inside a git repository"),
        (["train", "retriever", "--method", "lail", "."], "is not inside a git repository"),
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, (args, result.output, result.exception)  # not the tripwire's error
        assert message in result.stderr, result.stderr
