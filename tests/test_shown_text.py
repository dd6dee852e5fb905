"""The code shown is the code written (issue 67, item 5): control, zero-width and bidi characters in a candidate,
its diff, and the demonstrations' file names are written out visibly in the CLI and the TUI; a candidate holding
bidi controls is flagged. A real 127.0.0.1 server writes the candidate; a real git repo and index give the
demonstrations."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
from pathlib import Path

from rich.console import Console

from .conftest import assist_here, commit_repo

# A backspace, a zero-width space, a soft hyphen, a word joiner and a right-to-left override.
HIDDEN = (
    'def is_admin(name):\n    return name == "admin\b" or name in ("ro\u200bot", "su\u00ad", "\u2060x")  # \u202e }\n'
)


def test_hidden_characters_are_written_out_and_tabs_and_newlines_kept() -> None:
    from assistant.ui.text import bidi_controls, one_line, printable

    for char in "\a\b\v\f\r\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u061c\u202a\u202e\u2066\u2069\U000e0041":
        shown = printable(f"a{char}b")
        assert shown.startswith("a\\") and shown.endswith("b") and shown.isascii(), repr(char)
    assert printable("caf\u00e9\tx\ny") == "caf\u00e9\tx\ny"  # accents, tabs and newlines as they are
    assert one_line("evil\n  2. forged.py\t") == "evil\\n  2. forged.py\\t"
    assert printable("bad\udcff.py") == "bad\\udcff.py"  # a name that is not UTF-8 (surrogateescape)
    assert bidi_controls("a\u202eb\u2066c\u202e\u200b") == ["\\u202e", "\\u2066"]
    assert bidi_controls("plain\u200bcode") == []


def _generate(tmp_path: Path, flag: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`assist generate ... FLAG` in an indexed repo whose demonstration's file name holds a newline, the candidate
    (HIDDEN) written by a real 127.0.0.1 server; the repo and the command's result."""
    from .openai_server import Script, openai_server

    forged = 'def forged():\n    """Check an admin name."""\n    return 1\n'
    root = commit_repo(tmp_path / "repo", {"evil\n  9. forged.py": forged, "target.py": "def other():\n    return 0\n"})
    assert assist_here("index", cwd=root).returncode == 0
    with openai_server(Script(answers=[(HIDDEN, "stop")])) as (url, _):
        request = ["generate", "check an admin name", "-n", "1", "--base-url", url, "--file", "target.py", flag]
        result = assist_here(*request, cwd=root)
    assert result.returncode == 0, result.stderr
    return root, result


def test_generate_shows_the_hidden_characters_it_applies_and_flags_bidi(tmp_path: Path) -> None:
    root, result = _generate(tmp_path, "--apply")
    written = (root / "target.py").read_text()
    assert "admin\b" in written and "ro\u200bot" in written and "\u202e" in written  # what --apply wrote
    shown = result.stdout
    lines = shown.splitlines()
    # The candidate and its diff: every hidden character written out.
    code_line = '    return name == "admin\\u0008" or name in ("ro\\u200bot", "su\\u00ad", "\\u2060x")  # \\u202e }'
    assert code_line in lines and "+" + code_line in lines
    for hidden in "\b\u200b\u00ad\u2060\u202e":
        assert hidden not in shown
    # A visible warning above the candidate.
    warning = "warning: this candidate holds bidirectional control characters (\\u202e"
    assert any(line.strip().startswith(warning) for line in lines)
    # The demonstrations list: the newline in the file name cannot forge a line.
    assert "  1. evil\\n  9. forged.py:1  forged  — Check an admin name." in lines
    assert not any(line.startswith("  9. forged.py") for line in lines)


def test_json_flags_a_candidate_holding_bidi_controls(tmp_path: Path) -> None:
    _, result = _generate(tmp_path, "--json")
    (shown,) = json.loads(result.stdout)["candidates"]
    assert "\u202e" in shown["code"] and shown["bidi_controls"] == ["\\u202e"]


def test_the_tui_code_and_diff_panes_write_out_hidden_characters_and_flag_bidi(tmp_path: Path) -> None:
    from textual.app import App, ComposeResult
    from textual.widgets import Static

    from assistant.code.edit import Edit
    from assistant.core.candidates import Candidate
    from assistant.core.rank import Ranked, Score
    from assistant.ui.tui.widgets import CandidateView

    class Host(App):
        def compose(self) -> ComposeResult:
            yield CandidateView()

    diff = "--- a/t.py\n+++ b/t.py\n@@ -1 +1,2 @@\n" + "".join(f"+{line}\n" for line in HIDDEN.splitlines())
    edit = Edit(tmp_path / "t.py", "t.py", "", HIDDEN, diff, ("insert is_admin",))
    item = Ranked(Candidate(HIDDEN, 0), {"first": Score(0.0, "sampling order")})

    def text(static: Static) -> str:
        console = Console(file=io.StringIO(), width=200, color_system=None)
        console.print(static.content)
        return console.file.getvalue()

    async def run() -> tuple[str, str]:
        app = Host()
        async with app.run_test(size=(200, 40)) as pilot:
            view = app.query_one(CandidateView)
            view.show(item, 0, edit, None, ["first"])
            await pilot.pause()
            return text(view.query_one("#code", Static)), text(view.query_one("#diff", Static))

    code, diff_shown = asyncio.run(run())
    assert "warning: this candidate holds bidirectional control characters (\\u202e" in code
    for shown in (code, diff_shown):
        assert '"admin\\u0008" or name in ("ro\\u200bot", "su\\u00ad", "\\u2060x")  # \\u202e }' in shown
        assert not any(hidden in shown for hidden in "\b\u200b\u00ad\u2060\u202e")


def test_the_tui_demonstrations_list_keeps_a_repos_file_name_on_one_line() -> None:
    from textual.app import App, ComposeResult

    from assistant.code.examples import Example
    from assistant.core.retrieve import Hit
    from assistant.ui.tui.widgets import DemonstrationList

    class Host(App):
        def compose(self) -> ComposeResult:
            yield DemonstrationList()

    example = Example("Check a name.\nSecond line", "def f():\n    return 1\n", name="", path="evil\n  2. forged.py")
    hit = Hit(example, 0.5, "bm25", "")

    async def run() -> str:
        app = Host()
        async with app.run_test(size=(120, 20)) as pilot:
            demonstrations = app.query_one(DemonstrationList)
            demonstrations.show([hit])
            await pilot.pause()
            return str(demonstrations.get_option_at_index(0).prompt)

    shown = asyncio.run(run())
    assert "\n" not in shown and "evil\\n  2. forged.py" in shown and "Check a name.\\nSecond line" in shown


def test_the_tui_code_pane_says_why_a_candidate_ranks_last_as_the_command_line_does() -> None:
    from textual.app import App, ComposeResult
    from textual.widgets import Static

    from assistant.core.candidates import Candidate
    from assistant.core.rank import Ranked, Score
    from assistant.ui.tui.widgets import CandidateView

    class Host(App):
        def compose(self) -> ComposeResult:
            yield CandidateView()

    code = "def total(xs):\n    return round_total(sum(xs))\n"
    item = Ranked(
        Candidate(code, 0, undefined=("round_total",), dropped=("rewrites helper()",)),
        {"first": Score(0.0, "sampling order")},
    )

    async def run() -> str:
        async with Host().run_test(size=(200, 40)) as pilot:
            view = pilot.app.query_one(CandidateView)
            view.show(item, 0, None, None, ["first"])
            await pilot.pause()
            console = Console(file=io.StringIO(), width=200, color_system=None)
            console.print(view.query_one("#code", Static).content)
            return console.file.getvalue()

    shown = asyncio.run(run())
    assert "reads `round_total`, defined nowhere in the file (a NameError when it runs): ranked below" in shown
    assert "also rewrote helper(): left out of its edit" in shown and "return round_total" in shown
