"""`assist eval repo`: fill functions and next lines in real projects, scored by the projects' own tests.

Function-level tasks go through the same stub filling as `assist generate --file F --function NAME`
(:func:`assistant.core.stubs.prepare_stub` and :func:`~assistant.core.stubs.sample_stubs`): the prompt holds
the code around the stub and demonstrations retrieved from the project's functions; each sample's body is put
into the file and the tests that execute the function are run in the project sandbox. Line-level tasks
continue a file from a cut point with retrieved 20-line fragments of the project in the prompt.

Leak control: the index is built from the pristine tree, but the target file's own functions (the hidden body
among them), every test file whose code a covering test runs (its own, a mixin's, a shared helper's), and any
function or fragment elsewhere that holds the hidden body line for line (a copy: boltons vendors
`OrderedMultiDict` in two files) are excluded from a function task's demonstrations. The trained strategies
learn from the project's functions less every function task's body and any copy of one (`_learnable`): the
tests and the other functions around a stub stay, as in a user's repository, where a stub's tests may exist
before its body. A line task's prompt takes fragments from the project's other files (as `generate`, whose
prompt holds the target file already), or with `other_files=False` from any file but never fragments overlapping
the hidden lines.
Samples and records are cached (JSONL, keyed by prompt and parameters), so a run resumes where it stopped.
"""

from __future__ import annotations

import ast
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from rapidfuzz.distance import Levenshtein

from assistant.backends import Backend, Completion, Prompt, SamplingParams
from assistant.backends.prompts import build_line_prompt
from assistant.cache import JsonlCache, cache_key, supersede
from assistant.code.examples import Example
from assistant.code.extract import EXTRACTORS, git_blob_hash
from assistant.core.home import ModuleHome, import_name
from assistant.core.rank import Problem, Ranker
from assistant.core.repair import RepairOptions
from assistant.core.retrieve import Exclude, Hit, Retriever
from assistant.core.spec_tests import tests_source
from assistant.core.stubs import (
    WROTE_NOTHING,
    StubRequest,
    collect_stub,
    plan_fill,
    prepare_stub,
    redraw_empty,
    sample_stubs,
)
from assistant.core.stubs.fill import stub_problem
from assistant.core.target import Target
from assistant.core.tokens import token_counter
from assistant.errors import UsageError
from assistant.evaluate.codegen import auto_pick, completions_json, picks, task_seed
from assistant.evaluate.metrics import bootstrap_ci, paired_difference, pass_at_k
from assistant.evaluate.metrics import interval_cell as _cell
from assistant.evaluate.repo.projects import Project, python_files
from assistant.evaluate.repo.repair import repair_record, tested
from assistant.evaluate.repo.tasks import FunctionTask, LineTask
from assistant.indexing.fragments import fragment_holding, split_fragments
from assistant.indexing.index import Index, TextEncoder, build_index
from assistant.methods.lail import LailConfig
from assistant.pipeline.registry import make_retriever
from assistant.progress import Progress
from assistant.sandbox.project import ProjectLimits

# hybrid is what `assist generate` uses in an untrained repo; tstr and lail are TST^R and LAIL trained on the
# project's own functions less every function task (they learn from docstrings; on line tasks their trained
# encoder searches the fragments); selfracg-init is the generator's own last-token attention (SelfRACG's branch
# before training); selfracg uses the generic adapters (`assist train retriever selfracg --corpus
# DIR`), trained away from the projects: a line task's answer is one of their fragments.
STRATEGIES = ("zero", "bm25", "dense", "hybrid", "tstr", "lail", "selfracg-init", "selfracg")
# A function-task strategy with this suffix (`hybrid+apis`, `zero+apis`) also shows the model the project's functions
# from other files that the target file calls or imports (`generate --apis`).
APIS = "+apis"
# A function-task strategy with this suffix (`hybrid@fragments`) shows the project's 20-line fragments from other
# files instead of demonstrations, retrieved with the code before the body (RepoEval's and SelfRACG's protocol).
FRAGMENTS = "@fragments"
# A function-task strategy with this suffix (`hybrid+file`, `hybrid+file+apis`) may take its demonstrations from the
# target file's other functions too, whole (`generate --own-file`); never the hidden function nor a copy of its body.
OWN_FILE = "+file"
# The last suffix (`zero+attrs`, `hybrid+file+attrs`): the context shows what the stub's class sets on `self` before
# its nearest definitions (stub_context's `attributes`), the statements a long `__init__`'s outline hides.
ATTRS = "+attrs"
TRAINED = ("tstr", "lail")  # trained per project on its functions: they need the function tasks to hold out
# LAIL per project, sized for 2 CPU cores: 128 documented functions labeled against 8 BM25 candidates each
# (1,024 pairs, 10-20 minutes a project with the bf16 labeler); the rest of the paper's recipe as LailConfig's.
REPO_LAIL = LailConfig(candidates=8, queries=128)
VERSUS = ("zero", "bm25", "dense")  # the baselines every strategy is paired with (dense's column only where it ran)
LINE_CONTEXT_TOKENS = 1024  # the file's code before the hidden lines, at most this much
LINE_QUERY_LINES = 20  # the retrieval query of a line task: the last lines before the hidden ones
LINE_MAX_TOKENS = 96
LINE_BATCH = 8  # line tasks decoded together (each with all its strategies' prompts)
TEST_LIMITS = ProjectLimits(timeout_s=30, cpu_s=30, memory_mb=2048)  # a candidate's covering tests


@dataclass
class ProjectIndexes:
    """A project's pristine code indexed twice: its functions (demonstrations) and its 20-line fragments."""

    project: Project
    functions: Index
    fragments: Index
    encoder: TextEncoder


def project_sources(root: Path) -> tuple[list[Example], list[Example]]:
    """The functions and the 20-line fragments of every .py file of a pristine tree (code and tests)."""
    functions: list[Example] = []
    fragments: list[Example] = []
    for rel in python_files(root):
        data = (root / rel).read_bytes()
        text = data.decode("utf-8-sig", errors="replace").replace("\r\n", "\n")
        blob = git_blob_hash(data)
        with contextlib.suppress(SyntaxError):  # a file this Python cannot parse still has fragments
            functions.extend(EXTRACTORS[".py"](text, rel, blob))
        fragments.extend(split_fragments(text, rel, blob))
    return functions, fragments


def index_project(
    project: Project, encoder: TextEncoder, progress: Progress | None = None, cached: bool = True
) -> ProjectIndexes:
    """Functions and fragments of every .py file of the pristine tree (code and tests).

    The first build embeds some 20,000 texts (several minutes on 2 cores); with `cached` the vectors are kept
    beside the project and later runs read them back."""
    functions, fragments = project_sources(project.root)
    source = {"kind": "repo-bench", "name": project.spec.key}
    report = progress or (lambda *a: None)
    # Kept beside the project (a vector is reused while its text and the encoder are the same).
    cache = project.root.parent / "index" if cached else None
    return ProjectIndexes(
        project,
        build_index(functions, encoder, report, source=source, cache=cache and cache / "functions"),
        build_index(fragments, encoder, report, source=source, cache=cache and cache / "fragments"),
        encoder,
    )


class Excluding:
    """A retriever that also leaves out what `exclude` says (the leak control), whatever the caller excludes."""

    def __init__(self, retriever: Retriever, exclude: Exclude) -> None:
        self.retriever = retriever
        self.exclude = exclude

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]:
        def both(example: Example) -> bool:
            return self.exclude(example) or (exclude is not None and exclude(example))

        return self.retriever.search(query, k, both)


def _retriever(
    strategy: str,
    index: Index,
    encoder: TextEncoder,
    held_out: Sequence[FunctionTask] | None = None,
    progress: Progress | None = None,
    functions: Index | None = None,
    generator: str | None = None,
) -> Retriever | None:
    """A strategy's retriever over `index` (None for zero-shot). The trained strategies (tstr, lail) learn from
    the project's functions (`functions`, default `index`) less `held_out`, the project's function tasks, and
    search `index` (its functions, or its fragments for line tasks) with what they learned. `generator`: the
    model the evaluation runs (None: the default); what is trained or loaded is that model's."""
    if strategy in TRAINED:
        if held_out is None:
            raise UsageError(f"{strategy} is trained on the project's functions less its function tasks: list them")
        pool = index if functions is None else functions
        if strategy == "lail":
            return heldout_lail(pool, encoder, held_out, progress=progress, search=index, generator=generator)
        return heldout_tstr(pool, encoder, held_out, search=index)
    if strategy in ("selfracg", "selfracg-init"):
        return _selfracg_retriever(strategy, index, generator, progress)
    return None if strategy == "zero" else make_retriever(strategy, index, encoder, generator, progress)


def generic_adapters(generator: str | None) -> Path:
    """The generic SelfRACG adapters trained for `generator` (None: the default model), what `selfracg` retrieves
    with here; none trained for it is a one-line error (naming the models they were trained for, if any)."""
    from assistant.backends.models import resolve
    from assistant.methods.artifacts import serving_artifact
    from assistant.methods.selfracg import generic_dir  # imports torch: only where selfracg is asked for

    model = generator or resolve(None).name
    how = f"train them for it: `assist train retriever selfracg --corpus DIR --model {model}`"
    adapters = serving_artifact(generic_dir(), model, "generic SelfRACG adapters", how)
    if adapters is None:
        raise UsageError(
            "selfracg here retrieves with the generic SelfRACG adapters, and none are trained: "
            "`assist train retriever selfracg --corpus DIR` (any folder of Python, e.g. the stdlib)"
        )
    return adapters


def _selfracg_retriever(
    strategy: str, index: Index, generator: str | None, progress: Progress | None = None
) -> Retriever:
    """SelfRACG's branch on the evaluated model: trained (`selfracg`), always with the generic adapters, never ones
    kept for this project's pool (those were trained on the pristine project, hidden bodies and line answers
    included); or untrained (`selfracg-init`) over that model itself. Encoding the pool is reported to `progress`."""
    from assistant.methods.selfracg import SelfRacgRetriever  # the INE needs torch: only if asked

    if strategy == "selfracg-init":
        return SelfRacgRetriever.untrained(index, generator, progress)
    return SelfRacgRetriever.for_index(index, generic_adapters(generator), progress)


def shows_attributes(strategy: str) -> bool:
    """Whether a function-task strategy's context shows what the stub's class sets on `self` (`X+attrs`)."""
    return strategy.endswith(ATTRS)


def shows_apis(strategy: str) -> bool:
    """Whether a function-task strategy also shows the functions the stub's file uses (`X+apis`)."""
    return strategy.removesuffix(ATTRS).endswith(APIS)


def shows_own_file(strategy: str) -> bool:
    """Whether a function-task strategy's demonstrations may come from the target file (`X+file`, `X+file+apis`)."""
    return strategy.removesuffix(ATTRS).removesuffix(APIS).endswith(OWN_FILE)


def shows_fragments(strategy: str) -> bool:
    """Whether a function-task strategy shows fragments instead of demonstrations (`X@fragments`,
    `X@fragments+apis`)."""
    return strategy.removesuffix(ATTRS).removesuffix(APIS).endswith(FRAGMENTS)


def retrieval_of(strategy: str) -> str:
    """The retriever a strategy names: `hybrid+apis`, `hybrid+file`, `hybrid+attrs`, `hybrid@fragments` and
    `hybrid@fragments+apis` retrieve as `hybrid`."""
    return strategy.removesuffix(ATTRS).removesuffix(APIS).removesuffix(OWN_FILE).removesuffix(FRAGMENTS)


def check_strategies(names: Sequence[str], task: str) -> None:
    """Refuse an unknown strategy, or `+apis`, `+file`, `+attrs` or `@fragments` where no stub is filled (line and
    retrieval tasks), in one line."""
    unknown = [
        s
        for s in names
        if retrieval_of(s) not in STRATEGIES
        or s.startswith(("zero@", "zero+file"))
        or (shows_own_file(s) and FRAGMENTS in s)  # fragments replace demonstrations: +file would change nothing
    ]
    if not names or unknown:
        choices = ", ".join(STRATEGIES)
        raise UsageError(
            f"unknown strategy {(unknown or [''])[0]!r}; choose from {choices} "
            "(+apis, +file, +attrs or @fragments on function tasks)"
        )
    for suffix, shows, what in (
        (APIS, shows_apis, "shows the functions a stub's file uses"),
        (OWN_FILE, shows_own_file, "fills a stub"),
        (ATTRS, shows_attributes, "fills a stub"),
        (FRAGMENTS, shows_fragments, "fills a stub"),
    ):
        if task != "function" and any(shows(s) for s in names):
            raise UsageError(
                f"{suffix} {what}: it is for function tasks only",
                setting="task:function_only",
                values={"suffix": suffix, "what": what},
            )


def _learnable(index: Index, held_out: Sequence[FunctionTask]) -> Index:
    """A project's functions that overlap no held-out task's span and hold no copy of a held-out body, with their
    vectors: what a trained strategy may learn from."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for task in held_out:
        spans.setdefault(task.path, []).append((task.start, task.end))
    bodies = [_code_lines(task.body) for task in held_out]
    keep = [
        row
        for row, e in enumerate(index.examples)
        if not any(e.start_line <= end and start <= e.end_line for start, end in spans.get(e.path, ()))
        and not any(body in lines for lines in [_code_lines(e.code)] for body in bodies)
    ]
    vectors = np.asarray(index.vectors, dtype=np.float32)[keep]
    return Index([index.examples[row] for row in keep], vectors, meta=dict(index.meta))


def heldout_lail(
    index: Index,
    encoder: TextEncoder,
    held_out: Sequence[FunctionTask],
    config: LailConfig = REPO_LAIL,
    labeler: Backend | None = None,
    progress: Progress | None = None,
    search: Index | None = None,
    generator: str | None = None,
) -> Retriever:
    """LAIL trained on a project's functions less every function task's span, as `assist train retriever
    --method lail` would train it in the user's repo (where the function to fill is a stub), then retrieving
    from the whole pool like tstr, or from `search` (the project's fragments, for line tasks: embedded with the
    trained encoder once, kept beside the artifact).

    The artifact lives in the user cache under the held-out pool's fingerprint, in the folder of the model that
    labels (:func:`~assistant.methods.artifacts.keyed_dir`; an unkeyed one from earlier versions is reused when its
    labeler is that model), and is reused while its config and labeler are the same; labels are cached pair by
    pair, so an interrupted training resumes. The labeler (default: `generator`, the evaluated model, else the
    default one, on the transformers engine, for shared-prefix scoring, in bf16 where the CPU does it natively) is
    loaded only when there is something to train."""
    from assistant.backends.local import local_transformers, resolve_precision
    from assistant.backends.models import encoder_dir, resolve
    from assistant.methods.artifacts import artifact_dir, keyed_dir, read_manifest
    from assistant.methods.lail import LailRetriever, adopt_labels, labeler_record, train_lail

    pool = _learnable(index, held_out)
    base = artifact_dir(pool, "lail")
    if labeler is None:
        precision = resolve_precision("auto")
        model = resolve(generator).name  # LAIL's labels come from the evaluated model, run on this machine
        expected = labeler_record("local", model, precision)
    else:
        model = labeler.model
        expected = labeler_record(labeler.name, labeler.model, getattr(labeler, "precision", "fp32"))

    def fits(folder: Path) -> bool:
        manifest = read_manifest(folder) or {}
        return manifest.get("config") == asdict(config) and manifest.get("labeler") == expected

    directory = next((folder for folder in (keyed_dir(base, model), base) if fits(folder)), None)
    if directory is None:
        directory = keyed_dir(base, model)
        adopt_labels(directory, base)  # labels are keyed by labeler: another model's are never read as these
        (directory / "search_vectors.npz").unlink(missing_ok=True)  # embedded with the encoder about to be replaced
        if labeler is None:
            labeler = local_transformers(model, precision)
        train_lail(pool, encoder, encoder_dir(resolve(None, "encoder")), labeler, config, progress, directory)
    if search is None or search is index:
        return LailRetriever(index, directory, progress=progress)
    return LailRetriever(search, directory, vectors=directory / "search_vectors.npz", progress=progress)


def heldout_tstr(
    index: Index, encoder: TextEncoder, held_out: Sequence[FunctionTask], search: Index | None = None
) -> Retriever:
    """TST^R trained, in memory, on a project's functions less every function task's span.

    In a user's repo the function to fill is a stub, so its body is never among what `assist train retriever`
    learns from; leaving out all the project's tasks (not only the one asked) keeps one model per project. It
    trains in seconds on the index's own vectors (deterministic: seeded) and retrieves from the whole pool (or
    from `search`, embedded by the same encoder: the fragments, for line tasks), where the task's file and
    tests are then excluded like every strategy's."""
    from assistant.methods.tstr import TstrRetriever, train_tstr

    pool = _learnable(index, held_out)
    model, _ = train_tstr(
        pool.examples,
        pool.vectors,
        embedder=encoder.name,
        pool=f"{index.meta.get('source', {}).get('name', 'a project')}: its functions less the benchmark's tasks",
    )
    found = index if search is None else search
    return TstrRetriever(found, encoder, model, np.asarray(found.vectors, dtype=np.float32))


def edit_similarity(a: str, b: str) -> float:
    """1 - Levenshtein distance / the longer length (1.0 for two empty strings)."""
    return float(Levenshtein.normalized_similarity(a, b))


def _normalized(code: str) -> str:
    return "\n".join(line.strip() for line in code.strip().splitlines() if line.strip())


def _code_lines(code: str) -> str:
    """Code's lines stripped of indentation, blank and comment lines dropped, each fenced by newlines: a method
    and its copy at another depth compare equal, and a substring test finds whole lines only."""
    kept = (line.strip() for line in code.splitlines())
    return "\n" + "\n".join(line for line in kept if line and not line.startswith("#")) + "\n"


def copies_of(task: FunctionTask, functions: Sequence[Example]) -> list[Example]:
    """The functions of other, non-test files that hold the task's hidden body line for line."""
    tests = {node.split("::", 1)[0] for node in task.tests}
    wanted = _code_lines(task.body)
    return [e for e in functions if e.path != task.path and e.path not in tests and wanted in _code_lines(e.code)]


def copied_tasks(tasks: Sequence[FunctionTask], functions: Sequence[Example]) -> set[str]:
    """The tasks with a copy (:func:`copies_of`): before the leak control dropped copies, their retrieval
    strategies could be shown the answer."""
    return {task.task_id for task in tasks if copies_of(task, functions)}


def _target(project: Project, path: str, text: str) -> Target:
    """The task's file as the user would have it (the stubbed text), named by its place in the pristine tree."""
    where = project.root / path
    return Target(given=where, path=where, raw=text.encode(), text=text, exists=True, tree=ast.parse(text))


def _completions(data: list[dict]) -> list[Completion]:
    return [
        Completion(
            text=d["text"],
            tokens=d["tokens"],
            finish_reason=d["finish"],
            logprobs=tuple(d["logprobs"]) if d["logprobs"] else None,
        )
        for d in data
    ]


def task_target(task: FunctionTask, project: Project) -> Target:
    """The task's file as the model sees it: its pristine text with the function's body removed."""
    pristine = (project.root / task.path).read_text(encoding="utf-8")
    return _target(project, task.path, task.stubbed(pristine))


def covering_test_files(task: FunctionTask, project: Project) -> set[str]:
    """The files that hold the task's covering tests' code: each test's own file and every test file whose code
    the test ran by the call map. A test inherited from a mixin runs code of another file than its node id names
    (cachetools' `tests/test_lru.py::LRUCacheTest::test_clear` is `CacheTestMixin.test_clear` of
    `tests/__init__.py`), and so does a shared helper or fixture."""
    files = {node.split("::", 1)[0] for node in task.tests}
    for node in task.tests:
        files.update(path for path, _ in project.calls.get(node, ()) if project.is_test_file(path))
    return files


def task_request(
    task: FunctionTask,
    ix: ProjectIndexes,
    target: Target,
    strategy: str,
    retriever: Retriever | None,
    backend: Backend,
    demos: int,
    tests_in_prompt: bool = False,
) -> StubRequest:
    """A function task's prompt under `strategy` (its `retriever` from `_retriever`), with the leak control: the
    hidden function, the files holding the covering tests' code (:func:`covering_test_files`), and copies of the
    hidden body anywhere, are never retrieved nor shown. `tests_in_prompt` lifts it for the covering tests alone:
    their test functions are shown as the stub's specification, as `generate` shows a repo's tests that mention
    a stub (:func:`assistant.core.spec_tests.tests_source`)."""
    test_files = covering_test_files(task, ix.project)
    wanted = _code_lines(task.body)
    # Where copies of the body sit: a 20-line fragment holding only part of one (it crosses a window's edge) is a
    # leak as well, so every fragment overlapping a copy goes too.
    # The hidden function's own span too: +file lets the target file's other functions in.
    hidden = [(task.path, task.start, task.end)]
    hidden += [(e.path, e.start_line, e.end_line) for e in copies_of(task, ix.functions.examples)]

    def leaks(example: Example) -> bool:
        if example.path in test_files or wanted in _code_lines(example.code):
            return True
        return any(p == example.path and s <= example.end_line and example.start_line <= e for p, s, e in hidden)

    excluding = Excluding(retriever, leaks) if retriever is not None else None
    # +apis: the project's functions from other files that the target file uses are shown too; the covering
    # tests' files and copies stay out (leak control), the target file's own functions are in its context.
    definitions = [e for e in ix.functions.examples if not leaks(e)] if shows_apis(strategy) else ()
    # @fragments: the project's fragments of other files than the target's (prepare_stub leaves those out) and the
    # covering tests' (leak control) instead of demonstrations.
    fragments = shows_fragments(strategy)
    return prepare_stub(
        task.qualname,
        backend,
        target,
        retriever=None if fragments else excluding,
        k=demos,
        root=ix.project.root,
        definitions=definitions,
        fragments=excluding if fragments else None,
        own_file=shows_own_file(strategy),
        attributes=shows_attributes(strategy),
        spec_tests=tests_source(ix.project.root, task.tests, count=token_counter(backend)) if tests_in_prompt else "",
    )


def run_function_tasks(
    tasks: Sequence[FunctionTask],
    indexes: dict[str, ProjectIndexes],
    strategies: Sequence[str],
    backend: Backend,
    out: Path,
    *,
    params: SamplingParams,
    demos: int = 4,
    seed: int = 0,
    rankers: Sequence[Ranker] = (),
    limits: ProjectLimits = TEST_LIMITS,
    held_out: Sequence[FunctionTask] | None = None,
    progress: Progress | None = None,
    redraw: bool = False,
    repair: RepairOptions | None = None,
    tests_in_prompt: bool = False,
) -> list[dict]:
    """Run (or resume) the function-level tasks; one record per (task, strategy), also in out/function.jsonl.
    With `redraw`, samples that wrote nothing are drawn once more, as `generate --redraw` does. With `repair`
    (rounds > 0), a task none of whose samples passes its covering tests gets repair rounds, as `generate` runs
    them with tests (:mod:`assistant.evaluate.repo.repair`: the record keeps the first round's result and the
    repaired one apart). `tests_in_prompt`: the covering tests are shown in the prompt (see :func:`task_request`).

    Each distinct completed file is tested once (cached by its text), under `limits`. `held_out`: the functions
    a trained strategy (tstr) never learns from, every function task of the projects (default: `tasks`), so that
    a subset of them trains the same model."""
    report = progress or (lambda stage, done, total: None)
    out.mkdir(parents=True, exist_ok=True)
    run = _FunctionRun(
        backend,
        samples=JsonlCache(out / "function-samples.jsonl"),
        records=JsonlCache(out / "function.jsonl"),
        tests=JsonlCache(out / "function-tests.jsonl"),
        rankers=rankers,
        limits=limits,
        redraw=redraw,
        repair=repair,
    )
    held = tasks if held_out is None else held_out
    retrievers = _function_retrievers(indexes, strategies, held, progress, backend.model)
    results: list[dict] = []
    total = len(tasks) * len(strategies)
    current: dict[tuple[str, str], str] = {}
    # Task by task, every strategy in turn: a run stopped early leaves paired records, not one strategy's.
    # A task's strategies are sampled in one batched call (they share its token limit; each keeps its seed).
    for task in tasks:
        ix = indexes[task.project]
        target = task_target(task, ix.project)
        sample_params = replace(params, seed=task_seed(seed, task.task_id))
        prepared = []
        for strategy in strategies:
            retriever = retrievers[(task.project, strategy)]
            item = _prepare(run, task, ix, target, strategy, retriever, demos, tests_in_prompt, sample_params)
            current[(task.task_id, strategy)] = item.record_key
            prepared.append(item)
        report("function tasks", len(results), total)
        batch = _sample_task(run, prepared, sample_params)
        for item in prepared:
            if item.record_key in run.records:
                results.append(_rescored(run, task, ix.project, target, item))
            else:
                results.append(_function_record(run, task, ix.project, target, item, batch, sample_params))
    supersede(run.records, current)
    report("function tasks", total, total)
    return results


@dataclass(frozen=True)
class _FunctionRun:
    """What every record of a function-task run shares: the backend, the caches in its folder (samples, records,
    the covering tests' verdicts) and the settings (rankers, test limits, redraw, repair)."""

    backend: Backend
    samples: JsonlCache
    records: JsonlCache
    tests: JsonlCache
    rankers: Sequence[Ranker]
    limits: ProjectLimits
    redraw: bool
    repair: RepairOptions | None

    @property
    def repairing(self) -> bool:
        return self.repair is not None and self.repair.rounds > 0


@dataclass(frozen=True)
class _Prepared:
    """One strategy's request for a function task, with its sample and record keys and the seconds it took."""

    strategy: str
    request: StubRequest
    key: str  # its samples in function-samples.jsonl
    record_key: str  # its record in function.jsonl
    seconds: float


@dataclass(frozen=True)
class _Batch:
    """A task's sampling: how many records still to be made use each sample key, the keys sampled or redrawn now,
    and the seconds and backend usage that took."""

    users: dict[str, int]
    fresh: set[str]
    seconds: float
    usage: dict[str, float]


def _function_retrievers(
    indexes: dict[str, ProjectIndexes],
    strategies: Sequence[str],
    held: Sequence[FunctionTask],
    progress: Progress | None,
    generator: str | None = None,
) -> dict[tuple[str, str], Retriever | None]:
    """Each (project, strategy)'s retriever: over the project's fragments with `@fragments`, else its functions;
    a trained one trained for `generator`, the evaluated model."""
    return {
        (name, strategy): _retriever(
            retrieval_of(strategy),
            ix.fragments if shows_fragments(strategy) else ix.functions,
            ix.encoder,
            [t for t in held if t.project == name],
            progress=progress,
            functions=ix.functions,
            generator=generator,
        )
        for name, ix in indexes.items()
        for strategy in strategies
    }


def _prepare(
    run: _FunctionRun,
    task: FunctionTask,
    ix: ProjectIndexes,
    target: Target,
    strategy: str,
    retriever: Retriever | None,
    demos: int,
    tests_in_prompt: bool,
    sample_params: SamplingParams,
) -> _Prepared:
    """A strategy's request for the task (:func:`task_request`) and the keys of its samples and its record."""
    started = time.perf_counter()
    request = task_request(task, ix, target, strategy, retriever, run.backend, demos, tests_in_prompt)
    key = cache_key(
        kind="repo-function",
        backend=run.backend.identity.kind,
        model=run.backend.model,
        prompt=request.prompt.to_json(),
        params={**sample_params.__dict__, "max_new_tokens": request.limit},
    )
    # With redraw the records differ from those without (the first samples are the same).
    extra: dict[str, object] = {"redraw": 1} if run.redraw else {}
    if run.repair is not None and run.repair.rounds > 0:  # a record with repair holds more than one without
        extra["repair"] = [run.repair.rounds, run.repair.n, run.repair.budget_s]
    record_key = cache_key(kind="record", sample=key, task=task.task_id, strategy=strategy, **extra)
    return _Prepared(strategy, request, key, record_key, time.perf_counter() - started)


def _sample_task(run: _FunctionRun, prepared: Sequence[_Prepared], sample_params: SamplingParams) -> _Batch:
    """Sample, in one batched call, the prompts that records still to be made need and the cache lacks
    (strategies that built the same prompt share its samples); with redraw, draw once more the samples that
    wrote nothing."""
    todo: dict[str, StubRequest] = {}  # by sample key
    users: dict[str, int] = {}
    for item in prepared:
        if item.record_key not in run.records:
            users[item.key] = users.get(item.key, 0) + 1
            if item.key not in run.samples:
                todo[item.key] = item.request
    started = time.perf_counter()
    usage_before = run.backend.usage.to_json()
    sampled = sample_stubs(list(todo.values()), run.backend, [sample_params] * len(todo)) if todo else []
    for key, (completions, limit) in zip(todo, sampled, strict=True):
        run.samples.put(key, {"completions": completions_json(completions), "limit": limit})
    fresh = set(todo)
    if run.redraw:
        fresh.update(_redraw_task(run, prepared, sample_params))
    return _Batch(users, fresh, time.perf_counter() - started, run.backend.usage.since(usage_before))


def _redraw_task(run: _FunctionRun, prepared: Sequence[_Prepared], sample_params: SamplingParams) -> set[str]:
    """The samples that wrote nothing, drawn once more as `generate` does (:func:`redraw_empty`), for the records
    still to be made; cached apart from the first samples, so first samples cached before redrawing existed are
    kept as they are. Returns the sample keys that got a redraw."""
    due = dict(_redraws_due(prepared, run.records, run.samples))
    if not due:
        return set()
    firsts = [_cached(run.samples, key, request) for key, request in due.items()]
    drawn = redraw_empty(
        list(due.values()),
        [_completions(data) for data, _ in firsts],
        run.backend,
        [replace(sample_params, max_new_tokens=limit) for _, limit in firsts],
    )
    fresh = set()
    for key, (completions, at) in zip(due, drawn, strict=True):
        run.samples.put(_redraw_key(key), {"at": at, "completions": completions_json([completions[n] for n in at])})
        fresh.update([key] if at else [])
    return fresh


def _rescored(run: _FunctionRun, task: FunctionTask, project: Project, target: Target, item: _Prepared) -> dict:
    """A record already made; a ranker added to a finished folder picks from the cached samples: nothing is
    resampled (a record kept without its samples is given as it is)."""
    record = run.records.get(item.record_key)
    missing = [r for r in run.rankers if r.name not in record.get("picks", {})]
    if not (missing and item.key in run.samples):
        return record
    completions = _completions(_cached(run.samples, item.key, item.request)[0])
    completions, _ = _redrawn(run.samples, item.key, completions) if run.redraw else (completions, [])
    _, texts = _read_samples(task, item.request, completions, target, project, run.tests, run.limits)
    scores: dict[str, list[float | None]] = {}
    problem = _problem(item.request, task, project, texts)
    record = {
        **record,
        "picks": {**record["picks"], **picks(record["samples"], problem, missing, scores=scores)},
        "scores": {**record.get("scores", {}), **scores},
    }
    run.records.put(item.record_key, record)
    return record


def _function_record(
    run: _FunctionRun,
    task: FunctionTask,
    project: Project,
    target: Target,
    item: _Prepared,
    batch: _Batch,
    sample_params: SamplingParams,
) -> dict:
    """A strategy's record of the task, made and kept: each sample's body tested, the rankers' picks, and with
    repair, the repair rounds."""
    started = time.perf_counter()
    data, limit = _cached(run.samples, item.key, item.request)
    first = _completions(data)
    completions, redrawn = _redrawn(run.samples, item.key, first) if run.redraw else (first, [])
    # The task's sampling time and usage (first samples and redraws) are shared evenly by the prompts sampled, a
    # prompt's share by the strategies that built it (bm25 and hybrid often retrieve the same demonstrations).
    share = 1 / len(batch.fresh) / batch.users[item.key] if item.key in batch.fresh else 0.0
    sampled_s = item.seconds + batch.seconds * share
    tests_started = time.perf_counter()
    samples, texts = _read_samples(
        task, item.request, completions, target, project, run.tests, run.limits, failure=run.repairing
    )
    testing_s = time.perf_counter() - tests_started
    superseded = _superseded(_completions(data), item.request, sample_params)
    scores: dict[str, list[float | None]] = {}
    ranking_started = time.perf_counter()
    picked = picks(samples, _problem(item.request, task, project, texts), run.rankers, scores=scores)
    ranking_s = time.perf_counter() - ranking_started
    request = item.request
    record = {
        "task_id": task.task_id,
        "project": task.project,
        "strategy": item.strategy,
        "demonstrations": [hit.example.source for hit in request.hits],
        **({} if request.fragments is None else {"fragments": [h.example.source for h in request.fragments]}),
        "prompt_tokens": request.prompt_tokens,
        "max_new_tokens": limit,
        "n": len(samples) - len(superseded),  # what pass@k counts: each retry in place of its cut-off sample
        "superseded": superseded,
        "redrawn": redrawn,  # the samples (by number) that wrote nothing and were drawn once more
        "sample_key": item.key,  # its samples in function-samples.jsonl (the redraws under _redraw_key(key))
        "correct": sum(s["passed"] for s in samples),
        "samples": samples,
        "picks": picked,
        "scores": scores,  # each ranker's score of each sample (None: unparsable)
        "usage": {name: value * share for name, value in batch.usage.items()} if share else {},
        "seconds": round(sampled_s + time.perf_counter() - started, 2),
        "sampling_seconds": round(sampled_s, 2),
        "testing_seconds": round(testing_s, 2),  # the covering tests (cached verdicts cost nothing)
        "ranking_seconds": round(ranking_s, 2),  # the rankers' picks (agree's model calls and runs)
    }
    if run.repairing:
        fields = repair_record(
            task, request, completions, target, project, run.backend, sample_params, run.tests, run.limits, run.repair
        )
        record.update(fields, testing_seconds=record["testing_seconds"] + fields["testing_seconds"])
        record["seconds"] = round(record["seconds"] + fields["repair_seconds"], 2)
    run.records.put(item.record_key, record)
    return record


def _redraw_key(key: str) -> str:
    return cache_key(kind="repo-function-redraw", sample=key)


def _redraws_due(
    prepared: Sequence[_Prepared], records: JsonlCache, samples_cache: JsonlCache
) -> list[tuple[str, StubRequest]]:
    """The sample keys (with a request that built them) whose redraws a record still to be made needs."""
    due: dict[str, StubRequest] = {}
    for item in prepared:
        if item.record_key not in records and _redraw_key(item.key) not in samples_cache:
            due.setdefault(item.key, item.request)
    return list(due.items())


def _redrawn(samples_cache: JsonlCache, key: str, completions: list[Completion]) -> tuple[list[Completion], list[int]]:
    """The first samples with the cached redraws (:func:`assistant.core.stubs.redraw_empty`) in their places,
    and those places."""
    cached = samples_cache.get(_redraw_key(key)) if _redraw_key(key) in samples_cache else {"at": [], "completions": []}
    redrawn = list(completions)
    for number, completion in zip(cached["at"], _completions(cached["completions"]), strict=True):
        redrawn[number] = completion
    return redrawn, list(cached["at"])


def _superseded(first: Sequence[Completion], request: StubRequest, params: SamplingParams) -> list[int]:
    """The first samples (by number) that were cut off and drawn again at twice the limit: when none of the
    `params.n` gave a body, :func:`~assistant.core.stubs.sample_stubs` appends a retry for each cut-off one (but
    not a greedy one going round in a loop), read here from the samples as drawn, before any redraw; each retry
    takes its place (a record counting both would give a passing retry half a sample's credit)."""
    n = params.n
    if len(first) <= n:
        return []
    retried = []
    for number, completion in enumerate(first[:n]):
        cut = collect_stub([completion], request.stub, request.prefix, request.existing)[2]
        if cut and (params.temperature > 0 or not cut[0].repeating):
            retried.append(number)
    return retried[: len(first) - n]


def _cached(samples_cache: JsonlCache, key: str, request: StubRequest) -> tuple[list[dict], int]:
    """A prompt's cached completions (as JSON) and the token limit they ended with."""
    cached = samples_cache.get(key)
    if isinstance(cached, list):  # written before the limit was kept beside the samples
        return cached, request.limit
    return cached["completions"], cached["limit"]


def _read_samples(
    task: FunctionTask,
    request: StubRequest,
    completions: Sequence[Completion],
    target: Target,
    project: Project,
    tests_cache: JsonlCache,
    limits: ProjectLimits,
    failure: bool = False,
) -> tuple[list[dict], dict[int, str]]:
    """Each sample's record (its body put into the file and the covering tests run on it, each distinct file
    once, cached by its text), and the whole file of each sample that gave a body, by sample number. With
    `failure` (repair rounds follow), a failing run's report is kept with its verdict."""
    samples = []
    texts: dict[int, str] = {}
    for number, completion in enumerate(completions):
        kept, dropped, cut = collect_stub([completion], request.stub, request.prefix, request.existing)
        sample: dict = {"tokens": completion.tokens, "cut_off": bool(cut)}
        lp = completion.logprobs
        sample["logprob"] = sum(lp) / len(lp) if lp else None
        if not kept:
            reason = next(iter(dropped), "unreadable")
            sample.update(code="", parsed=False, passed=False, status=reason, em=False, es=0.0)
            samples.append(sample)
            continue
        candidate, taken = kept[0]
        new_text = plan_fill(target, request.stub, taken, project.root).new
        texts[number] = new_text
        body = taken.body
        verdict = tested(task, project, new_text, tests_cache, limits, failure)
        sample.update(
            code=candidate.code,
            parsed=True,
            passed=verdict["status"] == "passed",
            status=verdict["status"],
            other_functions=list(candidate.dropped),
            em=_normalized(body) == _normalized(task.body),
            es=edit_similarity(_normalized(body), _normalized(task.body)),
        )
        samples.append(sample)
    return samples, texts


def _problem(request: StubRequest, task: FunctionTask, project: Project, texts: dict[int, str]) -> Problem:
    """What the rankers see: the requirement and prompt as `generate` gives them (:func:`stub_problem`), and the
    candidates' files in the project (where `agree` runs them, with only the tests the model writes: never the
    task's own)."""
    module = import_name(task.path, project.spec.pythonpath)
    home = None
    if module is not None:
        home = ModuleHome(
            project.root, task.path, module, task.qualname, project.python, project.spec.pythonpath, None, texts
        )
    return stub_problem(request, home)


def _before(lines: list[str], line: int, budget: int, count: Callable[[str], int]) -> str:
    """The file's lines before `line`, as many of the last ones as fit `budget` tokens."""
    kept: list[str] = []
    used = 0
    for text in reversed(lines[: line - 1]):
        cost = count(text) + 1
        if kept and used + cost > budget:
            break
        kept.append(text)
        used += cost
    return "\n".join(reversed(kept)) + "\n"


def _first_lines(completion: str, count: int) -> list[str]:
    """The completion's first `count` lines (up to a closing fence)."""
    text = completion.split("```", 1)[0]
    return text.splitlines()[:count]


def retrieval_ranks(hits: Sequence[Hit], positive: Example | None) -> int | None:
    """1-based rank of the positive fragment among `hits`, None when absent."""
    if positive is None:
        return None
    for rank, hit in enumerate(hits, start=1):
        if hit.example.path == positive.path and hit.example.start_line == positive.start_line:
            return rank
    return None


def _line_query(task: LineTask, ix: ProjectIndexes) -> tuple[list[str], str, Example | None]:
    """A line task's file lines, its retrieval query (the lines before the hidden ones) and its positive fragment
    (the one holding the first hidden line, RepoEval's definition)."""
    lines = (ix.project.root / task.path).read_text(encoding="utf-8").splitlines()
    query = "\n".join(lines[max(0, task.line - 1 - LINE_QUERY_LINES) : task.line - 1])
    return lines, query, fragment_holding(ix.fragments.examples, task.path, task.line)


def _fragment_retriever(
    strategy: str,
    ix: ProjectIndexes,
    held_out: Sequence[FunctionTask] | None,
    progress: Progress | None,
    generator: str | None = None,
) -> Retriever | None:
    """A strategy's retriever over a project's fragments (a trained one learns from its functions, for
    `generator`, the evaluated model)."""
    mine = None if held_out is None else [t for t in held_out if t.project == ix.project.name]
    return _retriever(strategy, ix.fragments, ix.encoder, mine, progress, functions=ix.functions, generator=generator)


def run_line_retrieval(
    tasks: Sequence[LineTask],
    indexes: dict[str, ProjectIndexes],
    strategies: Sequence[str],
    progress: Progress | None = None,
    held_out: Sequence[FunctionTask] | None = None,
    generator: str | None = None,
) -> list[dict]:
    """Retrieval alone on the line tasks (no generation, so cheap enough for every task and retriever): the rank
    of the positive fragment in each retriever's top 10, one record per (task, retriever). `held_out`: every
    function task of the projects, what the trained strategies never learn from (needed only for them);
    `generator`: the model they are trained for (None: the default)."""
    report = progress or (lambda stage, done, total: None)
    named = [s for s in strategies if s != "zero"]
    retrievers = {
        (name, s): _fragment_retriever(s, ix, held_out, progress, generator)
        for name, ix in indexes.items()
        for s in named
    }
    records = []
    for done, task in enumerate(tasks):
        report("retrieval", done, len(tasks))
        _, query, positive = _line_query(task, indexes[task.project])
        for strategy in named:
            retriever = retrievers[(task.project, strategy)]
            assert retriever is not None
            started = time.perf_counter()
            rank = retrieval_ranks(retriever.search(query, 10), positive)
            seconds = time.perf_counter() - started
            record = {"task_id": task.task_id, "project": task.project, "strategy": strategy, "rank": rank}
            records.append({**record, "seconds": round(seconds, 4)})
    report("retrieval", len(tasks), len(tasks))
    return records


def summarize_retrieval(records: Sequence[dict]) -> list[dict]:
    """Per retriever: R@1, R@10, MRR@10 of the positive fragment, MRR@10's paired difference against bm25 and
    dense, and the median seconds per query."""
    mrr = _per_task(records, lambda r: 1.0 / r["rank"] if r["rank"] else 0.0)
    rows = []
    for strategy in dict.fromkeys(r["strategy"] for r in records):
        mine = sorted((r for r in records if r["strategy"] == strategy), key=lambda r: r["task_id"])
        ranks = [r["rank"] for r in mine]
        row: dict = {"strategy": strategy, "tasks": len(mine)}
        row["r@1"] = bootstrap_ci([float(rank == 1) for rank in ranks])
        row["r@10"] = bootstrap_ci([float(rank is not None and rank <= 10) for rank in ranks])
        row["mrr@10"] = bootstrap_ci([1.0 / rank if rank else 0.0 for rank in ranks])
        for versus in ("bm25", "dense"):
            if strategy != versus and versus in mrr:
                row[f"vs_{versus}"] = paired_difference(mrr[strategy], mrr[versus])
        seconds = sorted(r["seconds"] for r in mine)
        row["query_ms"] = 1000 * seconds[len(seconds) // 2] if seconds else 0.0
        rows.append(row)
    return rows


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A markdown table: the header's cells, the rule under them, then a row per list of cells."""
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(row) + " |" for row in body]
    )


def retrieval_table(rows: Sequence[dict]) -> str:
    """R@1, R@10 and MRR@10 (0-1, 95% intervals), MRR@10's paired difference against bm25 (and dense, where
    it ran), and the median milliseconds a task took: two searches (the top 10 for the rank, then the
    demonstrations without the task's own lines), each encoding the query, and its prompt."""
    versus = [v for v in ("bm25", "dense") if v == "bm25" or any(f"vs_{v}" in r for r in rows)]
    header = ["retriever", "tasks", "R@1", "R@10", "MRR@10", *(f"MRR@10 vs {v}" for v in versus), "ms/task"]
    body = [
        [f"{r['strategy']}", f"{r['tasks']}", *(_cell(r[m], 1, 3) for m in ("r@1", "r@10", "mrr@10"))]
        + [_cell(r.get(f"vs_{v}"), 1, 3, signed=True) for v in versus]
        + [f"{r['query_ms']:.1f}"]
        for r in rows
    ]
    return markdown_table(header, body)


def run_line_tasks(
    tasks: Sequence[LineTask],
    indexes: dict[str, ProjectIndexes],
    strategies: Sequence[str],
    backend: Backend,
    out: Path,
    *,
    demos: int = 4,
    batch: int = LINE_BATCH,
    other_files: bool = True,
    held_out: Sequence[FunctionTask] | None = None,
    progress: Progress | None = None,
) -> list[dict]:
    """Run (or resume) the line-level tasks, greedy (as RepoEval); one record per (task, strategy).

    The prompt's fragments come from the project's other files (`other_files`: the prompt holds the target
    file's code before the cut already, and `generate` leaves the target file out too), else from any file
    except fragments that overlap the hidden lines. Retrieval metrics rank every fragment either way.

    `batch` tasks at a time have all their strategies' prompts decoded together when the backend batches
    prompts (greedy decoding: a prompt's continuation does not depend on its neighbours, up to the rounding of
    batched arithmetic). `held_out`: every function task of the projects, which the trained strategies (tstr,
    lail) never learn from; they are trained on the functions and search the fragments with what they learned.
    """
    report = progress or (lambda stage, done, total: None)
    out.mkdir(parents=True, exist_ok=True)
    samples_cache = JsonlCache(out / "line-samples.jsonl")
    records = JsonlCache(out / "line.jsonl")
    count = token_counter(backend)
    retrievers = {
        (name, strategy): _fragment_retriever(strategy, ix, held_out, progress, backend.model)
        for name, ix in indexes.items()
        for strategy in strategies
    }
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=LINE_MAX_TOKENS, seed=0)
    size = max(1, batch) if backend.batches_prompts else 1
    results: list[dict] = []
    total = len(tasks) * len(strategies)
    current: dict[tuple[str, str], str] = {}
    for first in range(0, len(tasks), size):
        prepared: list[_LinePrepared] = []
        for task in tasks[first : first + size]:
            read = _line_query(task, indexes[task.project])
            for strategy in strategies:
                retriever = retrievers[(task.project, strategy)]
                item = _line_prepare(task, strategy, retriever, read, backend, params, count, demos, other_files)
                current[(task.task_id, strategy)] = item.record_key
                prepared.append(item)
        todo = {
            item.key: item.prompt
            for item in prepared
            if item.record_key not in records and item.key not in samples_cache
        }
        report("line tasks", len(results), total)
        started = time.perf_counter()
        if todo:
            sampled = backend.sample_batch(list(todo.values()), params)
            for key, completions in zip(todo, sampled, strict=True):
                samples_cache.put(key, completions_json(completions))
        share = (time.perf_counter() - started) / max(1, len(todo))  # the batch's time, shared evenly by prompt
        users = {key: sum(1 for i in prepared if i.key == key and i.record_key not in records) for key in todo}
        for item in prepared:
            if item.record_key in records:
                results.append(records.get(item.record_key))
                continue
            completion = _completions(samples_cache.get(item.key))[0]
            seconds = item.seconds + (share / users[item.key] if item.key in todo else 0.0)
            record = _line_record(item, completion, backend.count_tokens(item.prompt), seconds)
            records.put(item.record_key, record)
            results.append(record)
    supersede(records, current)
    report("line tasks", total, total)
    return results


@dataclass(frozen=True)
class _LinePrepared:
    """One strategy's prompt for a line task: its sample and record keys, the positive fragment's rank, the
    fragments shown and the seconds retrieval and the prompt took."""

    task: LineTask
    strategy: str
    prompt: Prompt
    key: str
    record_key: str
    rank: int | None
    hits: list[Hit]
    seconds: float


def _line_prepare(
    task: LineTask,
    strategy: str,
    retriever: Retriever | None,
    read: tuple[list[str], str, Example | None],
    backend: Backend,
    params: SamplingParams,
    count: Callable[[str], int],
    demos: int,
    other_files: bool,
) -> _LinePrepared:
    """A strategy's prompt for a line task (`read`: its file's lines, query and positive, :func:`_line_query`):
    the file before the hidden lines and `demos` retrieved fragments; the positive's rank among the top 10."""
    lines, query, positive = read
    last = task.line + len(task.target) - 1
    started = time.perf_counter()
    rank = None
    hits: list[Hit] = []
    if retriever is not None:
        # Retrieval is measured over every fragment (the positive holds the hidden line, as in RepoEval); the
        # prompt never gets fragments that overlap the hidden lines.
        rank = retrieval_ranks(retriever.search(query, 10), positive)

        def excluded(e: Example) -> bool:
            same = e.path == task.path
            return same if other_files else same and e.start_line <= last and e.end_line >= task.line

        hits = retriever.search(query, demos, excluded) if demos > 0 else []
    prompt = build_line_prompt(
        task.path,
        _before(lines, task.line, LINE_CONTEXT_TOKENS, count),
        [hit.example for hit in reversed(hits)],  # most similar last, nearest the request
    )
    key = cache_key(
        kind="repo-line",
        backend=backend.identity.kind,
        model=backend.model,
        prompt=prompt.to_json(),
        params=params.__dict__,
    )
    record_key = cache_key(kind="record", sample=key, task=task.task_id, strategy=strategy, rank=rank)
    return _LinePrepared(task, strategy, prompt, key, record_key, rank, hits, time.perf_counter() - started)


def _line_record(item: _LinePrepared, completion: Completion, prompt_tokens: int, seconds: float) -> dict:
    """A strategy's record of a line task: the lines written against the hidden ones (exact match, edit
    similarity), the positive's rank and the fragments shown."""
    task = item.task
    written = _first_lines(completion.text, len(task.target))
    hypothesis = _normalized("\n".join(written))
    reference = _normalized("\n".join(task.target))
    return {
        "task_id": task.task_id,
        "project": task.project,
        "strategy": item.strategy,
        "prompt_tokens": prompt_tokens,
        "fragments": [hit.example.source for hit in item.hits],
        "rank": item.rank,
        "written": written,
        "em": hypothesis == reference,
        "es": edit_similarity(hypothesis, reference),
        "seconds": round(seconds, 2),
    }


def _per_task(records: Sequence[dict], value: Callable[[dict], float]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for r in records:
        table.setdefault(r["strategy"], {})[r["task_id"]] = value(r)
    return table


def _picked_passes(record: dict, ranker: str) -> bool:
    pick = auto_pick(record) if ranker == "auto" else record["picks"].get(ranker)
    return pick is not None and bool(record["samples"][pick]["passed"])


def summarize_functions(
    records: Sequence[dict], ks: Sequence[int] = (1, 5), versus: Sequence[str] = VERSUS
) -> list[dict]:
    """Per strategy: pass@k, the first and logprob picks, oracle, EM and ES (over samples), seconds per task;
    with pass@1's paired difference against `versus` (zero-shot, bm25 and dense, where run) on the tasks both
    ran. Where every record holds agree's scores: the agree and auto picks, each pick against the first sample,
    and the auto pick (what `generate` shows first) against zero-shot's and bm25's."""
    pass1 = _per_task(records, lambda r: pass_at_k(r["n"], r["correct"], 1))
    with_agree = all("agree" in r["picks"] for r in records)
    auto = _per_task(records, lambda r: float(_picked_passes(r, "auto"))) if with_agree else {}
    rows = []
    for strategy in dict.fromkeys(r["strategy"] for r in records):
        mine = sorted((r for r in records if r["strategy"] == strategy), key=lambda r: r["task_id"])
        row: dict = {"strategy": strategy, "tasks": len(mine)}
        for k in ks:
            row[f"pass@{k}"] = bootstrap_ci([pass_at_k(r["n"], r["correct"], k) for r in mine if r["n"] >= k])
        measured = ["first", "logprob", *(["agree", "auto"] if with_agree else [])]
        for ranker in [*measured, "oracle"]:
            row[ranker] = bootstrap_ci([float(_picked_passes(r, ranker)) for r in mine])
        if "agree" in measured:  # each ranker against the first sample, paired by task
            first = {r["task_id"]: float(_picked_passes(r, "first")) for r in mine}
            for ranker in ("logprob", "agree", "auto"):
                mine_picks = {r["task_id"]: float(_picked_passes(r, ranker)) for r in mine}
                row[f"{ranker}_vs_first"] = paired_difference(mine_picks, first)
        row["em"] = bootstrap_ci([sum(s["em"] for s in r["samples"]) / max(1, r["n"]) for r in mine])
        row["es"] = bootstrap_ci([sum(s["es"] for s in r["samples"]) / max(1, r["n"]) for r in mine])
        row["cut_off"] = sum(s.get("cut_off", False) for r in mine for s in r["samples"])
        row["samples"] = sum(len(r["samples"]) for r in mine)
        row["wrote_nothing"] = sum(s.get("status") in WROTE_NOTHING for r in mine for s in r["samples"])
        row["redrawn"] = sum(len(r.get("redrawn", ())) for r in mine)
        row["seconds_per_task"] = sum(r["seconds"] for r in mine) / max(1, len(mine))
        if mine and all("tests_repaired" in r for r in mine):
            row.update(_repair_summary(mine))
        for base in versus:
            if strategy != base and base in pass1:
                row[f"vs_{base}"] = paired_difference(pass1.get(strategy, {}), pass1[base])
            if strategy != base and base in auto and base in ("zero", "bm25"):
                row[f"auto_vs_{base}"] = paired_difference(auto[strategy], auto[base])
        rows.append(row)
    return rows


def _repair_summary(mine: Sequence[dict]) -> dict:
    """With the covering tests visible: the share of tasks where a first-round sample passed (what `--apply`
    writes; nothing written counts as a miss) and where one passed after the repair rounds, their paired
    difference, and the mean seconds of sampling, testing and repair per task."""
    first = {r["task_id"]: float(r["tests_first"]) for r in mine}
    repaired = {r["task_id"]: float(r["tests_repaired"]) for r in mine}
    count = max(1, len(mine))
    return {
        "tests_first": bootstrap_ci(list(first.values())),
        "tests_repaired": bootstrap_ci(list(repaired.values())),
        "repaired_vs_first": paired_difference(repaired, first),
        "repair_rounds": sum(len(r["repair"]["rounds"]) for r in mine) / count,
        "sampling_s": sum(r.get("sampling_seconds", 0.0) for r in mine) / count,
        "ranking_s": sum(r.get("ranking_seconds", 0.0) for r in mine) / count,
        "testing_s": sum(r.get("testing_seconds", 0.0) for r in mine) / count,
        "repair_s": sum(r.get("repair_seconds", 0.0) for r in mine) / count,
    }


def summarize_lines(records: Sequence[dict]) -> list[dict]:
    """Per strategy: EM, ES, Recall@1/10 and MRR@10 of the positive fragment; ES's paired difference against
    zero-shot, bm25 and dense (where run)."""
    es = _per_task(records, lambda r: r["es"])
    rows = []
    for strategy in dict.fromkeys(r["strategy"] for r in records):
        mine = sorted((r for r in records if r["strategy"] == strategy), key=lambda r: r["task_id"])
        row: dict = {"strategy": strategy, "tasks": len(mine)}
        row["em"] = bootstrap_ci([float(r["em"]) for r in mine])
        row["es"] = bootstrap_ci([r["es"] for r in mine])
        if strategy != "zero":
            ranks = [r["rank"] for r in mine]
            row["r@1"] = bootstrap_ci([float(rank == 1) for rank in ranks])
            row["r@10"] = bootstrap_ci([float(rank is not None and rank <= 10) for rank in ranks])
            row["mrr@10"] = bootstrap_ci([1.0 / rank if rank else 0.0 for rank in ranks])
        row["seconds_per_task"] = sum(r["seconds"] for r in mine) / max(1, len(mine))
        for versus in VERSUS:
            if strategy != versus and versus in es:
                row[f"vs_{versus}"] = paired_difference(es.get(strategy, {}), es[versus])
        rows.append(row)
    return rows


def _versus(rows: Sequence[dict]) -> list[str]:
    """The baselines a table pairs with: zero-shot and bm25 always, any other where some row was paired with it."""
    paired = [key[3:] for r in rows for key in r if key.startswith("vs_")]
    return [v for v in dict.fromkeys(["zero", "bm25", *VERSUS, *paired]) if v in ("zero", "bm25") or v in paired]


def function_table(rows: Sequence[dict]) -> str:
    """The function-level table (percent, 95% bootstrap intervals; differences paired by task), and where agree
    was measured, each ranker's pick against the first sample's."""
    versus = _versus(rows)
    header = ["strategy", "tasks", "pass@1", "pass@5", "first pick", "logprob pick", "oracle", "EM", "ES"]
    header += [f"pass@1 vs {v}" for v in versus] + ["cut off", "wrote nothing (redrawn)", "s/task"]
    body = [
        [f"{r['strategy']}", f"{r['tasks']}", _cell(r.get("pass@1")), _cell(r.get("pass@5"))]
        + [_cell(r[key]) for key in ("first", "logprob", "oracle", "em", "es")]
        + [_cell(r.get(f"vs_{v}"), signed=True) for v in versus]
        + [f"{r['cut_off']}", f"{_share(r['wrote_nothing'], r['samples'])} ({r['redrawn']})"]
        + [f"{r['seconds_per_task']:.1f}"]
        for r in rows
    ]
    parts = [markdown_table(header, body)]
    repaired = [r for r in rows if "tests_repaired" in r]
    if repaired:
        header = ["strategy", "first round", "after repair", "repair vs first", "rounds/task", "sampling s"]
        header += ["ranking s", "tests s", "repair s"]
        body = [
            [f"{r['strategy']}", _cell(r["tests_first"]), _cell(r["tests_repaired"])]
            + [_cell(r["repaired_vs_first"], signed=True), f"{r['repair_rounds']:.2f}"]
            + [f"{r[key]:.1f}" for key in ("sampling_s", "ranking_s", "testing_s", "repair_s")]
            for r in repaired
        ]
        parts += [
            "",
            "With the covering tests visible (what `assist generate --apply` writes: the first sample that passes "
            "them, else nothing, a miss), before and after the repair rounds; seconds per task:",
            "",
            markdown_table(header, body),
        ]
    ranked = [r for r in rows if "agree" in r]
    if ranked:
        against = [v for v in ("zero", "bm25") if any(f"auto_vs_{v}" in r for r in ranked)]
        header = ["strategy", "first", "logprob", "agree", "auto", "oracle", "logprob vs first", "agree vs first"]
        header += ["auto vs first"] + [f"auto vs {v}" for v in against]
        versus_first = ("logprob_vs_first", "agree_vs_first", "auto_vs_first")
        body = [
            [f"{r['strategy']}"]
            + [_cell(r[key]) for key in ("first", "logprob", "agree", "auto", "oracle")]
            + [_cell(r[key], signed=True) for key in versus_first]
            + [_cell(r.get(f"auto_vs_{v}"), signed=True) for v in against]
            for r in ranked
        ]
        parts += [
            "",
            "Picking one candidate without the hidden tests (auto = agree, then logprob, as `generate` ranks a "
            "function's stub; agree runs the model's tests on each candidate in its module, and leaves methods to "
            "logprob):",
            "",
            markdown_table(header, body),
        ]
    return "\n".join(parts)


def _share(count: int, total: int) -> str:
    """`count` of `total`, and the percentage."""
    return f"{count} ({100 * count / total:.1f}%)" if total else str(count)


def line_table(rows: Sequence[dict]) -> str:
    """The line-level table: EM and ES (percent), the positive fragment's R@1, R@10 and MRR@10 (0-1)."""
    versus = _versus(rows)
    header = ["strategy", "tasks", "EM", "ES", *(f"ES vs {v}" for v in versus), "R@1", "R@10", "MRR@10", "s/task"]
    body = [
        [f"{r['strategy']}", f"{r['tasks']}", _cell(r["em"]), _cell(r["es"])]
        + [_cell(r.get(f"vs_{v}"), signed=True) for v in versus]
        + [_cell(r.get(m), 1, 3) for m in ("r@1", "r@10", "mrr@10")]
        + [f"{r['seconds_per_task']:.1f}"]
        for r in rows
    ]
    return markdown_table(header, body)


def project_table(records: Sequence[dict], metric: str) -> str:
    """Per project and strategy: the tasks and the mean of `metric` (pass@1 for functions, ES for lines), in
    percent; where retrieval helps and where it does not is often a matter of the project."""
    value: Callable[[dict], float] = (
        (lambda r: pass_at_k(r["n"], r["correct"], 1)) if metric == "pass@1" else (lambda r: float(r[metric]))
    )
    strategies = list(dict.fromkeys(r["strategy"] for r in records))
    projects = sorted({r["project"] for r in records})
    lines = [f"| project | tasks | {' | '.join(strategies)} |", "|" + "---|" * (2 + len(strategies))]
    for project in projects:
        cells = []
        for strategy in strategies:
            mine = [value(r) for r in records if r["project"] == project and r["strategy"] == strategy]
            cells.append(f"{100 * sum(mine) / len(mine):.1f}" if mine else "")
        tasks = len({r["task_id"] for r in records if r["project"] == project})
        lines.append(f"| {project} | {tasks} | {' | '.join(cells)} |")
    return "\n".join(lines)
