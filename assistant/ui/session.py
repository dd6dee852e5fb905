"""An interactive session over the library API: what the TUI drives, and what its tests call directly.

A :class:`Session` holds the UI state: the last result, the apply/undo stack and the per-repo history; its
:class:`~assistant.pipeline.pipeline.Pipeline` loads the models (once, lazily, thread-safe) and generates.
Every long method takes a `progress(stage, done, total)` callback; a callback that raises
:class:`~assistant.errors.Cancelled` stops the work there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.backends import Backend
from assistant.code.edit import Edit, apply_edit, definition_names, read_target, source_bytes, unstaged_changes
from assistant.code.git import tracked_python_files
from assistant.config import Settings, backend_settings, load_settings
from assistant.core.generation import GenerateResult
from assistant.core.home import ModuleHome, project_python
from assistant.core.rank import Ranked, Score
from assistant.core.repo_tests import RepoTests
from assistant.core.retrieve import Hit, Retriever
from assistant.core.stubs.find import Stub
from assistant.core.target import Target
from assistant.errors import AssistError, UsageError
from assistant.indexing.index import TextEncoder, repo_notes, repo_root
from assistant.indexing.sources import Source
from assistant.paths import REPO_DIR_NAME, atomic_write_bytes, cache_dir, read_regular_file, repo_dir
from assistant.pipeline.options import GenerationOptions
from assistant.pipeline.pipeline import Pipeline, Request, candidates_runnable
from assistant.pipeline.registry import RETRIEVER_CHOICES
from assistant.progress import Progress
from assistant.sandbox import SandboxResult
from assistant.ui.text import counted

__all__ = ["RETRIEVER_CHOICES", "Applied", "Options", "Session", "State", "history_path"]

# What a session generates with; the TUI's settings screen edits these (the pipeline's one set of options).
Options = GenerationOptions
HISTORY_BYTES = 64 * 2**20  # a longer history file is not read back (years of use are a few MB)


def _quiet(stage: str, done: int, total: int) -> None:
    return None


@dataclass(frozen=True)
class Applied:
    """One applied candidate: enough to put the file back exactly as it was."""

    path: Path
    display_path: str
    # Bytes, not text: a file in another coding (a latin-1 cookie) is put back byte for byte.
    before: bytes | None  # None: the file did not exist
    after: bytes
    requirement: str


@dataclass
class State:
    """The session's current work: the last result and the inputs it was made from."""

    result: GenerateResult | None = None
    target: str | None = None  # display path of the target file
    function: str | None = None  # the stub being filled in the target file, if any
    replace: tuple[str, ...] = ()  # the target file's definitions the candidates may rewrite (a plain request)
    tests: list[str] = field(default_factory=list)
    examples: bool = False  # `tests` are the stub's docstring examples (none were typed, the repo has none)
    repo_tests: RepoTests | None = None  # filling a stub: the repo's tests that ran on its candidates
    repo_tests_skipped: UsageError | None = None  # why none ran (None: they ran, or none reach the function)

    @property
    def tested(self) -> bool:
        """Whether the current candidates have tests (typed, or the repo's): then only one that passed may be
        applied (:func:`assistant.core.rank.may_write`)."""
        return bool(self.tests) or self.repo_tests is not None

    def tests_label(self) -> str:
        """Which tests rank the current candidates, in words (what the screen shows)."""
        parts = []
        if self.repo_tests is not None:
            parts.append(f"the repo's tests ({self.repo_tests.describe()})")
        if self.tests:
            parts.append(f"the docstring's {counted(len(self.tests), 'example')}" if self.examples else
                         f"your {counted(len(self.tests), 'test')}")  # fmt: skip
        if parts:
            return " and ".join(parts)
        if self.repo_tests_skipped:
            return f"no tests (the repo's skipped: {self.repo_tests_skipped})"
        return "no tests"


class Session:
    """The UI state of one interactive session (the current result, the apply/undo stack, the history) over a
    :class:`~assistant.pipeline.pipeline.Pipeline`, which loads the models and generates."""

    def __init__(
        self,
        start: str | Path = ".",
        *,
        settings: Settings | None = None,
        options: Options | None = None,
        bank: str | Path | None = None,
        backend: Backend | None = None,
        encoder: TextEncoder | None = None,
        python: str | Path | None = None,
    ) -> None:
        self.start = Path(start).expanduser().resolve()
        if not self.start.is_dir():
            raise UsageError(f"{start} is not a directory")
        # The interpreter with the project's dependencies, for its tests and a stub's candidates (None: found).
        self.python = project_python(self.start, python) if python is not None else None
        self.root: Path | None = None
        with contextlib.suppress(UsageError):  # outside a repo the session still works, on the default bank
            self.root = repo_root(self.start)
        settings = settings or load_settings(start=self.start)
        options = options or GenerationOptions.from_settings(settings)
        self.bank = bank
        self.pipeline = Pipeline(options, settings, start=self.start, bank=bank, backend=backend, encoder=encoder)
        self.state = State()
        self._prepared: tuple[tuple[int, ...] | None, Request] | None = None  # see `prepare`
        self.undo_stack: list[Applied] = []
        self.history_path = history_path(self.root, self.start)

    # -- models (the pipeline's) -------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.pipeline.settings

    @property
    def options(self) -> Options:
        return self.pipeline.options

    @property
    def _backend(self) -> Backend | None:
        return self.pipeline.loaded_backend

    @_backend.setter
    def _backend(self, backend: Backend | None) -> None:
        self.pipeline.loaded_backend = backend

    @property
    def backend_label(self) -> str:
        backend = self.pipeline.loaded_backend
        if backend is not None:
            return f"{backend.name}:{backend.model}"
        return f"{self.settings.backend}:{self.settings.model or 'default'}"

    @property
    def retriever_label(self) -> str:
        if self.options.k == 0:
            return "zero-shot"
        retriever = self.pipeline.loaded_retriever
        if retriever is not None and self.options.retriever == "auto":
            return f"auto→{retriever.name}"
        return self.options.retriever

    @property
    def source_label(self) -> str:
        source = self.pipeline.loaded_source
        return source.description if source is not None else "(index not loaded)"

    def load(self, progress: Progress = _quiet) -> None:
        """Load what generation needs: the index and the retriever (unless k is 0), and the generator."""
        self.pipeline.load(progress)

    def encoder(self) -> TextEncoder:
        return self.pipeline.encoder()

    def source(self, progress: Progress = _quiet) -> Source:
        return self.pipeline.source(progress)

    def retriever(self, progress: Progress = _quiet) -> Retriever:
        return self.pipeline.retriever(progress)

    def backend(self, progress: Progress = _quiet) -> Backend:
        return self.pipeline.backend(progress)

    def configure(
        self,
        options: Options,
        backend: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
    ) -> None:
        """Switch options, and the backend or model; what changed is reloaded on next use."""
        settings = None
        # A form shows the settings in force and sends them back: a value equal to one the settings hold from
        # a file is that file's, not a flag, so the file's layer (and its trust, for the backend now chosen)
        # decides it again; a flag would pass a repo's model to a hosted server unasked.
        held = self.settings.values

        def from_file(key: str, value: str | None) -> bool:
            return value is not None and value == held[key].value and held[key].source != "flag"

        model = None if from_file("model", model) else model
        base_url = None if from_file("openai.base_url", base_url) else base_url
        if (backend, model, base_url) != (None, None, None):
            # The engine chosen at start (--engine, config, env) stays: the settings screen does not change it.
            engine = self.settings["local.engine"]
            settings = backend_settings(backend, model or None, base_url, start=self.start, engine=engine)
        self.pipeline.configure(options, settings)
        if self.state.result is not None:
            self.rerank()

    def reindex(self, progress: Progress = _quiet) -> str:
        """Index the repo (incrementally) and use that index from now on; returns a one-line summary."""
        if self.root is None:
            raise UsageError("not in a git repository; there is no repo to index")
        stats = self.pipeline.reindex(self.root, progress)
        self.pipeline.retriever(progress)
        return (
            f"indexed {self.root.name}: {stats.examples} functions from {stats.files} files "
            f"({stats.embedded} embedded, {stats.reused} reused) in {stats.total_s:.1f} s"
        ) + "".join(f"; {note}" for note in repo_notes(stats))

    # -- target files ------------------------------------------------------------------------------------

    def tracked_files(self) -> list[str]:
        """The repo's tracked Python files, relative to its root (what the target picker offers)."""
        if self.root is None:
            return sorted(str(p.relative_to(self.start)) for p in self.start.glob("*.py"))
        return tracked_python_files(self.root)

    def target_path(self, display: str) -> Path:
        base = self.root or self.start
        path = (base / display).resolve()
        if not path.is_relative_to(base):
            raise UsageError(f"{display} is outside {base}")
        return path

    def check_target(self, display: str | None) -> None:
        """A target assist could not edit is refused now, not after sampling."""
        if display:
            read_target(self.target_path(display))

    def stubs(self, display: str) -> list[str]:
        """The stubs of a target file (qualified names, in file order): what the stub picker offers."""
        from assistant.core.stubs import list_stubs

        return [stub.qualname for stub in list_stubs(read_target(self.target_path(display)), display)]

    def repo_stubs(self, progress: Progress = _quiet) -> list[tuple[str, str]]:
        """Every stub of the repo's Python files, as (file relative to its root, qualified name): what the stub
        picker offers before a target file is picked (none outside a git repo)."""
        if self.root is None:
            return []
        from assistant.core.stubs.find import repo_stubs

        return repo_stubs(self.root, progress)

    def definitions(self, display: str) -> list[str]:
        """The target file's top-level functions and classes and its classes' members (`Class.method`), in file
        order: what a plain request's candidates may be allowed to rewrite (the names `replace` accepts)."""
        return definition_names(Target.read(self.target_path(display)).tree)

    def query(self, requirement: str, target: str | None, function: str | None) -> str:
        """What to retrieve with: the requirement, else (filling a stub) the stub's docstring. Filling one, the
        request is resolved here (its file read, its stub found) for the `retrieve` and `generate` that follow."""
        if not (target and function):
            return requirement
        request = self.prepare(requirement, target, function)
        if requirement.strip() or request.stub is None:
            return requirement
        return request.stub.docstring or ""

    def prepare(
        self, requirement: str, target: str | None, function: str | None, replace: Sequence[str] = ()
    ) -> Request:
        """The request for `requirement` (with a `target` file; filling its stub `function`, or allowed to rewrite
        its definitions `replace`), resolved once: the file read, the stub or the names found
        (:meth:`Request.resolve`). It is kept: the `retrieve` and `generate` that follow for the same target, stub
        and names use it while the file is unchanged, rather than read it again."""
        if function is not None and not target:
            raise UsageError("pick the target file first; the stub to fill is one of its functions")
        path = self.target_path(target) if target else None
        request = Request.resolve(
            requirement, file=path, function=function, replace=replace, repo_tests=False, name=target
        )
        self._prepared = (_file_key(path), request)
        return request

    def _resolved(
        self, requirement: str | None, target: str | None, function: str | None, replace: Sequence[str] = ()
    ) -> Request:
        """The request :meth:`prepare` resolved for this target, stub and names to rewrite if the file is unchanged
        since (and the requirement was given or not as now; None: either), else resolved now."""
        path = self.target_path(target) if target else None
        if self._prepared is not None:
            key, request = self._prepared
            given = bool(request.requirement.strip())
            asked = (function, path, tuple(replace))
            same = (request.function, request.file, request.replace) == asked and key == _file_key(path)
            if same and requirement is None:
                return request
            if same and requirement is not None and given == bool(requirement.strip()):
                return dataclasses.replace(request, requirement=requirement)
        return self.prepare(requirement or "", target, function, replace)

    # -- generation --------------------------------------------------------------------------------------

    def retrieve(
        self, requirement: str, target: str | None = None, progress: Progress = _quiet, function: str | None = None
    ) -> list[Hit]:
        """The demonstrations the current retriever picks for a requirement.

        Filling a stub (`function`) with the `own_file` option (the default), only the stub itself is left out:
        its file's other functions may be demonstrations. Otherwise the target file's own functions are left
        out, since the prompt shows that file already. Filling one with the `fragments` option, there are none: the
        repository's code fragments take their place, retrieved when the prompt is built (as `generate
        --fragments` does).
        """
        if function is not None and self.options.fragments:
            return []
        qualname = None
        if function is not None and target and self.options.own_file:
            stub = self._resolved(None, target, function).stub  # `requirement` is the query here
            qualname = stub.qualname if stub is not None else None
        return self.pipeline.retrieve(requirement, exclude_path=target, progress=progress, function=qualname)

    def generate(
        self,
        requirement: str,
        *,
        target: str | None = None,
        tests: Sequence[str] = (),
        demonstrations: Sequence[Hit] | None = None,
        function: str | None = None,
        replace: Sequence[str] = (),
        progress: Progress = _quiet,
    ) -> GenerateResult:
        """Generate candidates, scored by every available ranker and sorted by the active one.

        With `function` (a stub of `target`), fill that stub: the requirement may be empty (the docstring is
        the requirement), candidates replace only its body, and the token limit is sized to the docstring.
        Otherwise a candidate's redefinitions of what `target` already has are left out of its edit, except those
        `replace` names (functions, classes, `Class.method`: :meth:`definitions`), which it may rewrite."""
        if function is not None and not target:
            raise UsageError("pick the target file first; the stub to fill is one of its functions")
        if not requirement.strip() and function is None:
            raise UsageError("the requirement is empty; say what the code should do")
        request = self._resolved(requirement, target, function, replace)  # refused now, not after sampling
        self._prepared = None  # the next request reads its file again
        self.state.target = target
        self.state.function = function
        self.state.replace = request.replace
        self.state.tests = list(tests)
        if function is not None and self.options.fragments:
            demonstrations = None  # the pipeline retrieves the fragments that take their place
        elif demonstrations is None:
            query = requirement
            if request.stub is not None and not requirement.strip():
                query = request.stub.docstring or ""
            demonstrations = self.retrieve(query, target, progress, function)
        plan = self._repo_tests(request.target, function, request.stub, progress)
        request = dataclasses.replace(
            request,
            tests=tuple(tests),
            demonstrations=demonstrations,
            root=self.root or self.start,
            python=self.python,
            repo_tests=plan,
            repo_tests_skipped=self.state.repo_tests_skipped,
        ).with_example_tests()
        self.state.tests, self.state.examples = list(request.tests), request.examples
        # Repair rounds when there are tests and none passes, on the status line.
        result = self.pipeline.answer(request, progress=progress, every_ranker=True).result
        self.state.result = result
        self.record("generate", requirement=result.requirement, candidates=len(result.candidates))
        return result

    def _repo_tests(
        self, file: Target | None, function: str | None, stub: Stub | None, progress: Progress = _quiet
    ) -> RepoTests | None:
        """The repo's tests for `function` (`stub`: as found in `file`), as `assist generate --function` finds them
        (None: none, or they cannot run here; why is kept in the state). The run that picks or checks them hears
        `progress`, so a cancel stops it."""
        self.state.repo_tests = None
        self.state.repo_tests_skipped = None
        if file is None or function is None or self.root is None or not file.path.is_relative_to(self.root):
            return None
        from assistant.core.repo_tests import repo_tests

        try:
            relative = file.path.relative_to(self.root)
            checked = {"baseline": file.text, "stub": stub, "progress": progress, "python": self.python}
            self.state.repo_tests = repo_tests(self.root, relative, function, **checked)
        except UsageError as exc:
            self.state.repo_tests_skipped = exc
        return self.state.repo_tests

    def resample(self, position: int, progress: Progress = _quiet) -> GenerateResult:
        """Replace the candidate at `position` with a fresh sample."""
        result = self._result()
        if self.state.function is not None:
            raise UsageError("resampling one candidate is not available when filling a stub; generate again")
        target = self.state.target
        request = Request(
            result.requirement,
            file=self.target_path(target) if target else None,
            tests=tuple(self.state.tests),
            root=self.root or self.start,
            replace=self.state.replace,
        )
        updated = self.pipeline.resample(result, position, request, progress=progress)
        self.state.result = updated
        return updated

    def rankers(self) -> list[str]:
        """The active ranker(s) first, then every other ranker that can score the current candidates."""
        result = self._result()
        candidates = [item.candidate for item in result.candidates]
        can_run = candidates_runnable(result.home, whole_programs=result.function is None)
        rankers = self.pipeline.rankers(None, candidates, bool(self.state.tests), every=True, runnable=can_run)
        return [ranker.name for ranker in rankers]

    def rerank(self, progress: Progress = _quiet) -> GenerateResult:
        """Score the current candidates with every available ranker not yet run, and sort by the active one."""
        result = self._result()
        tests, plan = self.state.tests, self.state.repo_tests  # the repo's tests, planned for a stub, still lead
        self.state.result = self.pipeline.rank(result, tests, every_ranker=True, progress=progress, repo_tests=plan)
        return self.state.result

    def run_tests(self, position: int, tests: Sequence[str]) -> SandboxResult:
        """Run the tests against one candidate in the sandbox; its `exec` score is updated to match. Where the
        candidates have a home (their file, in a copy of the project), they run there: the tests may import the
        project, and the module's names resolve."""
        from assistant import sandbox

        result = self._result()
        if not tests:
            raise UsageError("there are no tests to run; add assert statements first")
        self.state.examples = self.state.examples and list(tests) == self.state.tests  # edited: the user's own now
        self.state.tests = list(tests)
        item = self._candidate(position)
        home = result.home or self._home(position)
        if home is not None and item.candidate.sample in home.texts:
            outcome = _run_in_module(home, item.candidate.sample, tests)
        else:
            outcome = sandbox.run(item.candidate.code, tests)
        candidates = list(result.candidates)
        # Only this candidate gets an exec score; the others show none until they are run too.
        candidates[position] = Ranked(item.candidate, {**item.scores, "exec": _exec_score(outcome)})
        self.state.result = dataclasses.replace(result, candidates=candidates)
        return outcome

    def _home(self, position: int) -> ModuleHome | None:
        """Where the candidate at `position` can run when its result has no home yet (a stub ranked by the repo's
        tests, which needed none): its edited file in a copy of the project, if it can run there."""
        from assistant.core.home import module_home

        result = self._result()
        edit = result.edits[position]
        if edit is None:
            return None
        qualname = result.function["function"] if result.function else ""
        texts = {result.candidates[position].candidate.sample: edit.new}
        return module_home(edit.path, qualname, texts, self.python)

    def may_apply(self, position: int) -> str | None:
        """Why the candidate at `position` may not be written without insisting (it did not pass the tests the
        candidates have; with none, it reads a name defined nowhere), or None (:func:`assistant.core.rank.may_write`:
        the rule every door follows)."""
        from assistant.core.rank import TEST_SCORES, may_write, passed_tests
        from assistant.ui.text import reads_undefined, undefined_error

        result = self._result()
        item = self._candidate(position)
        pick = may_write(result.candidates, self.state.tested)
        if not pick.tested and item.candidate.undefined:
            undefined = item.candidate.undefined
            return f"candidate #{position + 1} {reads_undefined(undefined)} ({undefined_error(undefined)} when it runs)"
        if not pick.tested or passed_tests(item):
            return None
        if pick.not_run:  # no fault of the candidate's: the tests never ran (its module does not import here)
            return f"{self.state.tests_label()} ran on no candidate: {pick.not_run}"
        best = "none passed them" if pick.position is None else f"#{pick.position + 1} passed them"
        if not any(name in item.scores for name in TEST_SCORES):  # typed after generating: run on others only
            return f"candidate #{position + 1} was not run on {self.state.tests_label()} (ctrl+t runs them); {best}"
        return f"candidate #{position + 1} did not pass {self.state.tests_label()}; {best}"

    # -- apply and undo ----------------------------------------------------------------------------------

    def edit(self, position: int) -> Edit:
        result = self._result()
        self._candidate(position)
        edit = result.edits[position]
        if edit is None and self.state.function is not None:
            raise UsageError(f"{self.state.function} is no longer a stub (it was filled); generate again")
        if edit is None:
            raise UsageError("no target file is set, so there is nothing to apply; pick one first")
        return edit

    def apply_needs_confirmation(self, position: int) -> str | None:
        """Why applying would put work that git cannot restore at risk (unstaged changes...), or None."""
        return unstaged_changes(self.edit(position).path)

    def apply(self, position: int, confirmed: bool = False, force: bool = False) -> Applied:
        """Write the candidate into the target file atomically; `undo` puts the file back. `confirmed`: you
        accepted :meth:`apply_needs_confirmation`'s reason (work git cannot restore); a link out of the repo or
        a file with other hard links is refused all the same. A candidate that did not pass the tests the
        candidates have (:meth:`may_apply`) is written only with `force`."""
        edit = self.edit(position)
        refused = None if force else self.may_apply(position)
        if refused:
            raise UsageError(f"nothing written: {refused}")
        code = self._candidate(position).candidate.code
        apply_edit(edit, unsaved_ok=confirmed)
        applied = Applied(
            path=edit.path,
            display_path=edit.display_path,
            before=source_bytes(edit.old, edit.display_path) if edit.exists else None,
            after=source_bytes(edit.new, edit.display_path),
            requirement=self._result().requirement,
        )
        self.undo_stack.append(applied)
        self._replan()
        self.record("apply", requirement=applied.requirement, file=edit.display_path, code=code)
        return applied

    def undo(self) -> Applied:
        """Put back the file the last apply changed; refused if it was edited since."""
        if not self.undo_stack:
            raise UsageError("nothing to undo: no candidate was applied in this session")
        applied = self.undo_stack[-1]
        try:
            raw = applied.path.read_bytes() if applied.path.exists() else None
            if raw != applied.after:
                raise UsageError(
                    f"{applied.display_path} changed since the candidate was applied; undo would lose those changes"
                )
            if applied.before is None:
                applied.path.unlink()
            else:  # refused if edited since the check
                atomic_write_bytes(applied.path, applied.before, expected=raw)
        except OSError as exc:  # the stack stays: the user can fix the folder and undo again
            raise UsageError(f"{applied.display_path}: cannot undo ({exc.strerror or exc})") from None
        self.undo_stack.pop()
        self._replan()
        self.record("undo", requirement=applied.requirement, file=applied.display_path)
        return applied

    def _replan(self) -> None:
        """The file changed: re-plan every candidate's edit against what it holds now."""
        result = self.state.result
        if result is None or not self.state.target:
            return
        path = self.target_path(self.state.target)
        edits: list[Edit | None] = []
        try:
            file: Target | None = Target.read(path)
        except AssistError:
            file = None
        if self.state.function is not None:
            from assistant.core.stubs import Taken, find_stub, plan_fill, take_body

            # Filling a stub: each candidate's body goes into the stub as the file holds it now, if it still
            # is one (after an apply it is not, until undo).
            try:
                assert file is not None
                stub = find_stub(
                    file.text, self.state.function, self.state.target, requirement_given=True, tree=file.tree
                )
            except (AssistError, AssertionError):
                stub = None
            if stub is not None and not stub.is_stub:  # filled by the apply: nothing to fill until undo
                stub = None
            for item in result.candidates:
                taken = take_body(item.candidate.code, stub.name, [], finished=True) if stub else None
                if stub is None or not isinstance(taken, Taken):
                    edits.append(None)
                    continue
                kept = Taken(taken.body, item.candidate.dropped, item.candidate.imports)
                edits.append(plan_fill(file or path, stub, kept, self.root or self.start))
            self.state.result = dataclasses.replace(result, edits=edits)
            return
        for item in result.candidates:
            try:  # the rule generate planned them by: the file's own definitions stay, but for those it may rewrite
                rewrite = self.state.replace
                edits.append(file.plan_edit(item.candidate.code, self.root or self.start, rewrite) if file else None)
            except AssistError:
                edits.append(None)
        self.state.result = dataclasses.replace(result, edits=edits)

    # -- history -----------------------------------------------------------------------------------------

    def record(self, event: str, **fields: Any) -> None:
        """Append an event to the history (best effort: a read-only repo must not break the session)."""
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "event": event,
            "target": self.state.target,
            "model": self.backend_label,
            **fields,
        }
        try:
            if self.root is not None:
                repo_dir(self.root, create=True)
            self.history_path.parent.mkdir(parents=True, exist_ok=True)
            # Never through a symlink: the file may sit in a folder the repo shipped.
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            with os.fdopen(os.open(self.history_path, flags, 0o644), "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")  # one write per line: a crash leaves whole lines
        except (OSError, UsageError):
            pass

    def history(self) -> list[dict[str, Any]]:
        """Past events, newest first (unreadable lines are skipped)."""
        if self.root is not None:
            try:
                repo_dir(self.root)  # a history the repo ships (tracked) is not yours: never read back
            except UsageError:
                return []
        data = read_regular_file(self.history_path, limit=HISTORY_BYTES)
        if data is None:
            return []  # missing; or a link, FIFO or device planted in its place: not read back as history
        entries = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
        return entries[::-1]

    def requirements(self) -> list[str]:
        """Distinct past requirements, newest first (the requirement box's up/down history)."""
        return list(dict.fromkeys(e["requirement"] for e in self.history() if isinstance(e.get("requirement"), str)))

    # -- helpers -----------------------------------------------------------------------------------------

    def _result(self) -> GenerateResult:
        if self.state.result is None:
            raise UsageError("nothing generated yet; write a requirement and generate first")
        return self.state.result

    def _candidate(self, position: int) -> Ranked:
        result = self._result()
        if not 0 <= position < len(result.candidates):
            raise UsageError(f"there is no candidate #{position + 1}")
        return result.candidates[position]


def _file_key(path: Path | None) -> tuple[int, ...] | None:
    """What tells a file's versions apart without reading it (its inode, size, and change and modification times);
    None without a file or when it cannot be looked at."""
    if path is None:
        return None
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def _run_in_module(home: ModuleHome, sample: int, tests: Sequence[str]) -> SandboxResult:
    """The tests on one candidate's file in a copy of its project, as a sandbox result (what the screen shows)."""
    from assistant.core.module_runs import passed_in_module

    started = time.perf_counter()
    passed = passed_in_module(home, [sample], tests)
    seconds = time.perf_counter() - started
    if isinstance(passed, str):  # nothing ran
        return SandboxResult("error", 0, len(tests), None, "ProjectError", passed, seconds, "", "")
    done = passed[0]
    failed = next((test for j, test in enumerate(tests) if j not in done), None)
    status = "passed" if failed is None else "failed"
    return SandboxResult(status, len(done), len(tests), failed, None, None, seconds, "", "")


def _exec_score(outcome: SandboxResult) -> Score:
    why = f"{outcome.passed}/{outcome.total} tests passed"
    if outcome.status == "failed" and outcome.failed_test:
        why += f"; failed: {outcome.failed_test.strip().splitlines()[0][:80]}"
    elif outcome.status not in ("passed", "failed"):
        why += f"; {outcome.status}"
    return Score(outcome.passed / max(outcome.total, 1), why, {"status": outcome.status})


def history_path(root: Path | None, start: Path) -> Path:
    """Where a session's history lives: the repo's `.assist/` (git-ignored), else the user cache."""
    if root is not None:
        return root / REPO_DIR_NAME / "history.jsonl"  # the folder is made on the first record
    key = hashlib.sha256(str(start).encode()).hexdigest()[:16]
    return cache_dir() / "history" / f"{start.name or 'root'}-{key}.jsonl"
