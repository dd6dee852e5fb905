"""The info panel: the target file (and the stub being filled, or the definitions the candidates may rewrite), the
model, and how candidates are picked."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static


class InfoPanel(Static):
    """Three labelled lines beside the requirement, and on its border the definitions of the target file the
    candidates may rewrite (if any); display only (the screen calls :meth:`show`)."""

    def show(
        self,
        *,
        target: str | None,
        function: str | None,
        model: str,
        retriever: str,
        ranker: str,
        n: int,
        k: int,
        tests: int,
        rewrite: Sequence[str] = (),
    ) -> None:
        """Render the panel from the session's current settings."""
        # On the border: the lines keep their place, and at 80 columns the names are not cut off a line's end.
        self.border_title = f"May rewrite: {', '.join(rewrite)}" if rewrite else None
        tested = f"{tests} test{'s' if tests != 1 else ''}" if tests else "no tests"
        lines = [
            ("file ", (target or "(none: ctrl+f)") + (f" → fill {function}" if function else "")),
            ("model", model),
            ("pick ", f"{retriever} · {ranker} · n={n} k={k} · {tested}"),
        ]
        text = Text()
        for number, (label, value) in enumerate(lines):
            text.append(label + " ", style="bold")
            text.append(value)
            if number < len(lines) - 1:
                text.append("\n")
        self.update(text)
