"""The status line: the last message, and a progress bar while a job runs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar, Static

from assistant.progress import STAGE_LABELS
from assistant.ui.text import printable

CANCELS = "(Escape cancels)"


class StatusBar(Horizontal):
    """One line at the bottom; display only (the screen calls :meth:`say`, :meth:`working`, :meth:`done`)."""

    message = "Ready"  # what the line says now

    def compose(self) -> ComposeResult:
        yield Static("Ready", id="message")
        yield ProgressBar(id="progress", show_eta=False)

    def on_mount(self) -> None:
        self.query_one("#progress", ProgressBar).display = False

    def say(self, message: str) -> None:
        """Show `message` (plain text: brackets are not markup)."""
        self.message = message
        self.query_one("#message", Static).update(Text(printable(message)))

    def working(self, label: str, stage: str | None = None, step: int = 0, total: int = 0) -> None:
        """A job named `label` runs: show its stage and how far it got (an unknown total pulses)."""
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=total or None, progress=step)
        bar.display = True
        what = f"{label}: {STAGE_LABELS.get(stage, stage)}" if stage else label
        self.say(f"{what}…  {CANCELS}")

    def done(self) -> None:
        """The job ended: hide the bar; a progress message gives way to "Ready", any other message stays."""
        self.query_one("#progress", ProgressBar).display = False
        if self.message.endswith(CANCELS):
            self.say("Ready")
