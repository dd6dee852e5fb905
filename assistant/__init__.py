"""assist: a terminal coding assistant.

Retrieve demonstrations from your repo (or a bank), generate candidates with a local or hosted LLM, rank them,
and apply the chosen one as a diff. The CLI (`assist`) is a thin layer over this API::

    import assistant
    encoder = assistant.Encoder.load()
    source = assistant.open_source(encoder)                  # the repo's index, or the default bank
    backend = assistant.load_backend("local")                # Qwen2.5-Coder-0.5B-Instruct, offline
    retriever = assistant.make_retriever("hybrid", source.index, encoder)
    result = assistant.generate("reverse the words in a sentence", backend, retriever=retriever, k=4)
    print(result.best.candidate.code)
"""

from assistant.backends import Completion, SamplingParams, TokenLogprobs, load_backend
from assistant.backends.encoder import Encoder
from assistant.code.edit import Edit, apply_edit, plan_edit
from assistant.code.examples import Example, read_bank
from assistant.core.candidates import Candidate
from assistant.core.generation import GenerateResult, generate, read_tests
from assistant.core.rank import Problem, Ranked, Score, make_rankers, rank
from assistant.core.retrieve import Hit
from assistant.errors import AssistError, ModelError, UsageError
from assistant.indexing.index import Index, IndexStats, index_bank, index_repo
from assistant.indexing.sources import Source, open_source
from assistant.pipeline.registry import make_retriever

__version__ = "0.1.0"

__all__ = [
    "AssistError",
    "Candidate",
    "Completion",
    "Edit",
    "Encoder",
    "Example",
    "GenerateResult",
    "Hit",
    "Index",
    "IndexStats",
    "ModelError",
    "Problem",
    "Ranked",
    "SamplingParams",
    "Score",
    "Source",
    "TokenLogprobs",
    "UsageError",
    "apply_edit",
    "generate",
    "index_bank",
    "index_repo",
    "load_backend",
    "make_rankers",
    "make_retriever",
    "open_source",
    "plan_edit",
    "rank",
    "read_bank",
    "read_tests",
]
