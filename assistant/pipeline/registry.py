"""The retriever registry: build any retriever by name (`bm25`, `dense`, `hybrid`, and the trained `tstr`, `lail`).

It sits above both :mod:`assistant.core.retrieve` (the plain retrievers) and the trained methods that build on them,
so no module below imports it and there is no cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from assistant.core.retrieve import BM25Retriever, DenseRetriever, HybridRetriever, Retriever
from assistant.indexing.index import Index, TextEncoder

log = logging.getLogger("assistant")

RetrieverFactory = Callable[[Index, TextEncoder], Retriever]


def _tstr(index: Index, encoder: TextEncoder) -> Retriever:
    from assistant.methods.tstr import TstrRetriever  # trained retrievers import torch: only when asked for

    return TstrRetriever.for_index(index, encoder)


def _lail(index: Index, encoder: TextEncoder) -> Retriever:
    from assistant.methods.lail import LailRetriever

    return LailRetriever.for_index(index, encoder)


RETRIEVERS: dict[str, RetrieverFactory] = {
    "bm25": lambda index, encoder: BM25Retriever(index),
    "dense": lambda index, encoder: DenseRetriever(index, encoder),
    "hybrid": lambda index, encoder: HybridRetriever(BM25Retriever(index), DenseRetriever(index, encoder)),
    "tstr": _tstr,
    "lail": _lail,
}


def make_retriever(name: str, index: Index, encoder: TextEncoder) -> Retriever:
    """Build a registered retriever over an index; an unknown name is a one-line error.

    `auto` picks a retriever trained for this index's pool when there is one (LAIL, then TST^R), else hybrid;
    one that cannot load (its embeddings server is down) is skipped with a warning.
    """
    from assistant.errors import ModelError, UsageError

    if name == "auto":
        from assistant.methods.artifacts import trained_methods

        for method in trained_methods(index):
            try:
                return RETRIEVERS[method](index, encoder)
            except ModelError as exc:  # e.g. the embeddings server TST^R was trained on is down
                log.warning("the trained %s retriever is unavailable (%s); using the next best", method, exc)
        name = "hybrid"
    factory = RETRIEVERS.get(name)
    if factory is None:
        raise UsageError(f"unknown retriever {name!r}; choose one of: auto, {', '.join(RETRIEVERS)}")
    return factory(index, encoder)
