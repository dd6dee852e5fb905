"""The README stays a front page, and the command reference is generated from the CLI and covers all of it.

The site itself is built by `.ci/run` (`mkdocs build --strict`: links, anchors, the nav, the included plans)."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _walk(command, context_class, path, parent):
    """Every (command path, command, context) of the Click tree Typer builds, found independently of the generator
    (its usage lines wrapped at the generator's width)."""
    context = context_class(command, info_name=path[-1], parent=parent, terminal_width=_generator().WIDTH)
    yield path, command, context
    for name in getattr(command, "list_commands", lambda _c: [])(context):
        yield from _walk(command.get_command(context, name), context_class, [*path, name], context)


def test_the_reference_is_the_same_in_any_terminal(monkeypatch):
    pages = set()
    for columns in ("50", "80", "200"):
        monkeypatch.setenv("COLUMNS", columns)
        pages.add(_generator().render())
    assert len(pages) == 1  # the site is reproducible: no width of the terminal that built it leaks in


def test_the_reference_keeps_examples_as_lines():
    page = _generator().render()
    assert "```text\nExamples:\n  assist docstring src/util.py" in page
    assert "\b" not in page


def test_the_reference_lists_every_command_and_every_option():
    import typer.main

    from assistant.ui.cli import app

    page = _generator().render()
    root = typer.main.get_command(app)
    commands = list(_walk(root, type(root).context_class, ["assist"], None))
    assert len(commands) > 25  # generate, tui, eval repo, train retriever, ...
    headings = re.findall(r"^#+ `(assist[^`]*)`$", page, flags=re.MULTILINE)
    assert headings == [" ".join(path) for path, _, _ in commands]  # each once, in the CLI's order
    sections = dict(zip(headings, re.split(r"^#+ `assist[^`]*`$", page, flags=re.MULTILINE)[1:], strict=True))
    for path, command, context in commands:
        section = sections[" ".join(path)]
        assert command.get_usage(context) in section
        for param in command.get_params(context):
            for flag in param.opts + param.secondary_opts:
                if param.param_type_name == "option":
                    assert flag in section, f"{' '.join(path)}: {flag} missing from the reference"


def test_the_site_builds_strict_with_the_generated_reference(tmp_path):
    """The real build, as CI runs it (needs the docs extra: `pip install -e '.[docs]'`)."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-2000:]
    reference = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "assist eval repo" in reference and "--function" in reference
    assert not (ROOT / "docs" / "reference").exists()  # generated in memory, never written into docs/


def test_the_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) <= 10_000
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q"
    assert test_command in readme and "-e '.[test]'" in ci and "mkdocs build --strict" in ci
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)", readme):  # the README's links into docs/ resolve
        assert (ROOT / target).is_file(), target


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert pages and all(page in nav for page in pages)
    assert "reference/cli.md" in nav and not (ROOT / "docs" / "reference" / "cli.md").exists()


def test_the_docs_tui_pictures_are_the_snapshot_tests_own() -> None:
    """The README's and the TUI guide's pictures are the snapshot tests' SVGs, so they show the TUI as it is."""
    snapshots = ROOT / "tests" / "__snapshots__" / "test_tui"
    pairs = {
        "tui-80x24.svg": "test_main_screen_snapshot[80x24].svg",
        "tui-160x45.svg": "test_main_screen_snapshot[160x45].svg",
        "tui-80x24-zoom.svg": "test_zoomed_code_snapshot.svg",
    }
    for picture, snapshot in pairs.items():
        assert (ROOT / "docs" / picture).read_bytes() == (snapshots / snapshot).read_bytes(), picture
