"""What the widgets' messages share: the widget that posted them, as Textual's `control`."""

from __future__ import annotations

from typing import Generic, TypeVar

from textual.message import Message
from textual.widget import Widget

W = TypeVar("W", bound=Widget)


class WidgetMessage(Message, Generic[W]):
    """A message about one widget: `control` is that widget, so `@on(Kind.Message, "#id")` selectors match it."""

    def __init__(self, widget: W) -> None:
        super().__init__()
        self.widget = widget

    @property
    def control(self) -> W:
        """The widget the message is about."""
        return self.widget
