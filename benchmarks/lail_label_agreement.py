"""How far apart two LAIL label caches of the same pool are: fp32 against bf16, or one labeler against another.

Reads two `labels.jsonl` files (no model runs), recomputes each task's t BM25 candidates over MBPP's train
split, and prints the gap between the two labels of each pair, the per-task Spearman correlation, and how
often both pick the same best candidate and the same positives. It asserts nothing. From the repo root:

    .venv/bin/python benchmarks/lail_label_agreement.py \\
        results/lail-mbpp-train-labels-t16/labels.jsonl qwen2.5-coder-0.5b \\
        results/lail-mbpp-train-labels-bf16-t16/labels.jsonl qwen2.5-coder-0.5b@bf16 [--candidates 16]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse

import numpy as np
from scipy.stats import spearmanr

from assistant.backends.encoder import Encoder
from assistant.cache import JsonlCache, cache_key
from assistant.datasets import MBPP_DEFAULT_PATH, DatasetSpec
from assistant.indexing.index import build_index
from assistant.methods.lail import candidate_sets, text_hash


def _cache(path: str) -> JsonlCache:
    """A label cache, plain or gzip-compressed (JsonlCache reads `x.jsonl.gz` when given `x.jsonl`)."""
    return JsonlCache(path.removesuffix(".gz"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", help="a labels.jsonl (or labels.jsonl.gz, as results/ keeps them)")
    parser.add_argument("first_labeler", help="its labeler as keys name it, e.g. qwen2.5-coder-0.5b")
    parser.add_argument("second")
    parser.add_argument("second_labeler", help="e.g. qwen2.5-coder-0.5b@bf16")
    parser.add_argument("--candidates", type=int, default=16, help="t: candidates per task both caches hold")
    parser.add_argument("--positives", type=int, default=2, help="z: the top-z compared as sets")
    parser.add_argument("--mbpp", default=MBPP_DEFAULT_PATH, help="MBPP's JSONL file")
    args = parser.parse_args()

    examples = [task.as_example() for task in DatasetSpec("mbpp", args.mbpp).load("train")]
    index = build_index(examples, Encoder.load())
    hashes = [text_hash(e) for e in index.examples]
    caches = [(_cache(args.first), args.first_labeler), (_cache(args.second), args.second_labeler)]
    gaps: list[float] = []
    rhos, same_best, same_top = [], 0, 0
    sets = candidate_sets(index, args.candidates)

    def label(cache: JsonlCache, labeler: str, q: int, i: int) -> float | None:
        return cache.get(cache_key(kind="lail-label", labeler=labeler, demo=hashes[q], example=hashes[i]))

    for i, chosen in enumerate(sets):
        a, b = (np.array([label(cache, who, q, i) for q in chosen], dtype="float64") for cache, who in caches)
        if np.isnan(a).any() or np.isnan(b).any():
            raise SystemExit(f"task {i} lacks labels in one cache: check the labeler names and --candidates")
        gaps += list(np.abs(a - b))
        rhos.append(spearmanr(a, b).correlation)
        same_best += int(np.argmax(a) == np.argmax(b))
        same_top += int(set(np.argsort(-a)[: args.positives]) == set(np.argsort(-b)[: args.positives]))
    n = len(sets)
    print(f"tasks {n}, pairs {len(gaps)}: |first - second| mean {np.mean(gaps):.4f}, "
          f"p95 {np.quantile(gaps, 0.95):.4f}, max {np.max(gaps):.4f}")  # fmt: skip
    print(f"per-task Spearman: median {np.median(rhos):.3f}, mean {np.nanmean(rhos):.3f}")
    print(f"same best candidate: {same_best}/{n}; same top-{args.positives} (positives): {same_top}/{n}")


if __name__ == "__main__":
    main()
