"""Does starting a warm model server by default pay? Two `assist generate` commands in a row, each a fresh process,
with `local.warm = "off"` (both load the model) against `local.warm = "start"` (the first starts a server in the
background and waits for it, the second finds it running), and whether their JSON outputs agree (timings aside).

    python benchmarks/warm_server.py [--model qwen2.5-coder-0.5b] [--rounds 2] [--n 5]

Prints each command's wall time and the mean per mode; the servers it starts are stopped at the end. The warm
folder is a temporary one (XDG_RUNTIME_DIR), so a server the user runs is neither used nor stopped.
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
from typing import Any

REQUIREMENT = "a function that returns the n-th Fibonacci number, iteratively"


def run(model: str, n: int, warm: str, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """One `assist generate --json` in a fresh process: its wall time and its output."""
    command = [sys.executable, "-m", "assistant", "generate", REQUIREMENT, "--model", model, "-n", str(n)]
    command += ["--seed", "7", "--ranker", "first", "--json"]
    started = time.perf_counter()
    env = {**env, "ASSIST_LOCAL_WARM": warm}
    done = subprocess.run(command, env=env, cwd=env["XDG_RUNTIME_DIR"], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"generate failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed, json.loads(done.stdout)


def without_timings(value: Any) -> Any:
    """The output with what differs run to run (timings, usage seconds) left out."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("timings_s", "seconds")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def stop_servers(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "assistant", "serve", "--stop"], env=env, capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=5)
    args = parser.parse_args()
    runtime = Path(tempfile.mkdtemp(prefix="assist-warm-bench-"))
    runtime.chmod(0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    times: dict[str, list[float]] = {"off 1st": [], "off 2nd": [], "start 1st": [], "start 2nd (warm)": []}
    outputs = []
    try:
        for round_ in range(args.rounds):
            for mode in ("off", "start"):
                stop_servers(env)
                first, out1 = run(args.model, args.n, mode, env)
                second, out2 = run(args.model, args.n, mode if mode == "off" else "auto", env)
                label2 = "off 2nd" if mode == "off" else "start 2nd (warm)"
                times[f"{mode} 1st"].append(first)
                times[label2].append(second)
                outputs += [without_timings(out1), without_timings(out2)]
                print(f"round {round_ + 1} {mode}: 1st {first:.1f} s, 2nd {second:.1f} s", flush=True)
    finally:
        stop_servers(env)
    for label, values in times.items():
        print(f"{label:18} mean {statistics.mean(values):6.1f} s  ({', '.join(f'{v:.1f}' for v in values)})")
    pair_off = statistics.mean(a + b for a, b in zip(times["off 1st"], times["off 2nd"], strict=True))
    pair_start = statistics.mean(a + b for a, b in zip(times["start 1st"], times["start 2nd (warm)"], strict=True))
    print(f"two commands: off {pair_off:.1f} s, start {pair_start:.1f} s")
    print(f"outputs identical across modes (timings aside): {all(o == outputs[0] for o in outputs)}")


if __name__ == "__main__":
    main()
