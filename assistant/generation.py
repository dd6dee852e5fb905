"""The generation pipeline: retrieve demonstrations → prompt → sample → keep parsable distinct code → rank → diff."""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .backends import Backend, SamplingParams
from .candidates import Candidate, collect
from .edit import Edit, plan_edit, read_target
from .errors import UsageError
from .extract import first_paragraph
from .prompts import Prompt, build_prompt
from .rank import Problem, Ranked, make_rankers, rank
from .retrieve import Hit, Retriever

# progress(stage, done, total): stages "retrieve", "generate", "rank".
Progress = Callable[[str, int, int], None]

FILE_CONTEXT_LINES = 200


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
                }
                for number, (ranked, edit) in enumerate(zip(self.candidates, self.edits, strict=True), start=1)
            ],
        }


def read_tests(path: str | Path) -> list[str]:
    """Test chunks from a Python file: each `assert` together with the statements just before it."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except OSError as exc:
        raise UsageError(f"cannot read tests file {path}: {exc.strerror}") from None
    except SyntaxError as exc:
        raise UsageError(f"tests file {path} does not parse (line {exc.lineno}: {exc.msg})") from None
    lines = source.splitlines()
    chunks: list[str] = []
    pending: list[str] = []
    for node in tree.body:
        pending.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
        if isinstance(node, ast.Assert):
            chunks.append("\n".join(pending))
            pending = []
    if pending and chunks:
        chunks[-1] += "\n" + "\n".join(pending)
    if not chunks:
        raise UsageError(f"tests file {path} has no assert statements")
    return chunks


def file_context(path: Path) -> str:
    """An outline of the target file for the prompt: its imports and each definition's signature and
    docstring summary, bodies elided.

    A small model shown whole bodies tends to copy them back instead of writing what was asked; the
    outline tells it what exists (names to reuse, style) without that pull. A file that does not parse
    is shown as its first lines.
    """
    if not path.exists():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        lines = text.splitlines()
        return "\n".join(lines[:FILE_CONTEXT_LINES])
    lines = text.splitlines()
    outline: list[str] = []

    def summarize(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, indent: str) -> None:
        header = lines[node.lineno - 1].strip()
        outline.append(indent + header)
        docstring = ast.get_docstring(node)
        if docstring:
            outline.append(f'{indent}    """{first_paragraph(docstring)}"""')
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    summarize(child, indent + "    ")
        else:
            outline.append(indent + "    ...")

    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            outline.append(ast.get_source_segment(text, node) or ast.unparse(node))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            outline.append("")
            summarize(node, "")
    return "\n".join(outline[:FILE_CONTEXT_LINES]).strip("\n")


def generate(
    requirement: str,
    backend: Backend,
    *,
    retriever: Retriever | None = None,
    k: int = 4,
    params: SamplingParams | None = None,
    tests: Sequence[str] = (),
    file: str | Path | None = None,
    root: Path | None = None,
    ranker: str = "auto",
    progress: Progress | None = None,
) -> GenerateResult:
    """Generate ranked candidates for a requirement.

    `ranker="auto"` ranks by tests passed then log-probability when tests are given, else by
    log-probability. With `file`, every candidate comes with the diff that would put it into that file.
    """
    requirement = requirement.strip()
    if not requirement:
        raise UsageError("the requirement is empty; say what the code should do")
    if k < 0:
        raise UsageError("-k must be 0 or more")
    params = params or SamplingParams()
    if params.n < 1:
        raise UsageError("-n must be at least 1")
    report = progress or (lambda stage, done, total: None)
    timings: dict[str, float] = {}
    target = Path(file).expanduser().resolve() if file else None
    if target is not None:
        read_target(target)  # a file assist could not edit fails now, not after a minute of sampling

    display = ""
    if target is not None:
        display = str(target.relative_to(root)) if root and target.is_relative_to(root) else str(file)

    started = time.perf_counter()
    report("retrieve", 0, 1)
    # The target file's own functions are in the prompt already; as demonstrations too they only
    # invite the model to copy them back.
    exclude = (lambda example: example.path == display) if display else None
    hits = retriever.search(requirement, k, exclude) if retriever is not None and k > 0 else []
    report("retrieve", 1, 1)
    timings["retrieve"] = time.perf_counter() - started
    prompt = build_prompt(
        requirement,
        [hit.example for hit in reversed(hits)],  # most similar last, nearest the request
        tests=tests,
        file_path=display,
        file_context=file_context(target) if target else "",
    )
    prompt_tokens = backend.count_tokens(prompt)

    started = time.perf_counter()
    usage_before = backend.usage.to_json()
    report("generate", 0, params.n)
    completions = backend.sample(prompt, params)
    report("generate", params.n, params.n)
    timings["generate"] = time.perf_counter() - started
    candidates, dropped = collect(completions)

    started = time.perf_counter()
    spec = ranker if ranker != "auto" else auto_ranker(backend, candidates, bool(tests))
    rankers = make_rankers(spec, backend)
    report("rank", 0, len(candidates))
    problem = Problem(requirement=requirement, prompt=prompt, tests=tuple(tests))
    ranked = rank(problem, candidates, rankers) if candidates else []
    report("rank", len(candidates), len(candidates))
    timings["rank"] = time.perf_counter() - started

    edits: list[Edit | None] = [None] * len(ranked)
    if target is not None:
        # A candidate that only repeats what the file already has is no answer: drop it.
        planned = [(item, plan_edit(target, item.candidate.code, root)) for item in ranked]
        kept = [(item, edit) for item, edit in planned if edit.new != edit.old]
        if len(kept) < len(planned):
            dropped["no change"] = len(planned) - len(kept)
        ranked = [item for item, _ in kept]
        edits = [edit for _, edit in kept]

    return GenerateResult(
        requirement=requirement,
        model=backend.model,
        backend=backend.name,
        retriever=retriever.name if retriever is not None and k > 0 else "none",
        rankers=[r.name for r in rankers],
        demonstrations=hits,
        candidates=ranked,
        edits=edits,
        prompt=prompt,
        prompt_tokens=prompt_tokens,
        samples=len(completions),
        dropped=dict(dropped),
        timings=timings,
        usage=backend.usage.since(usage_before),
    )


def auto_ranker(backend: Backend, candidates: Sequence[Candidate], has_tests: bool) -> str:
    """Tests first when there are any, then log-probability where it is known (else sampling order)."""
    scored = backend.can_score or all(c.logprobs for c in candidates)
    order = "logprob" if scored else "first"
    return f"exec+{order}" if has_tests else order
