"""Wall time and peak memory of whole `assist` commands, each in a fresh process, as a user runs them.

Compares source trees of assist (e.g. this checkout and a `git worktree` of an older commit) run by the same
interpreter, rounds interleaved so that a machine's drift touches every tree alike:

    git worktree add /tmp/assist-old <commit>
    python benchmarks/command_time.py --tree old=/tmp/assist-old --tree new=. --rounds 3 --cwd SCRATCH_REPO \\
        --command 'docstring util.py' --command 'generate "..." -n 1 --ranker first --file textwrap.py --seed 1'

Prints one row per (command, tree): each round's wall seconds, their median, the peak resident memory, and
the ratio of the medians against the first tree. Run it on an otherwise idle machine; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_once(tree: Path, command: str, cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in GB, exit status) of `python -m assistant COMMAND` with `tree` first on the path."""
    # Cold: each command loads its model (a warm server, local.warm's default, would serve the later rounds).
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "HF_HUB_OFFLINE": "1", "ASSIST_LOCAL_WARM": "off"}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "assistant", *shlex.split(command)],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss / 1024 / 1024, child.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of an assist source tree")
    parser.add_argument("--command", action="append", required=True, help="an assist command line, quoted")
    parser.add_argument("--cwd", type=Path, default=Path.cwd(), help="where the commands run (a scratch repo)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs of each (command, tree) first")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = {name: Path(path) for name, path in (t.split("=", 1) for t in args.tree)}
    for tree in trees.values():
        if not (tree / "assistant" / "__init__.py").exists():
            parser.error(f"{tree} holds no assistant/ package")
    times: dict[tuple[str, str], list[float]] = {}
    memory: dict[tuple[str, str], float] = {}
    for round_ in range(-args.warmup, args.rounds):
        for command in args.command:
            for name, tree in trees.items():
                wall, rss, code = run_once(tree, command, args.cwd)
                if code != 0:
                    print(f"error: `assist {command}` with {name} exited {code}", file=sys.stderr)
                    return 1
                if round_ >= 0:  # the warm-up rounds fill the caches and converted models
                    times.setdefault((command, name), []).append(wall)
                    memory[(command, name)] = max(memory.get((command, name), 0.0), rss)
                print(f"round {round_}: {name}: {wall:.1f} s  {command[:60]}", file=sys.stderr)
    rows = []
    for command in args.command:
        first = statistics.median(times[(command, next(iter(trees)))])
        for name in trees:
            walls = times[(command, name)]
            rows.append(
                {
                    "command": command,
                    "tree": name,
                    "wall_s": [round(w, 1) for w in walls],
                    "median_s": round(statistics.median(walls), 1),
                    "peak_rss_gb": round(memory[(command, name)], 2),
                    "ratio": round(statistics.median(walls) / first, 3),
                }
            )
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        walls = ", ".join(f"{w:.1f}" for w in row["wall_s"])
        print(
            f"{row['tree']:>8}  median {row['median_s']:6.1f} s ({walls})  peak {row['peak_rss_gb']:.2f} GB  "
            f"x{row['ratio']:.3f}  assist {row['command']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
