"""Training data for the Condor discriminator: labelled programs, near-identical pairs, partial fixes.

Where programs come from (`../shared/docs/methods.md`, section 5):
- the model's own candidates for problems with tests (an `assist eval codegen` run on a train split),
  labelled by running the tests in the sandbox;
- semantic mutants of known-correct code (:mod:`assistant.methods.condor.mutants`): with tests, each is run and labelled
  by the result (a mutant that still passes is an equivalent one, so a correct variant); without tests
  (a repo's own functions) a mutant is taken as wrong and a rename as correct;
- partial fixes: for each near-identical (wrong, correct) pair, the versions half-way between them.

Pairs for the contrastive stage are programs of the same problem whose token Jaccard similarity is above
0.9: C-C (label 1) and E-C (label 0). Problems, not programs, are split into train and held-out parts, so
no held-out problem is seen in training.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from assistant import sandbox
from assistant.cache import JsonlCache, cache_key
from assistant.core.candidates import normal_form as _ast_form
from assistant.errors import UsageError
from assistant.methods.condor.mutants import mutants, partial_fixes, token_jaccard
from assistant.progress import Progress

PROBLEM_CHARS = 600  # the problem statement shown to the discriminator is cut here (the code matters more)


@dataclass(frozen=True)
class ProblemData:
    """A problem with what is known to be correct and what the model produced for it."""

    id: str
    text: str  # the requirement, as the discriminator sees it
    correct: tuple[str, ...] = ()  # known-correct programs (the reference, or a repo's function)
    samples: tuple[tuple[str, bool], ...] = ()  # (model candidate, passed its tests)
    tests: tuple[str, ...] = ()
    setup: str = ""
    prefix: str = ""


@dataclass(frozen=True)
class Program:
    """One labelled program of a problem; `source` says where it came from (reference, sample, mutant:op, ...)."""

    problem: str
    code: str
    correct: bool
    source: str


@dataclass(frozen=True)
class Pair:
    """Two near-identical programs of one problem: label 1 when both are correct (C-C), 0 for E-C."""

    problem: str
    a: str
    b: str
    label: int


@dataclass
class Dataset:
    """Everything one training run uses, with the counts that go into the artifact's provenance."""

    problems: dict[str, str]  # id → text
    programs: list[Program]
    pairs: list[Pair]
    partials: list[Program]
    stats: dict = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)  # problem id → its group (same correct code)

    def split(self, holdout: float, seed: int) -> tuple[Dataset, Dataset]:
        """(train, held-out) by problem; held-out keeps no partial fixes (every variant is scored on it)."""
        # Problems whose known-correct code is the same (copies in a repo or bank) go to the same side.
        groups: dict[str, list[str]] = {}
        for problem in sorted(self.problems):
            groups.setdefault(self.groups.get(problem, problem), []).append(problem)
        keys = sorted(groups)
        random.Random(seed).shuffle(keys)
        held: set[str] = set()
        for key in keys:
            if len(held) >= round(len(self.problems) * holdout):
                break
            held.update(groups[key])

        def part(keep: Callable[[str], bool], partials: bool) -> Dataset:
            return Dataset(
                problems={k: v for k, v in self.problems.items() if keep(k)},
                programs=[p for p in self.programs if keep(p.problem)],
                pairs=[p for p in self.pairs if keep(p.problem)],
                partials=[p for p in self.partials if keep(p.problem)] if partials else [],
                groups={k: v for k, v in self.groups.items() if keep(k)},
            )

        return part(lambda k: k not in held, True), part(lambda k: k in held, False)

    def describe(self) -> dict:
        """Counts by label and source (for the manifest and the training summary)."""
        sources: dict[str, int] = {}
        for program in [*self.programs, *self.partials]:
            name = program.source.split(":")[0]
            sources[name] = sources.get(name, 0) + 1
        return {
            "problems": len(self.problems),
            "programs": len(self.programs),
            "correct": sum(p.correct for p in self.programs),
            "wrong": sum(not p.correct for p in self.programs),
            "partial_fixes": len(self.partials),
            "pairs_cc": sum(p.label == 1 for p in self.pairs),
            "pairs_ec": sum(p.label == 0 for p in self.pairs),
            "by_source": sources,
        }


def normal_form(code: str) -> str:
    """The code's syntax tree as text (formatting and comments ignored); the raw text when it does not parse."""
    try:
        return _ast_form(code)
    except (SyntaxError, ValueError):
        return code


class _MemoryCache(dict):
    """A JsonlCache stand-in that keeps nothing on disk."""

    def put(self, key: str, value: object) -> None:
        self[key] = value


def _verify(
    jobs: list[tuple[ProblemData, str]], cache: JsonlCache | None, progress: Progress, stage: str
) -> dict[tuple[str, str], bool]:
    """Run each (problem, code) through the problem's tests in the sandbox, cached by content."""
    limits = sandbox.Limits(timeout_s=10, cpu_s=5, memory_mb=1024)

    def key(problem: ProblemData, code: str) -> str:
        return cache_key(
            kind="condor-verify", code=code, tests=list(problem.tests), setup=problem.setup, prefix=problem.prefix
        )

    store = cache if cache is not None else _MemoryCache()
    results: dict[tuple[str, str], bool] = {}
    pending = []
    for problem, code in jobs:
        k = key(problem, code)
        if k in store:
            results[(problem.id, code)] = bool(store.get(k))
        else:
            pending.append((problem, code))
    progress(stage, len(jobs) - len(pending), len(jobs))
    for start in range(0, len(pending), 32):
        chunk = pending[start : start + 32]
        runs = sandbox.run_many(
            [((p.prefix + "\n" + code) if p.prefix else code, p.tests, p.setup) for p, code in chunk], limits=limits
        )
        for (problem, code), run in zip(chunk, runs, strict=True):
            # A timeout on a busy machine says little about the code: use it now, but do not remember it.
            if run.status not in ("timeout", "resource-limit"):
                store.put(key(problem, code), run.ok)
            results[(problem.id, code)] = run.ok
        progress(stage, len(jobs) - len(pending) + start + len(chunk), len(jobs))
    return results


def build_dataset(
    problems: Sequence[ProblemData],
    *,
    mutants_per_program: int = 4,
    jaccard: float = 0.9,
    seed: int = 0,
    cache: JsonlCache | None = None,
    progress: Progress | None = None,
) -> Dataset:
    """Label programs (running tests where there are any), pair the near-identical ones, mine partial fixes."""
    report = progress or (lambda stage, done, total: None)
    programs: list[Program] = []
    to_verify: list[tuple[ProblemData, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(problem: ProblemData, code: str, correct: bool | None, source: str) -> None:
        identity = (problem.id, normal_form(code))
        if not code.strip() or identity in seen:
            return
        seen.add(identity)
        programs.append(Program(problem.id, code, bool(correct), source))
        if correct is None:
            to_verify.append((problem, code))

    for problem in problems:
        for code in problem.correct:
            add(problem, code, True, "reference")
        for code, passed in problem.samples:
            add(problem, code, passed, "sample")
        correct = [*problem.correct, *(code for code, passed in problem.samples if passed)]
        for number, code in enumerate(correct):
            for mutant in mutants(code, mutants_per_program, seed=seed + number):
                label = None if problem.tests else mutant.preserving
                add(problem, mutant.code, label, f"{'rename' if mutant.preserving else 'mutant'}:{mutant.operator}")
    if to_verify:
        verdicts = _verify(to_verify, cache, report, "run mutants' tests")
        programs = [
            Program(p.problem, p.code, verdicts[(p.problem, p.code)], p.source)
            if (p.problem, p.code) in verdicts
            else p
            for p in programs
        ]
    pairs = near_pairs(programs, jaccard)
    by_id = {p.id: p for p in problems}
    partial_programs: list[Program] = []
    pending: list[tuple[ProblemData, str]] = []
    for pair in pairs:
        if pair.label:
            continue
        for version in partial_fixes(pair.a, pair.b):
            identity = (pair.problem, normal_form(version))
            if identity in seen:
                continue  # deduplicated against the rest of the data
            seen.add(identity)
            partial_programs.append(Program(pair.problem, version, False, "partial"))
            if by_id[pair.problem].tests:
                pending.append((by_id[pair.problem], version))
    if pending:
        # With tests, a partial fix that happens to pass is labelled by the truth, not by assumption.
        verdicts = _verify(pending, cache, report, "run partial fixes' tests")
        partial_programs = [
            Program(p.problem, p.code, verdicts.get((p.problem, p.code), False), p.source) for p in partial_programs
        ]
    dataset = Dataset(
        problems={p.id: p.text[:PROBLEM_CHARS] for p in problems},
        programs=programs,
        pairs=pairs,
        partials=partial_programs,
        groups={p.id: normal_form(p.correct[0]) if p.correct else p.id for p in problems},
    )
    dataset.stats = dataset.describe()
    return dataset


def near_pairs(programs: Sequence[Program], jaccard: float = 0.9, per_problem: int = 40) -> list[Pair]:
    """C-C and E-C pairs of one problem's programs whose token Jaccard similarity exceeds `jaccard`.

    The wrong one is always `a` in an E-C pair. At most `per_problem` pairs per problem, the most similar first.
    """
    by_problem: dict[str, list[Program]] = {}
    for program in programs:
        by_problem.setdefault(program.problem, []).append(program)
    pairs: list[Pair] = []
    for problem, mine in by_problem.items():
        found = []
        for i, left in enumerate(mine):
            for right in mine[i + 1 :]:
                if not (left.correct or right.correct):
                    continue  # E-E pairs say nothing about what makes code correct
                similarity = token_jaccard(left.code, right.code)
                if similarity <= jaccard:
                    continue
                if left.correct and right.correct:
                    found.append((similarity, Pair(problem, left.code, right.code, 1)))
                else:
                    wrong, right_one = (left, right) if not left.correct else (right, left)
                    found.append((similarity, Pair(problem, wrong.code, right_one.code, 0)))
        found.sort(key=lambda item: -item[0])
        pairs.extend(pair for _, pair in found[:per_problem])
    return pairs


def fingerprint(problems: Iterable[ProblemData]) -> str:
    """A short hash of the training problems, recorded in the manifest: which data a discriminator saw."""
    digest = hashlib.sha256()
    for problem in sorted(problems, key=lambda p: p.id):
        digest.update(json.dumps(asdict(problem), sort_keys=True).encode())
    return digest.hexdigest()[:16]


def problems_from_tasks(tasks: Sequence, prefix: str = "") -> list[ProblemData]:
    """Benchmark tasks (MBPP's train split, a bank with tests) as problems with their reference solution."""
    return [
        ProblemData(
            id=f"{prefix}{task.task_id}",
            text=task.requirement,
            correct=(task.reference,) if task.reference else (),
            tests=tuple(task.tests),
            setup=task.setup,
            prefix=task.prefix,
        )
        for task in tasks
    ]


def problems_from_eval(folder: Path, mbpp_path: str = "", references: bool = True) -> list[ProblemData]:
    """The candidates of an `assist eval codegen` run, labelled by the tests they were run against.

    Refuses a run on a test split: a discriminator trained on test problems would be measured on them.
    """
    from assistant.datasets import load_dataset, read_run

    config, records = read_run(folder)
    if config.get("dataset") != "mbpp" or config.get("split") != "train":
        raise UsageError(
            f"{folder} holds candidates for {config.get('dataset')} ({config.get('split')}); train only on a train "
            "split (assist eval codegen --dataset mbpp --split train), never on problems you evaluate on"
        )
    tasks = {t.task_id: t for t in load_dataset(f"mbpp:{mbpp_path}" if mbpp_path else "mbpp", "train")}
    samples: dict[str, list[tuple[str, bool]]] = {}
    for record in records:
        for sample in record["samples"]:
            if sample["parsed"]:
                samples.setdefault(record["task_id"], []).append((sample["code"], bool(sample["passed"])))
    problems = []
    for task_id, found in samples.items():
        task = tasks.get(task_id)
        if task is None:
            continue
        problems.append(
            ProblemData(
                id=task_id,
                text=task.requirement,
                correct=(task.reference,) if references else (),
                samples=tuple(found),
                tests=task.tests,
                setup=task.setup,
                prefix=task.prefix,
            )
        )
    return problems


def eval_model(folder: Path) -> str | None:
    """The model whose candidates an `assist eval codegen` run holds, by its registered name; None when the
    run used the default of its day, which the config does not record."""
    from assistant.backends.models import resolve
    from assistant.datasets import read_run

    config = read_run(folder)[0]
    model = config.get("model")
    if not isinstance(model, str) or not model:
        return None
    if config.get("backend", "local") != "local":
        return model
    try:
        return resolve(model).name
    except UsageError:
        return model


def merge_problems(*groups: Sequence[ProblemData]) -> list[ProblemData]:
    """One problem per id: samples of several sources are pooled, known-correct programs deduplicated."""
    merged: dict[str, ProblemData] = {}
    for group in groups:
        for problem in group:
            old = merged.get(problem.id)
            if old is None:
                merged[problem.id] = problem
                continue
            merged[problem.id] = ProblemData(
                id=old.id,
                text=old.text,
                correct=tuple(dict.fromkeys([*old.correct, *problem.correct])),
                samples=(*old.samples, *problem.samples),
                tests=old.tests or problem.tests,
                setup=old.setup or problem.setup,
                prefix=old.prefix or problem.prefix,
            )
    return list(merged.values())


def problems_from_examples(examples: Sequence, prefix: str = "") -> list[ProblemData]:
    """A bank's or repo's (requirement, code) examples: the code is known-correct; its tests, if any, label mutants."""
    problems = []
    for number, example in enumerate(examples):
        problems.append(
            ProblemData(
                id=f"{prefix}{example.path}:{example.start_line or number}:{example.name}",
                text=example.requirement,
                correct=(example.code,),
                tests=tuple(example.tests),
            )
        )
    return problems


def problems_from_repo(root: Path) -> list[ProblemData]:
    """The documented functions of a git repo's tracked Python files (no tests: mutants are taken as wrong)."""
    from assistant.code.extract import repo_functions

    return problems_from_examples([e for e in repo_functions(root) if e.requirement.strip()])


def training_problems(from_bank: str | None, from_eval: Sequence[Path], root: Path | None) -> tuple[list, dict]:
    """The problems to train on and where they came from (for the manifest).

    `from_bank`: `mbpp[:PATH]` (MBPP's train split, with tests) or a JSONL bank; `from_eval`: codegen runs on
    MBPP train (the model's own candidates); neither: the repo at `root`.
    """
    from assistant.datasets import load_dataset

    groups: list[list[ProblemData]] = []
    sources: dict = {"eval": [str(folder) for folder in from_eval]}
    mbpp_path = ""
    if from_bank is not None and from_bank.split(":")[0] == "mbpp":
        mbpp_path = from_bank.partition(":")[2]
        groups.append(problems_from_tasks(load_dataset(from_bank, "train")))
        sources["bank"] = from_bank
    elif from_bank is not None:
        from assistant.code.examples import read_bank

        groups.append(problems_from_examples(read_bank(Path(from_bank))))
        sources["bank"] = from_bank
    groups.extend(problems_from_eval(folder, mbpp_path) for folder in from_eval)
    sources["eval_models"] = [eval_model(folder) for folder in from_eval]
    if not groups:
        if root is None:
            raise UsageError(
                "nothing to train on: give a bank or an eval run's candidates, or run inside a git repo",
                setting="discriminator:no_data",
            )
        groups.append(problems_from_repo(root))
        sources["repo"] = str(root)
    return merge_problems(*groups), sources
