"""Does a fixed seed repeat a request? `assist generate --function NAME -n 5 --seed 0` twice per stub, each time in
a fresh process, per tree.

    python benchmarks/seed_repeat.py [--stubs 10] [--model qwen2.5-coder-1.5b] [--tree NAME=PATH ...] [--json [OUT]]

The stubs are the first `--stubs` of `stub_latency.py`'s (each stubbed file alone in a fresh git repo; the
repository benchmark's projects must be prepared, as there). Each request is `assist generate --file F --function
NAME -n 5 --seed 0 --ranker first --json` with `ASSIST_LOCAL_WARM=off` (the model loaded by the process itself), so
what it prints is the samples as drawn. `--tree NAME=PATH` runs the command from another tree (a worktree of another
commit, put first on the module path); without it, this tree. The trees take turns per stub, the order alternating.

Prints, per tree, on how many stubs the two requests printed the same candidates (text and order) and wrote as many
tokens, and the requests' median seconds; then each stub's verdict per tree. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"


def _request(stub: tuple, model: str, tree: Path) -> tuple[float, dict]:
    """Seconds and what one fresh `assist generate` process printed: its candidates' code and its tokens written."""
    _, repo, path, qualname, _ = stub
    env = {**os.environ, "ASSIST_LOCAL_WARM": "off", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-P", "-m", "assistant", "generate", "--file", path, "--function", qualname, "-n", "5"]
    argv += ["--seed", "0", "--ranker", "first", "--model", model, "--json"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{qualname}: assist generate exited {done.returncode}: {done.stderr.strip()[-300:]}")
    report = json.loads(done.stdout)
    drawn = {"codes": [c["code"] for c in report["candidates"]], "tokens": report["usage"]["completion_tokens"]}
    return seconds, drawn


def _trees(given: list[str]) -> dict[str, Path]:
    trees = {}
    for item in given or [f"this={ROOT}"]:
        name, _, path = item.partition("=")
        if not path or not (Path(path) / "assistant").is_dir():
            raise SystemExit(f"--tree takes NAME=PATH, PATH a checkout of assist: {item!r}")
        trees[name] = Path(path).resolve()
    return trees


def _run(stubs: list[tuple], trees: dict[str, Path], model: str) -> list[dict]:
    """Each stub's two requests per tree (the trees in turn, the order alternating by stub)."""
    rows = []
    for number, stub in enumerate(stubs):
        names = list(trees) if number % 2 == 0 else list(reversed(trees))
        row: dict = {"task": stub[0]}
        for name in names:
            (first_s, first), (second_s, second) = (_request(stub, model, trees[name]) for _ in range(2))
            row[name] = {"same": first == second, "seconds": [round(first_s, 2), round(second_s, 2)]}
            row[name]["tokens"] = [first["tokens"], second["tokens"]]
        print(stub[0], {name: row[name]["same"] for name in trees}, file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def _summary(rows: list[dict], trees: dict[str, Path]) -> dict:
    return {
        name: {
            "repeated": sum(row[name]["same"] for row in rows),
            "stubs": len(rows),
            "p50_s": round(statistics.median(s for row in rows for s in row[name]["seconds"]), 2),
        }
        for name in trees
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stubs", type=int, default=10, help="how many stubs (default 10)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH of a checkout to run (repeatable)")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from stub_latency import _stub_repos, _task_ids

    trees = _trees(args.tree)
    with tempfile.TemporaryDirectory(prefix="assist-seed-repeat-") as folder:
        stubs = _stub_repos(_task_ids(args.stubs), Path(folder), in_project=False)
        rows = _run(stubs, trees, args.model)
    result = {"model": args.model, "trees": {k: str(v) for k, v in trees.items()}, "summary": _summary(rows, trees)}
    result["rows"] = rows
    if args.json == "-":
        print(json.dumps(result, indent=1))
        return
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print("| tree | stubs repeated | request p50 s |\n|---|---|---|")
    for name, figures in result["summary"].items():
        print(f"| {name} | {figures['repeated']} of {figures['stubs']} | {figures['p50_s']} |")
    print("\n| stub | " + " | ".join(trees) + " |\n|---|" + "---|" * len(trees))
    for row in rows:
        cells = [f"{'same' if row[n]['same'] else 'differ'} (tokens {row[n]['tokens']})" for n in trees]
        print(f"| {row['task']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
