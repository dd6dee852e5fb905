"""Condor: a trained discriminator that scores p(correct) for (problem, code) without running the code.

Two stages over one encoder (default all-MiniLM-L6-v2; `../shared/docs/methods.md`, section 5):
1. contrastive: near-identical pairs of one problem's programs, embedded as (problem, code); the loss
   label·d² + (1 − label)·max(0, m − d)² (Euclidean d, m = 2) pulls correct variants together and pushes a
   wrong one away from its correct twin, so the embedding comes to reflect the small details that decide
   correctness;
2. classifier: a linear head on the same embedding, trained with cross-entropy on labelled programs
   (plus the partial fixes, when enabled). The score is the sigmoid of its output.

Ablations switch off stage 1 (`contrastive=False`) or the partial fixes (`partial_fixes=False`); with both
off this is a plain fine-tuned classifier (CodeRanker-style). Artifacts: the encoder, the head, and a
manifest with the config, the data's provenance and the held-out scores, in `<repo>/.assist/discriminator/`
or, outside a repo, `<user cache>/discriminator/`.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from assistant.errors import ModelError, UsageError
from assistant.methods.artifacts import (
    NO_GENERATOR,
    find_artifact,
    keyed_dir,
    load_manifest,
    not_trained_for,
    other_generators,
    read_manifest,
    save_artifact,
    save_encoder,
)
from assistant.methods.condor.data import Dataset, Program
from assistant.methods.condor.generator import GENERATOR, GeneratorDiscriminator
from assistant.methods.losses import balanced_binary_cross_entropy, margin_contrastive
from assistant.paths import cache_dir, repo_dir
from assistant.progress import Progress


@dataclass(frozen=True)
class CondorConfig:
    """Training settings, sized for a 2-core CPU (MiniLM, 1 contrastive and 2 classifier epochs: MBPP's train
    split took 914 s on 2 idle cores). The paper trains 110M and 1.3B backbones on a GPU, with contrastive
    training until the distances settle."""

    backbone: str = "all-minilm-l6-v2"  # a registered encoder, or a folder with a transformers encoder
    contrastive: bool = True
    partial_fixes: bool = True
    contrastive_epochs: int = 1
    epochs: int = 2  # classifier epochs
    batch: int = 16
    lr: float = 3e-5  # encoder
    head_lr: float = 1e-3
    margin: float = 2.0
    max_length: int = 256
    max_pairs: int = 2000  # contrastive pairs per epoch (a seeded random sample when there are more)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.contrastive and self.backbone.partition(":")[0] == GENERATOR:
            raise UsageError(
                "the generator backbone is frozen, so it has no contrastive stage: turn contrastive off",
                setting="contrastive:frozen",
            )


def make_model(config: CondorConfig, directory: Path | None = None, features: Path | None = None) -> Any:
    """The discriminator a config names: the generator's frozen backbone (`generator`, or `generator:MODEL`) and a
    head (:mod:`assistant.methods.condor.generator`), else an encoder fine-tuned whole. `directory`: a saved
    one's folder (its head, and for an encoder its weights). `features`: the generator backbone's feature store
    (a folder; unused by an encoder)."""
    head = directory / "head.safetensors" if directory is not None else None
    if config.backbone.partition(":")[0] == GENERATOR:
        model = config.backbone.partition(":")[2] or None
        return GeneratorDiscriminator(model, head, features)
    return _Discriminator(directory / "encoder" if directory is not None else backbone_dir(config.backbone), head)


def backbone_dir(name: str) -> Path:
    """A registered encoder's weights, or a local folder holding a transformers encoder."""
    from assistant.backends.models import encoder_dir, resolve

    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise UsageError(f"{path} has no config.json: not a transformers model folder")
        return path
    return encoder_dir(resolve(name, "encoder"))


class _Discriminator:
    """The encoder with mean pooling (not normalised: the contrastive margin needs real distances) and a head."""

    frozen = False  # the encoder is fine-tuned with the head

    def __init__(self, directory: Path, head_path: Path | None = None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        from assistant.backends.models import quiet_transformers

        quiet_transformers()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(directory), trust_remote_code=False)
            self.encoder = AutoModel.from_pretrained(str(directory), dtype=torch.float32, trust_remote_code=False)
        except Exception as exc:  # a damaged or foreign folder
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ModelError(f"discriminator encoder at {directory} could not be loaded: {first}") from None
        dim = int(self.encoder.config.hidden_size)
        self.head = torch.nn.Linear(dim, 1)
        if head_path is not None:
            from safetensors.torch import load_file

            self.head.load_state_dict(load_file(str(head_path)))

    def batch(self, problems: Sequence[str], codes: Sequence[str], max_length: int):
        return self.tokenizer(
            list(problems),
            list(codes),
            truncation="longest_first",
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        )

    def embed(self, batch):
        from assistant.backends.encoder import mean_pool

        return mean_pool(self.encoder, batch, normalize=False)

    def logits(self, batch):
        return self.head(self.embed(batch)).squeeze(-1)

    def train(self, mode: bool = True) -> None:
        self.encoder.train(mode)
        self.head.train(mode)

    def parameters(self):
        return [*self.encoder.parameters(), *self.head.parameters()]


def _length_batches(lengths: Sequence[int], size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar-length items (less padding: on a CPU, padding is most of the cost)."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    window = size * 50
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches.extend(chunk[i : i + size] for i in range(0, len(chunk), size))
    rng.shuffle(batches)
    return batches


def _predict(model: Any, texts: Sequence[tuple[str, str]], max_length: int, batch: int = 64) -> np.ndarray:
    import torch

    out = np.zeros(len(texts), dtype=np.float64)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i][0]) + len(texts[i][1]))
    model.train(False)
    with torch.inference_mode():
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            encoded = model.batch([texts[i][0] for i in chunk], [texts[i][1] for i in chunk], max_length)
            out[chunk] = torch.sigmoid(model.logits(encoded)).double().numpy()
    return out


def classification_scores(probabilities: Sequence[float], labels: Sequence[bool], threshold: float = 0.5) -> dict:
    """Precision, recall and F1 of "correct" (the positive class), and accuracy, at `threshold`."""
    predicted = np.asarray(probabilities) >= threshold
    truth = np.asarray(labels, dtype=bool)
    tp = int((predicted & truth).sum())
    fp = int((predicted & ~truth).sum())
    fn = int((~predicted & truth).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = float((predicted == truth).mean()) if len(truth) else 0.0
    return {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "accuracy": round(accuracy, 4),
        "count": len(truth),
        "positives": int(truth.sum()),
    }


def _fit(
    model: _Discriminator,
    optimizer,
    lengths: Sequence[int],
    epochs: int,
    batch_loss: Callable[[list[int]], object],
    config: CondorConfig,
    rng: random.Random,
    progress: Progress,
    stage: str,
) -> list[float]:
    """The training loop both stages share: length-bucketed batches, one optimizer step each; mean loss per epoch."""
    losses = []
    model.train(True)
    for epoch in range(epochs):
        batches = _length_batches(lengths, config.batch, rng)
        total = 0.0
        for step, rows in enumerate(batches, start=1):
            loss = batch_loss(rows)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(rows)
            progress(f"{stage} epoch {epoch + 1}", step, len(batches))
        losses.append(round(total / len(lengths), 4))
    model.train(False)
    return losses


def contrastive_stage(model: _Discriminator, data: Dataset, config: CondorConfig, progress: Progress) -> list[float]:
    """Stage 1: pull near-identical correct programs together, push a wrong one ≥ margin from its correct twin."""
    import torch

    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    pairs = list(data.pairs)
    rng.shuffle(pairs)
    pairs = pairs[: config.max_pairs]
    if not pairs:
        return []

    def batch_loss(rows: list[int]):
        chosen = [pairs[i] for i in rows]
        problems = [data.problems[p.problem] for p in chosen]
        # Both sides in one forward pass: one padded batch of 2B rows.
        encoded = model.batch(problems * 2, [p.a for p in chosen] + [p.b for p in chosen], config.max_length)
        vectors = model.embed(encoded)
        left, right = vectors[: len(chosen)], vectors[len(chosen) :]
        label = torch.tensor([float(p.label) for p in chosen])
        return margin_contrastive(left, right, label, config.margin)

    optimizer = torch.optim.AdamW(model.encoder.parameters(), lr=config.lr)
    lengths = [len(p.a) + len(p.b) for p in pairs]
    return _fit(model, optimizer, lengths, config.contrastive_epochs, batch_loss, config, rng, progress, "contrastive")


def classifier_stage(model: _Discriminator, data: Dataset, config: CondorConfig, progress: Progress) -> list[float]:
    """Stage 2: binary cross-entropy on labelled programs (plus partial fixes when enabled)."""
    import torch

    torch.manual_seed(config.seed)
    rng = random.Random(config.seed + 1)
    programs: list[Program] = list(data.programs) + (list(data.partials) if config.partial_fixes else [])
    if not programs:
        raise UsageError("no labelled programs to train the discriminator on")
    positives = sum(p.correct for p in programs)
    if positives == 0 or positives == len(programs):
        raise UsageError("the training data has only one class (every program correct, or every one wrong)")
    # Mutants outnumber correct programs several times over: weight the positives so both classes count.
    loss_fn = balanced_binary_cross_entropy(positives, len(programs))

    def batch_loss(rows: list[int]):
        chosen = [programs[i] for i in rows]
        encoded = model.batch([data.problems[p.problem] for p in chosen], [p.code for p in chosen], config.max_length)
        return loss_fn(model.logits(encoded), torch.tensor([float(p.correct) for p in chosen]))

    groups = [{"params": model.head.parameters(), "lr": config.head_lr}]
    if not model.frozen:
        groups.insert(0, {"params": model.encoder.parameters(), "lr": config.lr})
    optimizer = torch.optim.AdamW(groups)
    lengths = [len(p.code) for p in programs]
    return _fit(model, optimizer, lengths, config.epochs, batch_loss, config, rng, progress, "classifier")


def train_discriminator(
    data: Dataset,
    config: CondorConfig,
    progress: Progress | None = None,
    start_from: dict | None = None,
    features: Path | None = None,
) -> tuple[_Discriminator, dict]:
    """Stage 1 (contrastive, when enabled) then stage 2 (classifier); returns the model and training stats.

    `start_from` is the result of :func:`shared_stage1` on the same data and config: the ablations that keep
    stage 1 share it instead of repeating it (its losses and time are reported as theirs). `features`: where a
    generator backbone keeps its features (see :func:`make_model`).
    """
    import torch

    report = progress or (lambda stage, done, total: None)
    started = time.perf_counter()
    torch.manual_seed(config.seed)  # the head's initial weights: the same for every variant
    model = make_model(config, features=features)
    stats: dict = {"contrastive_losses": [], "classifier_losses": [], "contrastive_seconds": 0.0}
    if config.contrastive and start_from is not None:
        model.encoder.load_state_dict(start_from["encoder"])
        stats["contrastive_losses"] = start_from["losses"]
        stats["contrastive_seconds"] = start_from["seconds"]
    elif config.contrastive:
        stats["contrastive_losses"] = contrastive_stage(model, data, config, report)
        stats["contrastive_seconds"] = round(time.perf_counter() - started, 1)
    if model.frozen:  # the generator the head was trained over: a later load uses this one, whatever the default
        stats["backbone_model"] = model.model_name
    stats["classifier_losses"] = classifier_stage(model, data, config, report)
    stats["train_programs"] = len(data.programs) + (len(data.partials) if config.partial_fixes else 0)
    stats["train_pairs"] = min(len(data.pairs), config.max_pairs) if config.contrastive else 0
    stats["seconds"] = round(time.perf_counter() - started + (start_from or {}).get("seconds", 0.0), 1)
    return model, stats


def shared_stage1(data: Dataset, config: CondorConfig, progress: Progress | None = None) -> dict:
    """Stage 1 once, for several variants: the encoder's state, the epoch losses and the seconds it took."""
    import copy

    import torch

    started = time.perf_counter()
    torch.manual_seed(config.seed)
    model = _Discriminator(backbone_dir(config.backbone))
    losses = contrastive_stage(model, data, config, progress or (lambda stage, done, total: None))
    return {
        "encoder": copy.deepcopy(model.encoder.state_dict()),
        "losses": losses,
        "seconds": round(time.perf_counter() - started, 1),
    }


def evaluate_discriminator(model: _Discriminator, held_out: Dataset, config: CondorConfig) -> dict:
    """P/R/F1 on the held-out problems: on every program, and on those in a near-identical pair."""
    programs = held_out.programs
    probabilities = _predict(model, [(held_out.problems[p.problem], p.code) for p in programs], config.max_length)
    paired = {(p.problem, code) for p in held_out.pairs for code in (p.a, p.b)}
    in_pairs = [i for i, p in enumerate(programs) if (p.problem, p.code) in paired]
    return {
        "all": classification_scores(probabilities, [p.correct for p in programs]),
        "pairs": classification_scores(probabilities[in_pairs], [programs[i].correct for i in in_pairs]),
    }


def discriminator_dir(root: Path | None, generator: str | None = None) -> Path:
    """Where a discriminator is saved: `<repo>/.assist/discriminator`, or the user cache's outside a repo; with
    `generator`, the folder beside it for the one trained for that model (:func:`keyed_dir`)."""
    base = (repo_dir(root) / "discriminator") if root is not None else cache_dir() / "discriminator"
    return keyed_dir(base, generator)


def _discriminator_bases(start: Path | None) -> list[Path]:
    """Where discriminators are looked for from `start`: the repo's own, then the user's."""
    from assistant.indexing.index import repo_root

    try:
        root: Path | None = repo_root(start or Path.cwd())
    except UsageError:
        root = None
    return ([discriminator_dir(root)] if root else []) + [discriminator_dir(None)]


def find_discriminator(start: Path | None = None, generator: str | None = None) -> Path | None:
    """The discriminator to use from `start` (default: the working directory): the repo's own, else the
    user's (trained outside a repo, e.g. on MBPP), else None. With `generator` (the model whose candidates it
    ranks), only one trained for that model or for none in particular (see `recorded_generator`)."""
    for directory in _discriminator_bases(start):
        found = find_artifact(directory, generator) if generator else directory
        if found is not None and read_manifest(found) is not None:
            return found
    return None


def planned_generator(config: CondorConfig, sources: dict) -> str | None:
    """The model a discriminator about to be trained will belong to (see :func:`trained_generator`), known before
    training so that it is saved in that model's folder."""
    from assistant.backends.models import resolve

    backbone, _, model = config.backbone.partition(":")
    stats = {"backbone_model": resolve(model or None).name} if backbone == GENERATOR else {}
    return trained_generator(stats, sources)


def trained_generator(stats: dict, sources: dict) -> str | None:
    """The model a discriminator belongs to: the frozen generator it reads, else the model whose candidates it
    learned from (`--from-eval`; None when a run does not say), else none (references and their mutants only)."""
    if stats.get("backbone_model"):
        return stats["backbone_model"]
    models = set(sources.get("eval_models") or [])
    if not sources.get("eval"):
        return NO_GENERATOR
    return models.pop() if len(models) == 1 and None not in models else None


def make_manifest(config: CondorConfig, data: Dataset, stats: dict, held_out: dict | None, sources: dict) -> dict:
    """Config, data provenance and held-out scores of a trained discriminator, and the model it belongs to."""
    return {
        "method": "condor",
        "generator": trained_generator(stats, sources),
        "config": asdict(config),
        "data": {**data.describe(), "sources": sources},
        "stats": stats,
        "held_out": held_out,
        "trained": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _saved_config(manifest: dict) -> CondorConfig:
    """The config a manifest records (fields this version knows), its `generator` backbone naming the model the
    head was trained over, so that a later load reads that one whatever the default has become."""
    config = CondorConfig(
        **{k: v for k, v in manifest.get("config", {}).items() if k in CondorConfig.__dataclass_fields__}
    )
    trained_over = manifest.get("stats", {}).get("backbone_model")
    if config.backbone == GENERATOR and trained_over:
        config = replace(config, backbone=f"{GENERATOR}:{trained_over}")
    return config


# (folder, manifest mtime) → the loaded discriminator.
_LOADED: dict[tuple[str, int], Condor] = {}


class Condor:
    """Condor's trained object: a discriminator, `probabilities(problem, codes)` → p(correct) each, and its manifest
    (config, the data's provenance, held-out scores, and the generator it serves). `save(directory)` /
    `Condor.load(directory)`; on disk the fine-tuned encoder (`encoder/`; none over the frozen generator, which is
    the local model itself), `head.safetensors` and `manifest.json`."""

    method = "condor"
    what = "discriminator"

    def __init__(self, model: Any, manifest: dict, directory: Path | None = None) -> None:
        """`model`, trained (see :func:`train_discriminator`) or loaded from `directory`, and its manifest."""
        self.model, self.manifest, self.directory = model, manifest, directory
        self.config = _saved_config(manifest)

    def save(self, directory: Path) -> dict:
        """Encoder, head, then the manifest, through the artifact store (a reader never sees half of it); the
        manifest as written."""
        from safetensors.torch import save_file

        model = self.model

        def write(folder: Path) -> None:
            if not model.frozen:  # a frozen backbone is the local generator: only the head is the discriminator's
                save_encoder(model.encoder, model.tokenizer, folder)
            head = {k: v.contiguous() for k, v in model.head.state_dict().items()}
            save_file(head, str(folder / "head.safetensors"))

        self.manifest = save_artifact(directory, self.method, write, self.manifest)
        self.directory = directory
        return self.manifest

    @classmethod
    def load(cls, directory: Path, features: Path | None = None) -> Condor:
        """The discriminator saved in `directory`, loaded anew (over the generator its head was trained over);
        none there is a one-line error saying how to train one. `features`: see :func:`make_model`."""
        manifest = load_manifest(directory, cls.method, cls.what, "run `assist train discriminator`")
        model = make_model(_saved_config(manifest), directory, features)
        model.train(False)
        return cls(model, manifest, directory)

    @classmethod
    def locate(cls, start: Path | None = None, generator: str | None = None) -> Condor:
        """The discriminator for `start` and `generator` (see :func:`find_discriminator`), or a UsageError saying
        how to train one (naming the models the ones there were trained for).

        Loaded once per process (until it is retrained): resample and rerank reuse it.
        """
        directory = find_discriminator(start, generator)
        others = [base for base in _discriminator_bases(start) if other_generators(base, generator)]
        if directory is None and generator and others:
            how = f"train one on its candidates: `assist train discriminator --from-eval RUN` (a run of {generator})"
            raise not_trained_for("discriminator", others[0], generator, how)
        if directory is None:
            raise UsageError(
                "no trained discriminator: run `assist train discriminator` (in this repo, or on the MBPP bank: "
                "`assist train discriminator --from-bank mbpp`)",
                setting="discriminator:none",
            )
        key = (str(directory), (directory / "manifest.json").stat().st_mtime_ns)
        if key not in _LOADED:
            _LOADED[key] = cls.load(directory)
        return _LOADED[key]

    def probabilities(self, problem: str, codes: Sequence[str]) -> list[float]:
        """p(correct) for each code, given the problem statement."""
        from assistant.methods.condor.data import PROBLEM_CHARS

        texts = [(problem[:PROBLEM_CHARS], code) for code in codes]
        return [float(p) for p in _predict(self.model, texts, self.config.max_length)]

    def describe(self) -> str:
        data = self.manifest.get("data", {})
        return f"Condor ({self.config.backbone}, {data.get('programs', '?')} programs, {self.directory})"


def summary_line(manifest: dict) -> str:
    """One line about a trained discriminator, for `assist train discriminator` and `--explain`."""
    data = manifest.get("data", {})
    held = (manifest.get("held_out") or {}).get("pairs") or {}
    scores = f"; held-out pairs P/R/F1 {held['precision']:.2f}/{held['recall']:.2f}/{held['f1']:.2f}" if held else ""
    return (
        f"{data.get('programs')} programs ({data.get('correct')} correct), {data.get('partial_fixes')} partial fixes, "
        f"{data.get('pairs_cc')} C-C and {data.get('pairs_ec')} E-C pairs{scores}"
    )


def verification_cache():  # -> JsonlCache
    """Test outcomes of mutants and partial fixes, keyed by content: shared by every training run."""
    from assistant.cache import JsonlCache

    return JsonlCache(cache_dir() / "condor" / "verified.jsonl")


def train_and_save(
    problems: Sequence,
    config: CondorConfig,
    directory: Path,
    *,
    holdout: float = 0.2,
    mutants: int = 4,
    sources: dict | None = None,
    progress: Progress | None = None,
) -> dict:
    """Build the data, train on all but a held-out share of the problems, score the held-out part, save.

    Returns the manifest written beside the model (config, data counts and provenance, held-out P/R/F1).
    """
    from assistant.methods.condor.data import build_dataset, fingerprint

    if not problems:
        raise UsageError("no problems to train the discriminator on")
    if not 0 <= holdout < 1:
        raise UsageError("holdout must be at least 0 and below 1", setting="holdout:range")
    data = build_dataset(
        problems, mutants_per_program=mutants, seed=config.seed, cache=verification_cache(), progress=progress
    )
    train, held = data.split(holdout, config.seed)
    model, stats = train_discriminator(train, config, progress)
    scores = evaluate_discriminator(model, held, config) if held.programs else None
    provenance = {**(sources or {}), "holdout": holdout, "problems_fingerprint": fingerprint(problems)}
    manifest = make_manifest(config, data, stats, scores, provenance)
    Condor(model, manifest).save(directory)
    return manifest
