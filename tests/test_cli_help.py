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
