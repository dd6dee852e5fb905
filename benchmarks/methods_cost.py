"""Training time and per-query cost of the five trained methods, by generator, read from the committed runs.

It runs no model: each figure is what a committed folder recorded when it ran (an artifact's training seconds,
each line task's retrieval seconds, each Condor variant's training seconds), so the figures carry that run's machine
and load, as its README says. Per-query cost is the median (and mean) seconds a line task's retrieval took on the
400 line tasks of the four projects (the 0.5B's SelfRACG on its own 200 tasks of two projects): two searches (the
top 10 for the rank, then the demonstrations, each encoding the query) and the prompt; `generate` searches once.
Condor's cost per candidate and JOINTCOM's per function are not in these records:
`benchmarks/discriminator_speed.py` measures the first. It asserts nothing. From the repo root:

    .venv/bin/python benchmarks/methods_cost.py [--results results]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

# (method, generator, what was trained, folder, how to read its seconds)
TRAINING = (
    ("SelfRACG", "1.5B", "stage 1 on the standard library, 768 pairs", "methods-1.5b-selfracg-stdlib", "train"),
    ("SelfRACG", "1.5B", "the first 8 layers: stage 1, as above", "methods-1.5b-selfracg-stdlib-layers8", "train"),
    ("SelfRACG", "1.5B", "no candidate prefix: stage 1, as above", "methods-1.5b-selfracg-stdlib-noprefix", "train"),
    ("SelfRACG", "1.5B", "stage 1, as above; stage 2 on 96 fragments", "methods-1.5b-selfracg-stdlib-stage12", "train"),
    ("SelfRACG", "0.5B", "stage 1 on the standard library, 768 pairs; stage 2", "selfracg-cpu-stdlib-seed0", "train"),
    ("LAIL", "1.5B", "MBPP train: 5,984 labels, then the encoder", "lail-mbpp-train-labels-1.5b", "lail"),
    ("LAIL", "0.5B", "MBPP train: 5,984 labels, then the encoder", "lail-mbpp-train-labels-bf16-t16", "lail"),
    ("JOINTCOM", "1.5B", "120 standard-library functions, k = 4, 2 epochs", "docstring-stdlib-1.5b-s0", "jointcom"),
    ("Condor", "1.5B", "on the 1.5B's MBPP train samples", "discriminator-mbpp-ov-1.5b-seed0", "condor"),
    ("Condor", "0.5B", "on the 0.5B's MBPP train samples", "discriminator-mbpp-ov-seed0", "condor"),
)

# What a folder's seconds leave out, where its README says so.
NOTES = {
    "lail-mbpp-train-labels-1.5b": "labels: a resumed run; its seconds are the last 4,209 pairs, the first 1,775 "
    "took 29 min before (README): about 99 min of labelling in all",
    "discriminator-mbpp-ov-1.5b-seed0": "generator backbone: a resumed run; its seconds are the last run's (the "
    "pairs it still had to encode, and 1,997 read back from disk), with the unit tests beside it for 16 minutes",
    "methods-1.5b-retrieval-lail": "run beside other jobs (the suites, timings): slower than on an idle machine",
    "methods-1.5b-selfracg-stdlib-layers8": "a unit-test run beside it for its first 3 minutes, on a day the "
    "machine ran about 1.8 times slower (docs/results/speed.md)",
    "methods-1.5b-selfracg-stdlib-noprefix": "only short checks beside it, but the machine ran about 1.8 times "
    "slower that day (docs/results/speed.md): not comparable with the 1,198",
    "methods-1.5b-selfracg-stdlib-stage12": "trained again on an idle machine (the first training's adapters were "
    "lost with its machine; every loss of both stages came out the same, in 2,520 + 684 s beside other jobs on a "
    "slower day); stage 2 leaves out the 96 continuations the model wrote first, about 6 more minutes",
    "methods-1.5b-retrieval-selfracg-layers8": "the unit suite beside it for 22 of its 38 minutes: slower than on an "
    "idle machine",
    "methods-1.5b-retrieval-selfracg-stage12": "its queries ran alone (the suite and a README check had run "
    "beside its pool encoding), on a fresh machine, not 593.9's: stage 2 leaves the branch's size as it was, so "
    "the difference is the machine's",
    "methods-1.5b-retrieval-selfracg-noprefix": "its queries ran alone (the suites beside its pool encoding had "
    "ended), on a day the machine ran about 1.8 times slower: not comparable with 593.9",
}

# (folder, strategy, label): per-query seconds from line-retrieval records
QUERIES = (
    ("methods-1.5b-retrieval", "bm25", "bm25"),
    ("methods-1.5b-retrieval", "dense", "dense"),
    ("methods-1.5b-retrieval", "hybrid", "hybrid"),
    ("methods-1.5b-retrieval", "tstr", "TST^R (no generator)"),
    ("methods-1.5b-retrieval-lail", "lail", "LAIL, 1.5B labels"),
    ("methods-1.5b-retrieval", "selfracg", "SelfRACG, 1.5B"),
    ("methods-1.5b-retrieval-selfracg-layers8", "selfracg", "SelfRACG, 1.5B, first 8 layers"),
    ("methods-1.5b-retrieval-selfracg-noprefix", "selfracg", "SelfRACG, 1.5B, no candidate prefix"),
    ("methods-1.5b-retrieval-selfracg-stage12", "selfracg", "SelfRACG, 1.5B, stage 1 + 2"),
    ("repo-retrieval-selfracg-cpu-stage1-seed0", "selfracg", "SelfRACG, 0.5B (200 tasks)"),
)


def _json(path: Path) -> dict:
    """A JSON file, or its gzip-compressed form as results/ keeps some in git."""
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    return json.loads(gzip.decompress(path.with_name(path.name + ".gz").read_bytes()).decode("utf-8"))


def training_seconds(folder: Path, kind: str) -> list[tuple[str, float]]:
    """The parts of one training and their seconds, as the folder recorded them."""
    if kind == "train":
        summary = _json(folder / "train.json")
        parts = [("stage 1", summary["seconds"])]
        if summary.get("stage2"):
            parts.append(("stage 2", summary["stage2"]["seconds"]))
        return parts
    if kind == "lail":
        stats = _json(folder / "manifest.json")["stats"]
        return [("labels", stats["label_seconds"]), ("encoder", stats["train_seconds"])]
    if kind == "jointcom":  # The generator's losses, cached as they are computed, are part of the training.
        return [
            ("encoder (the generator's losses included)", _json(folder / "train-jointcom.json")["stats"]["seconds"])
        ]
    variants = _json(folder / "results.json")["variants"]  # in order of training; a run in progress has fewer
    return [
        (f"{name} backbone" if name == "generator" else "MiniLM", entry["stats"]["seconds"])
        for name, entry in variants.items()
    ]


def query_seconds(folder: Path, strategy: str) -> list[float]:
    """Each line task's retrieval seconds for one strategy."""
    with gzip.open(folder / "line-retrieval.jsonl.gz", "rt", encoding="utf-8") as lines:
        records = [json.loads(line)["value"] for line in lines if line.strip()]
    return [r["seconds"] for r in records if r.get("strategy") == strategy and "seconds" in r]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"), help="the results folder (default: results)")
    args = parser.parse_args()
    print("| method | generator | what was trained | seconds (part: s) | total min | note |")
    print("|---|---|---|---|---|---|")
    for method, generator, what, name, kind in TRAINING:
        folder = args.results / name
        if not any(folder.glob("*.json*")):
            print(f"| {method} | {generator} | {what} | not run yet (`{name}`) | | |")
            continue
        parts = training_seconds(folder, kind)
        cells = ", ".join(f"{part}: {seconds:,.0f}" for part, seconds in parts)
        # A Condor folder's variants are alternatives, each trained on its own: their seconds do not add up.
        total = f"{sum(s for _, s in parts) / 60:.1f}" if kind != "condor" else "each alone"
        print(f"| {method} | {generator} | {what} | {cells} | {total} | {NOTES.get(name, '')} |")
    # A line task's seconds cover two searches (the rank's top 10, then the demonstrations) and its prompt.
    print("\n| retriever | line tasks | ms a task (two searches and the prompt), median | mean | note |")
    print("|---|---|---|---|---|")
    for name, strategy, label in QUERIES:
        folder = args.results / name
        seconds = query_seconds(folder, strategy) if (folder / "line-retrieval.jsonl.gz").exists() else []
        if not seconds:
            print(f"| {label} | not run yet (`{name}`) | | | |")
            continue
        median, mean = 1000 * statistics.median(seconds), 1000 * statistics.fmean(seconds)
        print(f"| {label} | {len(seconds)} | {median:.1f} | {mean:.1f} | {NOTES.get(name, '')} |")


if __name__ == "__main__":
    main()
