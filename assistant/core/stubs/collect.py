"""Samples into candidates and edits: :func:`collect_stub` reads each sample's body (dropping what is no
candidate, and saying why), :func:`plan_fill` makes the edit that puts one into the file.
"""

from __future__ import annotations

import ast
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from assistant.backends import Completion
from assistant.code.edit import (
    LEFT_OUT,
    Edit,
    add_missing_imports,
    make_edit,
    merge,
    own_module_names,
    read_target_source,
)
from assistant.code.fences import code_span
from assistant.code.parse import parse_module
from assistant.core.candidates import Candidate, CutOff, repeats_itself
from assistant.core.stubs.body import Taken, _params, fill_body, indent_body, take_body
from assistant.core.stubs.find import Stub, _form
from assistant.core.target import Target


def plan_fill(path: Path | Target, stub: Stub, taken: Taken, root: Path | None = None) -> Edit:
    """The edit that fills the stub in `path` (a path, or the file as already read) with `taken`'s body (and adds
    imports the file lacks). Writes nothing.

    The stub must describe the file as it is (the edit is refused at apply time if the file changed since)."""
    if isinstance(path, Target):
        named, raw, old_text = Path(path.given).expanduser().absolute(), path.raw, path.text
    else:
        named = Path(path).expanduser().absolute()
        raw, old_text, _ = read_target_source(named.resolve())
    new = fill_body(old_text, stub, taken.body)
    # A body rewritten on request (a requirement given for a function that has one) is not a stub filled.
    actions = [f"{'fill' if stub.is_stub else 'rewrite'} {stub.qualname}"]
    # Never an import of the file itself: inside it, that is a circular import.
    own = own_module_names(named, root)
    if taken.imports:
        # The file's lines keep their endings (a file may mix them); the imports take the stub's.
        merged, done = merge(new, "\n".join(taken.imports) + "\n", own, newline=stub.newline)
        if done:
            new = merged
            actions += done
    new, added = add_missing_imports(old_text, new, own, newline=stub.newline)
    actions += added
    actions += [f"{LEFT_OUT}{other}" for other in taken.others]
    return make_edit(named, raw, old_text, new, actions, root)


def collect_stub(
    completions: Sequence[Completion], stub: Stub, prefix: str, existing: Sequence[str]
) -> tuple[list[tuple[Candidate, Taken]], Counter[str], list[CutOff]]:
    """Candidates for a stub from samples: each sample's new body, the function it makes (the candidate's code),
    what else it wrote (dropped, named in `Candidate.dropped`), and the samples cut off by the token limit.

    `prefix` is the code the answer was prefilled with (the stub's head), "" when the model wrote the whole
    function. Duplicates are dropped by the new body's syntax tree."""
    kept: list[tuple[Candidate, Taken]] = []
    dropped: Counter[str] = Counter()
    cut: list[CutOff] = []
    seen: set[str] = set()
    head = stub.dedented_head()
    for number, completion in enumerate(completions):
        if prefix:
            start, end = code_span(completion.text) if "```" in completion.text else (0, len(completion.text))
            code = prefix + completion.text[start:end].replace("\r\n", "\n")
        else:
            start, end = code_span(completion.text)
            code = completion.text[start:end].replace("\r\n", "\n")
        finished = completion.finish_reason != "length"
        taken = take_body(code, stub.name, existing, finished)
        if isinstance(taken, str):
            if taken == "cut off":
                looping = completion.cut_reason == "looping" or repeats_itself(completion.text)
                reason = completion.cut_reason or "token limit"  # the engine may end a straggler early
                cut.append(CutOff(number, completion.tokens, completion.text, looping, reason))
            dropped[taken] += 1
            continue
        function = head + "\n" + "\n".join(indent_body(taken.body, _relative(stub))) + "\n"
        try:
            tree = parse_module(function)
        except (SyntaxError, ValueError):
            dropped["syntax"] += 1
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes and the like: the file's own check says them
                compile(tree, "<candidate>", "exec", dont_inherit=True)  # `await` outside async, and the like
        except (SyntaxError, ValueError):
            dropped["syntax"] += 1
            continue
        written = tree.body[0]
        if isinstance(written, ast.FunctionDef | ast.AsyncFunctionDef) and _form(
            written.body, ast.get_docstring(written) is not None
        ) in ("...", "pass", "raise NotImplementedError"):
            dropped["still a stub"] += 1
            continue
        if isinstance(written, ast.FunctionDef | ast.AsyncFunctionDef):
            # A sample that wrote its own signature: a body using a parameter the stub lacks cannot go under it.
            names = [n for n in ast.walk(written) if isinstance(n, ast.Name)]
            used = {n.id for n in names if isinstance(n.ctx, ast.Load)} - {
                n.id for n in names if not isinstance(n.ctx, ast.Load)
            }  # read, never bound in the body: a name the stub's signature would have to supply
            if (set(taken.params) - set(_params(written))) & used:
                dropped["another signature"] += 1
                continue
        form = ast.dump(tree)
        if form in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(form)
        candidate = Candidate(
            code=function,
            sample=number,
            tokens=completion.tokens,
            logprobs=completion.logprobs,
            dropped=taken.others,
            imports=taken.imports,
        )
        kept.append((candidate, taken))
    return kept, dropped, cut


def _relative(stub: Stub) -> Stub:
    """The stub as if its `def` sat at column 0 (to show a candidate as a function on its own)."""
    body_indent = stub.body_indent[len(stub.indent) :] if stub.body_indent.startswith(stub.indent) else "    "
    return replace(stub, indent="", body_indent=body_indent or "    ")
