"""The run that picks a stub's tests, first and asked again: what remembering its answer for the same files saves.

    python benchmarks/pick_again.py [--stubs 8] [--json [OUT]]

The first `--stubs` stubs of `benchmarks/stub_latency.py` (taken in turn from boltons, click, tabulate and
cachetools, prepared by `assist eval repo`), each in a committed git copy of its project with its venv, as
`--in-project` puts them. For each, `assistant.core.repo_tests.repo_tests` plans the stub's tests as `generate
--function` does (the test files that reach it, run once with it raising), with an empty cache of picked tests,
then again on the same files (remembered: `assistant.core.picked`). Prints the seconds of both, and the tests each
found (they must be the same). Nothing is asserted; no model runs. Run it on an otherwise idle machine: the figures
are wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"


def measure(count: int) -> list[dict]:
    """One row per stub: its task, the seconds of the first plan and of the one asked again, and what each found."""
    from assistant.core.repo_tests import repo_tests
    from assistant.core.stubs import find_stub

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmark next door picks and makes the stubs
    from stub_latency import _stub_repos, _task_ids

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ASSIST_CACHE_DIR"] = str(Path(tmp) / "cache")  # an empty cache of picked tests, this run's own
        for task_id, repo, path, qualname, python in _stub_repos(_task_ids(count), Path(tmp), in_project=True):
            text = (repo / path).read_text()
            stub = find_stub(text, qualname, path)
            plans, seconds = [], []
            for _ in range(2):
                started = time.perf_counter()
                plans.append(repo_tests(repo, path, qualname, python=python, baseline=text, stub=stub))
                seconds.append(round(time.perf_counter() - started, 2))
            found = [None if plan is None else len(plan.args) for plan in plans]
            same = plans[0] is None or plans[1] is None or plans[0].args == plans[1].args
            remembered = plans[1] is not None and plans[1].remembered
            rows.append({"task": task_id, "first_s": seconds[0], "again_s": seconds[1], "tests": found,
                         "same": same, "remembered": remembered})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stubs", type=int, default=8)
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    rows = measure(args.stubs)
    if args.json == "-":
        print(json.dumps({"rows": rows}))
        return
    print("| stub | first s | again s | tests found (first, again) | same | remembered |\n|---|---|---|---|---|---|")
    for row in rows:
        tests = ", ".join(str(n) for n in row["tests"])
        cells = [row["task"], row["first_s"], row["again_s"], tests, row["same"], row["remembered"]]
        print("| " + " | ".join(str(cell) for cell in cells) + " |")
    first = statistics.median(row["first_s"] for row in rows)
    again = statistics.median(row["again_s"] for row in rows)
    print(f"median: first {first:.2f} s, again {again:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}) + "\n")


if __name__ == "__main__":
    main()
