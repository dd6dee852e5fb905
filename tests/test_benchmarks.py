"""Benchmarks are scripts no other test runs, and they reach into private names: check they still import.

For every `benchmarks/*.py`: every name it imports from `assistant` (lazy imports inside functions too) exists; the
module imports without running work; its `--help` works; and where a run is cheap (no model), it runs.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("*.py"))
IDS = [path.stem for path in BENCHMARKS]


def _load(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_there_are_benchmarks():
    assert len(BENCHMARKS) >= 7


@pytest.mark.parametrize("path", BENCHMARKS, ids=IDS)
def test_every_name_a_benchmark_imports_from_assistant_exists(path: Path):
    missing = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "assistant":
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                if not hasattr(module, alias.name) and importlib.util.find_spec(f"{node.module}.{alias.name}") is None:
                    missing.append(f"line {node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "assistant" and importlib.util.find_spec(alias.name) is None:
                    missing.append(f"line {node.lineno}: import {alias.name}")
    assert not missing, f"{path.name} imports names assistant no longer has: " + "; ".join(missing)


# What a benchmark may do at its top level: imports, definitions, constants, and environment defaults.
def _is_setup(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign):
        return True
    if isinstance(statement, ast.If):  # the `if __name__ == "__main__":` guard
        return ast.unparse(statement.test).replace("'", '"') == '__name__ == "__main__"'
    if isinstance(statement, ast.Expr):
        value = statement.value
        docstring = isinstance(value, ast.Constant) and isinstance(value.value, str)
        return docstring or ast.unparse(value).startswith("os.environ.setdefault(")
    return False


@pytest.mark.parametrize("path", BENCHMARKS, ids=IDS)
def test_a_benchmark_runs_no_work_at_import_and_answers_help(path: Path, monkeypatch, capsys):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    work = [f"line {s.lineno}: {ast.unparse(s)[:60]}" for s in tree.body if not _is_setup(s)]
    assert not work, f"{path.name} does work at import: {work}"
    module = _load(path, monkeypatch)  # a NameError or a renamed import fails here
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    with pytest.raises(SystemExit) as exit_:
        module.main()
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_the_sandbox_benchmark_runs_in_its_cheap_mode():
    # Two runs of each sandbox against the old one read from git history (no model involved).
    path = next(p for p in BENCHMARKS if p.stem == "sandbox_overhead")
    old = "7ce586e"
    root = path.parent.parent
    if subprocess.run(
        ["git", "cat-file", "-e", f"{old}:assistant/sandbox.py"], cwd=root, capture_output=True
    ).returncode:
        pytest.skip(f"commit {old} is not in this clone's history")
    result = subprocess.run(
        [sys.executable, str(path), "--runs", "2", "--json"], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert '"p50_added_ms"' in result.stdout


def test_repo_callees_reads_the_calls_of_a_body(monkeypatch):
    module = _load(Path(__file__).resolve().parent.parent / "benchmarks" / "repo_callees.py", monkeypatch)
    body = "x = helper(a)\nif not x:\n    return d.get(k)\nreturn len(self.render(x))\n"
    assert module._called(body) == {"helper", "render"}  # get and len could be anyone's
    assert module._called("def broken(:\n") == set()


def test_runs_versus_pools_disjoint_repo_folders_and_pairs_by_task(tmp_path, monkeypatch, capsys):
    from assistant.cache import JsonlCache

    module = _load(Path(__file__).resolve().parent.parent / "benchmarks" / "runs_versus.py", monkeypatch)

    def folder(name: str, correct: dict[str, int]) -> Path:
        records = JsonlCache(tmp_path / name / "function.jsonl")
        for task, c in correct.items():
            record = {"task_id": task, "strategy": "zero", "n": 5, "correct": c, "samples": [], "picks": {}}
            records.put(f"{name}-{task}", {**record, "sampling_seconds": 2.0})
        (tmp_path / name / "line-retrieval.jsonl").write_text("")  # an eval repo folder holds both kinds
        return tmp_path / name

    a, b = folder("a", {"t1": 5, "t2": 0}), folder("b", {"t3": 5})
    old = folder("old", {"t1": 0, "t2": 0, "t3": 0, "t4": 5})
    monkeypatch.setattr(sys, "argv", ["runs_versus", f"{a}+{b}:zero", f"{old}:zero", "--json"])
    module.main()
    result = __import__("json").loads(capsys.readouterr().out)
    assert result["tasks"] == 3  # t4 is only in the second run
    mean, _, _ = result["metrics"]["pass@1"]["difference"]
    assert mean == pytest.approx(2 / 3) and result["sampling_seconds"] == {"first": 6.0, "second": 6.0}
    monkeypatch.setattr(sys, "argv", ["runs_versus", f"{a}+{a}:zero", f"{old}:zero"])
    with pytest.raises(SystemExit, match="disjoint"):
        module.main()


def test_agree_names_picks_each_rules_candidate(monkeypatch):
    picks = _load(Path(__file__).resolve().parent.parent / "benchmarks" / "agree_names.py", monkeypatch).picks
    record = {
        "candidates": [
            {"sample": 0, "logprob": -0.5},
            {"sample": 2, "logprob": -0.1},
            {"sample": 3, "logprob": -0.3},
        ],
        "passed": [False, False, True],
        "agree": {"scores": [0.1, 0.1, 0.4]},  # agree decides: the third
        "agree_before": {"scores": [0.0, 0.0, 0.0]},  # a tie: log-probability decides, the second
    }
    assert picks(record) == {
        "first": 0.0,
        "logprob": 0.0,
        "agree(before)+logprob": 0.0,
        "agree+logprob": 1.0,
        "oracle": 1.0,
    }
    assert set(picks({"candidates": [], "passed": []}).values()) == {0.0}


def test_a_replay_moves_flagged_samples_last_and_counts_what_that_changes() -> None:
    from assistant.evaluate.repo.replay import flagged_notes, moved_rows, sample_function

    def sample(passed: bool, logprob: float) -> dict:
        return {"parsed": True, "passed": passed, "logprob": logprob}

    # Task a: the pick (best log-probability) is flagged and fails; the next one passes. Task b: nothing flagged.
    a = {"task_id": "a", "samples": [sample(False, -0.1), sample(True, -0.2)], "picks": {}}
    b = {"task_id": "b", "samples": [sample(True, -0.1), sample(False, -0.3)], "picks": {}}
    for record in (a, b):
        record["scores"] = {"agree": [None, None], "logprob": [s["logprob"] for s in record["samples"]]}
        record["picks"] = {"agree": 0, "logprob": 0}
    flags = {"a": [True, False], "b": [False, False]}
    auto = moved_rows([a, b], flags)[0]
    assert auto.startswith("auto | 1 | 50.0 → 100.0 |") and auto.endswith("| 2/2")
    notes = flagged_notes([a, b], {"a": [True, True], "b": [False, True]})
    assert notes == [
        "  passed though flagged: a sample 1",
        "  every sample flagged: 1 stubs (a); their auto pick passed the project's tests on 0",
    ]
    assert sample_function("def f(x):\n    return x\n", "C.f").name == "f"
    assert sample_function("def f(:\n", "f") is None and sample_function("x = 1\n", "f") is None
