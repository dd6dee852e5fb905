"""The requirement box: what the code should do, multi-line, with the repo's past requirements a keypress away."""

from __future__ import annotations

from typing import Any

from textual.widgets import TextArea

HISTORY_HINT = "↑↓ history"


class RequirementBox(TextArea):
    """The requirement: multi-line; Up on the first line and Down on the last walk the repo's history.

    Typing posts TextArea's own `Changed`; the screen reads :attr:`requirement` when it generates."""

    def __init__(self, past: list[str], **kwargs: Any) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, **kwargs)
        self.past = past
        self.position = -1  # -1: the user's own draft
        self.draft = ""

    def on_mount(self) -> None:
        self.border_title = "Requirement"
        self.border_subtitle = HISTORY_HINT

    @property
    def requirement(self) -> str:
        """The requirement as written, without surrounding blank space."""
        return self.text.strip()

    def remember(self, requirement: str) -> None:
        """Put `requirement` first in the history that Up walks."""
        self.past[:] = [requirement, *(h for h in self.past if h != requirement)]
        self.position = -1

    def recall(self, requirement: str) -> None:
        """Load `requirement` (from the history screen) and take the focus."""
        self.load_text(requirement)
        self.focus()

    def filling(self, function: str | None) -> None:
        """Filling a stub: empty the box, since the stub's docstring is the requirement unless one is typed."""
        if function:
            self.load_text("")
            self.border_subtitle = f"empty: {function}'s docstring"
        else:
            self.border_subtitle = HISTORY_HINT

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.position + 1 < len(self.past):
            if self.position == -1:
                self.draft = self.text
            self.position += 1
            self.load_text(self.past[self.position])
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == self.document.line_count - 1 and self.position >= 0:
            self.position -= 1
            self.load_text(self.draft if self.position == -1 else self.past[self.position])
            self.move_cursor(self.document.end)
            return
        super().action_cursor_down(select)
