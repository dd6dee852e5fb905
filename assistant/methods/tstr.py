"""TST^R (target similarity tuning): a small MLP over frozen requirement embeddings, trained so that
requirement similarity predicts code similarity (`../shared/docs/methods.md`, section 2).

    S_m(u1, u2) = cos(t(m(u1)), t(m(u2)))      m frozen (the default encoder, or an embeddings endpoint)
    t = Linear(512) ∘ tanh ∘ Linear(512) ∘ Dropout(0.3)      loss = (S_m − S_c)²

S_c is the edit similarity of the two programs with identifiers and constants masked (:mod:`assistant.code.codesim`).
Pairs are chosen near the decision boundary: for each example, the λk most code-similar others, then (after
skipping λs) the λk most *text*-similar of the rest — similar words, different code: what must be unlearned.
It trains in seconds on cached embeddings, so the paper's settings are the defaults.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from assistant.backends.embeddings import PREFIX, EndpointEncoder, load_embedder
from assistant.backends.encoder import dot_scores
from assistant.code.codesim import similarity_matrix
from assistant.code.examples import Example
from assistant.config import remember_endpoint, remembered_endpoint
from assistant.core.retrieve import Exclude, Hit, top_rows
from assistant.errors import ModelError, UsageError
from assistant.indexing.index import Index, TextEncoder, embedding_text
from assistant.methods.artifacts import (
    NO_GENERATOR,
    artifact_dir,
    cached_vectors,
    describe_pool,
    load_manifest,
    read_manifest,
    save_artifact,
)
from assistant.methods.losses import similarity_regression
from assistant.progress import Progress


@dataclass(frozen=True)
class TstrConfig:
    """Training settings (the paper's: 512 hidden units, input dropout 0.3, λk = λs = 4)."""

    hidden: int = 512
    dropout: float = 0.3
    lambda_k: int = 4
    lambda_s: int = 4
    epochs: int = 60
    lr: float = 1e-3
    batch: int = 256
    seed: int = 0


def boundary_pairs(code_sim: np.ndarray, text_sim: np.ndarray, lambda_k: int, lambda_s: int) -> list[tuple[int, int]]:
    """For each row i: the λk most code-similar j, then skip λs, then the λk most text-similar of the rest."""
    pairs: list[tuple[int, int]] = []
    count = code_sim.shape[0]
    for i in range(count):
        order = [int(j) for j in np.argsort(-code_sim[i], kind="stable") if j != i]
        close = order[:lambda_k]
        rest = order[lambda_k + lambda_s :]
        if rest:
            rest_arr = np.asarray(rest)
            confusing = rest_arr[np.argsort(-text_sim[i, rest_arr], kind="stable")[:lambda_k]].tolist()
        else:
            confusing = []
        pairs.extend((i, j) for j in close + confusing)
    return pairs


def _network(dim: int, config: TstrConfig):  # -> torch.nn.Module
    import torch

    return torch.nn.Sequential(
        torch.nn.Dropout(config.dropout),
        torch.nn.Linear(dim, config.hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(config.hidden, config.hidden),
    )


class Tstr:
    """TST^R's trained object: a transform, `transform(vectors)`, that maps frozen embeddings to the tuned space
    (unit vectors), and its manifest (`generator` none: no generator enters training). `save(directory)` /
    `Tstr.load(directory)`; on disk `tstr.safetensors` and `manifest.json`."""

    method = "tstr"
    what = "TST^R model"

    def __init__(self, network, config: TstrConfig, manifest: dict) -> None:
        self.network = network.eval()
        self.config = config
        self.manifest = manifest

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            out = self.network(torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32)))
            out = torch.nn.functional.normalize(out, dim=-1)
        return out.numpy()

    def save(self, directory: Path) -> dict:
        """Write the network's weights, then the manifest, into `directory`; the manifest as written."""
        from safetensors.torch import save_file

        def write(folder: Path) -> None:
            save_file(self.network.state_dict(), str(folder / "tstr.safetensors"))

        self.manifest = save_artifact(directory, self.method, write, self.manifest)
        return self.manifest

    @classmethod
    def load(cls, directory: Path) -> Tstr:
        """The transform saved in `directory`; none there is a one-line error saying how to train one."""
        from safetensors.torch import load_file

        manifest = load_manifest(directory, cls.method, cls.what, "run `assist train retriever tstr`")
        config = TstrConfig(**manifest["config"])
        network = _network(int(manifest["input_dim"]), config)
        network.load_state_dict(load_file(str(directory / "tstr.safetensors")))
        return cls(network, config, manifest)


def train_tstr(
    examples: Sequence[Example],
    vectors: np.ndarray,
    *,
    embedder: str,
    pool: str,
    config: TstrConfig | None = None,
    progress: Progress | None = None,
) -> tuple[Tstr, dict]:
    """Train on a pool's frozen requirement embeddings (`vectors`, unit rows aligned with `examples`).

    Returns the model and training statistics (pairs, loss before and after, seconds).
    """
    import torch

    config = config or TstrConfig()
    report = progress or (lambda stage, done, total: None)
    if len(examples) < config.lambda_k + config.lambda_s + 2:
        raise UsageError(f"TST^R needs at least {config.lambda_k + config.lambda_s + 2} examples, got {len(examples)}")
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    code_sim = similarity_matrix([e.code for e in examples])
    text_sim = vectors @ vectors.T
    pairs = boundary_pairs(code_sim, text_sim, config.lambda_k, config.lambda_s)
    left = torch.tensor([i for i, _ in pairs])
    right = torch.tensor([j for _, j in pairs])
    target = torch.from_numpy(code_sim[left.numpy(), right.numpy()])
    inputs = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    network = _network(inputs.shape[1], config)
    optimizer = torch.optim.Adam(network.parameters(), lr=config.lr)

    def pair_loss(rows: torch.Tensor) -> torch.Tensor:
        a = torch.nn.functional.normalize(network(inputs[left[rows]]), dim=-1)
        b = torch.nn.functional.normalize(network(inputs[right[rows]]), dim=-1)
        return similarity_regression(a, b, target[rows])

    every = torch.arange(len(pairs))
    network.eval()
    with torch.no_grad():
        before = float(pair_loss(every))
    network.train()
    generator = torch.Generator().manual_seed(config.seed)
    for epoch in range(config.epochs):
        for batch in torch.randperm(len(pairs), generator=generator).split(config.batch):
            optimizer.zero_grad()
            loss = pair_loss(batch)
            loss.backward()
            optimizer.step()
        report("train", epoch + 1, config.epochs)
    network.eval()
    with torch.no_grad():
        after = float(pair_loss(every))
    stats = {"pairs": len(pairs), "loss_before": before, "loss_after": after, "seconds": time.perf_counter() - started}
    manifest = {
        "method": "tstr",
        "config": asdict(config),
        "input_dim": int(inputs.shape[1]),
        "generator": NO_GENERATOR,  # no generator enters training: it serves every model
        "embedder": embedder,
        "pool": pool,
        "examples": len(examples),
        "trained": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "stats": stats,
    }
    return Tstr(network, config, manifest), stats


def frozen_vectors(
    index: Index, embedder: TextEncoder, directory: Path, progress: Progress | None = None
) -> np.ndarray:
    """The pool's frozen requirement embeddings: the index's own when it was embedded by `embedder`, else
    embedded by it once and cached beside the trained model (an endpoint is called only for new examples)."""
    if index.encoder_name == embedder.name:
        return np.asarray(index.vectors, dtype=np.float32)
    texts = [embedding_text(e) for e in index.examples]
    return cached_vectors(directory / "frozen_vectors.npz", texts, embedder, progress)


def _embedder_for(manifest: dict, encoder: TextEncoder, directory: Path) -> TextEncoder:
    """What embeds queries for a trained model: the same embedder (and server) that training used.

    The manifest lives in a folder a repo can ship (`.assist/retrievers/tstr/`), so the server it names is
    believed only when this user trained that folder against it on this machine (recorded in the user's
    trust file); anything else would let a repo send queries and the API key wherever it likes.
    """
    name = manifest.get("embedder")
    if name == encoder.name:
        return encoder
    if isinstance(name, str) and name.startswith(PREFIX):
        url = manifest.get("embedder_url")
        # Training always records its server; a manifest without one would fall back to the user's own
        # endpoint (and key), which the repo did not earn either.
        if not isinstance(url, str) or remembered_endpoint(directory) != (url, name):
            named = "an embeddings endpoint but no server"
            if isinstance(url, str):
                named = f"the embeddings server {url} ({name})"
            raise ModelError(
                f"the TST^R model in {directory} names {named}, which you did not train it "
                "against on this machine; retrain it with `assist train retriever tstr`"
            )
        return load_embedder(name, base_url=url)
    raise UsageError(f"the TST^R model was trained on {name} embeddings, not {encoder.name}; retrain it")


def train_for_index(
    index: Index, embedder: TextEncoder, config: TstrConfig | None = None, progress: Progress | None = None
) -> tuple[Path, dict]:
    """Train TST^R on an index's examples, embedded by `embedder` (the index's encoder, or an endpoint), and
    save it where retrieval finds it."""
    directory = artifact_dir(index, "tstr")
    # Training embeds the pool afresh: a server may have changed the model behind the same name.
    (directory / "frozen_vectors.npz").unlink(missing_ok=True)
    model, stats = train_tstr(
        index.examples,
        frozen_vectors(index, embedder, directory, progress),
        embedder=embedder.name,
        pool=describe_pool(index),
        config=config,
        progress=progress,
    )
    if isinstance(embedder, EndpointEncoder):
        model.manifest["embedder_url"] = embedder.base_url  # queries must go to the same server
    model.save(directory)
    if isinstance(embedder, EndpointEncoder):
        remember_endpoint(directory, embedder.base_url, embedder.name)
    return directory, stats


class TstrRetriever:
    """Cosine top-k in the tuned space: the pool's frozen vectors and the query's, both transformed."""

    name = "tstr"

    def __init__(self, index: Index, embedder: TextEncoder, model: Tstr, frozen: np.ndarray) -> None:
        if model.manifest.get("embedder") != embedder.name:
            raise UsageError(
                f"the TST^R model was trained on {model.manifest.get('embedder')} embeddings, not {embedder.name}"
            )
        self.index = index
        self.embedder = embedder
        self.model = model
        self.frozen = frozen
        self.pool = model.transform(frozen) if len(index) else np.zeros((0, 1))

    @classmethod
    def for_index(
        cls, index: Index, encoder: TextEncoder, folder: Path | None = None, progress: Progress | None = None
    ) -> TstrRetriever:
        """The model trained for this index (in `folder`, default its artifact folder); `encoder` embeds queries
        unless training used another embedder. The pool's first embedding is reported to `progress`."""
        directory = folder or artifact_dir(index, "tstr")
        if read_manifest(directory) is None:
            raise UsageError(
                f"no TST^R retriever trained for the {describe_pool(index)}; run `assist train retriever tstr`"
            )
        model = Tstr.load(directory)
        embedder = _embedder_for(model.manifest, encoder, directory)
        return cls(index, embedder, model, frozen_vectors(index, embedder, directory, progress))

    def search(self, query: str, k: int, exclude: Exclude | None = None) -> list[Hit]:
        if not len(self.index):
            return []
        scores = dot_scores(self.pool, self.model.transform(self.embedder.encode([query]))[0])
        return [
            Hit(self.index.examples[row], float(scores[row]), self.name, f"tuned cosine {scores[row]:.3f}")
            for row in top_rows(scores, self.index.examples, k, exclude)
        ]
