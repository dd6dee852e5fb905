"""`assist tui`: ask, look at what was retrieved, compare candidates, read diffs, apply, undo, ask again.

The UI drives a :class:`~assistant.ui.session.Session` (the library API); it never shells out to the CLI.
The app holds one :class:`~assistant.ui.tui.main_screen.MainScreen`, built from the widgets in `widgets/`;
the dialogs are in :mod:`assistant.ui.tui.screens`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from textual.app import App, SystemCommand
from textual.screen import Screen

from assistant.backends import watchdog
from assistant.ui.session import Session
from assistant.ui.text import printable
from assistant.ui.tui.main_screen import MainScreen


class AssistApp(App[None]):
    """The `assist tui` application."""

    TITLE = "assist"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, session: Session, target: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.target = target

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast of plain text: messages carry file names, errors and test output from the repo, so brackets are
        not markup and control characters are written out (as the CLI does)."""
        if isinstance(message, str):  # textual's own toasts may come as Content, already safe
            message = printable(message)
        super().notify(message, title=printable(title), severity=severity, timeout=timeout, markup=markup)

    def on_mount(self) -> None:
        root = self.session.root or self.session.start
        self.title = f"assist · {root.name}"
        self.push_screen(MainScreen(self.session, self.target))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, MainScreen):
            yield SystemCommand("Index this repo", "Index (incrementally) and retrieve from it", screen.action_reindex)
            yield SystemCommand("Settings", "Backend, model, retriever, ranker", screen.action_settings)
            yield SystemCommand("History", "Past requirements in this repo", screen.action_history)
            yield SystemCommand(
                "Fill a stub", "Pick a stub of the target file; only its body is written (f3)", screen.action_pick_stub
            )
            yield SystemCommand(
                "Allow rewriting a definition",
                "Pick a function, class or method of the target file the candidates may rewrite (f4)",
                screen.action_pick_rewrite,
            )


def terminal_restorer(app: App[Any]) -> Callable[[], None]:
    """What gives the user's terminal back if the process must end while `app` runs: an engine deadlock ends it
    from the watchdog's thread (see :mod:`assistant.backends.watchdog`), and the one-line error should land in a
    usable shell, not in the alternate screen with the mouse and raw modes still on."""

    def restore() -> None:
        driver = app._driver  # Textual keeps its terminal driver private; no public call restores it from a thread
        if driver is not None:
            driver.stop_application_mode()
            driver.close()  # its writer thread sends what is queued before the process ends

    return restore


def run(session: Session, target: str | None = None) -> None:
    """Run the TUI until the user quits."""
    app = AssistApp(session, target)
    restore = terminal_restorer(app)
    watchdog.before_exit.append(restore)
    try:
        app.run()
    finally:
        watchdog.before_exit.remove(restore)
