"""Terminal output shared by the CLI's commands: consoles, progress bars, one-line errors."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment
from rich.syntax import Syntax
from rich.text import Text

from assistant.backends import streaming
from assistant.errors import AssistError
from assistant.progress import STAGE_LABELS
from assistant.ui.interrupt import cancel_guard
from assistant.ui.stream import last_lines, shown_code
from assistant.ui.text import bidi_warning, printable


class SafeConsole(Console):
    """A rich Console that writes out control characters found in the text it prints: the code, docstrings,
    diffs and messages it shows come from repositories and models. rich's own styling and cursor control
    (progress bars) pass untouched: they are added after, or travel as control segments."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # Written out before rich sees the text: rich drops BEL, BS, VT, FF and CR itself, silently.
        return super().render_str(printable(text), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(printable(segment.text), segment.style, segment.control)
            for segment in buffer
        )


out = SafeConsole(highlight=False, soft_wrap=True, markup=False)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False)

F = TypeVar("F", bound=Callable[..., Any])


def print_code(code: str, lexer: str = "python") -> None:
    """Print a candidate's code (or a diff, `lexer` "diff") on stdout: highlighted on a terminal, every control and
    invisible character written out (what is shown is what --apply writes), and a warning line first when a
    candidate holds bidirectional controls."""
    warning = bidi_warning(code) if lexer == "python" else None
    if warning:
        out.print(f"  [bold red]warning:[/] {escape(warning)}", markup=True)
    shown = printable(code)
    out.print(Syntax(shown, lexer, theme="ansi_dark", background_color="default") if out.is_terminal else shown)


def friendly_errors(command: F) -> F:
    """Print an AssistError as one line on stderr (a setting the library names, as its flag) and exit with its
    code; Ctrl-C exits 130."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except AssistError as exc:
            from assistant.ui.errors import said_with_flags  # the library's words for a setting, as flags

            err.print(f"[bold red]error:[/] {escape(str(said_with_flags(exc)))}", markup=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def command(app: typer.Typer, name: str | None = None, *, guarded: bool = True, **options: Any) -> Callable[[F], F]:
    """Register a function as `app`'s command `name` (Typer's `options`, e.g. short_help), with what every command
    shares: an AssistError is one line on stderr (`friendly_errors`), and, `guarded`, Ctrl-C ends the process within
    a second even while a native library holds the interpreter (`cancel_guard`). Commands that return at once, the
    TUI and `serve`, which stop their own way, are not guarded."""

    def register(function: F) -> F:
        wrapped = friendly_errors(cancel_guard(function) if guarded else function)
        return app.command(name, **options)(wrapped)

    return register


class PerMinuteColumn(ProgressColumn):
    """Items per minute: the unit long jobs here are judged in (pairs labeled, samples drawn)."""

    def render(self, task: Any) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed * 60:,.1f}/min" if speed else "", style="progress.data.speed")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


PLAIN_LOG_EVERY_S = 60.0
# The logged rate is over the last few minutes of work, not the whole stage: a resumed benchmark walks through its
# cached items hundreds a minute before the slow ones, and a whole-stage rate then promises minutes for hours.
RATE_WINDOW_S = 300.0


class _LiveProgress(Progress):
    """rich's progress bars with, below them, the candidate being written (`streamed`, set from the sampling
    thread; the bars' own refresh thread draws it)."""

    streamed: str = ""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield from super().get_renderables()
        if self.streamed:
            # One terminal row a line, so the live region stays as tall as the lines shown.
            yield Text(self.streamed, no_wrap=True, overflow="ellipsis")


class ProgressUI:
    """Renders the library's progress callbacks as rich progress bars on stderr (hidden when not a tty)."""

    def __init__(self, enabled: bool, plain: bool = False) -> None:
        self.progress = _LiveProgress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            PerMinuteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not enabled,
            speed_estimate_period=RATE_WINDOW_S,  # rich's 30 s holds no two items of a slow stage
        )
        self.tasks: dict[str, Any] = {}
        # Without bars (not a terminal), long runs may still log a line at every tenth of a stage, and at least
        # once a minute while work moves (a tenth of a 1,000-item benchmark can be half an hour).
        self.plain = plain and not enabled
        self.logged: dict[str, tuple[int, int, float]] = {}  # stage -> (tenth, done, clock) of the last line
        self.points: dict[str, deque[tuple[float, int]]] = {}  # stage -> (clock, done) over the rate's window

    def __enter__(self) -> ProgressUI:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        points = self.points.setdefault(stage, deque())
        points.append((now, done))
        while len(points) > 2 and now - points[1][0] >= RATE_WINDOW_S:  # keep one point at the window's start
            points.popleft()
        since, first = points[0]
        if self.plain and total:
            tenth = done * 10 // total
            last_tenth, last_done, last_clock = self.logged.get(stage, (-1, -1, now))
            if tenth > last_tenth or (done > last_done and now - last_clock >= PLAIN_LOG_EVERY_S):
                self.logged[stage] = (tenth, done, now)
                line = f"{STAGE_LABELS.get(stage, stage)}: {done}/{total}"
                if done > first and now > since:
                    # The rate counts only this run's recent work (a resumed run starts with work already done).
                    per_minute = (done - first) / (now - since) * 60
                    left = "" if done >= total else f", ~{_duration((total - done) / per_minute * 60)} left"
                    line += f" ({per_minute:,.1f}/min{left})"
                err.print(line)
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(STAGE_LABELS.get(stage, stage), total=total or None)
        self.progress.update(self.tasks[stage], completed=done, total=total or None)

    def status(self, message: str) -> None:
        if not self.progress.disable:
            self.progress.console.print(f"[dim]{escape(message)}[/]", markup=True)

    @contextmanager
    def streaming(self, wanted: bool = True) -> Iterator[None]:
        """Within the block, show below the bars the first candidate of each sampling call as it is written (its
        last lines), when the bars show and `wanted` (the caller's output is a terminal, not JSON). The bars are
        transient: what was shown goes with them, and the ranked result is printed in its place."""
        if self.progress.disable or not wanted:
            yield
            return
        with streaming(self._show_streamed):
            try:
                yield
            finally:
                self.progress.streamed = ""

    def _show_streamed(self, call: int, text: str) -> None:
        self.progress.streamed = last_lines(shown_code(text))


def show_progress(json_output: bool) -> bool:
    return err.is_terminal and not json_output and not os.environ.get("CI")


class _WarningHandler(logging.Handler):
    """The library's warnings (logger "assistant") as `warning: ...` lines on stderr; one about a setting (logged
    with `extra={"setting": ..., "values": ...}`, as an error names it) said with its flag, as errors are."""

    def emit(self, record: logging.LogRecord) -> None:
        from assistant.ui.errors import said_line  # the library's words for a setting, as flags

        message = said_line(record.getMessage(), getattr(record, "setting", None), getattr(record, "values", {}))
        err.print(f"[yellow]warning:[/] {escape(message)}", markup=True)


def setup_logging() -> None:
    """Show the library's warnings to the user (once per process)."""
    logger = logging.getLogger("assistant")
    if not any(isinstance(h, _WarningHandler) for h in logger.handlers):
        handler = _WarningHandler(logging.WARNING)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
