"""A stub-filling request ready to sample (:class:`StubRequest`): the stub found, demonstrations retrieved and
the prompt built (:func:`prepare_stub`).
"""

from __future__ import annotations

import ast
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assistant.backends import Backend, Prompt
from assistant.code.examples import Example
from assistant.core.retrieve import Hit, Retriever, demonstration_filter
from assistant.core.stubs.context import STUB_CONTEXT_TOKENS, default_max_tokens, fragment_query, stub_context
from assistant.core.stubs.find import Stub, find_stub
from assistant.core.target import Target
from assistant.core.tokens import token_counter
from assistant.core.usages import used_definitions
from assistant.errors import UsageError
from assistant.progress import Progress


def _defined_names(tree: ast.Module) -> list[str]:
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]


@dataclass(frozen=True)
class StubRequest:
    """A stub-filling request, ready to sample: the stub, the prompt and how its answers are read."""

    stub: Stub
    query: str  # the requirement (the docstring unless given), also the retrieval query
    requirement: str  # as given ("" when the docstring stands for it)
    hits: list[Hit]
    prompt: Prompt
    prompt_tokens: int
    limit: int  # max_new_tokens of the samples
    sized: bool  # the limit was sized to the docstring (so it may grow once when every sample is cut off)
    prefix: str  # the code the answer is prefilled with ("" when the model writes the whole function)
    existing: list[str]  # the file's other definitions (a sample that rewrites one is flagged)
    display: str
    apis: list[Example] | None = None  # the used functions shown in the prompt (None: not asked for)
    fragments: list[Hit] | None = None  # the repository's fragments shown in the prompt (None: not asked for)


def prepare_stub(
    function: str,
    backend: Backend,
    target: Target,
    *,
    requirement: str | None = None,
    retriever: Retriever | None = None,
    k: int = 4,
    max_new_tokens: int | None = None,
    tests: Sequence[str] = (),
    root: Path | None = None,
    progress: Progress | None = None,
    demonstrations: Sequence[Hit] | None = None,
    context_tokens: int = STUB_CONTEXT_TOKENS,
    timings: dict[str, float] | None = None,
    definitions: Sequence[Example] = (),
    fragments: Retriever | None = None,
    own_file: bool = False,
    attributes: bool = False,
    spec_tests: str = "",
    stub: Stub | None = None,
) -> StubRequest:
    """Find the stub, retrieve demonstrations for it and build its prompt (see :func:`fill_stub`).

    The requirement is the stub's docstring unless `requirement` is given; it is also the retrieval query.
    `max_new_tokens` None sizes the limit to the docstring (:func:`default_max_tokens`; when every sample was
    cut off by it, :func:`sample_stub` samples once more at twice the limit); a given limit is kept as it is.
    `attributes`: the context shows what a method's class sets on `self` before its nearest definitions
    (:func:`stub_context`).

    `own_file`: the demonstrations may be the stub's file's other functions, whole (the context shows most of
    them as outlines only); the stub itself never is, under its name in the index, whatever its body there.
    Off (this function's default; `generate`'s is on, `GenerationOptions.own_file`): they come from the
    repository's other files.

    `definitions`: the project's functions; those from other files that the stub's file uses are shown before
    the file, as signatures and docstring summaries (:func:`assistant.core.usages.used_definitions`). Empty (the
    default): none are. `fragments`: a retriever over the repository's 20-line fragments; with it, the `k` it
    finds for :func:`fragment_query` in the repository's other files are shown first (the code the papers'
    function-level benchmarks retrieve; `retriever` None leaves the demonstrations out). `spec_tests`: the
    repo's test functions that use the stub, shown as its specification (:mod:`assistant.core.spec_tests`).

    `stub`: the stub `function` names in `target`, when the caller found it already (:func:`find_stub` with this
    target, its display name and whether a requirement is given); None finds it here."""
    from assistant.core.generation import retrieve_step

    if k < 0:
        raise UsageError("k must be 0 or more", setting="k:negative")
    report = progress or (lambda stage, done, total: None)
    display = target.display(root)
    requirement, stub, query = _requirement_and_stub(function, target, display, requirement, stub)
    timings = timings if timings is not None else {}
    hits = retrieve_step(
        query, retriever, k, demonstrations, demonstration_filter(display, stub.qualname, own_file), report, timings
    )
    found = _fragment_hits(fragments, k, target.text, stub, display, timings)
    return _request(
        stub,
        target,
        backend,
        display=display,
        query=query,
        requirement=requirement,
        hits=hits,
        fragments=found,
        tests=tests,
        spec_tests=spec_tests,
        definitions=definitions,
        context_tokens=context_tokens,
        attributes=attributes,
        max_new_tokens=max_new_tokens,
    )


def _requirement_and_stub(
    function: str, target: Target, display: str, requirement: str | None, stub: Stub | None
) -> tuple[str, Stub, str]:
    """The requirement as given (stripped, "" for none), the stub (found unless given) and the query (the
    requirement, else the stub's docstring, else its name), or a one-line UsageError: no such file, a requirement
    or docstring that is no text, or no stub to fill (:func:`find_stub`)."""
    from assistant.backends import check_text

    if not target.exists:
        raise UsageError(
            f"{target.given} does not exist; the function to fill is a stub in an existing file",
            setting="function:missing_file",
            values={"name": target.given},
        )
    requirement = (requirement or "").strip()
    if requirement:
        check_text(requirement, "the requirement")
    if stub is None:
        stub = find_stub(target.text, function, display, requirement_given=bool(requirement), tree=target.tree)
    query = requirement or stub.docstring or stub.name
    check_text(query, "the docstring")
    return requirement, stub, query


def _fragment_hits(
    fragments: Retriever | None, k: int, text: str, stub: Stub, display: str, timings: dict[str, float]
) -> list[Hit] | None:
    """The `k` fragments of the repository's other files found for the code before the body (:func:`fragment_query`),
    timed; None when no fragment retriever is given."""
    if fragments is None:
        return None
    if k <= 0:
        return []
    started = time.perf_counter()
    # The file's own code is in the prompt already (and in a benchmark, its fragments hold the hidden body).
    found = fragments.search(fragment_query(text, stub), k, lambda e, path=display: e.path == path)
    timings["fragments"] = time.perf_counter() - started
    return found


def _request(
    stub: Stub,
    target: Target,
    backend: Backend,
    *,
    display: str,
    query: str,
    requirement: str,
    hits: list[Hit],
    fragments: list[Hit] | None,
    tests: Sequence[str],
    spec_tests: str,
    definitions: Sequence[Example],
    context_tokens: int,
    attributes: bool,
    max_new_tokens: int | None,
) -> StubRequest:
    """The request with its prompt: the code around the stub within `context_tokens` (:func:`stub_context`), the
    project's `definitions` the file uses, the demonstrations `hits` and the `fragments` (each best first), the
    requirement as given, the tests and the specification tests; prefilled with the stub's head where the
    backend takes a prefilled answer."""
    from assistant.backends.prompts import build_stub_prompt

    prefill = bool(getattr(backend, "prefills_answer", False))
    head = stub.dedented_head()
    count = token_counter(backend)
    context = stub_context(target.text, stub, context_tokens, count, target.tree, attributes)
    apis, shown = used_definitions(
        target.tree, display, stub.line, definitions, skip=(stub.start, stub.end), count=count
    )
    prompt = build_stub_prompt(
        stub.qualname,
        head,
        context,
        [hit.example for hit in reversed(hits)],  # most similar last, nearest the request
        requirement=requirement,
        tests=tests,
        file_path=display,
        prefill=prefill,
        apis=apis,
        fragments=[hit.example for hit in reversed(fragments or [])],  # most similar last, nearest the file
        spec_tests=spec_tests,
    )
    return StubRequest(
        stub=stub,
        query=query,
        requirement=requirement,
        hits=hits,
        prompt=prompt,
        prompt_tokens=backend.count_tokens(prompt),
        limit=max_new_tokens or default_max_tokens(stub, prefill),
        sized=max_new_tokens is None,
        prefix=head + "\n" if prefill else "",
        existing=[name for name in _defined_names(target.tree) if name != stub.name],
        display=display,
        apis=shown if definitions else None,
        fragments=fragments,
    )
