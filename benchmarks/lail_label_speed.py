"""LAIL labeling speed of the local backend in fp32 and in bf16, and of the OpenVINO int8 engine, and how far
apart their labels are.

Scores the same (demonstration, example) pairs of MBPP's train split both ways, the way `assist train
retriever --method lail` does (one demonstration's prefix shared by many examples), and prints pairs/minute
for each precision, the gap between their mean log-probabilities, and how often the two agree on which of
two demonstrations helps an example more. bf16 only pays where the CPU does it natively (AVX512-BF16, AMX);
elsewhere torch emulates it and it is slower. The OpenVINO engine has no shared-prefix scoring: it scores
every pair whole, all of them handed over at once (`--skip-openvino` leaves it out). It asserts nothing. Run
from the repo root:

    .venv/bin/python benchmarks/lail_label_speed.py [--demos 2] [--examples 24]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import time

import numpy as np
import torch

from assistant.backends.local import LocalBackend, cpu_has_native_bf16
from assistant.backends.prompts import build_prompt
from assistant.datasets import MBPP_DEFAULT_PATH, DatasetSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mbpp", default=MBPP_DEFAULT_PATH, help="MBPP's JSONL file")
    parser.add_argument("--demos", type=int, default=2, help="demonstrations (train tasks 0, 1, ...)")
    parser.add_argument("--examples", type=int, default=24, help="examples scored after each (tasks 10, 11, ...)")
    parser.add_argument("--skip-openvino", action="store_true", help="only the transformers engine")
    args = parser.parse_args()

    backend = LocalBackend.load()
    examples = [task.as_example() for task in DatasetSpec("mbpp", args.mbpp).load("train")]
    demos, users = list(range(args.demos)), list(range(10, 10 + args.examples))

    def label(rows: list[int]) -> list[float]:
        scores = []
        for q in rows:
            pairs = [(build_prompt(examples[i].requirement, [examples[q]]), examples[i].code) for i in users]
            scores += [r.mean for r in backend.logprob_shared(pairs, shared_messages=3)]
        return scores

    print(f"{torch.get_num_threads()} threads; native bf16: {cpu_has_native_bf16()}")
    results = {}
    for precision in ("fp32", "bf16"):
        if precision == "bf16":
            backend.lm = backend.lm.to(torch.bfloat16)
        label([args.demos + 3])  # warm-up: a demonstration not timed below
        started = time.perf_counter()
        results[precision] = np.array(label(demos))
        seconds = time.perf_counter() - started
        pairs = len(results[precision])
        print(f"{precision}: {pairs} pairs in {seconds:.1f} s = {60 * pairs / seconds:.0f} pairs/min")
    if not args.skip_openvino:
        from assistant.backends.ov import OpenVINOBackend

        del backend  # one model in memory at a time
        engine = OpenVINOBackend.load()

        def label_whole(rows: list[int]) -> list[float]:
            pairs = [
                (build_prompt(examples[i].requirement, [examples[q]]), examples[i].code) for q in rows for i in users
            ]
            return [r.mean for r in engine.logprob(pairs)]

        label_whole([args.demos + 3])
        started = time.perf_counter()
        results["openvino int8"] = np.array(label_whole(demos))
        seconds = time.perf_counter() - started
        pairs = len(results["openvino int8"])
        print(f"openvino int8: {pairs} pairs in {seconds:.1f} s = {60 * pairs / seconds:.0f} pairs/min")
    n = len(users)
    for other in [name for name in results if name != "fp32"]:
        gap = np.abs(results["fp32"] - results[other])
        print(f"|fp32 - {other}| mean log-prob: mean {gap.mean():.4f}, max {gap.max():.4f}")
        if args.demos >= 2:
            a, b = results["fp32"], results[other]
            agree = np.mean([(a[i] > a[i + n]) == (b[i] > b[i + n]) for i in range(n)])
            print(f"  same choice between demonstrations 0 and 1 as fp32: {agree:.0%} of {n} examples")


if __name__ == "__main__":
    main()
