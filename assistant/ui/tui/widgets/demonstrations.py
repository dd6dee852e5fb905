"""The demonstrations list: each retrieved example with its source, retriever and score; space switches one off."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.widgets import SelectionList
from textual.widgets.selection_list import Selection

from assistant.core.retrieve import Hit
from assistant.ui.text import one_line
from assistant.ui.tui.widgets.messages import WidgetMessage


class DemonstrationList(SelectionList[int]):
    """The retrieved demonstrations, all on at first; posts :class:`Toggled` when the user switches one."""

    class Toggled(WidgetMessage["DemonstrationList"]):
        """The user switched a demonstration on or off; `chosen` are those still on, best first."""

        def __init__(self, demonstrations: DemonstrationList, chosen: list[Hit]) -> None:
            super().__init__(demonstrations)
            self.chosen = chosen

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hits: list[Hit] = []
        self.retrieved = False  # nothing retrieved yet: no count in the title

    def on_mount(self) -> None:
        self.border_title = "Demonstrations"

    @property
    def chosen(self) -> list[Hit]:
        """The demonstrations switched on, in retrieval order."""
        on = set(self.selected)
        return [hit for number, hit in enumerate(self.hits) if number in on]

    def show(self, hits: list[Hit]) -> None:
        """List freshly retrieved demonstrations, every one switched on."""
        self.hits = list(hits)
        self.retrieved = True
        self.clear_options()
        for number, hit in enumerate(self.hits):
            name = one_line(hit.example.name or hit.example.requirement[:40])  # the repo's text: shown, not sent
            prompt = Text.assemble(
                (one_line(hit.example.source), "bold"), f"  {name}  ", (f"{hit.retriever} {hit.score:.3f}", "dim")
            )
            self.add_option(Selection(prompt, number, True))
        self._update_title()

    def _update_title(self) -> None:
        suffix = f" ({len(self.selected)} of {len(self.hits)} on; space toggles)" if self.hits else " (none: zero-shot)"
        self.border_title = "Demonstrations" + (suffix if self.retrieved else "")

    @on(SelectionList.SelectionToggled)
    def _user_toggled(self, event: SelectionList.SelectionToggled[int]) -> None:
        event.stop()
        self._update_title()
        self.post_message(self.Toggled(self, self.chosen))
