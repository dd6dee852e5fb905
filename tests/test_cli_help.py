"""The help a user reads first (issue 68): `assist generate --help` in panels, `assist --help` with whole summaries.

The help is read from a real `assist` process (the plain help Click prints, as a user sees it in a terminal of 80
or 60 columns); which panel each option sits in is read from the Click command Typer builds.
"""

import re
from pathlib import Path

import pytest
import typer.main

from assistant.ui.cli import app
from assistant.ui.options import ADVANCED, PANELS

from .conftest import assist


def _command(name: str):
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["generate", "tui", "docstring"])
def test_every_option_sits_in_a_panel(name: str) -> None:
    options = [param for param in _command(name).params if param.param_type_name == "option"]
    assert options
    loose = [param.opts[0] for param in options if not getattr(param, "rich_help_panel", None)]
    assert loose == [], f"{name}: options in no panel: {loose}"


def test_generate_panels_in_the_help_a_user_reads(tmp_path: Path) -> None:
    result = assist("generate", "--help", cwd=tmp_path, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    headings = [line[:-1] for line in result.stdout.splitlines() if re.fullmatch(r"[A-Z][^:]*:", line)]
    # Usage's own heading aside, the panels in their order, then --help alone under Options.
    assert headings == ["Arguments", *PANELS, "Options"]
    advanced = result.stdout.split(ADVANCED + ":")[1].split("\nOptions:")[0]
    for knob in ("--apis", "--fragments", "--own-file", "--tests-in-prompt", "--redraw"):
        assert knob in advanced  # the research knobs, out of the way
    assert not re.search(r"^  (--ranker|--function|--model) ", advanced, re.M)


@pytest.mark.parametrize("columns", ["80", "60"])
def test_top_level_summaries_are_not_cut(tmp_path: Path, columns: str) -> None:
    result = assist("--help", cwd=tmp_path, env={"COLUMNS": columns})
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1]
    for name in ("index", "generate", "config", "doctor", "serve", "tui", "models", "eval", "train", "hook"):
        assert re.search(rf"^  {name} ", commands, re.M), name
    assert "..." not in commands and "<..." not in commands, commands


# Each command whose help a hyphen once broke across two lines (`--fail-on-` / `change`, `re-` / `stage`).
HYPHENATED = [
    ("docstring",),
    ("generate",),
    ("hook", "install"),
    ("train", "discriminator"),
    ("eval", "discriminator"),
    ("train", "retriever", "lail"),
]


@pytest.mark.parametrize("command", HYPHENATED, ids=" ".join)
def test_help_never_breaks_a_word_at_a_hyphen(tmp_path: Path, command: tuple[str, ...]) -> None:
    for columns in ("80", "120"):
        result = assist(*command, "--help", cwd=tmp_path, env={"COLUMNS": columns})
        assert result.returncode == 0, result.stderr
        broken = re.findall(r"\S*\w-\n\s*\w\S*", result.stdout)  # `--fail-on-` / `change`, `re-` / `stage`
        assert broken == [], f"{' '.join(command)} at {columns} columns"


def test_the_formatter_wraps_between_words_only() -> None:
    from assistant.ui.help import PlainHelpFormatter

    formatter = PlainHelpFormatter(width=30)
    formatter.write_text("Exit 1 when files were changed (hooks: review, then re-stage) --fail-on-change.")
    formatter.write_dl([("--fail-on-change", "low-memory low-memory low-memory re-stage re-stage")])
    text = formatter.getvalue()
    assert not re.search(r"\w-$", text, re.M), text  # Click's own wrapping ends lines with `re-`, `--fail-`
    for word in ("re-stage", "--fail-on-change", "low-memory"):
        assert word in text, text


@pytest.mark.parametrize(
    ("command", "examples"),
    [
        (("generate",), ['assist generate "return the squares of the even numbers in a list" -n 3']),
        (("generate",), ["assist generate --file src/util.py --function parse_version"]),
        (("docstring",), ["assist docstring --staged --write --fail-on-change", "assist docstring --check --staged"]),
    ],
)
def test_examples_stay_whole_lines(tmp_path: Path, command: tuple[str, ...], examples: list[str]) -> None:
    result = assist(*command, "--help", cwd=tmp_path, env={"COLUMNS": "80"})
    lines = [line.strip() for line in result.stdout.splitlines()]
    for example in examples:
        assert any(line.startswith(example) for line in lines), example  # copy-paste gets the whole command


@pytest.mark.parametrize("group", ["models", "config", "hook", "eval", "train", "train retriever"])
def test_subcommand_summaries_are_not_cut(tmp_path: Path, group: str) -> None:
    result = assist(*group.split(), "--help", cwd=tmp_path, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1]
    assert "..." not in commands, commands


def test_help_uses_a_wider_terminal(tmp_path: Path) -> None:
    narrow = assist("generate", "--help", cwd=tmp_path, env={"COLUMNS": "80"}).stdout
    wide = assist("generate", "--help", cwd=tmp_path, env={"COLUMNS": "120"}).stdout
    assert max(map(len, narrow.splitlines())) <= 80
    assert 80 < max(map(len, wide.splitlines())) <= 120


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (("generate",), ["--replace <str>", "--test <str>"]),
        (("docstring",), ["files... <path>"]),
        (("eval", "report"), ["results... <path>"]),
        (("eval", "discriminator"), ["--from-eval <path>", "--candidates <path>"]),
        (("train", "discriminator"), ["--from-eval <path>"]),
    ],
)
def test_placeholders_are_plain(tmp_path: Path, command: tuple[str, ...], shown: list[str]) -> None:
    result = assist(*command, "--help", cwd=tmp_path, env={"COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    assert "list[" not in result.stdout
    for placeholder in shown:
        assert placeholder in result.stdout


@pytest.mark.parametrize("command", ["index", "tui", "config trust", "train retriever tstr"])
def test_a_default_is_said_once(tmp_path: Path, command: str) -> None:
    result = assist(*command.split(), "--help", cwd=tmp_path, env={"COLUMNS": "80"})
    text = " ".join(result.stdout.split())  # as one line: Click's own note may wrap
    assert "(default: where you stand)" in text
    assert "[default: .]" not in text


def test_top_level_commands_in_a_newcomers_order(tmp_path: Path) -> None:
    result = assist("--help", cwd=tmp_path, env={"COLUMNS": "80"})
    commands = result.stdout.split("Commands:")[1]
    listed = re.findall(r"^  (\S+) ", commands, re.M)
    assert listed == [
        "generate",
        "tui",
        "index",
        "docstring",
        "hook",
        "serve",
        "models",
        "config",
        "doctor",
        "train",
        "eval",
    ]


def test_serve_refuses_status_and_stop_together(tmp_path: Path) -> None:
    result = assist("serve", "--status", "--stop", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == ["error: --status and --stop cannot be used together; give one"]
