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

from assistant.errors import UsageError
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
PENDING = {
    ("assistant/backends/embeddings.py", "--embedder"),
    ("assistant/backends/local.py", "--device"),
    ("assistant/backends/local.py", "-k"),
    ("assistant/backends/local_server.py", "--engine"),
    ("assistant/backends/local_server.py", "--port"),
    ("assistant/backends/openai_api.py", "-k"),
    ("assistant/backends/openai_api.py", "--api"),
    ("assistant/backends/openai_api.py", "--base-url"),
    ("assistant/backends/openai_api.py", "--timeout"),
    ("assistant/backends/openai_api.py", "--model"),
    ("assistant/backends/ov.py", "-n"),
    ("assistant/backends/ov.py", "--max-new-tokens"),
    ("assistant/evaluate/repo/run.py", "--apply"),
    ("assistant/evaluate/repo/run.py", "--task"),
}


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
