"""Candidates: code cut out of sampled completions, kept only if it parses, de-duplicated by syntax tree."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from assistant.backends import Completion
from assistant.code.fences import extract_code
from assistant.code.parse import parse_module


@dataclass(frozen=True)
class Candidate:
    """A parsed, distinct program; `sample` is its position among the raw samples (0 = first sampled)."""

    code: str
    sample: int
    tokens: int = 0
    logprobs: tuple[float, ...] | None = None  # as sampled, when the backend reported them
    # Other definitions the sample also wrote, left out of the edit (filling a stub: "rewrites helper()").
    dropped: tuple[str, ...] = ()
    # Filling a stub: the top-level imports it wrote (`code` holds the function alone), for an edit planned again.
    imports: tuple[str, ...] = ()
    # Bare names its edit reads that nothing in the file binds, and `self.x` its class defines nowhere
    # (`Edit.undefined`): a NameError or an AttributeError when it runs.
    undefined: tuple[str, ...] = ()


@dataclass(frozen=True)
class CutOff:
    """A sample that reached the token limit before its code ended: reported, never a candidate."""

    sample: int
    tokens: int
    text: str
    repeating: bool = False  # it was going round in a loop (see `repeats_itself`)
    # What ended it: the token limit, or the engine ending a straggler early (`assistant.backends.loops`).
    reason: str = "token limit"

    def to_json(self) -> dict:
        """Its fields, the reason said as a report says it ("cut off: token limit")."""
        return {**asdict(self), "reason": f"cut off: {self.reason}"}


def repeats_itself(text: str, times: int = 3, least: int = 6) -> bool:
    """Whether a sample is going round in a loop: more than half of its non-blank lines (it has at least
    `least`) are lines it writes `times` times or more.

    Real bodies rarely look like that; a greedy sample that ran into its limit usually does, and decoding it
    further only lengthens the loop (in the greedy repository run, 21 of the 37 cut-off samples did, and none
    of those 21 ended at twice the limit; the 2 that did were not repeating)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < least:
        return False
    counts = Counter(lines)
    return 2 * sum(1 for line in lines if counts[line] >= times) > len(lines)


def cut_off_note(cut: int, samples: int, limit: int | None, loops: int, more_room: str, sample_instead: str) -> str:
    """The one-line warning every door gives when `cut` of `samples` ran into the token limit (`loops` of them
    going round in a loop); `more_room` and `sample_instead` say how to ask for more room or for sampling there."""
    at = f"the {limit}-token limit" if limit else "the token limit"
    if not loops:
        advice = more_room
    elif loops >= cut:
        advice = f"{'it' if cut == 1 else 'all'} went round in a loop, which more room would not end: {sample_instead}"
    else:
        advice = f"{loops} of them went round in a loop, which more room would not end; for the others, {more_room}"
    return (
        f"{cut} of {samples} sample{'s' if samples != 1 else ''} ran into {at} before the code ended and "
        f"{'was' if cut == 1 else 'were'} left out; {advice}"
    )


def cut_early_note(cut_off: Sequence[CutOff]) -> str:
    """What the warning adds for samples the engine ended early rather than the token limit (a loop, or one
    running far past the others: `assistant.backends.loops`), e.g. "1 of them was ended early (cut off:
    looping)"; "" when the limit cut them all."""
    reasons = Counter(c.reason for c in cut_off if c.reason != "token limit")
    return "; ".join(
        f"{count} of them {'was' if count == 1 else 'were'} ended early (cut off: {reason})"
        for reason, count in reasons.items()
    )


def normal_form(code: str) -> str:
    """The code's syntax tree as text: equal for programs that differ only in formatting and comments."""
    # ast.dump ignores formatting and comments, so two samples that differ only there count once.
    return ast.dump(parse_module(code))


def collect(completions: Sequence[Completion]) -> tuple[list[Candidate], Counter[str]]:
    """Turn completions into candidates; also count what was dropped and why (`empty`, `syntax`, `duplicate`,
    `cut off`: a sample that reached the token limit and does not parse)."""
    seen: set[str] = set()
    kept: list[Candidate] = []
    dropped: Counter[str] = Counter()
    for number, completion in enumerate(completions):
        code = extract_code(completion.text)
        if not code.strip():
            dropped["empty"] += 1
            continue
        try:
            form = normal_form(code)
        except (SyntaxError, ValueError):
            dropped["cut off" if completion.finish_reason == "length" else "syntax"] += 1
            continue
        if form in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(form)
        kept.append(Candidate(code=code, sample=number, tokens=completion.tokens, logprobs=completion.logprobs))
    return kept, dropped
