"""The `assist ...` command lines the README and the docs show name commands and options the CLI has.

Every shell-ish fenced code block of README.md and docs/**/*.md is read; each `assist` invocation in it (after
`$ `, `VAR=value `, `.venv/bin/`, or `&&` / `;` / `|`) has its command path resolved against the Click tree Typer
builds from `assistant.ui.cli.app`, once, and each `--option` / `-x` it uses checked against that command's options.
Arguments are not checked: placeholders such as `NAME`, `DIR`, `...` or `<model>` are fine. The generated command
reference (`scripts/gen_cli_docs.py`) is skipped: it comes from the CLI itself.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "docs" / "reference"  # where gen_cli_docs.py's PAGE ("reference/cli.md") would sit
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console", "text"}  # blocks whose lines may be commands
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
SEPARATORS = {";", "&&", "||", "|", "&"}  # where one command of a line ends and the next begins
PREFIX = re.compile(r"[A-Za-z_]\w*=.*|[{(]|\w+\(\)")  # what may come before a command: VAR=value, `{`, `f()`


def doc_files() -> list[Path]:
    """README.md and every Markdown page under docs/, less the generated reference."""
    pages = sorted(path for path in (ROOT / "docs").rglob("*.md") if GENERATED not in path.parents)
    return [ROOT / "README.md", *pages]


def code_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) for each line of a shell-ish fenced block, backslash continuations joined."""
    fence, shell, pending, start = "", False, "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        opened = FENCE.match(line)
        if not fence:
            if opened:
                fence, shell = opened.group(1), opened.group(2).lower() in SHELL_LANGUAGES
            continue
        if line.strip() == fence:
            fence = ""
            continue
        if not shell:
            continue
        stripped = line.rstrip()
        start = start or number
        if stripped.endswith("\\"):  # continued on the next line
            pending += stripped[:-1] + " "
            continue
        yield start, pending + stripped
        pending, start = "", 0


def strip_comment(line: str) -> str:
    """The line without its shell comment: from an unquoted `#` that starts the line or follows whitespace."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index]
    return line


def invocations(line: str) -> Iterator[list[str]]:
    """The arguments of each assist command on a shell line (after a `$ ` prompt; in `&&`, `;` and `|` chains)."""
    line = strip_comment(line.strip().removeprefix("$ "))
    if "assist" not in line:
        return
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")  # `<model>` stays one word, `a&&b` splits
    lexer.whitespace_split = True
    lexer.commenters = ""
    tokens = list(lexer)
    part: list[str] = []
    for token in [*tokens, ";"]:
        if token not in SEPARATORS:
            part.append(token)
            continue
        arguments = assist_arguments(part)
        if arguments is not None:
            yield arguments
        part = []


def assist_arguments(command: list[str]) -> list[str] | None:
    """The arguments of one shell command if it runs assist (`assist`, `.venv/bin/assist`, `python -m assistant`)."""
    while command and PREFIX.fullmatch(command[0]):
        command = command[1:]
    program = command[0].rsplit("/", 1)[-1] if command else ""
    if program == "assist":
        return command[1:]
    if program.startswith("python") and "-m" in command:
        module = command.index("-m") + 1
        return command[module + 1 :] if command[module : module + 1] == ["assistant"] else None
    return None


def _options(command: Any, context: Any) -> dict[str, Any]:
    """Every option name of a command (`--x`, `-x`, `--no-x`, `--help`) to its Click parameter."""
    return {
        name: param
        for param in command.get_params(context)
        if param.param_type_name == "option"
        for name in param.opts + param.secondary_opts
    }


def drift(arguments: list[str], root: Any) -> list[str]:
    """What in `assist <arguments>` the CLI does not have: an unknown command or an unknown option of its command."""
    command, path = root, ["assist"]
    context = type(root).context_class(root, info_name="assist")
    options, problems = _options(command, context), []
    words = iter(token.strip("[]") for token in arguments)  # `[--json]`: an optional flag, as usage lines show it
    for word in words:
        if word == "--":
            break
        if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", word):
            name = word.split("=", 1)[0]
            if name not in options and not name.startswith("--") and name[:2] in options:
                name = name[:2]  # `-n5`: a short option with its value attached
            param = options.get(name)
            if param is None:
                problems.append(f"unknown option {name} for '{' '.join(path)}'")
            elif "=" not in word and name == word and not param.is_flag and not param.count:
                next(words, None)  # the option's value, whatever it looks like
        elif hasattr(command, "get_command"):  # a group: the word names a subcommand
            child = command.get_command(context, word)
            if child is None:
                problems.append(f"unknown command '{word}' for '{' '.join(path)}'")
                break
            command, path = child, [*path, word]
            context = type(child).context_class(child, info_name=word, parent=context)
            options = _options(command, context)
    return problems


@pytest.fixture(scope="module")
def root() -> Any:
    """The Click command tree of `assist`, built once."""
    import typer.main

    from assistant.ui.cli import app

    return typer.main.get_command(app)


def test_the_commands_the_docs_show_exist_with_their_options(root):
    """Every `assist` line of the README's and the docs' code blocks names a real command and real options."""
    found, drifted = 0, []
    for path in doc_files():
        for number, line in code_lines(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(ROOT)}:{number}: {' '.join(strip_comment(line).split())}"
            try:
                commands = list(invocations(line))
            except ValueError as error:  # shlex: an unbalanced quote
                drifted.append(f"{where} : not a shell line ({error})")
                continue
            found += len(commands)
            drifted += [f"{where} : {problem}" for arguments in commands for problem in drift(arguments, root)]
    assert found > 100  # the extraction itself still works (README, getting started, the guides, the results)
    if drifted:
        pytest.fail("commands in the docs drifted from the CLI:\n" + "\n".join(drifted), pytrace=False)


def test_the_check_catches_drift(root):
    """The parser sees through prompts, env vars, paths, continuations, comments and chains, and flags drift."""
    block = "```bash\n$ HF_HUB_OFFLINE=1 .venv/bin/assist eval repo --limit 5 \\\n  --bogus -n5  # --also-bogus\n```\n"
    [(number, line)] = code_lines(block)
    assert number == 2 and line.startswith("$ HF_HUB_OFFLINE=1")
    [arguments] = invocations(line)
    assert drift(arguments, root) == ["unknown option --bogus for 'assist eval repo'"]
    assert drift(["eval", "nonsense", "--limit", "5"], root) == ["unknown command 'nonsense' for 'assist eval'"]
    assert [drift(a, root) for a in invocations("cd x && assist serve --stop | cat; assist --help")] == [[], []]
