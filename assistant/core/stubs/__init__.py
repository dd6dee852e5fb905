"""Fill a stub in place: find a function whose body is `...`, `pass` or `raise NotImplementedError`, show the
model the code around it, prefill its answer with the stub's own signature and docstring, and put only the new
body back into the file.

Everything is done by syntax position on the file's own text: the lines before and after the body are kept
byte for byte (line endings, tabs, form feeds, comments), and the body is indented as the file indents.

By stage: :mod:`.find` (the stubs of a file), :mod:`.context` (the code the prompt shows around one),
:mod:`.body` (a sample's body read and put in place), :mod:`.collect` (samples into candidates and edits),
:mod:`.request` (the prompt, ready to sample), :mod:`.sample` (sampling, retries and redraws) and :mod:`.fill`
(the whole road for one stub). This package re-exports what the rest of the code imports from it.
"""

from __future__ import annotations

from assistant.core.stubs.body import Taken, fill_body, take_body
from assistant.core.stubs.collect import collect_stub, plan_fill
from assistant.core.stubs.context import (
    STUB_CONTEXT_TOKENS,
    attribute_outlines,
    default_max_tokens,
    fragment_query,
    stub_context,
)
from assistant.core.stubs.fill import _described, fill_stub
from assistant.core.stubs.find import Stub, find_functions, find_stub, list_stubs
from assistant.core.stubs.request import StubRequest, prepare_stub
from assistant.core.stubs.sample import WROTE_NOTHING, carry_on, redraw_empty, sample_stub, sample_stubs, wrote_nothing
from assistant.core.tokens import approximate_tokens

__all__ = [
    "STUB_CONTEXT_TOKENS",
    "WROTE_NOTHING",
    "Stub",
    "StubRequest",
    "Taken",
    "_described",
    "approximate_tokens",
    "attribute_outlines",
    "carry_on",
    "collect_stub",
    "default_max_tokens",
    "fill_body",
    "fill_stub",
    "find_functions",
    "find_stub",
    "fragment_query",
    "list_stubs",
    "plan_fill",
    "prepare_stub",
    "redraw_empty",
    "sample_stub",
    "sample_stubs",
    "stub_context",
    "take_body",
    "wrote_nothing",
]
