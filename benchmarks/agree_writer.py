"""Another model writes agree's tests: its tests against the generator's own, replayed on committed candidates.

`agree` asks a model for asserts (2 rows of up to 96 tokens) and ranks the candidates by how they agree on them. The
tests' prompt holds the requirement and the function's signature only, so any model can write them; a smaller one
that shares the tokenizer writes them faster. Plan: `results/agree-writer/plan.md`.

    # the writer writes 2 x 96 tests for a folder's tasks (cached in results/agree-writer; resumable)
    .venv/bin/python benchmarks/agree_writer.py write --results FOLDER [--writer qwen2.5-coder-0.5b] [--heldout]
    # no model: rank as `auto` does (agree, then log-probability) with the generator's tests and the writer's
    .venv/bin/python benchmarks/agree_writer.py replay --results FOLDER [--recorded 128] [--heldout] [--json]

The generator's own tests are the folder's `agree-tests` (written at `--recorded` tokens, each row cut to its first
96 tokens: a row's first tokens do not depend on its limit) or, with `--heldout` (the tasks agree did not score),
the 2 x 96 that `benchmarks/agree_rows.py write --heldout --rows 2 --tokens 96` wrote.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from assistant.backends import load_backend
from assistant.backends.models import resolve, tokenizer_dir
from assistant.cache import JsonlCache
from assistant.core import agreement
from assistant.evaluate.metrics import paired_difference

OUT = Path(__file__).resolve().parent.parent / "results" / "agree-writer"
ROWS, TOKENS = agreement.TEST_SAMPLES, agreement.TEST_TOKENS  # today's call: 2 rows of up to 96 tokens
WRITER = "qwen2.5-coder-0.5b"


def _study(name: str) -> Any:
    """A study next door (`agree_tokens`, `agree_rows`): its task list, sandbox runs and caches."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return __import__(name)


def _generator(folder: Path) -> str:
    """The model that sampled the folder's candidates (and wrote its own tests)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return resolve(config.get("model") or _study("agree_tokens").OLD_DEFAULT).name


def writer_cache(folder: Path, writer: str) -> JsonlCache:
    """Where `write` keeps the tests `writer` writes for `folder`'s tasks."""
    return JsonlCache(OUT / f"tests-{writer}-{ROWS}x{TOKENS}-{folder.name}.jsonl")


def _request(item: dict[str, Any], model: str, rows: int = ROWS, tokens: int = TOKENS) -> tuple[str, str, str] | None:
    """(function name, signature, cache key) of a task's test call by `model`; None when there is no function."""
    candidates = item["candidates"]
    name = agreement.entry_point(candidates)
    if name is None:
        return None
    signature = agreement.signature(candidates, name)
    *_, key = agreement.tests_request(item["problem"].requirement, name, signature, model, rows, tokens)
    return name, signature, key


def write(args: argparse.Namespace) -> None:
    """Have the writer write each task's tests as agree's call does (resumable: a cached task is skipped)."""
    writer = resolve(args.writer).name
    backend = load_backend("local-ov", writer)  # the default engine (OpenVINO int8), as the folders sampled
    cache = writer_cache(args.results, writer)
    tasks = _study("agree_tokens")._tasks(args.results, args.limit, args.heldout)
    started, seconds = time.perf_counter(), []
    for number, item in enumerate(tasks, start=1):
        request = _request(item, writer)
        if request is None or request[2] in cache:
            continue
        name, signature, _ = request
        begun = time.perf_counter()
        agreement.written_tests(item["problem"], name, signature, backend, ROWS, cache, tokens=TOKENS)
        seconds.append(time.perf_counter() - begun)
        if number % 20 == 0 or number == len(tasks):
            print(f"{number}/{len(tasks)} tasks, {time.perf_counter() - started:.0f} s", flush=True)
    if seconds:
        print(f"wrote {len(seconds)} calls, {statistics.median(seconds):.2f} s each at the median ({writer})")


class WriterReplay:
    """A folder's tasks ranked with the generator's tests and with the writer's: whether each pick passed."""

    def __init__(self, args: argparse.Namespace, generator: str, writer: str) -> None:
        from transformers import AutoTokenizer

        self.generator, self.writer, self.recorded = generator, writer, args.recorded
        rows = _study("agree_rows")
        own = rows.written_cache(args.results, ROWS, TOKENS) if args.heldout else None
        self.own = own or JsonlCache(args.results / "agree-tests.jsonl")
        self.own_tokens = TOKENS if args.heldout else args.recorded
        self.written = writer_cache(args.results, writer)
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir(resolve(generator))))
        self.runs = _study("agree_tokens").Runs()
        self.passed: dict[str, dict[str, float]] = {"own": {}, "writer": {}}
        self.found: dict[str, list[int]] = {"own": [], "writer": []}
        self.missing: list[str] = []

    def _cut(self, texts: list[str], name: str) -> list[str]:
        """Rows written at a larger limit, each cut to its first TOKENS tokens (what a call at TOKENS writes)."""
        lead = _study("agree_tokens")._lead(name)
        ids = [self.tokenizer.encode(text[len(lead) :], add_special_tokens=False) for text in texts]
        return [lead + self.tokenizer.decode(row[:TOKENS]) for row in ids]

    def task(self, item: dict[str, Any]) -> None:
        """Replay one task with both writers' tests; a task missing from either cache is left out (listed)."""
        own = _request(item, self.generator, ROWS, self.own_tokens)
        written = _request(item, self.writer)
        if own is None or written is None:
            return
        own_texts, written_texts = self.own.get(own[2]), self.written.get(written[2])
        if own_texts is None or written_texts is None:
            self.missing.append(item["record"]["task_id"])
            return
        name, signature, _ = own
        for label, model, texts in (
            ("own", self.generator, self._cut(list(own_texts), name)),
            ("writer", self.writer, list(written_texts)),
        ):
            *_, key = agreement.tests_request(item["problem"].requirement, name, signature, model, ROWS, TOKENS)
            backend = _study("agree_tokens").CachedOnly(model)
            ranker = agreement.AgreementRanker(backend, cache={key: texts})  # type: ignore[arg-type]
            _, tests, examples = ranker.tests(item["problem"], item["candidates"])
            passed, _ = _study("agree_tokens").ranked_pick(self.runs, item, tests, examples)
            self.passed[label][item["record"]["task_id"]] = passed
            self.found[label].append(len(tests))


def replay(args: argparse.Namespace) -> None:
    """Rank every task with both writers' tests and print the table (or one JSON object)."""
    generator, writer = _generator(args.results), resolve(args.writer).name
    tasks = _study("agree_tokens")._tasks(args.results, args.limit, args.heldout)
    play = WriterReplay(args, generator, writer)
    for item in tasks:
        play.task(item)
    ids = set(play.passed["own"])
    if not ids:
        raise SystemExit(f"{args.results}: no task has tests from both writers; run `write` first")
    pass1, pass5 = _study("agree_rows")._oracle(tasks, ids)
    gap = paired_difference(play.passed["writer"], play.passed["own"])
    assert gap is not None
    rows = []
    for label, model in (("own", generator), ("writer", writer)):
        top1 = 100 * statistics.fmean(play.passed[label].values())
        closed = round((top1 - pass1) / (pass5 - pass1), 3) if pass5 > pass1 else None
        rows.append({"writer": model, "top1": round(top1, 1), "gap_closed": closed})
        rows[-1]["tests"] = round(statistics.fmean(play.found[label]), 2)
    result = {
        "results": str(args.results),
        "heldout": args.heldout,
        "generator": generator,
        "tasks": len(ids),
        "missing": play.missing,
        "sandbox_runs": play.runs.runs,
        "pass@1": round(pass1, 1),
        "pass@5": round(pass5, 1),
        "rows": rows,
        "writer_vs_own": [round(100 * x, 1) for x in gap],
    }
    print(json.dumps(result, indent=1)) if args.json else _print_table(result)


def _print_table(result: dict[str, Any]) -> None:
    """The result as the lines and Markdown table the docs quote."""
    kept = " (held out)" if result["heldout"] else ""
    print(f"{result['results']}{kept}: {result['tasks']} tasks, {result['sandbox_runs']} sandbox runs")
    if result["missing"]:
        print(f"left out: {len(result['missing'])} tasks without tests from both writers")
    print(f"pass@1 {result['pass@1']}, pass@5 {result['pass@5']}")
    print("\n| tests written by | agree+logprob top-1 | gap closed | tests a task |\n|---|---|---|---|")
    for row in result["rows"]:
        print(f"| {row['writer']} | {row['top1']} | {row['gap_closed']} | {row['tests']} |")
    point, low, high = result["writer_vs_own"]
    print(f"\n{result['rows'][1]['writer']} − {result['generator']}: {point:+.1f} [{low:+.1f}, {high:+.1f}] (paired)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["write", "replay"])
    parser.add_argument("--results", type=Path, required=True, help="an `eval codegen --rankers agree` folder")
    parser.add_argument("--writer", default=WRITER, help=f"the model that writes the tests (default {WRITER})")
    parser.add_argument("--recorded", type=int, default=128, help="the limit the folder's own tests were written at")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks (by id)")
    parser.add_argument("--json", action="store_true", help="replay: print one JSON object")
    parser.add_argument("--heldout", action="store_true", help="only the folder's tasks agree did not score")
    args = parser.parse_args()
    write(args) if args.phase == "write" else replay(args)


if __name__ == "__main__":
    main()
