"""What agree's test-writing call costs a stub request (issue 69), made after sampling or decoded beside it.

    python benchmarks/agree_cost.py [--model qwen2.5-coder-1.5b] [--stubs 10] [--seed 0] [--warm] [--json [OUT]]

`assist generate --function NAME -n 5 --json` runs on the stubs of `benchmarks/stub_latency.py` (its helpers pick
them: function tasks of the repository benchmark, each stubbed file alone in a fresh git repo, so the default
ranking without tests applies: agree, then log-probability), each twice in a fresh process: with
`ASSIST_AGREE_BATCH=off` (the test-writing call is made in the rank stage, after sampling) and on (it is decoded
in the sampling call, beside the samples). The order alternates from stub to stub, so drift in the machine's load
falls on both. With `--warm` an `assist serve` of the model runs (started once, its start-up reported apart) and
both go through it; without, each process loads the model (`ASSIST_LOCAL_WARM=off`).

Per request it prints the wall time, `timings_s` (generate, rank) and the test call's cost: off, the backend's
seconds beyond the sampling stage (`usage.seconds - timings_s.generate`: the rank stage's model call); on, the
sampling stage's increase over the same stub's off run. Then p50 and p90 of each, and whether the tests agree wrote
were identical both ways (read from the process: `--json` does not show them) and the outputs too (timings and
backend seconds aside). It asserts nothing; run it on an otherwise idle machine, the figures are wall times.

Why agree's pass@1 on the committed HumanEval/MBPP candidates cannot move: those folders are `eval codegen`'s,
which samples and writes tests through its own caches (`agree-tests.jsonl`, keyed by `tests_request`), not
through a stub's sampling call, so none of their records changes. And agree's ranking is a function of the
candidates, the tests and the sandbox's verdicts alone: where the samples and the written tests are byte-identical
(what this script checks on the stubs, and `tests/test_agree_batched.py` with the real engine), every cluster and
score is too. Were the tests not identical, the way to re-score is the replay of `benchmarks/agree_tokens.py`:
put the batched call's completions in a copy of the folder's `agree-tests.jsonl` under the same keys and rank the
recorded candidates again from that cache (no model runs), then compare top-1 pass rates with a paired interval.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"

MODES = ("off", "on")


def _latency() -> Any:
    """`benchmarks/stub_latency.py`, the benchmark next door: its helpers pick the stubs and start the server."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import stub_latency

    return stub_latency


def _worker(out: str, argv: list[str]) -> None:
    """Run `assist generate` here (as `python -m assistant` does) and write to `out` the tests agree wrote, which
    its `--json` leaves out (read from the result `Pipeline.generate` returns)."""
    import assistant.pipeline.pipeline as pipeline

    results: list[Any] = []
    generate = pipeline.Pipeline.generate

    def kept(self: Any, request: Any, **options: Any) -> Any:
        result = generate(self, request, **options)
        results.append(result)
        return result

    pipeline.Pipeline.generate = kept  # type: ignore[method-assign]
    sys.argv = ["assist", *argv]
    from assistant.ui.cli import main

    try:
        main()
    finally:
        scores = [r.candidates[0].scores.get("agree") for r in results if r.candidates]
        tests = [None if s is None else s.details.get("tests") for s in scores]
        Path(out).write_text(json.dumps({"tests": tests}), encoding="utf-8")


def _generate(repo: Path, path: str, qualname: str, model: str, seed: int, mode: str, warm: bool) -> dict[str, Any]:
    """One request in a fresh process with agree's batching `mode`: wall seconds, exit code, its JSON and the
    tests agree wrote."""
    env = {**os.environ, "ASSIST_AGREE_BATCH": mode, "ASSIST_LOCAL_WARM": "auto" if warm else "off"}
    env["HF_HUB_OFFLINE"] = "1"
    argv = ["generate", "--file", path, "--function", qualname, "-n", "5", "--seed", str(seed), "--model", model]
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    command = [sys.executable, __file__, "--worker", out, "--", *argv, "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    try:
        tests = json.loads(Path(out).read_text(encoding="utf-8"))["tests"]
    except (OSError, ValueError, KeyError):
        tests = None
    Path(out).unlink(missing_ok=True)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = {}
    return {"wall": wall, "exit": done.returncode, "answer": answer, "tests": tests, "stderr": done.stderr[-400:]}


def _masked(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without what differs from run to run: its timings and the backend's seconds."""
    masked = {k: v for k, v in answer.items() if k != "timings_s"}
    if isinstance(masked.get("usage"), dict):
        masked["usage"] = {k: v for k, v in masked["usage"].items() if k != "seconds"}
    return masked


def _row(task_id: str, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One stub's figures, off and on."""
    row: dict[str, Any] = {"task": task_id, "exit": [runs[m]["exit"] for m in MODES]}
    for mode in MODES:
        answer = runs[mode]["answer"]
        timings = answer.get("timings_s", {})
        row[f"wall_{mode}"] = round(runs[mode]["wall"], 2)
        row[f"generate_{mode}"] = timings.get("generate")
        row[f"rank_{mode}"] = timings.get("rank")
    off = runs["off"]["answer"]
    used = off.get("usage", {}).get("seconds")
    generate_off, generate_on = row["generate_off"], row["generate_on"]
    row["call_off"] = None if used is None or generate_off is None else round(used - generate_off, 2)
    row["call_on"] = None if generate_on is None or generate_off is None else round(generate_on - generate_off, 2)
    row["tests_identical"] = runs["off"]["tests"] == runs["on"]["tests"]
    row["output_identical"] = _masked(runs["off"]["answer"]) == _masked(runs["on"]["answer"])
    row["agree_ran"] = bool(runs["off"]["tests"] and runs["off"]["tests"][0])
    return row


def _summary(values: list[float | None]) -> dict[str, float | None]:
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"p50": None, "p90": None}
    return {"p50": round(statistics.median(known), 2), "p90": round(known[max(0, round(0.9 * len(known)) - 1)], 2)}


FIGURES = ("wall", "generate", "rank", "call")


def _report(args: argparse.Namespace, rows: list[dict[str, Any]], startup: float | None) -> dict[str, Any]:
    summary = {f"{name}_{mode}": _summary([r[f"{name}_{mode}"] for r in rows]) for name in FIGURES for mode in MODES}
    return {
        "model": args.model,
        "stubs": len(rows),
        "warm": args.warm,
        "server_startup_s": None if startup is None else round(startup, 1),
        "summary": summary,
        "tests_identical": sum(r["tests_identical"] for r in rows),
        "output_identical": sum(r["output_identical"] for r in rows),
        "rows": rows,
    }


def _print_row(row: dict[str, Any]) -> None:
    figures = ", ".join(f"{name} {row[f'{name}_off']} / {row[f'{name}_on']}" for name in FIGURES)
    tests = "same" if row["tests_identical"] else "DIFFER"
    output = "same" if row["output_identical"] else "DIFFERS"
    ran = f"agree ran {row['agree_ran']} (exit {row['exit']})"
    print(f"{row['task']}: off / on (s): {figures}; tests {tests}, output {output}; {ran}", flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[4:])
        return
    from assistant.backends.models import DEFAULT_GENERATOR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR, help="the model (default: assist's default)")
    parser.add_argument("--stubs", type=int, default=10, help="how many stubs (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warm", action="store_true", help="both through one running warm server")
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="assist-agree-cost-"))
    rows: list[dict[str, Any]] = []
    server, startup = None, None
    latency = _latency()
    try:
        if args.warm:
            server, startup = latency._serve(args.model)
        stubs = latency._stub_repos(latency._task_ids(args.stubs), folder)
        for number, (task_id, repo, path, qualname) in enumerate(stubs):
            runs = {}
            for mode in MODES if number % 2 == 0 else MODES[::-1]:
                runs[mode] = _generate(repo, path, qualname, args.model, args.seed, mode, args.warm)
                if runs[mode]["exit"] != 0:
                    print(f"{task_id} ({mode}) failed: {runs[mode]['stderr']}", file=sys.stderr)
            rows.append(_row(task_id, runs))
            if args.json != "-":
                _print_row(rows[-1])
    finally:
        if server is not None:
            subprocess.run([sys.executable, "-m", "assistant", "serve", "--stop", "--model", args.model])
            server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    report = _report(args, rows, startup)
    if args.json == "-":
        print(json.dumps(report, indent=1))
        return
    if args.json:
        from assistant.paths import atomic_write_text

        atomic_write_text(Path(args.json), json.dumps(report, indent=1) + "\n")
    kind = "warm server" if args.warm else "a fresh process each (cold)"
    print(f"\n{args.model}, {len(rows)} stubs, -n 5, {kind}; off = call after sampling, on = decoded beside it")
    for name in FIGURES:
        off, on = report["summary"][f"{name}_off"], report["summary"][f"{name}_on"]
        print(f"{name}: off p50 {off['p50']} s, p90 {off['p90']} s; on p50 {on['p50']} s, p90 {on['p90']} s")
    tests, output, count = report["tests_identical"], report["output_identical"], len(rows)
    print(f"tests identical {tests}/{count}, outputs identical {output}/{count}")


if __name__ == "__main__":
    main()
