"""`assist eval likelihood`: how much each strategy's demonstrations help the model, without generating.

For each task: the model's mean token log-probability of the reference solution given the selected
demonstrations (LAIL's own feedback signal). One forward pass per task and strategy, batched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from assistant.backends import Backend
from assistant.backends.prompts import Prompt
from assistant.cache import JsonlCache, cache_key, supersede
from assistant.datasets import Task
from assistant.evaluate.metrics import bootstrap_ci, paired_difference
from assistant.evaluate.strategies import Pool, in_strategy_order, make_strategy
from assistant.progress import Progress


def run_likelihood(
    tasks: Sequence[Task],
    pool: Pool,
    strategies: Sequence[str],
    backend: Backend,
    out: Path,
    *,
    demos: int = 4,
    seed: int = 0,
    batch: int = 4,
    progress: Progress | None = None,
) -> list[dict]:
    """One record per (task, strategy): {task_id, strategy, logprob, tokens}, also in out/likelihood.jsonl.

    Scores are cached in out/likelihood_cache.jsonl by (model, prompt, continuation): resumable.
    """
    report = progress or (lambda stage, done, total: None)
    out.mkdir(parents=True, exist_ok=True)
    cache = JsonlCache(out / "likelihood_cache.jsonl")
    store = JsonlCache(out / "likelihood.jsonl")
    records: list[dict] = []
    for strategy in strategies:
        select = make_strategy(strategy, pool, seed, backend.model)  # a trained retriever: the one for this model
        jobs = []
        for task in tasks:
            chosen = select(task, demos)
            prompt = task.prompt(chosen)
            key = cache_key(
                kind="likelihood",
                backend=backend.name,
                model=backend.model,
                prompt=prompt.to_json(),
                continuation=task.reference,
            )
            jobs.append((task, prompt, key))
        # One record per (task, strategy): a retrained retriever's new scores replace its old ones.
        supersede(store, {(task.task_id, strategy): _record_key(task, strategy, key) for task, _, key in jobs})
        done = sum(1 for _, _, key in jobs if key in cache)
        report(f"likelihood {strategy}", done, len(jobs))
        # Sorted by length, each batch holds prompts of similar length, so little compute goes to padding;
        # longest first, so a memory limit is hit at once and the ETA errs on the long side.
        pending = sorted((job for job in jobs if job[2] not in cache), key=_length, reverse=True)
        for start in range(0, len(pending), batch):
            chunk = pending[start : start + batch]
            scored = backend.logprob([(prompt, task.reference) for task, prompt, _ in chunk])
            for (_, _, key), result in zip(chunk, scored, strict=True):
                cache.put(key, {"logprob": result.mean, "tokens": len(result.logprobs)})
            done += len(chunk)
            report(f"likelihood {strategy}", done, len(jobs))
        for task, _, key in jobs:
            record = {"task_id": task.task_id, "strategy": strategy, **cache.get(key)}
            record_key = _record_key(task, strategy, key)
            if record_key not in store:
                store.put(record_key, record)
            records.append(record)
    return records


def _record_key(task: Task, strategy: str, score_key: str) -> str:
    """The results-store key of a (task, strategy) record whose score is cached under `score_key`."""
    return cache_key(kind="likelihood-record", task=task.task_id, strategy=strategy, score=score_key)


def _length(job: tuple[Task, Prompt, str]) -> int:
    """Characters of a job's prompt and reference: a tokenizer-free proxy for its padded width."""
    task, prompt, _ = job
    return sum(len(m["content"]) for m in prompt.messages) + len(task.reference)


def per_task_logprob(records: Sequence[dict]) -> dict[str, dict[str, float]]:
    """strategy → task → mean log-probability of the reference (what pairing compares)."""
    by_strategy: dict[str, dict[str, float]] = {}
    for record in records:
        by_strategy.setdefault(record["strategy"], {})[record["task_id"]] = record["logprob"]
    return by_strategy


def summarize_likelihood(records: Sequence[dict]) -> list[dict]:
    """Per strategy: mean log-probability with a 95% bootstrap interval, and the paired gain over zero-shot."""
    by_strategy = per_task_logprob(records)
    zero = by_strategy.get("zero")
    rows = []
    for strategy in in_strategy_order(by_strategy):
        values = by_strategy[strategy]
        # Sorted by task: the interval must not depend on the order the records were written in.
        row = {"strategy": strategy, "tasks": len(values), "logprob": bootstrap_ci([values[t] for t in sorted(values)])}
        gain = paired_difference(values, zero) if zero is not None and strategy != "zero" else None
        if gain is not None:
            row["gain_vs_zero"] = gain
        rows.append(row)
    return rows
