"""Retrievers: pick the demonstrations for a requirement. One interface, `search(query, k) -> list[Hit]`.

`bm25` (requirements, identifier-aware tokens; AceCoder-style), `dense` (cosine over encoder vectors;
TOP-k-SBERT) and `hybrid` (reciprocal-rank fusion of both). The registry that builds them, and the trained
retrievers built on these, by name is :mod:`assistant.pipeline.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from assistant.code.examples import Example
from assistant.code.tokenize import tokenize
from assistant.indexing.index import Index, TextEncoder

Exclude = Callable[[Example], bool]


def demonstration_filter(display: str, qualname: str | None = None, own_file: bool = False) -> Exclude | None:
    """What a request's demonstrations leave out: the functions of its target file (`display`, its repo path),
    which the prompt shows; with `own_file` and a stub (`qualname`), only the stub itself (by its qualified name:
    the index may hold an older body of it, or hold it at other lines). Without a path, nothing."""
    if not display:
        return None
    if not own_file or qualname is None:
        return lambda example: example.path == display
    return lambda example: example.path == display and example.name == qualname


@dataclass(frozen=True)
class Hit:
    """A retrieved example, its score under the retriever that chose it, and why it was chosen."""

    example: Example
    score: float
    retriever: str
    why: str

    def to_json(self) -> dict:
        return {
            "source": self.example.source,
            "name": self.example.name,
            "requirement": self.example.requirement,
            "code": self.example.code,
            "score": round(float(self.score), 6),
            "retriever": self.retriever,
            "why": self.why,
        }


class Retriever(Protocol):
    """Anything that can rank an index's examples for a query."""

    name: str

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]: ...


def top_rows(scores: np.ndarray, examples: Sequence[Example], k: int, exclude: Exclude | None) -> list[int]:
    """Row numbers of the k best scores, skipping excluded examples (`scores[i]` belongs to `examples[i]`)."""
    order = np.argsort(-scores, kind="stable")
    rows: list[int] = []
    for row in order:
        if exclude is not None and exclude(examples[row]):
            continue
        rows.append(int(row))
        if len(rows) == k:
            break
    return rows


class BM25Retriever:
    """Okapi BM25 over requirements (and function names), with camelCase/snake_case-aware tokens."""

    name = "bm25"

    def __init__(self, index: Index) -> None:
        self.index = index

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every example for the query."""
        tokens = tokenize(query)
        if not tokens or not len(self.index):
            return np.zeros(len(self.index))
        return np.asarray(self.index.bm25.get_scores(tokens), dtype="float64")

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]:
        scores = self.scores(query)
        query_tokens = set(tokenize(query))
        hits = []
        for row in top_rows(scores, self.index.examples, k, exclude):
            if scores[row] <= 0:
                break
            shared = sorted(query_tokens & set(tokenize(self.index.examples[row].requirement)))
            why = f"BM25 {scores[row]:.2f}; shares: {', '.join(shared[:8]) or '(name only)'}"
            hits.append(Hit(self.index.examples[row], float(scores[row]), self.name, why))
        return hits


class DenseRetriever:
    """Cosine similarity between the query's embedding and each example's requirement embedding."""

    name = "dense"

    def __init__(self, index: Index, encoder: TextEncoder) -> None:
        self.index = index
        self.encoder = encoder

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]:
        if not len(self.index):
            return []
        vector = self.encoder.encode([query])
        # Ask faiss for extra rows so exclusions still leave k; where they cut deeper than that (a leak control
        # dropping a whole file), ask again for four times as many, down to the whole index.
        depth = min(len(self.index), k + 16)
        while True:
            scores, rows = self.index.dense_search(vector, depth)
            hits = []
            for score, row in zip(scores[0], rows[0], strict=True):
                if row < 0 or (exclude is not None and exclude(self.index.examples[row])):
                    continue
                hits.append(Hit(self.index.examples[row], float(score), self.name, f"cosine {score:.3f}"))
                if len(hits) == k:
                    return hits
            if depth >= len(self.index):
                return hits
            depth = min(len(self.index), depth * 4)


class HybridRetriever:
    """Reciprocal-rank fusion of BM25 and dense: robust without tuning score scales (k_rrf = 60)."""

    name = "hybrid"

    def __init__(self, bm25: BM25Retriever, dense: DenseRetriever, depth: int = 50, k_rrf: int = 60) -> None:
        self.bm25 = bm25
        self.dense = dense
        self.depth = depth
        self.k_rrf = k_rrf

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]:
        depth = max(self.depth, k)
        fused: dict[int, float] = {}
        parts: dict[int, list[str]] = {}
        examples: dict[int, Example] = {}
        for retriever in (self.bm25, self.dense):
            for rank, hit in enumerate(retriever.search(query, depth, exclude), start=1):
                key = id(hit.example)
                examples[key] = hit.example
                fused[key] = fused.get(key, 0.0) + 1.0 / (self.k_rrf + rank)
                parts.setdefault(key, []).append(f"{retriever.name} #{rank} ({hit.why.split(';')[0]})")
        best = sorted(fused, key=lambda key: -fused[key])[:k]
        return [Hit(examples[key], fused[key], self.name, "RRF of " + " + ".join(parts[key])) for key in best]
