"""Time to the first visible token (issue 69, item 1): seconds from a `--function` request's start to the first text
a terminal would show (the first streamed token of the first candidate), cold and then warm, per model.

    python benchmarks/first_token.py [--model qwen2.5-coder-0.5b --model qwen2.5-coder-1.5b] [--server] [--json [OUT]]

Each model runs in a fresh process (cold: the model is loaded inside the request, as `assist generate` does
without a server: `local.warm` is off, so no warm server is used or started). With `--server` the requests go to a
warm server of the model that is already running (`assist serve --model M`; `local.warm = auto`), which relays the
streamed row. In it, a scratch folder holds one module with a documented stub; the request fills it through
the library's pipeline (`Pipeline.generate`, the default engine, n = 5, -k 0 so no index or encoder is involved,
ranked by log-probability) inside a `streaming` block, as the CLI's live display listens. The file's other stub is
then filled in the same process (warm: the model is loaded; the prefix cache holds the part of the prompt the two
share, as a running server's would). Per model: cold first token, cold whole request, warm first token, warm
whole request. Nothing is asserted; run it on an idle
machine for figures to compare (the goal: warm first token <= 2 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
JSON_HELP = "print the figures as JSON; given OUT, print as usual and write the JSON to OUT"
STUB = '''"""Small statistics helpers."""


def mean_of(values: list[float]) -> float:
    """Return the arithmetic mean of `values`; raise ValueError when the list is empty."""
    ...


def median_of(values: list[float]) -> float:
    """Return the median of `values` (the mean of the two middle ones for an even count); ValueError when empty."""
    ...
'''


def _timed_request(pipeline: object, path: Path, function: str) -> tuple[float | None, float]:
    """(seconds to the first streamed text, seconds to the whole result) of one `--function` request."""
    from assistant.backends import streaming
    from assistant.pipeline.pipeline import Request

    first: list[float] = []
    started = time.perf_counter()

    def heard(call: int, text: str) -> None:
        if call == 0 and not first:
            first.append(time.perf_counter() - started)

    with streaming(heard):
        pipeline.generate(Request(file=path, function=function))  # type: ignore[attr-defined]
    return (first[0] if first else None), time.perf_counter() - started


def measure(model: str, server: bool = False) -> dict[str, object]:
    """The figures for one model, measured in this process (call it in a fresh one for a cold start); `server`: through
    a running warm server, else in-process."""
    os.environ["ASSIST_MODEL"] = model
    os.environ["ASSIST_LOCAL_WARM"] = "auto" if server else "off"
    from assistant.pipeline.options import GenerationOptions
    from assistant.pipeline.pipeline import Pipeline

    with tempfile.TemporaryDirectory(prefix="first-token-") as folder:
        path = Path(folder) / "stats.py"
        path.write_text(STUB, encoding="utf-8")
        pipeline = Pipeline(GenerationOptions(n=5, k=0, ranker="logprob", seed=0), start=folder)
        cold_first, cold_total = _timed_request(pipeline, path, "mean_of")
        warm_first, warm_total = _timed_request(pipeline, path, "median_of")
    return {
        "model": model,
        "where": "warm server" if server else "in-process",
        "cold_first_token_s": None if cold_first is None else round(cold_first, 2),
        "cold_request_s": round(cold_total, 2),
        "warm_first_token_s": None if warm_first is None else round(warm_first, 2),
        "warm_request_s": round(warm_total, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help=f"a registered generator (default: {', '.join(MODELS)})")
    parser.add_argument("--server", action="store_true", help="through a running `assist serve` of each model")
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help=JSON_HELP)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # measure this model here and print its JSON
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.server)))
        return 0
    rows = []
    for model in args.model or MODELS:
        child = subprocess.run(
            [sys.executable, __file__, "--child", model, *(["--server"] if args.server else [])],
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            print(f"error: {model}: {(child.stderr.strip().splitlines() or ['failed'])[-1]}", file=sys.stderr)
            return 1
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    if args.json == "-":
        print(json.dumps(rows, indent=2))
        return 0
    if args.json:
        from assistant.paths import atomic_write_text

        atomic_write_text(Path(args.json), json.dumps(rows, indent=2) + "\n")
    print("| model | where | first request: first token s | request s | second: first token s | request s |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['model']} | {row['where']} | {row['cold_first_token_s']} | {row['cold_request_s']} | "
            f"{row['warm_first_token_s']} | {row['warm_request_s']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
