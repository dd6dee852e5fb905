"""The file's own docstrings as exemplars: `assist docstring`'s exemplars from the target's file first, against
today's BM25 over the pool, on the held-out standard-library functions of `assist eval docstring`.

    .venv/bin/python benchmarks/docstring_own_file.py [--out results/docstring-own-file] [--limit 200] [--k 2]
        [--model qwen2.5-coder-1.5b]

Two arms, each k exemplars by code tokens (BM25): `bm25` from the pool (the other modules' functions, as `assist
eval docstring` has it), and `own-file` from the documented functions of the target's own file (the target left
out), the rest from the pool where the file has fewer. Prints the metrics of both, the paired difference (sentence
BLEU-4 and ROUGE-L, own-file − bm25, 95% bootstrap) and how many targets had exemplars of their own file. Cached and
resumable (`docstrings.jsonl` in --out); `assist eval report OUT` re-scores the kept `docstring-records.jsonl`.
Plan: `results/docstring-own-file/plan.md`.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
from collections import defaultdict
from pathlib import Path

from assistant.backends import load_backend
from assistant.code.examples import Example
from assistant.core.docwriter import ExemplarIndex
from assistant.evaluate.docstring_eval import (
    _functions,
    docstring_table,
    load_docstring_task,
    paired_rows,
    paired_table,
    run_and_keep,
    split_modules,
    stdlib_dir,
    summarize_docstrings,
)

OUT = Path(__file__).resolve().parent.parent / "results" / "docstring-own-file"


class OwnFileFirst:
    """Exemplars from the target's own file first (its documented functions, the target left out), then from the
    pool: what `search(code, k)` returns for a test item, found by its code."""

    def __init__(self, pool: ExemplarIndex, files: dict[str, list[Example]], owner: dict[str, tuple[str, str]]):
        self.pool = pool
        self.indexes = {path: ExemplarIndex(examples) for path, examples in files.items()}
        self.owner = owner  # an item's code → (its file, its name)
        self.had_own: set[str] = set()

    def search(self, code: str, k: int) -> list[Example]:
        path, name = self.owner[code]
        index = self.indexes.get(path)
        own = index.search(code, k, lambda example: example.name == name) if index is not None else []
        if own:
            self.had_own.add(f"{path}:{name}")
        rest = self.pool.search(code, k - len(own)) if len(own) < k else []
        return own + rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    args = parser.parse_args()
    pool, items, _ = load_docstring_task(args.limit, args.seed)
    _, test_modules = split_modules(seed=args.seed)
    files: dict[str, list[Example]] = defaultdict(list)
    for example in _functions(stdlib_dir(), test_modules):
        files[example.path].append(example)
    owner = {item.code: tuple(item.item_id.rsplit(":", 1)) for item in items}
    bm25 = ExemplarIndex(pool)
    own_file = OwnFileFirst(bm25, files, owner)  # type: ignore[arg-type]
    backend = load_backend("local-ov", args.model)
    config = {"k": args.k, "seed": args.seed, "model": args.model, "strategies": ["bm25", "own-file"],
              "limit": args.limit}  # fmt: skip
    records = run_and_keep(items, {"bm25": bm25, "own-file": own_file}, backend, args.out, args.k, config)
    print(f"\n{len(items)} functions, k = {args.k}, {args.model}; own-file exemplars for {len(own_file.had_own)}")
    print(docstring_table(summarize_docstrings(records)))
    print("\nPaired by function, own-file − bm25 (95% bootstrap):\n")
    print(paired_table(paired_rows(records, baseline="bm25")))


if __name__ == "__main__":
    main()
