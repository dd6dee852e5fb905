"""Filling one stub, the whole road (:func:`fill_stub`): prepare the request, draw and read the samples, plan the
candidates' edits and rank them, each step its own function (eval repo's function tasks share the steps).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.backends import Backend, Completion, SamplingParams
from assistant.code.edit import Edit
from assistant.code.examples import Example
from assistant.core.candidates import Candidate, CutOff
from assistant.core.rank import Rankers
from assistant.core.retrieve import Hit, Retriever
from assistant.core.stubs.body import Taken
from assistant.core.stubs.collect import collect_stub, plan_fill
from assistant.core.stubs.context import STUB_CONTEXT_TOKENS
from assistant.core.stubs.find import Stub
from assistant.core.stubs.request import StubRequest, prepare_stub
from assistant.core.stubs.sample import redraw_empty, sample_stub
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


def draw_stub(
    request: StubRequest,
    backend: Backend,
    params: SamplingParams,
    redraw: bool = False,
    progress: Progress | None = None,
) -> Drawn:
    """A request's samples (:func:`sample_stub`); with `redraw`, each that wrote nothing drawn once more in its
    place (:func:`redraw_empty`); read into candidates (:func:`collect_stub`)."""
    completions, limit = sample_stub(request, backend, params, progress)
    redrawn: list[int] = []
    if redraw:
        [(completions, redrawn)] = redraw_empty(
            [request], [completions], backend, [replace(params, max_new_tokens=limit)], progress
        )
    kept, dropped, cut = collect_stub(completions, request.stub, request.prefix, request.existing)
    return Drawn(completions, limit, redrawn, kept, dropped, cut)


def plan_candidates(
    target: Target, stub: Stub, kept: Sequence[tuple[Candidate, Taken]], root: Path | None = None
) -> dict[int, Edit]:
    """Each candidate's edit of `target` (:func:`plan_fill`), by its sample number."""
    return {candidate.sample: plan_fill(target, stub, taken, root) for candidate, taken in kept}


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
    started, usage_before = time.perf_counter(), backend.usage.to_json()
    drawn = draw_stub(request, backend, params, redraw, report)
    timings["generate"] = time.perf_counter() - started
    planned = plan_candidates(target, request.stub, drawn.kept, root)
    home = stub_home(target, request.stub, planned, python) if run_in_module else None
    candidates = [candidate for candidate, _ in drawn.kept]
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
        raise UsageError("-n must be at least 1")
    if target is None:
        if file is None:
            raise UsageError("--function needs --file, the file that holds the stub")
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
