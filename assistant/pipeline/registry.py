"""The registries: build any retriever (`bm25`, `dense`, `hybrid`, the trained `tstr`, `lail`, `selfracg`) or ranker
(`first`, `random`, `logprob`, `exec`, `agree`, `reviewer`, `coder-reviewer`, the trained `condor`, and the repo's
own tests, `repo-tests`) by name, and choose them when asked for `auto`. `repo-tests` is the one a person never
names: it leads whenever the repo's tests are planned for a filled stub (:func:`resolve_rankers`), and a spec that
names it is refused (:func:`check_rankers`).

They sit above both the plain retrievers and rankers (:mod:`assistant.core`) and the trained methods that build on
them (:mod:`assistant.methods`), so no module below imports them and there is no cycle.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from assistant.backends import Backend
from assistant.core.candidates import Candidate
from assistant.core.rank import (
    REPO_TESTS,
    ExecRanker,
    FirstRanker,
    LogprobRanker,
    RandomRanker,
    Ranker,
    RepoTestsRanker,
)
from assistant.core.retrieve import BM25Retriever, DenseRetriever, HybridRetriever, Retriever
from assistant.errors import UsageError
from assistant.indexing.index import Index, TextEncoder
from assistant.methods import TRAINED_METHODS, in_auto, trained_retrievers
from assistant.progress import Progress

log = logging.getLogger("assistant")

# -- retrievers ------------------------------------------------------------------------------------------------

# (index, encoder, progress=...); the trained ones take their artifact folder too. `progress` hears of the pool
# being embedded by what a method learned or runs (minutes for SelfRACG's branch on a repository's first pass).
RetrieverFactory = Callable[..., Retriever]


def _tstr(index: Index, encoder: TextEncoder, folder: Path | None, progress: Progress | None = None) -> Retriever:
    from assistant.methods.tstr import TstrRetriever  # trained retrievers import torch: only when asked for

    return TstrRetriever.for_index(index, encoder, folder, progress)


def _lail(index: Index, encoder: TextEncoder, folder: Path | None, progress: Progress | None = None) -> Retriever:
    from assistant.methods.lail import LailRetriever

    return LailRetriever.for_index(index, folder, progress)


def _selfracg(index: Index, encoder: TextEncoder, folder: Path | None, progress: Progress | None = None) -> Retriever:
    from assistant.methods.selfracg import SelfRacgRetriever  # the INE needs the transformers model

    return SelfRacgRetriever.for_index(index, folder, progress)


def _selfracg_init(index: Index, encoder: TextEncoder, progress: Progress | None = None) -> Retriever:
    from assistant.methods.selfracg import SelfRacgRetriever

    return SelfRacgRetriever.untrained(index, progress=progress)


RETRIEVERS: dict[str, RetrieverFactory] = {
    "bm25": lambda index, encoder, progress=None: BM25Retriever(index),  # the plain ones read the index's vectors
    "dense": lambda index, encoder, progress=None: DenseRetriever(index, encoder),
    "hybrid": lambda index, encoder, progress=None: HybridRetriever(
        BM25Retriever(index), DenseRetriever(index, encoder)
    ),
    "tstr": _tstr,
    "lail": _lail,
    "selfracg": _selfracg,
    "selfracg-init": _selfracg_init,
}
RETRIEVER_CHOICES = ("auto", *RETRIEVERS)
# How messages name each trained retriever's artifact, as the methods' registry states it.
TRAINED_RETRIEVERS = {name: TRAINED_METHODS[name].what for name in trained_retrievers()}


def make_retriever(
    name: str, index: Index, encoder: TextEncoder, generator: str | None = None, progress: Progress | None = None
) -> Retriever:
    """Build a registered retriever over an index; an unknown name is a one-line error.

    `generator` is the model that will generate. `auto` is hybrid, unless a trained retriever that has earned its
    place in `auto` (:func:`~assistant.methods.in_auto`; none has) was trained for this index's pool and for that
    model; one that cannot load (its embeddings server is down) is skipped with a warning. A trained retriever
    asked for by name whose artifact was trained for another model only is a one-line error naming both; without
    a generator (the evaluations), the one trained last. The retriever carries why it was chosen as `served_by` (see
    :func:`served_by`). A trained retriever's first embedding of the pool is reported to `progress`.
    """
    if name == "auto":
        return _auto_retriever(index, encoder, generator, progress)
    factory = RETRIEVERS.get(name)
    if factory is None:
        raise UsageError(f"unknown retriever {name!r}; choose one of: auto, {', '.join(RETRIEVERS)}")
    if name not in TRAINED_RETRIEVERS:
        return factory(index, encoder, progress=progress)
    folder = trained_folder(name, index, generator)
    return _note(factory(index, encoder, folder, progress=progress), f"{name}: {_describe_artifact(folder)}")


def trained_folder(name: str, index: Index, generator: str | None) -> Path | None:
    """The folder of the trained retriever `name`'s artifact that serves `generator` for this pool; None where
    none was trained (the method's loader then says how to train one); where only other models' were, the
    one-line error naming both and the train command. Without a generator, the latest trained. What
    `make_retriever` builds from, and the benchmarks measure."""
    from assistant.methods.artifacts import (
        artifact_dir,
        find_artifact,
        latest_artifact,
        not_trained_for,
        other_generators,
        read_manifest,
    )

    bases = [artifact_dir(index, name)]
    if name == "selfracg":  # the generic adapters serve any pool without its own
        from assistant.methods.selfracg import generic_dir

        bases.append(generic_dir())
    for base in bases:
        folder = find_artifact(base, generator) if generator is not None else latest_artifact(base)
        if folder is not None and read_manifest(folder) is not None:
            return folder
    others = [base for base in bases if other_generators(base, generator)]
    if others and generator is not None:
        how = f"train one for it: `assist train retriever {name} --model {generator}`"
        raise not_trained_for(TRAINED_RETRIEVERS[name], others[0], generator, how)
    return None


def _auto_retriever(
    index: Index, encoder: TextEncoder, generator: str | None, progress: Progress | None = None
) -> Retriever:
    """auto: the best trained retriever that serves `generator` for this pool and has earned its place in `auto`
    (:func:`~assistant.methods.in_auto`), else hybrid, saying why."""
    from assistant.errors import ModelError
    from assistant.methods.artifacts import METHODS, artifact_dir, other_generators, trained_methods

    trained = trained_methods(index, generator)
    for method, folder in trained:
        if not in_auto(method):
            continue
        try:
            retriever = RETRIEVERS[method](index, encoder, folder, progress=progress)
        except ModelError as exc:  # e.g. the embeddings server TST^R was trained on is down
            log.warning("the trained %s retriever is unavailable (%s); using the next best", method, exc)
            continue
        return _note(retriever, f"auto picked {method}: {_describe_artifact(folder)}")
    kept_out = [method for method, _ in trained if not in_auto(method)]
    others = [
        f"{method} (trained for {' and '.join(names)})"
        for method in METHODS
        if (names := other_generators(artifact_dir(index, method), generator))
    ]
    if kept_out:
        one = len(kept_out) == 1
        why = (
            f"{' and '.join(kept_out)} serve{'s' if one else ''} {generator or 'this pool'} but did not beat "
            f"the plain retrievers where measured, so auto leaves {'it' if one else 'them'} out (name "
            f"{'it' if one else 'one'} to use it)"
        )
    elif others:
        why = f"none serves {generator}: {', '.join(others)}"
    else:
        why = "none is trained for this pool"
    return _note(RETRIEVERS["hybrid"](index, encoder), f"auto picked hybrid: of the trained retrievers, {why}")


def _describe_artifact(folder: Path | None) -> str:
    """A trained artifact as `--explain` names it: its folder, the model it was trained for, and when."""
    from assistant.methods.artifacts import read_manifest, recorded_generator, trained_when

    manifest = read_manifest(folder) if folder is not None else None
    if manifest is None:
        return "the untrained branch" if folder is None else str(folder)
    generator = recorded_generator(manifest)
    made = "no generator enters its training" if generator == "none" else f"trained for {generator}"
    return f"the artifact in {folder} ({made}; {trained_when(manifest)})"


Served = TypeVar("Served", Retriever, Ranker)


def _note(served: Served, why: str) -> Served:
    """Attach why this retriever or ranker (and which trained artifact) serves, for `--explain` and `--json`."""
    with contextlib.suppress(AttributeError):  # one with slots: nothing to say
        served.served_by = why  # type: ignore[union-attr]
    return served


def served_by(served: Retriever | Ranker | None) -> str | None:
    """Why a retriever was chosen, or which trained artifact serves a retriever or ranker (None for a plain one
    asked by name)."""
    return getattr(served, "served_by", None)


# -- rankers ---------------------------------------------------------------------------------------------------

RankerFactory = Callable[[Backend | None], Ranker]


def _needs_backend(backend: Backend | None, ranker: str = "logprob") -> Backend:
    """The backend a likelihood ranker scores with. For `logprob`, whether it can score text itself
    (`backend.can_score`) is asked only when a candidate carries no log-probabilities from sampling (see
    `LogprobRanker.score`); the reviewer always scores (see `ReviewerRanker`)."""
    if backend is None:
        raise UsageError(f"the {ranker} ranker needs a backend that returns log-probabilities")
    return backend


def _agree(backend: Backend | None) -> Ranker:
    from assistant.core.agreement import AgreementRanker

    if backend is None:
        raise UsageError("the agree ranker needs a backend to write tests with")
    return AgreementRanker(backend)


def _reviewer(coder: bool) -> RankerFactory:
    def build(backend: Backend | None) -> Ranker:
        from assistant.core.review import ReviewerRanker

        return ReviewerRanker(_needs_backend(backend, "coder-reviewer" if coder else "reviewer"), coder=coder)

    return build


def _condor(backend: Backend | None) -> Ranker:
    """The discriminator trained for the backend's model (any, without a backend): another model's is an error.
    It carries which artifact it is as `served_by` (see :func:`ranker_served_by`)."""
    from assistant.methods.condor.ranker import CondorRanker  # imports torch: only when asked for

    ranker = CondorRanker(generator=backend.model if backend is not None else None)
    return _note(ranker, f"condor: {_describe_artifact(ranker.model.directory)}")


RANKERS: dict[str, RankerFactory] = {
    "first": lambda backend: FirstRanker(),
    "random": lambda backend: RandomRanker(),
    "logprob": lambda backend: LogprobRanker(_needs_backend(backend)),
    "exec": lambda backend: ExecRanker(),
    "agree": _agree,  # in `auto` without tests: see auto_ranker
    "reviewer": _reviewer(coder=False),  # log p(requirement | code): Coder-Reviewer
    "coder-reviewer": _reviewer(coder=True),  # its sum with the logprob ranker's score
    "condor": _condor,
    REPO_TESTS: lambda backend: RepoTestsRanker(),  # leads where the repo's tests are planned: see resolve_rankers
}
# The rankers a person may name (the repo's tests rank first by themselves, where they are found for a stub).
CHOSEN_RANKERS = tuple(name for name in RANKERS if name != REPO_TESTS)
RANKER_CHOICES = ("auto", *CHOSEN_RANKERS)


def parse_rankers(spec: str) -> list[str]:
    """`exec+logprob` → ["exec", "logprob"]; empty or unknown names are a one-line error, and so is `auto` among
    others (it picks the rankers itself, so it stands alone)."""
    names = [part.strip() for part in spec.split("+")]
    if not any(names):
        raise UsageError("no ranker given")
    if not all(names):  # "exec+", "+exec", "exec++logprob" once passed as "exec" or "exec+logprob"
        raise UsageError(f"ranker {spec!r} has an empty name; join names with one + (e.g. exec+logprob)")
    if "auto" in names:
        raise UsageError(
            f"ranker {spec!r}: auto stands alone (it picks the rankers itself); name it alone, or name the rankers"
        )
    unknown = [n for n in names if n not in RANKERS]
    if unknown:
        raise UsageError(f"unknown ranker {unknown[0]!r}; choose from: {', '.join(RANKER_CHOICES)} (combine with +)")
    return names


def check_rankers(spec: str) -> None:
    """Refuse a ranker spec a person gave (not `auto`) with one line: an empty or unknown name
    (:func:`parse_rankers`), or `repo-tests`, which is never chosen by name (the repo's tests rank a filled stub's
    candidates first by themselves, wherever they are found for it or a test command names them)."""
    if REPO_TESTS in parse_rankers(spec):
        raise UsageError(
            f"the {REPO_TESTS} ranker is not chosen by name: the repo's tests rank a filled stub's candidates first "
            "wherever tests mention it or a test command names them"
        )


def make_rankers(spec: str, backend: Backend | None) -> list[Ranker]:
    """`exec+logprob` → [ExecRanker, LogprobRanker]."""
    return [RANKERS[n](backend) for n in parse_rankers(spec)]


def condor_available(start: Path | None = None, generator: str | None = None) -> bool:
    """Whether a trained discriminator exists for `start` (the working directory by default) that serves
    `generator`, the model whose candidates it would rank (None: any)."""
    from assistant.methods.condor.ranker import condor_available as available

    return available(start, generator)


def ranker_served_by(rankers: Sequence[Ranker], generator: str | None) -> str | None:
    """For `--explain`: which trained discriminator ranked (its folder, the model it was trained for, and when);
    where none did, why: one serves `generator` but has not earned its place in `auto`, or those kept were
    trained only for other models (so `auto` ranked as without one); None otherwise (none trained, or no
    generator to ask for)."""
    for ranker in rankers:
        if (why := served_by(ranker)) is not None:
            return why
    if generator is None:
        return None
    if condor_available(generator=generator):
        if in_auto("condor"):
            return None
        return (
            f"no trained discriminator ranked: the one that serves {generator} did not beat agree and "
            "log-probability where measured, so auto leaves it out (name condor to rank with it)"
        )
    from assistant.methods.artifacts import NotTrainedFor
    from assistant.methods.condor.model import Condor

    try:
        Condor.locate(None, generator)  # none serves `generator`: it loads nothing, it says why
    except NotTrainedFor as exc:
        return f"no trained discriminator ranked: {exc}"
    except UsageError:  # none trained at all: nothing to explain
        return None
    return None


def scorable(backend: Backend, candidates: Sequence[Candidate]) -> bool:
    """Whether log-probabilities are known for these candidates: recorded while sampling, or computable."""
    return backend.can_score or all(c.logprobs for c in candidates)


def auto_ranker(backend: Backend, candidates: Sequence[Candidate], has_tests: bool, runnable: bool = True) -> str:
    """Tests first when there are any. Without tests, agreement on tests the model writes (`agree`) when there
    are candidates to tell apart that define a function and can run (`runnable`: whole programs, or a stub's
    bodies in their module's copy; not a method's, nor a stub's outside a git work tree); then the trained
    discriminator where it has earned its place in `auto` (:func:`~assistant.methods.in_auto`; it has not) and one
    is trained for the backend's model, else log-probability where it is known, else sampling order."""
    order = (
        "condor"
        if in_auto("condor") and condor_available(generator=getattr(backend, "model", None))
        else "logprob"
        if scorable(backend, candidates)
        else "first"
    )
    if has_tests:
        return f"exec+{order}"
    if _agree_fits(has_tests, runnable) and len(candidates) > 1 and _defines_function(candidates):
        return f"agree+{order}"
    return order


def _agree_fits(has_tests: bool, runnable: bool) -> bool:
    """What `auto` asks before choosing agree, as far as it is known before sampling: no tests, runnable candidates."""
    return runnable and not has_tests


def plans_agree(spec: str, has_tests: bool, runnable: bool) -> bool:
    """Whether ranking with `spec` (`auto`, or names joined by `+`) will ask agree for tests, as far as it can be
    told before sampling (what only the candidates tell, :func:`auto_ranker` learns after): agree is named and the
    candidates can run, or `auto` and :func:`_agree_fits`. A wrong guess costs little: tests written and not used,
    or the call made after sampling as without it."""
    names = [part.strip() for part in spec.split("+")]
    return (runnable and "agree" in names) or (names == ["auto"] and _agree_fits(has_tests, runnable))


def _defines_function(candidates: Sequence[Candidate]) -> bool:
    from assistant.core.agreement import entry_point

    return entry_point(candidates) is not None


def resolve_rankers(
    spec: str,
    backend: Backend,
    candidates: Sequence[Candidate],
    has_tests: bool,
    runnable: bool = True,
    repo_tests: bool = False,
) -> str:
    """The ranker spec `spec` means for these candidates (`auto`: :func:`auto_ranker`). With `repo_tests` (the
    repo's own tests are planned for these candidates, a filled stub's) `repo-tests` leads, whatever `spec` names:
    the repo's tests order first, as given tests come first in `auto`."""
    resolved = spec if spec != "auto" else auto_ranker(backend, candidates, has_tests, runnable)
    if not repo_tests:
        return resolved
    return "+".join(dict.fromkeys([REPO_TESTS, *parse_rankers(resolved)]))


def available_rankers(active: str, backend: Backend, candidates: Sequence[Candidate], has_tests: bool) -> list[str]:
    """The active ranker(s) first (`active`: what :func:`resolve_rankers` made of the spec), then every other ranker
    that can score these candidates without a model call (what the TUI shows)."""
    logprob = ["logprob"] if scorable(backend, candidates) else []
    condor = ["condor"] if condor_available(generator=getattr(backend, "model", None)) else []
    available = [*(["exec"] if has_tests else []), *condor, *logprob, "first"]
    return list(dict.fromkeys([*parse_rankers(active), *available]))
