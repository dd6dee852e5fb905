"""`assist eval ...`: the evaluation harness's commands (a thin layer over `assistant.evaluate`)."""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from assistant.config import DEFAULT_TEMPERATURE, DEFAULT_TOP_P, MAX_NEW_TOKENS_LIMIT, MAX_REPAIR, REPAIR_N, Settings
from assistant.datasets import is_mbpp, parse_dataset
from assistant.errors import UsageError
from assistant.paths import atomic_write_text
from assistant.ui.console import ProgressUI, command, err, out, show_progress
from assistant.ui.eval_options import (
    ALL_TASKS,
    Batch,
    CandidateRuns,
    CodegenRankers,
    Demos,
    DiscriminatorOutDir,
    DocLimit,
    DocStrategies,
    DocstringOutDir,
    Epochs,
    Exemplars,
    Extend,
    FromBank,
    FromEval,
    Holdout,
    LikelihoodOutDir,
    LikelihoodSplit,
    LineFragments,
    MaxNewTokens,
    Method,
    Mutants,
    OutDir,
    PassKs,
    Pool,
    PoolJson,
    PoolStrategies,
    Projects,
    Redraw,
    Repair,
    RepoLimit,
    RepoOutDir,
    RepoRankers,
    RepoSamples,
    RepoStrategies,
    RepoTask,
    ResultFolders,
    ResultsJson,
    RetrievalSplit,
    RowsJson,
    Samples,
    ScoringBackend,
    Seed,
    SummaryJson,
    TaskFlags,
    TasksFile,
    Temperature,
    TestsInPrompt,
    TopP,
    Variants,
    Versus,
    check_demos,
    check_sampling,
    check_subset,
    parse_ks,
    parse_rankers,
    task_options,
)
from assistant.ui.options import (
    NO_BACKEND_FLAGS,
    BackendFlags,
    backend_options,
    check_range,
    check_seed,
)

if TYPE_CHECKING:
    from assistant.backends import SamplingParams
    from assistant.backends.encoder import Encoder

eval_app = typer.Typer(
    short_help="Measure retrievers and rankers on HumanEval and MBPP.",
    help="Measure retrieval and ranking strategies on real benchmarks (HumanEval, MBPP).\n\n"
    "Runs are cached and resumable: re-running the same command continues where it stopped, and "
    "`assist eval report DIR` rebuilds tables and charts without touching the model.\n\n"
    "Each run writes its folder where --out says; without --out, under $ASSIST_RESULTS_DIR or else the user "
    "data folder's results/ (~/.local/share/assist/results on Linux), never the working folder.",
    no_args_is_help=True,
)


def _default_folder(name: str) -> Path:
    """A run's folder when --out is not given (see `results_dir`)."""
    from assistant.evaluate.report import results_dir

    return results_dir() / name


def _select_tasks(selection: TaskFlags) -> tuple[list, list[str]]:
    """The tasks to evaluate and the strategy names, checked before any model loads."""
    from assistant.evaluate import load_dataset, subset
    from assistant.evaluate.strategies import parse_strategies

    names = parse_strategies(selection.strategies)
    return subset(load_dataset(selection.dataset, selection.split), selection.limit, selection.seed), names


def _load_models(pool: str, settings: Settings, ui: ProgressUI) -> tuple:
    """The run's pipeline (the one `assist generate` uses: its backend, encoder and rankers), the encoder-indexed
    demonstration pool and the backend, loaded once for the run."""
    from assistant.evaluate import load_pool
    from assistant.pipeline.pipeline import Pipeline

    pipeline = Pipeline(settings=settings)
    generator = pipeline.backend(progress=ui)
    return pipeline, load_pool(pool, pipeline.encoder()), generator


# Settings a config records only where they are not the default (absent: the default), so a run that leaves one out
# still differs from an earlier run that recorded it.
_RECORDED_WHEN_SET = ("tests_model",)


def _changed(previous: dict, config: dict, free: tuple[str, ...]) -> list[str]:
    """The settings of `config` (and those recorded only when set), other than the `free` ones, that an earlier
    run's `previous` config holds differently."""
    keys = set(config) | set(_RECORDED_WHEN_SET)
    return sorted(k for k in keys if k not in free and previous.get(k) != config.get(k))


def _engine(settings: Settings) -> str | None:
    """What draws the samples beyond the backend's name: the local engine (openvino, transformers, ct2), or the
    server's URL (the same model name on two servers is two models)."""
    return settings["local.engine"] if settings.backend == "local" else settings["openai.base_url"]


def _model(settings: Settings) -> str | None:
    """The model a run's config records: a local model by its registered name, the default resolved, so that a
    folder says which model made it and a resumed run cannot change model unseen when the default changes."""
    if settings.backend != "local":
        return settings.model
    from assistant.backends.models import resolve

    return resolve(settings.model).name


# The local default until issue 66 made it the 1.5B: what a folder recorded as `"model": null` was run with.
_FORMER_DEFAULT = "qwen2.5-coder-0.5b"


def _recorded_model(saved: dict) -> str | None:
    """The model a saved local run's config names, as `_model` records it (a folder written before it records
    null for the default then, or an alias such as `1.5b`)."""
    if saved.get("backend", "local") != "local" or "model" not in saved:
        return saved.get("model")
    from assistant.backends.models import resolve

    try:
        return resolve(saved["model"] or _FORMER_DEFAULT).name
    except UsageError:
        return saved["model"]


# What a folder from before local.weights was recorded ran with: its local OpenVINO samples were int8 ones (a
# folder of another engine records no weights, so the value is never compared for it).
_UNRECORDED_WEIGHTS = {"weights": "int8"}


def _prepare(out: Path, config: dict, legacy: dict | None = None, unrecorded: tuple[str, ...] = ()) -> None:
    """Create the results folder, refusing one that holds a run with other settings. `legacy`: the values
    of settings added later, as folders written before them were run; `unrecorded`: settings added later whose
    value such a folder cannot tell (it is resumed, and the setting stays unrecorded rather than guessed)."""
    path = out / "config.json"
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
        config = {k: v for k, v in config.items() if k not in unrecorded or k in saved}
        previous = {**_UNRECORDED_WEIGHTS, **(legacy or {}), **saved}
        if "model" in previous:
            previous["model"] = _recorded_model(previous)
        # Strategies and --limit may grow: subsets are nested and every (task, strategy) is cached on its own.
        # -k too: pass@k is computed from each task's (n, correct), so it changes the report, not the samples.
        # `eval repo --task` too: its function and line records are kept in their own files.
        changed = _changed(previous, config, ("strategies", "limit", "ks", "task"))
        if changed:
            raise UsageError(f"{out} holds a run with other settings ({', '.join(changed)}); choose another --out")
        limits = [previous.get("limit"), config["limit"]]
        config = {
            **config,
            "strategies": list(dict.fromkeys(previous.get("strategies", []) + config["strategies"])),
            "limit": None if None in limits else max(limits),
        }
        if "task" in config and previous.get("task", config["task"]) != config["task"]:
            config["task"] = "both"
        if "ks" in config:
            config["ks"] = sorted({*previous.get("ks", []), *config["ks"]})
        if "versus" in previous:  # `eval report --versus`: the rewritten report keeps its paired tables
            config["versus"] = previous["versus"]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(config, indent=1))


def _extended(folder: Path, extend: Path | None, config: dict) -> list[Path]:
    """The folders whose caches a codegen run reads beside its own: `--extend`'s (checked: a codegen run with
    the same settings and a smaller n, a whole number of sample blocks), else those the folder's earlier run
    named. The config stores them relative to the folder, so the pair can be moved or resumed from anywhere."""
    from assistant.evaluate.codegen import SAMPLE_BLOCK

    if extend is None:
        path = folder / "config.json"
        previous = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        bases = [folder / p for p in previous.get("extends", [])]
        for base in bases:
            if not (base / "config.json").exists():
                raise UsageError(f"{folder} extends {os.path.normpath(base)}, which is gone; restore it to resume")
        return bases
    path = extend / "config.json"
    if not path.exists():
        raise UsageError(f"--extend {extend}: not an `assist eval codegen` results folder (no config.json)")
    earlier = json.loads(path.read_text(encoding="utf-8"))
    if earlier.get("command") != "codegen":
        raise UsageError(f"--extend {extend}: not an `assist eval codegen` results folder")
    if extend.resolve() == folder.resolve():
        raise UsageError("--extend names the output folder itself; a larger -n needs its own --out")
    # A folder from before the engine, or the weights, were recorded.
    earlier_settings = {"engine": config.get("engine"), **_UNRECORDED_WEIGHTS, **earlier}
    changed = _changed(earlier_settings, config, ("n", "strategies", "limit", "ks", "extends"))
    if changed:
        raise UsageError(f"--extend {extend}: that run used other settings ({', '.join(changed)})")
    n = earlier.get("n", 0)
    if n >= config["n"]:
        raise UsageError(f"--extend {extend}: that run already has n={n}; ask for a larger -n")
    if n % SAMPLE_BLOCK:
        raise UsageError(
            f"--extend {extend}: its n={n} is not a multiple of {SAMPLE_BLOCK} (samples come in blocks of "
            f"{SAMPLE_BLOCK}), so its samples cannot be the first of these"
        )
    return [extend, *[extend / p for p in earlier.get("extends", [])]]


def _layered(folder: Path, bases: list[Path], name: str):
    """The folder's cache `name`, reading through to the same cache of each extended folder."""
    from assistant.cache import JsonlCache, LayeredCache

    return LayeredCache(JsonlCache(folder / name), [JsonlCache(base / name) for base in bases])


def _record_retrievers(folder: Path, before: dict, now: dict, task_ids: list[str]) -> None:
    """Name in the folder the trained artifacts this completed run used (`before`, strategy → identity), unless
    one was retrained meanwhile (`now` differs)."""
    from assistant.evaluate.report import record_retrievers

    if not before:
        return
    if now != before:
        err.print("warning: a trained retriever was retrained during this run; retrievers.json was not updated")
        return
    record_retrievers(folder, before, task_ids)


def _backend_config(settings: Settings, agree: bool = True) -> dict:
    """What a run's config.json records of the model that drew its samples (the weights where the local OpenVINO
    engine drew them), and, for a run that ranks (`agree`), of the model that wrote agree's tests where that is
    another (folders that do not say had the generator write them)."""
    config = {"backend": settings.backend, "engine": _engine(settings), "model": _model(settings)}
    if settings.backend == "local" and config["engine"] == "openvino":
        from assistant.backends.models import weights_for

        config["weights"] = weights_for(config["model"], settings["local.weights"])
    if settings.backend == "local" and agree:
        from assistant.backends.models import tests_model_for

        writer = tests_model_for(config["model"], settings["local.tests_model"])
        if writer != config["model"]:
            config["tests_model"] = writer
    return config


def _run_name(command: str, dataset: str, split: str) -> str:
    """The start of a run's default folder name: the command, the dataset and its split (`all` for HumanEval)."""
    return f"{command}-{dataset}-{split if dataset == 'mbpp' else 'all'}"


def _open_codegen(out_dir: Path | None, extend: Path | None, config: dict) -> tuple[Path, list[Path]]:
    """The codegen run's folder, prepared with `config`, and the folders it extends (see `_extended`)."""
    name = _run_name("codegen", config["dataset"], config["split"])
    folder = out_dir or _default_folder(f"{name}-n{config['n']}-seed{config['seed']}")
    bases = _extended(folder, extend, config)
    if bases:
        config["extends"] = [os.path.relpath(base, folder) for base in bases]
    _prepare(folder, config, unrecorded=("engine",))
    return folder, bases


def _codegen_rankers(pipeline, extra: list[str], folder: Path, bases: list[Path], tasks: list, generator) -> list:
    """The ranker objects `assist generate` ranks with (the users' and the `extra` ones), their caches in the
    folder reading through to the extended folders', so a resumed run asks the model once."""
    from assistant.core.agreement import AgreementRanker
    from assistant.core.review import ReviewerRanker
    from assistant.evaluate.codegen import USER_RANKERS, recorded_reviews

    measured = pipeline.rankers("+".join([USER_RANKERS, *extra]))
    reviews = None
    for ranker in measured:
        if isinstance(ranker, AgreementRanker):  # its tests are kept, so a resumed run asks the model once
            ranker.cache = _layered(folder, bases, "agree-tests.jsonl")
        if isinstance(ranker, ReviewerRanker):  # its scores too, and those the records already hold
            if reviews is None:
                reviews = _layered(folder, bases, "review-scores.jsonl")
                reviews.bases.append(recorded_reviews([folder, *bases], tasks, generator))
            ranker.cache = reviews
    return measured


@dataclass(frozen=True)
class CodegenRun:
    """What one `eval codegen` call samples, checked: the tasks and strategies, the model and sampling, the
    demonstration pool, the extra rankers, its folder and the folders it extends."""

    tasks: list
    names: list[str]
    settings: Settings
    pool: str
    params: SamplingParams
    demos: int
    seed: int
    batch: int
    extra: list[str]
    folder: Path
    bases: list[Path]


def _draw_codegen(run: CodegenRun, ui: ProgressUI) -> list[dict]:
    """Load the models, sample and score (or resume) the run, and name the trained retrievers it used."""
    from assistant.evaluate import run_codegen
    from assistant.evaluate.report import retriever_identities

    pipeline, demo_pool, generator = _load_models(run.pool, run.settings, ui)
    trained = retriever_identities(demo_pool.index, run.names, generator.model)
    measured = _codegen_rankers(pipeline, run.extra, run.folder, run.bases, run.tasks, generator)
    records = run_codegen(
        run.tasks,
        demo_pool,
        run.names,
        generator,
        run.folder,
        params=run.params,
        demos=run.demos,
        seed=run.seed,
        batch=run.batch,
        cache=_layered(run.folder, run.bases, "samples.jsonl"),
        rankers=measured,
        progress=ui,
    )
    now = retriever_identities(demo_pool.index, run.names, generator.model)
    _record_retrievers(run.folder, trained, now, [task.task_id for task in run.tasks])
    return records


def _print_rows(folder: Path, tasks: int, rows: list[dict], as_json: bool, header: str, table: str, files: str) -> None:
    """Rewrite the folder's report, then print a run's rows: as JSON, or a header, the table and where the
    results are (`files`: what the folder shows)."""
    from assistant.evaluate import write_report

    write_report(folder)
    if as_json:
        out.print_json(json.dumps({"out": str(folder), "tasks": tasks, "rows": rows}))
        return
    out.print(header)
    out.print(table)
    err.print(f"results: {folder} ({files})")


@command(eval_app, "codegen", short_help="Pass@k per demonstration strategy, pass@1 per ranker.")
@backend_options()
@task_options()
def codegen(
    selection: TaskFlags = ALL_TASKS,
    n: Samples = 5,
    k: PassKs = None,
    demos: Demos = 4,
    backend_flags: BackendFlags = NO_BACKEND_FLAGS,
    temperature: Temperature = DEFAULT_TEMPERATURE,
    top_p: TopP = DEFAULT_TOP_P,
    max_new_tokens: MaxNewTokens = 384,
    pool: Pool = "mbpp",
    batch: Batch = 4,
    rankers: CodegenRankers = "",
    extend: Extend = None,
    out_dir: OutDir = None,
    json_output: SummaryJson = False,
) -> None:
    """Pass@k per demonstration strategy, and pass@1 after each ranker (first, random, logprob, oracle)."""
    from assistant.backends import SamplingParams
    from assistant.evaluate import summarize_codegen
    from assistant.evaluate.report import codegen_table

    check_subset(selection.limit, selection.seed)
    check_sampling(n, demos, backend_flags.timeout, temperature, top_p)
    check_range("--max-new-tokens", max_new_tokens, 1, MAX_NEW_TOKENS_LIMIT)
    check_range("--batch", batch, 1)
    ks = parse_ks(k) if k is not None else sorted({1, min(5, n)})  # pass@5 only where there are 5 samples
    if ks[-1] > n:
        raise UsageError(f"pass@{ks[-1]} needs -n of at least {ks[-1]}")
    extra = parse_rankers(rankers)
    tasks, names = _select_tasks(selection)
    settings = backend_flags.settings()
    config = {
        "command": "codegen",
        **selection.config(),
        "n": n,
        "ks": ks,
        "demos": demos,
        **_backend_config(settings),
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "pool": parse_dataset(pool).name,
        "strategies": names,
    }
    folder, bases = _open_codegen(out_dir, extend, config)
    params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens)
    run = CodegenRun(tasks, names, settings, pool, params, demos, selection.seed, batch, extra, folder, bases)
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        records = _draw_codegen(run, ui)
    rows = summarize_codegen(records, ks)
    header = (
        f"{len(tasks)} tasks of {selection.dataset} ({selection.split}), n={n}, {demos} demonstrations from {pool}; "
        f"percent with 95% bootstrap intervals"
    )
    _print_rows(folder, len(tasks), rows, json_output, header, codegen_table(rows, ks), "report.md, charts")


def _task_ids(path: Path) -> set[str]:
    """The task ids a `--tasks` file lists: one per line; blank lines and `#` comments are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--tasks: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    ids = {line.split("#", 1)[0].strip() for line in text.splitlines()} - {""}
    if not ids:
        raise UsageError(f"--tasks: {path} lists no task ids")
    return ids


@dataclass(frozen=True)
class RepoRun:
    """One `eval repo` call's settings, checked: what runs, with which model and sampling, and where."""

    specs: list
    task: str
    names: list[str]
    extra: list[str]
    wanted: set[str] | None
    settings: Settings
    folder: Path
    limit: int | None
    seed: int
    n: int
    demos: int
    temperature: float
    top_p: float
    line_fragments: str
    redraw: bool
    repair: int
    tests_in_prompt: bool

    @property
    def projects(self) -> list[str]:
        """The projects, pinned: `name==version`."""
        return [f"{s.name}=={s.version}" for s in self.specs]

    def config(self) -> dict:
        """What the folder's config.json records (the keys in the order the folders hold them)."""
        return {
            "command": "repo",
            "projects": self.projects,
            "task": self.task,
            "limit": self.limit,
            "seed": self.seed,
            "n": self.n,
            "demos": self.demos,
            **_backend_config(self.settings),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "line_fragments": self.line_fragments,
            "redraw": self.redraw,
            "repair": self.repair,
            "tests_in_prompt": self.tests_in_prompt,
            "strategies": self.names,
            "tasks": sorted(self.wanted) if self.wanted is not None else None,
        }

    def subset(self, items: list) -> list:
        """The tasks of `items` this run takes: those `--tasks` lists, then `--limit` of them in seeded order."""
        if self.wanted is not None:
            items = [t for t in items if t.task_id in self.wanted]
        # Walked in the seeded order, not by name: a run stopped early holds a sample of every project.
        order = sorted(items, key=lambda t: t.task_id)
        random.Random(self.seed).shuffle(order)
        return order[: self.limit or len(order)]


def _repo_names(task: str, line_fragments: str, strategies: str | None) -> list[str]:
    """`--task` and `--line-fragments` checked, and the strategy names (by default what generate does, beside its
    baselines; +file only where a stub is filled)."""
    from assistant.evaluate.repo.run import check_strategies

    if task not in ("function", "line", "both", "retrieval"):
        raise UsageError(f"--task is function, line, both or retrieval, not {task!r}")
    if line_fragments not in ("other-files", "any"):
        raise UsageError(f"--line-fragments is other-files or any, not {line_fragments!r}")
    if strategies is None:
        strategies = "zero,bm25,hybrid" + (",hybrid+file" if task == "function" else "")
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    check_strategies(names, task)
    return names


@command(eval_app, "repo", short_help="Fill functions in real projects, scored by their tests.")
@backend_options()
def repo(
    project: Projects = "all",
    task: RepoTask = "both",
    limit: RepoLimit = None,
    tasks_file: TasksFile = None,
    seed: Seed = 0,
    strategies: RepoStrategies = None,
    n: RepoSamples = 5,
    demos: Demos = 4,
    backend_flags: BackendFlags = NO_BACKEND_FLAGS,
    temperature: Temperature = DEFAULT_TEMPERATURE,
    top_p: TopP = DEFAULT_TOP_P,
    line_fragments: LineFragments = "other-files",
    redraw: Redraw = False,
    repair: Repair = 0,
    tests_in_prompt: TestsInPrompt = False,
    rankers: RepoRankers = "",
    out_dir: RepoOutDir = None,
    json_output: SummaryJson = False,
) -> None:
    """Fill functions and next lines in real projects (pinned PyPI sdists), scored by the projects' own tests.

    The first run downloads each project's sdist (sha256 checked), builds a venv with its test dependencies,
    runs its suite once with call tracing, and checks each candidate task (all cached in the user cache).
    Function tasks: pass@1/pass@5, the picks, exact match and edit similarity of the body. Line tasks: exact
    match and edit similarity of the next 1-3 lines, and the retrievers' R@1, R@10 and MRR@10.
    """
    from assistant.evaluate.repo.projects import parse_projects

    check_subset(limit, seed)
    check_sampling(n, demos, backend_flags.timeout, temperature, top_p)
    check_range("--repair", repair, 0, MAX_REPAIR)
    names = _repo_names(task, line_fragments, strategies)
    run = RepoRun(
        extra=parse_rankers(rankers),
        specs=parse_projects(project),
        wanted=_task_ids(tasks_file) if tasks_file is not None else None,
        settings=backend_flags.settings(),
        folder=out_dir or _default_folder(f"repo-n{n}-seed{seed}"),
        task=task,
        names=names,
        limit=limit,
        seed=seed,
        n=n,
        demos=demos,
        temperature=temperature,
        top_p=top_p,
        line_fragments=line_fragments,
        redraw=redraw,
        repair=repair,
        tests_in_prompt=tests_in_prompt,
    )
    legacy = {"line_fragments": "any", "redraw": False, "repair": 0, "tests_in_prompt": False}
    _prepare(run.folder, run.config(), legacy=legacy, unrecorded=("engine",))
    if task == "retrieval":
        _repo_retrieval(run, json_output)
    else:
        _run_repo(run, json_output)


def _repo_tasks(run: RepoRun, projects: list, ui: ProgressUI) -> tuple[list, list, list]:
    """Every function task of the projects (what the trained strategies never learn from; empty when no trained
    strategy needs it and only line tasks run), and the function and line tasks this run takes."""
    from assistant.evaluate.repo.run import TRAINED, retrieval_of
    from assistant.evaluate.repo.tasks import function_tasks, line_tasks

    # The trained strategies never learn from a function task, whichever tasks run, so they need the list.
    trained = any(retrieval_of(s) in TRAINED for s in run.names)
    every_function = (
        [t for p in projects for t in function_tasks(p, progress=ui)] if run.task != "line" or trained else []
    )
    every_line = [t for p in projects for t in line_tasks(p)] if run.task != "function" else []
    runnable = (every_function if run.task != "line" else []) + every_line
    if run.wanted is not None:
        missing = sorted(run.wanted - {t.task_id for t in runnable})
        if missing:
            kind = {"function": "function", "line": "line"}.get(run.task, "function or line")
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise UsageError(f"--tasks: {missing[0]!r} is not a {kind} task of {', '.join(run.projects)}{more}")
    functions = run.subset(every_function) if run.task != "line" else []
    return every_function, functions, run.subset(every_line)


def _run_functions(
    run: RepoRun, pipeline, generator, indexes: dict, functions: list, held_out: list, ui: ProgressUI
) -> list[dict]:
    """Sample, test and rank the function tasks (or resume them) with `pipeline`'s rankers; their summary rows."""
    from assistant.backends import SamplingParams
    from assistant.cache import JsonlCache
    from assistant.core.agreement import AgreementRanker
    from assistant.core.repair import RepairOptions
    from assistant.evaluate.codegen import USER_RANKERS
    from assistant.evaluate.repo.run import run_function_tasks, summarize_functions

    params = SamplingParams(n=run.n, temperature=run.temperature, top_p=run.top_p)
    measured = pipeline.rankers("+".join([USER_RANKERS, *run.extra]))  # the objects `assist generate` ranks with
    for ranker in measured:
        if isinstance(ranker, AgreementRanker):  # its tests are kept, so a resumed run asks the model once
            ranker.cache = JsonlCache(run.folder / "agree-tests.jsonl")
    records = run_function_tasks(
        functions,
        indexes,
        run.names,
        generator,
        run.folder,
        params=params,
        demos=run.demos,
        seed=run.seed,
        rankers=measured,
        held_out=held_out,
        progress=ui,
        redraw=run.redraw,
        repair=RepairOptions(rounds=run.repair, n=min(run.n, REPAIR_N)) if run.repair else None,
        tests_in_prompt=run.tests_in_prompt,
    )
    return summarize_functions(records, [k for k in (1, 5) if k <= run.n])


def _run_lines(run: RepoRun, generator, indexes: dict, lines: list, held_out: list, ui: ProgressUI) -> list[dict]:
    """Complete the line tasks greedily (or resume them); their summary rows."""
    from assistant.evaluate.repo.run import run_line_tasks, summarize_lines

    records = run_line_tasks(
        lines,
        indexes,
        run.names,
        generator,
        run.folder,
        demos=run.demos,
        other_files=run.line_fragments == "other-files",
        held_out=held_out,
        progress=ui,
    )
    return summarize_lines(records)


def _run_repo(run: RepoRun, as_json: bool) -> None:
    """`eval repo --task function|line|both`: prepare the projects, run their tasks, print this call's tables."""
    from assistant.evaluate.repo.projects import prepare
    from assistant.evaluate.repo.run import index_project
    from assistant.pipeline.pipeline import Pipeline

    started = time.perf_counter()
    with ProgressUI(show_progress(as_json), plain=True) as ui:
        projects = [prepare(spec, progress=ui) for spec in run.specs]
        every_function, functions, lines = _repo_tasks(run, projects, ui)
        pipeline = Pipeline(settings=run.settings)
        encoder = pipeline.encoder()
        indexes = {p.name: index_project(p, encoder, progress=ui) for p in projects}
        generator = pipeline.backend(progress=ui)
        adapters = _selfracg_identity(run.names, generator.model)
        function_rows = (
            _run_functions(run, pipeline, generator, indexes, functions, every_function, ui) if functions else None
        )
        line_rows = _run_lines(run, generator, indexes, lines, every_function, ui) if lines else None
    now = _selfracg_identity(run.names, generator.model)
    _record_retrievers(run.folder, adapters, now, [t.task_id for t in functions + lines])
    _print_repo(run, len(functions), len(lines), function_rows, line_rows, time.perf_counter() - started, as_json)


def _print_repo(
    run: RepoRun,
    functions: int,
    lines: int,
    function_rows: list[dict] | None,
    line_rows: list[dict] | None,
    elapsed: float,
    as_json: bool,
) -> None:
    """Rewrite the folder's report (every record it holds, earlier calls' strategies too) and print this call's
    tables, or its rows as JSON."""
    from assistant.evaluate import write_report
    from assistant.evaluate.repo.run import function_table, line_table

    header = (
        f"{functions} function tasks and {lines} line tasks from "
        f"{', '.join(run.projects)}; n={run.n}, {run.demos} demonstrations or fragments; {elapsed / 60:.1f} min"
    )
    report = [f"# assist eval repo\n\n{header}\n"]
    if function_rows:
        report += ["## Function level (percent, 95% bootstrap intervals; differences paired by task)\n",
                   function_table(function_rows), ""]  # fmt: skip
    if line_rows:
        report += ["## Line level (EM, ES in percent; R@k and MRR@10 of the fragment holding the line)\n",
                   line_table(line_rows), ""]  # fmt: skip
    write_report(run.folder)
    if as_json:
        out.print_json(
            json.dumps(
                {"out": str(run.folder), "seconds": round(elapsed, 1), "function": function_rows, "line": line_rows}
            )
        )
        return
    out.print("\n".join(report))
    err.print(f"results: {run.folder} (report.md)")


def _selfracg_identity(names: list[str], generator: str | None) -> dict[str, dict]:
    """strategy → identity of the generic SelfRACG adapters trained for `generator` (None: the default model), for
    each strategy of `eval repo` that retrieves with them (empty when none does or none are trained for it: such a
    run stops with its own error)."""
    from assistant.evaluate.repo.run import generic_adapters, retrieval_of
    from assistant.methods.artifacts import directory_identity

    if not any(retrieval_of(name) == "selfracg" for name in names):
        return {}
    try:
        identity = directory_identity(generic_adapters(generator))  # what eval repo's selfracg loads
    except UsageError:
        return {}
    return {name: identity for name in names if retrieval_of(name) == "selfracg"} if identity is not None else {}


def _repo_retrieval(run: RepoRun, as_json: bool) -> None:
    """`eval repo --task retrieval`: each retriever's rank of the positive fragment for the line tasks."""
    from assistant.cache import JsonlCache, cache_key
    from assistant.evaluate.repo.projects import prepare
    from assistant.evaluate.repo.run import (
        TRAINED,
        index_project,
        retrieval_table,
        run_line_retrieval,
        summarize_retrieval,
    )
    from assistant.evaluate.repo.tasks import function_tasks, line_tasks
    from assistant.pipeline.pipeline import Pipeline, load_encoder

    names, folder = run.names, run.folder
    if names == ["zero"]:
        raise UsageError("--task retrieval needs a retriever among --strategies (zero retrieves nothing)")
    with ProgressUI(show_progress(as_json), plain=True) as ui:
        projects = [prepare(spec, progress=ui) for spec in run.specs]
        lines = run.subset([t for p in projects for t in line_tasks(p)])
        # What the trained strategies never learn from: every function task of the projects.
        held_out = [t for p in projects for t in function_tasks(p, progress=ui)] if set(names) & set(TRAINED) else []
        encoder = load_encoder()
        indexes = {p.name: index_project(p, encoder, progress=ui) for p in projects}
        model = Pipeline(settings=run.settings).generator_name()  # the model the trained strategies serve
        adapters = _selfracg_identity(names, model)
        records = run_line_retrieval(lines, indexes, names, progress=ui, held_out=held_out, generator=model)
    store = JsonlCache(folder / "line-retrieval.jsonl")
    for record in records:
        store.put(cache_key(kind="retrieval", task=record["task_id"], strategy=record["strategy"]), record)
    _record_retrievers(folder, adapters, _selfracg_identity(names, model), [t.task_id for t in lines])
    rows = summarize_retrieval(records)
    header = f"{len(lines)} line tasks; the positive is the 20-line fragment holding the first hidden line\n"
    _print_rows(folder, len(lines), rows, as_json, header, retrieval_table(rows), "report.md")


@command(eval_app, "likelihood", short_help="Log-probability of the reference solutions per strategy.")
@backend_options("backend", "engine", "model", backend=ScoringBackend)
@task_options(dataset="mbpp", split=LikelihoodSplit)
def likelihood(
    selection: TaskFlags = ALL_TASKS,
    demos: Demos = 4,
    backend_flags: BackendFlags = NO_BACKEND_FLAGS,
    pool: Pool = "mbpp",
    out_dir: LikelihoodOutDir = None,
    json_output: SummaryJson = False,
) -> None:
    """Mean log-probability of each task's reference solution given each strategy's demonstrations."""
    from assistant.evaluate import run_likelihood, summarize_likelihood
    from assistant.evaluate.report import likelihood_table, retriever_identities

    check_subset(selection.limit, selection.seed)
    check_demos(demos)
    tasks, names = _select_tasks(selection)
    settings = backend_flags.settings()
    name = parse_dataset(selection.dataset).name
    folder = out_dir or _default_folder(f"{_run_name('likelihood', name, selection.split)}-seed{selection.seed}")
    config = {
        "command": "likelihood",
        **selection.config(),
        "demos": demos,
        **_backend_config(settings, agree=False),  # it scores; nothing ranks
        "pool": parse_dataset(pool).name,
        "strategies": names,
    }
    _prepare(folder, config, unrecorded=("engine",))
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        _, demo_pool, scorer = _load_models(pool, settings, ui)
        if not scorer.can_score:
            raise UsageError(f"eval likelihood needs a backend that scores given text: {scorer.scoring_unavailable}")
        trained = retriever_identities(demo_pool.index, names, scorer.model)
        records = run_likelihood(tasks, demo_pool, names, scorer, folder, demos=demos, seed=selection.seed, progress=ui)
        now = retriever_identities(demo_pool.index, names, scorer.model)
        _record_retrievers(folder, trained, now, [task.task_id for task in tasks])
    rows = summarize_likelihood(records)
    header = (
        f"{len(tasks)} tasks of {selection.dataset} ({selection.split}), {demos} demonstrations from {pool}; "
        "95% bootstrap intervals"
    )
    _print_rows(folder, len(tasks), rows, json_output, header, likelihood_table(rows), "report.md, charts")


@command(eval_app, "report", short_help="Rebuild report.md and charts from results folders.")
def report(
    results: ResultFolders,
    versus: Versus = None,
    strategies: PoolStrategies = None,
    json_output: PoolJson = False,
) -> None:
    """Rebuild report.md (tables) and PNG charts from a results folder, or pool `eval repo` runs of disjoint
    function tasks into one function-level table (paired by task against zero-shot and bm25); no model is loaded."""
    from assistant.evaluate import write_report

    for folder in results:
        if not folder.is_dir():
            raise UsageError(f"{folder} is not a folder")
    if len(results) == 1:
        if strategies is not None or json_output:
            raise UsageError("--strategies and --json are for pooling several eval repo folders")
        out.print(write_report(results[0], versus=versus))
        return
    _pool_report(results, versus, strategies, json_output)


def _pool_report(results: list[Path], versus: str | None, strategies: str | None, as_json: bool) -> None:
    """`eval report A B ...`: pool `eval repo` folders of disjoint function tasks into one printed table."""
    from assistant.evaluate.repo.pool import pooled_records
    from assistant.evaluate.repo.run import VERSUS, function_table, summarize_functions

    names = [s.strip() for s in strategies.split(",") if s.strip()] if strategies else None
    records, counts = pooled_records(results, names)
    if versus is not None and versus not in {r["strategy"] for r in records}:
        raise UsageError(f"--versus {versus}: the pooled folders hold no records of it")
    n = min(r["n"] for r in records)
    baselines = [*VERSUS, *([versus] if versus and versus not in VERSUS else [])]
    rows = summarize_functions(records, [k for k in (1, 5) if k <= n], versus=baselines)
    if as_json:
        out.print_json(json.dumps({"tasks": counts, "rows": rows}))
        return
    parts = ", ".join(f"{folder} {tasks}" for folder, tasks in counts.items())
    out.print(
        f"{sum(counts.values())} function tasks ({parts}); percent, 95% bootstrap intervals, differences paired "
        "by task",
        markup=False,
        highlight=False,
    )
    out.print(function_table(rows), markup=False, highlight=False)


@command(eval_app, "retrieval", short_help="Pairwise ranking accuracy of the retrievers (no LLM).")
@task_options("dataset", "split", "limit", "seed", dataset="mbpp", split=RetrievalSplit)
def retrieval(
    method: Method = "tstr",
    selection: TaskFlags = ALL_TASKS,
    pool: Pool = "mbpp",
    json_output: RowsJson = False,
) -> None:
    """Pairwise ranking accuracy on (reference, closer code, farther code) triplets; no LLM involved.

    Compares the frozen encoder, the trained retriever, and an oracle that embeds the reference's code itself
    (scoring by S_c itself would be 1.0 by construction).
    """

    from assistant.evaluate import load_dataset, load_pool, subset
    from assistant.evaluate.retrieval import run_retrieval_eval
    from assistant.pipeline.pipeline import Pipeline

    check_subset(selection.limit, selection.seed)
    if method != "tstr":
        raise UsageError("eval retrieval measures TST^R (--method tstr)")
    tasks = subset(load_dataset(selection.dataset, selection.split), selection.limit, selection.seed)
    with ProgressUI(show_progress(json_output)) as ui:
        ui.status("Embedding the pool and the references")
        encoder = Pipeline().encoder()
        demo_pool = load_pool(pool, encoder)
        from assistant.methods.tstr import TstrRetriever

        trained = TstrRetriever.for_index(demo_pool.index, encoder)
        # Everything in the embedder TST^R was trained on (the local encoder, or an embeddings endpoint).
        embedder = trained.embedder
        test_vectors = embedder.encode([t.requirement for t in tasks])
        pool_vectors = trained.frozen
        pool_codes = [e.code for e in demo_pool.examples]
        code_vectors = embedder.encode([t.reference for t in tasks])
        pool_code_vectors = embedder.encode(pool_codes)
        scorers = {
            "frozen encoder": test_vectors @ pool_vectors.T,
            "tstr": trained.model.transform(test_vectors) @ trained.pool.T,
            "code embedding (sees the reference code)": code_vectors @ pool_code_vectors.T,
        }
        rows = run_retrieval_eval(
            test_vectors, [t.reference for t in tasks], pool_vectors, pool_codes, scorers, seed=selection.seed
        )
    if json_output:
        out.print_json(json.dumps({"tasks": len(tasks), "embedder": embedder.name, "rows": rows}))
        return
    out.print(
        f"{len(tasks)} references from {selection.dataset} ({selection.split}), pool {pool}, {embedder.name} "
        "embeddings; pairwise accuracy, 95% bootstrap CI"
    )
    lines = ["| scorer | triplets | count | accuracy |", "|---|---|---|---|"]
    for row in rows:
        mean, low, high = row["accuracy"]
        lines.append(f"| {row['scorer']} | {row['triplets']} | {row['count']} | {mean:.3f} [{low:.3f}, {high:.3f}] |")
    out.print("\n".join(lines))


def _docstring_indexes(names: list[str], pool: list, pipeline, seed: int) -> dict:
    """strategy → the exemplar index it retrieves from (None for zero-shot); JOINTCOM's must have been trained on
    this split, for the model that writes."""
    from assistant.core.docwriter import ExemplarIndex

    indexes = {}
    for name in names:
        if name == "jointcom":
            indexes[name] = ExemplarIndex(pool, _jointcom_encoder(pool, pipeline.generator_name(), seed))
        else:
            indexes[name] = (
                None if name == "zero" else ExemplarIndex(pool, pipeline.encoder() if name == "dense" else None)
            )
    return indexes


def _jointcom_encoder(pool: list, generator: str | None, seed: int) -> Encoder:
    """The encoder of the JOINTCOM retriever trained on this split for `generator`, the model that writes; none is
    a one-line error saying how to train one (naming the models the ones there serve, if any)."""
    from assistant.methods.artifacts import serving_artifact
    from assistant.methods.jointcom import retriever_dir, trained_encoder

    train = f"`assist train docstring-retriever --stdlib --seed {seed}"
    if generator is not None:  # another model's only: that error (a server that names no model: the latest)
        how = f"train one for it: {train} --model {generator}`"
        serving_artifact(retriever_dir(pool), generator, "JOINTCOM retriever", how)
    trained = trained_encoder(retriever_dir(pool), generator)
    if trained is None:
        raise UsageError(f"no JOINTCOM retriever trained on this split: run {train}` first")
    return trained


@command(eval_app, "docstring", short_help="Docstring generation on held-out stdlib modules.")
@backend_options("backend", "engine", "model", "base_url")
def docstring_eval(
    strategies: DocStrategies = "zero,bm25,dense",
    limit: DocLimit = 200,
    k: Exemplars = 1,
    seed: Seed = 0,
    backend_flags: BackendFlags = NO_BACKEND_FLAGS,
    out_dir: DocstringOutDir = None,
    json_output: SummaryJson = False,
) -> None:
    """Docstring generation on held-out standard-library modules: corpus/sentence BLEU-4, ROUGE-L, METEOR.

    The stdlib's modules are split (seeded) into exemplar modules and test modules; split.json in the
    results folder names them. Each strategy is paired with dense by function (sentence BLEU-4 and ROUGE-L,
    95% bootstrap); docstring-records.jsonl keeps every output. Cached and resumable.
    """
    from assistant.evaluate.docstring_eval import (
        STRATEGIES,
        docstring_table,
        load_docstring_task,
        paired_rows,
        paired_table,
        run_docstring_eval,
        summarize_docstrings,
    )
    from assistant.pipeline.pipeline import Pipeline

    check_range("--limit", limit, 1)
    check_range("-k", k, 0)
    check_seed(seed)
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if not names or unknown:
        raise UsageError(f"unknown strategy {unknown[0] if unknown else ''!r}; choose from: {', '.join(STRATEGIES)}")
    settings = backend_flags.settings()
    folder = out_dir or _default_folder(f"docstring-stdlib-{settings.model or 'default'}-s{seed}")
    _prepare(folder, {"task": "docstring", "k": k, "seed": seed, "model": _model(settings), "strategies": names,
                   "limit": limit})  # fmt: skip
    pipeline = Pipeline(settings=settings)
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        pool, items, split = load_docstring_task(limit, seed)
        atomic_write_text(folder / "split.json", json.dumps(split, indent=1))
        ui.status(f"{len(items)} test functions from {len(split['test_modules'])} held-out modules; "
                  f"{len(pool)} exemplars")  # fmt: skip
        indexes = _docstring_indexes(names, pool, pipeline, seed)
        generator = pipeline.backend(progress=ui)
        records = run_docstring_eval(items, indexes, generator, folder, k=k, progress=ui)
    rows = summarize_docstrings(records)
    table = docstring_table(rows)
    versus = paired_rows(records)
    if versus:  # the per-function differences a decision between two retrievers reads
        table += f"\n\nPaired by function (95% bootstrap):\n\n{paired_table(versus)}"
    atomic_write_text(folder / "docstring-records.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    atomic_write_text(folder / "report-docstring.md", f"# Docstrings on held-out stdlib modules\n\n{table}\n")
    if json_output:
        out.print_json(json.dumps({"rows": rows, "versus": versus, "split": split}))
    else:
        out.print(f"{len(items)} functions from held-out modules: {', '.join(split['test_modules'][:12])}"
                  f"{' ...' if len(split['test_modules']) > 12 else ''} (all in {folder / 'split.json'})")  # fmt: skip
        out.print(table, markup=False, highlight=False)


def _candidate_runs(candidates: list[Path], from_bank: str) -> list[tuple[str, list[dict], dict[str, str]]]:
    """The cached candidates of each `--candidates` codegen run: (strategy, records, task id → requirement) per
    strategy, the requirements read from the dataset the run used."""
    from assistant.evaluate import load_dataset
    from assistant.evaluate.discriminator import load_candidates

    runs = []
    for folder in candidates:
        config, groups = load_candidates(folder)
        spec = config["dataset"] if config["dataset"] != "mbpp" else from_bank
        texts = {t.task_id: t.requirement for t in load_dataset(spec, config.get("split", "test"))}
        unknown = sorted({r["task_id"] for _, records in groups for r in records} - set(texts))
        if unknown:
            raise UsageError(
                f"{folder} has tasks ({', '.join(unknown[:3])}...) that {spec} does not: was it run on another file?"
            )
        runs += [(name, records, texts) for name, records in groups]
    return runs


@command(eval_app, "discriminator", short_help="Condor against its ablations: P/R/F1 and pass@1.")
def discriminator_eval(
    from_bank: FromBank = "mbpp",
    from_eval: FromEval = None,
    candidates: CandidateRuns = None,
    variants: Variants = "condor,no-contrastive,no-partial-fixes,plain",
    mutants: Mutants = 4,
    epochs: Epochs = 2,
    holdout: Holdout = 0.2,
    seed: Seed = 0,
    out_dir: DiscriminatorOutDir = None,
    json_output: ResultsJson = False,
) -> None:
    """Condor against its ablations: P/R/F1 on held-out problems, and pass@1 after ranking cached candidates.

    Every variant is trained on the same data and split; pass@1 compares them with the first sample, a
    random choice, mean log-probability and the oracle on the SAME samples (those of --candidates runs).
    """
    from assistant.evaluate.discriminator import discriminator_tables, parse_variants, run_discriminator_eval
    from assistant.methods.condor.data import build_dataset, training_problems
    from assistant.methods.condor.model import CondorConfig, verification_cache

    check_range("--mutants", mutants, 0)
    check_range("--epochs", epochs, 1)
    check_range("--holdout", holdout, 0, 1, low_open=True, high_open=True)
    check_seed(seed)
    names = parse_variants(variants)
    if not is_mbpp(from_bank):
        raise UsageError("eval discriminator trains on MBPP's train split: --from-bank mbpp[:PATH]")
    runs = _candidate_runs(candidates or [], from_bank)
    problems, _ = training_problems(from_bank, from_eval or [], None)
    base = CondorConfig(epochs=epochs, seed=seed)
    folder = out_dir or _default_folder(f"discriminator-mbpp-seed{seed}")
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        ui.status(f"Building training data from {len(problems)} MBPP train problems")
        data = build_dataset(problems, mutants_per_program=mutants, seed=seed, cache=verification_cache(), progress=ui)
        results = run_discriminator_eval(data, names, base, runs, folder, holdout=holdout, progress=ui)
    tables = discriminator_tables(results)
    atomic_write_text(folder / "report.md", f"# Discriminator (Condor) evaluation\n\n{tables}\n")
    if json_output:
        out.print_json(json.dumps(results))
        return
    train, held = results["data"]["train"], results["data"]["held_out"]
    out.print(
        f"Trained on {train['problems']} MBPP train problems ({train['programs']} programs, {train['partial_fixes']} "
        f"partial fixes, {train['pairs_cc']} C-C / {train['pairs_ec']} E-C pairs); held out {held['problems']} "
        f"problems ({held['programs']} programs)"
    )
    out.print(tables, markup=False, highlight=False)
    err.print(f"results: {folder} (results.json, report.md)")
