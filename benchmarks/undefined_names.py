"""A candidate that reads a name defined nowhere, ranked after the others: replayed on the committed candidates of
the 1.5B's correctness runs (no model runs).

    .venv/bin/python benchmarks/undefined_names.py [RUN ...] [--sdists DIR]

Each RUN (default: results/correctness-four-1.5b and results/correctness-heldout-1.5b) holds `function.jsonl.gz`:
per stub, its samples (the function each wrote, whether it passed the project's tests) and each ranker's scores and
pick. Each sample's function is read against its module in the pinned sdist (fetched from PyPI, sha256 checked,
into --sdists): it is flagged when it reads a bare name that its own code, the module's top level, its class body
and the builtins all leave unbound (none under a star import; the standard-library names an edit now imports
itself are not flagged). Prints how many samples and picks were flagged, how many flagged samples passed, and each
ranker's pick pass rate before and after moving flagged samples last (paired, 95% bootstrap).
Plan: `results/correctness-undefined-names/plan.md`.
"""

from __future__ import annotations

import ast
import builtins
import sys
from pathlib import Path

from assistant.code.edit import STDLIB_EXPORTS
from assistant.code.names import MODULE_DUNDERS, bound_names, scope_names
from assistant.evaluate.repo.replay import flag_replay_main, read_run, source_tree

ROOT = Path(__file__).resolve().parent.parent
RUNS = [ROOT / "results" / "correctness-four-1.5b", ROOT / "results" / "correctness-heldout-1.5b"]
DEFINITIONS = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def context(module: ast.Module, qualname: str) -> tuple[set[str], bool]:
    """The names a function `qualname` of `module` may read unbound-free (module top level, names its functions
    declare `global`, its classes' bodies, builtins) and whether the module has a star import."""
    declared = {name for node in ast.walk(module) if isinstance(node, ast.Global) for name in node.names}
    names = scope_names(module.body) | declared | set(dir(builtins)) | MODULE_DUNDERS
    body = module.body
    for part in qualname.split(".")[:-1]:
        owner = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if owner is None:
            break
        names |= scope_names(owner.body) | {"__class__"}
        body = owner.body
    star = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(module))
    return names, star


def undefined(code: str, leaf: str, known: set[str]) -> list[str]:
    """The bare names the sample's function `leaf` reads that nothing in reach binds (empty when it does not
    parse: such a sample is no candidate)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    function = next((n for n in ast.walk(tree) if isinstance(n, DEFINITIONS) and n.name == leaf), None)
    if function is None:
        return []
    bound = known | bound_names([function])
    read = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    # What an edit imports itself (`code/edit.py`): standard-library exports read bare, modules read as `module.x`.
    modules = {
        n.value.id
        for n in ast.walk(function)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in sys.stdlib_module_names
    }
    return sorted(name for name in read - bound - modules if name not in STDLIB_EXPORTS)


def replay(run: Path, sdists: Path) -> dict:
    """The flags and the picks before and after, for one run."""
    versions, records = read_run(run)
    modules: dict[str, tuple[ast.Module, Path]] = {}
    flags: dict[str, list[bool]] = {}
    found: dict[str, list[str]] = {}
    for record in records:
        project, rest = record["task_id"].split(":", 1)
        path, qualname = rest.split("::")
        if path not in modules:
            file = source_tree(project, versions[project], sdists) / path
            modules[path] = (ast.parse(file.read_text(encoding="utf-8")), file)
        known, star = context(modules[path][0], qualname)
        leaf = qualname.rsplit(".", 1)[-1]
        names = [[] if star else undefined(s["code"], leaf, known) for s in record["samples"]]
        flags[record["task_id"]] = [bool(n) for n in names]
        found[record["task_id"]] = sorted({name for n in names for name in n})
    return {"records": records, "flags": flags, "found": found}


def main() -> None:
    flag_replay_main(__doc__.splitlines()[0], RUNS, replay, "names")


if __name__ == "__main__":
    main()
