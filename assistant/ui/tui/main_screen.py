"""The main screen: requirement and settings on top, demonstrations and candidates in the middle, code and diff below.

The screen owns no rendering: each part is a widget (`widgets/`) that draws itself and posts a Message when the
user acts on it. The screen handles those messages and the key bindings, and is the one place that talks to the
:class:`~assistant.ui.session.Session`. Long work (model load, indexing, generation, tests) runs in a worker
thread with a progress bar; Escape cancels it at the next token. Errors become notifications.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import get_current_worker

from assistant.backends import streaming
from assistant.core.candidates import cut_off_note
from assistant.core.generation import ONLY_REWRITES, GenerateResult
from assistant.core.rank import ran_on_none
from assistant.core.retrieve import Hit
from assistant.errors import AssistError, Cancelled
from assistant.progress import Progress
from assistant.ui.session import Session
from assistant.ui.stream import Throttled
from assistant.ui.tui.saved import changed_keys, form_settings, save_user_settings
from assistant.ui.tui.screens import ConfirmScreen, FilePicker, HistoryScreen, SettingsScreen, TestsEditor
from assistant.ui.tui.widgets import (
    CandidateTable,
    CandidateView,
    DemonstrationList,
    InfoPanel,
    RequirementBox,
    StatusBar,
)

log = logging.getLogger("assistant.ui.tui")

TALL = 40  # rows from which the lists get more room


def none_left(result: GenerateResult, stubs: Collection[str] = ()) -> str:
    """Why a request left no candidate, and what to do in the TUI: every one only rewrote the file's own
    definitions (named; a stub among them pointed to f3), or none parsed."""
    if ONLY_REWRITES not in result.dropped:
        return "No candidate parsed: try a higher n, more tokens, or rephrase (ctrl+o)."
    names = result.rewrote[:3]
    hint = (
        f"No candidate left: each only rewrote {', '.join(names) or 'definitions the file has'}, which the file has "
        "already. To let one change it, allow rewriting it (f4)."
    )
    stub = next((name for name in names if name in stubs), None)
    return hint + (f" {stub} is a stub: to fill it, pick it (f3)." if stub is not None else "")


class MainScreen(Screen[None]):
    """Ask, look at what was retrieved, compare candidates, read diffs, apply, undo, ask again."""

    # The footer's order: at 80 columns what comes after Zoom is cut (Log is also in the ctrl+p palette).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "app.quit", "Quit", priority=True),  # first: the key table always says how to leave
        Binding("ctrl+g", "generate", "Generate", priority=True),
        Binding("ctrl+n", "resample", "Retry", priority=True),  # "Retry": 80 columns hold Quit to Zoom
        Binding("ctrl+s", "apply", "Apply", priority=True),
        Binding("ctrl+r", "undo", "Undo", priority=True),
        Binding("ctrl+t", "tests", "Test", priority=True),
        Binding("ctrl+f", "pick_file", "File", priority=True),
        Binding("ctrl+o", "settings", "Setup", priority=True),
        Binding("f11", "zoom", "Zoom"),
        Binding("ctrl+l", "history", "Log", priority=True),
        Binding("f2", "copy", "Copy"),
        Binding("f3", "pick_stub", "Stub", show=False),  # also in the ctrl+p palette: "Fill a stub"
        Binding("f4", "pick_rewrite", "Rewrite", show=False),  # in the palette: "Allow rewriting a definition"
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, session: Session, target: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.target = target
        self.function: str | None = None  # the stub of the target file to fill (f3), if any
        # The target file's definitions the next requests' candidates may rewrite (f4); others they re-type are
        # left out of their edits.
        self.may_rewrite: list[str] = []
        self.tests: list[str] = []
        # The request the tests last ranked (requirement, target, stub): another request does not run them unless
        # the user keeps them (saves them again with ctrl+t).
        self.tests_for: tuple[str, str | None, str | None] | None = None
        self.set_aside: list[str] = []  # the tests last set aside: ctrl+t offers them again
        self.hits: list[Hit] = []
        self.hits_for = ""  # the query the demonstrations were retrieved for
        self.chosen: list[Hit] = []  # the demonstrations switched on (DemonstrationList.Toggled)
        self.selected = 0  # the candidate shown (CandidateTable.Highlighted)
        self.busy: str | None = None

    # -- layout: the screen's own children -------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            yield RequirementBox(self.session.requirements(), id="requirement")
            yield InfoPanel(id="info")
        with Horizontal(id="lists"):
            yield DemonstrationList(id="demos")
            yield CandidateTable(id="candidates")
        yield CandidateView(id="views")
        yield StatusBar(id="status")
        yield Footer(compact=True, show_command_palette=False)

    @property
    def requirement_box(self) -> RequirementBox:
        return self.query_one(RequirementBox)

    @property
    def info(self) -> InfoPanel:
        return self.query_one(InfoPanel)

    @property
    def demonstrations(self) -> DemonstrationList:
        return self.query_one(DemonstrationList)

    @property
    def candidates(self) -> CandidateTable:
        return self.query_one(CandidateTable)

    @property
    def view(self) -> CandidateView:
        return self.query_one(CandidateView)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    def on_mount(self) -> None:
        self.show_info()
        self.show_result()
        self.requirement_box.focus()
        self.run_job("Loading models", self.session.load, lambda _: self.loaded())

    def on_resize(self) -> None:
        self.set_class(self.size.height >= TALL, "tall")

    def loaded(self) -> None:
        self.show_info()
        self.set_message(f"Ready: {self.session.source_label}")

    # -- what the widgets show ---------------------------------------------------------------------------------

    def show_info(self) -> None:
        options = self.session.options
        result = self.session.state.result
        self.info.show(
            target=self.target,
            function=self.function,
            model=self.session.backend_label,
            retriever=self.session.retriever_label,
            ranker=result.rankers[0] if result is not None else options.ranker,
            n=options.n,
            k=options.k_for(self.function is not None),
            tests=len(self.tests),
            rewrite=self.may_rewrite,
        )

    def show_result(self) -> None:
        result = self.session.state.result
        if result is not None and result.candidates:
            self.selected = min(self.selected, len(result.candidates) - 1)
        self.candidates.show(result, self.selected)
        self.show_candidate()

    def show_candidate(self) -> None:
        result = self.session.state.result
        if result is None:
            self.view.hint("Write what the code should do above, then press ctrl+g.")
        elif not result.candidates:
            self.view.hint(none_left(result, self._stubs() if result.rewrote else ()))
        else:
            edit = result.edits[self.selected] if self.selected < len(result.edits) else None
            item = result.candidates[self.selected]
            self.view.show(item, self.selected, edit, self.session.state.function, result.rankers)

    def set_message(self, message: str) -> None:
        self.status.say(message)

    # -- what the widgets post -----------------------------------------------------------------------------------

    @on(CandidateTable.Highlighted)
    def candidate_highlighted(self, event: CandidateTable.Highlighted) -> None:
        result = self.session.state.result
        if result is not None and event.position < len(result.candidates):
            self.selected = event.position
            self.show_candidate()

    @on(DemonstrationList.Toggled)
    def demonstrations_toggled(self, event: DemonstrationList.Toggled) -> None:
        self.chosen = event.chosen

    # -- jobs ----------------------------------------------------------------------------------------------------

    def run_job(self, label: str, job: Callable[..., Any], done: Callable[[Any], None]) -> None:
        """Run `job(progress)` in a worker thread; `done(value)` runs back on the UI thread."""
        if self.busy:
            self.app.notify(f"{self.busy} is still running; press Escape to cancel it", severity="warning")
            return
        self.busy = label
        self.status.working(label)
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
                call(self.status.working, label, stage, step, total)

        try:
            value = job(progress)
        except Cancelled:
            # Said on the status line too: "Cancelling …" is not a progress message, so `done` would keep it.
            call(self.set_message, f"{label} cancelled")
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

    def _job_finished(self) -> None:
        self.busy = None
        self.status.done()

    def action_cancel(self) -> None:
        if self.busy:
            self.workers.cancel_group(self, "job")
            self.set_message(f"Cancelling {self.busy}…")
        elif self.maximized is not None:
            self.minimize()

    # -- actions -------------------------------------------------------------------------------------------------

    def action_generate(self) -> None:
        requirement = self.requirement_box.requirement
        if not requirement and not self.function:
            self.app.notify("Write a requirement first: what should the code do?", severity="warning")
            return
        function = self.function
        target = self.target
        rewrite = list(self.may_rewrite)
        if self.tests and self.tests_for not in (None, (requirement, target, function)):
            # Typed for an earlier request: they would rank this one by tests it was never meant to pass.
            self.app.notify(
                f"The {len(self.tests)} tests typed for an earlier request are set aside; ctrl+t to keep them for "
                "this one",
                severity="warning",
            )
            self.set_aside, self.tests = self.tests, []
            self.show_info()
        self.tests_for = (requirement, target, function) if self.tests else None
        tests = list(self.tests)
        try:
            query = self.session.query(requirement, target, function)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        demonstrations = list(self.chosen) if query == self.hits_for else None

        def job(progress: Progress) -> GenerateResult:
            hits = demonstrations
            if hits is None:
                hits = self.session.retrieve(query, target, progress, function)
                self.app.call_from_thread(self.retrieved, query, hits)
            with self.streamed():
                return self.session.generate(
                    requirement,
                    target=target,
                    tests=tests,
                    demonstrations=hits,
                    function=function,
                    replace=rewrite,
                    progress=progress,
                )

        if requirement:
            self.requirement_box.remember(requirement)
        self.run_job("Generating", job, self.generated)

    @contextmanager
    def streamed(self) -> Iterator[None]:
        """Within the block (a worker thread's), the code pane shows the first candidate as it is written, at most
        ten updates a second (each one a hop to the UI thread)."""
        shown = Throttled(lambda call, text: self.app.call_from_thread(self.view.stream, call, text))
        try:
            with streaming(shown):
                yield
        except BaseException:  # cancelled or failed: the pane shows the last result again, not a partial row
            with suppress(RuntimeError):  # the app has closed: nothing to show
                self.app.call_from_thread(self.show_candidate)
            raise

    def retrieved(self, query: str, hits: list[Hit]) -> None:
        self.hits, self.hits_for, self.chosen = hits, query, list(hits)
        self.demonstrations.show(hits)

    def generated(self, result: GenerateResult) -> None:
        self.selected = 0
        self.show_result()
        self.show_info()
        seconds = sum(result.timings.values())
        cut = f"; {len(result.cut_off)} cut off at {result.max_new_tokens} tokens" if result.cut_off else ""
        cut += f"; {result.redrawn} redrawn after writing nothing" if result.redrawn else ""
        state = self.session.state
        tests = f"ranked by {'+'.join(result.rankers)}, tests: {state.tests_label()}"
        self.set_message(
            f"{len(result.candidates)} candidates from {result.samples} samples in {seconds:.1f} s "
            f"({result.model}){cut}; {tests}; ↑↓ in the table to compare, ctrl+s applies"
        )
        if result.cut_off:
            note = cut_off_note(
                len(result.cut_off),
                result.samples,
                result.max_new_tokens,
                sum(c.repeating for c in result.cut_off),
                more_room="raise max tokens in settings (ctrl+o)",
                sample_instead="raise the temperature and the candidates in settings (ctrl+o)",
            )
            self.app.notify(note, severity="warning")
        why = ran_on_none(result.candidates, "agree") if "agree" in result.rankers else None
        if why:  # its module does not import here: agree told no candidate apart
            self.app.notify(f"agree ran its tests on no candidate: {why}", severity="warning", timeout=10)
        if result.candidates:
            self.candidates.focus()

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

    def _resample_job(self, position: int, progress: Progress) -> GenerateResult:
        return self.session.resample(position, progress)

    def resampled(self, position: int) -> None:
        self.show_result()
        self.set_message(f"Candidate #{position + 1} resampled and the list re-ranked")

    def action_apply(self) -> None:
        if not self._need_candidate():
            return
        position = self.selected
        try:
            failed = self.session.may_apply(position)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        if failed is None:
            self._confirm_unsaved(position, force=False)
            return

        def insisted(yes: bool | None) -> None:
            if yes:
                self._confirm_unsaved(position, force=True)
            else:  # the verdict is the last thing said
                self.set_message(f"Nothing written: {failed}")

        self.app.push_screen(ConfirmScreen(f"{failed}.\nWrite it anyway? (ctrl+r undoes it)"), insisted)

    def _confirm_unsaved(self, position: int, force: bool) -> None:
        try:
            reason = self.session.apply_needs_confirmation(position)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        if reason is None:
            self._apply(position, confirmed=False, force=force)
            return
        path = self.session.edit(position).display_path

        def answered(yes: bool | None) -> None:
            if yes:
                self._apply(position, confirmed=True, force=force)

        self.app.push_screen(ConfirmScreen(f"{path}: {reason}.\nApply anyway? (ctrl+r undoes it)"), answered)

    def _apply(self, position: int, confirmed: bool, force: bool = False) -> None:
        try:
            applied = self.session.apply(position, confirmed=confirmed, force=force)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            self.set_message(str(exc))
            return
        self.show_result()
        untested = "" if self.session.state.tested else "; no tests checked it (ctrl+t adds some)"
        self.set_message(f"Applied candidate #{position + 1} to {applied.display_path}{untested}; ctrl+r undoes it")
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
            self.tests, self.set_aside = tests, []
            self.tests_for = None  # saved just now: they rank the next request, whatever it is
            self.show_info()
            if tests and self.session.state.result is not None and self.session.state.result.candidates:
                position = self.selected
                self.run_job("Running tests", partial(self._tests_job, position, tests), self.tested)

        self.app.push_screen(TestsEditor(self.tests or self.set_aside), edited)

    def _tests_job(self, position: int, tests: list[str], progress: Progress) -> Any:
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
            self.retarget(name or None)
            self.set_message(f"Target: {name}; ctrl+g generates for it" if name else "No target file")

        self.app.push_screen(FilePicker(self.session.tracked_files()), picked)

    def retarget(self, target: str | None) -> None:
        """Make `target` the target file; what was picked in another one is dropped."""
        if target != self.target:
            self.hits_for = ""  # demonstrations are retrieved again, without the new target's own code
            self.function = None  # a stub belongs to the file it was picked in
            self.may_rewrite = []  # and so do the definitions that may be rewritten
        self.target = target
        self.show_info()

    def _stubs(self) -> list[str]:
        """The target file's stubs (none without a target, or where it cannot be read)."""
        if not self.target:
            return []
        try:
            return self.session.stubs(self.target)
        except AssistError:
            return []

    def action_pick_stub(self) -> None:
        """Pick a stub of the target file to fill (fuzzy, like the file picker); its docstring is the requirement.
        With no target file yet, every stub of the repo is offered, and picking one makes its file the target."""
        if not self.target:
            if self.session.root is None:
                self.app.notify("Pick the target file first (ctrl+f); then f3 lists its stubs", severity="warning")
                return
            self.run_job("Finding stubs", self.session.repo_stubs, self._pick_repo_stub)
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
            if name is not None:
                self._fill(name or None)

        self.app.push_screen(
            FilePicker(
                stubs,
                label="Stub to fill (type to filter, Enter to pick, Escape to cancel)",
                placeholder="function or Class.method",
                none_label="(no stub: write new code)",
                allow_new=False,
            ),
            picked,
        )

    def _pick_repo_stub(self, found: list[tuple[str, str]]) -> None:
        """Offer the repo's stubs (`found`: file, name) as `name  (file)`; picking one targets its file and fills it."""
        if not found:
            message = "This repo has no stubs: write `def name(...):`, a docstring and `...` first (ctrl+f: a file)"
            self.app.notify(message, severity="warning")
            return
        shown = {f"{name}  ({file})": (file, name) for file, name in found}

        def picked(choice: str | None) -> None:
            if not choice:
                return
            file, name = shown[choice]
            try:
                self.session.check_target(file)
            except AssistError as exc:
                self.app.notify(str(exc), severity="error")
                return
            self.retarget(file)
            self._fill(name)

        label = "Stub to fill, from the whole repo (type to filter, Enter to pick, Escape to cancel)"
        hint, none = "function, Class.method or file", "(none: write new code)"
        picker = FilePicker(list(shown), label=label, placeholder=hint, none_label=none, allow_new=False)
        self.app.push_screen(picker, picked)

    def _fill(self, name: str | None) -> None:
        """Fill the stub `name` of the target file with the next request (None: write new code instead)."""
        self.function = name
        self.hits_for = ""
        message = f"Filling {name}: ctrl+g writes its body" if name else "Not filling a stub"
        if name and self.may_rewrite:  # a fill rewrites the stub's body and nothing else
            self.may_rewrite = []
            message += "; nothing else may be rewritten"
        self.requirement_box.filling(self.function)
        self.show_info()
        self.set_message(message)

    def action_pick_rewrite(self) -> None:
        """Pick a definition of the target file (function, class or `Class.method`) that the next requests'
        candidates may rewrite, or take it back (picked again); the others they re-type are left out of their
        edits, as `generate --replace NAME` says on the command line. "(none)" takes them all back."""
        if not self.target:
            self.app.notify("Pick the target file first (ctrl+f); then f4 lists its definitions", severity="warning")
            return
        if self.function:
            self.app.notify(
                f"Filling {self.function} rewrites its body only; f3 → (no stub) first to rewrite other definitions",
                severity="warning",
            )
            return
        try:
            names = self.session.definitions(self.target)
        except AssistError as exc:
            self.app.notify(str(exc), severity="error")
            return
        if not names and not self.may_rewrite:
            self.app.notify(f"{self.target} defines no functions or classes: nothing to rewrite", severity="warning")
            return

        def picked(name: str | None) -> None:
            if name is None:
                return
            if not name:
                self.may_rewrite = []
            elif name in self.may_rewrite:
                self.may_rewrite.remove(name)
            else:
                self.may_rewrite.append(name)
            self.show_info()
            if self.may_rewrite:
                self.set_message(f"May rewrite: {', '.join(self.may_rewrite)}; f4 again takes one back")
            else:
                self.set_message("May rewrite nothing: candidates' redefinitions of the file's code are left out")

        self.app.push_screen(
            FilePicker(
                names,
                label="May rewrite (type to filter, Enter toggles, Escape to cancel)",
                placeholder="function, Class or Class.method",
                none_label="(none: rewrite nothing)",
                allow_new=False,
                marked=self.may_rewrite,
            ),
            picked,
        )

    def action_settings(self) -> None:
        settings = self.session.settings

        def saved(values: dict[str, Any] | None) -> None:
            if values is None:
                return
            # What the dialog does not show (top-p, seed) stays as the session had it.
            options = replace(
                self.session.options,
                retriever=values["retriever"],
                ranker=values["ranker"],
                n=values["n"],
                k=values["k"],
                temperature=values["temperature"],
                max_new_tokens=values["max_new_tokens"],
                apis=values["apis"],
                redraw=values["redraw"],
                fragments=values["fragments"],
                own_file=values["own_file"],
            )
            before = self.session.options
            changed = changed_keys(self.session.settings, form_settings(values))  # against the settings shown
            try:
                self.session.configure(options, values["backend"], values["model"], values["base_url"])
            except AssistError as exc:
                self.app.notify(str(exc), title="Settings not saved", severity="error")
                return
            try:
                if changed:  # what the user changed holds in the next session too
                    where = save_user_settings(changed)
                    self.app.notify(f"Saved {', '.join(sorted(changed))} to {where}")
            except (AssistError, OSError) as exc:  # this session has them all the same
                self.app.notify(str(exc), title="Settings not kept for the next session", severity="warning")
            retrieval = ("retriever", "k", "own_file", "fragments")
            if any(getattr(before, name) != getattr(options, name) for name in retrieval):
                self.hits_for = ""  # the demonstrations shown were retrieved otherwise: the next generate retrieves
            self.show_info()
            self.show_result()
            self.run_job("Loading models", self.session.load, lambda _: self.loaded())

        running = self.session.pipeline.loaded_backend
        local = running is not None and settings.backend == "local"  # an engine of the local backend runs it
        engine = getattr(running, "description", running.name) if local else None
        self.app.push_screen(
            SettingsScreen(
                self.session.options, settings.backend, settings.model, settings["openai.base_url"], engine=engine
            ),
            saved,
        )

    def action_history(self) -> None:
        def chosen(entry: dict[str, Any] | None) -> None:
            if entry is None:
                return
            self.requirement_box.recall(str(entry.get("requirement", "")))
            if entry.get("target"):
                self.retarget(str(entry["target"]))
            self.set_message("Loaded from history; ctrl+g generates again")

        self.app.push_screen(HistoryScreen(self.session.history()), chosen)

    def action_zoom(self) -> None:
        """Maximize the candidate's code (or the diff, when it has the focus), or give the room back: at 80x24
        the code pane has a few lines, zoomed it has the whole screen, and it keeps the focus to scroll."""
        if self.maximized is not None:
            self.minimize()
            return
        pane = self.focused if self.focused is not None and self.focused.id == "diff-pane" else None
        pane = pane or self.query_one("#code-pane")
        pane.focus()
        self.maximize(pane)

    def action_reindex(self) -> None:
        self.run_job("Indexing the repo", self.session.reindex, self._reindexed)

    def _reindexed(self, summary: str) -> None:
        self.hits_for = ""
        self.loaded()
        self.app.notify(summary)
