"""Filling one stub, the whole road (:func:`fill_stub`): prepare the request, draw and read the samples, plan the
candidates' edits and rank them, each step its own function (eval repo's function tasks share the steps).

When agree will rank the candidates, its test-writing request is known before sampling (the stub gives the
function's name and signature) and is decoded beside the samples (:func:`agree_beside`), on a backend that decodes
both together: the ranker then reads what was written instead of making its call after sampling.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.backends import Backend, Completion, Prompt, SampleGroup, SamplingParams
from assistant.code.edit import Edit
from assistant.code.examples import Example
from assistant.core.candidates import Candidate, CutOff
from assistant.core.rank import Rankers
from assistant.core.retrieve import Hit, Retriever
from assistant.core.stubs.body import Taken, indent_body
from assistant.core.stubs.collect import _relative, collect_stub, plan_fill
from assistant.core.stubs.context import STUB_CONTEXT_TOKENS
from assistant.core.stubs.find import Stub
from assistant.core.stubs.request import StubRequest, prepare_stub
from assistant.core.stubs.sample import redraw_empty, sample_stubs_beside
from assistant.core.target import Target
from assistant.errors import UsageError
from assistant.progress import Progress

if TYPE_CHECKING:
    from assistant.core.generation import GenerateResult
    from assistant.core.home import ModuleHome
    from assistant.core.rank import Problem, Ranked


def _described(request: StubRequest) -> dict:
    """The stub as a result shows it; with `apis` asked for, the used functions its prompt showed (`path:line`)."""
    described = request.stub.to_json()
    if request.apis is not None:
        described["apis"] = [{"name": e.name, "source": e.source} for e in request.apis]
    if request.fragments is not None:
        described["fragments"] = [hit.example.source for hit in request.fragments]
    return described


@dataclass(frozen=True)
class Drawn:
    """A stub request's samples as drawn and read (:func:`draw_stub`)."""

    completions: list[Completion]  # every sample, each redraw in its place (a retry after its first samples)
    limit: int  # the token limit the samples ended with (twice the first where every sample was cut off)
    redrawn: list[int]  # the places drawn once more (their first sample wrote nothing)
    kept: list[tuple[Candidate, Taken]]  # the candidates, with the body each gives (:func:`collect_stub`)
    dropped: Counter[str]  # why the other samples are no candidates
    cut: list[CutOff]  # the samples cut off by the token limit
    beside: list[list[list[Completion]]] = field(default_factory=list)  # each `beside` group's completions


def draw_stub(
    request: StubRequest,
    backend: Backend,
    params: SamplingParams,
    redraw: bool = False,
    progress: Progress | None = None,
    beside: Sequence[SampleGroup] = (),
) -> Drawn:
    """A request's samples (:func:`~assistant.core.stubs.sample.sample_stub`, with the groups of `beside` decoded
    in its first call: :func:`~assistant.core.stubs.sample.sample_stubs_beside`); with `redraw`, each that wrote
    nothing drawn once more in its place (:func:`redraw_empty`); read into candidates (:func:`collect_stub`)."""
    [(completions, limit)], side = sample_stubs_beside([request], backend, [params], beside, progress)
    redrawn: list[int] = []
    if redraw:
        [(completions, redrawn)] = redraw_empty(
            [request], [completions], backend, [replace(params, max_new_tokens=limit)], progress
        )
    kept, dropped, cut = collect_stub(completions, request.stub, request.prefix, request.existing)
    return Drawn(completions, limit, redrawn, kept, dropped, cut, side)


def stub_signature(stub: Stub) -> str:
    """The `def` line(s) agree's test-writing request names the stub's function by: what
    :func:`assistant.core.agreement.signature` reads off its candidates, whose code all starts with the stub's own
    head. (Without a docstring, a first candidate whose body opens with a comment line gives another: then the
    request beside the samples is not the one agree makes, and agree makes its own after sampling.)"""
    from assistant.core.agreement import signature

    probe = stub.dedented_head() + "\n" + "\n".join(indent_body("pass", _relative(stub))) + "\n"
    return signature([Candidate(code=probe, sample=0)], stub.name)


@dataclass(frozen=True)
class Beside:
    """agree's test-writing request, decoded beside a stub's samples (:func:`agree_beside`)."""

    key: str  # what agree looks its completions up by (:func:`assistant.core.agreement.tests_request`)
    prompt: Prompt
    group: SampleGroup  # the prompt with its sampling parameters and seed


def agree_beside(
    request: StubRequest,
    backend: Backend,
    target: Target,
    plans: Callable[[Problem], bool] | None,
    tests: Sequence[str] = (),
    python: str | Path | None = None,
    run_in_module: bool = True,
) -> Beside | None:
    """agree's test-writing request for this stub's candidates, to decode beside their samples. None when no
    `plans` says whether agree will ask for tests, batching is off (`ASSIST_AGREE_BATCH=off`), the backend would
    decode it apart anyway (`batches_groups` False), or `plans`, shown the problem as the rankers will see it (its
    home found now, before there are candidates), says agree will not ask."""
    from assistant.core import agreement
    from assistant.core.home import module_home

    if plans is None or not agreement.batching_on() or not backend.batches_groups:
        return None
    stub = request.stub
    home = module_home(target.path, stub.qualname, {}, python) if run_in_module and target.exists else None
    if not plans(stub_problem(request, home, tests)):
        return None
    prompt, params, key = agreement.tests_request(request.query, stub.name, stub_signature(stub), backend.model)
    return Beside(key, prompt, SampleGroup((prompt,), params))


def written_beside(side: Beside | None, drawn: Drawn, backend: Backend) -> AbstractContextManager[None]:
    """The block in which agree takes the tests written beside the samples (`drawn.beside`'s first group) as its
    call's answer (:func:`assistant.core.agreement.prefetched_tests`; nothing without `side`)."""
    from assistant.core.agreement import prefetched_tests, test_texts

    if side is None or not drawn.beside:
        return prefetched_tests({})
    return prefetched_tests({side.key: test_texts(side.prompt, drawn.beside[0][0], backend)})


def plan_candidates(
    target: Target, stub: Stub, kept: Sequence[tuple[Candidate, Taken]], root: Path | None = None
) -> list[tuple[Candidate, Edit]]:
    """Each candidate with its edit of `target` (:func:`plan_fill`), the candidate carrying the names its edit reads
    that nothing defines (`Edit.undefined`, which ranks it last)."""
    pairs = [(candidate, plan_fill(target, stub, taken, root)) for candidate, taken in kept]
    return [(replace(candidate, undefined=edit.undefined), edit) for candidate, edit in pairs]


def stub_home(
    target: Target, stub: Stub, planned: Mapping[int, Edit], python: str | Path | None = None
) -> ModuleHome | None:
    """Where the candidates can run (their file, filled, in a copy of the repo: what `agree` runs them in), or
    None: the file does not exist yet, no candidate, or no home for it (:func:`assistant.core.home.module_home`)."""
    from assistant.core.home import module_home

    if not (target.exists and planned):
        return None
    return module_home(target.path, stub.qualname, {sample: edit.new for sample, edit in planned.items()}, python)


def stub_problem(request: StubRequest, home: ModuleHome | None = None, tests: Sequence[str] = ()) -> Problem:
    """What the rankers see of a stub's candidates: the requirement, the prompt, the tests and where they run.

    The candidates are scored as whole functions after the plain fence, so a candidate is judged the same way
    whether its log-probabilities were recorded while sampling or computed now."""
    from assistant.backends.prompts import ANSWER_PREFIX
    from assistant.core.rank import Problem

    prompt = replace(request.prompt, answer_prefix=ANSWER_PREFIX)
    return Problem(requirement=request.query, prompt=prompt, tests=tuple(tests), home=home)


def fill_stub(
    function: str,
    backend: Backend,
    *,
    file: str | Path | None = None,
    target: Target | None = None,
    requirement: str | None = None,
    retriever: Retriever | None = None,
    k: int = 4,
    params: SamplingParams | None = None,
    max_new_tokens: int | None = None,
    tests: Sequence[str] = (),
    root: Path | None = None,
    rankers: Rankers | None = None,
    progress: Progress | None = None,
    demonstrations: Sequence[Hit] | None = None,
    context_tokens: int = STUB_CONTEXT_TOKENS,
    python: str | Path | None = None,
    run_in_module: bool = True,
    definitions: Sequence[Example] = (),
    redraw: bool = False,
    fragments: Retriever | None = None,
    own_file: bool = False,
    spec_tests: str = "",
    stub: Stub | None = None,
    agree_tests: Callable[[Problem], bool] | None = None,
) -> GenerateResult:
    """Ranked candidates for the body of the stub `function` in `file`; each candidate's edit replaces only
    that body. `file` names the file, or `target` is the file already read (one of them is needed).
    In a git work tree, the rankers see where the candidates can run (`Problem.home`: the file in a copy of the
    repo, with `python`, default the repo's venv); `agree` runs the model's tests on them there. `run_in_module`
    False leaves that out (the repo's own tests will rank the candidates: agree would only cost time).

    The steps, each its own function: :func:`prepare_stub` (whose options `requirement`, `retriever`, `k`,
    `max_new_tokens`, `tests`, `demonstrations`, `context_tokens`, `definitions`, `fragments`, `own_file`,
    `spec_tests` and `stub` are passed on as they are), :func:`draw_stub` (samples cut off are reported in
    `cut_off`; with `redraw`, how many were drawn once more in `redrawn`), :func:`plan_candidates`,
    :func:`stub_home` and :func:`stub_problem`, then the rankers. Other definitions a sample wrote are dropped
    from its edit, named in its `dropped`, and rank it below every candidate that wrote only the function.
    `rankers` are ranker objects or a function that chooses them for the candidates (None: sampling order).
    `agree_tests`, shown the problem before sampling, says whether agree will ask for tests (:func:`agree_beside`).
    """
    from assistant.core.generation import rank_step, retriever_label

    params, target = _checked(params, file, target)
    report = progress or (lambda stage, done, total: None)
    timings: dict[str, float] = {}
    request = prepare_stub(
        function,
        backend,
        target,
        requirement=requirement,
        retriever=retriever,
        k=k,
        max_new_tokens=max_new_tokens,
        tests=tests,
        root=root,
        progress=report,
        demonstrations=demonstrations,
        context_tokens=context_tokens,
        timings=timings,
        definitions=definitions,
        fragments=fragments,
        own_file=own_file,
        spec_tests=spec_tests,
        stub=stub,
    )
    side = agree_beside(request, backend, target, agree_tests, tests, python, run_in_module)
    started, usage_before = time.perf_counter(), backend.usage.to_json()
    drawn = draw_stub(request, backend, params, redraw, report, [side.group] if side else [])
    timings["generate"] = time.perf_counter() - started
    pairs = plan_candidates(target, request.stub, drawn.kept, root)
    planned = {candidate.sample: edit for candidate, edit in pairs}
    home = stub_home(target, request.stub, planned, python) if run_in_module else None
    candidates = [candidate for candidate, _ in pairs]
    with written_beside(side, drawn, backend):
        ranked, chosen = rank_step(stub_problem(request, home, tests), candidates, rankers, report, timings)
    label = retriever_label(retriever, k, request.hits, demonstrations)
    edits = [planned[item.candidate.sample] for item in ranked]
    return _result(request, backend, drawn, label, ranked, [r.name for r in chosen], edits, home, timings, usage_before)


def _checked(
    params: SamplingParams | None, file: str | Path | None, target: Target | None
) -> tuple[SamplingParams, Target]:
    """The sampling settings (default ones) and the target file (read from `file` unless given), or a one-line
    UsageError: fewer than one sample asked for, or neither a file nor a target."""
    params = params or SamplingParams()
    if params.n < 1:
        raise UsageError("n must be at least 1", setting="n:below_one")
    if target is None:
        if file is None:
            raise UsageError("a function to fill needs the target file that holds its stub", setting="function")
        target = Target.read(file)
    return params, target


def _result(
    request: StubRequest,
    backend: Backend,
    drawn: Drawn,
    retriever: str,
    ranked: list[Ranked],
    rankers: list[str],
    edits: list[Edit],
    home: ModuleHome | None,
    timings: dict[str, float],
    usage_before: dict[str, float],
) -> GenerateResult:
    """What :func:`fill_stub` gives: the ranked candidates and their edits, and how they were made."""
    from assistant.core.generation import GenerateResult

    return GenerateResult(
        requirement=request.query,
        model=backend.model,
        backend=backend.name,
        retriever=retriever,
        rankers=rankers,
        demonstrations=request.hits,
        candidates=ranked,
        edits=list(edits),
        prompt=request.prompt,
        prompt_tokens=request.prompt_tokens,
        samples=len(drawn.completions),
        dropped=dict(drawn.dropped),
        timings=timings,
        usage=backend.usage.since(usage_before),
        function=_described(request),
        cut_off=drawn.cut,
        redrawn=len(drawn.redrawn),
        max_new_tokens=drawn.limit,
        home=home,
    )
