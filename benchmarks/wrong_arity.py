"""A call that the called function's signature refuses, ranked after the others: replayed on the committed
candidates of the 1.5B's correctness runs (no model runs).

    .venv/bin/python benchmarks/wrong_arity.py [RUN ...] [--sdists DIR]

As `benchmarks/undefined_names.py` (same runs, same pinned sdists), but each sample's function is read with
`refused_calls` (below) against its module's undecorated functions and its class's methods (a call
to `f(...)` or `self.m(...)` with arguments their `def` does not take: a TypeError). Prints the samples flagged and
how many of them passed the project's tests, each ranker's pick pass rate before and after moving flagged samples
last (paired, 95% bootstrap), and the calls flagged. Plan: `results/correctness-wrong-arity/plan.md`.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

from assistant.code.attributes import owner_class
from assistant.evaluate.repo.replay import flag_replay_main, read_run, sample_function, source_tree

ROOT = Path(__file__).resolve().parent.parent
RUNS = [ROOT / "results" / "correctness-four-1.5b", ROOT / "results" / "correctness-heldout-1.5b"]
FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef

_METHOD_KINDS = frozenset({"staticmethod", "classmethod"})


def _decorators(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """A function's decorators as written (`staticmethod`, `property`, `x.setter`)."""
    return {d.id if isinstance(d, ast.Name) else ast.unparse(d) for d in function.decorator_list}


def refusal(arguments: ast.arguments, call: ast.Call, bound: int = 0) -> str | None:
    """Why a signature refuses `call` (the first `bound` parameters filled already, as `self` is), or None."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None  # *args or **kwargs unpacked: not countable
    positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]][bound:]
    defaults = len(arguments.defaults)
    required = positional[: max(len(positional) - defaults, 0)]
    if len(call.args) > len(positional) and arguments.vararg is None:
        return f"{len(call.args)} positional arguments; it takes {len(positional)}"
    keywords = [k.arg for k in call.keywords if k.arg is not None]
    by_keyword = {a.arg for a in arguments.args[bound:]} | {a.arg for a in arguments.kwonlyargs}
    for name in keywords:
        if name not in by_keyword and arguments.kwarg is None:
            return f"keyword `{name}`, which it does not take"
        if name in positional[: len(call.args)]:
            return f"`{name}` twice"
    filled = set(positional[: len(call.args)]) | set(keywords)
    missing = [name for name in required if name not in filled]
    missing += [
        a.arg
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if d is None and a.arg not in filled
    ]
    return f"no `{missing[0]}`" if missing else None


def refused_calls(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    module_functions: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef],
    methods: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef],
) -> list[str]:
    """Each call in `function` that a signature refuses, said as "`helper(...)`: 3 positional arguments; it takes
    2". `module_functions`: the module's undecorated top-level functions no other statement rebinds; `methods`:
    the class's own `def`s (empty for a function)."""
    rebound = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    positional = [*function.args.posonlyargs, *function.args.args]
    first = positional[0].arg if positional and methods else None
    found = []
    for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
        target, bound = None, 0
        if isinstance(call.func, ast.Name) and call.func.id not in rebound:
            target = module_functions.get(call.func.id)
        elif isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) and first is not None:
            method = methods.get(call.func.attr) if call.func.value.id == first else None
            kinds = _decorators(method) if method is not None else set()
            if method is not None and kinds <= _METHOD_KINDS:
                target, bound = method, 0 if "staticmethod" in kinds else 1
        why = refusal(target.args, call, bound) if target is not None else None
        if why is not None:
            found.append(f"`{ast.unparse(call.func)}(...)`: {why}")
    return sorted(set(found))


def module_functions(module: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's top-level undecorated functions that nothing else at the top level binds again."""
    defined: dict[str, list[ast.stmt]] = {}
    for statement in module.body:
        names = (
            [statement.name]
            if isinstance(statement, FUNCTIONS | ast.ClassDef)
            else [n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
        )
        for name in names:
            defined.setdefault(name, []).append(statement)
    return {
        name: statements[0]
        for name, statements in defined.items()
        if len(statements) == 1 and isinstance(statements[0], FUNCTIONS) and not statements[0].decorator_list
    }


def class_methods(owner: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The `def`s of a class body by name, the last of a name winning (as Python binds them)."""
    return {n.name: n for n in owner.body if isinstance(n, FUNCTIONS)}


def sample_calls(code: str, module: ast.Module, qualname: str) -> list[str]:
    """The refused calls of one sample's function (empty when it does not parse)."""
    function = sample_function(code, qualname)
    if function is None:
        return []
    owner = owner_class(module, qualname)
    methods = class_methods(owner) if owner is not None else {}
    return refused_calls(function, module_functions(module), methods)


def replay(run: Path, sdists: Path) -> dict:
    """Each stub's flags and the calls flagged."""
    versions, records = read_run(run)
    modules: dict[str, ast.Module] = {}
    flags, found = {}, {}
    for record in records:
        project, rest = record["task_id"].split(":", 1)
        path, qualname = rest.split("::")
        if path not in modules:
            modules[path] = ast.parse((source_tree(project, versions[project], sdists) / path).read_text("utf-8"))
        calls = [sample_calls(s["code"], modules[path], qualname) for s in record["samples"]]
        flags[record["task_id"]] = [bool(c) for c in calls]
        found[record["task_id"]] = sorted({call for c in calls for call in c})
    return {"records": records, "flags": flags, "found": found}


def main() -> None:
    flag_replay_main(__doc__.splitlines()[0], RUNS, replay, "calls")


if __name__ == "__main__":
    main()
