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

import sys
from pathlib import Path

WEIGHTS = ("int8", "int4")


def main() -> None:
    from assistant.backends.ov import OpenVINOBackend

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import attention_cache

    attention_cache.versus_main(__doc__, lambda model: {w: OpenVINOBackend.load(model, weights=w) for w in WEIGHTS})


if __name__ == "__main__":
    main()
