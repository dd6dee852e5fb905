"""The selected candidate: its code and its diff against the target, side by side from 140 columns."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, VerticalScroll
from textual.widgets import Static

from assistant.code.edit import Edit
from assistant.core.rank import Ranked
from assistant.ui.stream import shown_code
from assistant.ui.text import bidi_warning, demotions, printable

WIDE = 140  # columns from which code and diff sit side by side
SYNTAX_THEME = "ansi_dark"  # the terminal's own palette; Textual turns it monochrome under NO_COLOR


class Pane(VerticalScroll):
    """A scrolling pane that f11 may maximize (Textual's scroll containers refuse by default)."""

    ALLOW_MAXIMIZE = True


class CandidateView(Container):
    """Two scrolling panes, code and diff; display only (the screen calls :meth:`show` or :meth:`hint`)."""

    def compose(self) -> ComposeResult:
        with Pane(id="code-pane"):
            yield Static(id="code")
        with Pane(id="diff-pane"):
            yield Static(id="diff")

    def on_mount(self) -> None:
        self.hint("")

    def on_resize(self) -> None:
        self.set_class(self.size.width >= WIDE, "wide")

    def hint(self, message: str) -> None:
        """No candidate to show: `message` says what to do instead."""
        self._panes("Code", "Diff")
        self.query_one("#code", Static).update(message)
        self.query_one("#diff", Static).update("")

    def stream(self, call: int, text: str) -> None:
        """The first candidate of the request's `call`-th sampling call (from 0) as it is being written; the ranked
        list replaces it when the request ends."""
        title = "Writing candidate 1…" if call == 0 else f"Writing (sampling call {call + 1})…"
        code_pane, _ = self._panes(title, "Diff")
        self.query_one("#code", Static).update(_syntax(shown_code(text), "python"))
        self.query_one("#diff", Static).update("")
        code_pane.scroll_end(animate=False)

    def show(
        self, item: Ranked, position: int, edit: Edit | None, filled: str | None, rankers: Sequence[str] = ()
    ) -> None:
        """Show candidate `position` (0-based) and `edit`, its plan against the target; `filled` names the stub
        that an apply filled already, when there is no edit because of it. The scores' reasons are listed in
        the order of `rankers` (the active ranker first), then any others."""
        code_pane, diff_pane = self._panes(f"Code #{position + 1}", "Diff")
        names = [*(name for name in rankers if name in item.scores), *(n for n in item.scores if n not in rankers)]
        code_pane.border_subtitle = printable("; ".join(item.scores[name].why for name in names)[:120])
        code, warning = _syntax(item.candidate.code, "python"), bidi_warning(item.candidate.code)
        # Above the code, as the command line prints them: why it may run otherwise than it reads, or ranks last.
        notes = [Text(f"warning: {warning}", style="bold red")] if warning else []
        notes += [
            Text(printable(line), style="yellow")
            for line in demotions(item.candidate.undefined, item.candidate.dropped)
        ]
        self.query_one("#code", Static).update(Group(*notes, code) if notes else code)
        diff = self.query_one("#diff", Static)
        if edit is None and filled:
            diff.update(Text(f"{printable(filled)} is filled now (ctrl+r undoes the apply)."))
        elif edit is None:
            diff.update("No target file: press ctrl+f to pick one, then ctrl+g.")
        elif not edit.diff:
            diff.update(Text(f"{printable(edit.display_path)} already has this candidate (ctrl+r undoes an apply)."))
            diff_pane.border_title = f"Diff {printable(edit.display_path)}: no change"
        else:
            diff.update(_syntax(edit.diff, "diff"))
            diff_pane.border_title = printable(f"Diff {edit.display_path}: {', '.join(edit.actions)}")

    def _panes(self, code_title: str, diff_title: str) -> tuple[VerticalScroll, VerticalScroll]:
        code_pane = self.query_one("#code-pane", VerticalScroll)
        diff_pane = self.query_one("#diff-pane", VerticalScroll)
        code_pane.border_title, code_pane.border_subtitle = code_title, ""
        diff_pane.border_title = diff_title
        return code_pane, diff_pane


def _syntax(code: str, lexer: str) -> Syntax:
    # The code and diffs come from models and repos: control and invisible characters are written out, never sent.
    # Long lines wrap: a narrow pane would cut them, and a candidate must be read whole before it is applied.
    return Syntax(printable(code), lexer, theme=SYNTAX_THEME, background_color="default", word_wrap=True)
