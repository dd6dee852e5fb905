"""The Textual TUI (`assist tui`), built on :class:`assistant.ui.session.Session`.

`app` holds the application, `main_screen` the screen that handles the widgets' messages and talks to the
session, `widgets/` one widget per module, `screens` the dialogs (file and stub picker, tests, settings, history,
confirmation)."""

from assistant.ui.tui.app import AssistApp, run
from assistant.ui.tui.main_screen import MainScreen

__all__ = ["AssistApp", "MainScreen", "run"]
