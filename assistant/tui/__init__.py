"""The Textual TUI (`assist tui`), built on :class:`assistant.session.Session`."""

from .app import AssistApp, MainScreen, run

__all__ = ["AssistApp", "MainScreen", "run"]
