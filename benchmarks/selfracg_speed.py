"""SelfRACG's costs on this machine: encoding fragments with the INE, one query's retrieval over a 16,000-fragment
index, and one stage-1 training step.

Fragments are the 20-line windows of assist's own Python files (`assistant/`), repeated to fill the index. For
each precision it prints: candidate encoding in fragments/s and tokens/s (the frozen forward, stopped after the
last layer used, plus the branch); one query's latency (a 192-token query through the INE, then inner product
over the index with numpy and with faiss) as the median of `--queries` runs; and the seconds of one training step
(batch 16: two frozen forwards and the branch's backward). It asserts nothing. Run from the repo root:

    .venv/bin/python benchmarks/selfracg_speed.py [--fragments 64] [--queries 10] [--layers 24]
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import statistics
import time
from pathlib import Path

import faiss
import numpy as np

from assistant.backends.local import LocalBackend, cpu_has_native_bf16
from assistant.indexing.fragments import split_fragments
from assistant.methods.selfracg import InformationNeed, SelfRacgConfig, fragment_pairs, train_stage1

INDEX_SIZE = 16_000


def fragments() -> list:
    found = []
    for path in sorted(Path("assistant").rglob("*.py")):
        found += split_fragments(path.read_text(encoding="utf-8"), str(path), "")
    return [f for f in found if f.code.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=64, help="fragments encoded for the throughput figure")
    parser.add_argument("--queries", type=int, default=10, help="queries timed")
    parser.add_argument("--layers", type=int, default=None, help="the first N layers only (default all)")
    parser.add_argument("--skip-fp32", action="store_true", help="only the default precision")
    args = parser.parse_args()

    pool = fragments()
    texts = [f.code for f in pool[: args.fragments]]
    precisions = ["bf16"] if cpu_has_native_bf16() else []
    if not args.skip_fp32 or not precisions:
        precisions.append("fp32")
    print(
        f"{len(pool)} fragments of assistant/; {args.fragments} encoded; index of {INDEX_SIZE:,}; "
        f"{os.cpu_count()} cores"
    )
    print(
        "| precision | layers | encode fragments/s | encode tokens/s | query INE ms | MIPS numpy ms | MIPS faiss ms "
        "| train step s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for precision in precisions:
        backend = LocalBackend.load(precision=precision)
        config = SelfRacgConfig(layers=args.layers)
        ine = InformationNeed(backend.lm, backend.tokenizer, config)
        tokens = sum(int(ine.tokens([t], candidate=True)[1].sum()) for t in texts)
        ine.encode(texts[:4], candidate=True)  # warm-up
        started = time.perf_counter()
        vectors = ine.encode(texts, candidate=True)
        encode_s = time.perf_counter() - started
        index = np.tile(vectors, (INDEX_SIZE // len(vectors) + 1, 1))[:INDEX_SIZE].astype("float32")
        flat = faiss.IndexFlatIP(index.shape[1])
        flat.add(index)
        queries = [f.code for f in pool[args.fragments : args.fragments + args.queries]]
        ine_ms, numpy_ms, faiss_ms = [], [], []
        for query in queries:
            started = time.perf_counter()
            vector = ine.encode([query], candidate=False)
            ine_ms.append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            np.argsort(-(index @ vector[0]))[:10]
            numpy_ms.append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            flat.search(vector, 10)
            faiss_ms.append(1000 * (time.perf_counter() - started))
        pairs = fragment_pairs(pool, 16, seed=0)
        step = train_stage1(InformationNeed(backend.lm, backend.tokenizer, config), pairs)
        print(
            f"| {precision} | {ine.n_layers} | {len(texts) / encode_s:.2f} | {tokens / encode_s:.0f} | "
            f"{statistics.median(ine_ms):.0f} | {statistics.median(numpy_ms):.1f} | "
            f"{statistics.median(faiss_ms):.1f} | "
            f"{step['seconds']:.1f} |"
        )


if __name__ == "__main__":
    main()
