"""How many tokens `agree`'s test-writing call needs: its ranking at smaller limits, replayed from a run's cache.

`agree` asks the model for asserts (2 samples of up to `TEST_TOKENS` new tokens; 320 until 2026-11-28) and
decodes until the longer sample ends, so the limit bounds the call's time: in `assist generate` that call is
most of the ranking and often more than the sampling itself. A sample's first T tokens do not depend on its
limit (the seed fixes every draw), so the completions an `eval codegen --rankers agree` folder cached at 320
tokens, cut to their first T tokens (re-tokenized with the model's tokenizer), are what a call at limit T
writes. For each T this takes those tests, runs every candidate on them in the sandbox (a (code, test) pair
runs once for all T) and ranks as `auto` does without tests (agree, then log-probability); it reports top-1
pass rate with a paired interval against the largest limit replayed, the tests found, and the decode steps the call
takes (the longer sample's tokens, at most T), the cost. Where the call rides along with the sampling call (`generate`
decodes agree's rows beside the candidates', `Backend.sample_groups`), the batch decodes until its longest row ends:
`batched steps` is the longer of the test call and the task's longest candidate. No model runs. From the repo root:

    .venv/bin/python benchmarks/agree_tokens.py [--results DIR] [--tokens 128,192,256,320] [--recorded 320]
        [--model NAME] [--limit N] [--json]

`--recorded` is the limit the folder's tests were written at (320 for the folders written before 2026-11-28,
`agreement.TEST_TOKENS` after); `--model` the model that wrote them (default: the folder's config; a folder that
records none was written with the default of its day, the 0.5B).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from assistant import sandbox
from assistant.backends.models import resolve, tokenizer_dir
from assistant.backends.prompts import build_tests_prompt
from assistant.cache import JsonlCache
from assistant.core import agreement
from assistant.core.candidates import Candidate
from assistant.core.rank import Problem
from assistant.evaluate import load_dataset
from assistant.evaluate.codegen import auto_pick, sample_candidates
from assistant.evaluate.metrics import paired_difference

DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / "results" / "codegen-humaneval-all-n5-ov-seed0"
RECORDED = 320  # the limit the committed 0.5B folders' agree tests were written at (TEST_TOKENS until 2026-11-28)
OLD_DEFAULT = "qwen2.5-coder-0.5b"  # what a folder whose config names no model was written with


class CachedOnly:
    """Stands in for the backend that wrote the cached tests: `written_tests` reads its name and whether it
    prefills answers, and must never sample (every completion comes from the cache)."""

    prefills_answer = True

    def __init__(self, model: str) -> None:
        self.model = model

    def sample(self, *args: Any, **kwargs: Any) -> list:
        raise AssertionError("a completion missing from the cache: this folder did not run agree on the task")


def _tasks(folder: Path, limit: int | None, heldout: bool = False) -> list[dict[str, Any]]:
    """The folder's zero-shot records that agree scored, with each task's problem and parsable candidates; with
    `heldout`, those agree did not score instead (tasks no agree study has read)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tasks = {t.task_id: t for t in load_dataset(config["dataset"], config["split"])}
    entries = JsonlCache(folder / "records.jsonl").entries.values()
    records = sorted(
        (
            r
            for r in entries
            if isinstance(r, dict) and r.get("strategy") == "zero" and ("agree" in r.get("scores", {})) != heldout
        ),
        key=lambda r: r["task_id"],
    )
    chosen = []
    for record in records[:limit]:
        task = tasks[record["task_id"]]
        candidates = sample_candidates(record["samples"], task.prefix)
        problem = Problem(requirement=task.requirement, prompt=task.prompt([]), setup=task.setup)
        chosen.append({"record": record, "problem": problem, "candidates": candidates})
    return chosen


def _lead(name: str) -> str:
    return build_tests_prompt("", "", name).answer_prefix


class Runs:
    """Which tests each candidate passes, one sandbox run per (code, test, setup), remembered across limits."""

    def __init__(self) -> None:
        self.passed: dict[tuple[str, str, str], bool] = {}
        self.runs = 0

    def __call__(self, candidates: list[Candidate], tests: list[str], setup: str) -> list[frozenset[int]]:
        wanted = [(c.code, t, setup) for c in candidates for t in tests]
        missing = list(dict.fromkeys(job for job in wanted if job not in self.passed))
        if missing:
            limits = sandbox.Limits(
                timeout_s=float(agreement.TEST_SECONDS), cpu_s=agreement.TEST_SECONDS, memory_mb=1024
            )
            results = sandbox.run_many([(code, [test], s) for code, test, s in missing], limits=limits)
            self.passed.update((job, r.status == "passed") for job, r in zip(missing, results, strict=True))
            self.runs += len(missing)
        return [frozenset(j for j, t in enumerate(tests) if self.passed[(c.code, t, setup)]) for c in candidates]


def ranked_pick(runs: Runs, item: dict[str, Any], tests: list[str], examples: int) -> tuple[float, list]:
    """Rank a task's candidates (an item of `_tasks`) on `tests` as `auto` does without tests (agree, then
    log-probability): 1.0 when the pick passed the task's own tests, else 0.0, and agree's score per sample."""
    problem, candidates, record = item["problem"], item["candidates"], item["record"]
    scores: list[float | None] = [None] * len(record["samples"])
    if tests:
        passes = runs(candidates, tests, problem.setup)
        for candidate, score in zip(
            candidates, agreement.cluster_scores(candidates, tests, passes, examples), strict=True
        ):
            scores[candidate.sample] = score.value
    pick = auto_pick({**record, "scores": {"agree": scores}})
    return float(pick is not None and bool(record["samples"][pick]["passed"])), scores


class Replay:
    """One folder's cached tests replayed at each limit, task by task: whether the pick passed, the tests found,
    the decode steps of the test call alone and batched beside the candidates', and the recorded scores matched."""

    def __init__(self, limits: list[int], recorded: int, model: str, tokenizer: Any, cached: JsonlCache) -> None:
        self.limits, self.recorded, self.model = limits, recorded, model
        self.tokenizer, self.cached = tokenizer, cached
        self.runs = Runs()
        self.passed: dict[int, dict[str, float]] = {t: {} for t in limits}
        self.steps: dict[int, list[int]] = {t: [] for t in limits}
        self.batched: dict[int, list[int]] = {t: [] for t in limits}
        self.found: dict[int, list[int]] = {t: [] for t in limits}
        self.recorded_agrees = 0
        self.unkeyed: list[str] = []

    def task(self, item: dict[str, Any]) -> None:
        """Replay one task (from `_tasks`) at every limit; a task without a function name, or whose cached tests
        are under another key, is left out (the latter listed in `unkeyed`)."""
        problem, candidates, record = item["problem"], item["candidates"], item["record"]
        name = agreement.entry_point(candidates)
        if name is None:
            return
        signature = agreement.signature(candidates, name)
        *_, key = agreement.tests_request(problem.requirement, name, signature, self.model, tokens=self.recorded)
        texts = self.cached.get(key)
        if texts is None:  # written by an older agree (its prompt or the signature it read differ): not today's call
            self.unkeyed.append(record["task_id"])
            return
        lead = _lead(name)
        completions = [self.tokenizer.encode(text[len(lead) :], add_special_tokens=False) for text in texts]
        for limit in self.limits:
            cut = [lead + self.tokenizer.decode(ids[:limit]) for ids in completions]
            *_, key = agreement.tests_request(problem.requirement, name, signature, self.model, tokens=limit)
            ranker = agreement.AgreementRanker(CachedOnly(self.model), cache={key: cut}, tokens=limit)  # type: ignore[arg-type]
            _, tests, examples = ranker.tests(problem, candidates)
            self.found[limit].append(len(tests))
            self.steps[limit].append(max(min(len(ids), limit) for ids in completions))
            self.batched[limit].append(max(self.steps[limit][-1], *(s.get("tokens", 0) for s in record["samples"])))
            self._rank(limit, item, tests, examples)

    def _rank(self, limit: int, item: dict[str, Any], tests: list[str], examples: int) -> None:
        """Rank the task's candidates on the tests written at `limit` as `auto` does, and note whether the pick
        passed (and, at the recorded limit, whether the scores are the recorded ones)."""
        record = item["record"]
        passed, scores = ranked_pick(self.runs, item, tests, examples)
        self.passed[limit][record["task_id"]] = passed
        if limit == self.recorded:
            written = record["scores"]["agree"]
            self.recorded_agrees += all(
                r is not None and abs(r - v) < 1e-9 for r, v in zip(written, scores, strict=True) if v is not None
            )


def _arguments() -> tuple[argparse.Namespace, list[int]]:
    """The command line, and the limits to replay in increasing order (none above `--recorded`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results", type=Path, default=DEFAULT_RESULTS, help="an `eval codegen --rankers agree` folder"
    )
    parser.add_argument("--tokens", default="96,128,192,256,320", help="limits to replay (the largest ≤ --recorded)")
    parser.add_argument("--recorded", type=int, default=RECORDED, help="the limit the folder's tests were written at")
    parser.add_argument("--model", default=None, help="the model that wrote the tests (default: the folder's)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks (by id)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    limits = sorted({int(t) for t in args.tokens.split(",")})
    if limits[-1] > args.recorded:
        parser.error(f"the cache holds {args.recorded}-token completions: no limit above that can be replayed")
    return args, limits


def _rows(replay: Replay) -> list[dict[str, Any]]:
    """One row per limit: top-1 with its paired difference, tests, decode steps, each against the largest limit."""
    top = replay.limits[-1]
    steps, batched = replay.steps, replay.batched
    rows = []
    for limit in replay.limits:
        gap = paired_difference(replay.passed[limit], replay.passed[top])
        assert gap is not None  # every limit scored the same tasks
        rows.append(
            {
                "tokens": limit,
                "top1": round(100 * statistics.fmean(replay.passed[limit].values()), 1),
                f"vs_{top}": [round(100 * x, 1) for x in gap],
                "tests": round(statistics.fmean(replay.found[limit]), 2),
                "decode_steps": round(statistics.fmean(steps[limit]), 1),
                f"steps_vs_{top}": round(statistics.fmean(steps[limit]) / statistics.fmean(steps[top]), 3),
                "batched_steps": round(statistics.fmean(batched[limit]), 1),
                f"batched_vs_{top}": round(statistics.fmean(batched[limit]) / statistics.fmean(batched[top]), 3),
            }
        )
    return rows


def _print_table(result: dict[str, Any], recorded: int, top: int) -> None:
    """The result as the lines and Markdown table the docs quote."""
    runs, model = result["sandbox_runs"], result["model"]
    print(f"{result['results']}: {result['tasks']} tasks, {runs} sandbox runs, tests by {model}")
    unkeyed = result["not_replayed"]
    if unkeyed:
        print(f"not replayed: {len(unkeyed)} tasks, their cached tests under another key (agree changed since)")
    if result["reproduced_recorded_scores"]:
        same = result["reproduced_recorded_scores"]
        print(f"agree scores at {recorded} tokens equal the recorded ones on {same} tasks")
    print(
        f"\n| limit | agree+logprob top-1 | vs {top} (paired) | tests | decode steps | steps vs {top} "
        f"| batched steps | batched vs {top} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in result["rows"]:
        low, high = row[f"vs_{top}"][1:]
        print(
            f"| {row['tokens']} | {row['top1']} | {row[f'vs_{top}'][0]:+.1f} [{low:+.1f}, {high:+.1f}] | "
            f"{row['tests']} | {row['decode_steps']} | {row[f'steps_vs_{top}']} | {row['batched_steps']} | "
            f"{row[f'batched_vs_{top}']} |"
        )


def main() -> None:
    """Replay the folder's cached tests at each limit and print the table (or, with --json, one object)."""
    args, limits = _arguments()
    from transformers import AutoTokenizer

    config = json.loads((args.results / "config.json").read_text(encoding="utf-8"))
    spec = resolve(args.model or config.get("model") or OLD_DEFAULT)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir(spec)))
    replay = Replay(limits, args.recorded, spec.name, tokenizer, JsonlCache(args.results / "agree-tests.jsonl"))
    for item in _tasks(args.results, args.limit):
        replay.task(item)
    count = len(replay.passed[limits[0]])
    if not count:
        why = (
            "no cached tests under the keys agree uses; is this the folder?"
            if replay.unkeyed
            else "no task has candidates that define a function"
        )
        raise SystemExit(f"{args.results}: {why}; nothing to replay")
    top = limits[-1]
    result = {
        "results": str(args.results),
        "tasks": count,
        "sandbox_runs": replay.runs.runs,
        "not_replayed": replay.unkeyed,
        "model": spec.name,
        "reproduced_recorded_scores": f"{replay.recorded_agrees} of {count}" if top == args.recorded else None,
        "rows": _rows(replay),
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    _print_table(result, args.recorded, top)


if __name__ == "__main__":
    main()
