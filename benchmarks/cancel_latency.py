"""Cancel latency (issue 69, item 5): seconds from Escape in the TUI, and from Ctrl-C in the CLI, to the work's end.

    python benchmarks/cancel_latency.py [--runs 5] [--json [OUT]]

No model: the TUI runs under Textual's Pilot on the tests' scripted backend, slowed to a model's pace (it reports
its progress 20 times a second and would take 60 s to finish); the CLI is `assist generate` in a subprocess against
a 127.0.0.1 server that holds every request 30 s (tests/openai_server.py), sent SIGINT on its process group as a
terminal does, and so is `assist eval docstring` (zero-shot, 2 functions) against the same kind of server. Escape
is timed until the job's worker thread has ended (the screen's `busy` clears); SIGINT until the process has exited,
and whether any process of its group was left. Goal: under 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSON_HELP = "print one JSON object; given OUT, print as usual and write the JSON object to OUT"


def _escape_once(folder: Path) -> float:
    from assistant.ui.session import Options, Session
    from assistant.ui.tui import AssistApp
    from tests.conftest import ScriptedBackend
    from tests.test_tui_use import cancel_latency

    backend = ScriptedBackend(["def solution():\n    return 42"], delay=0.05, steps=400, tokens=5, scores=False)
    session = Session(folder, options=Options(n=3, k=0, ranker="first"), backend=backend)
    app = AssistApp(session)

    async def run() -> float:
        async with app.run_test(size=(100, 32)) as pilot:
            seconds = await cancel_latency(app, pilot)
            if app.screen.status.message != "Generating cancelled":
                raise SystemExit(f"the status says {app.screen.status.message!r}, not that the job was cancelled")
        return seconds

    return asyncio.run(run())


def _sigint_once(folder: Path) -> tuple[float, int, bool]:
    from tests.openai_server import Script, openai_server
    from tests.test_cancel import sigint_latency

    with openai_server(Script(delay_s=30.0)) as (url, script):
        return sigint_latency(folder, url, script)


def _sigint_eval_once(folder: Path) -> tuple[float, int, bool]:
    from tests.openai_server import Script, openai_server
    from tests.test_cancel import interrupt_when

    env = {**os.environ, "ASSIST_OPENAI_API": "completions"}
    with openai_server(Script(delay_s=30.0)) as (url, script):
        command = ["eval", "docstring", "--strategies", "zero", "--limit", "2", "--backend", "openai"]
        command += ["--model", "tiny-coder", "--base-url", url, "--out", str(folder / "eval-docstring")]
        seconds, status, left = interrupt_when(command, folder, env, lambda: bool(script.requests))
    return seconds, status, bool(left)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each (default 5)")
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help=JSON_HELP)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # the tests' scripted backend and server
    escape, sigint, sigint_eval, statuses, left = [], [], [], set(), 0
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.runs):
            escape.append(_escape_once(Path(folder)))
            for once, times in ((_sigint_once, sigint), (_sigint_eval_once, sigint_eval)):
                seconds, status, outlived = once(Path(folder))
                times.append(seconds)
                statuses.add(status)
                left += outlived
    report = {
        "backend": "scripted (no model): TUI on a slowed scripted backend, CLI against a slow 127.0.0.1 server",
        "runs": args.runs,
        "escape_s": {"p50": statistics.median(escape), "max": max(escape), "all": escape},
        "sigint_s": {"p50": statistics.median(sigint), "max": max(sigint), "all": sigint},
        "sigint_eval_s": {"p50": statistics.median(sigint_eval), "max": max(sigint_eval), "all": sigint_eval},
        "sigint_exit_status": sorted(statuses),
        "processes_left": left,
    }
    if args.json == "-":
        print(json.dumps(report, indent=1))
        return
    if args.json:
        from assistant.paths import atomic_write_text

        atomic_write_text(Path(args.json), json.dumps(report, indent=1) + "\n")
    print(f"backend: {report['backend']}; {args.runs} runs each")
    print(f"Escape (TUI, Pilot): p50 {report['escape_s']['p50']:.3f} s, max {report['escape_s']['max']:.3f} s")
    print(f"SIGINT (CLI generate): p50 {report['sigint_s']['p50']:.3f} s, max {report['sigint_s']['max']:.3f} s")
    eval_s = report["sigint_eval_s"]
    print(f"SIGINT (CLI eval docstring): p50 {eval_s['p50']:.3f} s, max {eval_s['max']:.3f} s")
    print(f"exit status {report['sigint_exit_status']}; processes left after exit: {left}")


if __name__ == "__main__":
    main()
