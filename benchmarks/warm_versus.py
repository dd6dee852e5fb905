"""Two source trees side by side on warm stub requests: the same `assist generate --function NAME -n 5` on the stubs
of `benchmarks/stub_latency.py`, each through one running `assist serve`, once with each tree's client.

    python benchmarks/warm_versus.py --old PATH [--model qwen2.5-coder-1.5b] [--stubs 20] [--seed 0] [--json [OUT]]
    # one tree against itself with a setting read by the client, e.g. agree's test call beside the sampling
    python benchmarks/warm_versus.py --old PATH --new-env ASSIST_AGREE_BATCH=on

For a change that lives in the client (what it asks the server for, how it ranks), not in the engine: the server is
started once from this tree and both clients use it (`ASSIST_LOCAL_WARM=auto`). `--old` is a checkout of the tree to
compare with (e.g. `git worktree add --detach /tmp/old HEAD~1`); its client runs with `PYTHONPATH=PATH`. The order
of the two alternates from stub to stub, so drift in the machine's load falls on both. Prints each stub's seconds,
p50 and p90 of each tree, the paired difference (new − old, balanced for which ran first: the server's prompt cache
serves the second; 95% bootstrap within each order), and on how many stubs the two printed the same top candidate.
Run it on an otherwise idle machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"


def _latency() -> Any:
    """`benchmarks/stub_latency.py`, the benchmark next door: its helpers pick the stubs and start the server."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import stub_latency

    return stub_latency


def _generate(
    repo: Path, path: str, qualname: str, model: str, seed: int, tree: Path | None, extra: dict[str, str]
) -> tuple[float, str]:
    """Seconds of one warm `assist generate --function ... --json` in a fresh process (with `tree`'s client where
    given, and `extra` in its environment), and the top candidate's code ("" where it failed)."""
    env = {**os.environ, "ASSIST_LOCAL_WARM": "auto", "HF_HUB_OFFLINE": "1", **extra}
    argv = [sys.executable]
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
        argv.append("-P")  # the tree's package, not the working folder's
    argv += ["-m", "assistant", "generate", "--file", path, "--function", qualname, "-n", "5"]
    argv += ["--seed", str(seed), "--model", model, "--json"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return seconds, ""
    candidates = json.loads(done.stdout).get("candidates") or [{}]
    return seconds, candidates[0].get("code", "")


def _paired(
    new: list[float], old: list[float], new_first: list[bool] | None = None, rounds: int = 10_000
) -> list[float]:
    """new − old over stubs with a 95% bootstrap interval, balanced for order: the server keeps the attention cache
    of the prompts it has read, so the tree that runs second on a stub reads its prompts faster. The stubs where new
    ran first (even positions) and those where it ran second each give a mean; their average cancels the order's
    effect, and the bootstrap resamples within each group."""
    differences = [a - b for a, b in zip(new, old, strict=True)]
    first = new_first if new_first is not None else [i % 2 == 0 for i in range(len(differences))]
    groups = [[d for d, f in zip(differences, first, strict=True) if f == side] for side in (True, False)]

    def balanced(parts: list[list[float]]) -> float:
        return statistics.fmean(statistics.fmean(part) for part in parts if part)

    rng = random.Random(0)
    means = sorted(balanced([rng.choices(part, k=len(part)) for part in groups if part]) for _ in range(rounds))
    return [round(balanced(groups), 2), round(means[int(0.025 * rounds)], 2), round(means[-int(0.025 * rounds) - 1], 2)]


def main() -> None:
    from assistant.backends.models import DEFAULT_GENERATOR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the tree to compare with (a checkout)")
    parser.add_argument("--model", default=DEFAULT_GENERATOR, help="the model (default: assist's default)")
    parser.add_argument("--stubs", type=int, default=20, help="how many stubs (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help=JSON_HELP)
    parser.add_argument(
        "--new-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in the new tree's client only (e.g. ASSIST_AGREE_BATCH=on; --old may then be this same tree)",
    )
    args = parser.parse_args()
    if any("=" not in item for item in args.new_env):
        parser.error("--new-env takes NAME=VALUE")
    extra = dict(item.split("=", 1) for item in args.new_env)
    if not (args.old / "assistant" / "__init__.py").is_file():
        parser.error(f"--old {args.old}: not a checkout of assist (no assistant/__init__.py)")
    latency = _latency()
    folder = Path(tempfile.mkdtemp(prefix="assist-versus-"))
    rows, server = [], None
    try:
        stubs = latency._stub_repos(latency._task_ids(args.stubs), folder)
        server, startup = latency._serve(args.model)
        for number, (task_id, repo, path, qualname) in enumerate(stubs):
            order = [("new", None, extra), ("old", args.old, {})]
            timed = {}
            for name, tree, env in order if number % 2 == 0 else order[::-1]:
                timed[name] = _generate(repo, path, qualname, args.model, args.seed, tree, env)
            row = {"task": task_id, "new_s": round(timed["new"][0], 1), "old_s": round(timed["old"][0], 1)}
            row["new_first"] = number % 2 == 0
            row["same_top"] = bool(timed["new"][1]) and timed["new"][1] == timed["old"][1]
            row["failed"] = [name for name in ("new", "old") if not timed[name][1]]
            rows.append(row)
            if args.json != "-":
                print(f"{task_id}: new {row['new_s']} s, old {row['old_s']} s, same top {row['same_top']}", flush=True)
    finally:
        if server is not None:
            subprocess.run([sys.executable, "-m", "assistant", "serve", "--stop", "--model", args.model])
            server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    kept = [row for row in rows if not row["failed"]]  # a failed request's time is not a request's time
    new, old = [row["new_s"] for row in kept], [row["old_s"] for row in kept]
    report = {
        "model": args.model,
        "old": str(args.old),
        "new_env": extra,
        "stubs": len(rows),
        "server_startup_s": round(startup, 1),
        "new": latency._summary(new),
        "old_tree": latency._summary(old),
        "new_minus_old_s": _paired(new, old, [row["new_first"] for row in kept]),
        "failed": len(rows) - len(kept),
        "same_top": sum(row["same_top"] for row in rows),
        "rows": rows,
    }
    if latency._json_alone(report, args.json):
        return
    mean, low, high = report["new_minus_old_s"]
    print(f"\n{args.model}, {len(rows)} stubs, -n 5, warm; server start-up {report['server_startup_s']} s (once)")
    print(f"new: p50 {report['new']['p50']} s, p90 {report['new']['p90']} s")
    print(f"old: p50 {report['old_tree']['p50']} s, p90 {report['old_tree']['p90']} s")
    print(f"new − old: {mean:+.2f} s [{low:+.2f}, {high:+.2f}] (balanced for order, 95% bootstrap)")
    print(f"same top candidate: {report['same_top']} of {len(rows)}")
    if report["failed"]:
        print(f"left out: {report['failed']} stubs where a request failed (exit status not 0)")


if __name__ == "__main__":
    main()
