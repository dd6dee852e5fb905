"""How `assist ... --help` is laid out: wrapping that never breaks a word at a hyphen, plain placeholders, and the
top-level commands in the order a newcomer needs them.

Typer builds the Click commands; these classes change only how their help is printed (Click's plain formatter:
the CLI sets `rich_markup_mode=None`). The help uses the terminal's width, up to MAX_WIDTH columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from typer._click import Context, HelpFormatter  # typer is pinned; it vendors Click
from typer.core import TyperGroup

__all__ = ["MAX_WIDTH", "TOP_LEVEL_ORDER", "AssistGroup", "HelpContext", "PlainHelpFormatter", "plain_metavars"]

MAX_WIDTH = 120  # help uses the terminal's width up to this many columns (Click's own cap is 80)

# `assist --help` lists its commands in this order: what a newcomer runs first, first. Any other command follows.
TOP_LEVEL_ORDER = (
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
)

# A character textwrap never breaks at (U+2011, non-breaking hyphen) stands in for "-" while a text is wrapped.
_HYPHEN_STAND_IN = "\u2011"
_LIST_METAVAR = re.compile(r"<list\[(\w+)\]>")


def plain_metavars(text: str) -> str:
    """A help record's name with Typer's Python types made plain: `<list[str]>` → `<str>`, `<list[Path]>` →
    `<path>` (an option given more than once says "Repeatable." in its help; an argument's `...` says as much)."""
    return _LIST_METAVAR.sub(lambda match: f"<{match.group(1).lower()}>", text)


def _keep_hyphens(text: str) -> str:
    return text.replace("-", _HYPHEN_STAND_IN)


class PlainHelpFormatter(HelpFormatter):
    """Click's help formatter, except that no line breaks inside a word at a hyphen.

    Click wraps with textwrap's `break_on_hyphens=True`, which split option names (`--fail-on-` / `change`) and
    words (`re-` / `stage`) across lines. Each text is wrapped with its hyphens stood in for by a character that
    textwrap does not break at, and they are put back as the text is written.
    """

    def write(self, string: str) -> None:
        """Write `string`, its hyphens put back."""
        super().write(string.replace(_HYPHEN_STAND_IN, "-"))

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        """The usage line, wrapped between words only."""
        super().write_usage(prog, _keep_hyphens(args), prefix)

    def write_text(self, text: str) -> None:
        """A help text, wrapped between words only (a paragraph after a `\\b` line is kept as written)."""
        super().write_text(_keep_hyphens(text))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        """A definition list (options, commands), wrapped between words only, with plain placeholders."""
        kept = [(_keep_hyphens(plain_metavars(name)), _keep_hyphens(text)) for name, text in rows]
        super().write_dl(kept, col_max, col_spacing)


class HelpContext(Context):
    """A Click context whose help is written by :class:`PlainHelpFormatter`."""

    formatter_class = PlainHelpFormatter


def _use_help_context(group: Any) -> None:
    """Every command below `group` makes a HelpContext: Click builds each subcommand's context from its own
    command's `context_class`, not from its parent's."""
    for command in group.commands.values():
        command.context_class = HelpContext
        if hasattr(command, "commands"):  # a group (Typer's groups are not click.Group)
            _use_help_context(command)


class AssistGroup(TyperGroup):
    """The `assist` group: its commands in TOP_LEVEL_ORDER, and every command's help by PlainHelpFormatter."""

    context_class = HelpContext

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _use_help_context(self)

    def list_commands(self, ctx: Context) -> list[str]:
        """The command names in TOP_LEVEL_ORDER, then any others in the order they were added."""
        place = {name: number for number, name in enumerate(TOP_LEVEL_ORDER)}
        return sorted(super().list_commands(ctx), key=lambda name: place.get(name, len(place)))
