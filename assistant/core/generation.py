"""The generation pipeline: retrieve demonstrations → prompt → sample → keep parsable distinct code → rank → diff."""

from __future__ import annotations

import ast
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as replace_field
from pathlib import Path

from assistant.backends import Backend, Completion, SamplingParams, check_text
from assistant.backends.prompts import Prompt, build_prompt
from assistant.code.asserts import split_asserts
from assistant.code.edit import Edit, source_lines
from assistant.code.extract import first_paragraph
from assistant.code.parse import parse_module
from assistant.code.tokenize import tokenize
from assistant.config import DEFAULT_TEMPERATURE
from assistant.core.candidates import Candidate, CutOff, collect, normal_form
from assistant.core.home import ModuleHome
from assistant.core.rank import Problem, Ranked, Ranker, Rankers, choose, rank
from assistant.core.retrieve import Exclude, Hit, Retriever, demonstration_filter
from assistant.core.target import Target
from assistant.core.tokens import Count, approximate_tokens, token_counter
from assistant.errors import AssistError, UsageError
from assistant.progress import Progress

FILE_CONTEXT_LINES = 200
# The most tokens the target file's outline may take in a prompt (a 4,000-line module's whole outline is ~2,000).
FILE_CONTEXT_TOKENS = 768


@dataclass
class GenerateResult:
    """Everything `generate` produced, best candidate first."""

    requirement: str
    model: str
    backend: str
    retriever: str
    rankers: list[str]
    demonstrations: list[Hit]  # best first (the prompt shows them in the reverse order)
    candidates: list[Ranked]
    edits: list[Edit | None]  # aligned with candidates; set when a target file was given
    prompt: Prompt
    prompt_tokens: int
    samples: int
    dropped: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)  # requests, tokens in/out, seconds in the backend
    function: dict | None = None  # filling a stub: its name, line, form and docstring
    cut_off: list[CutOff] = field(default_factory=list)  # samples that reached the token limit unfinished
    max_new_tokens: int | None = None  # the token limit the samples had (after any retry)
    redrawn: int = 0  # filling a stub: samples that wrote nothing and were drawn once more
    home: ModuleHome | None = None  # filling a stub: where its candidates run (a re-rank runs them there again)
    # A plain request with a file: the file's definitions that candidates only re-typed (dropped: nobody asked for
    # them to change), most often first.
    rewrote: list[str] = field(default_factory=list)

    @property
    def best(self) -> Ranked | None:
        return self.candidates[0] if self.candidates else None

    def to_json(self) -> dict:
        return {
            "requirement": self.requirement,
            "model": self.model,
            "backend": self.backend,
            "retriever": self.retriever,
            "rankers": self.rankers,
            "prompt_tokens": self.prompt_tokens,
            "samples": self.samples,
            "dropped": self.dropped,
            "function": self.function,
            "max_new_tokens": self.max_new_tokens,
            "cut_off": [cut.to_json() for cut in self.cut_off],
            "redrawn": self.redrawn,
            "rewrote": self.rewrote,
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "usage": self.usage,
            "demonstrations": [hit.to_json() for hit in self.demonstrations],
            "candidates": [
                {
                    "rank": number,
                    "code": ranked.candidate.code,
                    "sample": ranked.candidate.sample,
                    "score": ranked.scores[self.rankers[0]].value,
                    "scores": {name: {"value": s.value, "why": s.why} for name, s in ranked.scores.items()},
                    "edit": edit.to_json() if edit else None,
                    "other_functions": list(ranked.candidate.dropped),
                    "undefined": list(ranked.candidate.undefined),
                }
                for number, (ranked, edit) in enumerate(zip(self.candidates, self.edits, strict=True), start=1)
            ],
        }


TESTS_FILE_BYTES = 16 << 20  # a file of asserts larger than this is not one a person wrote for a request


def read_tests(path: str | Path) -> list[str]:
    """Test chunks from a Python file (:func:`~assistant.code.asserts.split_asserts`). Only a regular file (a
    link to one counts) of at most TESTS_FILE_BYTES: /dev/zero once filled 5 GB in 3 s, and a FIFO hung."""
    from assistant.paths import read_regular_file

    path = Path(path)
    try:
        resolved = path.resolve()
        size = resolved.stat().st_size if resolved.is_file() else None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise UsageError(f"cannot read tests file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if size is None:
        raise UsageError(f"tests file {path} does not exist or is not a regular file")
    if size > TESTS_FILE_BYTES:
        raise UsageError(f"tests file {path} is larger than {TESTS_FILE_BYTES >> 20} MB")
    data = read_regular_file(resolved, TESTS_FILE_BYTES)  # no FIFO or device put there since the check
    if data is None:
        raise UsageError(f"cannot read tests file {path}")
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"tests file {path} is not UTF-8 text") from None
    return split_asserts(source, f"tests file {path}")


def file_context(
    target: Target, requirement: str = "", budget: int = FILE_CONTEXT_TOKENS, count: Count = approximate_tokens
) -> str:
    """An outline of the target file for the prompt: its imports and each definition's signature and
    docstring summary, bodies elided, within `budget` tokens (by `count`).

    A small model shown whole bodies tends to copy them back instead of writing what was asked; the
    outline tells it what exists (names to reuse, style) without that pull. Made from the file as read
    once for the request (:class:`~assistant.core.target.Target`). A large module's whole outline would cost
    thousands of prompt tokens (minutes on a CPU): past the budget, the imports come first, then the definitions
    closest to the request (most words shared with it, then nearest the end of the file, where new code goes),
    shown in file order, with one line saying how many were left out.
    """
    if not target.exists:
        return ""
    text, tree = target.text, target.tree
    if "\r" in text:  # shown as text mode reads it: universal newlines (an outline of a CRLF file parses again)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        tree = parse_module(text)
    lines = source_lines(text)  # numbered as ast numbers them (str.splitlines also breaks at form feeds, U+2028)

    def summarize(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, indent: str) -> list[str]:
        shown = [indent + lines[node.lineno - 1].strip()]
        docstring = ast.get_docstring(node)
        if docstring:
            shown.append(f'{indent}    """{first_paragraph(docstring)}"""')
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    shown += summarize(child, indent + "    ")
        else:
            shown.append(indent + "    ...")
        return shown

    # (kind, lines) per top-level statement shown, in file order.
    pieces: list[tuple[str, list[str]]] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            pieces.append(("import", [ast.get_source_segment(text, node) or ast.unparse(node)]))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pieces.append(("definition", ["", *summarize(node, "")]))
    whole = [line for _, shown in pieces for line in shown]
    outline = "\n".join(whole[:FILE_CONTEXT_LINES]).strip("\n")
    if count(outline) <= budget:
        return outline

    wanted = set(tokenize(requirement))
    order = sorted(
        range(len(pieces)),
        key=lambda i: (
            pieces[i][0] != "import",
            -len(wanted & set(tokenize("\n".join(pieces[i][1])))),
            -i,
        ),
    )
    chosen: set[int] = set()
    used = 0
    for i in order:
        cost = count("\n".join(pieces[i][1])) + 1
        if used + cost <= budget:
            chosen.add(i)
            used += cost
    left_out = sum(1 for i, (kind, _) in enumerate(pieces) if kind == "definition" and i not in chosen)
    shown = [line for i, (_, piece) in enumerate(pieces) if i in chosen for line in piece]
    if left_out:
        shown += ["", f"# ... {left_out} more definition{'s' if left_out != 1 else ''} in this file, not shown"]
    return "\n".join(shown).strip("\n")


def retrieve_step(
    query: str,
    retriever: Retriever | None,
    k: int,
    demonstrations: Sequence[Hit] | None,
    exclude: Exclude | None,
    report: Progress,
    timings: dict[str, float],
) -> list[Hit]:
    """The demonstrations for a request: the given ones, else the top `k` of `retriever` that `exclude` keeps
    (timed, reported)."""
    started = time.perf_counter()
    report("retrieve", 0, 1)
    if demonstrations is not None:
        hits = list(demonstrations)
    else:
        hits = retriever.search(query, k, exclude) if retriever is not None and k > 0 else []
    report("retrieve", 1, 1)
    timings["retrieve"] = time.perf_counter() - started
    return hits


def rank_step(
    problem: Problem,
    candidates: Sequence[Candidate],
    rankers: Rankers | None,
    report: Progress,
    timings: dict[str, float],
) -> tuple[list[Ranked], list[Ranker]]:
    """Rank candidates with `rankers` (objects, or a function that chooses them for these candidates; None:
    sampling order), timed and reported."""
    started = time.perf_counter()
    chosen = choose(rankers, problem, candidates)
    report("rank", 0, len(candidates))
    # A ranker that calls the model (agree) reports its tokens, so a cancel stops it at the next one.
    ranked = (
        rank(problem, candidates, chosen, lambda done, total: report("rank tests", done, total)) if candidates else []
    )
    report("rank", len(candidates), len(candidates))
    timings["rank"] = time.perf_counter() - started
    return ranked, chosen


def retriever_label(
    retriever: Retriever | None, k: int, hits: Sequence[Hit], demonstrations: Sequence[Hit] | None
) -> str:
    """What chose the demonstrations, for the result: the retriever, the given hits' own retrievers, or none."""
    if demonstrations is not None:
        return "+".join(dict.fromkeys(hit.retriever for hit in hits)) or "none"
    return retriever.name if retriever is not None and k > 0 else "none"


def generate(
    requirement: str,
    backend: Backend,
    *,
    retriever: Retriever | None = None,
    k: int = 4,
    params: SamplingParams | None = None,
    tests: Sequence[str] = (),
    file: str | Path | None = None,
    target: Target | None = None,
    root: Path | None = None,
    rankers: Rankers | None = None,
    progress: Progress | None = None,
    demonstrations: Sequence[Hit] | None = None,
    replace: Collection[str] = (),
    python: str | Path | None = None,
    run_in_module: bool = True,
) -> GenerateResult:
    """Generate ranked candidates for a requirement.

    With a target file, each candidate's edit adds what it wrote; it replaces the file's own definitions only where
    `replace` names them (:func:`plan_candidates`), and the candidates run in their edited file, in a sandboxed copy
    of its project (`python` its interpreter; `run_in_module` False: alone), when a ranker runs them.

    `rankers` are ranker objects, or a function that chooses them once the candidates are known (the
    pipeline's `auto`: by tests passed then log-probability when tests are given, else by log-probability);
    None keeps the sampling order. With `file` (or `target`, the file already read), every candidate comes
    with the diff that would put it into that file. `demonstrations` replaces retrieval with these hits (an
    interactive user who switched some off). `progress` hears every sampled token; if it raises (e.g.
    :class:`~assistant.errors.Cancelled`), generation stops there.
    """
    requirement, params = _checked(requirement, k, params)
    report = progress or (lambda stage, done, total: None)
    timings: dict[str, float] = {}
    if target is None and file:
        target = Target.read(file)  # a file assist could not edit fails now, not after a minute of sampling
    display = target.display(root) if target is not None else ""

    # The target file is in the prompt already (its outline); its functions as demonstrations too would only
    # invite the model to copy them back.
    hits = retrieve_step(requirement, retriever, k, demonstrations, demonstration_filter(display), report, timings)
    prompt = _prompt(requirement, hits, tests, target, display, backend)
    prompt_tokens = backend.count_tokens(prompt)
    usage_before = backend.usage.to_json()
    completions = _sample(prompt, backend, params, report, timings)
    candidates, dropped = collect(completions)
    # Planned before ranking: what an edit leaves out ranks its candidate lower, and the edited files are where
    # the candidates run (their module's names and imports resolve there).
    candidates, planned, unchanged, rewrote = plan_candidates(candidates, target, root, replace)
    dropped.update(unchanged)
    home = candidates_home(target, planned, python) if run_in_module else None

    problem = Problem(requirement=requirement, prompt=prompt, tests=tuple(tests), home=home)
    ranked, chosen = rank_step(problem, candidates, rankers, report, timings)
    edits = [planned.get(item.candidate.sample) for item in ranked]

    return GenerateResult(
        requirement=requirement,
        model=backend.model,
        backend=backend.name,
        retriever=retriever_label(retriever, k, hits, demonstrations),
        rankers=[r.name for r in chosen],
        demonstrations=hits,
        candidates=ranked,
        edits=edits,
        prompt=prompt,
        prompt_tokens=prompt_tokens,
        samples=len(completions),
        dropped=dict(dropped),
        timings=timings,
        usage=backend.usage.since(usage_before),
        max_new_tokens=params.max_new_tokens,
        home=home,
        rewrote=rewrote,
    )


def _checked(requirement: str, k: int, params: SamplingParams | None) -> tuple[str, SamplingParams]:
    """The requirement stripped and the sampling parameters (default ones when None), or a one-line UsageError:
    an empty or undecodable requirement, k below 0, n below 1."""
    requirement = requirement.strip()
    if not requirement:
        raise UsageError("the requirement is empty; say what the code should do")
    check_text(requirement, "the requirement")  # before an encoder or tokenizer meets undecodable bytes
    if k < 0:
        raise UsageError("k must be 0 or more", setting="k:negative")
    params = params or SamplingParams()
    if params.n < 1:
        raise UsageError("n must be at least 1", setting="n:below_one")
    return requirement, params


def _prompt(
    requirement: str, hits: Sequence[Hit], tests: Sequence[str], target: Target | None, display: str, backend: Backend
) -> Prompt:
    """A plain request's prompt: the demonstrations (most similar last, nearest the request), the target file's
    outline (`display` names it) and the tests."""
    return build_prompt(
        requirement,
        [hit.example for hit in reversed(hits)],
        tests=tests,
        file_path=display,
        file_context=file_context(target, requirement, count=token_counter(backend)) if target else "",
    )


def _sample(
    prompt: Prompt, backend: Backend, params: SamplingParams, report: Progress, timings: dict[str, float]
) -> list[Completion]:
    """The request's samples, each token reported as the `generate` stage; their seconds go in `timings`."""
    started = time.perf_counter()
    report("generate", 0, params.n)
    completions = backend.sample(prompt, params, step=lambda done, total: report("generate", done, total))
    report("generate", 1, 1)
    timings["generate"] = time.perf_counter() - started
    return completions


# Why a candidate whose edit changes nothing is dropped: it repeated the file, or it only re-typed definitions the
# file has (left out, since nobody asked for them to change).
NO_CHANGE = "no change"
ONLY_REWRITES = "only rewrote existing code"


def plan_candidates(
    candidates: Sequence[Candidate], target: Target | None, root: Path | None, replace: Collection[str] = ()
) -> tuple[list[Candidate], dict[int, Edit], Counter[str], list[str]]:
    """The rule for putting plain candidates into a file: each one's edit of `target` (by sample number) adds what
    it wrote that the file lacks; its redefinitions of the file's own functions, methods and classes are left out
    unless `replace` names them (:func:`assistant.code.edit.merge`), and named in its `dropped`, which ranks it below
    every candidate that only adds (:meth:`Ranked.key`). A candidate whose edit would change nothing is dropped
    (counted by why); last, the file's definitions those that only rewrote some re-typed, most often first (what a
    door names when nothing is left). Without a target: the candidates as they are, no edits."""
    if target is None:
        return list(candidates), {}, Counter(), []
    kept: list[Candidate] = []
    edits: dict[int, Edit] = {}
    dropped: Counter[str] = Counter()
    rewrote: Counter[str] = Counter()
    for candidate in candidates:
        edit = target.plan_edit(candidate.code, root, replace)
        if edit.new == edit.old:  # only what the file has already, or only what was left out: no answer
            dropped[ONLY_REWRITES if edit.left_out else NO_CHANGE] += 1
            rewrote.update(rewritten_name(what) for what in edit.left_out if rewritten_name(what))
            continue
        dropped_too = tuple(dict.fromkeys((*candidate.dropped, *edit.left_out)))
        kept.append(replace_field(candidate, dropped=dropped_too, undefined=edit.undefined))
        edits[candidate.sample] = edit
    return kept, edits, dropped, [name for name, _ in rewrote.most_common()]


def rewritten_name(left_out: str) -> str:
    """The definition an edit's left-out action names ("rewrites Shape.area()" → "Shape.area"; "" for another)."""
    return left_out.removeprefix("rewrites ").removesuffix("()") if left_out.startswith("rewrites ") else ""


def candidates_home(
    target: Target | None, edits: Mapping[int, Edit], python: str | Path | None = None
) -> ModuleHome | None:
    """Where plain candidates for `target` run: each one's edited file in a sandboxed copy of its project
    (:func:`assistant.core.home.module_home`), so the module's imports and names resolve; None without a target
    file that exists, or where they cannot run there."""
    if target is None or not target.exists or not edits:
        return None
    from assistant.core.home import module_home

    return module_home(target.path, "", {sample: edit.new for sample, edit in edits.items()}, python)


def plan_edits(
    ranked: Sequence[Ranked], target: Target | None, root: Path | None, replace: Collection[str] = ()
) -> tuple[list[Ranked], list[Edit | None], int]:
    """:func:`plan_candidates` for ranked candidates, in their order (the caller sorts again: a candidate's
    `dropped` may have grown). Returns the kept candidates, their edits, and how many were dropped."""
    if target is None:
        return list(ranked), [None] * len(ranked), 0
    candidates, edits, dropped, _ = plan_candidates([item.candidate for item in ranked], target, root, replace)
    planned = {candidate.sample: candidate for candidate in candidates}
    kept = [Ranked(planned[item.candidate.sample], item.scores) for item in ranked if item.candidate.sample in planned]
    return kept, [edits[item.candidate.sample] for item in kept], sum(dropped.values())


def resample(
    result: GenerateResult,
    position: int,
    backend: Backend,
    *,
    rankers: Sequence[Ranker] | None = None,
    params: SamplingParams | None = None,
    tests: Sequence[str] = (),
    file: str | Path | None = None,
    target: Target | None = None,
    root: Path | None = None,
    progress: Progress | None = None,
    replace: Collection[str] = (),
) -> GenerateResult:
    """`result` with the candidate at `position` replaced by a fresh sample from the same prompt, re-ranked
    (its edit made as :func:`plan_candidates` makes them).

    The new sample is scored by `rankers`, which must be the ones that scored the others (named in
    `result.rankers`; None: sampling order only).

    The new sample gets a seed no earlier sample used. A sample that does not parse, repeats another
    candidate or changes nothing in `file` is a one-line error; the old result stays as it was.
    """
    if not 0 <= position < len(result.candidates):
        raise UsageError(f"there is no candidate #{position + 1}")
    report = progress or (lambda stage, done, total: None)
    params = params or SamplingParams()
    next_sample = max((item.candidate.sample for item in result.candidates), default=-1) + 1
    seed = (params.seed if params.seed is not None else int(time.time())) + 7919 * next_sample
    one = SamplingParams(
        n=1,
        temperature=params.temperature or DEFAULT_TEMPERATURE,
        top_p=params.top_p,
        max_new_tokens=params.max_new_tokens,
        seed=seed,
    )
    started = time.perf_counter()
    usage_before = backend.usage.to_json()
    completions = backend.sample(result.prompt, one, step=lambda done, total: report("generate", done, total))
    report("generate", 1, 1)
    others = [item for i, item in enumerate(result.candidates) if i != position]
    fresh, dropped = collect(list(completions))
    if not fresh:
        why = next(iter(dropped), "empty")
        raise AssistError(f"the new sample was dropped ({why}); try again")
    candidate = replace_field(fresh[0], sample=next_sample)
    if any(normal_form(candidate.code) == normal_form(other.candidate.code) for other in others):
        raise AssistError("the new sample repeats another candidate; try again")
    if target is None and file:
        target = Target.read(file)
    # Only the new sample is scored: the others keep the scores they have (tests are not run again). It runs where
    # they ran: its edited file joins their home.
    home = result.home
    if home is not None and target is not None:
        _, planned, _, _ = plan_candidates([candidate], target, root, replace)
        home = replace_field(home, texts={**home.texts, **{s: e.new for s, e in planned.items()}})
    problem = Problem(requirement=result.requirement, prompt=result.prompt, tests=tuple(tests), home=home)
    new = rank(problem, [candidate], choose(rankers, problem, [candidate]))
    ranked, edits, unchanged = plan_edits([*others, *new], target, root, replace)
    paired = sorted(zip(ranked, edits, strict=True), key=lambda pair: pair[0].key(result.rankers))
    ranked, edits = [pair[0] for pair in paired], [pair[1] for pair in paired]
    if unchanged and not any(item.candidate.sample == next_sample for item in ranked):
        raise AssistError("the new sample changes nothing in the file; try again")
    timings = dict(result.timings, generate=time.perf_counter() - started)
    return replace_field(
        result,
        candidates=ranked,
        edits=edits,
        samples=result.samples + 1,
        timings=timings,
        usage=backend.usage.since(usage_before),
        home=home,
    )
