"""The attention cache's precision on whole stub requests: u8 (OpenVINO's CPU default) against f16 (assist's since
2026-12-08), side by side.

    python benchmarks/attention_cache.py [--model qwen2.5-coder-1.5b] [--stubs 20] [--seed 0] [--json [OUT]]

The stubs of `benchmarks/stub_latency.py` (each stubbed file alone in a fresh git repo; prepared by `assist eval
repo`, so run one of those first). One process holds two engines of the model, one per cache precision, and runs
the whole request as `assist generate --file F --function NAME -n 5 --seed S` does (retrieval, sampling, and the
default ranking: agree, then log-probability) through each, taking turns per stub with the order alternating, so
drift in the machine's load falls on both. Each engine reads each prompt once; they share nothing but the encoder.
Prints each stub's seconds, p50 of each, the paired difference f16 − u8 (balanced for order, 95% bootstrap) and on
how many stubs the top candidate is the same. The plan it serves: `results/speed-attention-cache/plan.md`. Run it on
an otherwise idle machine: the figures are wall times.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PRECISIONS = ("u8", "f16")


def _neighbours() -> tuple[Any, Any]:
    """`stub_latency` (the stubs) and `warm_versus` (the paired difference), the benchmarks next door."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import stub_latency
    import warm_versus

    return stub_latency, warm_versus


def _request(engine: Any, encoder: Any, repo: Path, path: str, qualname: str, seed: int) -> tuple[float, str]:
    """Seconds of one whole stub request through `engine`, and its top candidate's code."""
    from assistant.pipeline.options import GenerationOptions
    from assistant.pipeline.pipeline import Pipeline, Request

    started = time.perf_counter()
    pipeline = Pipeline(start=repo, backend=engine, encoder=encoder)
    pipeline.configure(GenerationOptions.from_settings(pipeline.settings, n=5, seed=seed).check())
    request = Request.resolve(file=repo / path, function=qualname, root=repo, name=path)
    answer = pipeline.answer(request)
    seconds = time.perf_counter() - started
    candidates = answer.result.candidates
    return seconds, candidates[0].candidate.code if candidates else ""


def main() -> None:
    from assistant.backends.ov import OpenVINOBackend

    versus_main(__doc__, lambda model: {p: OpenVINOBackend.load(model, attention_cache=p) for p in PRECISIONS})


def versus_main(doc: str, engines: Callable[[str], dict[str, Any]]) -> None:
    """The command line of a side-by-side benchmark (`doc` its help): `engines(model)` loads the two engines,
    named, and :func:`side_by_side` runs them."""
    from assistant.backends.models import DEFAULT_GENERATOR

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR, help="the model (default: assist's default)")
    parser.add_argument("--stubs", type=int, default=20, help="how many stubs (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help="print one JSON object; given OUT, also")
    args = parser.parse_args()
    began = time.perf_counter()
    side_by_side(engines(args.model), args, began)


def side_by_side(engines: dict[str, Any], args: argparse.Namespace, began: float) -> None:
    """Run the stubs through two engines of one model in turns (the order alternating), and print or write the
    report: each stub's seconds, the p50s, the paired difference second − first and how often the top candidate is
    the same. `args` holds the command line's model, stubs, seed and json."""
    from assistant.pipeline.pipeline import load_encoder

    latency, versus = _neighbours()
    first, second = names = tuple(engines)
    encoder = load_encoder()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    same, rows = 0, []
    with tempfile.TemporaryDirectory(prefix="assist-versus-") as folder:
        stubs = latency._stub_repos(latency._task_ids(args.stubs), Path(folder))
        if args.json != "-":
            print(f"engines, encoder and stubs ready in {time.perf_counter() - began:.1f} s", flush=True)
        for number, (task_id, repo, path, qualname) in enumerate(stubs):
            order = names if number % 2 == 0 else names[::-1]
            tops = {}
            for name in order:
                took, tops[name] = _request(engines[name], encoder, repo, path, qualname, args.seed)
                seconds[name].append(took)
            same += tops[first] == tops[second]
            row = {"task": task_id, "first": order[0], **{name: round(seconds[name][-1], 2) for name in names}}
            rows.append(row)
            if args.json != "-":
                print(
                    f"{task_id}: {first} {row[first]:.1f} s, {second} {row[second]:.1f} s (first: {order[0]})",
                    flush=True,
                )
    difference_key = f"{second}_minus_{first}"
    report = {
        "model": args.model,
        "stubs": rows,
        "p50": {name: round(statistics.median(seconds[name]), 1) for name in names},
        difference_key: versus._paired(seconds[second], seconds[first], [row["first"] == second for row in rows]),
        "same_top_candidate": same,
    }
    if latency._json_alone(report, args.json):
        return
    difference = report[difference_key]
    print(f"p50: {first} {report['p50'][first]} s, {second} {report['p50'][second]} s")
    print(f"{second} - {first}: {difference[0]:+.2f} s a request [{difference[1]:+.2f}, {difference[2]:+.2f}] (95%)")
    print(f"same top candidate: {same} of {len(rows)}")


if __name__ == "__main__":
    main()
