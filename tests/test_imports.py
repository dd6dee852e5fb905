"""The package's import graph has no cycle: no module imports, even lazily, one that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "assistant"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Every package module `path` imports, at any depth of its code (lazy imports count)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in modules and c != name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imports(path, name, set(paths)) for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path that ends where it starts, or None. Packages' __init__ re-exports are left
    out: importing `assistant.x` runs `assistant/__init__`, but that is Python's order, not a design dependency."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if graph.get(nxt) is None or nxt.count(".") == 0:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and node != "assistant" and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_is_read_from_the_sources() -> None:
    graph = import_graph()
    assert "assistant.core.retrieve" in graph["assistant.pipeline.registry"]
    assert "assistant.methods.lail" in graph["assistant.pipeline.registry"]  # a lazy import inside a function counts


def test_the_finder_finds_a_cycle() -> None:
    assert find_cycle({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}}) == ["a.x", "a.y", "a.z", "a.x"]
    assert find_cycle({"a.x": {"a.y"}, "a.y": set()}) is None


def test_no_import_cycle_in_the_package() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# The package's floors, lowest first: a module may import its own floor and the floors below, never one above.
# docs/architecture.md ("Floors, and development") shows the same list.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "ground",
        (
            "assistant.errors",
            "assistant.paths",
            "assistant.config",
            "assistant.cache",
            "assistant.progress",
            "assistant.lazy",
        ),
    ),
    ("code", ("assistant.code",)),
    ("sandbox", ("assistant.sandbox",)),
    ("backends", ("assistant.backends",)),
    ("datasets", ("assistant.datasets",)),
    ("indexing", ("assistant.indexing",)),
    ("core", ("assistant.core",)),
    ("methods", ("assistant.methods",)),
    ("pipeline", ("assistant.pipeline",)),
    ("evaluate", ("assistant.evaluate",)),
    ("ui", ("assistant.ui",)),
]
# The package's front door (`import assistant`: the library API) and `python -m assistant` stand above every floor.
ABOVE_ALL = ("assistant", "assistant.__main__")


def floor_of(module: str) -> int | None:
    """The index in LAYERS of the floor `module` belongs to (None for the package's front door)."""
    if module in ABOVE_ALL:
        return None
    for number, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return number
    raise AssertionError(f"{module} belongs to no floor; add it to LAYERS (and to docs/architecture.md)")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor, as 'importer (floor) -> imported (floor)'."""
    found = []
    for module, imported in sorted(graph.items()):
        low = floor_of(module)
        if low is None:
            continue
        for target in sorted(imported):
            high = floor_of(target)
            if high is not None and high > low:
                found.append(f"{module} ({LAYERS[low][0]}) -> {target} ({LAYERS[high][0]})")
    return found


def test_the_floor_finder_finds_an_upward_import() -> None:
    graph = {"assistant.code.edit": {"assistant.ui.cli", "assistant.errors"}, "assistant.ui.cli": {"assistant.code"}}
    assert upward_imports(graph) == ["assistant.code.edit (code) -> assistant.ui.cli (ui)"]


def test_every_module_has_a_floor_and_none_imports_a_floor_above_it() -> None:
    upward = upward_imports(import_graph())
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_training_code_does_not_import_the_evaluation_package() -> None:
    graph = import_graph()
    found = [f"{m} -> {t}" for m in graph if m.startswith("assistant.methods") for t in graph[m] if "evaluate" in t]
    assert not found, found
