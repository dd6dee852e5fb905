"""Evaluation: datasets, demonstration strategies, pass@k and likelihood runs, reports."""

from __future__ import annotations

from assistant.code.examples import Example
from assistant.datasets import DatasetSpec, Task, load_dataset, load_humaneval, load_mbpp, parse_dataset, subset
from assistant.evaluate.codegen import run_codegen, summarize_codegen
from assistant.evaluate.likelihood import run_likelihood, summarize_likelihood
from assistant.evaluate.metrics import bootstrap_ci, pass_at_k
from assistant.evaluate.report import write_report
from assistant.evaluate.strategies import Pool, make_strategy
from assistant.indexing.index import TextEncoder, build_index


def load_pool(spec: str, encoder: TextEncoder) -> Pool:
    """The demonstration pool: a benchmark's training split (`mbpp[:PATH]`: MBPP train, task_ids 601-974)."""
    tasks = load_dataset(spec, "train")
    examples: list[Example] = [task.as_example() for task in tasks]
    index = build_index(examples, encoder, source={"kind": "benchmark", "name": f"{spec} (train split)"})
    return Pool(examples=examples, index=index, encoder=encoder)


__all__ = [
    "DatasetSpec",
    "Pool",
    "Task",
    "bootstrap_ci",
    "load_dataset",
    "load_humaneval",
    "load_mbpp",
    "load_pool",
    "make_strategy",
    "parse_dataset",
    "pass_at_k",
    "run_codegen",
    "run_likelihood",
    "subset",
    "summarize_codegen",
    "summarize_likelihood",
    "write_report",
]
