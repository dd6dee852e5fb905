"""The one-line errors a new user meets, each saying where the problem is and a fix that works as printed: install
hints in the checkout's form, the server command that serves a port, inputs refused before any model loads, the
right fix for a refused --apply, config values named by file or variable, ranker and backend names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.errors import ModelError, UsageError, install_extra

from .conftest import assist_here, git


def one_line_error(result, code: int, fragment: str) -> str:
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    return lines[0]


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """`assist generate` in-process may check its input but never build the pipeline (which loads the model)."""
    import assistant.pipeline

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command got as far as the model")

    monkeypatch.setattr(assistant.pipeline, "Pipeline", refuse)


# --- 1. install hints: assist is installed from its checkout, not PyPI ----------------------------------------------


def test_install_hints_give_the_checkouts_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.backends import ct2, models, serve
    from assistant.config import FIELD_BY_KEY

    assert install_extra("serve") == "pip install -e '.[serve]'"
    assert "pip install -e '.[serve]'" in serve.INSTALL_HINT and "assist[" not in serve.INSTALL_HINT
    assert "pip install -e '.[fast]'" in FIELD_BY_KEY["local.engine"].help
    assert "pip install -e '.[fast]'" in ct2.CT2Backend.description
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    spec = models.resolve(None)
    with pytest.raises(ModelError, match=r"pip install -e '\.\[fast\]'$"):
        models.ct2_path(spec)


# --- 2. a server that is not there: the command that starts one on a port ------------------------------------------


def test_a_missing_or_unreachable_server_names_assist_serve_with_a_port() -> None:
    import openai

    from assistant.backends.openai_api import call_api, make_client

    with pytest.raises(UsageError, match=r"`assist serve --port 8080` starts\) or OPENAI_API_KEY"):
        make_client(None, None, 1.0, 0, what="the openai backend")

    def unreachable(**kwargs: object) -> None:
        raise openai.APIConnectionError(request=None)  # type: ignore[arg-type]  # the message names no request

    with pytest.raises(ModelError) as caught:
        call_api(unreachable, url="http://127.0.0.1:9/v1", timeout=1.0, retries=0)
    assert "`assist serve --port 8080` starts a local one at http://127.0.0.1:8080/v1" in str(caught.value)


# --- 3. inputs refused before the model loads ----------------------------------------------------------------------


def test_force_without_apply_is_refused_at_once(tmp_path: Path, no_model: None) -> None:
    result = assist_here("generate", "add two numbers", "--force", cwd=tmp_path)
    one_line_error(result, 2, "--force only applies with --apply")


def test_a_missing_file_is_said_before_the_model_and_a_stubs_is_refused(
    scratch_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import typer

    import assistant.pipeline

    def stop(*args: object, **kwargs: object) -> None:
        raise typer.Exit(3)  # where the model would load: the output so far is kept

    monkeypatch.setattr(assistant.pipeline, "Pipeline", stop)
    result = assist_here("generate", "add two numbers", "--file", "src/nope.py", cwd=scratch_repo)
    # The preview of a new file stays possible; a mistyped name is said before the model's wait.
    assert result.returncode == 3
    assert result.stderr.splitlines() == [
        "note: src/nope.py does not exist yet; the diff creates it (add --apply to write it)"
    ]
    stub = ("--file", "src/nope.py", "--function", "f")  # a stub's file must exist, --apply or not
    fills = "src/nope.py does not exist; --function fills a stub in an existing file"
    one_line_error(assist_here("generate", *stub, "--apply", cwd=scratch_repo), 2, fills)


def test_a_test_file_the_test_command_names_must_exist(scratch_repo: Path, no_model: None) -> None:
    from assistant.core.repo_tests import repo_tests

    (scratch_repo / "tests").mkdir()
    (scratch_repo / "tests" / "test_math.py").write_text("from mathutils import is_even\n")
    git(scratch_repo, "add", "tests")
    with pytest.raises(UsageError, match=r"^the test command names tests/nope\.py, which does not exist in "):
        repo_tests(scratch_repo, "mathutils.py", "is_even", test_cmd="pytest tests/nope.py::test_x -q")
    for fine in ("pytest tests/test_math.py", "pytest -k nope.py tests", "python -m pytest --ignore old.py"):
        assert repo_tests(scratch_repo, "mathutils.py", "is_even", test_cmd=fine) is not None
    assert repo_tests(scratch_repo, "mathutils.py", "is_even", test_cmd="pytest ./tests/../tests/test_math.py")
    (scratch_repo / ".gitignore").write_text("local_test.py\n")
    (scratch_repo / "local_test.py").write_text("def test_x():\n    pass\n")  # on disk, but not in the run's copy
    with pytest.raises(UsageError, match=r"^the test command names local_test\.py, which git ignores, so the"):
        repo_tests(scratch_repo, "mathutils.py", "is_even", test_cmd="pytest local_test.py")
    (scratch_repo / "stubs.py").write_text('def double(x):\n    """Return twice x."""\n    ...\n')
    args = ("generate", "--file", "stubs.py", "--function", "double", "--test-cmd", "pytest tests/nope.py")
    one_line_error(assist_here(*args, cwd=scratch_repo), 2, "--test-cmd names tests/nope.py, which does not exist")


# --- 4. a refused --apply says the fix that fits -------------------------------------------------------------------


def test_a_refused_apply_says_the_fix_for_its_reason(scratch_repo: Path, tmp_path: Path, no_model: None) -> None:
    from assistant.code.edit import check_can_apply
    from assistant.ui.errors import said_with_flags

    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "x.py").write_text("x = 1\n")
    (scratch_repo / "new.py").write_text("x = 1\n")
    (scratch_repo / "mathutils.py").write_text("x = 2\n")
    cases = [
        (scratch_repo / "new.py", "it is not tracked by git (git add it first, or pass --force)"),
        (loose / "x.py", "it is not in a git repository (pass --force to write it anyway)"),
        (scratch_repo / "mathutils.py", "it has unstaged changes (commit or stash, or pass --force)"),
    ]
    for path, fix in cases:
        with pytest.raises(UsageError) as caught:
            check_can_apply(path)
        assert "--" not in str(caught.value), caught.value  # the library says "force", the setting
        assert str(said_with_flags(caught.value)) == f"refusing to modify {path}: {fix}"  # the CLI, its flag
    # The command line says it as it always has.
    args = ("generate", "x", "--file", "new.py", "--apply")
    line = one_line_error(assist_here(*args, cwd=scratch_repo), 2, "refusing to modify")
    assert line == "error: refusing to modify new.py: it is not tracked by git (git add it first, or pass --force)"


# --- 5. config values: where they came from and what is expected ---------------------------------------------------


def user_config(text: str) -> Path:
    from assistant.config import user_config_path

    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_value_that_is_not_a_number_names_its_source_and_what_is_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.config import load_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASSIST_GENERATE_N", "abc")
    expected = "expected a whole number from 1 to 64"
    with pytest.raises(
        UsageError, match=rf"^bad value for generate.n from env ASSIST_GENERATE_N: {expected}, not 'abc'$"
    ):
        load_settings()
    monkeypatch.delenv("ASSIST_GENERATE_N")
    path = user_config('[generate]\nn = "three"\ntemperature = "hot"\n')
    with pytest.raises(UsageError, match=rf"^bad value for generate.n from {path}: {expected}, not 'three'$"):
        load_settings()
    path.write_text('[openai]\ntimeout = "soon"\n')
    with pytest.raises(UsageError, match=r"openai.timeout from .*: expected a finite number above 0"):
        load_settings()


def test_an_unknown_ranker_in_a_config_file_names_the_file_and_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.config import load_settings
    from assistant.pipeline.options import GenerationOptions

    monkeypatch.chdir(tmp_path)
    path = user_config('[generate]\nranker = "bogus"\n')
    with pytest.raises(UsageError) as caught:
        GenerationOptions.from_settings(load_settings())
    assert str(caught.value).startswith(f"bad value for generate.ranker from {path}: unknown ranker 'bogus'")
    monkeypatch.setenv("ASSIST_GENERATE_RETRIEVER", "nope")
    with pytest.raises(UsageError, match=r"^bad value for generate.retriever from env ASSIST_GENERATE_RETRIEVER: "):
        GenerationOptions.from_settings(load_settings())
    # A flag's value overrides the file's: the file's bad name is not what stops the command.
    assert GenerationOptions.from_settings(load_settings(), ranker="first", retriever="bm25").ranker == "first"


def test_doctor_points_at_the_broken_file_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.ui import doctor

    monkeypatch.chdir(tmp_path)
    path = user_config('backend = "local"\nmodel = [not toml\n')
    (check,) = doctor.config_checks()
    assert check.ok is False and check.fix == f"fix {path} at line 2, or move it away", check
    assert "config show" not in check.fix  # `assist config show` fails on the same file


def test_a_folder_where_the_config_file_should_be_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.config import load_settings, user_config_path

    monkeypatch.chdir(tmp_path)
    user_config_path().mkdir(parents=True)
    with pytest.raises(UsageError, match=r"config.toml is a folder, not a settings file"):
        load_settings()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_where_the_config_file_should_be_is_refused_without_opening_it(tmp_path: Path) -> None:
    # Opening a FIFO for reading waits for a writer: `assist config show` once hung there for good. Run in a child
    # with a timeout, so that a regression fails here instead of hanging the suite.
    folder = tmp_path / "config"
    folder.mkdir()
    os.mkfifo(folder / "config.toml")
    env = {**os.environ, "ASSIST_CONFIG_DIR": str(folder), "PYTHONPATH": str(Path(__file__).parents[1])}
    command = [sys.executable, "-P", "-m", "assistant", "config", "show"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    line = one_line_error(result, 2, str(folder / "config.toml"))
    assert line.endswith("config.toml is a named pipe, not a settings file; move it away or make it a TOML file"), line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_config_swapped_for_a_named_pipe_after_its_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The status is looked at before opening, so no device is opened; a name swapped for a pipe between that look
    # and the open must be refused from the open file itself: read, it is empty settings or a wait forever.
    from assistant import config

    monkeypatch.chdir(tmp_path)
    path = user_config('backend = "local"\n')
    real_open = os.open

    def swap_then_open(name: object, flags: int, *args: object) -> int:
        if Path(str(name)) == path and path.is_file():
            path.unlink()
            os.mkfifo(path)
        return real_open(name, flags, *args)

    monkeypatch.setattr(config.os, "open", swap_then_open)
    with pytest.raises(UsageError, match=r"config.toml is a named pipe, not a settings file"):
        config.load_settings()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_where_the_trust_record_should_be_is_refused_without_opening_it(tmp_path: Path) -> None:
    # As for the settings files: reading the trust record (any repo file's trust) once opened a FIFO and waited
    # for a writer forever. In a child with a timeout, so that a regression fails here instead of hanging.
    folder = tmp_path / "config"
    folder.mkdir()
    os.mkfifo(folder / "trusted.json")
    (tmp_path / ".assist.toml").write_text('backend = "local"\n')
    env = {**os.environ, "ASSIST_CONFIG_DIR": str(folder), "PYTHONPATH": str(Path(__file__).parents[1])}
    command = [sys.executable, "-P", "-m", "assistant", "config", "show"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    line = one_line_error(result, 2, str(folder / "trusted.json"))
    assert line.endswith("trusted.json is a named pipe, not assist's record; move it away or delete it"), line


# --- 6. ranker specs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("exec+", "ranker 'exec+' has an empty name"),
        ("+exec", "ranker '+exec' has an empty name"),
        ("exec++first", "ranker 'exec++first' has an empty name"),
        ("auto+exec", "ranker 'auto+exec': auto stands alone"),
        ("bogus", "unknown ranker 'bogus'; choose from: auto, first"),
    ],
)
def test_ranker_specs_refuse_empty_names_and_auto_in_a_combination(spec: str, message: str) -> None:
    from assistant.pipeline.options import GenerationOptions

    with pytest.raises(UsageError, match="^" + message.replace("+", r"\+")):
        GenerationOptions(ranker=spec).check()
    assert GenerationOptions(ranker="auto").check().ranker == "auto"
    assert GenerationOptions(ranker="exec+first").check().ranker == "exec+first"


# --- 7. backend names ------------------------------------------------------------------------------------------


def test_an_unknown_backend_lists_the_documented_names_and_the_engines_still_load_by_name() -> None:
    from assistant.backends import backend_class

    with pytest.raises(UsageError, match=r"^unknown backend 'bogus'; available: local, openai$"):
        backend_class("bogus")
    assert backend_class("local-ov").name == "local-ov"


# --- 8, 9. small ones ------------------------------------------------------------------------------------------


def test_docstring_check_names_a_write_command_that_runs(tmp_path: Path) -> None:
    (tmp_path / "my util.py").write_text("def f():\n    return 1\n")
    result = assist_here("docstring", "--check", "my util.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "`assist docstring --write 'my util.py'` writes them" in result.stderr, result.stderr
    (tmp_path / "-x.py").write_text("def g():\n    return 2\n")  # a name that reads as an option
    result = assist_here("docstring", "--check", "--", "-x.py", cwd=tmp_path)
    assert "`assist docstring --write -- -x.py` writes them" in result.stderr, result.stderr


def test_a_bad_bank_line_says_at_once(tmp_path: Path) -> None:
    from assistant.code.examples import read_bank

    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"requirement\n' + json.dumps({"requirement": "a", "code": "x = 1"}) + "\n")
    with pytest.raises(UsageError) as caught:
        read_bank(bank)
    assert str(caught.value).endswith("bank.jsonl:1: not valid JSON (Unterminated string starting at column 2)")


def test_replace_lists_methods_as_the_flag_takes_them(tmp_path: Path) -> None:
    import ast

    from assistant.code.edit import check_replace_names

    tree = ast.parse("class Shape:\n    def __init__(self):\n        pass\n\n    def area(self):\n        return 0\n")
    with pytest.raises(UsageError) as caught:
        check_replace_names(tree, ["nosuch"], "shapes.py")
    assert str(caught.value).endswith("(it defines: Shape, Shape.__init__, Shape.area)")


@pytest.mark.skipif(not os.path.exists(os.devnull) or os.name != "posix", reason="a POSIX null device")
def test_a_config_file_linked_to_the_null_device_reads_as_empty(tmp_path: Path, monkeypatch) -> None:
    # Refusing special files must not refuse the one a user links a config to in order to switch it off.
    from assistant.config import load_settings

    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "config.toml").symlink_to(os.devnull)
    monkeypatch.setenv("ASSIST_CONFIG_DIR", str(folder))
    assert load_settings(start=tmp_path).backend == "local"  # refused as "a device" before
