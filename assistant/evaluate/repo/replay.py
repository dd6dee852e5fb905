"""Replaying a recorded `eval repo` run without a model: its pinned sources, and its picks under a new rule.

What the replays over committed samples share (`benchmarks/undefined_names.py`, `undefined_attributes.py`,
`wrong_arity.py`, `docstring_examples.py`, `agree_context.py`): each sample recorded its code, whether it passed
the project's hidden tests, and each ranker's score, so a rule that moves some samples last, or a ranker scored
again, can be read against the picks it changes.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

from assistant.evaluate.codegen import auto_pick
from assistant.evaluate.metrics import interval_cell, paired_difference
from assistant.evaluate.repo.projects import PROJECTS, fetch


def source_tree(project: str, version: str, sdists: Path) -> Path:
    """The project's unpacked sdist under `sdists` (fetched from PyPI and sha256-checked once)."""
    spec = PROJECTS[project]
    assert spec.version == version, f"{project}: the run used {version}, the pin is {spec.version}"
    target = sdists / spec.key
    if not target.is_dir():
        with tarfile.open(fetch(spec, sdists)) as archive:
            archive.extractall(sdists, filter="data")
    return target


def ranking(record: dict, ranker: str) -> list[int]:
    """The candidates (samples that parsed) in a ranker's order, as the run ranked them, ties in sampling order:
    `auto` is agree then mean log-probability (what `assist` does without tests; `auto_pick`), `agree` and
    `logprob` each alone (the run's recorded picks)."""
    parsed = [i for i, sample in enumerate(record["samples"]) if sample["parsed"]]

    def value(score: float | None, missing: float) -> float:
        return missing if score is None else score

    if ranker == "auto":
        agree, samples = record["scores"]["agree"], record["samples"]
        key = lambda i: (-value(agree[i], 0.0), -value(samples[i]["logprob"], float("-inf")), i)  # noqa: E731
        return sorted(parsed, key=key)
    scores = record["scores"][ranker]
    return sorted([i for i in parsed if scores[i] is not None], key=lambda i: (-scores[i], i))


def recorded(record: dict, ranker: str) -> int | None:
    """The pick the run recorded for `ranker` (`auto`: computed as the run's reports compute it)."""
    return auto_pick(record) if ranker == "auto" else record["picks"][ranker]


def pick(order: list[int], flagged: list[bool], move: bool) -> int:
    """The first sample of a ranking, with flagged samples moved last when `move`."""
    return sorted(order, key=lambda i: flagged[i] and move)[0] if move else order[0]


def moved_rows(records: list[dict], flags: dict[str, list[bool]]) -> list[str]:
    """For `auto`, `agree` and `logprob`, a table's cells: the ranker, its picks that are flagged, its pick's pass
    rate before → after moving flagged samples last, the paired difference (95% bootstrap), and how many of the
    run's recorded picks the replay found again."""
    rows = []
    for ranker in ("auto", "agree", "logprob"):
        before, after, matched, hit = {}, {}, 0, 0
        for record in records:
            task, order = record["task_id"], ranking(record, ranker)
            matched += (order[0] if order else None) == recorded(record, ranker)
            if not order:  # no sample parsed: no pick, before or after
                before[task] = after[task] = 0.0
                continue
            hit += flags[task][order[0]]
            before[task] = float(record["samples"][pick(order, flags[task], False)]["passed"])
            after[task] = float(record["samples"][pick(order, flags[task], True)]["passed"])
        difference = interval_cell(paired_difference(after, before), signed=True)
        rates = f"{100 * sum(before.values()) / len(records):.1f} → {100 * sum(after.values()) / len(records):.1f}"
        rows.append(f"{ranker} | {hit} | {rates} | {difference} | {matched}/{len(records)}")
    return rows


def flagged_notes(records: list[dict], flags: dict[str, list[bool]]) -> list[str]:
    """The flagged samples that passed their tests, and the stubs where every sample is flagged with how many of
    their `auto` picks passed (what `--apply` without tests wrote there)."""
    notes = [
        f"  passed though flagged: {record['task_id']} sample {number}"
        for record in records
        for number, (sample, flag) in enumerate(zip(record["samples"], flags[record["task_id"]], strict=True))
        if flag and sample["passed"]
    ]
    every = [r for r in records if r["samples"] and all(flags[r["task_id"]])]
    passing = [r for r in every if (p := auto_pick(r)) is not None and r["samples"][p]["passed"]]
    named = ", ".join(r["task_id"] for r in every) or "none"
    notes.append(
        f"  every sample flagged: {len(every)} stubs ({named}); their auto pick passed the project's tests on "
        f"{len(passing)}"
    )
    return notes


def work_tree(tree: Path) -> Path:
    """An unpacked sdist as a git work tree (what a module home copies), committed once."""
    if not (tree / ".git").exists():
        git = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "sdist"]):
            subprocess.run([*git, *args], cwd=tree, check=True, capture_output=True)
    return tree


def flag_replay_main(description: str, runs: list[Path], replay: Callable[[Path, Path], dict], what: str) -> None:
    """The command line of a replay that flags samples (`runs` by default; `--sdists`): `replay(run, sdists)` gives
    a run's `records`, `flags` and `found` (what each stub's samples were flagged for; `methods` and `checked` when
    only some stubs could be read). Prints the table of :func:`moved_rows` per run, then per run the `what` flagged
    by stub and :func:`flagged_notes`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("runs", nargs="*", type=Path, default=runs)
    parser.add_argument("--sdists", type=Path, default=Path.home() / ".cache" / "assist" / "undefined-names")
    args = parser.parse_args()
    args.sdists.mkdir(parents=True, exist_ok=True)
    data = {run: replay(run, args.sdists) for run in args.runs}
    some = any("methods" in found for found in data.values())  # only the methods could be read
    print(
        f"| run | stubs |{' methods (checked) |' if some else ''} samples | flagged | flagged that passed | ranker "
        "| picks flagged | pick passes: before → after | after − before (paired, 95%) | recorded picks matched |"
    )
    print("|---" * (11 if some else 10) + "|")
    for run, found in data.items():
        records, flags = found["records"], found["flags"]
        samples = sum(len(r["samples"]) for r in records)
        flagged = sum(sum(flags[r["task_id"]]) for r in records)
        passed = sum(s["passed"] for r in records for s, f in zip(r["samples"], flags[r["task_id"]], strict=True) if f)
        read = f" {found['methods']} ({found['checked']}) |" if some else ""
        for row in moved_rows(records, flags):
            print(f"| {run.name} | {len(records)} |{read} {samples} | {flagged} | {passed} | {row} |")
    for run, found in data.items():
        shown = {task: items for task, items in found["found"].items() if items}
        print(f"\n{run.name}: {what} flagged, by stub ({len(shown)} stubs)")
        for task, items in shown.items():
            print(f"  {task}: {'; '.join(items)}")
        print("\n".join(flagged_notes(found["records"], found["flags"])))


def sample_function(code: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function a recorded sample wrote for the stub `qualname` (found by its last name), or None when the
    sample does not parse or wrote no such function."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    leaf = qualname.rsplit(".", 1)[-1]
    kinds = ast.FunctionDef | ast.AsyncFunctionDef
    return next((n for n in ast.walk(tree) if isinstance(n, kinds) and n.name == leaf), None)


def read_run(run: Path) -> tuple[dict[str, str], list[dict]]:
    """A committed `eval repo` run: the pinned version of each project it ran, and its records (`function.jsonl.gz`)."""
    config = json.loads((run / "config.json").read_text())
    with gzip.open(run / "function.jsonl.gz", "rt") as lines:
        return dict(spec.split("==") for spec in config["projects"]), [json.loads(line)["value"] for line in lines]
