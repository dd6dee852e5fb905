"""The candidates table: one row per candidate, one column per ranker's score, sorted by the active ranker."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.widgets import DataTable

from assistant.core.generation import GenerateResult
from assistant.ui.tui.widgets.messages import WidgetMessage


def format_score(name: str, value: float) -> str:
    """A ranker's score as the table shows it."""
    if name == "first":
        return f"#{int(-value) + 1}"
    if name in ("exec", "condor"):  # tests passed; p(correct)
        return f"{value:.0%}"
    return f"{value:.3f}"


class CandidateTable(DataTable[str]):
    """The ranked candidates; posts :class:`Highlighted` when the cursor lands on a row (↑↓, a click)."""

    class Highlighted(WidgetMessage["CandidateTable"]):
        """The candidate at `position` (0 = ranked first) is the one to show, apply, test or copy."""

        def __init__(self, table: CandidateTable, position: int) -> None:
            super().__init__(table)
            self.position = position

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)

    def on_mount(self) -> None:
        self.border_title = "Candidates"

    def show(self, result: GenerateResult | None, selected: int) -> None:
        """Fill the table from `result` (empty for None) with the cursor on row `selected`."""
        self.clear(columns=True)
        if result is None:
            self.border_title = "Candidates"
            return
        columns = list(result.rankers)
        columns += sorted({name for item in result.candidates for name in item.scores} - set(columns))
        self.add_column("#", key="rank")
        for name in columns:
            self.add_column(name, key=name)
        self.add_column("lines", key="lines")
        for number, item in enumerate(result.candidates):
            cells: list[str] = [str(number + 1)]
            for name in columns:
                score = item.scores.get(name)
                cells.append(format_score(name, score.value) if score is not None else "–")
            cells.append(str(len(item.candidate.code.splitlines())))
            self.add_row(*cells, key=str(number))
        dropped = ", ".join(f"{count} {why}" for why, count in result.dropped.items())
        self.border_title = f"Candidates: {len(result.candidates)} of {result.samples}, by {result.rankers[0]}" + (
            f" (dropped {dropped})" if dropped else ""
        )
        if result.candidates:
            self.move_cursor(row=selected)

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(self.Highlighted(self, event.cursor_row))
