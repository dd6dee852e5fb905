"""What the sandbox's OS boundary costs: wall time of one trivial sandboxed test, old runner against new.

Runs `run("def f(): return 1", ["assert f() == 1"])` N times (default 50) with the sandbox as it was
before the boundary (assistant/sandbox.py at commit 7ce586e, loaded from git into a temporary module;
nothing of it is kept in the package) and with the current one, interleaved so that both see the same
machine load, and prints p50 and p90 of each and their difference and ratio. It asserts nothing. From
the repo root:

    .venv/bin/python benchmarks/sandbox_overhead.py [--runs 50] [--old-commit 7ce586e] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from assistant import sandbox

CODE = "def f(): return 1"
TESTS = ["assert f() == 1"]
REPO = Path(__file__).resolve().parent.parent


def load_old(commit: str) -> ModuleType:
    """The sandbox module as it was at `commit`, imported from a temporary file (self-contained then)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:assistant/sandbox.py"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    # The file is only read while the module loads: the folder goes once it has (none left behind per run).
    with tempfile.TemporaryDirectory(prefix="assist-old-sandbox-") as folder:
        path = Path(folder) / "old_sandbox.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("old_sandbox", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["old_sandbox"] = module
        spec.loader.exec_module(module)
    return module


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def timed(run: Callable[..., Any]) -> float:
    """Seconds for one trivial run with `run` (either module's), which must pass."""
    started = time.perf_counter()
    result = run(CODE, TESTS)
    elapsed = time.perf_counter() - started
    if result.status != "passed":
        raise SystemExit(f"the trivial test did not pass: {result}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs of each sandbox")
    parser.add_argument("--old-commit", default="7ce586e", help="commit whose assistant/sandbox.py is the baseline")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2")

    old = load_old(args.old_commit)
    for run in (old.run, sandbox.run):  # warm-up: page cache, pyc files
        timed(run)
    times: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(args.runs):
        times["old"].append(timed(old.run))
        times["new"].append(timed(sandbox.run))

    rows = {
        name: {"p50_ms": percentile(values, 0.5) * 1000, "p90_ms": percentile(values, 0.9) * 1000}
        for name, values in times.items()
    }
    layers = sandbox.boundary_layers()
    summary = {
        "runs": args.runs,
        "old_commit": args.old_commit,
        "rows": rows,
        "p50_added_ms": rows["new"]["p50_ms"] - rows["old"]["p50_ms"],
        "p50_ratio": rows["new"]["p50_ms"] / rows["old"]["p50_ms"],
        "mean_ms": {name: statistics.fmean(values) * 1000 for name, values in times.items()},
        "layers_on": [name for name, (on, _) in layers.items() if on],
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
    }
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"sandbox overhead: {args.runs} runs each of run({CODE!r}, {TESTS!r}), interleaved")
    print(f"{'runner':<34} {'p50 ms':>8} {'p90 ms':>8}")
    labels = {"old": f"old ({args.old_commit}, audit hook only)", "new": "new (OS boundary + hook)"}
    for name, label in labels.items():
        print(f"{label:<34} {rows[name]['p50_ms']:>8.1f} {rows[name]['p90_ms']:>8.1f}")
    print(f"p50: {summary['p50_added_ms']:+.1f} ms per run, ratio {summary['p50_ratio']:.2f}x")
    print(f"layers on: {', '.join(summary['layers_on'])}")
    print(f"machine: {summary['machine']}")


if __name__ == "__main__":
    main()
