"""SelfRACG (arXiv 2507.19033): the generating model's own attention says what the code needs next.

Information need expression (INE, the paper's Eq. 1-6): beside every layer's attention runs a *parallel*
retrieval branch with its own low-rank adapters on the Q, K and V projections (L-LoRA: X_ret = X + s·h A B,
rank 16, s = alpha / rank = 2). For the last token's query only, r(l) = softmax(Q_ret K_retᵀ / √d) V_ret per
layer (heads concatenated, no o_proj), and the text's vector is the mean of r(l) over the layers. The branch
never feeds the next layer, so generation is unchanged. With B = 0 (as initialised) the branch reproduces the
model's own last-token attention output: a zero-training baseline, ``selfracg-init``.

Candidates (20-line fragments) are encoded with a short prefix marking them as candidates (the paper does not
give its text; ours is :data:`PREFIX`) and keep their first ``max_tokens`` tokens; a query is the code before the
cursor, no prefix, its last ``max_tokens`` tokens. Score = raw inner product (maximum inner-product search).

Training (the paper's ING), InfoNCE with raw inner products; only the adapters learn (1.47M parameters for the
0.5B model); the frozen model's forward runs once per text and step, without the LM head and without gradients,
and stops after the last layer used.

- Stage 1: a fragment is the query and the fragment that follows it the positive; in-batch negatives.
- Stage 2: the model's own continuations. The generator continues a fragment (greedy, the line-completion prompt
  `generate` uses; files' first fragments first, as the paper starts from files' first lines); the first 20
  lines it writes are the positive and its later 20-line pieces the hard negatives (the paper's "subsequent
  fragments" g2..g5, read as later pieces of the same continuation), beside in-batch ones. The query thus
  learns to point at what the model itself would write next. The continuations come from the engine that
  samples (OpenVINO int8 by default, the same checkpoint as the branch's transformers copy; on a GPU, that
  transformers copy itself) and are cached, so a re-run generates nothing it has. Off by default
  (`synthetic` 0): it measured no gain on the repository benchmark (docs/results/trained-retrievers.md).

Implementation: forward pre-hooks on each layer's ``self_attn`` capture its input (the normed hidden states) and
the rotary cos/sin, for the duration of one encoding call only, so the hooked model still generates as before.
The branch runs over a transformers copy of the generator (one per process, bf16 where the CPU has it natively):
the OpenVINO engine that samples by default cannot host it. At B = 0 the branch equals the model's own attention
output up to rounding (exactly in fp32; bf16 rounds its own way). peft's LoRA adds its update into the main path
(vanilla LoRA), which is not L-LoRA, so the branch is written here over the frozen projections.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from assistant.backends import Backend, SamplingParams
from assistant.backends.local import cpu_has_native_bf16, local_transformers
from assistant.backends.prompts import build_line_prompt
from assistant.cache import JsonlCache, cache_key
from assistant.code.examples import Example
from assistant.core.retrieve import Exclude, Hit, top_rows
from assistant.errors import UsageError
from assistant.indexing.fragments import FRAGMENT_LINES
from assistant.indexing.index import Index
from assistant.methods.artifacts import (
    STAGE1_SUFFIX,
    artifact_dir,
    cached_vectors,
    describe_pool,
    fingerprint,
    keyed_dir,
    load_manifest,
    read_manifest,
    save_artifact,
)
from assistant.methods.losses import inner_product_infonce
from assistant.paths import atomic_write_bytes, cache_dir
from assistant.progress import Progress

METHOD = "selfracg"
INIT = "selfracg-init"  # the untrained branch (B = 0): the model's own last-token attention

# Marks a text as a retrieval candidate (the paper prepends a prefix to candidates and says no more).
PREFIX = "# Retrieval candidate: a code fragment of this repository.\n"


@dataclass(frozen=True)
class SelfRacgConfig:
    """The INE's shape and the two stages' schedules (defaults: the paper's rank and alpha; a CPU-sized
    schedule)."""

    rank: int = 16
    alpha: float = 32.0
    layers: int | None = None  # the first N layers (None: all), an early exit that makes encoding N/L as costly
    prefix: str = PREFIX
    max_tokens: int = 192  # a 20-line fragment: median 138-198 tokens in boltons, click, tabulate and assist
    pairs: int = 768  # stage 1's (fragment, next fragment) pairs
    epochs: int = 1
    batch: int = 16  # 15 in-batch negatives
    lr: float = 1e-3  # unstated in the paper
    seed: int = 0
    synthetic: int = 0  # stage 2: continuations (0: stage 1 only; no gain measured, docs/results/trained-retrievers.md)
    negatives: int = 4  # stage 2's hard negatives per continuation, at most (the paper's 4)
    stage2_epochs: int = 2
    continuation_tokens: int = 384  # about 30 lines: a positive and a negative or two

    def to_json(self) -> dict:
        """The configuration as the manifest records it."""
        return asdict(self)


class _Stop(Exception):
    """Raised by the last used layer's hook, so the layers above it are never computed."""


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as Qwen2 applies it (rotate_half)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class InformationNeed:
    """The INE branch over a frozen causal LM (a transformers Qwen2-style model) and its tokenizer."""

    def __init__(self, lm: Any, tokenizer: Any, config: SelfRacgConfig = SelfRacgConfig()) -> None:
        self.lm = lm
        self.tokenizer = tokenizer
        self.config = config
        # What made the vectors besides the adapters: the model (its files' folder) and its precision.
        dtype = str(next(lm.parameters()).dtype).removeprefix("torch.")
        self.identity = f"{getattr(lm.config, '_name_or_path', '') or type(lm).__name__}@{dtype}"
        model_config = lm.config
        total = model_config.num_hidden_layers
        self.n_layers = min(config.layers or total, total)
        if self.n_layers < 1:
            raise ValueError("SelfRACG needs at least one layer")
        attention = lm.model.layers[0].self_attn
        head_dim = attention.head_dim
        hidden = model_config.hidden_size
        widths = {
            "q": model_config.num_attention_heads * head_dim,
            "k": model_config.num_key_value_heads * head_dim,
            "v": model_config.num_key_value_heads * head_dim,
        }
        self.dim = widths["q"]
        self.scale = config.alpha / config.rank
        # The adapters live where the model does (a GPU when training there); drawn on the CPU, so a seed gives
        # the same initial adapters on any device.
        self.device = next(lm.parameters()).device
        generator = torch.Generator().manual_seed(config.seed)
        bound = 1.0 / math.sqrt(hidden)  # LoRA's A initialisation (kaiming-uniform, a = √5); B starts at zero
        self.adapters: dict[str, torch.nn.Parameter] = {}
        for layer in range(self.n_layers):
            for name, width in widths.items():
                a = (torch.rand(hidden, config.rank, generator=generator) * 2 - 1) * bound
                self.adapters[f"{layer}.{name}.A"] = torch.nn.Parameter(a.to(self.device))
                self.adapters[f"{layer}.{name}.B"] = torch.nn.Parameter(
                    torch.zeros(config.rank, width, device=self.device)
                )
        for parameter in lm.parameters():
            parameter.requires_grad_(False)

    # -- state -------------------------------------------------------------------------------------------------

    def parameters(self) -> list[torch.nn.Parameter]:
        """The adapters: the only trained parameters."""
        return list(self.adapters.values())

    def state(self) -> dict[str, torch.Tensor]:
        """A copy of the adapters on the CPU, by name (what is saved)."""
        return {name: p.detach().cpu().clone() for name, p in self.adapters.items()}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        """Adapters saved by `state` (a missing or misshaped one is an error: another model or config)."""
        if set(state) != set(self.adapters):
            raise ValueError("the saved SelfRACG adapters do not match this model and configuration")
        for name, tensor in state.items():
            if tensor.shape != self.adapters[name].shape:
                raise ValueError(
                    f"adapter {name} has shape {tuple(tensor.shape)}, not {tuple(self.adapters[name].shape)}"
                )
            with torch.no_grad():
                self.adapters[name].copy_(tensor)

    def fingerprint(self) -> str:
        """A short hash of the adapters' values (names a vector cache)."""
        digest = hashlib.sha256()
        for name in sorted(self.adapters):
            digest.update(name.encode())
            digest.update(self.adapters[name].detach().float().cpu().numpy().tobytes())
        return digest.hexdigest()[:16]

    # -- the branch ----------------------------------------------------------------------------------------------

    def tokens(self, texts: Sequence[str], candidate: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded ids and mask: a candidate is prefixed and keeps its head, a query keeps its tail (the code
        right before the cursor), at most `max_tokens` each."""
        limit = self.config.max_tokens
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        rows = []
        for text in texts:
            if candidate:
                ids = self.tokenizer(self.config.prefix + text, add_special_tokens=False)["input_ids"][:limit]
            else:
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][-limit:]
            rows.append(list(ids) or [pad])  # an empty query still gets one position to attend to
        width = max(len(row) for row in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
        return ids, mask

    def capture(self, ids: torch.Tensor, mask: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
        """Each used layer's attention input (normed hidden states) and rotary cos/sin, from one frozen forward
        without the LM head, stopped after the last used layer."""
        captured: list[tuple[torch.Tensor, ...]] = []

        def hook(module: Any, args: tuple, kwargs: dict) -> None:
            hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            cos, sin = kwargs["position_embeddings"]
            captured.append((hidden.detach(), cos.detach(), sin.detach()))
            if len(captured) == self.n_layers:
                raise _Stop

        layers = self.lm.model.layers[: self.n_layers]
        handles = [layer.self_attn.register_forward_pre_hook(hook, with_kwargs=True) for layer in layers]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        try:
            with torch.no_grad():
                self.lm.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False)
        except _Stop:
            pass
        finally:
            for handle in handles:
                handle.remove()
        return captured

    def _project(self, attention: Any, layer: int, name: str, x: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        """The frozen projection of `raw` plus the layer's low-rank retrieval term of `x` (its float32 copy)."""
        a, b = self.adapters[f"{layer}.{name}.A"], self.adapters[f"{layer}.{name}.B"]
        return getattr(attention, f"{name}_proj")(raw).float() + self.scale * (x @ a) @ b

    def branch(self, captured: Sequence[tuple[torch.Tensor, ...]], mask: torch.Tensor) -> torch.Tensor:
        """r = mean over layers of the last token's retrieval attention output, [batch, heads × head_dim]."""
        keys = mask.bool()[:, None, None, :]
        outputs = []
        for layer, (hidden, cos, sin) in enumerate(captured):
            attention = self.lm.model.layers[layer].self_attn
            batch, length, _ = hidden.shape
            head_dim = attention.head_dim
            h = hidden.float()

            q = self._project(attention, layer, "q", h[:, -1:], hidden[:, -1:])
            k = self._project(attention, layer, "k", h, hidden)
            v = self._project(attention, layer, "v", h, hidden)
            q = q.view(batch, 1, -1, head_dim).transpose(1, 2)
            k = k.view(batch, length, -1, head_dim).transpose(1, 2)
            v = v.view(batch, length, -1, head_dim).transpose(1, 2)
            cos, sin = cos.float().unsqueeze(1), sin.float().unsqueeze(1)
            q = _rotate(q, cos[:, :, -1:], sin[:, :, -1:])
            k = _rotate(k, cos, sin)
            groups = attention.num_key_value_groups
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
            scores = (q @ k.transpose(-1, -2)) * attention.scaling
            weights = scores.masked_fill(~keys, float("-inf")).softmax(-1)
            outputs.append((weights @ v).transpose(1, 2).reshape(batch, -1))
        return torch.stack(outputs).mean(0)

    def vectors(self, texts: Sequence[str], candidate: bool) -> torch.Tensor:
        """The texts' INE vectors (differentiable in the adapters)."""
        ids, mask = (tensor.to(self.device) for tensor in self.tokens(texts, candidate))
        return self.branch(self.capture(ids, mask), mask)

    def encode(
        self,
        texts: Sequence[str],
        candidate: bool,
        progress: Callable[[int, int], None] | None = None,
        batch: int = 16,
    ) -> np.ndarray:
        """Float32 vectors, one row per text; texts of similar length are batched together."""
        result = np.zeros((len(texts), self.dim), "float32")
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.no_grad():
            for start in range(0, len(order), batch):
                rows = order[start : start + batch]
                result[rows] = self.vectors([texts[i] for i in rows], candidate).cpu().numpy()
                if progress is not None:
                    progress(min(start + batch, len(order)), len(order))
        return result


class SideEncoder:
    """One side of the INE (candidates or queries) as a TextEncoder: a name, a width, `encode(texts)`."""

    def __init__(self, ine: InformationNeed, candidate: bool, label: str) -> None:
        self.ine = ine
        self.candidate = candidate
        side = "candidate" if candidate else "query"
        prefix = hashlib.sha256(ine.config.prefix.encode()).hexdigest()[:8]
        shape = f"{ine.n_layers}L:{ine.config.max_tokens}t:{prefix}"
        self.name = f"{label}:{ine.identity}:{ine.fingerprint()}:{shape}:{side}"
        self.dim = ine.dim

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """This side's vectors of `texts`."""
        return self.ine.encode(texts, self.candidate, progress)


# -- stage 1 -------------------------------------------------------------------------------------------------------


def _files_in_order(fragments: Sequence[Example]) -> list[list[Example]]:
    """The pool's fragments grouped by file (files sorted by path), each file's in line order."""
    by_file: dict[str, list[Example]] = {}
    for fragment in fragments:
        by_file.setdefault(fragment.path, []).append(fragment)
    return [sorted(by_file[path], key=lambda e: e.start_line) for path in sorted(by_file)]


def fragment_pairs(fragments: Sequence[Example], count: int, seed: int = 0) -> list[tuple[str, str]]:
    """Up to `count` (fragment, the fragment that follows it in its file) pairs, a seeded sample."""
    pairs = []
    for ordered in _files_in_order(fragments):
        for first, second in itertools.pairwise(ordered):
            if first.code.strip() and second.code.strip():
                pairs.append((first.code, second.code))
    random.Random(seed).shuffle(pairs)
    return pairs[:count]


def _infonce(ine: InformationNeed, queries: Sequence[str], documents: Sequence[str]) -> torch.Tensor:
    """InfoNCE over raw inner products: query i's positive is document i; every other document (the batch's other
    positives, then any hard negatives appended after them) is a negative."""
    return inner_product_infonce(ine.vectors(queries, candidate=False), ine.vectors(documents, candidate=True))


def _train(
    ine: InformationNeed,
    examples: Sequence[tuple[str, str, Sequence[str]]],
    epochs: int,
    stage: str,
    progress: Progress | None,
) -> dict[str, Any]:
    """Batches of (query, positive, hard negatives) examples, shuffled each epoch; AdamW on the adapters only.
    Returns statistics (examples, steps, loss per step, seconds)."""
    config = ine.config
    report = progress or (lambda stage, done, total: None)
    optimizer = torch.optim.AdamW(ine.parameters(), lr=config.lr)
    rng = random.Random(config.seed)
    steps_per_epoch = max(0, len(examples) // config.batch) if len(examples) >= 2 else 0
    total = steps_per_epoch * epochs
    losses: list[float] = []
    started = time.perf_counter()
    report(stage, 0, total)
    for _ in range(epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for step in range(steps_per_epoch):
            batch = [examples[i] for i in order[step * config.batch : (step + 1) * config.batch]]
            documents = [positive for _, positive, _ in batch] + [n for *_, negatives in batch for n in negatives]
            loss = _infonce(ine, [query for query, _, _ in batch], documents)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(round(float(loss.detach()), 4))
            report(stage, len(losses), total)
    return {
        "examples": len(examples),
        "steps": len(losses),
        "losses": losses,
        "seconds": round(time.perf_counter() - started, 1),
    }


def train_stage1(
    ine: InformationNeed, pairs: Sequence[tuple[str, str]], progress: Progress | None = None
) -> dict[str, Any]:
    """Stage 1: InfoNCE over (fragment, next fragment) pairs with in-batch negatives. Returns statistics (pairs,
    steps, loss per step, seconds)."""
    stats = _train(ine, [(q, p, ()) for q, p in pairs], ine.config.epochs, "train selfracg", progress)
    return {"pairs": stats.pop("examples"), **stats}


# -- stage 2 -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Continuation:
    """Stage 2's example: a fragment (the query), the first lines the model wrote after it (the positive) and
    the later pieces of what it wrote (hard negatives)."""

    query: str
    positive: str
    negatives: tuple[str, ...]


def continuation_starts(fragments: Sequence[Example], count: int, seed: int = 0) -> list[Example]:
    """Up to `count` fragments for the model to continue, each one its file goes on after: files' first
    fragments first (the paper starts from files' first lines), then later ones where a pool has fewer files
    than `count`; a seeded sample, in a stable order."""
    firsts: list[Example] = []
    later: list[Example] = []
    for ordered in _files_in_order(fragments):
        for position, fragment in enumerate(ordered[:-1]):
            if fragment.code.strip():
                (firsts if position == 0 else later).append(fragment)
    rng = random.Random(seed)
    rng.shuffle(firsts)
    rng.shuffle(later)
    return (firsts + later)[:count]


def split_continuation(
    text: str, negatives: int, lines: int = FRAGMENT_LINES, least: int = 5
) -> tuple[str, tuple[str, ...]] | None:
    """What the model wrote, cut into `lines`-line pieces as the index cuts files: the first is the positive, up
    to `negatives` later ones the hard negatives. A piece with fewer than `least` non-blank lines is not used
    (None when that is the first: too little was written to learn from)."""
    written = text.split("```", 1)[0].splitlines()
    pieces = ["\n".join(written[start : start + lines]) for start in range(0, len(written), lines)]

    def enough(piece: str) -> bool:
        return sum(1 for line in piece.splitlines() if line.strip()) >= least

    if not pieces or not enough(pieces[0]):
        return None
    return pieces[0], tuple([piece for piece in pieces[1:] if enough(piece)][:negatives])


def continuations(
    generator: Backend,
    starts: Sequence[Example],
    config: SelfRacgConfig,
    cache: JsonlCache,
    progress: Progress | None = None,
    batch: int = 8,
) -> list[Continuation]:
    """Stage 2's examples: the generator continues each start fragment greedily, with the prompt `generate` uses
    to complete a line (`build_line_prompt`), for at most `config.continuation_tokens` tokens. Continuations are
    kept in `cache` (keyed by the generator, prompt and parameters), so a rerun generates none of them again;
    starts whose continuation is too short to cut a positive from are left out."""
    report = progress or (lambda stage, done, total: None)
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=config.continuation_tokens, seed=0)
    prompts = [build_line_prompt(start.path, start.code) for start in starts]
    keys = [
        cache_key(
            kind="selfracg-continuation",
            backend=str(generator.identity),
            model=generator.model,
            prompt=prompt.to_json(),
            params=params.__dict__,
        )
        for prompt in prompts
    ]
    todo = [i for i, key in enumerate(keys) if key not in cache]
    size = max(1, batch) if generator.batches_prompts else 1
    report("continue fragments", 0, len(todo))
    for first in range(0, len(todo), size):
        rows = todo[first : first + size]
        for row, completions in zip(rows, generator.sample_batch([prompts[i] for i in rows], params), strict=True):
            cache.put(keys[row], completions[0].text)
        report("continue fragments", min(first + size, len(todo)), len(todo))
    examples = []
    for start, key in zip(starts, keys, strict=True):
        split = split_continuation(cache.get(key), config.negatives)
        if split is not None:
            examples.append(Continuation(start.code, *split))
    return examples


def train_stage2(
    ine: InformationNeed, examples: Sequence[Continuation], progress: Progress | None = None
) -> dict[str, Any]:
    """Stage 2: InfoNCE with the model's own next lines as the positive and every later piece of the batch's
    continuations beside the in-batch positives as negatives. Returns statistics (examples, hard negatives,
    steps, loss per step, seconds)."""
    rows = [(e.query, e.positive, e.negatives) for e in examples]
    stats = _train(ine, rows, ine.config.stage2_epochs, "train selfracg stage 2", progress)
    return {**stats, "hard_negatives": sum(len(e.negatives) for e in examples)}


# -- artifacts and retrieval ---------------------------------------------------------------------------------------

ADAPTER_FILE = "adapter.safetensors"


def load_ine(
    model: str | None = None, precision: str = "auto", config: SelfRacgConfig | None = None, device: str = "cpu"
) -> tuple[InformationNeed, dict[str, str]]:
    """The INE over a transformers copy of the local generator (bf16 where the CPU has it natively; the
    OpenVINO engine that samples cannot host the branch), and the model and precision it runs, as recorded.
    `device` is where it runs (cuda to train on a GPU; retrieval runs on the CPU)."""
    backend = local_transformers(model, precision, device)
    source = {"model": backend.model, "precision": backend.precision}
    return InformationNeed(backend.lm, backend.tokenizer, config or SelfRacgConfig()), source


class SelfRacg:
    """SelfRACG's trained object: the adapters of the INE branch (over the generator they extend) and the manifest
    naming that generator, with the config and precision they were trained with. `save(directory)` /
    `SelfRacg.load(directory)`; on disk `adapter.safetensors` (the adapters only: the model is the generator's) and
    `manifest.json`."""

    method = METHOD
    what = "SelfRACG adapters"

    def __init__(self, ine: InformationNeed, manifest: dict[str, Any]) -> None:
        self.ine, self.manifest = ine, manifest

    def save(self, directory: Path) -> dict[str, Any]:
        """Write the adapters (as safetensors), then the manifest, into `directory`; the manifest as written."""
        from safetensors.torch import save_file

        def write(folder: Path) -> None:
            adapters = {name: tensor.contiguous() for name, tensor in self.ine.state().items()}
            save_file(adapters, str(folder / ADAPTER_FILE))

        self.manifest = save_artifact(directory, METHOD, write, self.manifest)
        return self.manifest

    @classmethod
    def load(cls, directory: Path, ine: InformationNeed | None = None, how_to_train: str = "") -> SelfRacg:
        """The adapters saved in `directory`, loaded into `ine` (a branch over the model they extend; default: a
        new one over the model and precision the manifest names, with its config). None there is a one-line error
        saying how to train them (`how_to_train`); adapters of another model or shape, a one-line error too."""
        from safetensors.torch import load_file

        manifest = load_manifest(directory, METHOD, cls.what, how_to_train or "`assist train retriever selfracg`")
        if ine is None:
            precision = manifest.get("precision", "auto")
            if precision == "bf16" and not cpu_has_native_bf16():
                precision = "fp32"  # adapters trained in bf16 (on a GPU, say): emulated bf16 is slow on this CPU
            ine = load_ine(manifest.get("model"), precision, SelfRacgConfig(**manifest["config"]))[0]
        try:
            ine.load_state(load_file(str(directory / ADAPTER_FILE)))
        except (ValueError, OSError) as exc:  # another model's or configuration's, or a damaged file
            raise UsageError(f"the SelfRACG adapters in {directory} cannot be used: {exc}") from None
        return cls(ine, manifest)


def generic_dir(generator: str | None = None) -> Path:
    """Where the generic adapters live (trained on a corpus of any Python code, e.g. the standard library, with
    `--corpus`): used for any pool that has none of its own, the role of the paper's stage 1 on GitHub code.
    With `generator`, the folder of those trained on that model (:func:`keyed_dir`)."""
    return keyed_dir(cache_dir() / "retrievers" / f"{METHOD}-generic", generator)


def corpus_fragments(folder: Path) -> list[Example]:
    """The 20-line fragments of every .py file under `folder` (sorted; unreadable files skipped)."""
    from assistant.indexing.fragments import split_fragments

    fragments: list[Example] = []
    for path in sorted(folder.rglob("*.py")):
        # Hidden folders are skipped below `folder` only: the folder itself may sit under one (~/.pyenv/...).
        if any(
            part.startswith(".") or part in ("site-packages", "__pycache__") for part in path.relative_to(folder).parts
        ):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        fragments += split_fragments(text, path.relative_to(folder).as_posix(), "")
    return fragments


CONTINUATIONS_FILE = "continuations.jsonl"  # stage 2's cached continuations, kept beside the adapters


def train_selfracg(
    index: Index,
    config: SelfRacgConfig,
    model: str | None = None,
    precision: str = "auto",
    progress: Progress | None = None,
    directory: Path | None = None,
    generator: Backend | None = None,
    device: str = "cpu",
) -> tuple[Path, dict[str, Any]]:
    """Stage 1 on the pool's (fragment, next fragment) pairs (the index's examples are fragments, or functions
    in file order), then, when `config.synthetic` asks for it, stage 2 on `generator`'s continuations of the
    pool's fragments; saved with its provenance in `directory` (default: the pool's artifact folder). After two
    stages the stage-1 adapters are saved too, beside it (`<directory>-stage1`), so the value of stage 2 can be
    measured without training again. `device`: where the model runs while training (cpu, or cuda).

    The continuations are written before any training: they are the slow part and the one that can come up
    short, so a pool the model cannot continue is refused before minutes of stage 1 (and they are cached, so a
    rerun writes none of them again).

    Returns the folder and the statistics: stage 1's at the top level, stage 2's under "stage2" (None when
    skipped)."""
    pairs = fragment_pairs(index.examples, config.pairs, config.seed)
    if len(pairs) < config.batch:
        values = {"pool": describe_pool(index), "pairs": len(pairs), "batch": config.batch}
        raise UsageError(
            f"the {values['pool']} has {len(pairs)} pairs of consecutive fragments; a batch of {config.batch} needs "
            "at least as many (lower the batch)",
            setting="batch:pairs",
            values=values,
        )
    if config.synthetic and generator is None:
        raise ValueError("stage 2 needs the generator that writes the continuations")
    directory = directory or artifact_dir(index, METHOD)
    examples: list[Continuation] = []
    starts: list[Example] = []
    if config.synthetic and generator is not None:
        starts = continuation_starts(index.examples, config.synthetic, config.seed)
        directory.mkdir(parents=True, exist_ok=True)
        # A GPU decodes hundreds of rows a step for little more than one; 8 suits a 2-core CPU.
        rows = 8 if device == "cpu" else 256
        examples = continuations(generator, starts, config, JsonlCache(directory / CONTINUATIONS_FILE), progress, rows)
        if len(examples) < config.batch:
            pool, batch = describe_pool(index), config.batch
            raise UsageError(
                f"the model continued {len(starts)} fragments of the {pool} into {len(examples)} long enough to "
                f"learn from; a batch of {batch} needs as many (raise synthetic, lower the batch, or train stage 1 "
                "only: synthetic 0)",
                setting="batch:synthetic",
                values={"starts": len(starts), "pool": pool, "examples": len(examples), "batch": batch},
            )
    ine, source = load_ine(model, precision, config, device)
    stats: dict[str, Any] = train_stage1(ine, pairs, progress)
    stats["stage2"] = None
    manifest = {
        "config": config.to_json(),
        "generator": source.get("model"),  # the adapters belong to the model whose attention they extend
        **source,  # the model and precision the adapters were trained on: retrieval loads the same
        "pool": describe_pool(index),
        "device": str(ine.device),
        "stage2": None,
        "stats": dict(stats),
    }
    only_first = directory.with_name(directory.name + STAGE1_SUFFIX)
    if config.synthetic and generator is not None:
        # Kept before stage 2 starts: the "without stage 2" ablation, and what is left if stage 2 fails.
        alone = {**manifest, "config": replace(config, synthetic=0).to_json()}
        SelfRacg(ine, alone).save(only_first)
        stats["stage2"] = {"starts": len(starts), **train_stage2(ine, examples, progress)}
        manifest = {**manifest, "stage2": generator.identity.manifest(), "stats": stats}
    else:
        shutil.rmtree(only_first, ignore_errors=True)  # an earlier two-stage run's: not these adapters' stage 1
    SelfRacg(ine, manifest).save(directory)
    return directory, stats


def _how_to_train(index: Index) -> str:
    """How to train adapters for a pool, as the error for missing ones says."""
    return (
        f"train them for the {describe_pool(index)} (`assist train retriever selfracg`) or generic ones "
        "on any folder of Python (`--corpus DIR`)"
    )


POOL_FILE = "pool_vectors.npz"
ENCODE_STAGE = "encode selfracg"  # how encoding a pool with the branch is reported (progress.STAGE_LABELS)


def vector_store(index: Index, candidates: SideEncoder) -> Path:
    """Where a pool's candidate vectors are kept: with the pool (a repo's `.assist/retrievers`, else the user
    cache's folder for that pool), one file per branch (model, adapters, settings). A repository keeps its file
    as its code changes, and `cached_vectors` encodes only the fragments it has not seen (the INE reads about two
    fragments a second on a CPU); generic adapters used in two repositories keep a file in each."""
    name = hashlib.sha256(candidates.name.encode()).hexdigest()[:16]
    return artifact_dir(index, f"{METHOD}-vectors") / f"{name}.npz"


class SelfRacgRetriever:
    """Maximum inner product between the query's INE vector and the pool's (prefixed) candidate vectors.

    `directory`: where the adapters `ine` holds were loaded from (see :meth:`for_index`); None is `selfracg-init`
    (B = 0: the model's own attention). The pool's vectors are kept with the pool (`vector_store`) and refreshed
    fragment by fragment as its code changes."""

    def __init__(
        self, index: Index, ine: InformationNeed, directory: Path | None = None, progress: Progress | None = None
    ) -> None:
        self.name = METHOD if directory is not None else INIT
        self.index = index
        self.ine = ine
        self.queries = SideEncoder(ine, candidate=False, label=self.name)
        candidates = SideEncoder(ine, candidate=True, label=self.name)
        store = vector_store(index, candidates)
        legacy = (directory or cache_dir() / "retrievers" / f"{INIT}-{fingerprint(index.examples)[:16]}") / POOL_FILE
        if not store.exists() and legacy.exists():  # where earlier versions kept them: start from those
            store.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(store, legacy.read_bytes())  # an interrupted copy must not leave a torn file
        # About two fragments a second on a CPU: a repository's first pass takes minutes, so it is reported.
        self.pool = cached_vectors(store, [e.code for e in index.examples], candidates, progress, ENCODE_STAGE)

    @classmethod
    def for_index(
        cls, index: Index, adapters: Path | None = None, progress: Progress | None = None
    ) -> SelfRacgRetriever:
        """The retriever for an index's pool with trained adapters, on the model and precision they were trained on.

        The pool's own adapters are preferred to the generic ones; `adapters` names the folder to use instead
        (`eval repo` passes the generic ones: adapters trained on a benchmark's pool have seen its answers).
        Encoding the pool's new fragments is reported to `progress`."""
        directory = adapters
        if directory is None:
            own = artifact_dir(index, METHOD)
            directory = generic_dir() if read_manifest(own) is None and read_manifest(generic_dir()) else own
        return cls(index, SelfRacg.load(directory, how_to_train=_how_to_train(index)).ine, directory, progress)

    @classmethod
    def untrained(cls, index: Index, model: str | None = None, progress: Progress | None = None) -> SelfRacgRetriever:
        """`selfracg-init`: the untrained branch over `model` (default: the default generator), the model's own
        attention; encoding the pool is reported to `progress`."""
        return cls(index, load_ine(model, "auto", SelfRacgConfig())[0], progress=progress)

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]:
        """The k pool examples with the highest inner product with the query's INE vector."""
        if not len(self.index):
            return []
        vector = self.queries.encode([query])[0]
        scores = self.pool @ vector
        return [
            Hit(self.index.examples[row], float(scores[row]), self.name, f"{self.name} inner product {scores[row]:.2f}")
            for row in top_rows(scores, self.index.examples, k, exclude)
        ]
