"""The generation pipeline, assembled in one place: every door (`assist generate`, the TUI's session, `assist
docstring`, `assist train`, `assist eval`) loads its models and generates through a :class:`Pipeline`.

A pipeline is made from one :class:`~assistant.pipeline.options.GenerationOptions` and the
:class:`~assistant.config.Settings` (which backend, which model). It loads the encoder, the index to retrieve from
(:class:`~assistant.indexing.sources.Source`), the retriever, the backend and the rankers lazily, each once, from
any thread (one loads, the others wait), and only what a request needs: with `k=0` no encoder is loaded, and an
index that is already built is opened without one (its encoder's name is known without loading it).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from assistant.backends import Backend, LazyBackend, load_backend
from assistant.backends.prompts import ANSWER_PREFIX
from assistant.code.edit import Edit
from assistant.code.examples import Example
from assistant.config import DEFAULT_ENGINE, LOCAL_ENGINES, REPAIR_N, Settings, backend_settings
from assistant.core.candidates import Candidate
from assistant.core.generation import GenerateResult
from assistant.core.generation import generate as generate_code
from assistant.core.generation import resample as resample_one
from assistant.core.home import ModuleHome
from assistant.core.rank import Pick, Problem, Ranked, Ranker, Score, may_write, not_run, score_all
from assistant.core.repair import Repaired, RepairOptions, RepairRound, RepairTask
from assistant.core.repair import repair as repair_loop
from assistant.core.repo_tests import RepoTests
from assistant.core.retrieve import Hit, Retriever, demonstration_filter
from assistant.core.target import Target
from assistant.errors import UsageError
from assistant.indexing.index import IndexStats, TextEncoder, repo_root
from assistant.indexing.sources import Source, open_source
from assistant.lazy import Lazy
from assistant.pipeline.options import GenerationOptions
from assistant.pipeline.registry import (
    available_rankers,
    check_rankers,
    make_rankers,
    make_retriever,
    parse_rankers,
    ranker_served_by,
    resolve_rankers,
    served_by,
)
from assistant.progress import Progress, silent

if TYPE_CHECKING:
    from assistant.core.stubs import Stub

Status = Callable[[str], None]


def load_encoder(name: str | None = None) -> TextEncoder:
    """Load a registered text encoder (default: all-MiniLM-L6-v2): the one place assist builds one."""
    from assistant.backends.encoder import load_encoder as load

    return load(name)


def encoder_name(name: str | None = None) -> str:
    """The registered name of an encoder, without loading it."""
    from assistant.backends.models import resolve

    return resolve(name, "encoder").name


def load_generator(name: str, model: str | None = None, progress: Progress | None = None, **options: Any) -> Backend:
    """Load a generation backend by name (:func:`assistant.backends.load_backend`): the one place assist does.

    `local` is the local model on the engine `engine` names (the `local.engine` setting; default openvino, see
    `config.LOCAL_ENGINES`): only the transformers engine takes `precision`, the others take `context` and
    `threads`. Code that needs the model's internals (training, shared-prefix scoring) names `transformers`."""
    engine = options.pop("engine", None) or DEFAULT_ENGINE
    warm = options.pop("warm", "off")  # local.warm: a running warm server of the same settings stands in
    options.pop("tests_model", None)  # local.tests_model: which model agree's tests come from (Pipeline.test_writer)
    if name == "local":
        if engine not in LOCAL_ENGINES:
            raise UsageError(f"unknown local engine {engine!r}; choose {', '.join(LOCAL_ENGINES)}")
        name = LOCAL_ENGINES[engine]
        if name != "local":
            if options.get("precision") not in (None, "fp32"):
                raise UsageError(
                    f"local.precision is a transformers setting; the {engine} engine runs quantized weights",
                    setting="precision:engine",
                    values={"engine": engine},
                )
            # `decoding` and `weights` (the local.decoding and local.weights settings) are the openvino engine's.
            kept = ("context", "threads", "decoding", "weights") if name == "local-ov" else ("context", "threads")
            options = {key: value for key, value in options.items() if key in kept}
        else:
            options.pop("decoding", None)
            options.pop("weights", None)
    if name == "local-ov" and warm != "off":
        from assistant.backends.warm import warm_backend

        found = warm_backend(model, options, warm, progress)
        if found is not None:
            return found
    return load_backend(name, model, progress=progress, **options)


def ranker_chooser(spec: str, backend: Backend) -> Callable[[Problem, Sequence[Candidate]], list[Ranker]]:
    """What `generate` ranks with for a ranker spec (`auto`, or names joined by `+`), chosen once the candidates
    are known."""
    if spec != "auto":
        check_rankers(spec)  # an unknown name fails now, not after sampling

    def choose(problem: Problem, candidates: Sequence[Candidate]) -> list[Ranker]:
        return make_rankers(resolve_rankers(spec, backend, candidates, bool(problem.tests)), backend)

    return choose


def generate(requirement: str, backend: Backend, *, ranker: str = "auto", **options: Any) -> GenerateResult:
    """The library's one-call generation (:func:`assistant.core.generation.generate`) with rankers named by
    `ranker`; a :class:`Pipeline` does the same with the models it loads."""
    return generate_code(requirement, backend, rankers=ranker_chooser(ranker, backend), **options)


def _agree_planner(request: Request, options: GenerationOptions) -> Callable[[Problem], bool]:
    """Whether agree will ask for tests, as far as known before sampling (what `_chooser` will pick): the test call
    may then be decoded beside the samples (where another model writes the tests, it cannot: no planner)."""
    from assistant.pipeline.registry import plans_agree

    def agree_tests(problem: Problem) -> bool:
        tested = ranks_by_tests(request, problem)
        return plans_agree(options.ranker, tested, candidates_runnable(problem.home, False))

    return agree_tests


def _generator_settings(settings: Settings) -> tuple[Any, ...]:
    """What chooses the generator: the backend, the model and the backend's own settings but the test writer's."""
    options = {key: value for key, value in settings.backend_options().items() if key != "tests_model"}
    return settings.backend, settings.model, options


class LazyEncoder(Lazy[TextEncoder]):
    """A text encoder that loads on first use: its name is known without loading it, so an index that is already
    built opens, and BM25 searches, with no model in memory."""

    def __init__(self, name: str, load: Callable[[], TextEncoder]) -> None:
        super().__init__(load)
        self.name = name

    @property
    def dim(self) -> int:
        return self.get().dim

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        return self.get().encode(texts, progress)


@dataclass(frozen=True)
class Request:
    """One generation request.

    `requirement` says what the code should do (with `function`, filling that stub of `file`, it may be empty:
    the docstring is the requirement). `tests` are assert statements the `exec` ranker runs. `demonstrations`
    replaces retrieval with these hits. `root` is what display paths are relative to (default: the source's
    repo). `target` is `file` already read (a door that checks it before loading models passes it on). `python`
    runs a stub's candidates in their module (`agree`).

    :meth:`resolve` makes one with everything about its file found once: `target` read, `stub` (the stub
    `function` names there) found, and the repo's tests for it planned (`repo_tests`, or why none run:
    `repo_tests_skipped`); every step after uses these, never the file again."""

    requirement: str = ""
    file: str | Path | None = None
    function: str | None = None
    tests: Sequence[str] = ()
    demonstrations: Sequence[Hit] | None = None
    root: Path | None = None
    target: Target | None = None
    python: Path | None = None  # the interpreter with the project's dependencies (default: the repo's venv)
    run_in_module: bool = True  # False: the repo's own tests will rank a stub's candidates (no agree needed)
    # The target file's definitions a plain request's candidates may replace (others they re-type are left out).
    replace: tuple[str, ...] = ()
    stub: Stub | None = field(default=None, repr=False)  # `function`'s stub in `target`, found once
    repo_tests: RepoTests | None = None  # the repo's tests that rank a stub's candidates (None: none planned)
    # Why the repo's tests do not run (None: they run, or none reach it): the refusal, which a door may word in
    # its own terms (its `setting`).
    repo_tests_skipped: UsageError | None = None
    examples: bool = False  # `tests` are the stub's own docstring examples (:meth:`with_example_tests`)

    @classmethod
    def resolve(
        cls,
        requirement: str = "",
        *,
        file: str | Path | None = None,
        function: str | None = None,
        target: Target | None = None,
        repo_tests: bool = True,
        test_cmd: str | None = None,
        python: str | Path | None = None,
        replace: Sequence[str] = (),
        name: str | None = None,
        start: Path | None = None,
        progress: Progress | None = None,
        **rest: Any,
    ) -> Request:
        """A request with its file read (unless `target` is given: read already), its stub found and the repo's
        tests for that stub planned (`repo_tests` False: none; `test_cmd`: the pytest command that names them),
        once; settings that do not go together are refused first (:func:`check_request`). A `function` without
        its file is looked for in the git work tree around `start` (default: the working folder): the one file
        where it is a stub (:func:`~assistant.core.stubs.find.locate_stub`). `name` is the file as errors name it
        (default: as given). `progress` hears the run that picks the repo's tests. `rest` are the other fields as
        they are."""
        looked_for = function is not None and file is None and target is None
        check_request(
            file=file,
            function=function,
            replace=replace,
            test_cmd=test_cmd,
            python=python,
            repo_tests=repo_tests,
            looked_for=looked_for,
        )
        if looked_for:
            from assistant.core.stubs.find import locate_stub

            file = _shown_path(locate_stub(str(function), start or Path.cwd()))
        if target is None and file is not None:
            target = Target.read(file)
        if replace and target is not None:
            from assistant.code.edit import check_replace_names

            check_replace_names(target.tree, replace, name or str(file))
        stub, plan, skipped = None, None, None
        if function is not None:
            assert target is not None  # check_request: a function needs its file
            stub = find_request_stub(target, function, name or str(file), requirement)
            if repo_tests:
                plan, skipped = plan_repo_tests(
                    target, function, stub, test_cmd=test_cmd, python=python, progress=progress
                )
        python = Path(python) if python is not None else None
        fields = {"target": target, "python": python, "replace": tuple(replace), "stub": stub}
        return cls(
            requirement, file=file, function=function, repo_tests=plan, repo_tests_skipped=skipped, **fields, **rest
        )

    def with_example_tests(self) -> Request:
        """This request with its stub's docstring examples as its tests
        (:func:`assistant.core.stubs.examples.example_tests`), when it fills a stub, no tests are given and none of
        the repo's are planned: tests the user wrote, which decide what may be written (they do not order the
        candidates: :func:`ranks_by_tests`)."""
        if self.tests or self.repo_tests is not None or self.stub is None or self.target is None:
            return self
        from assistant.core.stubs.examples import example_tests

        found = example_tests(self.stub, self.target.tree)
        return replace(self, tests=found, examples=True) if found else self

    def read_target(self) -> Target | None:
        """The target file, read and parsed once (None without one)."""
        if self.target is not None:
            return self.target
        return Target.read(self.file) if self.file is not None else None


def _shown_path(path: Path) -> Path:
    """`path` relative to the working folder, as a user would type it (`../src/util.py` from a sibling folder)."""
    return Path(os.path.relpath(path))


def ranks_by_tests(request: Request, problem: Problem) -> bool:
    """Whether the request's tests order its candidates: given tests do; a stub's docstring examples only decide what
    may be written (:meth:`Pipeline.answer` runs them on every candidate), and ranking stays as without tests (on
    16 stubs of real projects, ranking by them first picked a candidate passing the project's tests 2 times where
    agree picked one 3 times: `results/correctness-docstring-examples`)."""
    return bool(problem.tests) and not request.examples


def check_request(
    *,
    file: str | Path | None,
    function: str | None,
    replace: Sequence[str] = (),
    test_cmd: str | None = None,
    python: str | Path | None = None,
    repo_tests: bool = True,
    looked_for: bool = False,
) -> None:
    """Refuse settings of a request that do not go together, with one line in the library's terms; the error's
    `setting` names the rule, for a door that words it in its own: "function" (needs a file, unless `looked_for`:
    it will be looked for), "replace+function", "replace" (needs a file), "test_cmd" (needs a function), "python"
    (needs a function), "python:missing", "test_cmd+repo_tests" (a test command with the repo's tests off)."""
    if function is not None and file is None and not looked_for:
        raise UsageError("a function to fill needs the target file that holds its stub", setting="function")
    if replace and function is not None:
        raise UsageError(
            "replace is for a requirement's new code; the function to fill already names what is rewritten",
            setting="replace+function",
        )
    if replace and file is None:
        raise UsageError("replace needs a target file, the file whose definitions it may replace", setting="replace")
    if test_cmd is not None and function is None:
        raise UsageError(
            "a test command needs a function to fill (the repo's tests run on a filled stub)", setting="test_cmd"
        )
    if python is not None and function is None:
        raise UsageError(
            "python names the interpreter the repo's tests run with: name a function to fill too", setting="python"
        )
    if python is not None and not Path(python).expanduser().exists():
        raise UsageError(
            f"the interpreter {python} does not exist", setting="python:missing", values={"python": python}
        )
    if test_cmd is not None and not repo_tests:
        raise UsageError(
            "a test command names the repo's tests, which are turned off; give one or the other",
            setting="test_cmd+repo_tests",
        )


def find_request_stub(target: Target, function: str, name: str, requirement: str) -> Stub:
    """The stub `function` names in `target` (`name`: the file as errors name it), or a one-line UsageError: the
    file does not exist, or :func:`assistant.core.stubs.find_stub`'s reason."""
    from assistant.core.stubs import find_stub

    if not target.exists:
        raise UsageError(
            f"{name} does not exist; the function to fill is a stub in an existing file",
            setting="function:missing_file",
            values={"name": name},
        )
    return find_stub(target.text, function, name, requirement_given=bool(requirement.strip()), tree=target.tree)


def plan_repo_tests(
    target: Target,
    function: str,
    stub: Stub,
    *,
    test_cmd: str | None = None,
    python: str | Path | None = None,
    progress: Progress | None = None,
) -> tuple[RepoTests | None, UsageError | None]:
    """The repo's tests for `function` of `target` (:func:`assistant.core.repo_tests.repo_tests`, in the git work
    tree around the file as named, so a link out is seen), and why none run when they cannot (None: they can, or
    none reach it): for a `stub`, those that fail with it raising, having run it; else those that name it, run
    once on the file as it is. Refused where they do not run, or check nothing. A reason they cannot run is an
    error when `test_cmd` asked for them. `progress` hears that run (and may raise to stop it)."""
    from assistant.code.edit import enclosing_root
    from assistant.core.repo_tests import repo_tests

    root = enclosing_root(Path(target.given).expanduser())
    relative = target.path.relative_to(root) if target.path.is_relative_to(root) else target.path
    try:
        checked = {"baseline": target.text, "stub": stub, "progress": progress}
        return repo_tests(root, relative, function, test_cmd=test_cmd, python=python, **checked), None
    except UsageError as exc:
        if test_cmd is not None:  # asked for: the reason they cannot run is the answer
            raise
        return None, exc


@dataclass(frozen=True)
class Answer:
    """What :meth:`Pipeline.answer` found for a request: the ranked `result` (repaired, when repair ran), the
    candidate that may be written (`pick`, :func:`assistant.core.rank.may_write`), the repo's tests that ranked
    it (`repo_tests`; why none did: `repo_tests_skipped`), the repair rounds (`repaired`; None: none ran), the
    demonstrations' source in words (`source`; None with k = 0), and why its retriever was chosen, naming the
    trained artifact that served or why none did (`served_by`; None: nothing retrieved, or a plain retriever
    asked for by name); the same for the trained discriminator (`ranker_served_by`; None: `auto` had none to
    weigh, or a plain ranker was asked for by name)."""

    result: GenerateResult
    pick: Pick
    repo_tests: RepoTests | None = None
    repo_tests_skipped: UsageError | None = None
    repaired: Repaired | None = None
    source: str | None = None
    served_by: str | None = None
    ranker_served_by: str | None = None

    def to_json(self, door: dict[str, Any] | None = None) -> dict[str, Any]:
        """The answer as `assist generate --json` prints it: the result's keys, then why the retriever was chosen
        (`retriever_served_by`) and `source`, then the `door`'s keys (what it did with the answer: `applied`,
        `verdict`), then the repo's tests and the repair; each candidate says which repair round made it
        (`repair_round`; None: the first round). `tests_not_run`: why no test ran on any candidate, where tests
        existed but none did (None: they ran, or there were none)."""
        plan = self.repo_tests
        data = self.result.to_json()
        data["retriever_served_by"] = self.served_by  # the trained artifact that retrieved, or why none did
        data["ranker_served_by"] = self.ranker_served_by  # the trained discriminator that ranked, or why none did
        data["source"] = self.source
        data.update(door or {})
        # picked: by the run on the stub raising (they fail then, having run it); else named by the test command, or
        # naming the function.
        planned = {"args": list(plan.args), "python": str(plan.python), "picked": plan.picked} if plan else None
        if planned is not None:
            planned["remembered"] = plan.remembered  # picked by an earlier run on the same files
        data["repo_tests"] = planned
        skipped = self.repo_tests_skipped  # why none ran (None: they ran, or none reach it)
        data["repo_tests_skipped"] = None if skipped is None else str(skipped)
        data["tests_not_run"] = self.pick.not_run  # tests existed, and why none ran on any candidate (None: they ran)
        data["repair"] = None if self.repaired is None else self.repaired.to_json()
        for shown in data["candidates"]:
            shown["repair_round"] = None if self.repaired is None else self.repaired.origin.get(shown["sample"])
        return data


def _timed(result: GenerateResult, plan: RepoTests, ranked_s: float) -> GenerateResult:
    """`result` with the repo's tests' stages in its timings: finding them (`find tests`, as the request was
    resolved: the run on the stub that picks them, or the check of those named) and their runs on the candidates
    (`repo tests`)."""
    found = {} if plan.took_s is None else {"find tests": plan.took_s}
    return replace(result, timings={**found, **result.timings, "repo tests": ranked_s})


def candidates_runnable(home: ModuleHome | None, whole_programs: bool) -> bool:
    """Whether candidates can run on tests the model writes (`agree`): whole programs can, a stub's bodies only
    in their module's copy (`home`), and a method's not at all (its tests would need an instance)."""
    if home is not None:
        return not home.is_method
    return whole_programs


def _score_missing(
    problem: Problem, candidates: list[Ranked], missing: Sequence[Ranker], names: Sequence[str], progress: Progress
) -> list[Ranked]:
    """`candidates` with the `missing` rankers' scores added, each where its ranker stands in `names` (so a ranker
    that leads, the repo's tests, reads first, as :func:`score_all` gives them). `progress` hears `rank` count the
    rankers, their steps as `rank tests`; a ranker with its own `stage` reports its steps there, uncounted."""
    counted = [ranker for ranker in missing if getattr(ranker, "stage", None) is None]
    if counted:
        progress("rank", 0, len(counted))
    for ranker in missing:
        own = getattr(ranker, "stage", None)

        def step(done: int, total: int, stage: str = own or "rank tests") -> None:
            # The model calls of a ranker (agree) report their tokens: a cancel stops them at the next one.
            progress(stage, done, total)

        scores = ranker.score(problem, [item.candidate for item in candidates], step)
        candidates = [
            Ranked(item.candidate, _placed(item.scores, ranker.name, score, names))
            for item, score in zip(candidates, scores, strict=True)
        ]
        if own is None:
            progress("rank", counted.index(ranker) + 1, len(counted))
    return candidates


def _placed(scores: dict[str, Score], name: str, score: Score, names: Sequence[str]) -> dict[str, Score]:
    """`scores` with `name`'s `score` added before the first score of a ranker after it in `names` (else last)."""
    after = set(names[names.index(name) + 1 :])
    items = list(scores.items())
    at = next((i for i, (other, _) in enumerate(items) if other in after), len(items))
    return dict([*items[:at], (name, score), *items[at:]])


class Pipeline:
    """Loads the models a request needs (once, lazily, thread-safe) and generates, ranks and resamples with them.

    `settings` choose the backend and model (default: the settings that govern `start`); `options` what to
    generate with (default: the settings' `[generate]` table). `bank` retrieves from a JSONL bank instead of the
    repo's index. `backend` and `encoder` inject loaded models (tests, eval); `encoder_factory` replaces how the
    encoder is loaded."""

    def __init__(
        self,
        options: GenerationOptions | None = None,
        settings: Settings | None = None,
        *,
        start: str | Path = ".",
        bank: str | Path | None = None,
        backend: Backend | None = None,
        encoder: TextEncoder | None = None,
        encoder_factory: Callable[[], TextEncoder] | None = None,
    ) -> None:
        self.start = Path(start).expanduser()
        self.bank = bank
        self._settings = settings
        self._options = options
        self._backend = backend
        self._source: Source | None = None
        self._retriever: Retriever | None = None
        self._fragment_retriever: Retriever | None = None
        self._rankers: dict[tuple[str, int], Ranker] = {}
        self._test_writer: Backend | LazyBackend | None = None
        self._writer_progress: Progress | None = None  # the request at hand's: where a writer loaded in it reports
        self._lock = threading.RLock()  # loading happens in worker threads; one loads, the others wait
        if encoder is not None:
            self._encoder = LazyEncoder(encoder.name, lambda: encoder)
            self._encoder.get()
        else:
            self._encoder = LazyEncoder(encoder_name(), encoder_factory or load_encoder)

    # -- configuration -------------------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """Which backend and model (read on first use: `assist index` needs none)."""
        with self._lock:
            if self._settings is None:
                self._settings = backend_settings(None, None, start=self.start if self.start.exists() else None)
            return self._settings

    @property
    def options(self) -> GenerationOptions:
        with self._lock:
            if self._options is None:
                # Checked now: an unknown ranker named in a config file would otherwise fail after the sampling.
                self._options = GenerationOptions.from_settings(self.settings).check()
            return self._options

    def configure(self, options: GenerationOptions | None = None, settings: Settings | None = None) -> None:
        """Switch options or settings; what they change (the retriever, the backend) is reloaded on next use."""
        with self._lock:
            if options is not None:
                options.check()
                if self._options is None or options.retriever != self._options.retriever:
                    self._retriever = None
                    self._fragment_retriever = None
                self._options = options
            if settings is not None:
                old = self._settings
                generator = old is None or _generator_settings(settings) != _generator_settings(old)
                writer = old is None or settings["local.tests_model"] != old["local.tests_model"]
                if generator:
                    self._backend = None
                if generator or writer:
                    self._test_writer = None
                    self._rankers.clear()
                self._settings = settings

    # -- models ----------------------------------------------------------------------------------------------------

    def encoder(self) -> TextEncoder:
        """The text encoder, loaded (for callers that embed; retrieval loads it only when it embeds)."""
        return self._encoder.get()

    @property
    def text_encoder(self) -> TextEncoder:
        """The encoder as the index and retrievers take it: loaded only once something is embedded."""
        return self._encoder

    @property
    def encoder_loaded(self) -> bool:
        return self._encoder.loaded

    def source(self, progress: Progress = silent) -> Source:
        """The index to retrieve from: the bank, else the repo's index, else the embedded default bank."""
        with self._lock:
            if self._source is None:
                start = self.start if self.start.exists() else Path(".")
                self._source = open_source(self._encoder, bank=self.bank, start=start, progress=progress)
            return self._source

    def retriever(self, progress: Progress = silent) -> Retriever:
        """The retriever the options name, over :meth:`source`."""
        with self._lock:
            if self._retriever is None:
                source = self.source(progress)
                generator = self.generator_name()
                name, index = self.options.retriever, source.index
                self._retriever = make_retriever(name, index, self._encoder, generator, progress)
            return self._retriever

    def generator_name(self) -> str | None:
        """The model that will generate, by name, without loading it (a local model's default resolved)."""
        if self._backend is not None:
            return self._backend.model
        settings = self.settings
        if not settings.backend.startswith("local"):
            return settings.model
        from assistant.backends.models import resolve

        try:
            return resolve(settings.model).name
        except UsageError:  # an unknown name: loading the backend says so
            return settings.model

    def fragment_retriever(self, progress: Progress = silent) -> Retriever:
        """The retriever the options name over the repo index's 20-line fragments (`auto`, or a retriever trained
        on docstrings, searches them as hybrid); a one-line error where there is no repo index."""
        from assistant.indexing.index import load_repo_index

        with self._lock:
            if self._fragment_retriever is None:
                source = self.source(progress)
                index = load_repo_index(source.root, fragments=True) if source.kind == "repo" and source.root else None
                if index is None:
                    raise UsageError(
                        "fragments retrieves the repository's code fragments: run `assist index` in the repo first",
                        setting="fragments:no_index",
                    )
                if index.encoder_name != self._encoder.name:  # a run killed between the functions' and its save
                    raise UsageError(
                        f"the fragments in {source.root} were embedded with {index.encoder_name}, not "
                        f"{self._encoder.name}; run `assist index` again"
                    )
                name = self.options.retriever if self.options.retriever in ("bm25", "dense", "hybrid") else "hybrid"
                self._fragment_retriever = make_retriever(name, index, self._encoder)
            return self._fragment_retriever

    def backend(self, progress: Progress = silent) -> Backend:
        """The generation backend the settings name."""
        with self._lock:
            if self._backend is None:
                settings = self.settings
                self._backend = load_generator(
                    settings.backend, settings.model, progress=progress, **settings.backend_options()
                )
            return self._backend

    def test_writer(self) -> Backend | LazyBackend:
        """The backend agree's tests are written with: the generator's, unless `local.tests_model` names another
        local model for it (auto: `models.AUTO_TESTS_MODEL`), which loads when agree first writes tests, with the
        generator's settings (its own warm server, engine and weights), and reports its load to the request at hand
        (`generate`, `rank`, `resample`)."""
        backend = self.backend()
        with self._lock:
            if self._test_writer is None:
                self._test_writer = self._writer_for(backend)
            return self._test_writer

    def _writer_for(self, backend: Backend) -> Backend | LazyBackend:
        from assistant.backends.models import tests_model_for

        settings = self.settings
        if settings.backend != "local":
            return backend
        model = tests_model_for(backend.model, settings["local.tests_model"])
        if model == backend.model:
            return backend
        options = settings.backend_options()
        return LazyBackend(model, lambda: load_generator("local", model, self._writer_progress, **options))

    def rankers(
        self,
        spec: str | None,
        candidates: Sequence[Candidate] = (),
        has_tests: bool = False,
        every: bool = False,
        runnable: bool = True,
        repo_tests: bool = False,
    ) -> list[Ranker]:
        """The ranker objects `spec` names (None: the options'; `auto`: see :func:`auto_ranker`; `runnable`:
        the candidates can run, as whole programs or in their module's copy), led by `repo-tests` when the repo's
        tests are planned for them (`repo_tests`). With `every`, every other ranker that can score them follows (the
        TUI shows all scores). Built once and reused."""
        spec = self.options.ranker if spec is None else spec
        backend = self.backend()
        active = resolve_rankers(spec, backend, candidates, has_tests, runnable, repo_tests)
        names = available_rankers(active, backend, candidates, has_tests) if every else parse_rankers(active)
        return [self._ranker(name, backend) for name in names]

    def _ranker(self, name: str, backend: Backend) -> Ranker:
        from assistant.pipeline.registry import RANKERS

        with self._lock:
            key = (name, id(backend))
            if key not in self._rankers:
                # agree's tests may come from another model than the candidates (`test_writer`)
                writer = self.test_writer() if name == "agree" else backend
                self._rankers[key] = RANKERS[name](writer)  # type: ignore[arg-type]
            return self._rankers[key]

    def load(self, progress: Progress = silent) -> None:
        """Load what generation with the current options needs: the retriever (k > 0, or the default) and the
        backend."""
        if self.options.k != 0:
            self.retriever(progress)
        self.backend(progress)

    @property
    def loaded_retriever(self) -> Retriever | None:
        return self._retriever

    @property
    def loaded_source(self) -> Source | None:
        return self._source

    @property
    def loaded_backend(self) -> Backend | None:
        return self._backend

    @loaded_backend.setter
    def loaded_backend(self, backend: Backend | None) -> None:
        with self._lock:
            self._backend = backend
            self._test_writer = None
            self._rankers.clear()

    # -- work ------------------------------------------------------------------------------------------------------

    def retrieve(
        self,
        query: str,
        k: int | None = None,
        exclude_path: str | None = None,
        progress: Progress = silent,
        function: str | None = None,
    ) -> list[Hit]:
        """The top `k` (default: the options' for the request's kind) demonstrations for `query`, leaving out the
        examples from `exclude_path` (the target file's own functions: the prompt shows them already); filling a
        stub (`function`, its qualified name there) with the `own_file` option (the default), only that function."""
        k = self.options.k_for(function is not None) if k is None else k
        if k <= 0:
            return []
        retriever = self.retriever(progress)
        return retriever.search(query, k, demonstration_filter(exclude_path or "", function, self.options.own_file))

    def generate(
        self,
        request: Request,
        *,
        progress: Progress = silent,
        status: Status | None = None,
        options: GenerationOptions | None = None,
        every_ranker: bool = False,
    ) -> GenerateResult:
        """Generate ranked candidates for a request (filling a stub when it names a `function`).

        The target file is read and parsed once, and the stub found once (both from the request when
        :meth:`Request.resolve` made it). The models load as needed: the index and retriever only when
        demonstrations are retrieved (k > 0 and none given), then the backend. `status` hears a line when the
        model loads and when retrieval starts; `progress` every step (a callback that raises stops there).
        `options` replaces the pipeline's for this request's sampling and ranking (the retriever stays). With
        `every_ranker`, candidates are also scored by every other ranker that can score them, sorted by the
        active ones first. A request whose repo's tests will rank a stub's candidates runs them in their module
        (for `agree`) only when the ranker or its own tests need it.
        """
        options = options or self.options
        say = status or (lambda line: None)
        if request.function is not None and request.file is None and request.target is None:
            check_request(file=None, function=request.function)
        target = request.read_target()
        k = options.k_for(request.function is not None)
        # Filling a stub with --fragments: the repo's code fragments take the demonstrations' place.
        fragments = options.fragments and request.function is not None and request.demonstrations is None
        retrieving = request.demonstrations is None and k > 0 and not fragments
        retriever = self.retriever(progress) if retrieving else None
        fragment_retriever = self.fragment_retriever(progress) if fragments and k > 0 else None
        root = request.root if request.root is not None else self._source_root(progress, k)
        # Before the model loads: `apis` without a repo index is a one-line error, not a wait then an error.
        definitions = self._definitions(options, progress) if request.function is not None else []
        if self._backend is None:
            say("Loading the model")
        backend = self.backend(progress)
        self._writer_progress = progress
        writer = self.test_writer()  # a bad local.tests_model fails now, not after sampling
        shared: dict[str, Any] = {
            "retriever": retriever,
            "k": k if request.demonstrations is None else len(request.demonstrations),
            "tests": list(request.tests),
            "root": root,
            "rankers": self._chooser(request, options, every_ranker),
            "progress": self._reporter(progress, say, retrieving),
            "demonstrations": request.demonstrations,
            "python": request.python,
            "run_in_module": request.run_in_module,
        }
        if request.repo_tests is not None:  # the repo's own tests rank the candidates (agree would only cost time)
            shared["run_in_module"] = "agree" in options.ranker or bool(request.tests)
        if request.function is None:
            return generate_code(
                request.requirement, backend, target=target, params=options.params(), replace=request.replace, **shared
            )
        from assistant.core.stubs import fill_stub

        assert target is not None
        return fill_stub(
            request.function,
            backend,
            target=target,
            stub=request.stub,
            definitions=definitions,
            fragments=fragment_retriever,
            own_file=options.own_file,
            redraw=options.redraw,
            requirement=request.requirement,
            params=options.params(),
            max_new_tokens=options.max_new_tokens,
            spec_tests=self._spec_tests(request, target, options, backend),
            agree_tests=None if writer is not backend else _agree_planner(request, options),
            **shared,
        )

    def answer(
        self,
        request: Request,
        *,
        progress: Progress = silent,
        status: Status | None = None,
        on_round: Callable[[RepairRound], None] | None = None,
        every_ranker: bool = False,
    ) -> Answer:
        """A request's whole road, one call for every door: generate (:meth:`generate`), rank by the repo's
        tests first (`request.repo_tests`, planned by :meth:`Request.resolve`: the `repo-tests` ranker, through
        :meth:`rank` like every ranker), rank by the request's tests on
        every candidate (`exec`: they decide what may be written, even when another ranker orders), repair when
        there are tests and none passes (`on_round` hears each round), and pick the candidate that may be written
        (:func:`assistant.core.rank.may_write`). `status` hears a line as each stage starts."""
        options = self.options
        say = status or (lambda line: None)
        plan = request.repo_tests
        tests = list(request.tests)
        result = self.generate(request, progress=progress, status=status, every_ranker=every_ranker)
        if plan is not None and result.candidates:
            say(f"Running the repo's tests on each candidate ({plan.describe()})")
            started = time.perf_counter()
            if any(edit is not None for edit in result.edits):  # the `repo-tests` ranker, ahead of the others
                result = self.rank(result, tests, spec="+".join(result.rankers), repo_tests=plan, progress=progress)
            result = _timed(result, plan, time.perf_counter() - started)
        if tests and result.candidates and "exec" not in result.rankers:
            # The tests decide what may be written, so they run on every candidate even when another ranker orders.
            result = self.rank(result, tests, spec="+".join([*result.rankers, "exec"]), progress=progress)
        repaired = None
        # Repair answers failing tests; where none ran (the module does not import), a new candidate would not either.
        if result.candidates and (tests or plan is not None) and options.repair and not_run(result.candidates) is None:
            repaired = self.repair(result, request, repo_tests=plan, progress=progress, on_round=on_round)
            result = repaired.result
        # k = 0 retrieves nothing: no index is opened (nor the encoder loaded) just to name it. Retrieving, or with
        # no root given, generate opened it; demonstrations given with a root, it may be closed: none is named.
        retrieved = options.k_for(request.function is not None) > 0
        source = self._source.description if retrieved and self._source is not None else None
        pick = may_write(result.candidates, tested=bool(tests) or plan is not None)
        served = served_by(self._retriever) if result.retriever != "none" else None  # it retrieved: it was built
        ranked = self._ranker_served_by(result)
        return Answer(result, pick, plan, request.repo_tests_skipped, repaired, source, served, ranked)

    def _ranker_served_by(self, result: GenerateResult) -> str | None:
        """Which trained discriminator ranked `result`, or, where `auto` chose the rankers, why none could (only
        others' models have one); None when a plain ranker was asked for by name."""
        if self.options.ranker != "auto" and "condor" not in result.rankers:
            return None
        with self._lock:
            used = [ranker for (name, _), ranker in self._rankers.items() if name in result.rankers]
        return ranker_served_by(used, self.generator_name())

    def rank(
        self,
        result: GenerateResult,
        tests: Sequence[str] = (),
        *,
        spec: str | None = None,
        every_ranker: bool = False,
        progress: Progress = silent,
        repo_tests: RepoTests | None = None,
    ) -> GenerateResult:
        """`result` scored by every ranker `spec` (default: the options') chooses that has not scored it yet, and
        sorted by them (edits move with their candidates). With `repo_tests` (the repo's tests planned for a filled
        stub, as :meth:`Request.resolve` finds them) the `repo-tests` ranker leads whatever `spec` names: it runs
        them on each candidate's edit, once (a candidate keeps a score it has). `progress` hears `rank` count the
        rankers that score, and their steps (model calls) as `rank tests`; a ranker with a stage of its own (the
        repo's tests) reports its steps under that stage, not counted."""
        self._writer_progress = progress
        candidates = list(result.candidates)
        plain = [item.candidate for item in candidates]
        edits = zip(plain, result.edits, strict=True)
        by_sample = {candidate.sample: edit for candidate, edit in edits if edit is not None}
        problem = Problem(
            result.requirement, result.prompt, tuple(tests), home=result.home, repo_tests=repo_tests, edits=by_sample
        )
        can_run = candidates_runnable(result.home, whole_programs=result.function is None)
        lead = repo_tests is not None and bool(candidates)
        rankers = self.rankers(spec, plain, bool(tests), every_ranker, can_run, repo_tests=lead)
        names = [ranker.name for ranker in rankers]
        missing = [ranker for ranker in rankers if any(ranker.name not in item.scores for item in candidates)]
        if missing and candidates:
            candidates = _score_missing(problem, candidates, missing, names, progress)
        paired = sorted(zip(candidates, result.edits, strict=True), key=lambda pair: pair[0].key(names))
        return replace(result, rankers=names, candidates=[p[0] for p in paired], edits=[p[1] for p in paired])

    def resample(
        self,
        result: GenerateResult,
        position: int,
        request: Request,
        *,
        progress: Progress = silent,
        options: GenerationOptions | None = None,
    ) -> GenerateResult:
        """`result` with the candidate at `position` replaced by a fresh sample, scored by the rankers that
        scored the others, re-ranked."""
        options = options or self.options
        backend = self.backend(progress)
        self._writer_progress = progress
        rankers = [self._ranker(name, backend) for name in result.rankers]
        target = request.read_target()
        k = options.k_for(request.function is not None)
        root = request.root if request.root is not None else self._source_root(progress, k)
        return resample_one(
            result,
            position,
            backend,
            rankers=rankers,
            params=options.params(),
            tests=request.tests,
            target=target,
            root=root,
            progress=progress,
            replace=request.replace,
        )

    def reindex(self, root: str | Path | None = None, progress: Progress = silent) -> IndexStats:
        """Index the repo at `root` (default: the one around `start`) incrementally, and retrieve from that index
        from now on."""
        from assistant.indexing.index import index_repo

        with self._lock:
            _, stats = index_repo(root or repo_root(self.start), self._encoder, progress)
            self._source = None
            self._retriever = None
            self._fragment_retriever = None
        return stats

    def repair(
        self,
        result: GenerateResult,
        request: Request,
        *,
        repo_tests: RepoTests | None = None,
        options: GenerationOptions | None = None,
        progress: Progress = silent,
        on_round: Callable[[RepairRound], None] | None = None,
        limits: RepairOptions | None = None,
    ) -> Repaired:
        """Repair rounds on `result` when it has tests (`request.tests`, or the repo's: `repo_tests`, already run
        on it) and no candidate passes them (:func:`assistant.core.repair.repair`; `options.repair` rounds, 0:
        none, of at most REPAIR_N samples; `limits` replaces both and the time budget). New candidates are scored
        by the rankers and tests that scored the first ones."""
        options = options or self.options
        backend = self.backend(progress)
        self._writer_progress = progress
        rankers = [self._ranker(name, backend) for name in result.rankers]  # the repo's tests among them
        # A stub's candidates were scored as whole functions after the plain fence (fill_stub's Problem).
        prompt = replace(result.prompt, answer_prefix=ANSWER_PREFIX) if result.function else result.prompt

        def score(candidates: list[Candidate], edits: list[Edit | None]) -> list[Ranked]:
            home = result.home
            if home is not None:
                texts = {c.sample: e.new for c, e in zip(candidates, edits, strict=True) if e is not None}
                home = replace(home, texts={**home.texts, **texts})
            by_sample = {c.sample: e for c, e in zip(candidates, edits, strict=True) if e is not None}
            problem = Problem(
                result.requirement, prompt, tuple(request.tests), home=home, repo_tests=repo_tests, edits=by_sample
            )
            return score_all(problem, candidates, rankers)

        k = options.k_for(request.function is not None)
        task = RepairTask(
            target=request.read_target(),
            function=request.function,
            root=request.root if request.root is not None else self._source_root(progress, k),
            params=options.params(),
            replace=tuple(request.replace),  # a repair's edits replace what the first round's may
            stub=request.stub,
        )
        limits = limits or RepairOptions(rounds=options.repair, n=min(options.n, REPAIR_N))
        return repair_loop(task, result, backend, limits, score, progress=progress, on_round=on_round)

    # -- helpers ---------------------------------------------------------------------------------------------------

    def _chooser(
        self, request: Request, options: GenerationOptions, every_ranker: bool
    ) -> Callable[[Problem, Sequence[Candidate]], list[Ranker]]:
        """What a request's candidates are ranked with, chosen once they are known."""

        def choose(problem: Problem, candidates: Sequence[Candidate]) -> list[Ranker]:
            # A stub's body calls the rest of its module: it runs on the model's tests (agree) only in its module.
            can_run = candidates_runnable(problem.home, whole_programs=request.function is None)
            return self.rankers(options.ranker, candidates, ranks_by_tests(request, problem), every_ranker, can_run)

        return choose

    def _reporter(self, progress: Progress, say: Status, retrieving: bool) -> Progress:
        """`progress`, with a status line as retrieval starts (naming the source it retrieves from)."""
        description = self._source.description if self._source is not None else "the index"

        def report(stage: str, done: int, total: int) -> None:
            if stage == "retrieve" and done == 0 and retrieving:
                say(f"Retrieving from the {description}")
            progress(stage, done, total)

        return report

    def _spec_tests(self, request: Request, target: Target | None, options: GenerationOptions, backend: Backend) -> str:
        """Filling a stub with `tests_in_prompt`: the repo's test functions that mention it, for its prompt."""
        if not options.tests_in_prompt or request.function is None or target is None or not target.exists:
            return ""
        from assistant.code.edit import enclosing_root
        from assistant.core.spec_tests import spec_tests
        from assistant.core.tokens import token_counter

        root = enclosing_root(Path(target.given).expanduser())
        if not target.path.is_relative_to(root):
            return ""
        return spec_tests(root, target.path.relative_to(root), request.function, count=token_counter(backend))

    def _definitions(self, options: GenerationOptions, progress: Progress) -> list[Example]:
        """The functions whose outlines `apis` may show beside a stub: the repo index's (none when it is off)."""
        if not options.apis:
            return []
        source = self.source(progress)
        if source.kind != "repo":
            raise UsageError(
                "apis shows functions from the repository's index: run `assist index` in the repo first",
                setting="apis:no_index",
            )
        return list(source.index.examples)

    def _source_root(self, progress: Progress, k: int) -> Path | None:
        """The repo that display paths are relative to: the source's root, as `open_source` finds it. With k = 0 the
        source is not opened for it (a cold default bank would be embedded just to learn the repo's root)."""
        if self._source is None and k == 0:
            if self.bank is not None:
                return None
            with contextlib.suppress(UsageError):
                return repo_root(self.start)
            return None
        return self.source(progress).root
