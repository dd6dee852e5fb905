"""The repository benchmark's tasks, chosen by fixed rules before any model runs.

Function-level: a documented function or method of the project's code (not its tests) whose body is 2-40
lines, that at least one passing test executes (the suite's call map), and whose covering tests fail when the
body is replaced by `raise NotImplementedError` (checked once in the project sandbox, cached). The task shows
the file with that body removed (signature and docstring kept) and is solved when the covering tests pass.

Line-level (RepoEval's line task): a statement inside a function body of the project's code, chosen by a seeded
rule per project; the task is the next 1-3 lines after everything before them; scored by exact match and edit
similarity. Its retrieval positive is the 20-line fragment holding the first hidden line.
"""

from __future__ import annotations

import ast
import json
import random
import textwrap
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from assistant.code.parse import parse_module
from assistant.core.stubs import Stub, fill_body, find_functions
from assistant.evaluate.repo.projects import Project, bench_dir
from assistant.paths import atomic_write_text
from assistant.progress import Progress
from assistant.sandbox.project import ProjectLimits

MIN_BODY_LINES = 2
MAX_BODY_LINES = 40
LINE_TASKS_PER_PROJECT = 100
TASKS_VERSION = 1  # bump when a rule changes: cached task lists are then rebuilt
MUTANT = "raise NotImplementedError"
MUTANT_LIMITS = ProjectLimits(timeout_s=120, cpu_s=120, memory_mb=2048)


@dataclass(frozen=True)
class FunctionTask:
    """Write the body of `qualname` in `path`; solved when `tests` pass."""

    task_id: str  # "<project>:<path>::<qualname>"
    project: str
    path: str
    qualname: str
    line: int  # the `def` line
    start: int  # the first decorator's line
    end: int
    docstring: str
    body: str  # the hidden body at column 0 (the reference)
    tests: tuple[str, ...]  # the passing tests that execute it (node ids)

    def stubbed(self, text: str) -> str:
        """The file's text with the body removed (`...`), the signature and docstring kept."""
        return fill_body(text, self._stub(text), "...")

    def _stub(self, text: str) -> Stub:
        for stub in find_functions(text, self.path):
            if stub.qualname == self.qualname and stub.line == self.line:
                return stub
        raise ValueError(f"{self.task_id}: the function is not in the file any more")

    def to_json(self) -> dict:
        return _to_json(self, "tests")

    @classmethod
    def from_json(cls, data: dict) -> FunctionTask:
        return cls(**_tuple_field(data, "tests"))


@dataclass(frozen=True)
class LineTask:
    """Write lines `line`..`line + len(target) - 1` of `path` given every line before them."""

    task_id: str  # "<project>:<path>:<line>"
    project: str
    path: str
    line: int  # the first hidden line (1-based)
    target: tuple[str, ...]  # the hidden lines, as the file has them

    def to_json(self) -> dict:
        return _to_json(self, "target")

    @classmethod
    def from_json(cls, data: dict) -> LineTask:
        return cls(**_tuple_field(data, "target"))


def _to_json(task: FunctionTask | LineTask, listed: str) -> dict:
    """A task's fields as JSON holds them: its one tuple field (`listed`) as a list."""
    data = asdict(task)
    data[listed] = list(getattr(task, listed))
    return data


def _tuple_field(data: dict, listed: str) -> dict:
    """A task's JSON fields with its list field (`listed`) back as the tuple the task holds."""
    return {**data, listed: tuple(data[listed])}


def _body(text: str, stub: Stub) -> str:
    """The body's text at column 0 (as a candidate's body is read)."""
    return textwrap.dedent(text[stub.head_end : stub.body_end].lstrip("\r\n"))


def function_candidates(project: Project) -> Iterator[tuple[FunctionTask, str]]:
    """Every documented function with a 2-40 line body that a passing test executes, with its file's text.

    The call map names a function by (path, first line of its code object): Python 3.11 counts a decorated
    function from its first decorator, so both that line and the `def` line are looked up."""
    covering = project.covering()
    for path in project.source_files():
        text = (project.root / path).read_text(encoding="utf-8")
        try:
            functions = find_functions(text, path)
        except Exception:  # a file that does not parse on this Python is not a source of tasks
            continue
        for stub in functions:
            if stub.form != "body" or not (stub.docstring or "").strip():
                continue
            if not MIN_BODY_LINES <= stub.body_lines <= MAX_BODY_LINES:
                continue
            tests = sorted(set(covering.get((path, stub.start), []) + covering.get((path, stub.line), [])))
            if not tests:
                continue
            yield (
                FunctionTask(
                    task_id=f"{project.name}:{path}::{stub.qualname}",
                    project=project.name,
                    path=path,
                    qualname=stub.qualname,
                    line=stub.line,
                    start=stub.start,
                    end=stub.end,
                    docstring=stub.docstring or "",
                    body=_body(text, stub),
                    tests=tuple(tests),
                ),
                text,
            )


def _tasks_path(project: Project, kind: str) -> Path:
    folder = bench_dir() / project.spec.key
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{kind}-tasks.json"


def _read_cached(path: Path) -> list[dict] | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["tasks"] if data.get("version") == TASKS_VERSION else None


def function_tasks(project: Project, progress: Progress | None = None) -> list[FunctionTask]:
    """The project's function-level tasks: candidates whose covering tests fail on `raise NotImplementedError`.

    The check runs each candidate's covering tests once in the project sandbox (stopping at the first failure);
    the list is cached beside the project, with what was rejected and why."""
    report = progress or (lambda stage, done, total: None)
    path = _tasks_path(project, "function")
    cached = _read_cached(path)
    if cached is not None:
        return [FunctionTask.from_json(t) for t in cached]
    candidates = list(function_candidates(project))
    kept: list[FunctionTask] = []
    rejected: dict[str, str] = {}
    for number, (task, text) in enumerate(candidates, start=1):
        report(f"check {project.name}'s tasks", number - 1, len(candidates))
        mutant = fill_body(text, task._stub(text), MUTANT)
        run = project.run_tests(task.tests, task.path, mutant, MUTANT_LIMITS)
        if run.status == "passed":
            rejected[task.task_id] = "its tests pass without it"
        elif run.status == "timeout":
            rejected[task.task_id] = "its tests time out without it"
        else:
            kept.append(task)
    report(f"check {project.name}'s tasks", len(candidates), len(candidates))
    data = {
        "version": TASKS_VERSION,
        "rule": f"documented, body {MIN_BODY_LINES}-{MAX_BODY_LINES} lines, executed by a passing test, "
        f"its tests fail on `{MUTANT}`",
        "candidates": len(candidates),
        "rejected": rejected,
        "tasks": [t.to_json() for t in kept],
    }
    atomic_write_text(path, json.dumps(data, indent=1))
    return kept


def _statement_lines(tree: ast.Module) -> list[int]:
    """First lines of the statements inside function bodies (not docstrings, not nested definitions' headers)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        for statement in body:
            for inner in ast.walk(statement):
                if isinstance(inner, ast.stmt) and not isinstance(
                    inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                ):
                    lines.add(inner.lineno)
    return sorted(lines)


def line_tasks(project: Project, per_project: int = LINE_TASKS_PER_PROJECT) -> list[LineTask]:
    """The project's line-level tasks: `per_project` statement lines inside function bodies, drawn with a seed
    fixed by the project's name and version; each hides 1-3 lines (also drawn), all of them non-blank."""
    path = _tasks_path(project, "line")
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") == TASKS_VERSION and data.get("per_project") == per_project:
            return [LineTask.from_json(t) for t in data["tasks"]]
    pool: list[tuple[str, int, int]] = []
    rng = random.Random(f"line:{project.spec.key}")
    for rel in project.source_files():
        text = (project.root / rel).read_text(encoding="utf-8")
        try:
            tree = parse_module(text)
        except SyntaxError:
            continue
        lines = text.splitlines()
        for line in _statement_lines(tree):
            size = 1 + rng.randrange(3)
            window = lines[line - 1 : line - 1 + size]
            if len(window) == size and all(w.strip() for w in window) and line > 1:
                pool.append((rel, line, size))
    chosen = sorted(rng.sample(pool, min(per_project, len(pool))))
    tasks = []
    for rel, line, size in chosen:
        lines = (project.root / rel).read_text(encoding="utf-8").splitlines()
        tasks.append(
            LineTask(
                task_id=f"{project.name}:{rel}:{line}",
                project=project.name,
                path=rel,
                line=line,
                target=tuple(lines[line - 1 : line - 1 + size]),
            )
        )
    data = {
        "version": TASKS_VERSION,
        "per_project": per_project,
        "rule": "seeded statement lines in function bodies, 1-3 lines hidden",
    }
    atomic_write_text(path, json.dumps({**data, "tasks": [t.to_json() for t in tasks]}, indent=1))
    return tasks
