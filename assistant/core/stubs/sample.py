"""Sampling a stub's requests: batched by shared settings (:func:`sample_stubs`; other requests may ride along with
the first batch, :func:`sample_stubs_beside`), a cut-off batch retried once at twice the limit (greedy ones carried
on, :func:`carry_on`), and samples that wrote nothing drawn once more in their places (:func:`redraw_empty`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from assistant.backends import Backend, Completion, Prompt, SampleGroup, SamplingParams, Step
from assistant.core.stubs.collect import collect_stub
from assistant.core.stubs.request import StubRequest
from assistant.progress import Progress


def sample_stub(
    request: StubRequest, backend: Backend, params: SamplingParams, progress: Progress | None = None
) -> tuple[list[Completion], int]:
    """The request's samples, and the token limit they ended with: when the limit was sized to the docstring
    and every sample was cut off by it, the cut-off ones are sampled once more at twice the limit (a greedy one
    that repeats its lines is not: more room would only lengthen its loop)."""
    return sample_stubs([request], backend, [params], progress)[0]


def sample_stubs(
    requests: Sequence[StubRequest],
    backend: Backend,
    params: Sequence[SamplingParams],
    progress: Progress | None = None,
) -> list[tuple[list[Completion], int]]:
    """:func:`sample_stub` for several requests (one `params` each): requests that share a token limit and
    sampling settings go to the backend in one `sample_batch` call, each with its own seed, so a request's
    samples do not depend on its neighbours' (up to the rounding of batched arithmetic); the retries at twice
    the limit run one request at a time."""
    return sample_stubs_beside(requests, backend, params, (), progress)[0]


def sample_stubs_beside(
    requests: Sequence[StubRequest],
    backend: Backend,
    params: Sequence[SamplingParams],
    beside: Sequence[SampleGroup],
    progress: Progress | None = None,
) -> tuple[list[tuple[list[Completion], int]], list[list[list[Completion]]]]:
    """:func:`sample_stubs`, with other requests (`beside`, such as agree's test-writing call) decoded in its first
    backend call, together with the first batch of samples (`Backend.sample_groups`): a backend that decodes them
    together pays little more than for the samples alone. The samples, and each group's completions of `beside`
    (its own `sample_batch`'s)."""
    if len(params) != len(requests):
        raise ValueError("one SamplingParams per request")
    report = progress or (lambda stage, done, total: None)

    def step(done: int, total: int) -> None:
        report("generate", done, total)

    owned = [replace(p, max_new_tokens=r.limit) for r, p in zip(requests, params, strict=True)]
    groups: dict[tuple, list[int]] = {}
    for position, p in enumerate(owned):
        groups.setdefault((p.n, p.temperature, p.top_p, p.max_new_tokens), []).append(position)
    first: list[list[Completion]] = [[] for _ in requests]
    side: list[list[list[Completion]]] = []
    report("generate", 0, 1)
    for number, members in enumerate(groups.values()):
        prompts, seeds = [requests[i].prompt for i in members], [owned[i].seed for i in members]
        if number == 0 and beside:
            own = SampleGroup(tuple(prompts), owned[members[0]], tuple(seeds))
            sampled, *side = backend.sample_groups([own, *beside], step=step)
        else:
            sampled = backend.sample_batch(prompts, owned[members[0]], step=step, seeds=seeds)
        for position, completions in zip(members, sampled, strict=True):
            first[position] = list(completions)
    results = []
    for request, p, completions in zip(requests, owned, first, strict=True):
        limit = p.max_new_tokens
        kept, _, cut = collect_stub(completions, request.stub, request.prefix, request.existing)
        greedy = p.temperature <= 0
        if greedy:
            # A greedy sample going round in a loop would only go on looping with more room: not retried.
            cut = [c for c in cut if not c.repeating]
        if not kept and cut and request.sized:
            # Every sample ran out of room: the limit was too small for this function. Once, with twice as much.
            limit = min(2 * limit, 2048)
            if greedy and backend.prefills_answer:
                more = replace(p, n=1, max_new_tokens=limit - p.max_new_tokens)
                retried = carry_on(backend, request.prompt, [completions[c.sample] for c in cut], more, step)
            else:
                retry = replace(p, n=len(cut), max_new_tokens=limit, seed=None if p.seed is None else p.seed + 1)
                retried = backend.sample(request.prompt, retry, step=step)
            completions = [*completions, *retried]
        results.append((completions, limit))
    report("generate", 1, 1)
    return results, side


def carry_on(
    backend: Backend, prompt: Prompt, cut: Sequence[Completion], more: SamplingParams, step: Step | None = None
) -> list[Completion]:
    """Greedy samples cut off by their limit, each carried on from where it stopped for `more.max_new_tokens`.

    A greedy draw at twice the limit would begin with the very tokens already drawn, so decoding them again
    (most of a CPU's time for a long body) buys nothing: the cut-off text joins the answer's prefill and only
    the rest is decoded. Sampled retries are drawn afresh instead (a fresh draw may take a shorter path, where
    carrying on commits to the long one)."""
    prompts = [replace(prompt, answer_prefix=prompt.answer_prefix + completion.text) for completion in cut]
    rests = backend.sample_batch(prompts, more, step=step)
    carried = []
    for completion, (rest, *_) in zip(cut, rests, strict=True):
        both = None if completion.logprobs is None or rest.logprobs is None else completion.logprobs + rest.logprobs
        text, tokens = completion.text + rest.text, completion.tokens + rest.tokens
        carried.append(Completion(text, tokens, rest.finish_reason, both))
    return carried


#: Why a sample that wrote nothing was dropped: it re-typed the stub (`...`, `pass`, `raise NotImplementedError`,
#: often copying the prompt's "# <- write this body" line) or ended right after the docstring.
WROTE_NOTHING = frozenset({"still a stub", "no body"})


def wrote_nothing(completion: Completion, request: StubRequest) -> bool:
    """Whether a sample left the stub as it was (see :data:`WROTE_NOTHING`)."""
    kept, dropped, _ = collect_stub([completion], request.stub, request.prefix, request.existing)
    return not kept and not WROTE_NOTHING.isdisjoint(dropped)


def redraw_empty(
    requests: Sequence[StubRequest],
    completions: Sequence[Sequence[Completion]],
    backend: Backend,
    params: Sequence[SamplingParams],
    progress: Progress | None = None,
) -> list[tuple[list[Completion], list[int]]]:
    """Each request's `completions` with every sample that wrote nothing drawn once more in its place, and the
    places redrawn (one `params` each, with the token limit its first samples ended with).

    A small model re-types the stub it was shown in about one sample in ten; such a sample is no candidate, so
    the user would get fewer than the `-n` asked for. Each new sample is drawn on its own (n=1) with the seed
    moved by 2 plus its number (the cut-off retry takes +1), so it depends only on its request and place; all of
    them go to the backend in one `sample_batch` call per sampling setting. One that again writes nothing stays.
    """
    if not len(requests) == len(completions) == len(params):
        raise ValueError("one list of completions and one SamplingParams per request")
    report = progress or (lambda stage, done, total: None)
    redrawn = [list(samples) for samples in completions]
    places: list[list[int]] = [[] for _ in requests]
    wanted: dict[tuple, list[tuple[int, int]]] = {}  # sampling setting -> (request, sample number)
    for position, (request, samples, p) in enumerate(zip(requests, completions, params, strict=True)):
        for number, completion in enumerate(samples):
            if wrote_nothing(completion, request):
                wanted.setdefault((p.temperature, p.top_p, p.max_new_tokens), []).append((position, number))
    for members in wanted.values():
        first = params[members[0][0]]
        drawn = backend.sample_batch(
            [requests[position].prompt for position, _ in members],
            replace(first, n=1),
            step=lambda done, total: report("generate", done, total),
            seeds=[None if params[i].seed is None else params[i].seed + 2 + number for i, number in members],
        )
        for (position, number), samples in zip(members, drawn, strict=True):
            if samples:
                redrawn[position][number] = samples[0]
                places[position].append(number)
    return [(samples, sorted(at)) for samples, at in zip(redrawn, places, strict=True)]
