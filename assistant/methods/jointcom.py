"""JOINTCOM with a frozen LLM: a docstring-exemplar retriever trained from the generator's own loss.

(`../shared/docs/methods.md`, section 4.) For each documented function x of the pool, the retriever (an
encoder over code, cosine scores) retrieves its top k exemplars r_1..r_k from the rest of the pool. The
generator, frozen, gives each exemplar a loss: L_j = −mean log p(y | prompt with exemplar r_j and x), y the
function's real docstring summary. The retriever is trained to minimise Σ_j softmax(s / τ)_j · L_j, which
moves probability onto the exemplars that make the real docstring likeliest. The index (every exemplar's
vector) is recomputed with the current encoder at the start of each epoch, as in the paper.

Because the generator is frozen, L_j depends only on (x, r_j): losses are cached on disk and an interrupted
or repeated run asks the model only for pairs it has not scored. At prediction time the trained encoder is
used like the dense exemplar retriever (the single best exemplar, or k).
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from assistant.backends import Backend
from assistant.backends.encoder import embed_texts
from assistant.backends.prompts import Prompt
from assistant.cache import JsonlCache, cache_key
from assistant.code.docstrings import find_missing
from assistant.code.examples import Example
from assistant.code.extract import first_paragraph
from assistant.core.docwriter import build_docstring_prompt, split_docstring_safe
from assistant.errors import UsageError
from assistant.methods.artifacts import TrainedEncoder, find_artifact, fingerprint, latest_artifact, read_manifest
from assistant.methods.losses import expected_generator_loss
from assistant.paths import cache_dir, repo_dir
from assistant.progress import Progress


@dataclass(frozen=True)
class JointcomConfig:
    """Settings sized for a 2-core CPU: the LLM scores limit × k pairs in the first epoch (fewer later, most
    are cached). Paper: all training pairs, k = 4, GPU."""

    k: int = 4
    epochs: int = 2
    limit: int | None = 120  # training functions drawn from the pool (None: all)
    batch: int = 8
    lr: float = 2e-5
    temperature: float = 0.05  # cosine scores are in [-1, 1]; /τ lets the softmax choose
    max_length: int = 256
    seed: int = 0


class Jointcom(TrainedEncoder):
    """JOINTCOM's trained object: the exemplar encoder trained from the generator's loss, and the manifest naming
    that generator (`{"backend", "model"}`). `save(directory)` / `Jointcom.load(directory)` (see
    :class:`~assistant.methods.artifacts.TrainedEncoder`)."""

    method = "jointcom"
    what = "JOINTCOM retriever"


@dataclass(frozen=True)
class Documented:
    """A pool function: its code without the docstring, and the docstring's summary (the generation target)."""

    example: Example
    code: str
    summary: str


def documented(pool: Sequence[Example]) -> list[Documented]:
    """The pool's functions that have a docstring summary and parse."""
    found = []
    for example in pool:
        code, doc = split_docstring_safe(example.code)
        summary = first_paragraph(doc) if doc else ""
        if summary and find_missing(code):
            found.append(Documented(example, code, summary))
    return found


def retriever_dir(pool: Sequence[Example], root: Path | None = None) -> Path:
    """`<repo>/.assist/retrievers/jointcom`, or for a pool outside a repo the user cache, keyed by its content."""
    if root is not None:
        return repo_dir(root) / "retrievers" / "jointcom"
    return cache_dir() / "retrievers" / f"jointcom-{fingerprint(pool)[:16]}"


def generator_losses(
    backend: Backend,
    pairs: Sequence[tuple[Documented, Example]],
    cache: JsonlCache,
    progress: Progress | None = None,
) -> list[float]:
    """−mean token log-probability of each target's real summary given one exemplar (cached by content)."""

    def prompt(target: Documented, exemplar: Example) -> tuple[Prompt, str]:
        return build_docstring_prompt(find_missing(target.code)[0], [exemplar], "plain"), target.summary + '"""'

    def key(target: Documented, exemplar: Example) -> str:
        # Keyed by the whole prompt: a changed template or exemplar rendering is a new pair.
        question, answer = prompt(target, exemplar)
        # The engine's identity too: int8 and fp32 losses of one model are not the same numbers.
        model = backend.identity.label
        return cache_key(kind="jointcom-loss", model=model, prompt=question.to_json(), answer=answer)

    missing = [(t, e) for t, e in pairs if key(t, e) not in cache]
    if missing:
        prompts = [prompt(t, e) for t, e in missing]
        for start in range(0, len(prompts), 8):
            scored = backend.logprob(prompts[start : start + 8])
            for (target, exemplar), result in zip(missing[start : start + 8], scored, strict=True):
                cache.put(key(target, exemplar), -result.mean)
            if progress:
                progress("generator loss", start + len(scored), len(prompts))
    return [float(cache.get(key(t, e))) for t, e in pairs]


def train_docstring_retriever(
    pool: Sequence[Example],
    backend: Backend,
    encoder_dir: Path,
    directory: Path,
    config: JointcomConfig | None = None,
    progress: Progress | None = None,
    provenance: dict | None = None,
) -> dict:
    """Train the exemplar retriever from the generator's loss; save it (with its manifest, which names the
    generator it serves) to `directory`."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    config = config or JointcomConfig()
    report = progress or (lambda stage, done, total: None)
    if not backend.can_score:
        raise UsageError(f"training needs a backend that scores given text: {backend.scoring_unavailable}")
    items = documented(pool)
    if len({item.code for item in items}) < config.k + 2:
        raise UsageError(f"the pool has {len(items)} documented functions; JOINTCOM needs more than {config.k + 1}")
    directory.mkdir(parents=True, exist_ok=True)
    cache = JsonlCache(directory / "losses.jsonl")
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(encoder_dir), trust_remote_code=False)
    model = AutoModel.from_pretrained(str(encoder_dir), dtype=torch.float32, trust_remote_code=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    chosen = list(range(len(items)))
    rng.shuffle(chosen)
    chosen = sorted(chosen[: config.limit]) if config.limit else chosen
    codes = [item.code for item in items]
    started = time.perf_counter()
    epochs: list[dict] = []
    for epoch in range(config.epochs):
        neighbours = _top_exemplars(model, tokenizer, codes, chosen, config)
        chosen = [i for i in chosen if len(neighbours[i]) == config.k]
        pairs = [(items[i], items[j].example) for i in chosen for j in neighbours[i]]
        losses = generator_losses(backend, pairs, cache, lambda s, d, t, e=epoch: report(f"epoch {e + 1}: {s}", d, t))
        by_query = {i: losses[n * config.k : (n + 1) * config.k] for n, i in enumerate(chosen)}
        order = list(chosen)
        rng.shuffle(order)
        step = (model, tokenizer, optimizer)
        total, expected_before = _train_epoch(step, codes, neighbours, by_query, order, config, report, epoch)
        best = float(np.mean([min(v) for v in by_query.values()]))
        epochs.append(
            {
                "expected_loss": round(total / len(order), 4),  # Σ softmax · L, what training minimises
                "uniform_loss": round(expected_before / len(order), 4),  # the same with equal weights
                "best_of_k_loss": round(best, 4),  # what a perfect choice among the k would give
            }
        )
    model.eval()
    stats = {"functions": len(items), "trained_on": len(chosen), "epochs": epochs,
             "seconds": round(time.perf_counter() - started, 1), "losses_cached": len(cache.entries)}  # fmt: skip
    manifest = {
        "config": asdict(config),
        "generator": {"backend": backend.name, "model": backend.model},
        "pool": provenance or {},
        "trained": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "stats": stats,
    }
    return Jointcom(manifest, model, tokenizer).save(directory)


def _top_exemplars(
    model: Any, tokenizer: Any, codes: Sequence[str], chosen: Sequence[int], config: JointcomConfig
) -> dict[int, list[int]]:
    """Each training function's top k exemplars by the current encoder, the index refreshed first (as the paper
    does each epoch); never the function itself, nor an exact copy of its code."""
    import numpy as np
    import torch

    model.eval()
    with torch.inference_mode():
        index = np.concatenate(
            [
                embed_texts(model, tokenizer, codes[s : s + 64], config.max_length).numpy()
                for s in range(0, len(codes), 64)
            ]
        )
    neighbours = {}
    for i in chosen:
        scores = index @ index[i]
        scores[i] = -np.inf
        for j in np.flatnonzero(np.asarray(codes) == codes[i]):
            scores[j] = -np.inf
        neighbours[i] = [int(j) for j in np.argsort(-scores)[: config.k] if np.isfinite(scores[j])]
    return neighbours


def _train_epoch(
    step: tuple[Any, Any, Any],
    codes: Sequence[str],
    neighbours: dict[int, list[int]],
    by_query: dict[int, list[float]],
    order: Sequence[int],
    config: JointcomConfig,
    report: Progress,
    epoch: int,
) -> tuple[float, float]:
    """One pass in `order` minimising the expected generator loss (:func:`~assistant.methods.losses.
    expected_generator_loss`); returns its sum over the queries, and the same under equal weights."""
    import torch

    model, tokenizer, optimizer = step
    model.train()
    total, expected_before = 0.0, 0.0
    for start in range(0, len(order), config.batch):
        batch = order[start : start + config.batch]
        queries = embed_texts(model, tokenizer, [codes[i] for i in batch], config.max_length)
        candidates = embed_texts(model, tokenizer, [codes[j] for i in batch for j in neighbours[i]], config.max_length)
        candidates = candidates.view(len(batch), config.k, -1)
        scores = (candidates @ queries.unsqueeze(-1)).squeeze(-1)
        target = torch.tensor([by_query[i] for i in batch], dtype=torch.float32)
        loss = expected_generator_loss(scores, config.temperature, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
        expected_before += target.mean(-1).sum().item()
        report(f"epoch {epoch + 1}: train", start + len(batch), len(order))
    return total, expected_before


def trained_encoder(directory: Path, generator: str | None = None):  # -> Encoder | None
    """The encoder of the retriever trained at `directory`: among those kept side by side there, the one that
    serves `generator` (its losses came from that model), or without one the latest trained; None when there is
    none (for that model)."""
    folder = find_artifact(directory, generator) if generator is not None else latest_artifact(directory)
    if folder is None or read_manifest(folder) is None:
        return None
    return Jointcom.load(folder).encoder
