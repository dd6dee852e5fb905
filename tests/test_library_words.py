"""The library says what is wrong in its own terms, never with the command line's flags: a refusal names the
setting ("force", "the test command"), and the doors word it their way. The CLI's wording lives in
assistant/ui/errors.py (keyed by the error's `setting`), so `assist` prints the same line as ever while the TUI and
a program calling the library get the setting's name."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from assistant.errors import AssistError, ModelError, UsageError
from assistant.ui.errors import COMBINATIONS, LINES, said_with_flags

from .conftest import assist_here, git

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "assistant"
# A flag-like word of a message: `--test-cmd`, `-k` (not inside a word such as "non-empty").
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
# A whole command to run, in any door's shell (`assist models pull NAME --force`): its options are that command's.
COMMAND = re.compile(r"`assist [^`]*`|\(assist [^)]*\)")
# Strings that are not messages: argv for a child process, or a script's text. (file, option)
NOT_MESSAGES = {
    ("assistant/code/git.py", "--staged"),  # the pre-commit hook's own command line
    ("assistant/code/git.py", "--write"),
    ("assistant/code/git.py", "--fail-on-change"),
    ("assistant/code/git.py", "-f"),  # the hook script's `[ -f "$previous" ]`
    # The option of the command the same hint names just before it (`assist train retriever selfracg`).
    ("assistant/methods/selfracg.py", "--corpus"),
}
# Messages still to be worded by setting, in files another change is reworking. Remove entries as they go.
PENDING: set[tuple[str, str]] = set()


@cache
def cli_options() -> frozenset[str]:
    """Every option name (`--force`, `-n`) of every `assist` command, from the Click tree Typer builds."""
    import typer

    from assistant.ui.cli import app

    found: set[str] = set()
    commands = [typer.main.get_command(app)]
    while commands:
        command = commands.pop()
        for param in command.params:
            if param.param_type_name == "option":
                found.update(param.opts + param.secondary_opts)
        commands.extend(getattr(command, "commands", {}).values())
    return frozenset(found)


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of the module's string literals that are not docstrings; an f-string whole, its fields `{}`."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant | ast.JoinedStr):
            skip.add(id(node.value))  # a docstring, or a bare string standing as a comment
        if isinstance(node, ast.JoinedStr):
            skip.update(id(part) for part in node.values)
    texts = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            parts = [part.value if isinstance(part, ast.Constant) else "{}" for part in node.values]
            texts.append((node.lineno, "".join(str(part) for part in parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append((node.lineno, node.value))
    return texts


def flags_named() -> dict[tuple[str, str], list[str]]:
    """(file, option) -> the `file:line` of each message outside assistant/ui/ that names an `assist` option."""
    options = cli_options()
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith("assistant/ui/"):
            continue
        for line, text in _texts(ast.parse(path.read_text(encoding="utf-8"))):
            if re.fullmatch(r"--?[\w-]+(=.*)?", text):  # one word of an argv
                continue
            for flag in FLAG.findall(COMMAND.sub("", text)):
                if flag in options:
                    found.setdefault((name, flag), []).append(f"{name}:{line}")
    return found


def test_the_library_names_settings_not_the_command_lines_flags() -> None:
    assert {"--force", "--test-cmd", "-n"} <= cli_options()  # the tree was read
    found = flags_named()
    named = {key: where for key, where in found.items() if key not in NOT_MESSAGES | PENDING}
    assert not named, f"word these by setting (UsageError(..., setting=...)) and say the flag in ui/errors.py: {named}"
    assert not PENDING - set(found), f"done: drop them from PENDING: {PENDING - set(found)}"


def test_each_line_the_cli_says_is_for_a_setting_the_library_raises() -> None:
    library = [path for path in LIBRARY.rglob("*.py") if "ui" not in path.relative_to(LIBRARY).parts]
    source = "\n".join(path.read_text(encoding="utf-8") for path in library)
    for setting in LINES:
        assert f'"{setting}"' in source, setting
    assert not set(LINES) & set(COMBINATIONS)


def _subset_of_none() -> None:
    from assistant.datasets import subset

    subset([], 0, 0)


def _no_queries() -> None:
    from assistant.methods.lail import LailConfig

    LailConfig(queries=-1)


@pytest.mark.parametrize(
    ("refuse", "library", "cli"),
    [
        (_subset_of_none, "limit must be at least 1, not 0", "--limit must be at least 1, not 0"),
        (
            _no_queries,
            "queries must be 0 (every example) or more, not -1",
            "--queries must be 0 (every example) or more, not -1",
        ),
    ],
)
def test_a_refusal_in_the_librarys_words_is_said_with_the_flag_by_the_cli(refuse, library, cli) -> None:
    with pytest.raises(UsageError) as caught:
        refuse()
    assert str(caught.value) == library
    assert str(said_with_flags(caught.value)) == cli


def test_the_hook_refuses_a_foreign_hook_with_the_flag_on_the_command_line(scratch_repo: Path) -> None:
    from assistant.code.git import hook_path, install_hook

    hook = hook_path(scratch_repo)
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(UsageError) as caught:
        install_hook(scratch_repo)
    assert str(caught.value).endswith("move it away (or set force to replace it)")
    result = assist_here("hook", "install", cwd=scratch_repo)
    assert result.returncode == 2
    line = f"error: {hook} exists and was not written by assist; move it away (or pass --force to replace it)"
    assert result.stderr.strip() == line
    git(scratch_repo, "status")  # still a repo, the hook untouched
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"


def test_an_untrusted_repo_setting_is_overridden_by_flag_on_the_command_line(tmp_path: Path) -> None:
    from assistant.config import RepoConfig, untrusted_message

    path = tmp_path / ".assist.toml"
    refusal = untrusted_message(RepoConfig(path, "0" * 64, "untrusted", {"backend": "openai"}), ["backend"])
    head = (
        f"{path} sets backend = 'openai' (where your code and keys are sent) and this file is not trusted; review it, "
        f"then run `assist config trust` in {tmp_path} (undo: `assist config untrust`)"
    )
    assert str(refusal) == f"{head}, or override it with your own setting or the environment"
    cli = f"{head}, or override it with --backend/--base-url/--model or the environment"
    assert str(said_with_flags(refusal)) == cli


def _strategy_on_line_tasks() -> None:
    from assistant.evaluate.repo.run import check_strategies

    check_strategies(["hybrid+apis"], "line")


def _unnamed_embedder() -> None:
    from assistant.backends.embeddings import EndpointEncoder

    EndpointEncoder.connect("")


def _unserved_backend() -> None:
    from types import SimpleNamespace

    from assistant.backends.local_server import LocalServer

    LocalServer(SimpleNamespace(name="ct2"))


def _local_prompt_too_long() -> None:
    from assistant.backends.local import LocalBackend
    from assistant.backends.prompts import build_prompt

    backend = LocalBackend.__new__(LocalBackend)  # no model: only what check_fits reads
    backend.model, backend.context, backend.window = "m", 100, 32768
    backend.count_tokens = lambda prompt: 90  # type: ignore[method-assign]
    backend.check_fits(build_prompt("return a number"), 20)


TOO_LONG = (
    "the prompt takes 90 tokens and 20 more are asked for, but the limit is a context of 100 (the local.context "
    "setting; m's own window is 32768)"
)


@pytest.mark.parametrize(
    ("refuse", "library", "cli"),
    [
        (
            _strategy_on_line_tasks,
            "+apis shows the functions a stub's file uses: it is for function tasks only",
            "+apis shows the functions a stub's file uses: it is for --task function only",
        ),
        (
            _unnamed_embedder,
            "name the embeddings model: an embedder openai:<model>",
            "name the embeddings model: --embedder openai:<model>",
        ),
        (
            _unserved_backend,
            "the ct2 backend cannot be served; use the openvino engine",
            "the ct2 backend cannot be served; use --engine openvino",
        ),
        (
            _local_prompt_too_long,
            f"{TOO_LONG}; shorten the requirement, use fewer demonstrations or a smaller target file",
            f"{TOO_LONG}; shorten the requirement, use fewer demonstrations (-k) or a smaller target file",
        ),
    ],
)
def test_a_backend_or_benchmark_refusal_names_the_setting_and_the_cli_the_flag(refuse, library, cli) -> None:
    with pytest.raises(AssistError) as caught:
        refuse()
    assert str(caught.value) == library
    said = said_with_flags(caught.value)
    assert str(said) == cli and type(said) is type(caught.value)  # the same kind: the same exit code


def test_a_taken_port_is_refused_in_the_settings_words_and_by_the_cli_with_the_flag() -> None:
    import socket
    from types import SimpleNamespace

    from assistant.backends.local_server import LocalServer

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AssistError) as caught:
            LocalServer(SimpleNamespace(name="local-ov", sample_texts=None, echo=None), port=port)
    error = caught.value.values["error"]
    assert str(caught.value) == f"cannot listen on 127.0.0.1:{port} ({error}); choose another port"
    assert str(said_with_flags(caught.value)) == f"cannot listen on 127.0.0.1:{port} ({error}); choose another --port"


def test_no_cuda_is_refused_in_the_settings_words_and_by_the_cli_with_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from assistant.backends.local import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError) as caught:
        resolve_device("cuda")
    no_gpu = f"torch {torch.__version__} sees no CUDA GPU here"
    assert str(caught.value) == f"device cuda: {no_gpu}; use device cpu"
    assert str(said_with_flags(caught.value)) == f"--device cuda: {no_gpu}; use --device cpu"


def test_the_openvino_cache_refusal_is_said_with_the_flags_by_the_cli() -> None:
    # Raised deep in a sampling loop: the library's text is in the source (the scan above checks it names no flag).
    source = (LIBRARY / "backends" / "ov.py").read_text(encoding="utf-8")
    assert "ask for fewer candidates (n), fewer tokens (max_new_tokens) or a shorter prompt" in source
    error = ModelError("the library's words", setting="n:cache", values={"cache_gb": 2})
    assert str(said_with_flags(error)) == (
        "the OpenVINO engine could not hold this request in its 2 GB attention cache; ask for fewer candidates (-n), "
        "fewer tokens (--max-new-tokens) or a shorter prompt"
    )


def test_a_warm_servers_error_keeps_its_setting_so_the_cli_says_it_as_in_process() -> None:
    import json

    from assistant.backends.local_server import _setting_of
    from assistant.backends.warm import _result

    error = UsageError("the library's words", setting="k:local_context", values={"used": 90, "limit": Path("x")})
    line = {"error": {"kind": "UsageError", "message": str(error), **_setting_of(error)}}
    with pytest.raises(UsageError) as caught:
        _result(json.dumps(line).encode() + b"\n", "/socket")
    assert str(caught.value) == "the library's words"
    assert (caught.value.setting, caught.value.values) == ("k:local_context", {"used": 90, "limit": "x"})
    assert _setting_of(UsageError("no setting")) == {}


def test_the_cli_says_a_strategy_for_function_tasks_with_the_task_flag(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assistant.ui.cli import app

    # Refused while the flags are checked, before any project or model is touched.
    result = CliRunner().invoke(app, ["eval", "repo", "--task", "line", "--strategies", "hybrid+apis"])
    assert result.exit_code == 2, result.output
    line = "error: +apis shows the functions a stub's file uses: it is for --task function only"
    assert result.output.strip() == line


def test_the_cli_says_a_warning_about_a_setting_with_its_flag() -> None:
    import logging

    from assistant.ui.console import _WarningHandler, err

    message = "the prompt is about 90 tokens (estimated) plus 20 new, over the server's context of 100: some servers "
    record = logging.LogRecord("assistant.x", logging.WARNING, __file__, 1, message + "cut it silently", None, None)
    record.setting, record.values = "k:server_estimate", {"used": 90, "new_tokens": 20, "context": 100}
    with err.capture() as captured:
        _WarningHandler().emit(record)
    assert captured.get() == f"warning: {message}cut it silently; use fewer demonstrations (-k)\n"
    plain = logging.LogRecord("assistant.x", logging.WARNING, __file__, 1, "no setting here", None, None)
    with err.capture() as captured:
        _WarningHandler().emit(plain)
    assert captured.get() == "warning: no setting here\n"


def test_a_line_whose_values_do_not_fill_its_template_is_said_as_it_came() -> None:
    """A refusal whose `values` miss a field of the CLI's template (a warm server of another version sent it) is
    printed in the library's words, never a KeyError inside the error printer."""
    from assistant.errors import ModelError
    from assistant.ui.errors import said_line, said_with_flags

    message = "the OpenVINO engine could not hold this request; ask for fewer candidates (n)"
    assert said_line(message, "n:cache", {}) == message
    assert str(said_with_flags(ModelError(message, setting="n:cache", values={}))) == message
    assert "(-n)" in said_line(message, "n:cache", {"cache_gb": 2})


def test_a_repair_stopped_by_a_refusal_is_said_with_the_flags(monkeypatch) -> None:
    """The repair loop keeps the error that stopped it; `generate` prints it as every error, with the flags."""
    from types import SimpleNamespace

    from assistant.core.repair import Repaired
    from assistant.errors import UsageError
    from assistant.ui import cli

    printed: list[str] = []
    monkeypatch.setattr(cli.out, "print", lambda text, **_: printed.append(str(text)))
    refusal = UsageError("k must be 0 or more", setting="k:negative")
    stopped = Repaired(SimpleNamespace(candidates=[]), [], f"error: {refusal}", error=refusal)
    cli._print_repair(stopped, explain=False)
    assert "stopped: error: -k must be 0 or more" in printed[0]


def test_the_json_of_a_repair_stopped_by_a_refusal_says_it_with_the_flags(monkeypatch) -> None:
    """`--json` says what stopped repair as the text does (the library's `stopped` names no flag)."""
    import json
    from types import SimpleNamespace

    from assistant.errors import UsageError
    from assistant.ui import cli

    printed: list[str] = []
    monkeypatch.setattr(cli.out, "print_json", printed.append)
    refusal = UsageError("k must be 0 or more", setting="k:negative")
    answer = SimpleNamespace(
        to_json=lambda door: {"candidates": [], "repair": {"stopped": f"error: {refusal}"}},
        repo_tests_skipped=None,
        repaired=SimpleNamespace(error=refusal),
        pick=SimpleNamespace(refused=False),
    )
    cli._print_json(answer, None, None)
    assert json.loads(printed[0])["repair"]["stopped"] == "error: -k must be 0 or more"
