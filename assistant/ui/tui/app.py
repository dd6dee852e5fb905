"""`assist tui`: ask, look at what was retrieved, compare candidates, read diffs, apply, undo, ask again.

The UI drives a :class:`~assistant.ui.session.Session` (the library API); it never shells out to the CLI.
Long work (model load, indexing, generation, tests) runs in a worker thread with a progress bar;
Escape cancels it at the next token. Errors become notifications.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, SelectionList, Static, TextArea
from textual.widgets.selection_list import Selection
from textual.worker import get_current_worker

from assistant.core.generation import GenerateResult
from assistant.core.retrieve import Hit
from assistant.errors import AssistError, Cancelled
from assistant.ui.console import STAGE_LABELS
from assistant.ui.session import Options, Session
from assistant.ui.tui.screens import ConfirmScreen, FilePicker, HistoryScreen, SettingsScreen, TestsEditor

log = logging.getLogger("assistant.ui.tui")

WIDE = 140  # columns from which code and diff sit side by side
TALL = 40  # rows from which the lists get more room
SYNTAX_THEME = "ansi_dark"  # the terminal's own palette; Textual turns it monochrome under NO_COLOR


class RequirementBox(TextArea):
    """The requirement: multi-line; Up on the first line and Down on the last walk the repo's history."""

    def __init__(self, past: list[str], **kwargs: Any) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, **kwargs)
        self.past = past
        self.position = -1  # -1: the user's own draft
        self.draft = ""

    def remember(self, requirement: str) -> None:
        self.past[:] = [requirement, *(h for h in self.past if h != requirement)]
        self.position = -1

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.position + 1 < len(self.past):
            if self.position == -1:
                self.draft = self.text
            self.position += 1
            self.load_text(self.past[self.position])
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == self.document.line_count - 1 and self.position >= 0:
            self.position -= 1
            self.load_text(self.draft if self.position == -1 else self.past[self.position])
            self.move_cursor(self.document.end)
            return
        super().action_cursor_down(select)


class MainScreen(Screen[None]):
    """Requirement and settings on top, demonstrations and candidates in the middle, code and diff below."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+g", "generate", "Generate", priority=True),
        Binding("ctrl+n", "resample", "Resample", priority=True),
        Binding("ctrl+s", "apply", "Apply", priority=True),
        Binding("ctrl+r", "undo", "Undo", priority=True),
        Binding("ctrl+t", "tests", "Test", priority=True),
        Binding("ctrl+f", "pick_file", "File", priority=True),
        Binding("ctrl+o", "settings", "Setup", priority=True),
        Binding("ctrl+l", "history", "Log", priority=True),
        Binding("f2", "copy", "Copy"),
        Binding("f11", "zoom", "Zoom", show=False),
        Binding("f3", "pick_stub", "Stub", show=False),  # also in the ctrl+p palette: "Fill a stub"
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, session: Session, target: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.target = target
        self.function: str | None = None  # the stub of the target file to fill (f3), if any
        self.tests: list[str] = []
        self.hits: list[Hit] = []
        self.hits_for = ""  # the requirement the demonstrations were retrieved for
        self.selected = 0
        self.busy: str | None = None

    # -- layout ------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            yield RequirementBox(self.session.requirements(), id="requirement")
            yield Static(id="info")
        with Horizontal(id="lists"):
            yield SelectionList[int](id="demos")
            yield DataTable(id="candidates", cursor_type="row", zebra_stripes=True)
        with Container(id="views"):
            with VerticalScroll(id="code-pane"):
                yield Static(id="code")
            with VerticalScroll(id="diff-pane"):
                yield Static(id="diff")
        with Horizontal(id="status"):
            yield Static("Ready", id="message")
            yield ProgressBar(id="progress", show_eta=False)
        yield Footer(compact=True, show_command_palette=False)  # 80 columns hold every binding

    def on_mount(self) -> None:
        box = self.query_one("#requirement", RequirementBox)
        box.border_title = "Requirement"
        box.border_subtitle = "↑↓ history"
        self.query_one("#demos").border_title = "Demonstrations"
        self.query_one("#candidates").border_title = "Candidates"
        self.query_one("#code-pane").border_title = "Code"
        self.query_one("#diff-pane").border_title = "Diff"
        self.query_one("#progress", ProgressBar).display = False
        self.show_info()
        self.show_result()
        box.focus()
        self.run_job("Loading models", self.session.load, lambda _: self.loaded())

    def on_resize(self) -> None:
        self.query_one("#views").set_class(self.size.width >= WIDE, "wide")
        self.set_class(self.size.height >= TALL, "tall")

    def loaded(self) -> None:
        self.show_info()
        self.set_message(f"Ready: {self.session.source_label}")

    # -- rendering ---------------------------------------------------------------------------------------

    def show_info(self) -> None:
        options = self.session.options
        tests = f"{len(self.tests)} test{'s' if len(self.tests) != 1 else ''}" if self.tests else "no tests"
        result = self.session.state.result
        ranker = result.rankers[0] if result is not None else options.ranker
        lines = [
            ("file ", (self.target or "(none: ctrl+f)") + (f" → fill {self.function}" if self.function else "")),
            ("model", self.session.backend_label),
            ("pick ", f"{self.session.retriever_label} · {ranker} · n={options.n} k={options.k} · {tests}"),
        ]
        text = Text()
        for number, (label, value) in enumerate(lines):
            text.append(label + " ", style="bold")
            text.append(value)
            if number < len(lines) - 1:
                text.append("\n")
        info = self.query_one("#info", Static)
        info.update(text)

    def show_demonstrations(self) -> None:
        demos = self.query_one("#demos", SelectionList)
        demos.clear_options()
        for number, hit in enumerate(self.hits):
            name = hit.example.name or hit.example.requirement[:40]
            prompt = Text.assemble(
                (f"{hit.example.source}", "bold"), f"  {name}  ", (f"{hit.retriever} {hit.score:.3f}", "dim")
            )
            demos.add_option(Selection(prompt, number, True))
        self.update_demo_title()

    def update_demo_title(self) -> None:
        demos = self.query_one("#demos", SelectionList)
        on = len(demos.selected)
        suffix = f" ({on} of {len(self.hits)} on; space toggles)" if self.hits else " (none: zero-shot)"
        demos.border_title = "Demonstrations" + (suffix if self.hits_for else "")

    def show_result(self) -> None:
        result = self.session.state.result
        table = self.query_one("#candidates", DataTable)
        table.clear(columns=True)
        if result is None:
            table.border_title = "Candidates"
            self.show_candidate()
            return
        columns = list(result.rankers)
        columns += sorted({name for item in result.candidates for name in item.scores} - set(columns))
        table.add_column("#", key="rank")
        for name in columns:
            table.add_column(name, key=name)
        table.add_column("lines", key="lines")
        for number, item in enumerate(result.candidates):
            cells: list[Any] = [str(number + 1)]
            for name in columns:
                score = item.scores.get(name)
                cells.append(format_score(name, score.value) if score is not None else "–")
            cells.append(str(len(item.candidate.code.splitlines())))
            table.add_row(*cells, key=str(number))
        dropped = ", ".join(f"{count} {why}" for why, count in result.dropped.items())
        table.border_title = f"Candidates: {len(result.candidates)} of {result.samples}, by {result.rankers[0]}" + (
            f" (dropped {dropped})" if dropped else ""
        )
        if result.candidates:
            self.selected = min(self.selected, len(result.candidates) - 1)
            table.move_cursor(row=self.selected)
        self.show_candidate()

    def show_candidate(self) -> None:
        result = self.session.state.result
        code = self.query_one("#code", Static)
        diff = self.query_one("#diff", Static)
        if result is None or not result.candidates:
            code.update(
                "Write what the code should do above, then press ctrl+g."
                if result is None
                else "No candidate parsed: try a higher n, more tokens, or rephrase (ctrl+o)."
            )
            diff.update(
                f"The diff against {self.target} appears here."
                if self.target
                else "Pick a target file with ctrl+f to see the diff that puts the code there."
            )
            self.query_one("#code-pane").border_title = "Code"
            self.query_one("#diff-pane").border_title = "Diff"
            return
        item = result.candidates[self.selected]
        code.update(Syntax(item.candidate.code, "python", theme=SYNTAX_THEME, background_color="default"))
        why = "; ".join(score.why for score in item.scores.values())
        self.query_one("#code-pane").border_title = f"Code #{self.selected + 1}"
        self.query_one("#code-pane").border_subtitle = why[:120]
        edit = result.edits[self.selected] if self.selected < len(result.edits) else None
        if edit is None and self.session.state.function:
            diff.update(f"{self.session.state.function} is filled now (ctrl+r undoes the apply).")
            self.query_one("#diff-pane").border_title = "Diff"
        elif edit is None:
            diff.update("No target file: press ctrl+f to pick one, then ctrl+g.")
            self.query_one("#diff-pane").border_title = "Diff"
        elif not edit.diff:
            diff.update(f"{edit.display_path} already has this candidate (ctrl+r undoes an apply).")
            self.query_one("#diff-pane").border_title = f"Diff {edit.display_path}: no change"
        else:
            diff.update(Syntax(edit.diff, "diff", theme=SYNTAX_THEME, background_color="default"))
            self.query_one("#diff-pane").border_title = f"Diff {edit.display_path}: {', '.join(edit.actions)}"

    def set_message(self, message: str) -> None:
        self.query_one("#message", Static).update(Text(message))

    # -- jobs ----------------------------------------------------------------------------------------------

    def run_job(self, label: str, job: Callable[..., Any], done: Callable[[Any], None]) -> None:
        """Run `job(progress)` in a worker thread; `done(value)` runs back on the UI thread."""
        if self.busy:
            self.app.notify(f"{self.busy} is still running; press Escape to cancel it", severity="warning")
            return
        self.busy = label
        self.set_message(f"{label}…  (Escape cancels)")
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True
        self.run_worker(partial(self._job, label, job, done), thread=True, group="job", name=label)

    def _job(self, label: str, job: Callable[..., Any], done: Callable[[Any], None]) -> None:
        worker = get_current_worker()
        call = self.app.call_from_thread

        posted = [0.0]

        def progress(stage: str, step: int, total: int) -> None:
            if worker.is_cancelled:
                raise Cancelled(f"{label} cancelled")
            now = time.monotonic()
            if now - posted[0] >= 0.1 or step >= total:  # the UI needs no more than ten updates a second
                posted[0] = now
                call(self._progress, label, stage, step, total)

        try:
            value = job(progress)
        except Cancelled:
            call(self.app.notify, f"{label} cancelled", severity="warning")
        except AssistError as exc:
            call(self.app.notify, str(exc), title=label, severity="error", timeout=10)
        except Exception as exc:  # an unexpected failure is shown, not a traceback over the screen
            log.exception("%s failed", label)
            call(self.app.notify, f"{type(exc).__name__}: {exc}", title=f"{label} failed", severity="error")
        else:
            call(done, value)
        finally:
            call(self._job_finished)

    def _progress(self, label: str, stage: str, step: int, total: int) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=total or None, progress=step)
        self.set_message(f"{label}: {STAGE_LABELS.get(stage, stage)}…  (Escape cancels)")

    def _job_finished(self) -> None:
        self.busy = None
        self.query_one("#progress", ProgressBar).display = False
        if str(self.query_one("#message", Static).render()).endswith("(Escape cancels)"):
            self.set_message("Ready")

    def action_cancel(self) -> None:
        if self.busy:
            self.workers.cancel_group(self, "job")
            self.set_message(f"Cancelling {self.busy}…")
        elif self.screen.maximized is not None:
            self.screen.minimize()

    # -- actions -------------------------------------------------------------------------------------------

    def action_generate(self) -> None:
        requirement = self.query_one("#requirement", RequirementBox).text.strip()
        if not requirement and not self.function:
            self.app.notify("Write a requirement first: what should the code do?", severity="warning")
            return
        function = self.function
        try:
            query = self.session.query(requirement, self.target, function)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        demonstrations: list[Hit] | None = None
        if query == self.hits_for:
            chosen = set(self.query_one("#demos", SelectionList).selected)
            demonstrations = [hit for number, hit in enumerate(self.hits) if number in chosen]

        def job(progress: Callable[[str, int, int], None]) -> GenerateResult:
            hits = demonstrations
            if hits is None:
                hits = self.session.retrieve(query, self.target, progress)
                self.app.call_from_thread(self.retrieved, query, hits)
            return self.session.generate(
                requirement,
                target=self.target,
                tests=self.tests,
                demonstrations=hits,
                function=function,
                progress=progress,
            )

        if requirement:
            self.query_one("#requirement", RequirementBox).remember(requirement)
        self.run_job("Generating", job, self.generated)

    def retrieved(self, requirement: str, hits: list[Hit]) -> None:
        self.hits, self.hits_for = hits, requirement
        self.show_demonstrations()

    def generated(self, result: GenerateResult) -> None:
        self.selected = 0
        self.show_result()
        self.show_info()
        seconds = sum(result.timings.values())
        cut = f"; {len(result.cut_off)} cut off at {result.max_new_tokens} tokens" if result.cut_off else ""
        self.set_message(
            f"{len(result.candidates)} candidates from {result.samples} samples in {seconds:.1f} s "
            f"({result.model}){cut}; ↑↓ in the table to compare, ctrl+s applies"
        )
        if result.cut_off:
            self.app.notify(
                f"{len(result.cut_off)} sample(s) ran into the {result.max_new_tokens}-token limit and were left out; "
                "raise max tokens in settings (ctrl+o)",
                severity="warning",
            )
        if result.candidates:
            self.query_one("#candidates", DataTable).focus()

    @on(DataTable.RowHighlighted, "#candidates")
    def candidate_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.session.state.result is not None and event.cursor_row < len(self.session.state.result.candidates):
            self.selected = event.cursor_row
            self.show_candidate()

    @on(SelectionList.SelectedChanged, "#demos")
    def demos_toggled(self) -> None:
        self.update_demo_title()

    def _need_candidate(self) -> bool:
        result = self.session.state.result
        if result is None or not result.candidates:
            self.app.notify("No candidates yet: press ctrl+g to generate", severity="warning")
            return False
        return True

    def action_resample(self) -> None:
        if not self._need_candidate():
            return
        position = self.selected
        self.run_job("Resampling", partial(self._resample_job, position), lambda _: self.resampled(position))

    def _resample_job(self, position: int, progress: Callable[[str, int, int], None]) -> GenerateResult:
        return self.session.resample(position, progress)

    def resampled(self, position: int) -> None:
        self.show_result()
        self.set_message(f"Candidate #{position + 1} resampled and the list re-ranked")

    def action_apply(self) -> None:
        if not self._need_candidate():
            return
        position = self.selected
        try:
            reason = self.session.apply_needs_confirmation(position)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        if reason is None:
            self._apply(position, force=False)
            return
        path = self.session.edit(position).display_path

        def answered(yes: bool | None) -> None:
            if yes:
                self._apply(position, force=True)

        self.app.push_screen(ConfirmScreen(f"{path}: {reason}.\nApply anyway? (ctrl+r undoes it)"), answered)

    def _apply(self, position: int, force: bool) -> None:
        try:
            applied = self.session.apply(position, force=force)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.show_result()
        self.set_message(f"Applied candidate #{position + 1} to {applied.display_path}; ctrl+r undoes it")
        self.app.notify(f"Applied #{position + 1} to {applied.display_path}")

    def action_undo(self) -> None:
        try:
            applied = self.session.undo()
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        self.show_result()
        restored = "removed" if applied.before is None else "restored"
        self.set_message(f"Undone: {applied.display_path} {restored}")
        self.app.notify(f"{applied.display_path} {restored}")

    def action_copy(self) -> None:
        if not self._need_candidate():
            return
        result = self.session.state.result
        assert result is not None
        code = result.candidates[self.selected].candidate.code
        self.app.copy_to_clipboard(code)
        self.app.notify(f"Copied candidate #{self.selected + 1} ({len(code.splitlines())} lines) to the clipboard")

    def action_tests(self) -> None:
        def edited(tests: list[str] | None) -> None:
            if tests is None:
                return
            self.tests = tests
            self.show_info()
            if tests and self.session.state.result is not None and self.session.state.result.candidates:
                position = self.selected
                self.run_job("Running tests", partial(self._tests_job, position, tests), self.tested)

        self.app.push_screen(TestsEditor(self.tests), edited)

    def _tests_job(self, position: int, tests: list[str], progress: Callable[[str, int, int], None]) -> Any:
        progress("exec", 0, 1)
        return position, self.session.run_tests(position, tests)

    def tested(self, value: Any) -> None:
        position, outcome = value
        self.show_result()
        message = f"Candidate #{position + 1}: {outcome.passed}/{outcome.total} tests passed"
        if outcome.status == "failed" and outcome.failed_test:
            message += f"; failed: {outcome.failed_test.strip().splitlines()[0][:60]}"
        elif outcome.status not in ("passed", "failed"):
            message += f"; {outcome.status}" + (f" ({outcome.error_type})" if outcome.error_type else "")
        self.set_message(message)
        self.app.notify(message, severity="information" if outcome.status == "passed" else "warning")

    def action_pick_file(self) -> None:
        def picked(name: str | None) -> None:
            if name is None:
                return
            try:
                self.session.check_target(name or None)
            except AssistError as exc:
                self.app.notify(str(exc), severity="error")
                return
            if (name or None) != self.target:
                self.hits_for = ""  # demonstrations are retrieved again, without the new target's own code
                self.function = None  # a stub belongs to the file it was picked in
            self.target = name or None
            self.show_info()
            self.set_message(f"Target: {name}; ctrl+g generates for it" if name else "No target file")

        self.app.push_screen(FilePicker(self.session.tracked_files(), self.target), picked)

    def action_pick_stub(self) -> None:
        """Pick a stub of the target file to fill (fuzzy, like the file picker); its docstring is the requirement."""
        if not self.target:
            self.app.notify("Pick the target file first (ctrl+f); then f3 lists its stubs", severity="warning")
            return
        try:
            stubs = self.session.stubs(self.target)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        if not stubs:
            self.app.notify(
                f"{self.target} has no stubs: write `def name(...):`, a docstring and `...` first", severity="warning"
            )
            return

        def picked(name: str | None) -> None:
            if name is None:
                return
            self.function = name or None
            self.hits_for = ""
            box = self.query_one("#requirement", RequirementBox)
            if self.function:
                box.load_text("")  # empty: the docstring is the requirement (anything typed here is used instead)
                box.border_subtitle = f"empty: {self.function}'s docstring"
            else:
                box.border_subtitle = "↑↓ history"
            self.show_info()
            self.set_message(f"Filling {name}: ctrl+g writes its body" if name else "Not filling a stub")

        self.app.push_screen(
            FilePicker(
                stubs,
                self.function,
                label="Stub to fill (type to filter, Enter to pick, Escape to cancel)",
                placeholder="function or Class.method",
                none_label="(no stub: write new code)",
                allow_new=False,
            ),
            picked,
        )

    def action_settings(self) -> None:
        settings = self.session.settings

        def saved(values: dict[str, Any] | None) -> None:
            if values is None:
                return
            old = self.session.options
            options = Options(
                retriever=values["retriever"],
                ranker=values["ranker"],
                n=values["n"],
                k=values["k"],
                temperature=values["temperature"],
                max_new_tokens=values["max_new_tokens"],
                seed=old.seed,
            )
            try:
                self.session.configure(options, values["backend"], values["model"], values["base_url"])
            except AssistError as exc:
                self.app.notify(str(exc), title="Settings not saved", severity="error")
                return
            self.show_info()
            self.show_result()
            self.run_job("Loading models", self.session.load, lambda _: self.loaded())

        self.app.push_screen(
            SettingsScreen(self.session.options, settings.backend, settings.model, settings["openai.base_url"]), saved
        )

    def action_history(self) -> None:
        def chosen(entry: dict[str, Any] | None) -> None:
            if entry is None:
                return
            box = self.query_one("#requirement", RequirementBox)
            box.load_text(str(entry.get("requirement", "")))
            box.focus()
            if entry.get("target"):
                self.target = str(entry["target"])
                self.show_info()
            self.set_message("Loaded from history; ctrl+g generates again")

        self.app.push_screen(HistoryScreen(self.session.history()), chosen)

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            self.maximize(self.focused)

    def action_reindex(self) -> None:
        self.run_job("Indexing the repo", self.session.reindex, self._reindexed)

    def _reindexed(self, summary: str) -> None:
        self.hits_for = ""
        self.loaded()
        self.app.notify(summary)


def format_score(name: str, value: float) -> str:
    """A ranker's score as the table shows it."""
    if name == "first":
        return f"#{int(-value) + 1}"
    if name in ("exec", "condor"):  # tests passed; p(correct)
        return f"{value:.0%}"
    return f"{value:.3f}"


class AssistApp(App[None]):
    """The `assist tui` application."""

    TITLE = "assist"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True

    def __init__(self, session: Session, target: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.target = target

    def on_mount(self) -> None:
        root = self.session.root or self.session.start
        self.title = f"assist · {root.name}"
        self.push_screen(MainScreen(self.session, self.target))

    def get_system_commands(self, screen: Screen[Any]):  # type: ignore[override]
        yield from super().get_system_commands(screen)
        if isinstance(screen, MainScreen):
            from textual.app import SystemCommand

            yield SystemCommand("Index this repo", "Index (incrementally) and retrieve from it", screen.action_reindex)
            yield SystemCommand("Settings", "Backend, model, retriever, ranker", screen.action_settings)
            yield SystemCommand("History", "Past requirements in this repo", screen.action_history)
            yield SystemCommand(
                "Fill a stub", "Pick a stub of the target file; only its body is written (f3)", screen.action_pick_stub
            )


def run(session: Session, target: str | None = None) -> None:
    """Run the TUI until the user quits."""
    AssistApp(session, target).run()


__all__ = ["AssistApp", "MainScreen", "run"]
