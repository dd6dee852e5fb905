"""`assist eval ...`: the evaluation harness's commands (a thin layer over `assistant.evaluate`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from assistant.config import (
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    MAX_K,
    MAX_N,
    MAX_NEW_TOKENS_LIMIT,
    MAX_REPAIR,
    MAX_TEMPERATURE,
    MAX_TIMEOUT,
    REPAIR_BUDGET_S,
    REPAIR_N,
    Settings,
)
from assistant.datasets import MBPP_DEFAULT_PATH, is_mbpp, parse_dataset
from assistant.errors import UsageError
from assistant.paths import atomic_write_text
from assistant.ui.console import ProgressUI, err, friendly_errors, out, show_progress
from assistant.ui.options import (
    ApiOpt,
    BackendOpt,
    BaseUrlOpt,
    EngineOpt,
    ModelOpt,
    TimeoutOpt,
    backend_settings,
    check_range,
    check_seed,
)

eval_app = typer.Typer(
    short_help="Measure retrievers and rankers on HumanEval and MBPP.",
    help="Measure retrieval and ranking strategies on real benchmarks (HumanEval, MBPP).\n\n"
    "Runs are cached and resumable: re-running the same command continues where it stopped, and "
    "`assist eval report DIR` rebuilds tables and charts without touching the model.\n\n"
    "Each run writes its folder where --out says; without --out, under $ASSIST_RESULTS_DIR or else the user "
    "data folder's results/ (~/.local/share/assist/results on Linux), never the working folder.",
    no_args_is_help=True,
)

Dataset = Annotated[str, typer.Option(help=f"humaneval, or mbpp[:PATH] (default path {MBPP_DEFAULT_PATH}).")]
Strategies = Annotated[
    str,
    typer.Option(
        help="Comma-separated: zero, random, bm25, dense, hybrid, and the trained lail, tstr "
        "(`assist train retriever` first)."
    ),
]
Limit = Annotated[int | None, typer.Option(help="Evaluate a fixed subset of this many tasks (chosen by --seed).")]
Seed = Annotated[int, typer.Option(help="Seeds the subset, the random strategy and sampling.")]
Demos = Annotated[int, typer.Option(help="Demonstrations per prompt.")]
Pool = Annotated[str, typer.Option(help="Where demonstrations come from: a benchmark's train split.")]
OutDir = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Results folder. Default: <run name> (e.g. codegen-humaneval-all-n5-seed0) under $ASSIST_RESULTS_DIR, "
        "else under the user data folder's results/ (~/.local/share/assist/results on Linux), never the "
        "working folder.",
    ),
]


def _default_folder(name: str) -> Path:
    """A run's folder when --out is not given (see `results_dir`)."""
    from assistant.evaluate.report import results_dir

    return results_dir() / name


def _parse_ks(spec: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in spec.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"-k takes comma-separated integers like 1,5, not {spec!r}") from None
    if not ks or ks[0] < 1:
        raise UsageError("-k values must be 1 or more")
    return ks


def _select_tasks(dataset: str, split: str, limit: int | None, seed: int, strategies: str) -> tuple[list, list[str]]:
    """The tasks to evaluate and the strategy names, checked before any model loads."""
    from assistant.evaluate import load_dataset, subset
    from assistant.evaluate.strategies import parse_strategies

    names = parse_strategies(strategies)
    return subset(load_dataset(dataset, split), limit, seed), names


def _load_models(pool: str, settings: Settings, ui: ProgressUI) -> tuple:
    """The run's pipeline (the one `assist generate` uses: its backend, encoder and rankers), the encoder-indexed
    demonstration pool and the backend, loaded once for the run."""
    from assistant.evaluate import load_pool
    from assistant.pipeline.pipeline import Pipeline

    pipeline = Pipeline(settings=settings)
    generator = pipeline.backend(progress=ui)
    return pipeline, load_pool(pool, pipeline.encoder()), generator


def _changed(previous: dict, config: dict, free: tuple[str, ...]) -> list[str]:
    """The settings of `config`, other than the `free` ones, that an earlier run's `previous` config holds
    differently."""
    return sorted(k for k in config if k not in free and previous.get(k) != config[k])


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


def _prepare(out: Path, config: dict, legacy: dict | None = None, unrecorded: tuple[str, ...] = ()) -> None:
    """Create the results folder, refusing one that holds a run with other settings. `legacy`: the values
    of settings added later, as folders written before them were run; `unrecorded`: settings added later whose
    value such a folder cannot tell (it is resumed, and the setting stays unrecorded rather than guessed)."""
    path = out / "config.json"
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
        config = {k: v for k, v in config.items() if k not in unrecorded or k in saved}
        previous = {**(legacy or {}), **saved}
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
    earlier_settings = {"engine": config.get("engine"), **earlier}  # a folder from before the engine was recorded
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


@eval_app.command("codegen")
@friendly_errors
def codegen(
    dataset: Dataset = "humaneval",
    split: Annotated[str, typer.Option(help="MBPP split: test, validation, train, prompt.")] = "test",
    limit: Limit = None,
    seed: Seed = 0,
    strategies: Strategies = "zero,random,bm25,dense",
    n: Annotated[int, typer.Option("-n", help="Samples per task.")] = 5,
    k: Annotated[str, typer.Option("-k", help="pass@k values, e.g. 1,3,5 (each <= n).")] = "1,5",
    demos: Demos = 4,
    backend: BackendOpt = None,
    engine: EngineOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api: ApiOpt = None,
    timeout: TimeoutOpt = None,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = DEFAULT_TEMPERATURE,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling threshold.")] = DEFAULT_TOP_P,
    max_new_tokens: Annotated[int, typer.Option(help="Longest sample, in tokens.")] = 384,
    pool: Pool = "mbpp",
    batch: Annotated[
        int, typer.Option(help="Tasks sampled together in one batched call (local backend; ~3x faster on a CPU).")
    ] = 4,
    rankers: Annotated[
        str,
        typer.Option(
            "--rankers",
            help="Rankers to measure beside first, random and logprob, comma-separated: agree (the model writes "
            "tests for each task and the candidates run on them; a model call and ~40 sandbox runs per task), "
            "reviewer (log p(requirement | code) under the same model; one scoring call per task), "
            "coder-reviewer (reviewer plus logprob). "
            "Added to a finished folder, they pick from its cached samples: nothing is sampled again.",
        ),
    ] = "",
    extend: Annotated[
        Path | None,
        typer.Option(
            "--extend",
            help="A finished run of this command at a smaller -n (the same settings otherwise): its samples, "
            "agree's written tests and the reviewer's scores are read from there (never written to), so only the "
            "missing samples are drawn and scored. "
            "Samples come in blocks of 5, so -n 10 adds one block to an -n 5 run.",
        ),
    ] = None,
    out_dir: OutDir = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Pass@k per demonstration strategy, and pass@1 after each ranker (first, random, logprob, oracle)."""
    from assistant.backends import SamplingParams
    from assistant.core.agreement import AgreementRanker
    from assistant.core.review import ReviewerRanker
    from assistant.evaluate import run_codegen, summarize_codegen, write_report
    from assistant.evaluate.codegen import EXTRA_RANKERS, USER_RANKERS, recorded_reviews
    from assistant.evaluate.report import codegen_table, retriever_identities

    check_range("--limit", limit, 1)
    check_seed(seed)
    check_range("-n", n, 1, MAX_N)
    check_range("--demos", demos, 0, MAX_K)
    check_range("--timeout", timeout, 0, MAX_TIMEOUT, low_open=True)
    check_range("--temperature", temperature, 0, MAX_TEMPERATURE)
    check_range("--top-p", top_p, 0, 1, low_open=True)
    check_range("--max-new-tokens", max_new_tokens, 1, MAX_NEW_TOKENS_LIMIT)
    check_range("--batch", batch, 1)
    ks = _parse_ks(k)
    if ks[-1] > n:
        raise UsageError(f"pass@{ks[-1]} needs -n of at least {ks[-1]}")
    extra = [name.strip() for name in rankers.split(",") if name.strip()]
    for name in extra:
        if name not in EXTRA_RANKERS:
            raise UsageError(f"--rankers: unknown ranker {name!r}; choose from {', '.join(EXTRA_RANKERS)}")
    tasks, names = _select_tasks(dataset, split, limit, seed, strategies)
    settings = backend_settings(backend, model, base_url, api, timeout, engine=engine)
    name = parse_dataset(dataset).name
    folder = out_dir or _default_folder(f"codegen-{name}-{split if name == 'mbpp' else 'all'}-n{n}-seed{seed}")
    config = {
        "command": "codegen",
        "dataset": name,
        "split": split,
        "limit": limit,
        "seed": seed,
        "n": n,
        "ks": ks,
        "demos": demos,
        "backend": settings.backend,
        "engine": _engine(settings),
        "model": _model(settings),
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "pool": parse_dataset(pool).name,
        "strategies": names,
    }
    bases = _extended(folder, extend, config)
    if bases:
        config["extends"] = [os.path.relpath(base, folder) for base in bases]
    _prepare(folder, config, unrecorded=("engine",))
    params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens)
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        pipeline, demo_pool, generator = _load_models(pool, settings, ui)
        trained = retriever_identities(demo_pool.index, names)
        measured = pipeline.rankers("+".join([USER_RANKERS, *extra]))  # the objects `assist generate` ranks with
        reviews = None
        for ranker in measured:
            if isinstance(ranker, AgreementRanker):  # its tests are kept, so a resumed run asks the model once
                ranker.cache = _layered(folder, bases, "agree-tests.jsonl")
            if isinstance(ranker, ReviewerRanker):  # its scores too, and those the records already hold
                if reviews is None:
                    reviews = _layered(folder, bases, "review-scores.jsonl")
                    reviews.bases.append(recorded_reviews([folder, *bases], tasks, generator))
                ranker.cache = reviews
        records = run_codegen(
            tasks,
            demo_pool,
            names,
            generator,
            folder,
            params=params,
            demos=demos,
            seed=seed,
            batch=batch,
            cache=_layered(folder, bases, "samples.jsonl"),
            rankers=measured,
            progress=ui,
        )
        now = retriever_identities(demo_pool.index, names)
        _record_retrievers(folder, trained, now, [task.task_id for task in tasks])
    rows = summarize_codegen(records, ks)
    write_report(folder)
    if json_output:
        out.print_json(json.dumps({"out": str(folder), "tasks": len(tasks), "rows": rows}))
        return
    out.print(
        f"{len(tasks)} tasks of {dataset} ({split}), n={n}, {demos} demonstrations from {pool}; "
        f"percent with 95% bootstrap intervals"
    )
    out.print(codegen_table(rows, ks))
    err.print(f"results: {folder} (report.md, charts)")


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


@eval_app.command("repo")
@friendly_errors
def repo(
    project: Annotated[
        str,
        typer.Option(
            "--project",
            help="Comma-separated: boltons, click, tabulate, cachetools, or `all` (those four, the default); "
            "jinja2 and marshmallow, or `held-out` (both): projects added after the four's results, for checking "
            "a finding on code nothing here was tuned on.",
        ),
    ] = "all",
    task: Annotated[
        str,
        typer.Option(
            "--task",
            help="function, line, both, or retrieval (the line tasks' R@k and MRR@10 alone: no generation; "
            "seconds for bm25/dense/hybrid, while selfracg-init encodes every fragment with the LLM).",
        ),
    ] = "both",
    limit: Annotated[
        int | None, typer.Option(help="At most this many tasks of each kind (a seeded subset; nested as it grows).")
    ] = None,
    tasks_file: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            help="A file of task ids, one per line, as the records name them (`#` starts a comment): only those "
            "run, e.g. the list `benchmarks/repo_callees.py FOLDER --list-unseen` prints. --limit applies after.",
        ),
    ] = None,
    seed: Seed = 0,
    strategies: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated (default: zero,bm25,hybrid, and hybrid+file with --task function): zero, bm25, "
            "dense, hybrid (what generate uses; filling a stub, hybrid+file), tstr "
            "(TST^R trained in seconds on the project's functions less the benchmark's function tasks), lail (LAIL "
            "trained on the same functions, 128 documented ones labeled by the model, 10-20 minutes a project on 2 "
            "cores the first time, then cached; on line tasks both search the fragments with what they learned), "
            "selfracg-init (SelfRACG's branch untrained: the generator's own attention; loads the transformers model "
            "too), selfracg (the generic adapters of `assist train retriever --method selfracg --corpus DIR`). On "
            "function tasks any of them + apis (e.g. hybrid+apis, zero+apis) also shows the project's functions from "
            "other files that the target file calls or imports, as `generate --apis` does; any retriever @fragments "
            "(e.g. hybrid@fragments) shows its 20-line fragments of the project's other files, found with the code "
            "before the body, instead of demonstrations (RepoEval's context); the two combine as X@fragments+apis. "
            "Any retriever +file (e.g. hybrid+file, hybrid+file+apis) may take its demonstrations from the target "
            "file's other functions too, as `generate` does by default (never the hidden one). Any strategy +attrs, "
            "last (e.g. zero+attrs, hybrid+file+attrs), shows what a method's class sets on self in the context (an "
            "experiment; generate does not yet)."
        ),
    ] = None,
    n: Annotated[int, typer.Option("-n", help="Samples per function task (line tasks are greedy).")] = 5,
    demos: Demos = 4,
    backend: BackendOpt = None,
    engine: EngineOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api: ApiOpt = None,
    timeout: TimeoutOpt = None,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = DEFAULT_TEMPERATURE,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling threshold.")] = DEFAULT_TOP_P,
    line_fragments: Annotated[
        str,
        typer.Option(
            "--line-fragments",
            help="Line tasks: where the prompt's fragments may come from. other-files (default): the target "
            "file is left out, as `generate` leaves it out, since the prompt holds its code before the cut; "
            "any: every fragment but those overlapping the hidden lines (how results/repo-n5-seed0 ran). "
            "R@k and MRR@10 always rank every fragment.",
        ),
    ] = "other-files",
    redraw: Annotated[
        bool,
        typer.Option(
            "--redraw",
            help="Function tasks: draw once more each sample that wrote nothing, as `generate` does by default "
            "(off here, so the earlier results folders resume as they ran; results/repo-redraw-n5-seed0 ran with it).",
        ),
    ] = False,
    repair: Annotated[
        int,
        typer.Option(
            "--repair",
            help="Function tasks: with the covering tests visible, a task none of whose samples passes them gets up "
            f"to N repair rounds as `generate` runs them ({REPAIR_N} samples a round, within {REPAIR_BUDGET_S:g} s); "
            "each record keeps the first round's result and the repaired one apart. 0 (default): none.",
        ),
    ] = 0,
    tests_in_prompt: Annotated[
        bool,
        typer.Option(
            "--tests-in-prompt",
            help="Function tasks: show the covering tests in the prompt, as `generate` shows a repo's tests that "
            "mention a stub (off by default: the leak control keeps them out).",
        ),
    ] = False,
    rankers: Annotated[
        str,
        typer.Option(
            "--rankers",
            help="Function tasks: rankers to measure beside first, random and logprob, comma-separated: agree "
            "(the model writes tests from the docstring and each candidate runs on them in a sandboxed copy of "
            "its project; methods are left to logprob), reviewer, coder-reviewer. The report adds auto (agree, "
            "then logprob: what generate does). Added to a finished folder, they pick from its cached samples.",
        ),
    ] = "",
    out_dir: OutDir = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Fill functions and next lines in real projects (pinned PyPI sdists), scored by the projects' own tests.

    The first run downloads each project's sdist (sha256 checked), builds a venv with its test dependencies,
    runs its suite once with call tracing, and checks each candidate task (all cached in the user cache).
    Function tasks: pass@1/pass@5, the picks, exact match and edit similarity of the body. Line tasks: exact
    match and edit similarity of the next 1-3 lines, and the retrievers' R@1, R@10 and MRR@10.
    """
    import random

    from assistant.backends import SamplingParams
    from assistant.cache import JsonlCache
    from assistant.core.agreement import AgreementRanker
    from assistant.core.repair import RepairOptions
    from assistant.evaluate import write_report
    from assistant.evaluate.codegen import EXTRA_RANKERS, USER_RANKERS
    from assistant.evaluate.repo.projects import parse_projects, prepare
    from assistant.evaluate.repo.run import (
        TRAINED,
        check_strategies,
        function_table,
        index_project,
        line_table,
        retrieval_of,
        run_function_tasks,
        run_line_tasks,
        summarize_functions,
        summarize_lines,
    )
    from assistant.evaluate.repo.tasks import function_tasks, line_tasks
    from assistant.pipeline.pipeline import Pipeline

    check_range("--limit", limit, 1)
    check_seed(seed)
    check_range("-n", n, 1, MAX_N)
    check_range("--demos", demos, 0, MAX_K)
    check_range("--timeout", timeout, 0, MAX_TIMEOUT, low_open=True)
    check_range("--temperature", temperature, 0, MAX_TEMPERATURE)
    check_range("--top-p", top_p, 0, 1, low_open=True)
    check_range("--repair", repair, 0, MAX_REPAIR)
    if task not in ("function", "line", "both", "retrieval"):
        raise UsageError(f"--task is function, line, both or retrieval, not {task!r}")
    if line_fragments not in ("other-files", "any"):
        raise UsageError(f"--line-fragments is other-files or any, not {line_fragments!r}")
    if strategies is None:  # what generate does, beside its baselines; +file only where a stub is filled
        strategies = "zero,bm25,hybrid" + (",hybrid+file" if task == "function" else "")
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    check_strategies(names, task)
    extra = [name.strip() for name in rankers.split(",") if name.strip()]
    for name in extra:
        if name not in EXTRA_RANKERS:
            raise UsageError(f"--rankers: unknown ranker {name!r}; choose from {', '.join(EXTRA_RANKERS)}")
    specs = parse_projects(project)
    wanted = _task_ids(tasks_file) if tasks_file is not None else None
    settings = backend_settings(backend, model, base_url, api, timeout, engine=engine)
    folder = out_dir or _default_folder(f"repo-n{n}-seed{seed}")
    config = {
        "command": "repo",
        "projects": [f"{s.name}=={s.version}" for s in specs],
        "task": task,
        "limit": limit,
        "seed": seed,
        "n": n,
        "demos": demos,
        "backend": settings.backend,
        "engine": _engine(settings),
        "model": _model(settings),
        "temperature": temperature,
        "top_p": top_p,
        "line_fragments": line_fragments,
        "redraw": redraw,
        "repair": repair,
        "tests_in_prompt": tests_in_prompt,
        "strategies": names,
        "tasks": sorted(wanted) if wanted is not None else None,
    }
    legacy = {"line_fragments": "any", "redraw": False, "repair": 0, "tests_in_prompt": False}
    _prepare(folder, config, legacy=legacy, unrecorded=("engine",))

    def subset(items: list) -> list:
        if wanted is not None:
            items = [t for t in items if t.task_id in wanted]
        # Walked in the seeded order, not by name: a run stopped early holds a sample of every project.
        order = sorted(items, key=lambda t: t.task_id)
        random.Random(seed).shuffle(order)
        return order[: limit or len(order)]

    started = time.perf_counter()
    if task == "retrieval":
        _repo_retrieval(specs, names, subset, folder, json_output)
        return
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        projects = [prepare(spec, progress=ui) for spec in specs]
        # The trained strategies never learn from a function task, whichever tasks run, so they need the list.
        trained = any(retrieval_of(s) in TRAINED for s in names)
        every_function = (
            [t for p in projects for t in function_tasks(p, progress=ui)] if task != "line" or trained else []
        )
        every_line = [t for p in projects for t in line_tasks(p)] if task != "function" else []
        runnable = (every_function if task != "line" else []) + every_line
        if wanted is not None:
            missing = sorted(wanted - {t.task_id for t in runnable})
            if missing:
                kind = {"function": "function", "line": "line"}.get(task, "function or line")
                more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
                raise UsageError(
                    f"--tasks: {missing[0]!r} is not a {kind} task of {', '.join(config['projects'])}{more}"
                )
        functions = subset(every_function) if task != "line" else []
        lines = subset(every_line)
        pipeline = Pipeline(settings=settings)
        encoder = pipeline.encoder()
        indexes = {p.name: index_project(p, encoder, progress=ui) for p in projects}
        generator = pipeline.backend(progress=ui)
        adapters = _selfracg_identity(names)
        function_rows = line_rows = None
        if functions:
            params = SamplingParams(n=n, temperature=temperature, top_p=top_p)
            measured = pipeline.rankers("+".join([USER_RANKERS, *extra]))  # the objects `assist generate` ranks with
            for ranker in measured:
                if isinstance(ranker, AgreementRanker):  # its tests are kept, so a resumed run asks the model once
                    ranker.cache = JsonlCache(folder / "agree-tests.jsonl")
            records = run_function_tasks(
                functions,
                indexes,
                names,
                generator,
                folder,
                params=params,
                demos=demos,
                seed=seed,
                rankers=measured,
                held_out=every_function,
                progress=ui,
                redraw=redraw,
                repair=RepairOptions(rounds=repair, n=min(n, REPAIR_N)) if repair else None,
                tests_in_prompt=tests_in_prompt,
            )
            function_rows = summarize_functions(records, [k for k in (1, 5) if k <= n])
        if lines:
            line_records = run_line_tasks(
                lines,
                indexes,
                names,
                generator,
                folder,
                demos=demos,
                other_files=line_fragments == "other-files",
                held_out=every_function,
                progress=ui,
            )
            line_rows = summarize_lines(line_records)
    _record_retrievers(folder, adapters, _selfracg_identity(names), [t.task_id for t in functions + lines])
    elapsed = time.perf_counter() - started
    header = (
        f"{len(functions)} function tasks and {len(lines)} line tasks from "
        f"{', '.join(config['projects'])}; n={n}, {demos} demonstrations or fragments; {elapsed / 60:.1f} min"
    )
    report = [f"# assist eval repo\n\n{header}\n"]
    if function_rows:
        report += ["## Function level (percent, 95% bootstrap intervals; differences paired by task)\n",
                   function_table(function_rows), ""]  # fmt: skip
    if line_rows:
        report += ["## Line level (EM, ES in percent; R@k and MRR@10 of the fragment holding the line)\n",
                   line_table(line_rows), ""]  # fmt: skip
    # report.md covers every record the folder holds (earlier calls' strategies too); the terminal, this call's.
    write_report(folder)
    if json_output:
        out.print_json(
            json.dumps({"out": str(folder), "seconds": round(elapsed, 1), "function": function_rows, "line": line_rows})
        )
        return
    out.print("\n".join(report))
    err.print(f"results: {folder} (report.md)")


def _selfracg_identity(names: list[str]) -> dict[str, dict]:
    """strategy → identity of the generic SelfRACG adapters, for each strategy of `eval repo` that retrieves with
    them (empty when none does or none are trained: such a run stops with its own error)."""
    from assistant.evaluate.repo.run import retrieval_of
    from assistant.methods.artifacts import directory_identity

    using = [name for name in names if retrieval_of(name) == "selfracg"]
    if not using:
        return {}
    from assistant.methods.selfracg import generic_dir  # imports torch: only where the run loads it anyway

    identity = directory_identity(generic_dir())
    return {name: identity for name in using} if identity is not None else {}


def _repo_retrieval(specs: list, names: list[str], subset: Callable[[list], list], folder: Path, as_json: bool) -> None:
    """`eval repo --task retrieval`: each retriever's rank of the positive fragment for the line tasks."""
    from assistant.cache import JsonlCache, cache_key
    from assistant.evaluate import write_report
    from assistant.evaluate.repo.projects import prepare
    from assistant.evaluate.repo.run import (
        TRAINED,
        index_project,
        retrieval_table,
        run_line_retrieval,
        summarize_retrieval,
    )
    from assistant.evaluate.repo.tasks import function_tasks, line_tasks
    from assistant.pipeline.pipeline import load_encoder

    if names == ["zero"]:
        raise UsageError("--task retrieval needs a retriever among --strategies (zero retrieves nothing)")
    with ProgressUI(show_progress(as_json), plain=True) as ui:
        projects = [prepare(spec, progress=ui) for spec in specs]
        lines = subset([t for p in projects for t in line_tasks(p)])
        # What the trained strategies never learn from: every function task of the projects.
        held_out = [t for p in projects for t in function_tasks(p, progress=ui)] if set(names) & set(TRAINED) else []
        encoder = load_encoder()
        indexes = {p.name: index_project(p, encoder, progress=ui) for p in projects}
        adapters = _selfracg_identity(names)
        records = run_line_retrieval(lines, indexes, names, progress=ui, held_out=held_out)
    store = JsonlCache(folder / "line-retrieval.jsonl")
    for record in records:
        store.put(cache_key(kind="retrieval", task=record["task_id"], strategy=record["strategy"]), record)
    _record_retrievers(folder, adapters, _selfracg_identity(names), [t.task_id for t in lines])
    write_report(folder)
    rows = summarize_retrieval(records)
    if as_json:
        out.print_json(json.dumps({"out": str(folder), "tasks": len(lines), "rows": rows}))
        return
    out.print(f"{len(lines)} line tasks; the positive is the 20-line fragment holding the first hidden line\n")
    out.print(retrieval_table(rows))
    err.print(f"results: {folder} (report.md)")


@eval_app.command("likelihood")
@friendly_errors
def likelihood(
    dataset: Dataset = "mbpp",
    split: Annotated[str, typer.Option(help="MBPP split.")] = "test",
    limit: Limit = None,
    seed: Seed = 0,
    strategies: Strategies = "zero,random,bm25,dense",
    demos: Demos = 4,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="Scoring backend: local, or openai when the configured server (OPENAI_BASE_URL, "
            "ASSIST_OPENAI_API=completions) echoes prompt log-probabilities, as vLLM does.",
        ),
    ] = None,
    engine: EngineOpt = None,
    model: ModelOpt = None,
    pool: Pool = "mbpp",
    out_dir: OutDir = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Mean log-probability of each task's reference solution given each strategy's demonstrations."""
    from assistant.evaluate import run_likelihood, summarize_likelihood, write_report
    from assistant.evaluate.report import likelihood_table, retriever_identities

    check_range("--limit", limit, 1)
    check_seed(seed)
    check_range("--demos", demos, 0, MAX_K)
    tasks, names = _select_tasks(dataset, split, limit, seed, strategies)
    settings = backend_settings(backend, model, engine=engine)
    name = parse_dataset(dataset).name
    folder = out_dir or _default_folder(f"likelihood-{name}-{split if name == 'mbpp' else 'all'}-seed{seed}")
    config = {
        "command": "likelihood",
        "dataset": name,
        "split": split,
        "limit": limit,
        "seed": seed,
        "demos": demos,
        "backend": settings.backend,
        "engine": _engine(settings),
        "model": _model(settings),
        "pool": parse_dataset(pool).name,
        "strategies": names,
    }
    _prepare(folder, config, unrecorded=("engine",))
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        _, demo_pool, scorer = _load_models(pool, settings, ui)
        if not scorer.can_score:
            raise UsageError(f"eval likelihood needs a backend that scores given text: {scorer.scoring_unavailable}")
        trained = retriever_identities(demo_pool.index, names)
        records = run_likelihood(tasks, demo_pool, names, scorer, folder, demos=demos, seed=seed, progress=ui)
        now = retriever_identities(demo_pool.index, names)
        _record_retrievers(folder, trained, now, [task.task_id for task in tasks])
    rows = summarize_likelihood(records)
    write_report(folder)
    if json_output:
        out.print_json(json.dumps({"out": str(folder), "tasks": len(tasks), "rows": rows}))
        return
    out.print(f"{len(tasks)} tasks of {dataset} ({split}), {demos} demonstrations from {pool}; 95% bootstrap intervals")
    out.print(likelihood_table(rows))
    err.print(f"results: {folder} (report.md, charts)")


@eval_app.command("report")
@friendly_errors
def report(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="A results folder written by assist eval; or several `eval repo` folders of disjoint function "
            "tasks, run with the same settings, to pool into one table (printed, no folder is written)."
        ),
    ],
    versus: Annotated[
        str | None,
        typer.Option(
            help="Add each strategy's difference from this one (e.g. dense), paired by task, with 95% CIs. "
            "Remembered in the folder's config.json, so later runs keep these tables; `none` forgets it. Pooling: "
            "a column of pass@1 against it."
        ),
    ] = None,
    strategies: Annotated[
        str | None,
        typer.Option(help="Pooling: the strategies to compare, comma-separated (default: those every folder ran)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Pooling: print the rows as JSON.")] = False,
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
    from assistant.evaluate.repo.pool import pooled_records
    from assistant.evaluate.repo.run import VERSUS, function_table, summarize_functions

    names = [s.strip() for s in strategies.split(",") if s.strip()] if strategies else None
    records, counts = pooled_records(results, names)
    if versus is not None and versus not in {r["strategy"] for r in records}:
        raise UsageError(f"--versus {versus}: the pooled folders hold no records of it")
    n = min(r["n"] for r in records)
    baselines = [*VERSUS, *([versus] if versus and versus not in VERSUS else [])]
    rows = summarize_functions(records, [k for k in (1, 5) if k <= n], versus=baselines)
    if json_output:
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


@eval_app.command("retrieval")
@friendly_errors
def retrieval(
    method: Annotated[str, typer.Option(help="The trained retriever to evaluate: tstr.")] = "tstr",
    dataset: Dataset = "mbpp",
    split: Annotated[str, typer.Option(help="MBPP split the references come from.")] = "test",
    limit: Limit = None,
    seed: Seed = 0,
    pool: Pool = "mbpp",
    json_output: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Pairwise ranking accuracy on (reference, closer code, farther code) triplets; no LLM involved.

    Compares the frozen encoder, the trained retriever, and an oracle that embeds the reference's code itself
    (scoring by S_c itself would be 1.0 by construction).
    """

    from assistant.evaluate import load_dataset, load_pool, subset
    from assistant.evaluate.retrieval import run_retrieval_eval
    from assistant.pipeline.pipeline import Pipeline

    check_range("--limit", limit, 1)
    check_seed(seed)
    if method != "tstr":
        raise UsageError("eval retrieval measures TST^R (--method tstr)")
    tasks = subset(load_dataset(dataset, split), limit, seed)
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
            test_vectors, [t.reference for t in tasks], pool_vectors, pool_codes, scorers, seed=seed
        )
    if json_output:
        out.print_json(json.dumps({"tasks": len(tasks), "embedder": embedder.name, "rows": rows}))
        return
    out.print(
        f"{len(tasks)} references from {dataset} ({split}), pool {pool}, {embedder.name} embeddings; "
        "pairwise accuracy, 95% bootstrap CI"
    )
    lines = ["| scorer | triplets | count | accuracy |", "|---|---|---|---|"]
    for row in rows:
        mean, low, high = row["accuracy"]
        lines.append(f"| {row['scorer']} | {row['triplets']} | {row['count']} | {mean:.3f} [{low:.3f}, {high:.3f}] |")
    out.print("\n".join(lines))


@eval_app.command("docstring")
@friendly_errors
def docstring_eval(
    strategies: Annotated[
        str,
        typer.Option(
            help="Comma-separated: zero, bm25 (RAF_BM25: exemplar by code tokens), dense, jointcom (the retriever "
            "trained by `assist train docstring-retriever --stdlib`)."
        ),
    ] = "zero,bm25,dense",
    limit: Annotated[int | None, typer.Option(help="Test functions (a seeded sample of the held-out modules).")] = 200,
    k: Annotated[int, typer.Option("-k", help="Exemplars per prompt (JOINTCOM uses the single best).")] = 1,
    seed: Seed = 0,
    backend: BackendOpt = None,
    engine: EngineOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    out_dir: OutDir = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Docstring generation on held-out standard-library modules: corpus/sentence BLEU-4, ROUGE-L, METEOR.

    The stdlib's modules are split (seeded) into exemplar modules and test modules; split.json in the
    results folder names them. Cached and resumable.
    """
    from assistant.core.docwriter import ExemplarIndex
    from assistant.evaluate.docstring_eval import (
        STRATEGIES,
        docstring_table,
        load_docstring_task,
        run_docstring_eval,
        summarize_docstrings,
    )
    from assistant.paths import atomic_write_text
    from assistant.pipeline.pipeline import Pipeline

    check_range("--limit", limit, 1)
    check_range("-k", k, 0)
    check_seed(seed)
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if not names or unknown:
        raise UsageError(f"unknown strategy {unknown[0] if unknown else ''!r}; choose from: {', '.join(STRATEGIES)}")
    settings = backend_settings(backend, model, base_url, engine=engine)
    folder = out_dir or _default_folder(f"docstring-stdlib-{settings.model or 'default'}-s{seed}")
    _prepare(folder, {"task": "docstring", "k": k, "seed": seed, "model": _model(settings), "strategies": names,
                   "limit": limit})  # fmt: skip
    pipeline = Pipeline(settings=settings)
    with ProgressUI(show_progress(json_output), plain=True) as ui:
        pool, items, split = load_docstring_task(limit, seed)
        atomic_write_text(folder / "split.json", json.dumps(split, indent=1))
        ui.status(f"{len(items)} test functions from {len(split['test_modules'])} held-out modules; "
                  f"{len(pool)} exemplars")  # fmt: skip
        indexes = {}
        for name in names:
            if name == "jointcom":
                from assistant.methods.jointcom import retriever_dir, trained_encoder

                trained = trained_encoder(retriever_dir(pool))
                if trained is None:
                    raise UsageError(
                        "no JOINTCOM retriever trained on this split: run "
                        f"`assist train docstring-retriever --stdlib --seed {seed}` first"
                    )
                indexes[name] = ExemplarIndex(pool, trained)
            else:
                indexes[name] = (
                    None if name == "zero" else ExemplarIndex(pool, pipeline.encoder() if name == "dense" else None)
                )
        generator = pipeline.backend(progress=ui)
        records = run_docstring_eval(items, indexes, generator, folder, k=k, progress=ui)
    rows = summarize_docstrings(records)
    table = docstring_table(rows)
    atomic_write_text(folder / "report-docstring.md", f"# Docstrings on held-out stdlib modules\n\n{table}\n")
    if json_output:
        out.print_json(json.dumps({"rows": rows, "split": split}))
    else:
        out.print(f"{len(items)} functions from held-out modules: {', '.join(split['test_modules'][:12])}"
                  f"{' ...' if len(split['test_modules']) > 12 else ''} (all in {folder / 'split.json'})")  # fmt: skip
        out.print(table, markup=False, highlight=False)


@eval_app.command("discriminator")
@friendly_errors
def discriminator_eval(
    from_bank: Annotated[
        str, typer.Option("--from-bank", help="Training problems with tests: mbpp[:PATH] (MBPP's train split).")
    ] = "mbpp",
    from_eval: Annotated[
        list[Path] | None,
        typer.Option("--from-eval", help="Add the model's candidates from a codegen run on MBPP train. Repeatable."),
    ] = None,
    candidates: Annotated[
        list[Path] | None,
        typer.Option(
            "--candidates",
            help="Rank the cached candidates of a codegen run (a test split) with each variant; each strategy "
            "in it is ranked and reported on its own.",
        ),
    ] = None,
    variants: Annotated[
        str,
        typer.Option(
            help="Comma-separated: condor, no-contrastive, no-partial-fixes, plain (CodeRanker-style): MiniLM "
            "fine-tuned; generator: the local generator frozen, a head over its hidden states."
        ),
    ] = "condor,no-contrastive,no-partial-fixes,plain",
    mutants: Annotated[int, typer.Option(help="Mutants per known-correct program.")] = 4,
    epochs: Annotated[int, typer.Option(help="Classifier epochs.")] = 2,
    holdout: Annotated[float, typer.Option(help="Share of training problems held out for P/R/F1.")] = 0.2,
    seed: Seed = 0,
    out_dir: OutDir = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Condor against its ablations: P/R/F1 on held-out problems, and pass@1 after ranking cached candidates.

    Every variant is trained on the same data and split; pass@1 compares them with the first sample, a
    random choice, mean log-probability and the oracle on the SAME samples (those of --candidates runs).
    """
    from assistant.evaluate import load_dataset
    from assistant.evaluate.discriminator import (
        discriminator_tables,
        load_candidates,
        parse_variants,
        run_discriminator_eval,
    )
    from assistant.methods.condor.data import build_dataset, training_problems
    from assistant.methods.condor.model import CondorConfig, verification_cache
    from assistant.paths import atomic_write_text

    check_range("--mutants", mutants, 0)
    check_range("--epochs", epochs, 1)
    check_range("--holdout", holdout, 0, 1, low_open=True, high_open=True)
    check_seed(seed)
    names = parse_variants(variants)
    if not is_mbpp(from_bank):
        raise UsageError("eval discriminator trains on MBPP's train split: --from-bank mbpp[:PATH]")
    runs = []
    for folder in candidates or []:
        config, groups = load_candidates(folder)
        spec = config["dataset"] if config["dataset"] != "mbpp" else from_bank
        texts = {t.task_id: t.requirement for t in load_dataset(spec, config.get("split", "test"))}
        unknown = sorted({r["task_id"] for _, records in groups for r in records} - set(texts))
        if unknown:
            raise UsageError(
                f"{folder} has tasks ({', '.join(unknown[:3])}...) that {spec} does not: was it run on another file?"
            )
        runs += [(name, records, texts) for name, records in groups]
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
