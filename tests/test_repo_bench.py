"""The repository benchmark (`assist eval repo`) on a tiny real project: its suite run and traced in the project
sandbox, tasks chosen by the fixed rules, candidates put into the file and run against the covering tests."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from assistant.backends import SamplingParams
from assistant.code.examples import Example
from assistant.core.agreement import AgreementRanker
from assistant.core.rank import FirstRanker
from assistant.errors import UsageError
from assistant.evaluate.repo.projects import PROJECTS, Project, ProjectSpec, parse_projects
from assistant.evaluate.repo.run import (
    auto_pick,
    check_strategies,
    function_table,
    heldout_lail,
    heldout_tstr,
    index_project,
    retrieval_table,
    run_function_tasks,
    run_line_retrieval,
    run_line_tasks,
    summarize_functions,
    summarize_lines,
    summarize_retrieval,
)
from assistant.evaluate.repo.tasks import FunctionTask, function_tasks, line_tasks
from assistant.indexing.fragments import fragment_holding, split_fragments
from assistant.indexing.index import build_index
from assistant.sandbox.project import ProjectLimits, run_pytest
from tests.conftest import ScriptedBackend, toy_project_functions, write_files

# The CPU limit stops an endless loop; both leave room for a busy or slow machine (a 4 s wall limit failed under
# load; a 3 s CPU limit failed once in CI on a 2-core AVX-only machine, where a passing run takes about 1.9 s).
QUICK = ProjectLimits(timeout_s=20, cpu_s=6)

MODULE = '''"""A tiny module."""


def double(x):
    """Return twice x."""
    y = x * 2
    return y


def undocumented(x):
    y = x
    return y


def untested(x):
    """Nothing runs this."""
    a = x + 1
    return a


def weak(x):
    """Its test does not mind what it does."""
    z = x
    return z
'''

TESTS = """from pkg.mod import double, weak


def test_double():
    assert double(2) == 4
    assert double(-3) == -6


def test_weak():
    try:
        weak(1)
    except Exception:
        pass
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Project:
    root = write_files(tmp_path / "tiny-0", {"pkg/__init__.py": "", "pkg/mod.py": MODULE, "tests/test_mod.py": TESTS})
    spec = ProjectSpec("tiny", "0", "", package="pkg", tests="tests")
    run = run_pytest(root, Path(sys.executable), ["tests"], trace=True)
    assert run.ok, run.output
    return Project(spec, root, Path(sys.executable), sorted(run.passed()), run.calls)


def test_fragments_are_20_line_windows_and_blank_ones_are_skipped() -> None:
    text = "\n".join(f"x{i} = {i}" for i in range(1, 46)) + "\n" + "\n" * 25 + "y = 1\n"
    fragments = split_fragments(text, "a.py", "b")
    assert [(f.start_line, f.end_line) for f in fragments] == [(1, 20), (21, 40), (41, 60), (61, 71)]
    assert fragments[0].code.splitlines()[0] == "x1 = 1" and fragments[0].kind == "fragment"
    assert fragment_holding(fragments, "a.py", 45).start_line == 41
    assert fragment_holding(fragments, "other.py", 45) is None
    blank = split_fragments("a = 1\n" + "\n" * 30 + "b = 2\n", "c.py")
    assert [(f.start_line, f.end_line) for f in blank] == [(1, 20), (21, 32)]  # 21-32 holds `b = 2`


def test_function_tasks_follow_the_fixed_rule(tiny: Project) -> None:
    tasks = function_tasks(tiny)
    # undocumented: no docstring; untested: no test runs it; weak: its test passes without its body.
    assert [t.qualname for t in tasks] == ["double"]
    task = tasks[0]
    assert task.tests == ("tests/test_mod.py::test_double",)
    assert task.body.strip().splitlines() == ["y = x * 2", "return y"]
    stubbed = task.stubbed(MODULE)
    assert "y = x * 2" not in stubbed and '"""Return twice x."""' in stubbed
    assert stubbed.replace('    """Return twice x."""\n    ...\n', "") == MODULE.replace(
        '    """Return twice x."""\n    y = x * 2\n    return y\n', ""
    )
    cached = json.loads(next(Path(p) for p in [tiny_cache(tiny)]).read_text())
    assert cached["rejected"] == {"tiny:pkg/mod.py::weak": "its tests pass without it"}
    assert function_tasks(tiny) == tasks  # read back from the cache


def tiny_cache(project: Project) -> Path:
    from assistant.evaluate.repo.projects import bench_dir

    return bench_dir() / project.spec.key / "function-tasks.json"


def test_function_tasks_run_candidates_against_the_covering_tests(tiny: Project, encoder, tmp_path: Path) -> None:
    tasks = function_tasks(tiny)
    indexes = {"tiny": index_project(tiny, encoder)}
    backend = ScriptedBackend(
        ["    y = x + x\n    return y\n```", "    return x\n```", "    while True:\n        pass\n```"],
        prefills_answer=True,
    )
    records = run_function_tasks(
        tasks, indexes, ["zero", "bm25"], backend, tmp_path / "out", params=SamplingParams(n=3), demos=2, limits=QUICK
    )
    assert [(r["strategy"], r["n"], r["correct"]) for r in records] == [("zero", 3, 1), ("bm25", 3, 1)]
    samples = records[0]["samples"]
    assert [s["passed"] for s in samples] == [True, False, False]
    assert samples[2]["status"] in ("timeout", "resource-limit")  # the endless loop is stopped
    # Leak control: the target file's own functions (the hidden body) never come back as demonstrations.
    assert all(not d.startswith("pkg/mod.py") for d in records[1]["demonstrations"])
    rows = summarize_functions(records, [1])
    assert rows[0]["pass@1"][0] == pytest.approx(1 / 3)
    assert rows[1]["vs_zero"][0] == pytest.approx(0.0)
    # bm25 found nothing to show (every other function sits in the target file or a covering test's file), so
    # its prompt is zero-shot's and its samples came from the cache. Resumed: nothing is sampled again.
    assert records[1]["demonstrations"] == [] and backend.calls == 3
    again = run_function_tasks(
        tasks, indexes, ["zero", "bm25"], backend, tmp_path / "out", params=SamplingParams(n=3), demos=2
    )
    assert [r["correct"] for r in again] == [1, 1] and backend.calls == 3
    # agree added to the finished folder: the model writes tests for `double` from its docstring, each cached
    # sample runs on them in its module's copy, and the right one is picked; still nothing is sampled again.
    writer = ScriptedBackend(["2) == 4\nassert double(0) == 0\n```"], prefills_answer=True)
    ranked = run_function_tasks(
        tasks,
        indexes,
        ["zero"],
        backend,
        tmp_path / "out",
        params=SamplingParams(n=3),
        demos=2,
        rankers=[FirstRanker(), AgreementRanker(writer)],
    )
    assert backend.calls == 3 and writer.calls == 2  # the test-writing prompt's two samples
    assert ranked[0]["picks"]["agree"] == 0 and auto_pick(ranked[0]) == 0
    agree = ranked[0]["scores"]["agree"]
    assert agree[0] > agree[1] > agree[2] == 0.0  # "return x" passes double(0) == 0 alone; the loop passes none
    table = function_table(summarize_functions(ranked, [1]))
    assert "| zero | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] |" in table


def test_fragments_strategy_shows_other_files_code_instead_of_demonstrations(
    tiny: Project, encoder, tmp_path: Path
) -> None:
    (tiny.root / "pkg" / "util.py").write_text('def twice(v):\n    """Two of v."""\n    return v + v\n')
    with (tiny.root / "pkg" / "mod.py").open("a") as module:  # at the end: the call map's lines stay true
        module.write("\n\nfrom pkg.util import twice  # noqa: E402\n")
    tasks = function_tasks(tiny)
    indexes = {"tiny": index_project(tiny, encoder)}
    backend = ScriptedBackend(["    return x + x\n```"], prefills_answer=True)
    strategies = ["zero", "bm25@fragments", "bm25@fragments+apis"]
    records = run_function_tasks(
        tasks, indexes, strategies, backend, tmp_path / "out", params=SamplingParams(n=1), demos=4
    )
    zero, shown, both = records
    assert "fragments" not in zero and shown["demonstrations"] == [] == both["demonstrations"]
    # Leak control: neither the target file (it holds the hidden body) nor a covering test's file.
    assert shown["fragments"] == ["pkg/util.py:1"] == both["fragments"]
    asked = [prompt.messages[-1]["content"] for prompt in backend.prompts]
    assert (
        asked[1].startswith("Code from other places of this repository that may help:")
        and "# pkg/util.py:1" in asked[1]
    )
    assert "These definitions from the project's other files" not in asked[1]
    # Both suffixes: the fragments and the definitions the file uses (`X@fragments+apis` once showed no fragment).
    assert asked[2].startswith("Code from other places of this repository that may help:")
    assert "These definitions from the project's other files" in asked[2] and "def twice(v):" in asked[2]
    assert [r["correct"] for r in records] == [1, 1, 1]
    with pytest.raises(UsageError, match="for function tasks only"):
        check_strategies(["hybrid@fragments"], "line")
    with pytest.raises(UsageError, match="unknown strategy 'zero@fragments'"):
        check_strategies(["zero@fragments"], "function")


def test_both_suffixes_are_read_in_either_strategy_name() -> None:
    from assistant.evaluate.repo.run import shows_apis, shows_fragments

    # `X@fragments+apis` once ran as `X+apis` under a fragments label: the fragments were never shown.
    assert [(shows_fragments(s), shows_apis(s)) for s in ("hybrid", "hybrid+apis", "hybrid@fragments")] == [
        (False, False),
        (False, True),
        (True, False),
    ]
    assert shows_fragments("hybrid@fragments+apis") and shows_apis("hybrid@fragments+apis")
    check_strategies(["hybrid@fragments+apis"], "function")
    with pytest.raises(UsageError, match="unknown strategy 'hybrid\\+apis@fragments'"):
        check_strategies(["hybrid+apis@fragments"], "function")


def test_samples_that_wrote_nothing_are_redrawn_and_the_redraws_cached_apart(
    tiny: Project, encoder, tmp_path: Path
) -> None:
    tasks = function_tasks(tiny)
    indexes = {"tiny": index_project(tiny, encoder)}
    echo = "    ...  # <- write this body\n```"
    backend = ScriptedBackend([echo, "    return x\n```", "    y = x + x\n    return y\n```"], prefills_answer=True)
    out = tmp_path / "out"
    records = run_function_tasks(
        tasks, indexes, ["zero"], backend, out, params=SamplingParams(n=2), limits=QUICK, redraw=True
    )
    # Sample 0 re-typed the stub: it was drawn again in its place (the third reply), and that one passes.
    assert backend.calls == 3 and [(r["n"], r["redrawn"], r["correct"]) for r in records] == [(2, [0], 1)]
    assert [s["status"] for s in records[0]["samples"]] == ["passed", "failed"]
    assert "| 0 | 0 (0.0%) (1) |" in function_table(summarize_functions(records, [1]))  # cut off, empty (redrawn)
    # The first samples stay cached as they were drawn, the redraws apart: with the records gone, nothing is
    # sampled again and the same records come back.
    (out / "function.jsonl").unlink()
    again = run_function_tasks(
        tasks, indexes, ["zero"], backend, out, params=SamplingParams(n=2), limits=QUICK, redraw=True
    )
    assert backend.calls == 3 and again[0]["samples"] == records[0]["samples"]
    cached = [json.loads(line)["value"] for line in (out / "function-samples.jsonl").read_text().splitlines()]
    assert [len(v["completions"]) for v in cached] == [2, 1] and cached[1]["at"] == [0]


def test_tstr_learns_from_the_projects_functions_less_every_task(encoder) -> None:
    # In a user's repo the function to fill is a stub: no hidden body may be among what TST^R learns from.
    words = ["parse", "render", "merge", "split", "count", "sort", "load", "save", "find", "clean", "join", "check"]
    examples = [
        Example(f"{w.title()} the items.", f"def {w}(items):\n    return [{w}_one(i) for i in items]\n", w,
                f"pkg/m{i % 3}.py", 10 * i + 1, 10 * i + 3)
        for i, w in enumerate(words)
    ]  # fmt: skip
    index = build_index(examples, encoder, source={"kind": "repo-bench", "name": "toy"})
    task = FunctionTask("toy:pkg/m1.py::render", "toy", "pkg/m1.py", "render", 11, 11, 13, "Render the items.",
                        "return []", ("tests/test_m.py::test_render",))  # fmt: skip
    retriever = heldout_tstr(index, encoder, [task])
    assert retriever.model.manifest["examples"] == len(examples) - 1  # "render" (lines 11-13 of m1) left out
    hits = retriever.search("Render the items.", 3)
    assert hits[0].example.name == "render"  # it still retrieves from the whole pool (the leak control is Excluding)
    again = heldout_tstr(index, encoder, [task]).search("Render the items.", 3)
    assert [h.score for h in again] == pytest.approx([h.score for h in hits])  # seeded: a resumed run matches
    # For line tasks the same model searches the fragments, over their own vectors.
    text = "\n\n".join(e.code for e in examples)
    fragments = build_index(split_fragments(text, "pkg/all.py", "b", lines=3), encoder,
                            source={"kind": "repo-bench", "name": "toy"})  # fmt: skip
    found = heldout_tstr(index, encoder, [task], search=fragments).search("Merge the items.", 2)
    assert found[0].example.kind == "fragment" and "def merge" in found[0].example.code


def test_lail_labels_and_learns_from_the_projects_documented_functions_less_every_task(encoder) -> None:
    from assistant.methods.lail import LailConfig

    examples = toy_project_functions()
    # Undocumented code: a candidate, never a query (its requirement is made up from its name).
    examples += [Example("Helper: (x)", "def helper(x):\n    return x\n", "helper", "pkg/h.py", 1, 2)]
    index = build_index(examples, encoder, source={"kind": "repo-bench", "name": "toy"})
    task = FunctionTask("toy:pkg/m1.py::render", "toy", "pkg/m1.py", "render", 11, 11, 13, "Render the items.",
                        "return []", ("tests/test_m.py::test_render",))  # fmt: skip
    labeler = ScriptedBackend(model="labeler")
    config = LailConfig(candidates=4, positives=1, soft_negatives=1, hard_negatives=2, epochs=1, batch=4, queries=6)
    retriever = heldout_lail(index, encoder, [task], config=config, labeler=labeler)

    manifest = retriever.manifest
    assert manifest["examples"] == len(examples) - 1  # "render" (lines 11-13 of m1) neither labels nor is labeled
    assert manifest["stats"]["queries"] == 6 and manifest["stats"]["pairs_labeled"] == 6 * 4
    prompts = ["\n".join(m["content"] for m in prompt.messages) for prompt, _ in labeler.scored]
    assert len(labeler.scored) == 24 and not any("Render the items." in text for text in prompts)
    assert not any("render" in code for _, code in labeler.scored)
    assert not any("helper" in code for _, code in labeler.scored)  # an undocumented function is never a query
    hits = retriever.search("Render the items.", 3)
    assert hits and hits[0].example.name == "render"  # it retrieves from the whole pool, like tstr
    # The same pool, config and labeler: the artifact is reused, nothing is labeled again.
    again = heldout_lail(index, encoder, [task], config=config, labeler=labeler)
    assert len(labeler.scored) == 24
    assert [h.score for h in again.search("Render the items.", 3)] == pytest.approx([h.score for h in hits])
    # For line tasks its trained encoder searches the project's fragments: no labeling, its own vectors file.
    text = "\n\n".join(e.code for e in examples)
    fragments = build_index(split_fragments(text, "pkg/all.py", "b", lines=4), encoder,
                            source={"kind": "repo-bench", "name": "toy"})  # fmt: skip
    on_fragments = heldout_lail(index, encoder, [task], config=config, labeler=labeler, search=fragments)
    assert len(labeler.scored) == 24 and on_fragments.manifest == manifest
    found = on_fragments.search("Merge the items.", 2)
    assert found[0].example.kind == "fragment" and "def merge" in found[0].example.code
    # The function pool's vectors are untouched: it searches as before.
    assert [h.score for h in heldout_lail(index, encoder, [task], config=config, labeler=labeler).search(
        "Render the items.", 3)] == pytest.approx([h.score for h in hits])  # fmt: skip


def test_line_tasks_score_the_hidden_lines_and_the_positive_fragment(tiny: Project, encoder, tmp_path: Path) -> None:
    tasks = line_tasks(tiny, per_project=3)
    assert len(tasks) == 3 and tasks == line_tasks(tiny, per_project=3)
    lines = MODULE.splitlines()
    for task in tasks:
        assert list(task.target) == lines[task.line - 1 : task.line - 1 + len(task.target)]
    truth = {task.line: "\n".join(task.target) for task in tasks}

    def reply(prompt, number):
        # Right for the first task, wrong for the others: the prompt ends with the lines before the hidden ones.
        before = prompt.answer_prefix.split("```python\n", 1)[1]
        line = len(before.splitlines()) + 1
        return truth[line] + "\n```" if line == tasks[0].line else "pass\n```"

    backend = ScriptedBackend(reply, prefills_answer=True)
    records = run_line_tasks(tasks, {"tiny": index_project(tiny, encoder)}, ["zero", "bm25"], backend, tmp_path)
    zero = [r for r in records if r["strategy"] == "zero"]
    assert [r["em"] for r in zero] == [True, False, False]
    assert zero[0]["es"] == 1.0 and zero[0]["rank"] is None
    bm25 = [r for r in records if r["strategy"] == "bm25"]
    assert all(r["rank"] is None or 1 <= r["rank"] <= 10 for r in bm25)
    # By default the prompt's fragments come from the other files: the prompt holds the target file already.
    by_id = {task.task_id: task for task in tasks}
    assert any(r["fragments"] for r in bm25)
    assert all(not source.startswith(by_id[r["task_id"]].path) for r in bm25 for source in r["fragments"])
    # From any file, they may come from the target file, but never overlap the hidden lines (fragments start at
    # lines 1, 21, ...); the ranks do not change.
    anywhere = run_line_tasks(tasks, {"tiny": index_project(tiny, encoder)}, ["bm25"], backend, tmp_path / "any",
                              other_files=False)  # fmt: skip
    assert [r["rank"] for r in anywhere] == [r["rank"] for r in bm25]
    assert any(source.startswith("pkg/mod.py") for r in anywhere for source in r["fragments"])
    for r in anywhere:
        task = by_id[r["task_id"]]
        for source in r["fragments"]:
            start = int(source.rsplit(":", 1)[1])
            last = task.line + len(task.target) - 1
            assert source.startswith("tests/") or not (start <= last and start + 19 >= task.line)
    rows = summarize_lines(records)
    assert rows[0]["strategy"] == "zero" and "r@1" not in rows[0] and "r@10" in rows[1]
    # A backend that decodes prompts together gets two tasks' prompts (every strategy) per call: same records.
    batching = ScriptedBackend(reply, prefills_answer=True)
    batching.batches_prompts = True
    calls: list[int] = []
    original = batching.sample_batch
    batching.sample_batch = lambda prompts, params, **kw: calls.append(len(prompts)) or original(prompts, params, **kw)
    again = run_line_tasks(tasks, {"tiny": index_project(tiny, encoder)}, ["zero", "bm25"], batching, tmp_path / "b",
                           batch=2)  # fmt: skip
    assert [(r["em"], r["es"], r["rank"]) for r in again] == [(r["em"], r["es"], r["rank"]) for r in records]
    assert sum(calls) == len({r["task_id"] + repr(r["fragments"]) for r in records}) and max(calls) <= 4
    # Retrieval alone gives the ranks the full run recorded, with no model.
    ranks = run_line_retrieval(tasks, {"tiny": index_project(tiny, encoder)}, ["zero", "bm25"])
    assert [(r["task_id"], r["rank"]) for r in ranks] == [(r["task_id"], r["rank"]) for r in bm25]
    (row,) = summarize_retrieval(ranks)
    assert row["strategy"] == "bm25" and row["tasks"] == 3 and "vs_bm25" not in row
    assert "| bm25 | 3 |" in retrieval_table([row])
    # A trained strategy learns from the project's functions less its function tasks: it needs their list.
    with pytest.raises(UsageError, match="tstr is trained on the project's functions less its function tasks"):
        run_line_retrieval(tasks, {"tiny": index_project(tiny, encoder)}, ["tstr"])


def test_tables_pair_every_strategy_with_dense_where_it_ran() -> None:
    def record(strategy: str, task: int, correct: int) -> dict:
        samples = [{"passed": i < correct, "em": 0.0, "es": 0.5, "cut_off": False} for i in range(2)]
        return {"task_id": f"t{task}", "project": "p", "strategy": strategy, "n": 2, "correct": correct,
                "samples": samples, "picks": {"first": 0, "logprob": 0}, "seconds": 1.0}  # fmt: skip

    solved = {"zero": [0, 0, 1, 0], "bm25": [0, 1, 1, 0], "dense": [1, 1, 1, 0], "tstr": [2, 2, 1, 0]}
    records = [record(strategy, task, c) for strategy, row in solved.items() for task, c in enumerate(row)]
    rows = {r["strategy"]: r for r in summarize_functions(records, [1])}
    assert rows["tstr"]["vs_dense"][0] == pytest.approx((1.0 + 1.0 + 0.5 + 0) / 4 - (0.5 + 0.5 + 0.5 + 0) / 4)
    assert "vs_dense" not in rows["dense"]
    table = function_table(list(rows.values()))
    assert "| pass@1 vs zero | pass@1 vs bm25 | pass@1 vs dense | cut off |" in table.splitlines()[0]
    assert all(line.count("|") == table.splitlines()[0].count("|") for line in table.splitlines())
    # Without dense, the tables keep the columns they always had.
    plain = function_table(summarize_functions([r for r in records if r["strategy"] != "dense"], [1]))
    assert "vs dense" not in plain and "pass@1 vs bm25 | cut off" in plain


def test_project_indexes_are_kept_and_read_back(tiny: Project, encoder) -> None:
    first = index_project(tiny, encoder)
    counted: list[int] = []

    class Counting:
        name, dim = encoder.name, encoder.dim

        def encode(self, texts, progress=None):
            counted.append(len(texts))
            return encoder.encode(texts, progress)

    second = index_project(tiny, Counting())
    assert counted == [] and (tiny.root.parent / "index" / "fragments" / "meta.json").exists()
    assert (second.fragments.vectors == first.fragments.vectors).all() and len(second.functions) == len(first.functions)


def test_projects_are_pinned_and_named_by_a_clear_error() -> None:
    four = ["boltons", "click", "tabulate", "cachetools"]
    assert [p.name for p in parse_projects("all")] == [p.name for p in parse_projects(None)] == four
    # The held-out projects join only when named, so the default runs (and their results folders) stay as they were.
    assert [p.name for p in parse_projects("held-out")] == ["jinja2", "marshmallow"]
    assert [p.name for p in parse_projects("click, held-out,click")] == ["click", "jinja2", "marshmallow"]
    assert [p.name for p in parse_projects(" ")] == four
    assert all(len(p.sha256) == 64 for p in PROJECTS.values())
    with pytest.raises(UsageError, match="unknown project 'numpy'"):
        parse_projects("boltons,numpy")


def test_eval_report_pools_disjoint_runs_of_the_same_settings(tmp_path: Path) -> None:
    from assistant.cache import JsonlCache
    from assistant.evaluate.repo.pool import pooled_records

    from .conftest import assist_here

    settings = {"projects": ["p==1"], "seed": 0, "n": 2, "demos": 4, "backend": "local", "model": None,
                "temperature": 0.8, "top_p": 0.95}  # fmt: skip

    def folder(name: str, solved: dict[str, list[int]], **changed) -> Path:
        out = tmp_path / name
        out.mkdir()
        (out / "config.json").write_text(json.dumps({**settings, **changed, "strategies": list(solved)}))
        records = JsonlCache(out / "function.jsonl")
        for strategy, row in solved.items():
            for task, correct in enumerate(row):
                samples = [{"passed": i < correct, "parsed": True, "logprob": -i, "em": 0, "es": 0} for i in range(2)]
                record = {"task_id": f"{name}{task}", "project": "p", "strategy": strategy, "n": 2, "seconds": 1.0,
                          "correct": correct, "samples": samples, "picks": {"first": 0, "logprob": 0, "agree": 1},
                          "scores": {"agree": [0.0, 1.0]}}  # fmt: skip
                records.put(f"{name}{task}{strategy}", record)
        return out

    a = folder("a", {"zero": [0, 0], "bm25": [1, 0], "hybrid": [2, 0]})
    b = folder("b", {"zero": [0], "bm25": [0], "hybrid": [2], "dense": [2]})
    records, counts = pooled_records([a, b])
    assert counts == {str(a): 2, str(b): 1} and {r["strategy"] for r in records} == {"zero", "bm25", "hybrid"}
    rows = {row["strategy"]: row for row in summarize_functions(records, [1])}
    assert rows["hybrid"]["tasks"] == 3
    assert rows["hybrid"]["vs_zero"][0] == pytest.approx((1 + 0 + 1) / 3)
    # The auto pick (agree's, here the second sample) against zero-shot's and bm25's, paired by task.
    assert rows["hybrid"]["auto_vs_zero"][0] == pytest.approx((1 + 0 + 1) / 3)
    assert rows["hybrid"]["auto_vs_bm25"][0] == pytest.approx((1 + 0 + 1) / 3)
    printed = assist_here("eval", "report", a, b, "--strategies", "zero,hybrid", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith(f"3 function tasks ({a} 2, {b} 1)") and "| hybrid | 3 |" in printed.stdout
    assert "| auto vs zero |" in printed.stdout and "| bm25 |" not in printed.stdout
    against = assist_here("eval", "report", a, b, "--versus", "bm25", cwd=tmp_path).stdout
    assert "| pass@1 vs zero | pass@1 vs bm25 | cut off |" in against  # bm25 is always a column
    against = assist_here("eval", "report", a, b, "--versus", "hybrid", cwd=tmp_path).stdout
    assert "| pass@1 vs zero | pass@1 vs bm25 | pass@1 vs hybrid | cut off |" in against
    assert assist_here("eval", "report", a, b, "--versus", "dense", cwd=tmp_path).returncode == 2
    as_json = json.loads(assist_here("eval", "report", a, b, "--json", cwd=tmp_path).stdout)
    assert [row["strategy"] for row in as_json["rows"]] == ["zero", "bm25", "hybrid"]
    for folders, wanted, message in [
        ([a, folder("c", {"zero": [0]}, n=5)], None, "other settings"),
        ([a, a], None, "more than one folder"),
        ([a, b], ["zero", "dense"], "no records of dense"),
        ([a, folder("d", {"zero": [0]}, redraw=True)], None, r"other settings .*\(redraw\)"),
        ([folder("e", {"zero": [0]}, engine="openvino"), folder("f", {"zero": [0]}, engine="ct2")], None, "engine"),
    ]:
        with pytest.raises(UsageError, match=message):
            pooled_records(folders, wanted)
    refused = assist_here("eval", "report", a, "--strategies", "zero", cwd=tmp_path)
    assert refused.returncode == 2 and "for pooling several eval repo folders" in refused.stderr


def test_a_copy_of_the_hidden_body_in_another_file_is_never_shown_nor_learned(
    tiny: Project, encoder, tmp_path: Path
) -> None:
    from assistant.evaluate.repo.run import _learnable, copied_tasks

    # The same body, one level deeper and with a comment, in a vendored class whose body crosses the edge of two
    # 20-line fragments (lines 20-21); and a function that only resembles it.
    (tiny.root / "pkg" / "vendored.py").write_text(
        "".join(f"C{i} = {i}\n" for i in range(14))
        + '\nclass Copy:\n    def double(self, x):\n        """Twice x."""\n        # vendored\n        y = x * 2\n'
        "        return y\n"
    )
    (tiny.root / "pkg" / "util.py").write_text('def twice(v):\n    """Return twice v."""\n    return v + v\n')
    tasks = function_tasks(tiny)
    indexes = {"tiny": index_project(tiny, encoder)}
    assert copied_tasks(tasks, indexes["tiny"].functions.examples) == {"tiny:pkg/mod.py::double"}
    backend = ScriptedBackend(["    return x + x\n```"], prefills_answer=True)
    record, shown = run_function_tasks(
        tasks, indexes, ["bm25", "bm25@fragments"], backend, tmp_path / "out", params=SamplingParams(n=1), demos=4
    )
    assert record["demonstrations"] == ["pkg/util.py:1"]  # not pkg/vendored.py's Copy.double
    assert shown["fragments"] == ["pkg/util.py:1"]  # nor either fragment holding part of it
    learnable = _learnable(indexes["tiny"].functions, tasks)
    assert "pkg/vendored.py" not in {e.path for e in learnable.examples}
    assert "pkg/util.py" in {e.path for e in learnable.examples}


def test_a_covering_test_inherited_from_a_mixin_in_another_file_is_never_shown(
    tiny: Project, encoder, tmp_path: Path
) -> None:
    from assistant.evaluate.repo.run import covering_test_files

    # cachetools' layout: the test methods live in a mixin of one file, the node ids name another that inherits.
    tests = tiny.root / "tests"
    (tests / "checks.py").write_text(
        "from pkg.mod import double\n\n\nclass DoubleChecks:\n    def test_double_twice(self):\n"
        '        """Double a number twice."""\n        assert double(double(5)) == 20\n'
    )
    (tests / "test_inherit.py").write_text(
        "from checks import DoubleChecks\n\n\nclass TestDouble(DoubleChecks):\n    pass\n"
    )
    run = run_pytest(tiny.root, Path(sys.executable), ["tests"], trace=True)
    assert run.ok, run.output
    project = Project(tiny.spec, tiny.root, Path(sys.executable), sorted(run.passed()), run.calls)
    (task,) = [t for t in function_tasks(project) if t.qualname == "double"]
    assert "tests/test_inherit.py::TestDouble::test_double_twice" in task.tests
    assert covering_test_files(task, project) == {"tests/test_mod.py", "tests/test_inherit.py", "tests/checks.py"}
    backend = ScriptedBackend(["    return x + x\n```"], prefills_answer=True)
    (record,) = run_function_tasks(
        [task],
        {"tiny": index_project(project, encoder)},
        ["bm25"],
        backend,
        tmp_path / "out",
        params=SamplingParams(n=1),
        demos=4,
    )
    assert not any(d.startswith("tests/") for d in record["demonstrations"]), record["demonstrations"]


def test_a_retry_at_twice_the_limit_takes_the_place_of_the_sample_it_redraws(
    tiny: Project, encoder, tmp_path: Path
) -> None:
    long = "    y = [\n" + "        0,\n" * 400 + "    ]\n    return x * 2\n"  # cut anywhere, it cannot parse
    backend = ScriptedBackend([long, long, "    return x + x\n```", "    return x + x\n```"], prefills_answer=True)
    tasks = [t for t in function_tasks(tiny) if t.qualname == "double"]
    indexes = {"tiny": index_project(tiny, encoder)}
    (record,) = run_function_tasks(
        tasks, indexes, ["zero"], backend, tmp_path / "out", params=SamplingParams(n=2), limits=QUICK
    )
    assert [s["cut_off"] for s in record["samples"]] == [True, True, False, False]
    assert record["superseded"] == [0, 1] and (record["n"], record["correct"]) == (2, 2)
    assert summarize_functions([record], [1])[0]["pass@1"][0] == pytest.approx(1.0)


def test_preparing_a_project_passes_on_no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.evaluate.repo.projects import prepare_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-canary")
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    env = prepare_env()
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env  # building an sdist runs its code
    assert env["PIP_INDEX_URL"] == "https://mirror.example/simple" and env["PATH"]


def test_a_fragment_keeps_at_most_its_character_cap() -> None:
    from assistant.indexing.fragments import MAX_FRAGMENT_CHARS

    table = "TABLE = [" + ", ".join(str(i) for i in range(50_000)) + "]\n"  # one generated line of ~340,000
    (fragment,) = split_fragments(table + "x = 1\n", "gen.py")
    assert len(fragment.code) == MAX_FRAGMENT_CHARS and fragment.code.startswith("TABLE = [0, 1, 2")
    assert (fragment.start_line, fragment.end_line) == (1, 2)  # the span is the window's, cut or not


def test_own_file_strategy_shows_the_target_files_other_functions_never_the_hidden_one(
    tiny: Project, encoder, tmp_path: Path
) -> None:
    # The reference body differs from the indexed one by a line, so the copy rule (a function holding the body
    # line for line) does not catch the pristine `double`: only the hidden function's own span and name do.
    tasks = [replace(task, body=task.body + "assert y\n") for task in function_tasks(tiny)]
    indexes = {"tiny": index_project(tiny, encoder)}
    backend = ScriptedBackend(["    return x + x\n```"], prefills_answer=True)
    records = run_function_tasks(
        tasks, indexes, ["bm25", "bm25+file"], backend, tmp_path / "out", params=SamplingParams(n=1), demos=4
    )
    plain, own = records
    # bm25 alone finds nothing outside the target file and the covering test's; +file shows the module's other
    # functions, and never `double` itself (the pristine index holds its body).
    assert plain["demonstrations"] == []
    assert own["demonstrations"] and all(d.startswith("pkg/mod.py:") for d in own["demonstrations"])
    assert "pkg/mod.py:4" not in own["demonstrations"]
    asked = backend.prompts[-1]
    assert any("def undocumented(x):" in m["content"] for m in asked.messages[:-1])  # a demonstration turn
    assert not any("y = x * 2" in m["content"] for m in asked.messages)
    assert [r["correct"] for r in records] == [1, 1]
    check_strategies(["hybrid+file", "hybrid+file+apis"], "function")
    for wrong in ("zero+file", "hybrid@fragments+file", "hybrid+apis+file"):
        with pytest.raises(UsageError, match="unknown strategy"):
            check_strategies([wrong], "function")
    with pytest.raises(UsageError, match="for function tasks only"):
        check_strategies(["hybrid+file"], "line")


def test_attrs_strategy_asks_for_the_class_attributes_and_shares_unchanged_prompts(
    tiny: Project, encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistant.evaluate.repo import run as repo_run
    from assistant.evaluate.repo.run import retrieval_of, shows_apis, shows_attributes, shows_own_file

    asked: list[bool] = []
    real = repo_run.prepare_stub

    def spy(*args, **kwargs):
        asked.append(kwargs["attributes"])
        return real(*args, **kwargs)

    monkeypatch.setattr(repo_run, "prepare_stub", spy)
    indexes = {"tiny": index_project(tiny, encoder)}
    backend = ScriptedBackend(["    return x + x\n```"], prefills_answer=True)
    records = run_function_tasks(
        function_tasks(tiny), indexes, ["zero", "zero+attrs"], backend, tmp_path / "out", params=SamplingParams(n=1)
    )
    assert asked == [False, True]
    # `double` is no method: the same prompt, so the two strategies share one sampled answer.
    assert len(backend.prompts) == 1 and [r["strategy"] for r in records] == ["zero", "zero+attrs"]
    assert records[0]["sample_key"] == records[1]["sample_key"]
    check_strategies(["zero+attrs", "hybrid+file+attrs", "hybrid@fragments+apis+attrs"], "function")
    assert retrieval_of("hybrid+file+apis+attrs") == "hybrid" and shows_own_file("hybrid+file+attrs")
    assert shows_apis("zero+apis+attrs") and shows_attributes("zero+attrs") and not shows_attributes("zero")
    for wrong in ("hybrid+attrs+file", "hybrid+attrs+apis"):
        with pytest.raises(UsageError, match="unknown strategy"):
            check_strategies([wrong], "function")
    with pytest.raises(UsageError, match="for function tasks only"):
        check_strategies(["zero+attrs"], "line")


def test_a_project_sdist_with_another_sha256_is_refused_before_its_build_code_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip builds an sdist's metadata (running its setup.py) when it downloads it; the pinned sha256 must stop
    # a swapped file before that. A local find-links folder stands for the index, so nothing leaves the machine.
    import hashlib
    import tarfile

    from assistant.evaluate.repo.projects import fetch

    marker = tmp_path / "setup-ran"
    source = tmp_path / "evilpkg-1.0"
    source.mkdir()
    (source / "setup.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from setuptools import setup\nsetup(name='evilpkg', version='1.0')\n"
    )
    links = tmp_path / "links"
    links.mkdir()
    with tarfile.open(links / "evilpkg-1.0.tar.gz", "w:gz") as archive:
        archive.add(source, arcname="evilpkg-1.0")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # pip's inverted switch: build in this env, no isolation
    spec = ProjectSpec("evilpkg", "1.0", hashlib.sha256(b"the pinned file").hexdigest(), "evilpkg", "tests")
    with pytest.raises(UsageError, match=r"sha256 is not the pinned one \(pip refused it unbuilt\)"):
        fetch(spec, tmp_path / "downloads")
    assert not marker.exists() and not list((tmp_path / "downloads").iterdir())
