"""The repo's tests on a stub's candidates: what the runs on the stub itself cost (the one that picks the tests that
check it, and the baseline that decides whether tests named otherwise can rank at all), and the candidates' runs one
at a time against as many at once as there are cores.

    python benchmarks/repo_test_runs.py [--candidates 5] [--rounds 3] [--json [OUT]]

A small git project is written to a temporary folder (a module with a stub and three tests of it, as `generate
--function` finds them); its tests are planned with `assistant.core.repo_tests.repo_tests`, then, each round, run
on the stub once (`check_baseline`), planned again with the run that picks (`repo_tests(..., stub=)`: the test
files that reach it, run with it raising; what it picked forgotten first), planned so once more (remembered, as a
request on the same files is), and on `--candidates` distinct filled versions through `score_texts`, with
`RUN_WORKERS` 1 and then as shipped. Prints the median seconds of each over the rounds. Nothing
is asserted. Run it on an otherwise idle machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

MODULE = '''"""Text helpers."""


def shout(text: str) -> str:
    """Upper-case the text and end it with one exclamation mark."""
    ...
'''
TESTS = """from words import shout


def test_plain():
    assert shout("hi") == "HI!"


def test_already_loud():
    assert shout("hi!") == "HI!"


def test_empty():
    assert shout("") == "!"
"""
JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"


def _project(folder: Path) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "words.py").write_text(MODULE)
    (folder / "tests" / "test_words.py").write_text(TESTS)
    for args in (["init", "-q"], ["add", "."], ["-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=folder, check=True)
    return folder


def _candidates(count: int) -> list[str]:
    """`count` distinct filled modules: the right body, then wrong ones that differ only in a constant."""
    right = MODULE.replace("    ...\n", '    return text.rstrip("!").upper() + "!"\n')
    wrong = [MODULE.replace("    ...\n", f"    return text.upper() + {'!' * (n + 1)!r}\n") for n in range(count - 1)]
    return [right, *wrong]


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure(candidates: int, rounds: int) -> dict:
    from assistant.core import rank
    from assistant.core.repo_tests import check_baseline, repo_tests
    from assistant.core.stubs import find_stub

    shipped = rank.RUN_WORKERS
    rows = ("baseline", "pick", "pick, remembered", "one at a time", "at once")
    times: dict[str, list[float]] = {row: [] for row in rows}
    stub = find_stub(MODULE, "shout")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ASSIST_CACHE_DIR"] = cache = str(Path(tmp) / "cache")  # this run's own picked tests
        root = _project(Path(tmp) / "proj")
        plan = repo_tests(root, "words.py", "shout")
        assert plan is not None
        texts = _candidates(candidates)
        for _ in range(rounds):
            times["baseline"].append(_timed(lambda: check_baseline(plan, "words.py", MODULE, "shout")))
            shutil.rmtree(cache, ignore_errors=True)  # a first request on these files
            times["pick"].append(_timed(lambda: repo_tests(root, "words.py", "shout", baseline=MODULE, stub=stub)))
            again = _timed(lambda: repo_tests(root, "words.py", "shout", baseline=MODULE, stub=stub))
            times["pick, remembered"].append(again)
            rank.RUN_WORKERS = 1
            times["one at a time"].append(_timed(lambda: rank.score_texts(plan, "words.py", texts)))
            rank.RUN_WORKERS = shipped
            times["at once"].append(_timed(lambda: rank.score_texts(plan, "words.py", texts)))
    medians = {name: round(statistics.median(values), 3) for name, values in times.items()}
    shape = {"candidates": candidates, "rounds": rounds, "cores": os.cpu_count(), "workers": shipped}
    return {**shape, "median_s": medians}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    report = measure(args.candidates, args.rounds)
    if args.json == "-":
        print(json.dumps(report))
        return
    medians = report["median_s"]
    print(f"{args.candidates} candidates, {args.rounds} rounds, {report['cores']} cores (median seconds)")
    print("| run | s |\n|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.2f} |")
    ratio = (medians["baseline"] + medians["at once"]) / medians["one at a time"]
    print(f"baseline + at once over one at a time: {ratio:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
