"""The attention cache's precision on whole stub requests: u8 (OpenVINO's CPU default) against f16, side by side.

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
    from assistant.backends.models import DEFAULT_GENERATOR
    from assistant.backends.ov import OpenVINOBackend
    from assistant.pipeline.pipeline import load_encoder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR, help="the model (default: assist's default)")
    parser.add_argument("--stubs", type=int, default=20, help="how many stubs (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help="print one JSON object; given OUT, also")
    args = parser.parse_args()
    latency, versus = _neighbours()
    began = time.perf_counter()
    engines = {p: OpenVINOBackend.load(args.model, attention_cache=p) for p in PRECISIONS}
    encoder = load_encoder()
    seconds: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    same, rows = 0, []
    with tempfile.TemporaryDirectory(prefix="assist-kv-") as folder:
        stubs = latency._stub_repos(latency._task_ids(args.stubs), Path(folder))
        if args.json != "-":
            print(f"engines, encoder and stubs ready in {time.perf_counter() - began:.1f} s", flush=True)
        for number, (task_id, repo, path, qualname) in enumerate(stubs):
            order = PRECISIONS if number % 2 == 0 else PRECISIONS[::-1]
            tops = {}
            for precision in order:
                took, tops[precision] = _request(engines[precision], encoder, repo, path, qualname, args.seed)
                seconds[precision].append(took)
            same += tops["u8"] == tops["f16"]
            row = {"task": task_id, "first": order[0], **{p: round(seconds[p][-1], 2) for p in PRECISIONS}}
            rows.append(row)
            if args.json != "-":
                print(f"{task_id}: u8 {row['u8']:.1f} s, f16 {row['f16']:.1f} s (first: {order[0]})", flush=True)
    f16_first = [row["first"] == "f16" for row in rows]
    report = {
        "model": args.model,
        "stubs": rows,
        "p50": {p: round(statistics.median(seconds[p]), 1) for p in PRECISIONS},
        "f16_minus_u8": versus._paired(seconds["f16"], seconds["u8"], f16_first),
        "same_top_candidate": same,
    }
    if latency._json_alone(report, args.json):
        return
    difference = report["f16_minus_u8"]
    print(f"p50: u8 {report['p50']['u8']} s, f16 {report['p50']['f16']} s")
    print(f"f16 - u8: {difference[0]:+.2f} s a request [{difference[1]:+.2f}, {difference[2]:+.2f}] (95%)")
    print(f"same top candidate: {same} of {len(rows)}")


if __name__ == "__main__":
    main()
