"""Agree's test-writing call as more, shorter rows: write the tests with R rows, then replay rows × tokens.

`agree` asks the model for asserts in one call of `TEST_SAMPLES` rows of up to `TEST_TOKENS` new tokens, decoded
together until the longest row ends, and keeps the first 8 distinct asserts in row order. On a CPU a decode step
costs about the same for a few rows as for one, so the same asserts written as more, shorter rows take fewer steps.
Plan: `results/agree-rows/plan.md`.

    # the model writes its tests with 4 rows of up to 64 tokens on a folder's committed candidates (cached)
    .venv/bin/python benchmarks/agree_rows.py write --results FOLDER [--rows 4] [--tokens 64] [--limit N]
    # no model: rank as `auto` does with each rows × tokens configuration, against today's 2 × 96
    .venv/bin/python benchmarks/agree_rows.py replay --results FOLDER --recorded 128 [--configs 2x96,4x48] [--json]
    # tasks no agree study read (plan-heldout.md): write today's 2 x 96 too, then replay from the written caches
    .venv/bin/python benchmarks/agree_rows.py write --heldout --rows 2 --tokens 96 --results FOLDER

A configuration of 2 rows reads the folder's own cache (`agree-tests.jsonl`, written at `--recorded` tokens); one
of more rows reads the cache `write` made (its first R rows). A row's first T tokens do not depend on its limit (the
seed fixes every draw), so each row cut to its first T tokens (re-tokenized with the model's tokenizer) is what a
call at limit T writes. The steps are the test call's decode steps, its longest row's tokens.
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

OUT = Path(__file__).resolve().parent.parent / "results" / "agree-rows"
TODAY = (2, 96)  # agree's test call before this study: 2 rows of up to 96 tokens
CONFIGS = "2x96,2x64,4x32,4x48,4x64"


def _tokens_study() -> Any:
    """`benchmarks/agree_tokens.py`, next door: its task list, sandbox runs, ranking and cache-only backend."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import agree_tokens

    return agree_tokens


def _model(folder: Path, model: str | None) -> str:
    """The model that wrote (or writes) the folder's tests: `--model`, else the folder's, else the old default."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return resolve(model or config.get("model") or _tokens_study().OLD_DEFAULT).name


def written_cache(folder: Path, rows: int, tokens: int) -> JsonlCache:
    """Where `write` keeps the tests it has the model write for `folder`'s tasks."""
    return JsonlCache(OUT / f"tests-{rows}x{tokens}-{folder.name}.jsonl")


def write(args: argparse.Namespace) -> None:
    """Have the model write each task's tests with `--rows` rows of up to `--tokens` tokens (resumable: a task
    whose tests are cached is skipped)."""
    model = _model(args.results, args.model)
    backend = load_backend("local-ov", model)  # the default engine (OpenVINO int8), as the folders sampled
    cache = written_cache(args.results, args.rows, args.tokens)
    tasks = _tokens_study()._tasks(args.results, args.limit, args.heldout)
    started, seconds = time.perf_counter(), []
    for number, item in enumerate(tasks, start=1):
        candidates = item["candidates"]
        name = agreement.entry_point(candidates)
        if name is None:
            continue
        signature = agreement.signature(candidates, name)
        *_, key = agreement.tests_request(item["problem"].requirement, name, signature, model, args.rows, args.tokens)
        if key in cache:
            continue
        begun = time.perf_counter()
        agreement.written_tests(item["problem"], name, signature, backend, args.rows, cache, tokens=args.tokens)
        seconds.append(time.perf_counter() - begun)
        if number % 20 == 0 or number == len(tasks):
            print(f"{number}/{len(tasks)} tasks, {time.perf_counter() - started:.0f} s", flush=True)
    if seconds:
        print(f"wrote {len(seconds)} calls, {statistics.median(seconds):.2f} s each at the median ({model})")


def _configs(text: str) -> list[tuple[int, int]]:
    """`2x96,4x48` as [(2, 96), (4, 48)], today's first."""
    configs = [tuple(int(part) for part in item.lower().split("x")) for item in text.split(",")]
    if any(len(c) != 2 or c[0] < 1 or c[1] < 1 for c in configs):
        raise SystemExit(f"--configs takes ROWSxTOKENS items joined by commas, e.g. {CONFIGS}")
    pairs = [(c[0], c[1]) for c in configs]
    return [TODAY, *(c for c in pairs if c != TODAY)]


class RowsReplay:
    """The folder's tasks ranked with each configuration's tests: whether the pick passed, tests, steps."""

    def __init__(self, configs: list[tuple[int, int]], args: argparse.Namespace, model: str, tokenizer: Any) -> None:
        self.configs, self.model, self.tokenizer = configs, model, tokenizer
        self.recorded, self.written_at, self.written_rows = args.recorded, args.tokens, args.rows
        # Held out, agree never ran on the tasks: today's 2 rows are those `write --rows 2` wrote, as agree's call.
        own = args.results / "agree-tests.jsonl"
        self.committed = written_cache(args.results, 2, args.recorded) if args.heldout else JsonlCache(own)
        self.written = written_cache(args.results, args.rows, args.tokens)
        self.runs = _tokens_study().Runs()
        self.passed: dict[tuple[int, int], dict[str, float]] = {c: {} for c in configs}
        self.steps: dict[tuple[int, int], list[int]] = {c: [] for c in configs}
        self.found: dict[tuple[int, int], list[int]] = {c: [] for c in configs}
        self.missing: list[str] = []

    def _texts(self, problem: Any, name: str, signature: str, rows: int) -> list[str] | None:
        """The cached rows a configuration of `rows` rows reads: the folder's own for 2, the written ones else."""
        if rows <= 2:
            *_, key = agreement.tests_request(problem.requirement, name, signature, self.model, 2, self.recorded)
            texts = self.committed.get(key)
        else:
            written = (self.written_rows, self.written_at)
            *_, key = agreement.tests_request(problem.requirement, name, signature, self.model, *written)
            texts = self.written.get(key)
        return None if texts is None else list(texts)[:rows]

    def task(self, item: dict[str, Any]) -> None:
        """Replay one task with every configuration; a task missing from either cache is left out (listed)."""
        problem, candidates = item["problem"], item["candidates"]
        name = agreement.entry_point(candidates)
        if name is None:
            return
        signature = agreement.signature(candidates, name)
        rows = {rows: self._texts(problem, name, signature, rows) for rows, _ in self.configs}
        if any(texts is None for texts in rows.values()):
            self.missing.append(item["record"]["task_id"])
            return
        study = _tokens_study()
        lead = study._lead(name)
        for config in self.configs:
            count, limit = config
            texts = rows[count] or []
            ids = [self.tokenizer.encode(text[len(lead) :], add_special_tokens=False) for text in texts]
            cut = [lead + self.tokenizer.decode(row[:limit]) for row in ids]
            *_, key = agreement.tests_request(problem.requirement, name, signature, self.model, count, limit)
            backend = study.CachedOnly(self.model)
            ranker = agreement.AgreementRanker(backend, samples=count, cache={key: cut}, tokens=limit)  # type: ignore[arg-type]
            _, tests, examples = ranker.tests(problem, candidates)
            passed, _ = study.ranked_pick(self.runs, item, tests, examples)
            self.passed[config][item["record"]["task_id"]] = passed
            self.found[config].append(len(tests))
            self.steps[config].append(max(min(len(row), limit) for row in ids))


def _oracle(tasks: list[dict[str, Any]], ids: set[str]) -> tuple[float, float]:
    """pass@1 and pass@5 (percent) of the replayed tasks' samples."""
    records = [item["record"] for item in tasks if item["record"]["task_id"] in ids]
    pass1 = statistics.fmean(statistics.fmean(bool(s["passed"]) for s in r["samples"]) for r in records)
    pass5 = statistics.fmean(any(s["passed"] for s in r["samples"]) for r in records)
    return 100 * pass1, 100 * pass5


def replay(args: argparse.Namespace) -> None:
    """Rank every task with each configuration and print the table (or one JSON object)."""
    from transformers import AutoTokenizer

    configs = _configs(args.configs)
    for rows, tokens in configs:
        limit = args.recorded if rows <= 2 else args.tokens
        if tokens > limit or rows > max(2, args.rows):
            raise SystemExit(f"{rows}x{tokens}: the caches hold at most {limit} tokens and {args.rows} rows")
    model = _model(args.results, args.model)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir(resolve(model))))
    tasks = _tokens_study()._tasks(args.results, args.limit, args.heldout)
    play = RowsReplay(configs, args, model, tokenizer)
    for item in tasks:
        play.task(item)
    ids = set(play.passed[TODAY])
    if not ids:
        raise SystemExit(f"{args.results}: no task has tests in both caches; run `write` first")
    pass1, pass5 = _oracle(tasks, ids)
    rows = []
    for config in configs:
        top1 = 100 * statistics.fmean(play.passed[config].values())
        gap = paired_difference(play.passed[config], play.passed[TODAY])
        assert gap is not None
        rows.append(
            {
                "config": f"{config[0]}x{config[1]}",
                "top1": round(top1, 1),
                "vs_2x96": [round(100 * x, 1) for x in gap],
                "gap_closed": round((top1 - pass1) / (pass5 - pass1), 3) if pass5 > pass1 else None,
                "tests": round(statistics.fmean(play.found[config]), 2),
                "steps": round(statistics.fmean(play.steps[config]), 1),
                "steps_vs_2x96": round(statistics.fmean(play.steps[config]) / statistics.fmean(play.steps[TODAY]), 3),
            }
        )
    result = {
        "results": str(args.results),
        "model": model,
        "tasks": len(ids),
        "missing": play.missing,
        "sandbox_runs": play.runs.runs,
        "pass@1": round(pass1, 1),
        "pass@5": round(pass5, 1),
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    _print_table(result)


def _print_table(result: dict[str, Any]) -> None:
    """The result as the lines and Markdown table the docs quote."""
    print(f"{result['results']}: {result['tasks']} tasks, tests by {result['model']}, {result['sandbox_runs']} runs")
    if result["missing"]:
        print(f"left out: {len(result['missing'])} tasks without tests in both caches")
    print(f"pass@1 {result['pass@1']}, pass@5 {result['pass@5']}")
    head = "| rows × tokens | agree+logprob top-1 | vs 2 × 96 (paired) | gap closed | tests | steps | steps vs 2 × 96 |"
    print(f"\n{head}")
    print("|---|---|---|---|---|---|---|")
    for row in result["rows"]:
        point, low, high = row["vs_2x96"]
        print(
            f"| {row['config']} | {row['top1']} | {point:+.1f} [{low:+.1f}, {high:+.1f}] | {row['gap_closed']} | "
            f"{row['tests']} | {row['steps']} | {row['steps_vs_2x96']} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["write", "replay"])
    parser.add_argument("--results", type=Path, required=True, help="an `eval codegen --rankers agree` folder")
    parser.add_argument("--rows", type=int, default=4, help="rows the written tests have (default 4)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens the written rows may take (default 64)")
    parser.add_argument("--recorded", type=int, default=128, help="the limit the folder's own tests were written at")
    parser.add_argument("--configs", default=CONFIGS, help=f"ROWSxTOKENS to replay (default {CONFIGS})")
    parser.add_argument("--model", default=None, help="the model (default: the folder's)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks (by id)")
    parser.add_argument("--json", action="store_true", help="replay: print one JSON object")
    parser.add_argument(
        "--heldout",
        action="store_true",
        help="only the folder's tasks agree did not score (write today's 2 rows for them with --rows 2 --tokens 96; "
        "replay then reads those instead of the folder's agree-tests)",
    )
    args = parser.parse_args()
    write(args) if args.phase == "write" else replay(args)


if __name__ == "__main__":
    main()
