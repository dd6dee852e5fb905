"""The info panel: the target file (and the stub being filled), the model, and how candidates are picked."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class InfoPanel(Static):
    """Three labelled lines beside the requirement; display only (the screen calls :meth:`show`)."""

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
    ) -> None:
        """Render the panel from the session's current settings."""
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
