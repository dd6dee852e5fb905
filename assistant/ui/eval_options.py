"""The options of `assist eval ...`, each declared once (a Typer `Annotated` alias, one line in a command's signature),
and the checks that several commands run on them before any model loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from assistant.config import MAX_K, MAX_N, MAX_TEMPERATURE, MAX_TIMEOUT, REPAIR_BUDGET_S, REPAIR_N
from assistant.datasets import MBPP_DEFAULT_PATH, parse_dataset
from assistant.errors import UsageError
from assistant.ui.options import check_range, check_seed, option_group

_C = TypeVar("_C", bound=Callable[..., Any])

# Shared by several commands.
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


def _out_dir(example: str) -> Any:
    """The --out option of a run whose default folder is named like `example` (each command's own)."""
    return Annotated[
        Path | None,
        typer.Option(
            "--out",
            help=f"Results folder. Default: the run's name (e.g. {example}) under $ASSIST_RESULTS_DIR, else under "
            "the user data folder's results/ (~/.local/share/assist/results on Linux), never the working folder.",
        ),
    ]


OutDir = _out_dir("codegen-humaneval-all-n5-seed0")  # eval codegen
RepoOutDir = _out_dir("repo-n5-seed0")
LikelihoodOutDir = _out_dir("likelihood-mbpp-test-seed0")
DocstringOutDir = _out_dir("docstring-stdlib-default-s0")
DiscriminatorOutDir = _out_dir("discriminator-mbpp-seed0")
SummaryJson = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
RowsJson = Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")]
Temperature = Annotated[float, typer.Option(help="Sampling temperature.")]
TopP = Annotated[float, typer.Option(help="Nucleus sampling threshold.")]

# `eval codegen`
CodegenSplit = Annotated[str, typer.Option(help="MBPP split: test, validation, train, prompt.")]
Samples = Annotated[int, typer.Option("-n", help="Samples per task.")]
PassKs = Annotated[
    str | None,
    typer.Option(
        "-k",
        help="pass@k values, e.g. 1,3,5 (each <= n; default 1,5, or 1,n with fewer than 5 samples).",
        show_default=False,
    ),
]
MaxNewTokens = Annotated[int, typer.Option(help="Longest sample, in tokens.")]
Batch = Annotated[
    int,
    typer.Option(help="Tasks sampled together in one batched call (local backend; faster on a CPU than one by one)."),
]
CodegenRankers = Annotated[
    str,
    typer.Option(
        "--rankers",
        help="Rankers to measure beside first, random and logprob, comma-separated: agree (the model writes "
        "tests for each task and the candidates run on them; a model call and ~40 sandbox runs per task), "
        "reviewer (log p(requirement | code) under the same model; one scoring call per task), "
        "coder-reviewer (reviewer plus logprob). "
        "Added to a finished folder, they pick from its cached samples: nothing is sampled again.",
    ),
]
Extend = Annotated[
    Path | None,
    typer.Option(
        "--extend",
        help="A finished run of this command at a smaller -n (the same settings otherwise): its samples, "
        "agree's written tests and the reviewer's scores are read from there (never written to), so only the "
        "missing samples are drawn and scored. "
        "Samples come in blocks of 5, so -n 10 adds one block to an -n 5 run.",
    ),
]

# `eval repo`
Projects = Annotated[
    str,
    typer.Option(
        "--project",
        help="Comma-separated: boltons, click, tabulate, cachetools, or `all` (those four, the default); "
        "jinja2 and marshmallow, or `held-out` (both): projects added after the four's results, for checking "
        "a finding on code nothing here was tuned on.",
    ),
]
RepoTask = Annotated[
    str,
    typer.Option(
        "--task",
        help="function, line, both, or retrieval (the line tasks' R@k and MRR@10 alone: no generation; "
        "seconds for bm25/dense/hybrid, while selfracg-init encodes every fragment with the LLM).",
    ),
]
RepoLimit = Annotated[
    int | None, typer.Option(help="At most this many tasks of each kind (a seeded subset; nested as it grows).")
]
TasksFile = Annotated[
    Path | None,
    typer.Option(
        "--tasks",
        help="A file of task ids, one per line, as the records name them (`#` starts a comment): only those "
        "run, e.g. the list `benchmarks/repo_callees.py FOLDER --list-unseen` prints. --limit applies after.",
    ),
]
RepoStrategies = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated (default: zero,bm25,hybrid, and hybrid+file with --task function): zero, bm25, "
        "dense, hybrid (what generate uses; filling a stub, hybrid+file), tstr "
        "(TST^R trained in seconds on the project's functions less the benchmark's function tasks), lail (LAIL "
        "trained on the same functions, 128 documented ones labeled by the model, about an hour a project with "
        "the 1.5B on 2 cores the first time, then cached; on line tasks both search the fragments with what they "
        "learned), "
        "selfracg-init (SelfRACG's branch untrained: the generator's own attention; loads the transformers model "
        "too), selfracg (the generic adapters of `assist train retriever selfracg --corpus DIR`). On "
        "function tasks any of them + apis (e.g. hybrid+apis, zero+apis) also shows the project's functions from "
        "other files that the target file calls or imports, as `generate --apis` does; any retriever @fragments "
        "(e.g. hybrid@fragments) shows its 20-line fragments of the project's other files, found with the code "
        "before the body, instead of demonstrations (RepoEval's context); the two combine as X@fragments+apis. "
        "Any retriever +file (e.g. hybrid+file, hybrid+file+apis) may take its demonstrations from the target "
        "file's other functions too, as `generate` does by default (never the hidden one). Any strategy +attrs, "
        "last (e.g. zero+attrs, hybrid+file+attrs), shows what a method's class sets on self in the context (an "
        "experiment; generate does not yet)."
    ),
]
RepoSamples = Annotated[int, typer.Option("-n", help="Samples per function task (line tasks are greedy).")]
LineFragments = Annotated[
    str,
    typer.Option(
        "--line-fragments",
        help="Line tasks: where the prompt's fragments may come from. other-files (default): the target "
        "file is left out, as `generate` leaves it out, since the prompt holds its code before the cut; "
        "any: every fragment but those overlapping the hidden lines (how results/repo-n5-seed0 ran). "
        "R@k and MRR@10 always rank every fragment.",
    ),
]
Redraw = Annotated[
    bool,
    typer.Option(
        "--redraw",
        help="Function tasks: draw once more each sample that wrote nothing, as `generate` does by default "
        "(off here, so the earlier results folders resume as they ran; results/repo-redraw-n5-seed0 ran with it).",
    ),
]
Repair = Annotated[
    int,
    typer.Option(
        "--repair",
        help="Function tasks: with the covering tests visible, a task none of whose samples passes them gets up "
        f"to N repair rounds as `generate` runs them ({REPAIR_N} samples a round, within {REPAIR_BUDGET_S:g} s); "
        "each record keeps the first round's result and the repaired one apart. 0 (default): none.",
    ),
]
TestsInPrompt = Annotated[
    bool,
    typer.Option(
        "--tests-in-prompt",
        help="Function tasks: show the covering tests in the prompt, as `generate` shows a repo's tests that "
        "mention a stub (off by default: the leak control keeps them out).",
    ),
]
RepoRankers = Annotated[
    str,
    typer.Option(
        "--rankers",
        help="Function tasks: rankers to measure beside first, random and logprob, comma-separated: agree "
        "(the model writes tests from the docstring and each candidate runs on them in a sandboxed copy of "
        "its project; methods are left to logprob), reviewer, coder-reviewer. The report adds auto (agree, "
        "then logprob: what generate does). Added to a finished folder, they pick from its cached samples.",
    ),
]

# `eval likelihood`
LikelihoodSplit = Annotated[str, typer.Option(help="MBPP split.")]
ScoringBackend = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="Scoring backend: local, or openai when the configured server (OPENAI_BASE_URL, "
        "ASSIST_OPENAI_API=completions) echoes prompt log-probabilities, as vLLM does.",
    ),
]

# `eval report`
ResultFolders = Annotated[
    list[Path],
    typer.Argument(
        help="A results folder written by assist eval; or several `eval repo` folders of disjoint function "
        "tasks, run with the same settings, to pool into one table (printed, no folder is written)."
    ),
]
Versus = Annotated[
    str | None,
    typer.Option(
        help="Add each strategy's difference from this one (e.g. dense), paired by task, with 95% CIs. "
        "Remembered in the folder's config.json, so later runs keep these tables; `none` forgets it. Pooling: "
        "a column of pass@1 against it."
    ),
]
PoolStrategies = Annotated[
    str | None,
    typer.Option(help="Pooling: the strategies to compare, comma-separated (default: those every folder ran)."),
]
PoolJson = Annotated[bool, typer.Option("--json", help="Pooling: print the rows as JSON.")]

# `eval retrieval`
Method = Annotated[str, typer.Option(help="The trained retriever to evaluate: tstr.")]
RetrievalSplit = Annotated[str, typer.Option(help="MBPP split the references come from.")]

# `eval docstring`
DocStrategies = Annotated[
    str,
    typer.Option(
        help="Comma-separated: zero, bm25 (RAF_BM25: exemplar by code tokens), dense, jointcom (the retriever "
        "trained by `assist train docstring-retriever --stdlib`)."
    ),
]
DocLimit = Annotated[int | None, typer.Option(help="Test functions (a seeded sample of the held-out modules).")]
Exemplars = Annotated[int, typer.Option("-k", help="Exemplars per prompt (JOINTCOM uses the single best).")]

# `eval discriminator`
FromBank = Annotated[
    str, typer.Option("--from-bank", help="Training problems with tests: mbpp[:PATH] (MBPP's train split).")
]
FromEval = Annotated[
    list[Path] | None,
    typer.Option("--from-eval", help="Add the model's candidates from a codegen run on MBPP train. Repeatable."),
]
CandidateRuns = Annotated[
    list[Path] | None,
    typer.Option(
        "--candidates",
        help="Rank the cached candidates of a codegen run (a test split) with each variant; each strategy "
        "in it is ranked and reported on its own. Repeatable.",
    ),
]
Variants = Annotated[
    str,
    typer.Option(
        help="Comma-separated: condor, no-contrastive, no-partial-fixes, plain (CodeRanker-style): MiniLM "
        "fine-tuned; generator: the local generator frozen, a head over its hidden states."
    ),
]
Mutants = Annotated[int, typer.Option(help="Mutants per known-correct program.")]
Epochs = Annotated[int, typer.Option(help="Classifier epochs.")]
Holdout = Annotated[float, typer.Option(help="Share of training problems held out for P/R/F1.")]
ResultsJson = Annotated[bool, typer.Option("--json", help="Print the results as JSON.")]


@dataclass(frozen=True)
class TaskFlags:
    """Which benchmark tasks `eval codegen`, `likelihood` and `retrieval` run, as typed: the dataset and its split,
    a subset of --limit tasks chosen by --seed, and the demonstration strategies (see :func:`task_options`). Each
    field is annotated with its option, in the order a command's help lists them."""

    dataset: Dataset = "humaneval"
    split: CodegenSplit = "test"
    limit: Limit = None
    seed: Seed = 0
    strategies: Strategies = "zero,random,bm25,dense"

    def config(self) -> dict[str, Any]:
        """What a run's config.json records of them, after its command (the strategies, parsed, come last)."""
        return {
            "dataset": parse_dataset(self.dataset).name,
            "split": self.split,
            "limit": self.limit,
            "seed": self.seed,
        }


ALL_TASKS = TaskFlags()  # the signatures' placeholder: @task_options puts each command's own defaults in its place


def task_options(*names: str, dataset: str = "humaneval", split: Any = CodegenSplit) -> Callable[[_C], _C]:
    """Decorate a command whose signature has one parameter of type TaskFlags: Typer sees the options `names`
    (default: all) in its place, in TaskFlags' order, and the command gets them as one TaskFlags. `dataset`: the
    command's default benchmark; `split`: its --split option, whose help says what the split is for."""
    return option_group(replace(ALL_TASKS, dataset=dataset), names, {"split": split})


def check_subset(limit: int | None, seed: int) -> None:
    """`--limit` and `--seed`, which every benchmark command takes."""
    check_range("--limit", limit, 1)
    check_seed(seed)


def check_sampling(n: int, demos: int, timeout: float | None, temperature: float, top_p: float) -> None:
    """The sampling options `eval codegen` and `eval repo` share, in the order their errors were always checked."""
    check_range("-n", n, 1, MAX_N)
    check_range("--demos", demos, 0, MAX_K)
    check_range("--timeout", timeout, 0, MAX_TIMEOUT, low_open=True)
    check_range("--temperature", temperature, 0, MAX_TEMPERATURE)
    check_range("--top-p", top_p, 0, 1, low_open=True)


def parse_ks(spec: str) -> list[int]:
    """`-k 1,5`: the pass@k values, sorted and distinct."""
    try:
        ks = sorted({int(part) for part in spec.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"-k takes comma-separated integers like 1,5, not {spec!r}") from None
    if not ks or ks[0] < 1:
        raise UsageError("-k values must be 1 or more")
    return ks


def parse_rankers(spec: str) -> list[str]:
    """`--rankers agree,reviewer`: the extra rankers to measure, each one the evaluation knows."""
    from assistant.evaluate.codegen import EXTRA_RANKERS

    extra = [name.strip() for name in spec.split(",") if name.strip()]
    for name in extra:
        if name not in EXTRA_RANKERS:
            raise UsageError(f"--rankers: unknown ranker {name!r}; choose from {', '.join(EXTRA_RANKERS)}")
    return extra


def check_demos(demos: int) -> None:
    """`--demos`: 0 (zero-shot) to MAX_K."""
    check_range("--demos", demos, 0, MAX_K)
