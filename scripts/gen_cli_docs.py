"""The command reference (docs `reference/cli.md`), generated from the `assist` CLI itself so it cannot drift.

It walks the Click command tree that Typer builds from `assistant.ui.cli.app` and writes, for every command and
subcommand, its usage line, its help text and a table of its arguments and options (grouped by help panel where
the command declares panels). MkDocs runs it as a hook (`hooks:` in mkdocs.yml): the page is built in memory on
every `mkdocs build`, never committed. Run by hand to see the page:

    .venv/bin/python scripts/gen_cli_docs.py            # prints the Markdown
    .venv/bin/python scripts/gen_cli_docs.py -o cli.md  # writes it
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PAGE = "reference/cli.md"  # where the page sits in the site
WIDTH = 78  # the columns usage lines wrap at: what `--help` shows in an 80-column terminal


def command_tree() -> Iterator[tuple[list[str], Any, Any]]:
    """(path, command, context) for `assist` and every command below it, depth first, in the CLI's own order."""
    import typer.main

    from assistant.ui.cli import app

    root = typer.main.get_command(app)
    context_class = type(root).context_class

    def walk(command: Any, path: list[str], parent: Any) -> Iterator[tuple[list[str], Any, Any]]:
        # A fixed width: the usage lines wrap the same in every terminal (COLUMNS), so the page is reproducible.
        context = context_class(command, info_name=path[-1], parent=parent, terminal_width=WIDTH)
        yield path, command, context
        if hasattr(command, "list_commands"):  # a group (Typer vendors Click, so no isinstance on click.Group)
            for name in command.list_commands(context):
                child = command.get_command(context, name)
                if child is not None and not getattr(child, "hidden", False):
                    yield from walk(child, [*path, name], context)

    yield from walk(root, ["assist"], None)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _params_table(params: list[Any], context: Any) -> list[str]:
    from assistant.ui.help import plain_metavars

    rows = ["| argument or option | meaning |", "|---|---|"]
    for param in params:
        record = param.get_help_record(context)
        if record is None:
            continue
        name, meaning = record
        rows.append(f"| `{_cell(plain_metavars(name))}` | {_cell(meaning)} |")
    return rows


def _help_text(text: str) -> list[str]:
    """A command's help as Markdown: its paragraphs, and each paragraph `--help` keeps unwrapped (after a `\\b`
    line: examples) as a text block, so its lines stay lines."""
    lines: list[str] = []
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("\b\n"):
            lines += ["```text", *textwrap.dedent(paragraph[2:]).splitlines(), "```", ""]
        else:
            lines += [paragraph, ""]
    return lines


def command_section(path: list[str], command: Any, context: Any) -> list[str]:
    """One command's Markdown: heading, usage, help, then its arguments and options by panel."""
    level = "#" * min(len(path) + 1, 4)
    lines = [f"{level} `{' '.join(path)}`", "", "```text", command.get_usage(context), "```", ""]
    help_text = (command.help or "").strip()
    if help_text:
        lines += _help_text(help_text)
    params = [p for p in command.get_params(context) if not getattr(p, "hidden", False)]
    panels: dict[str | None, list[Any]] = {}
    for param in params:
        panels.setdefault(getattr(param, "rich_help_panel", None), []).append(param)
    from assistant.ui.options import PANELS

    order = {name: place for place, name in enumerate(PANELS)}  # as `--help` shows them; no panel first
    for panel, members in sorted(panels.items(), key=lambda item: -1 if item[0] is None else order.get(item[0], 99)):
        if panel is not None:
            lines += [f"*{panel}*", ""]
        lines += [*_params_table(members, context), ""]
    if hasattr(command, "list_commands"):
        names = command.list_commands(context)
        if names:
            lines += ["Commands: " + ", ".join(f"`{' '.join([*path, name])}`" for name in names), ""]
    return lines


def render() -> str:
    """The whole reference page as Markdown."""
    lines = [
        "# Command reference",
        "",
        "Every `assist` command with its options, generated from the CLI itself when the site is built "
        "(`scripts/gen_cli_docs.py`), so it says what `assist COMMAND --help` says. The guides explain when to use "
        "which.",
        "",
    ]
    for path, command, context in command_tree():
        lines += command_section(path, command, context)
    return "\n".join(lines).rstrip() + "\n"


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated reference page to the site (in memory; nothing is written to docs/)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path, help="write the page here instead of printing it")
    args = parser.parse_args()
    page = render()
    if args.out:
        args.out.write_text(page, encoding="utf-8")
    else:
        print(page, end="")


if __name__ == "__main__":
    main()
