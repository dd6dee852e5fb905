"""LAIL (LLM-aware in-context learning): the LLM labels which demonstrations help it, and an encoder learns
to retrieve those (`../shared/docs/methods.md`, section 1).

Labeling, for every example e_i = (x_i, y_i) of the pool:
  1. BM25 over requirements keeps the top t other examples as S_i;
  2. each candidate q in S_i is scored by the LLM's mean token log-probability of y_i given the prompt
     (x_q, y_q, x_i) — the same prompt `assist generate` builds with one demonstration. No generation;
  3. the top z are positives, the bottom v soft negatives.
Training: the encoder (default MiniLM) with InfoNCE over cosine / τ: for each query x_i, one positive, one
soft negative, and h hard negatives drawn from outside S_i (shared by the batch, plus the other queries'
candidates when they are not in S_i). Optionally (`loss="listwise"`, not in the paper) every candidate of S_i
teaches, with softmax(label / label τ) as the target distribution.

Cost on a 2-core CPU is dominated by labeling: every pair is one prompt. Pairs that share a demonstration
share its forward pass (the prompt's prefix KV cache), so a pair costs only the tokens of x_i and y_i.
Defaults are scaled to finish a few hundred examples within an hour; the paper's settings are beside them.
The labeler can also be an OpenAI-compatible server whose completions endpoint echoes prompt log-probabilities
(vLLM); servers whose echo is missing or misaligned are refused (see `OpenAIBackend.check_echo`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from assistant.backends import Backend
from assistant.backends.encoder import MAX_TOKENS, dot_scores, embed_texts
from assistant.backends.prompts import build_prompt
from assistant.cache import JsonlCache, cache_key
from assistant.code.examples import Example
from assistant.code.extract import written_requirement
from assistant.core.retrieve import BM25Retriever, Exclude, Hit, top_rows
from assistant.errors import UsageError
from assistant.indexing.index import Index, TextEncoder, embedding_text
from assistant.methods.artifacts import TrainedEncoder, artifact_dir, cached_vectors, describe_pool
from assistant.methods.losses import masked_infonce, soft_target_cross_entropy
from assistant.paths import atomic_write_bytes
from assistant.progress import Progress

LOSSES = ("infonce", "listwise")


@dataclass(frozen=True)
class LailConfig:
    """Labeling and training settings. Paper (GPU, 16B labeler): t=50, z=5, v=5, h=63, lr 5e-5, batch 32."""

    candidates: int = 8  # t: BM25 candidates scored per example (paper 50)
    positives: int = 2  # z (paper 5)
    soft_negatives: int = 2  # v (paper 5)
    hard_negatives: int = 32  # h, from outside S_i (paper 63)
    epochs: int = 4
    batch: int = 16  # queries per step (paper 32)
    lr: float = 5e-5
    temperature: float = 0.05
    # "infonce": the paper's loss (one positive, one soft negative). "listwise": every labeled candidate, the
    # target being softmax(label / label_temperature) over S_i, so the whole ranking teaches, not its two ends.
    loss: str = "infonce"
    label_temperature: float = 0.1
    # Examples labeled as queries: at most this many, a seeded sample of those whose requirement a person wrote
    # (a repo's documented functions); 0: every example (the paper). Every example stays a candidate.
    queries: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise UsageError(f"unknown loss {self.loss!r}; choose {' or '.join(LOSSES)}")
        if self.queries < 0:
            raise UsageError(
                f"queries must be 0 (every example) or more, not {self.queries}",
                setting="queries:range",
                values={"queries": self.queries},
            )


def text_hash(example: Example) -> str:
    return hashlib.sha256(f"{example.requirement}\x00{example.code}".encode()).hexdigest()[:24]


def _precision(backend: Backend) -> str:
    return getattr(backend, "precision", "fp32")


def labeler_name(backend: Backend) -> str:
    """Who labeled, as label cache keys name it: the local model keeps its plain name in fp32 (labels cached
    before servers or bf16 could label stay valid), `model@bf16` in bf16, `server:model` for a server."""
    if backend.name != "local":
        return f"{backend.name}:{backend.model}"
    return backend.model if _precision(backend) == "fp32" else f"{backend.model}@{_precision(backend)}"


def labeler_record(backend: str, model: str, precision: str) -> dict[str, str]:
    """Who labeled, as an artifact's manifest records it (and a caller compares it before reusing one). A
    server's precision is its own business: only the local labeler's is known and recorded."""
    return {"backend": backend, "model": model} | ({"precision": precision} if backend == "local" else {})


def query_rows(examples: Sequence[Example], limit: int, seed: int) -> list[int]:
    """The rows labeled as queries: every example when `limit` is 0, else at most `limit` of those whose
    requirement a person wrote, drawn with `seed` (a made-up `name: signature` requirement says little of what
    the code does, so it is a poor query to learn from; such examples still serve as candidates)."""
    if not limit:
        return list(range(len(examples)))
    written = [row for row, example in enumerate(examples) if written_requirement(example)]
    return sorted(random.Random(seed).sample(written, min(limit, len(written))))


def candidate_sets(index: Index, count: int, queries: Sequence[int] | None = None) -> list[list[int]]:
    """S_i for every example in `queries` (default: all): the `count` best BM25 matches of its requirement,
    never itself or a duplicate; the other examples get an empty set."""
    bm25 = BM25Retriever(index)
    wanted = set(range(len(index)) if queries is None else queries)
    sets: list[list[int]] = []
    for row, example in enumerate(index.examples):
        if row not in wanted:
            sets.append([])
            continue

        def same(other: Example, example: Example = example) -> bool:
            return other is example or other.requirement == example.requirement or other.code == example.code

        sets.append(top_rows(bm25.scores(example.requirement), index.examples, count, same))
    return sets


def label_pool(
    index: Index,
    backend: Backend,
    config: LailConfig,
    cache: JsonlCache,
    progress: Progress | None = None,
) -> list[list[tuple[int, float]]]:
    """Per example: [(candidate row, mean log-prob of its code given that demonstration)], best first.

    Scores are cached by (labeler, demonstration, example): an interrupted run resumes where it stopped.
    """
    report = progress or (lambda stage, done, total: None)
    examples = index.examples
    sets = candidate_sets(index, config.candidates, query_rows(examples, config.queries, config.seed))
    hashes = [text_hash(e) for e in examples]

    labeler = labeler_name(backend)

    def key(q: int, i: int) -> str:
        return cache_key(kind="lail-label", labeler=labeler, demo=hashes[q], example=hashes[i])

    by_demo: dict[int, list[int]] = {}
    for i, chosen in enumerate(sets):
        for q in chosen:
            by_demo.setdefault(q, []).append(i)
    total = sum(len(s) for s in sets)
    done = sum(1 for i, chosen in enumerate(sets) for q in chosen if key(q, i) in cache)
    report("label", done, total)
    # Backends that can reuse a shared prompt prefix (the local one) get every example of one demonstration
    # at once: system message, demonstration request and answer are the same three messages for all of them.
    shared = getattr(backend, "logprob_shared", None)
    for q, users in by_demo.items():
        pending = [i for i in users if key(q, i) not in cache]
        if not pending:
            continue
        pairs = [(build_prompt(examples[i].requirement, [examples[q]]), examples[i].code) for i in pending]
        scored = shared(pairs, shared_messages=3) if shared is not None else backend.logprob(pairs)
        for i, result in zip(pending, scored, strict=True):
            cache.put(key(q, i), result.mean)
        done += len(pending)
        report("label", done, total)
    return [
        sorted(((q, float(cache.get(key(q, i)))) for q in chosen), key=lambda item: -item[1])
        for i, chosen in enumerate(sets)
    ]


def train_encoder(
    examples: Sequence[Example],
    labels: Sequence[Sequence[tuple[int, float]]],
    encoder_dir: Path,
    config: LailConfig,
    progress: Progress | None = None,
    max_tokens: int = MAX_TOKENS,
):  # -> (model, tokenizer, losses)
    """Fine-tune a copy of the encoder on the labels with `config.loss` (InfoNCE by default).

    Texts are cut at `max_tokens`, the limit retrieval embeds them with. Returns (model, tokenizer, epoch losses).
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    report = progress or (lambda stage, done, total: None)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(encoder_dir), trust_remote_code=False)
    model = AutoModel.from_pretrained(str(encoder_dir), dtype=torch.float32, trust_remote_code=False)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    texts = [embedding_text(e) for e in examples]

    def embed(rows: Sequence[int]):  # -> torch.Tensor of unit vectors, with gradients
        return embed_texts(model, tokenizer, [texts[i] for i in rows], max_tokens)

    usable = [i for i, ranked in enumerate(labels) if len(ranked) >= config.positives + config.soft_negatives]
    if not usable:
        raise UsageError("no example has enough labeled candidates to train on")
    steps_per_epoch = (len(usable) + config.batch - 1) // config.batch
    losses: list[float] = []
    for epoch in range(config.epochs):
        rng.shuffle(usable)
        total = 0.0
        for step in range(steps_per_epoch):
            queries = usable[step * config.batch : (step + 1) * config.batch]
            if not queries:
                continue
            if config.loss == "listwise":
                loss = _listwise_loss(embed, len(texts), labels, queries, rng, config)
            else:
                loss = _infonce_loss(embed, len(texts), labels, queries, rng, config)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(queries)
            report("train", epoch * steps_per_epoch + step + 1, config.epochs * steps_per_epoch)
        losses.append(total / len(usable))
    model.eval()
    return model, tokenizer, losses


def _hard_negatives(labels, queries, count: int, size: int, rng: random.Random) -> list[int]:
    """Examples outside every query's S_i (and not a query): negatives no label vouches for."""
    blocked = set(queries) | {q for i in queries for q, _ in labels[i]}
    outside = [j for j in range(size) if j not in blocked]
    return rng.sample(outside, min(count, len(outside)))


def _infonce_loss(embed, size, labels, queries, rng, config):
    """The paper's InfoNCE (:func:`~assistant.methods.losses.masked_infonce`): one positive and one soft negative
    per query, plus shared hard negatives."""
    import torch

    positives = [rng.choice(labels[i][: config.positives])[0] for i in queries]
    softs = [rng.choice(labels[i][-config.soft_negatives :])[0] for i in queries]
    hard = _hard_negatives(labels, queries, config.hard_negatives, size, rng)
    candidates = positives + softs + hard
    q_vec, c_vec = embed(queries), embed(candidates)
    # A query must not be pushed away from its own candidate set (false negatives), except its own
    # soft negative; nor from itself.
    mask = torch.zeros((len(queries), len(candidates)), dtype=torch.bool)
    for row, i in enumerate(queries):
        own = {q for q, _ in labels[i]} | {i}
        for col, j in enumerate(candidates):
            if col in (row, len(queries) + row):
                continue
            if j in own or j == positives[row]:
                mask[row, col] = True
    return masked_infonce(q_vec, c_vec, config.temperature, mask)


def _listwise_loss(embed, size, labels, queries, rng, config):
    """Soft-target cross-entropy (:func:`~assistant.methods.losses.soft_target_cross_entropy`): over the batch's
    candidates and shared hard negatives, each query's target is softmax(label / label_temperature) on its own
    S_i and zero elsewhere (never itself)."""
    import torch

    columns = list(dict.fromkeys(q for i in queries for q, _ in labels[i]))
    columns += _hard_negatives(labels, queries, config.hard_negatives, size, rng)
    where = {j: col for col, j in enumerate(columns)}
    q_vec, c_vec = embed(queries), embed(columns)
    target = torch.zeros((len(queries), len(columns)))
    mask = torch.zeros((len(queries), len(columns)), dtype=torch.bool)
    for row, i in enumerate(queries):
        scores = torch.tensor([score for _, score in labels[i]]) / config.label_temperature
        target[row, [where[q] for q, _ in labels[i]]] = torch.softmax(scores, dim=0)
        if i in where:
            mask[row, where[i]] = True
    return soft_target_cross_entropy(q_vec, c_vec, config.temperature, target, mask)


def train_lail(
    index: Index,
    encoder: TextEncoder,
    encoder_dir: Path,
    backend: Backend,
    config: LailConfig | None = None,
    progress: Progress | None = None,
    directory: Path | None = None,
) -> tuple[Path, dict]:
    """Label (resumably) and train; save the encoder with its config and the labels' provenance (the labeling
    model is the generator it serves) in `directory` (default: the pool's unkeyed LAIL folder)."""
    config = config or LailConfig()
    if config.positives + config.soft_negatives > config.candidates:
        raise UsageError("positives plus soft_negatives must not exceed candidates", setting="lail:counts")
    if len(index) < config.candidates + 2:
        raise UsageError(f"LAIL needs more than {config.candidates + 1} examples, the pool has {len(index)}")
    directory = directory or artifact_dir(index, "lail")
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    cache = JsonlCache(directory / "labels.jsonl")
    labels = label_pool(index, backend, config, cache, progress)
    labeled_s = time.perf_counter() - started
    # The base encoder's own limit when it is below ours; retrieval reads it back from the manifest.
    max_tokens = min(getattr(encoder, "max_length", MAX_TOKENS), MAX_TOKENS)
    model, tokenizer, losses = train_encoder(index.examples, labels, encoder_dir, config, progress, max_tokens)
    (directory / "pool_vectors.npz").unlink(missing_ok=True)  # embedded with the old encoder
    stats = {
        "queries": sum(1 for s in labels if s),
        "pairs_labeled": sum(len(s) for s in labels),
        "label_seconds": round(labeled_s, 1),
        "train_seconds": round(time.perf_counter() - started - labeled_s, 1),
        "epoch_losses": [round(x, 4) for x in losses],
    }
    manifest = {
        "config": asdict(config),
        "base_encoder": encoder.name,
        "max_tokens": max_tokens,
        "generator": backend.model,
        "labeler": labeler_record(backend.name, backend.model, _precision(backend)),
        "pool": describe_pool(index),
        "examples": len(index),
        "trained": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "stats": stats,
    }
    Lail(manifest, model, tokenizer).save(directory)
    return directory, stats


class Lail(TrainedEncoder):
    """LAIL's trained object: the encoder fine-tuned on the labels, and the manifest naming the model that labelled
    (the generator it serves). `save(directory)` / `Lail.load(directory)` (see :class:`TrainedEncoder`)."""

    method = "lail"
    what = "LAIL retriever"


def adopt_labels(directory: Path, unkeyed: Path) -> None:
    """A generator's own folder starts from the labels of the unkeyed one (where earlier versions kept every
    labeler's): they are keyed by labeler, so another model's are never read as this one's."""
    if directory != unkeyed and not (directory / "labels.jsonl").exists() and (unkeyed / "labels.jsonl").is_file():
        directory.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: a copy cut short would stand as the adopted labels, the rest never copied.
        atomic_write_bytes(directory / "labels.jsonl", (unkeyed / "labels.jsonl").read_bytes())


class LailRetriever:
    """Cosine top-k with the LAIL-trained encoder; the pool is re-embedded with it once and cached."""

    name = "lail"

    def __init__(
        self, index: Index, directory: Path, vectors: Path | None = None, progress: Progress | None = None
    ) -> None:
        """`vectors`: where the pool's vectors are kept (default: beside the artifact, for the pool it was trained
        for; give another file to search some other pool, such as a project's fragments, with it). The pool's
        embedding is reported to `progress`."""
        how = f"train one for the {describe_pool(index)}: `assist train retriever lail`"
        trained = Lail.load(directory, how)  # with the limit training used
        self.index = index
        self.manifest = trained.manifest
        self.encoder = trained.encoder
        # The pool embedded with the trained encoder once, then only what changed.
        texts = [embedding_text(e) for e in index.examples]
        self.pool = cached_vectors(vectors or directory / "pool_vectors.npz", texts, self.encoder, progress)

    @classmethod
    def for_index(cls, index: Index, folder: Path | None = None, progress: Progress | None = None) -> LailRetriever:
        """The retriever trained for this index's pool: the artifact in `folder` (default: the unkeyed one)."""
        return cls(index, folder or artifact_dir(index, "lail"), progress=progress)

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]:
        if not len(self.index):
            return []
        scores = dot_scores(self.pool, self.encoder.encode([query])[0])
        return [
            Hit(self.index.examples[row], float(scores[row]), self.name, f"LAIL cosine {scores[row]:.3f}")
            for row in top_rows(scores, self.index.examples, k, exclude)
        ]
