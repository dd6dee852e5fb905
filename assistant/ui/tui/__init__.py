"""The Textual TUI (`assist tui`), built on :class:`assistant.ui.session.Session`."""

from assistant.ui.tui.app import AssistApp, MainScreen, run

__all__ = ["AssistApp", "MainScreen", "run"]
