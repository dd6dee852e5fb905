"""Demonstration-selection strategies for evaluation: the LAIL paper's baselines, over a candidate pool.

`zero` (no demonstrations), `random` (seeded per task), `bm25` (requirements; AceCoder-style), `dense`
(TOP-k-SBERT with the default encoder) and `hybrid`. Trained retrievers register here under their names.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from assistant.code.examples import Example
from assistant.datasets import Task
from assistant.errors import UsageError
from assistant.indexing.index import Index, TextEncoder
from assistant.pipeline.registry import RETRIEVERS, make_retriever

Select = Callable[[Task, int], list[Example]]


@dataclass
class Pool:
    """The demonstration pool (e.g. MBPP train), indexed once for every retrieval strategy."""

    examples: list[Example]
    index: Index
    encoder: TextEncoder


def strategy_names() -> list[str]:
    """Every strategy: zero, random, and each registered retriever (trained ones included once registered)."""
    return ["zero", "random", *RETRIEVERS]


def in_strategy_order(names: Iterable[str]) -> list[str]:
    """Names once each, in `strategy_names()` order, others after in the order given: a report's rows then
    do not depend on the order its records were written in (a resumed run prints the table a fresh one does)."""
    known = strategy_names()
    return sorted(dict.fromkeys(names), key=lambda name: known.index(name) if name in known else len(known))


def make_strategy(name: str, pool: Pool, seed: int = 0, generator: str | None = None) -> Select:
    """A function (task, k) → demonstrations, most similar first; the pool never contains test tasks. A trained
    retriever is the one trained for `generator`, the model that generates (None: the latest trained)."""
    if name == "zero":
        return lambda task, k: []
    if name == "random":

        def select_random(task: Task, k: int) -> list[Example]:
            return random.Random(f"{seed}:{task.task_id}").sample(pool.examples, min(k, len(pool.examples)))

        return select_random
    parse_strategies(name)  # an unknown name is a one-line error naming the strategies
    retriever = make_retriever(name, pool.index, pool.encoder, generator)

    def select(task: Task, k: int) -> list[Example]:
        # The task's own text is excluded in case the pool overlaps the evaluated split.
        hits = retriever.search(task.requirement, k, exclude=lambda e: e.requirement == task.requirement)
        return [hit.example for hit in hits]

    return select


def parse_strategies(spec: str) -> list[str]:
    """`zero,bm25` → ["zero", "bm25"]; empty or unknown names are a one-line error."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise UsageError("no strategy given")
    known = strategy_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(known)}")
    return names
