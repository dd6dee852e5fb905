"""assist: a terminal coding assistant.

Retrieve demonstrations from your repo (or a bank), generate candidates with a local or hosted LLM, rank them,
and apply the chosen one as a diff. The CLI (`assist`) is a thin layer over this API::

    import assistant
    pipeline = assistant.Pipeline(assistant.GenerationOptions(k=4, retriever="hybrid"))
    result = pipeline.generate(assistant.Request("reverse the words in a sentence"))
    print(result.best.candidate.code)

The pipeline loads what a request needs (the settings' backend, the repo's index or the default bank, the
encoder only when something is embedded) once; `pipeline.backend()`, `pipeline.retriever()`,
`pipeline.rankers(spec, candidates)` hand out the loaded parts. `assistant.generate(requirement, backend,
retriever=..., k=..., ranker="auto")` is the same step with parts you loaded yourself.
"""

from assistant.backends import Completion, SamplingParams, TokenLogprobs, load_backend
from assistant.backends.encoder import Encoder
from assistant.code.edit import Edit, apply_edit, plan_edit
from assistant.code.examples import Example, read_bank
from assistant.core.candidates import Candidate
from assistant.core.generation import GenerateResult, read_tests
from assistant.core.rank import Problem, Ranked, Score, rank
from assistant.core.retrieve import Hit
from assistant.errors import AssistError, ModelError, UsageError
from assistant.indexing.index import Index, IndexStats, index_bank, index_repo
from assistant.indexing.sources import Source, open_source
from assistant.pipeline.options import GenerationOptions
from assistant.pipeline.pipeline import Pipeline, Request, generate
from assistant.pipeline.registry import make_rankers, make_retriever

__version__ = "0.1.0"

__all__ = [
    "AssistError",
    "Candidate",
    "Completion",
    "Edit",
    "Encoder",
    "Example",
    "GenerateResult",
    "GenerationOptions",
    "Hit",
    "Index",
    "IndexStats",
    "ModelError",
    "Pipeline",
    "Problem",
    "Ranked",
    "Request",
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
