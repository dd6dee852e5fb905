"""The OpenVINO engine's weights on whole stub requests: int8 (today's) against int4, side by side.

    python benchmarks/weight_bits.py [--model qwen2.5-coder-1.5b] [--stubs 20] [--seed 0] [--json [OUT]]

The stubs of `benchmarks/stub_latency.py` (each stubbed file alone in a fresh git repo; prepared by `assist eval
repo`, so run one of those first). One process holds two engines of the model, one with int8 weights and one with
int4 (`assistant.backends.ov_convert --int4`; converted on first use), and runs the whole request as `assist generate
--file F --function NAME -n 5 --seed S` does (retrieval, sampling, the default ranking) through each, taking turns
per stub with the order alternating, as `benchmarks/attention_cache.py` does for the attention cache's precision.
Prints each stub's seconds, the p50s, the paired difference int4 − int8 (balanced for order, 95% bootstrap) and on
how many stubs the top candidate is the same. The plan it serves: `results/speed-int4/plan.md`. Run it on an
otherwise idle machine: the figures are wall times.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import sys
import time
from pathlib import Path

WEIGHTS = ("int8", "int4")


def main() -> None:
    from assistant.backends.models import DEFAULT_GENERATOR
    from assistant.backends.ov import OpenVINOBackend

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR, help="the model (default: assist's default)")
    parser.add_argument("--stubs", type=int, default=20, help="how many stubs (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", nargs="?", const="-", metavar="OUT", help="print one JSON object; given OUT, also")
    args = parser.parse_args()
    began = time.perf_counter()
    engines = {weights: OpenVINOBackend.load(args.model, weights=weights) for weights in WEIGHTS}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import attention_cache

    attention_cache.side_by_side(engines, args, began)


if __name__ == "__main__":
    main()
