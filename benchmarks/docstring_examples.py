"""A stub's docstring examples as its tests, checked on the committed candidates of the 1.5B's correctness runs (no
model runs; the examples run in the project sandbox).

    .venv/bin/python benchmarks/docstring_examples.py [RUN ...] [--sdists DIR]

For each stub of each RUN (default: results/correctness-four-1.5b and results/correctness-heldout-1.5b) whose
docstring has examples `assist generate` takes as tests (`core/stubs/examples.py`), every parsed sample's body is
put in its module (the pinned sdist, fetched from PyPI into --sdists and made a git work tree) and the examples run
on it, as `assist generate --function` runs them. Prints, per stub and in all, whether the `auto` pick the run
recorded (agree, then log-probability) and the new pick (examples passed, then log-probability) pass the project's
tests, and whether the new pick passed every example (what `--apply` may write).
Plan: `results/correctness-docstring-examples/plan.md`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from assistant.core.home import module_home
from assistant.core.module_runs import passed_in_module
from assistant.core.stubs import find_stub, plan_fill, take_body
from assistant.core.stubs.body import Taken
from assistant.core.stubs.examples import example_tests
from assistant.core.target import Target
from assistant.evaluate.codegen import auto_pick
from assistant.evaluate.repo.replay import read_run, source_tree, work_tree

RUNS = [
    Path(__file__).resolve().parent.parent / "results" / run
    for run in ("correctness-four-1.5b", "correctness-heldout-1.5b")
]


def checked(record: dict, tree: Path) -> dict | None:
    """The stub's examples run on each parsed sample, and the two picks; None when it has no usable examples."""
    path, qualname = record["task_id"].split(":", 1)[1].split("::")
    target = Target.read(tree / path)
    stub = find_stub(target.text, qualname, requirement_given=True, tree=target.tree)
    tests = example_tests(stub, target.tree)
    if not tests:
        return None
    planned = {}
    for number, sample in enumerate(record["samples"]):
        taken = take_body(sample["code"], stub.name, [], finished=True) if sample["parsed"] else None
        if isinstance(taken, Taken):
            planned[number] = plan_fill(target, stub, taken, tree).new
    home = module_home(target.path, stub.qualname, planned, sys.executable)
    assert home is not None, record["task_id"]
    passed = passed_in_module(home, list(planned), list(tests))
    assert not isinstance(passed, str), passed
    share = {sample: len(passed[i]) / len(tests) for i, sample in enumerate(planned)}

    def key(i: int) -> tuple[float, float, int]:
        logprob = record["samples"][i]["logprob"]
        return (-share.get(i, 0.0), -(logprob if logprob is not None else float("-inf")), i)

    new = min(planned, key=key) if planned else None
    old = auto_pick(record)
    real = [s["passed"] for s in record["samples"]]
    return {
        "task": record["task_id"],
        "examples": len(tests),
        "old_passes": old is not None and real[old],
        "new_passes": new is not None and real[new],
        "may_write": new is not None and share[new] == 1.0,
        "samples_passing_examples": sum(v == 1.0 for v in share.values()),
        "samples_passing_tests": sum(real),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, default=RUNS)
    parser.add_argument("--sdists", type=Path, default=Path.home() / ".cache" / "assist" / "undefined-names")
    args = parser.parse_args()
    rows = []
    for run in args.runs:
        versions, records = read_run(run)
        for record in records:
            project = record["task_id"].split(":", 1)[0]
            tree = source_tree(project, versions[project], args.sdists)
            row = checked(record, work_tree(tree))
            if row is not None:
                rows.append(row)
    print("| stub | examples | samples passing examples / tests | auto pick passes | new pick passes | may write |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        counts = f"{r['samples_passing_examples']} / {r['samples_passing_tests']}"
        print(
            f"| {r['task']} | {r['examples']} | {counts} | {r['old_passes']} | {r['new_passes']} | {r['may_write']} |"
        )
    old, new = sum(r["old_passes"] for r in rows), sum(r["new_passes"] for r in rows)
    refused = [r for r in rows if not r["may_write"]]
    print(f"\n{len(rows)} stubs: the auto pick passes the project's tests on {old}, the new pick on {new}.")
    print(f"The new pick may be written (passes every example) on {len(rows) - len(refused)}; of the {len(refused)} "
          f"refused, {sum(not r['new_passes'] for r in refused)} fail the project's tests.")  # fmt: skip


if __name__ == "__main__":
    main()
